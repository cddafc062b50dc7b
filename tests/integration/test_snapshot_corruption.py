"""Bad snapshot files, end to end: every truncation, single bit flips,
foreign files and crafted out-of-range fields with valid checksums are refused
by --check-snapshot and at start, named and left untouched. The format is
proto/snapshot.md.
"""

import os
import random
import tempfile
import unittest
from concurrent.futures import ThreadPoolExecutor

import redis

from formats import build_snapshot, parse_snapshot
from harness import (DUMP, Server, TempDirCase, check_snapshot, read_bytes, temp_files,
                     write_bytes)

SANITIZED = os.environ.get("BLOOMERY_SANITIZED") == "1"


class Corruption(TempDirCase):
    """Every damaged or foreign file is refused, named, and left untouched."""

    @classmethod
    def setUpClass(cls):
        cls._tmp = tempfile.TemporaryDirectory(prefix="bloomery-corrupt-")
        cls.base_dir = cls._tmp.name
        server = Server(data_dir=cls.base_dir)
        try:
            server.start()
            r = server.client()
            r.execute_command("BF.RESERVE", "alpha", 0.1, 4)
            r.execute_command("BF.MADD", "alpha", *range(20))
            r.execute_command("BF.RESERVE", "beta", 0.01, 8, "NONSCALING")
            r.execute_command("BF.MADD", "beta", "x", "y")
            r.execute_command("BF.ADD", b"gam\x00ma", "z")
            r.expire(b"gam\x00ma", 100000)
            r.execute_command("BF.RESERVE", "delta", 0.2, 2)
            assert r.save()
            r.close()
            assert server.terminate() == 0
        finally:
            server.stop()
        cls.good = read_bytes(os.path.join(cls.base_dir, DUMP))
        cls.parsed = parse_snapshot(cls.good)

    @classmethod
    def tearDownClass(cls):
        cls._tmp.cleanup()

    def assert_refuses(self, data_dir, path, reason_words=(), extra=()):
        """The server must exit non-zero quickly, name the file and leave it intact."""
        before = read_bytes(path) if os.path.isfile(path) else None
        server = Server(*extra, data_dir=data_dir)
        self.addCleanup(server.cleanup)
        # Bounded waits, not a time limit: a refusal that hangs fails here.
        server.start(timeout=60, expect_failure=True)
        code = server.wait(60)
        log = server.log()
        self.assertNotEqual(code, 0, "server started on a bad snapshot:\n" + log)
        self.assertGreater(code, 0, "server crashed (signal %s) on a bad snapshot:\n%s" % (-code, log))
        self.assertIn(path, log, "log does not name the file")
        lowered = log.lower()
        for word in reason_words:
            self.assertIn(word.lower(), lowered, "log lacks the reason %r:\n%s" % (word, log))
        if before is not None:
            self.assertEqual(read_bytes(path), before, "bad snapshot was modified")
        self.assertEqual(temp_files(data_dir), [])
        return log

    def variant_path(self, data, name="variant"):
        d = self.make_dir()
        path = os.path.join(d, name)
        write_bytes(path, data)
        return path

    def check_bad(self, cases, workers=2):
        """cases: [(label, bytes, required words)]; every one must be refused by --check-snapshot."""
        d = self.make_dir()

        def run(index_case):
            index, (label, data, words) = index_case
            path = os.path.join(d, "case-%d.bloomery" % index)
            write_bytes(path, data)
            code, text = check_snapshot(path)
            problems = []
            if code != 1:
                problems.append("%s: --check-snapshot returned %s: %s" % (label, code, text[-300:]))
            elif path not in text:
                problems.append("%s: message does not name the file: %s" % (label, text[-300:]))
            else:
                for word in words:
                    if word.lower() not in text.lower():
                        problems.append("%s: message lacks %r: %s" % (label, word, text[-300:]))
            if read_bytes(path) != data:
                problems.append("%s: file modified" % label)
            os.unlink(path)
            return problems

        with ThreadPoolExecutor(max_workers=workers) as pool:
            problems = [p for ps in pool.map(run, enumerate(cases)) for p in ps]
        self.assertEqual(problems[:20], [], "%d of %d cases accepted or badly reported"
                         % (len(problems), len(cases)))

    def test_good_file_is_described(self):
        path = self.variant_path(self.good)
        code, text = check_snapshot(path)
        self.assertEqual(code, 0, text)
        for word in ("alpha", "beta", "delta", "version", "4", "scheme bloomery"):
            self.assertIn(word, text)
        self.assertEqual(read_bytes(path), self.good)
        header, records, end = self.parsed
        self.assertEqual(len(records), 4)
        self.assertGreater(len([r for r in records if r["key"] == b"alpha"][0]["layers"]), 1)
        # And the server loads it.
        d = os.path.dirname(path)
        os.rename(path, os.path.join(d, DUMP))
        s = self.server(d)
        self.assertEqual(s.client().dbsize(), 4)

    def test_truncation_at_every_offset(self):
        self.assertLess(len(self.good), 4000)
        n = len(self.good)
        # A sanitized build (each check a slow process start) takes every
        # offset of the header and the end record and every fourth between.
        offsets = [i for i in range(n) if not SANITIZED or i < 64 or i >= n - 32 or i % 4 == 0]
        cases = [("truncated at %d" % i, self.good[:i], ()) for i in offsets]
        self.check_bad(cases)

    def test_single_bit_flips(self):
        rng = random.Random(1234)
        n = len(self.good)
        positions = list(range(0, 20))  # the whole header
        positions += [n - 17 + i for i in range(17)]  # the end record
        header, records, end = self.parsed
        for rec in records:
            positions += list(range(rec["offset"], rec["offset"] + 5 + len(rec["key"]) + 39))
            positions += list(range(rec["end"] - 8, rec["end"]))
            for layer in rec["layers"]:
                positions += list(range(layer["offset"], layer["offset"] + 37, 3))
                positions.append(layer["offset"] + 37 + rng.randrange(layer["bits"] // 8))
        positions = sorted(set(p for p in positions if 0 <= p < n))
        cases = []
        for i, p in enumerate(positions):
            bit = (p * 5 + i) % 8
            data = bytearray(self.good)
            data[p] ^= 1 << bit
            cases.append(("bit %d of byte %d" % (bit, p), bytes(data), ()))
        self.assertGreater(len(cases), 150)
        self.check_bad(cases)

    def test_foreign_files(self):
        rng = random.Random(99)
        cases = [
            ("empty file", b"", ("not a bloomery snapshot",)),
            ("7 bytes", b"BLOOMER", ("not a bloomery snapshot",)),
            ("text", b"hello, this is a text file\nwith lines\n" * 10, ("not a bloomery snapshot",)),
            ("random", bytes(rng.randrange(256) for _ in range(5000)), ("not a bloomery snapshot",)),
            ("redis rdb", b"REDIS0011\xfa\tredis-ver\x057.0.0\xff" + b"\x00" * 8,
             ("not a bloomery snapshot",)),
            ("magic only", b"BLOOMERY", ()),
            ("header only", self.good[:20], ("truncated",)),
            ("two files", self.good + self.good, ("trailing",)),
            ("one trailing byte", self.good + b"\x00", ("trailing",)),
            ("zeroed", b"\x00" * len(self.good), ("not a bloomery snapshot",)),
        ]
        self.check_bad(cases)

    def mutated(self, mutate, **build):
        header, records, end = parse_snapshot(self.good)
        header = dict(header)
        records = [dict(r, layers=[dict(l) for l in r["layers"]]) for r in records]
        mutate(header, records)
        return build_snapshot(header, records, **build)

    def test_crafted_out_of_range_fields_with_valid_checksums(self):
        def rec(records, key):
            return [r for r in records if r["key"] == key][0]

        def set_field(key, field, value, layer=None):
            def mutate(header, records):
                target = rec(records, key)
                if layer is not None:
                    target = target["layers"][layer]
                target[field] = value
            return mutate

        def dup(header, records):
            records.append(dict(rec(records, b"beta")))

        def bits_not_multiple(header, records):
            layer = rec(records, b"beta")["layers"][0]
            layer["bits"] = layer["bits"] - 32
            layer["words"] = layer["words"][:layer["bits"] // 8]

        def zero_bits(header, records):
            layer = rec(records, b"beta")["layers"][0]
            layer["bits"] = 0
            layer["words"] = b""

        def nonscaling_two_layers(header, records):
            a = rec(records, b"alpha")
            a["nonscaling"] = 1

        def no_layers(header, records):
            rec(records, b"delta")["layers"] = []

        def unknown_type(header, records):
            rec(records, b"delta")["type"] = 2

        self.assertEqual(self.mutated(lambda h, r: None), self.good)
        nan = float("nan")
        cases = [
            ("version 6", self.mutated(lambda h, r: h.__setitem__("version", 6)), ("version 6",)),
            ("version 0", self.mutated(lambda h, r: h.__setitem__("version", 0)), ("version 0",)),
            ("filter layout 3", self.mutated(set_field(b"beta", "layout", 3)), ("layout",)),
            ("layer layout 2", self.mutated(set_field(b"alpha", "layout", 2, 1)), ("layout",)),
            ("filter scheme 2", self.mutated(set_field(b"beta", "scheme", 2)), ("hash scheme",)),
            ("layer layout 9", self.mutated(set_field(b"alpha", "layout", 9, 1)), ("layout",)),
            ("duplicate key", self.mutated(dup), ("duplicate",)),
            ("hashes 0", self.mutated(set_field(b"beta", "hashes", 0, 0)), ()),
            ("hashes 129", self.mutated(set_field(b"beta", "hashes", 129, 0)), ()),
            ("expansion 32769 on a scaling filter",
             self.mutated(set_field(b"alpha", "expansion", 32769)), ()),
            ("layer capacity 2^48 + 1",
             self.mutated(set_field(b"alpha", "capacity", 2**48 + 1, 1)), ()),
            ("bits not a multiple of 64", self.mutated(bits_not_multiple), ()),
            ("bits 0", self.mutated(zero_bits), ()),
            ("layer count 0", self.mutated(no_layers), ()),
            ("nonscaling with 2 layers", self.mutated(nonscaling_two_layers), ()),
            ("nonscaling byte 2", self.mutated(set_field(b"beta", "nonscaling", 2)), ()),
            ("error rate 0", self.mutated(set_field(b"beta", "error_rate", 0.0)), ()),
            ("error rate 1", self.mutated(set_field(b"beta", "error_rate", 1.0)), ()),
            ("error rate nan", self.mutated(set_field(b"beta", "error_rate", nan)), ()),
            ("error rate -0.5", self.mutated(set_field(b"beta", "error_rate", -0.5)), ()),
            ("layer error rate nan", self.mutated(set_field(b"beta", "error_rate", nan, 0)), ()),
            ("layer error rate 1", self.mutated(set_field(b"alpha", "error_rate", 1.0, 1)), ()),
            ("capacity 0", self.mutated(set_field(b"beta", "capacity", 0)), ()),
            ("layer capacity 0", self.mutated(set_field(b"alpha", "capacity", 0, 1)), ()),
            ("expansion 0 on a scaling filter", self.mutated(set_field(b"alpha", "expansion", 0)), ()),
            ("negative deadline", self.mutated(set_field(b"delta", "expire", -5)), ()),
            ("unknown record type", self.mutated(unknown_type), ()),
            ("record count too high", self.mutated(lambda h, r: None, count=5), ()),
            ("record count too low", self.mutated(lambda h, r: None, count=3), ()),
            ("trailing garbage", self.mutated(lambda h, r: None, trailing=b"x"), ("trailing",)),
            ("no end record", self.mutated(lambda h, r: None, end=False), ("truncated",)),
        ]
        self.check_bad(cases)

    def test_server_refuses_a_sample_of_bad_files(self):
        rng = random.Random(5)
        n = len(self.good)
        header, records, end = self.parsed
        cases = [
            ("empty", b"", ("not a bloomery snapshot",)),
            ("text", b"just some text\n", ("not a bloomery snapshot",)),
            ("random", bytes(rng.randrange(256) for _ in range(3000)), ()),
            ("version 6", self.mutated(lambda h, r: h.__setitem__("version", 6)), ("version 6",)),
            ("truncated header", self.good[:13], ()),
            ("truncated end record", self.good[:n - 3], ("truncated",)),
            ("truncated in a key", self.good[:records[1]["offset"] + 7], ()),
            ("truncated in bits", self.good[:records[0]["layers"][0]["offset"] + 40], ()),
            ("trailing garbage", self.good + b"\n", ("trailing",)),
            ("duplicate key", self.mutated(lambda h, r: r.append(dict(r[0]))), ("duplicate",)),
        ]
        for label, p in (("flip in magic", 3), ("flip in version", 8), ("flip in a key", records[0]["offset"] + 6),
                         ("flip in bits", records[0]["layers"][0]["offset"] + 37),
                         ("flip in record checksum", records[2]["end"] - 2), ("flip in file checksum", n - 1)):
            data = bytearray(self.good)
            data[p] ^= 0x10
            cases.append((label, bytes(data), ()))
        for label, data, words in cases:
            with self.subTest(label):
                d = self.make_dir()
                path = os.path.join(d, DUMP)
                write_bytes(path, data)
                self.assert_refuses(d, path, words)

    def test_server_refuses_a_directory_in_place_of_the_file(self):
        d = self.make_dir()
        path = os.path.join(d, DUMP)
        os.mkdir(path)
        self.assert_refuses(d, path)
        self.assertTrue(os.path.isdir(path))

    def test_server_restarted_with_a_lower_max_filter_bytes_still_loads_its_data(self):
        # --max-filter-bytes bounds what clients may create; data the server
        # saved must load whatever the limit is now (the file's own size
        # bounds what a hostile file can make the loader allocate).
        d = self.make_dir()
        big = Server(data_dir=d)
        self.addCleanup(big.cleanup)
        big.start()
        r = big.client()
        r.execute_command("BF.RESERVE", "big", 0.01, 100000)  # ~117 KiB layer
        r.execute_command("BF.ADD", "big", "kept")
        self.assertTrue(r.save())
        big.terminate()
        s = self.server(d, "--max-filter-bytes", "16kb")
        c = s.client()
        self.assertEqual(c.execute_command("BF.EXISTS", "big", "kept"), 1)
        # ... while new filters over the limit are refused.
        with self.assertRaises(redis.ResponseError):
            c.execute_command("BF.RESERVE", "big2", 0.01, 100000)


if __name__ == "__main__":
    unittest.main()
