"""Bounds and limits: whatever the server accepts it saves, loads, dumps and
restores; --max-filter-bytes bounds whole filters; arguments obey the
multibulk and query buffer limits; a failing snapshot answers -MISCONF;
snapshots are consistent while keys are renamed, deleted, re-created and
flushed. --maxmemory is in test_maxmemory.py.

Each of the tests of a named bound here failed on the code before that bound.
"""

import math
import os
import random
import shutil
import tempfile
import threading
import unittest

import redis

from formats import build_dump_header
from harness import Server, add_range, check_snapshot, rss_bytes, scandump, wait_until
from test_protocol import Err, RespConnection, encode

MAX_LAYERS = 64
MAX_CAPACITY = 2 ** 48
MIN_ERROR_RATE = 1e-15
TOO_LARGE = "ERR filter would exceed max-filter-bytes (see CONFIG GET max-filter-bytes)"
OOM = "OOM command not allowed when used memory > 'maxmemory'."




def snapshot_keys(path):
    code, text = check_snapshot(path)
    assert code == 0, text
    keys = set()
    for line in text.splitlines():
        if line.startswith("key '"):
            keys.add(line[5:line.index("'", 5)])
    return keys


class LimitsTestCase(unittest.TestCase):
    def start(self, *args, data_dir=None, save='""', threads=2):
        server = Server(*args, data_dir=data_dir, save=save, threads=threads)
        self.addCleanup(server.cleanup)
        server.start()
        return server

    def raw(self, server):
        c = RespConnection(server.port, timeout=60)
        self.addCleanup(c.close)
        return c

    def assertErrorReply(self, reply, expected):
        self.assertIsInstance(reply, Err, reply)
        self.assertEqual(reply.decode(), expected)

    def make_dir(self):
        d = tempfile.mkdtemp(prefix="bloomery-limits-")
        self.addCleanup(shutil.rmtree, d, True)
        return d


# ---------------------------------------------------------------------------
# A filter the server accepts must survive a restart.

class FilterBounds(LimitsTestCase):
    def test_error_rate_below_the_minimum_is_refused_at_the_command(self):
        s = self.start()
        c = self.raw(s)
        self.assertErrorReply(c.call("BF.RESERVE", "e", "1e-300", "100"),
                              "ERR error rate should be at least 1e-15")
        self.assertErrorReply(c.call("BF.INSERT", "e", "ERROR", "1e-16", "ITEMS", "a"),
                              "ERR error rate should be at least 1e-15")
        self.assertEqual(c.call("EXISTS", "e"), 0)
        self.assertEqual(c.call("BF.RESERVE", "e", "1e-15", "100"), b"OK")
        # RedisBloom's own texts for what is outside (0, 1).
        self.assertErrorReply(c.call("BF.RESERVE", "f", "0", "100"),
                              "ERR (0 < error rate range < 1) ")
        self.assertErrorReply(c.call("BF.RESERVE", "f", "1", "100"),
                              "ERR (0 < error rate range < 1) ")
        self.assertErrorReply(c.call("BF.RESERVE", "f", "0.01", str(MAX_CAPACITY + 1)),
                              "ERR capacity should be at most 281474976710656 (2^48)")
        self.assertErrorReply(c.call("BF.RESERVE", "f", "0.01", "10", "EXPANSION", "32769"),
                              "ERR expansion should be at most 32768")

    def test_deepest_scaling_filters_save_load_dump_and_restore(self):
        d = self.make_dir()
        s = self.start(data_dir=d)
        r = s.client()
        added = {}
        for key, rate in (("lay", "0.01"), ("tiny", "1e-15")):
            r.execute_command("BF.RESERVE", key, rate, 1, "EXPANSION", 1)
            added[key] = []
            for i in range(200):
                try:
                    if r.execute_command("BF.ADD", key, "item-%d" % i) == 1:
                        added[key].append("item-%d" % i)
                except redis.ResponseError as e:
                    self.assertIn("maximum number of sub-filters reached", str(e))
                    break
            else:
                self.fail("%s never stopped growing" % key)
            self.assertEqual(r.execute_command("BF.INFO", key, "FILTERS"), [MAX_LAYERS])
        before = {k: (r.execute_command("BF.INFO", k), scandump(r, k)) for k in added}
        self.assertTrue(r.save())
        s.terminate()
        s2 = self.start(data_dir=d)
        r2 = s2.client()
        for key, items in added.items():
            self.assertEqual(r2.execute_command("BF.INFO", key), before[key][0])
            self.assertEqual(scandump(r2, key), before[key][1])
            self.assertEqual(r2.execute_command("BF.MEXISTS", key, *items), [1] * len(items))
            # What SCANDUMP produced, LOADCHUNK restores.
            for it, data in before[key][1]:
                self.assertEqual(r2.execute_command("BF.LOADCHUNK", "copy-" + key, it, data), b"OK")
            self.assertEqual(scandump(r2, "copy-" + key), before[key][1])

    def test_random_parameters_either_fail_at_the_command_or_survive_a_restart(self):
        # A property test: random valid and invalid parameters through every
        # creating command; what was accepted must come back identical after
        # SAVE and a restart, and must restore through SCANDUMP/LOADCHUNK.
        seed = int(os.environ.get("BLOOMERY_PROPERTY_SEED", random.randrange(1 << 30)))
        rng = random.Random(seed)
        max_bytes = 8 * 1024 * 1024
        d = self.make_dir()
        s = self.start("--max-filter-bytes", str(max_bytes), data_dir=d)
        r = s.client()
        c = self.raw(s)

        # Each field is valid three times in four, so about 40 % of the cases
        # create a filter and the rest probe every way of being refused.
        def pick(valid_choices, invalid_choices):
            return rng.choice(valid_choices if rng.random() < 0.75 else invalid_choices)

        def pick_rate():
            return pick(["%.17g" % (10 ** rng.uniform(-14.9, -0.001)), "1e-15", "0.5",
                         "0.999999", "0.01", "%.17g" % rng.uniform(0.0001, 0.3)],
                        ["%.17g" % (10 ** rng.uniform(-300, -15.01)), "9.99e-16", "1e-300", "0",
                         "1", "-0.5", "1.5", "nan", "inf", "abc", ""])

        def pick_capacity():
            return pick([str(rng.randint(1, 5000)), str(rng.randint(1, 500000)), "1",
                         str(MAX_CAPACITY)],
                        ["0", "-1", str(MAX_CAPACITY + 1), str(2 ** 63 - 1), "x", "1.5"])

        def pick_expansion():
            return pick([None, None, "1", "2", "3", "32768", str(rng.randint(1, 40))],
                        ["0", "32769", "-2", "two"])

        def valid(command, rate, capacity, expansion, nonscaling):
            try:
                p = float(rate)
                n = int(capacity)
            except ValueError:
                return False
            if not (MIN_ERROR_RATE <= p < 1) or math.isnan(p):
                return False
            if not 1 <= n <= MAX_CAPACITY:
                return False
            if expansion is not None:
                # BF.RESERVE refuses an expansion beside NONSCALING; BF.INSERT
                # takes it (RedisBloom's two readings).
                if nonscaling and command == "BF.RESERVE":
                    return False
                try:
                    e = int(expansion)
                except ValueError:
                    return False
                if not 1 <= e <= 32768:
                    return False
            return True

        def first_layer_bytes(rate, capacity, nonscaling):
            p = float(rate) if nonscaling else float(rate) / 2
            bits = math.ceil(int(capacity) * -math.log(p) / math.log(2) ** 2)
            return (bits + 63) // 64 * 64 // 8

        created = {}
        for case in range(200):
            key = "k%d" % case
            rate, capacity, expansion = pick_rate(), pick_capacity(), pick_expansion()
            nonscaling = rng.random() < 0.2
            if rng.random() < 0.5:
                args = ["BF.RESERVE", key, rate, capacity]
                if expansion is not None:
                    args += ["EXPANSION", expansion]
                if nonscaling:
                    args.append("NONSCALING")
            else:
                args = ["BF.INSERT", key, "CAPACITY", capacity, "ERROR", rate]
                if expansion is not None:
                    args += ["EXPANSION", expansion]
                if nonscaling:
                    args.append("NONSCALING")
                args += ["ITEMS", "first"]
            reply = c.call(*args)
            ok = valid(args[0], rate, capacity, expansion, nonscaling)
            label = "seed %d case %d: %r -> %r" % (seed, case, args, reply)
            if ok:
                size = first_layer_bytes(rate, capacity, nonscaling)
                if abs(size - max_bytes) < max_bytes * 0.01:
                    if isinstance(reply, Err):
                        continue  # too close to the limit to predict the rounding
                elif size > max_bytes:
                    self.assertErrorReply(reply, TOO_LARGE)
                    self.assertEqual(c.call("EXISTS", key), 0, label)
                    continue
                self.assertNotIsInstance(reply, Err, label)
                items = ["first"] if args[0] == "BF.INSERT" else []
                # Grow small scaling filters past a few layers.
                extra = ["x%d" % i for i in range(rng.choice([0, 10, 300]))]
                if extra:
                    replies = c.call("BF.MADD", key, *extra)
                    items += [x for x, y in zip(extra, replies) if not isinstance(y, Err)]
                created[key] = items
            else:
                self.assertIsInstance(reply, Err, label)
                self.assertEqual(c.call("EXISTS", key), 0, label)
        # Auto-created filters (server defaults) as well.
        for i in range(5):
            items = ["a%d" % j for j in range(1 + i * 150)]
            r.execute_command("BF.MADD", "auto%d" % i, *items)
            created["auto%d" % i] = items
        self.assertGreater(len(created), 20, "seed %d created too few filters" % seed)

        before = {k: (r.execute_command("BF.INFO", k), scandump(r, k)) for k in created}
        self.assertTrue(r.save())
        s.terminate()
        s2 = self.start("--max-filter-bytes", str(max_bytes), data_dir=d)
        r2 = s2.client()
        self.assertEqual(r2.dbsize(), len(created))
        for key, items in created.items():
            label = "seed %d key %s" % (seed, key)
            self.assertEqual(r2.execute_command("BF.INFO", key), before[key][0], label)
            self.assertEqual(scandump(r2, key), before[key][1], label)
            if items:
                self.assertEqual(r2.execute_command("BF.MEXISTS", key, *items), [1] * len(items),
                                 label)
            for it, data in before[key][1]:
                self.assertEqual(r2.execute_command("BF.LOADCHUNK", "copy:" + key, it, data),
                                 b"OK", label)

    def test_loadchunk_refuses_headers_outside_the_bounds(self):
        s = self.start()
        c = self.raw(s)
        layer = (100, 0.005, 1152, 8, 0)
        cases = {
            "expansion 2^32-1": build_dump_header(0.01, 100, 4294967295, False, [layer]),
            "expansion 0": build_dump_header(0.01, 100, 0, False, [layer]),
            "129 hashes": build_dump_header(0.01, 100, 2, False, [(100, 0.005, 1152, 129, 0)]),
            "layer capacity 2^48+1": build_dump_header(0.01, 100, 2, False,
                                                       [(MAX_CAPACITY + 1, 0.005, 1152, 8, 0)]),
            "65 layers": build_dump_header(0.01, 100, 2, False, [layer] * 65),
            "items 2^56+1": build_dump_header(0.01, 100, 2, False,
                                              [(100, 0.005, 1152, 8, 2 ** 56 + 1)]),
        }
        for name, header in cases.items():
            reply = c.call("BF.LOADCHUNK", "bad", 1, header)
            self.assertErrorReply(reply, "ERR invalid dump header")
            self.assertEqual(c.call("EXISTS", "bad"), 0, name)
        # The largest counts the bounds allow still fit BF.INFO's signed
        # integers (they once showed as -1 near 2^64).
        extreme = build_dump_header(0.5, MAX_CAPACITY, 2, False,
                                    [(MAX_CAPACITY, 0.25, 64, 2, 2 ** 56)] * 64)
        self.assertEqual(c.call("BF.LOADCHUNK", "extreme", 1, extreme), b"OK")
        self.assertEqual(c.call("BF.INFO", "extreme", "CAPACITY"), [64 * MAX_CAPACITY])
        self.assertEqual(c.call("BF.INFO", "extreme", "ITEMS"), [64 * 2 ** 56])
        # The same header with valid fields loads.
        self.assertEqual(c.call("BF.LOADCHUNK", "good", 1,
                                build_dump_header(0.01, 100, 2, False, [layer])), b"OK")


# ---------------------------------------------------------------------------
# --max-filter-bytes bounds a whole filter, before allocating.

class WholeFilterLimit(LimitsTestCase):
    def test_loadchunk_header_of_many_layers_is_refused_before_allocating(self):
        s = self.start("--max-filter-bytes", "32mb")
        c = self.raw(s)
        rss_before = rss_bytes(s.process.pid)
        one_mib_layer = (700000, 0.01, 8 * 1024 * 1024, 7, 0)
        header = build_dump_header(0.01, 700000, 1, False, [one_mib_layer] * 64)
        self.assertLess(len(header), 2500)
        self.assertErrorReply(c.call("BF.LOADCHUNK", "huge", 1, header), TOO_LARGE)
        self.assertEqual(c.call("EXISTS", "huge"), 0)
        used = int(s.client().info("memory")["used_memory"])
        self.assertLess(used, 1024 * 1024)
        self.assertLess(rss_bytes(s.process.pid) - rss_before, 8 * 1024 * 1024)
        # 32 layers of 1 MiB are exactly the limit: accepted and counted.
        exact = build_dump_header(0.01, 700000, 1, False, [one_mib_layer] * 32)
        self.assertEqual(c.call("BF.LOADCHUNK", "fits", 1, exact), b"OK")
        used = int(s.client().info("memory")["used_memory"])
        self.assertGreaterEqual(used, 32 * 1024 * 1024)

    def test_reserve_and_growth_count_every_layer(self):
        s = self.start("--max-filter-bytes", "64kb")
        c = self.raw(s)
        # 40,000 items at 0.5 %: 55 KB, under 64 KB.
        self.assertEqual(c.call("BF.RESERVE", "g", "0.01", "40000"), b"OK")
        self.assertErrorReply(c.call("BF.RESERVE", "h", "0.01", "50000"), TOO_LARGE)
        items = ["i%d" % i for i in range(40000)]
        for start in range(0, len(items), 5000):
            replies = c.call("BF.MADD", "g", *items[start:start + 5000])
            self.assertFalse(any(isinstance(x, Err) for x in replies))
        # The next new item needs a second layer: 55 KB + 125 KB > 64 KB.
        replies = c.call("BF.MADD", "g", *["new%d" % i for i in range(1000)])
        self.assertTrue(any(isinstance(x, Err) for x in replies))
        self.assertErrorReply([x for x in replies if isinstance(x, Err)][0], TOO_LARGE)
        self.assertEqual(c.call("BF.INFO", "g", "FILTERS"), [1])
        # Present items still answer, and the filter still saves.
        self.assertEqual(c.call("BF.EXISTS", "g", "i7"), 1)


# ---------------------------------------------------------------------------
# Arguments: inline words obey the multibulk limits; each argument's view
# (16 bytes) counts against the query buffer limit.

class ArgumentLimits(LimitsTestCase):
    def assertRefusedAndClosed(self, server, request, error):
        c = self.raw(server)
        c.send(request)
        data, closed = c.read_all_until_closed(timeout=30)
        self.assertEqual(data, b"-ERR Protocol error: " + error + b"\r\n")
        self.assertTrue(closed)

    def test_inline_words_obey_proto_max_multibulk_len_and_proto_max_bulk_len(self):
        # Inline words are arguments: bounded like multibulk ones, not only
        # by the line's length.
        s = self.start("--proto-max-multibulk-len", "3", "--proto-max-bulk-len", "1mb",
                       "--proto-max-inline-len", "2mb")
        c = self.raw(s)
        self.assertEqual(c.call("ECHO", "x" * (1024 * 1024)), b"x" * (1024 * 1024))
        c.send(b"BF.ADD k a\r\n")
        self.assertEqual(c.read(), 1)
        c.send(b"ECHO " + b"y" * (1024 * 1024) + b"\r\n")
        self.assertEqual(c.read(timeout=30), b"y" * (1024 * 1024))
        self.assertRefusedAndClosed(s, b"BF.MADD k a b\r\n", b"invalid multibulk length")
        self.assertRefusedAndClosed(s, encode("BF.MADD", "k", "a", "b"), b"invalid multibulk length")
        self.assertRefusedAndClosed(s, b"ECHO " + b"y" * (1024 * 1024 + 1) + b"\r\n",
                                    b"invalid bulk length")

    def test_arguments_are_bounded_by_the_query_buffer_limit_at_16_bytes_each(self):
        # 1 MiB holds 65,536 views of 16 bytes: one more argument is refused
        # at the header, before any of it is read, and the request is not run.
        s = self.start("--client-query-buffer-limit", "1mb")
        most = 1024 * 1024 // 16
        c = self.raw(s)
        c.send(b"*%d\r\n$4\r\nECHO\r\n" % most + b"$0\r\n\r\n" * (most - 1))
        self.assertEqual(c.read(timeout=30),
                         Err(b"ERR wrong number of arguments for 'echo' command"))
        self.assertEqual(c.call("PING"), b"PONG")
        self.assertRefusedAndClosed(s, b"*%d\r\n" % (most + 1), b"invalid multibulk length")
        # Before AUTH the smaller limit applies the same way (16 KiB: 1,024).
        s = self.start("--requirepass", "secret", "--unauthenticated-query-buffer-limit", "16kb",
                       "--unauthenticated-max-multibulk-len", "100000")
        c = self.raw(s)
        self.assertEqual(c.call("AUTH", *(["x"] * 1023)), Err(b"ERR syntax error"))
        self.assertRefusedAndClosed(s, b"*1025\r\n", b"unauthenticated multibulk length")


# ---------------------------------------------------------------------------
# -MISCONF while snapshots fail.

class Misconf(LimitsTestCase):
    MISCONF_PREFIX = "MISCONF bloomery is configured to save snapshots"

    def break_snapshots(self, d):
        # A non-empty directory where the snapshot goes: rename() onto it
        # fails even for root, as a full or read-only disk would.
        os.makedirs(os.path.join(d, "dump.bloomery", "blocker"))

    def wait_status(self, client, status, timeout=20):
        wait_until(lambda: client.info("persistence")["rdb_last_bgsave_status"] == status,
                   timeout, "rdb_last_bgsave_status to become " + status, interval=0.05)

    def test_writes_are_refused_until_a_save_succeeds_and_reads_go_on(self):
        d = self.make_dir()
        s = self.start(data_dir=d, save="3600 1")
        r = s.client()
        c = self.raw(s)
        self.assertEqual(c.call("BF.ADD", "k", "before"), 1)
        self.break_snapshots(d)
        self.assertEqual(c.call("BGSAVE"), b"Background saving started")
        self.wait_status(r, "err")
        reply = c.call("BF.ADD", "k", "during")
        self.assertIsInstance(reply, Err)
        self.assertTrue(reply.decode().startswith(self.MISCONF_PREFIX), reply)
        self.assertIsInstance(c.call("DEL", "k"), Err)
        self.assertEqual(c.call("BF.EXISTS", "k", "before"), 1)
        self.assertEqual(c.call("PING"), b"PONG")
        shutil.rmtree(os.path.join(d, "dump.bloomery"))
        self.assertEqual(c.call("SAVE"), b"OK")
        self.assertEqual(c.call("BF.ADD", "k", "after"), 1)

    def test_the_servers_own_retry_lifts_the_refusal_when_space_returns(self):
        d = self.make_dir()
        s = self.start(data_dir=d, save="1 1")
        r = s.client()
        self.break_snapshots(d)
        r.execute_command("BF.ADD", "k", "a")
        self.wait_status(r, "err")
        with self.assertRaises(redis.ResponseError):
            r.execute_command("BF.ADD", "k", "b")
        shutil.rmtree(os.path.join(d, "dump.bloomery"))
        self.wait_status(r, "ok", timeout=30)  # retried every 5 s after a failure
        self.assertEqual(r.execute_command("BF.ADD", "k", "b"), 1)

    def test_stop_writes_on_bgsave_error_no_keeps_accepting_writes(self):
        d = self.make_dir()
        s = self.start("--stop-writes-on-bgsave-error", "no", data_dir=d, save="3600 1")
        r = s.client()
        self.break_snapshots(d)
        r.bgsave()
        self.wait_status(r, "err")
        self.assertEqual(r.execute_command("BF.ADD", "k", "x"), 1)


# ---------------------------------------------------------------------------
# A snapshot holds every key as it was at one instant.

class SnapshotConsistency(LimitsTestCase):
    def test_renames_deletes_recreates_and_flushes_during_saves(self):
        d = self.make_dir()
        s = self.start(data_dir=d, threads=2)
        r = s.client()
        # One 24 MB filter, items in nearly every region of it (a snapshot
        # writes only the regions items touched), makes each save take a
        # while; the other keys are spread over every shard.
        r.execute_command("BF.RESERVE", "big", 0.01, 17000000, "NONSCALING")
        add_range(r, "big", 0, 300000, batch=10000)
        r.execute_command("BF.ADD", "a", "renamed")
        for i in range(200):
            r.execute_command("BF.ADD", "other:%d" % i, "x")
        stop = threading.Event()
        errors = []

        def renamer():
            c = s.client()
            try:
                while not stop.is_set():
                    c.rename("a", "b")
                    c.rename("b", "a")
            except Exception as e:  # surfaced below
                errors.append(e)

        def recreator():
            # Creates seq:0, seq:1, ... in order, then deletes them in the
            # same order: at any instant the keys present are a contiguous
            # range, and so must be those of a snapshot.
            c = s.client()
            try:
                while not stop.is_set():
                    for j in range(40):
                        c.execute_command("BF.ADD", "seq:%d" % j, "x")
                    c.delete(*["seq:%d" % j for j in range(40)])
            except Exception as e:
                errors.append(e)

        threads = [threading.Thread(target=renamer), threading.Thread(target=recreator)]
        for t in threads:
            t.start()
        path = os.path.join(d, "dump.bloomery")
        problems = []
        try:
            for round_ in range(30):
                if round_ % 2:
                    r.execute_command("SAVE")
                else:
                    r.bgsave()
                    wait_until(lambda: r.info("persistence")["rdb_bgsave_in_progress"] != 1, 60,
                               "the background save to finish", interval=0.01)
                keys = snapshot_keys(path)
                if ("a" in keys) == ("b" in keys):
                    problems.append("round %d: a=%s b=%s" % (round_, "a" in keys, "b" in keys))
                seq = sorted(int(k.split(":")[1]) for k in keys if k.startswith("seq:"))
                if seq and seq != list(range(seq[0], seq[0] + len(seq))):
                    problems.append("round %d: seq keys not contiguous: %s" % (round_, seq))
                if "big" not in keys or sum(k.startswith("other:") for k in keys) != 200:
                    problems.append("round %d: lost a key that never changed" % round_)
        finally:
            stop.set()
            for t in threads:
                t.join(timeout=30)
        self.assertEqual(errors, [])
        self.assertEqual(problems, [])

    def test_flushall_during_a_save_is_all_or_nothing(self):
        d = self.make_dir()
        s = self.start(data_dir=d)
        r = s.client()
        # Items in most regions of the 24 MB (a snapshot writes only the
        # regions items touched), so that each save takes a while.
        r.execute_command("BF.RESERVE", "big", 0.01, 17000000, "NONSCALING")
        add_range(r, "big", 0, 100000, batch=10000)
        path = os.path.join(d, "dump.bloomery")
        for round_ in range(10):
            for i in range(100):
                r.execute_command("BF.ADD", "f%d:%d" % (round_, i), "x")
            r.bgsave()
            r.flushall()
            r.execute_command("BF.RESERVE", "big", 0.01, 17000000, "NONSCALING")
            add_range(r, "big", 0, 100000, batch=10000)
            wait_until(lambda: r.info("persistence")["rdb_bgsave_in_progress"] != 1, 60,
                       "the background save to finish", interval=0.01)
            keys = snapshot_keys(path)
            mine = [k for k in keys if k.startswith("f%d:" % round_)]
            self.assertIn(len(mine), (0, 100), "round %d: %d of 100 keys" % (round_, len(mine)))


if __name__ == "__main__":
    unittest.main()
