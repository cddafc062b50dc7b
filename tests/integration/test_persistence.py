"""Snapshots end to end: the real binary, real files, real restarts.

Round trips of every filter kind through SAVE and restart, BGSAVE and INFO
persistence, save points and failures to save (directory replaced by a file,
RLIMIT_FSIZE). The format is proto/snapshot.md. What SIGTERM and SHUTDOWN
save is in test_shutdown.py; refusal of corrupt or foreign snapshot files in
test_snapshot_corruption.py.
"""

import os
import random
import resource
import shutil
import signal
import struct
import time
import unittest

import redis

from formats import build_snapshot, parse_snapshot
from harness import (DUMP, Server, TempDirCase, bgsave, check_snapshot, missing_items,
                     persistence_info, read_bytes, scandump, temp_files, wait_until, write_bytes)


class RoundTrip(TempDirCase):

    def test_every_filter_kind_survives_save_and_restart(self):
        d = self.make_dir()
        s = self.server(d)
        r = s.client()
        rng = random.Random(7)

        r.execute_command("BF.RESERVE", "scalable", 0.01, 50)
        for start in range(0, 500, 50):
            r.execute_command("BF.MADD", "scalable", *["s%d" % i for i in range(start, start + 50)])
        r.execute_command("BF.RESERVE", "wide", 0.001, 20, "EXPANSION", 4)
        r.execute_command("BF.MADD", "wide", *["w%d" % i for i in range(300)])
        r.execute_command("BF.RESERVE", "nonscaling", 0.001, 1000, "NONSCALING")
        r.execute_command("BF.MADD", "nonscaling", *["n%d" % i for i in range(300)])
        r.execute_command("BF.RESERVE", "expiring", 0.01, 100)
        r.execute_command("BF.MADD", "expiring", *["e%d" % i for i in range(50)])
        self.assertEqual(r.expire("expiring", 1000), True)
        r.execute_command("BF.RESERVE", "empty", 0.05, 10)
        binary_keys = [b"\x00bin\r\n\xff key", b"\xe2\x98\x83 snow", b" ", b"\xff" * 300]
        for i, key in enumerate(binary_keys):
            r.execute_command("BF.MADD", key, b"item\x00%d" % i, b"\r\n")
        many = ["many:%d" % i for i in range(400)]
        pipe = r.pipeline(transaction=False)
        for i, key in enumerate(many):
            pipe.execute_command("BF.ADD", key, "m%d" % i)
        pipe.execute()
        r.execute_command("BF.ADD", "short", "x")

        self.assertGreater(r.execute_command("BF.INFO", "scalable", "FILTERS")[0], 2)
        self.assertGreater(r.execute_command("BF.INFO", "wide", "FILTERS")[0], 1)

        present = {
            "scalable": ["s%d" % i for i in range(500)],
            "wide": ["w%d" % i for i in range(300)],
            "nonscaling": ["n%d" % i for i in range(300)],
            "expiring": ["e%d" % i for i in range(50)],
            "empty": [],
        }
        absent = ["absent-%d" % rng.randrange(10 ** 9) for _ in range(2000)]
        kept = list(present) + binary_keys + many

        def state():
            out = {}
            for key in kept:
                items = present.get(key, [])
                out[key] = dict(
                    info=r.execute_command("BF.INFO", key),
                    card=r.execute_command("BF.CARD", key),
                    present=r.execute_command("BF.MEXISTS", key, *items) if items else [],
                    absent=r.execute_command("BF.MEXISTS", key, *absent[:500])
                    if key in many[5:] else r.execute_command("BF.MEXISTS", key, *absent),
                    dump=scandump(r, key) if key not in many[5:] else None,
                )
            return out

        before = state()
        for key, items in present.items():
            self.assertEqual(before[key]["present"], [1] * len(items), key)
        dbsize_before = r.dbsize()
        ttl_before = r.ttl("expiring")
        self.assertTrue(900 <= ttl_before <= 1000, ttl_before)  # 1000 s, less the time taken

        # "short" must be in the snapshot with a deadline that passes while
        # the server is down: set just before the save, a little later each
        # time a slow save outlasts it.
        margin_ms = 1000
        while True:
            r.execute_command("BF.ADD", "short", "x")  # again, if it expired
            seconds, micros = r.time()
            short_deadline_ms = seconds * 1000 + micros // 1000 + margin_ms
            r.execute_command("PEXPIREAT", "short", short_deadline_ms)
            self.assertTrue(r.save())
            code, report = check_snapshot(os.path.join(d, DUMP))
            self.assertEqual(code, 0, report)
            if "short" in report:
                break
            self.assertLess(margin_ms, 600000, "every save outlasted its key's deadline")
            margin_ms *= 4
        self.assertEqual(temp_files(d), [])
        for key in ("scalable", "wide", "nonscaling", "expiring", "empty", "short", "many:399"):
            self.assertIn(key, report)
        r.close()
        self.assertEqual(s.terminate(), 0)

        # Let "short" expire while the server is down.
        while time.time() * 1000 <= short_deadline_ms:
            time.sleep(0.05)

        s2 = self.server(d)
        r2 = s2.client()
        self.assertIn("loaded", s2.log())
        r = r2
        after = state()
        for key in kept:
            self.assertEqual(after[key], before[key], "key %r differs after restart" % (key,))
        self.assertEqual(r2.exists("short"), 0)
        self.assertEqual(r2.execute_command("BF.EXISTS", "short", "x"), 0)
        self.assertEqual(r2.dbsize(), dbsize_before - 1)
        self.assertEqual(sorted(r2.keys("*")), sorted(k if isinstance(k, bytes) else k.encode()
                                                      for k in kept))
        ttl_after = r2.ttl("expiring")
        self.assertTrue(900 <= ttl_after <= ttl_before, (ttl_before, ttl_after))
        for key in kept:
            if key != "expiring":
                self.assertEqual(r2.ttl(key), -1, key)
        info = persistence_info(r2)
        self.assertEqual(info["rdb_last_load_keys_loaded"], len(kept))
        # The restarted server keeps working on loaded filters.
        r2.execute_command("BF.MADD", "scalable", *["t%d" % i for i in range(500)])
        self.assertEqual(r2.execute_command("BF.MEXISTS", "scalable",
                                            *["t%d" % i for i in range(500)]), [1] * 500)
        self.assertEqual(r2.execute_command("BF.MEXISTS", "scalable",
                                            *["s%d" % i for i in range(500)]), [1] * 500)

    def test_empty_keyspace_is_a_53_byte_file(self):
        d = self.make_dir()
        s = self.server(d)
        r = s.client()
        self.assertTrue(r.save())
        data = read_bytes(os.path.join(d, DUMP))
        self.assertEqual(len(data), 53)
        self.assertEqual(data[:8], b"BLOOMERY")
        self.assertEqual(struct.unpack_from("<I", data, 8)[0], 5)
        header, records, end = parse_snapshot(data)
        self.assertEqual(records, [])
        self.assertEqual(end["count"], 0)
        created_s = header["created"] / 1000.0
        self.assertLess(abs(created_s - r.time()[0]), 60)
        self.assertEqual(s.terminate(), 0)
        s2 = self.server(d)
        self.assertEqual(s2.client().dbsize(), 0)

    def test_dbfilename_is_honoured(self):
        d = self.make_dir()
        s = self.server(d, "--dbfilename", "other.snap")
        r = s.client()
        r.execute_command("BF.ADD", "k", "v")
        self.assertTrue(r.save())
        self.assertTrue(os.path.isfile(os.path.join(d, "other.snap")))
        self.assertFalse(os.path.exists(os.path.join(d, DUMP)))
        self.assertEqual(s.terminate(), 0)
        s2 = self.server(d, "--dbfilename", "other.snap")
        self.assertEqual(s2.client().execute_command("BF.EXISTS", "k", "v"), 1)

    def test_file_matches_the_documented_layout(self):
        d = self.make_dir()
        s = self.server(d)
        r = s.client()
        r.execute_command("BF.RESERVE", "a", 0.01, 10)
        r.execute_command("BF.MADD", "a", *range(40))
        r.execute_command("BF.RESERVE", "b", 0.001, 100, "NONSCALING")
        r.execute_command("BF.ADD", "b", "x")
        r.pexpire("b", 600000)
        self.assertTrue(r.save())
        data = read_bytes(os.path.join(d, DUMP))
        header, records, end = parse_snapshot(data)
        self.assertEqual(header["version"], 5)
        by_key = {rec["key"]: rec for rec in records}
        self.assertEqual(set(by_key), {b"a", b"b"})
        self.assertEqual(end["count"], 2)
        a, b = by_key[b"a"], by_key[b"b"]
        self.assertEqual((a["capacity"], a["error_rate"], a["expansion"], a["nonscaling"], a["expire"]),
                         (10, 0.01, 2, 0, 0))
        self.assertEqual([len(a["layers"])], r.execute_command("BF.INFO", "a", "FILTERS"))
        self.assertEqual([sum(l["items"] for l in a["layers"])], r.execute_command("BF.INFO", "a", "ITEMS"))
        self.assertEqual((b["nonscaling"], len(b["layers"]), b["capacity"]), (1, 1, 100))
        pexpiretime = r.execute_command("PEXPIRETIME", "b")
        self.assertEqual(b["expire"], pexpiretime)
        for rec in records:
            for layer in rec["layers"]:
                self.assertEqual(layer["bits"] % 64, 0)
                self.assertTrue(1 <= layer["hashes"] <= 64)
        # Rebuilding the parsed file byte for byte proves the test's own
        # parser and xxh64 agree with the writer.
        self.assertEqual(build_snapshot(header, records), data)

    def test_mostly_empty_filter_saves_small_and_version_4_files_still_load(self):
        d = self.make_dir()
        s = self.server(d)
        r = s.client()
        r.execute_command("BF.RESERVE", "big", 0.001, 10000000)  # 18 MB
        r.execute_command("BF.MADD", "big", *range(100))
        r.execute_command("BF.RESERVE", "small", 0.01, 10)
        r.execute_command("BF.MADD", "small", *range(40))
        live = {key: scandump(r, key) for key in ("big", "small")}
        self.assertTrue(r.save())
        data = read_bytes(os.path.join(d, DUMP))
        # 100 items set about 1,000 words: runs of them, not 18 MB.
        self.assertLess(len(data), 64 * 1024)
        header, records, _ = parse_snapshot(data)
        s.stop()
        # The same keys written as a version-4 file (every word) load alike.
        header["version"] = 4
        old = build_snapshot(header, records)
        self.assertGreater(len(old), 18 * 1000 * 1000)
        for name, contents in (("version 5", data), ("version 4", old)):
            with self.subTest(name):
                d2 = self.make_dir()
                write_bytes(os.path.join(d2, DUMP), contents)
                r2 = self.server(d2).client()
                for key, chunks in live.items():
                    self.assertEqual(scandump(r2, key), chunks)
                self.assertEqual(r2.execute_command("BF.MEXISTS", "big", *range(100)), [1] * 100)


class JournalAfterSnapshotOfNoJournal(TempDirCase):
    def test_writes_after_turning_the_journal_on_survive_kill_9(self):
        # A snapshot saved with the journal off (as --import-rdb's) belongs
        # to no journal: the first start with one saves a snapshot of it,
        # or the journal's records would be set aside at the next start.
        d = self.make_dir()
        s = self.server(d, "--appendonly", "no")
        r = s.client()
        r.execute_command("BF.ADD", "before", "a")
        r.execute_command("CF.ADD", "cuckoo", "a")
        self.assertTrue(r.save())
        s.stop()
        s = self.server(d, "--appendonly", "yes", "--appendfsync", "always")
        r = s.client()
        r.execute_command("BF.ADD", "before", "b")
        r.execute_command("BF.ADD", "after", "c")
        r.execute_command("CF.ADD", "cuckoo", "b")
        self.assertIn("belongs to no journal", s.log())
        self.assertEqual(s.kill(), -9)
        s.start()
        r = s.client()
        self.assertEqual(r.execute_command("BF.MEXISTS", "before", "a", "b"), [1, 1])
        self.assertEqual(r.execute_command("BF.EXISTS", "after", "c"), 1)
        self.assertEqual(r.execute_command("CF.MEXISTS", "cuckoo", "a", "b"), [1, 1])


class BackgroundSave(TempDirCase):

    def test_bgsave_info_and_lastsave(self):
        d = self.make_dir()
        s = self.server(d)
        r = s.client()
        info = persistence_info(r)
        self.assertEqual(info["rdb_bgsave_in_progress"], 0)
        self.assertEqual(info["rdb_changes_since_last_save"], 0)
        saves0 = info["rdb_saves"]
        lastsave0 = r.lastsave()

        r.execute_command("BF.MADD", "k", *["v%d" % i for i in range(10)])
        r.execute_command("BF.ADD", "k2", "x")
        self.assertGreater(persistence_info(r)["rdb_changes_since_last_save"], 0)

        # LASTSAVE has one-second resolution: wait for the next second.
        while time.time() < lastsave0.timestamp() + 1:
            time.sleep(0.05)
        reply = bgsave(r)
        self.assertEqual(reply, b"Background saving started")
        wait_until(lambda: persistence_info(r)["rdb_bgsave_in_progress"] == 0, 20,
                   "the background save to finish", interval=0.05)
        info = persistence_info(r)
        self.assertEqual(info["rdb_last_bgsave_status"], "ok")
        self.assertEqual(info["rdb_saves"], saves0 + 1)
        self.assertEqual(info["rdb_changes_since_last_save"], 0)
        self.assertEqual(info["rdb_last_save_keys"], 2)
        self.assertEqual(info["rdb_last_save_bytes"], os.path.getsize(os.path.join(d, DUMP)))
        self.assertEqual(info["rdb_current_bgsave_time_sec"], -1)
        self.assertGreaterEqual(info["rdb_last_bgsave_time_sec"], 0)
        self.assertIn(info["rdb_last_error"], ("", None))
        lastsave1 = r.lastsave()
        self.assertGreater(lastsave1, lastsave0)
        self.assertEqual(int(lastsave1.timestamp()), info["rdb_last_save_time"])
        self.assertEqual(temp_files(d), [])
        code, report = check_snapshot(os.path.join(d, DUMP))
        self.assertEqual(code, 0, report)
        self.assertIn("k2", report)

        # SAVE also advances LASTSAVE and rdb_saves and resets the counter.
        r.execute_command("BF.ADD", "k3", "x")
        self.assertEqual(persistence_info(r)["rdb_changes_since_last_save"], 1)
        while time.time() < lastsave1.timestamp() + 1:
            time.sleep(0.05)
        self.assertTrue(r.save())
        info = persistence_info(r)
        self.assertEqual(info["rdb_saves"], saves0 + 2)
        self.assertEqual(info["rdb_changes_since_last_save"], 0)
        self.assertGreater(r.lastsave(), lastsave1)

    def test_bgsave_snapshot_contains_acknowledged_adds(self):
        d = self.make_dir()
        s = self.server(d)
        r = s.client()
        r.execute_command("BF.RESERVE", "k", 0.01, 1000)
        items = ["v%d" % i for i in range(3000)]
        for start in range(0, 3000, 500):
            r.execute_command("BF.MADD", "k", *items[start:start + 500])
        self.assertEqual(bgsave(r), b"Background saving started")
        wait_until(lambda: persistence_info(r)["rdb_bgsave_in_progress"] == 0, 20,
                   "the background save to finish", interval=0.05)
        self.assertEqual(s.kill(), -signal.SIGKILL)
        s2 = self.server(d)
        self.assertEqual(s2.client().execute_command("BF.MEXISTS", "k", *items), [1] * 3000)

    def test_save_during_bgsave_is_refused_with_redis_wording(self):
        d = self.make_dir()
        s = self.server(d)
        r = s.client()
        # A few MB so that the background save is surely still running when
        # the pipelined SAVE arrives (it needs a write and two fsyncs).
        r.execute_command("BF.RESERVE", "big", 0.001, 3000000)
        r.response_callbacks.pop("BGSAVE", None)
        pipe = r.pipeline(transaction=False)
        pipe.execute_command("BGSAVE")
        pipe.execute_command("SAVE")
        pipe.execute_command("BGSAVE")
        replies = pipe.execute(raise_on_error=False)
        self.assertEqual(replies[0], b"Background saving started")
        for reply in replies[1:]:
            self.assertIsInstance(reply, redis.ResponseError, replies)
            # redis-py strips the leading "ERR "; the rest must be Redis's text.
            self.assertEqual(str(reply), "Background save already in progress", replies)
        wait_until(lambda: persistence_info(r)["rdb_bgsave_in_progress"] == 0, 30,
                   "the background save to finish", interval=0.05)
        self.assertEqual(persistence_info(r)["rdb_last_bgsave_status"], "ok")

    def test_save_point_triggers_a_snapshot_without_any_command(self):
        d = self.make_dir()
        s = self.server(d, save="1 1")
        r = s.client()
        path = os.path.join(d, DUMP)
        time.sleep(1.2)
        self.assertFalse(os.path.exists(path), "saved with no change")
        r.execute_command("BF.MADD", "auto", "a", "b")
        wait_until(lambda: os.path.exists(path), 10, "a snapshot", interval=0.05)
        wait_until(lambda: persistence_info(r)["rdb_saves"] >= 1 and
                   persistence_info(r)["rdb_bgsave_in_progress"] == 0, 10,
                   "the save to be counted and finished", interval=0.05)
        self.assertEqual(persistence_info(r)["rdb_changes_since_last_save"], 0)
        code, report = check_snapshot(path)
        self.assertEqual(code, 0, report)
        self.assertIn("auto", report)
        self.assertEqual(persistence_info(r)["rdb_saves_enabled"], 1)
        # No further snapshots while nothing changes.
        saves = persistence_info(r)["rdb_saves"]
        time.sleep(2.2)
        self.assertEqual(persistence_info(r)["rdb_saves"], saves)
        s.kill()
        s2 = self.server(d)
        self.assertEqual(s2.client().execute_command("BF.MEXISTS", "auto", "a", "b"), [1, 1])


class SaveFailures(TempDirCase):

    def test_directory_replaced_by_a_file(self):
        root = self.make_dir()
        d = os.path.join(root, "data")
        os.mkdir(d)
        s = self.server(d)
        r = s.client()
        r.execute_command("BF.ADD", "k", "v")
        self.assertTrue(r.save())
        r.execute_command("BF.ADD", "k", "after-save")
        shutil.rmtree(d)
        write_bytes(d, b"not a directory\n")
        with self.assertRaises(redis.ResponseError) as caught:
            r.save()
        self.assertIn(d, str(caught.exception))
        info = persistence_info(r)
        self.assertEqual(info["rdb_last_bgsave_status"], "err")
        self.assertNotIn(info["rdb_last_error"], ("", None))
        self.assertGreater(info["rdb_changes_since_last_save"], 0)
        # BGSAVE fails the same way, reported through INFO.
        self.assertEqual(bgsave(r), b"Background saving started")
        wait_until(lambda: persistence_info(r)["rdb_bgsave_in_progress"] == 0, 20,
                   "the background save to finish", interval=0.05)
        self.assertEqual(persistence_info(r)["rdb_last_bgsave_status"], "err")
        # The server keeps serving.
        self.assertTrue(r.ping())
        r.execute_command("BF.ADD", "k", "w")
        self.assertEqual(r.execute_command("BF.MEXISTS", "k", "v", "w"), [1, 1])
        self.assertEqual(read_bytes(d), b"not a directory\n")
        # Once the directory is back, saving works again.
        os.unlink(d)
        os.mkdir(d)
        self.assertTrue(r.save())
        info = persistence_info(r)
        self.assertEqual(info["rdb_last_bgsave_status"], "ok")
        self.assertEqual(info["rdb_changes_since_last_save"], 0)
        self.assertEqual(check_snapshot(os.path.join(d, DUMP))[0], 0)

    def test_file_size_limit(self):
        d = self.make_dir()
        limit = 64 * 1024
        s = limited_server(limit, data_dir=d)
        self.addCleanup(s.cleanup)
        s.start()
        r = s.client()
        r.execute_command("BF.RESERVE", "small", 0.01, 1000)
        r.execute_command("BF.MADD", "small", *range(100))
        self.assertTrue(r.save())
        path = os.path.join(d, DUMP)
        before = read_bytes(path)
        self.assertLess(len(before), limit)
        # ~180 KB of bits. Snapshots hold a layer's non-zero words: 1,000
        # items of 50 hashes set most of them (and journal little).
        r.execute_command("BF.RESERVE", "large", 1e-15, 20000, "LAYOUT", "CLASSIC")
        r.execute_command("BF.MADD", "large", "x", *range(1000))
        with self.assertRaises(redis.ResponseError) as caught:
            r.save()
        message = str(caught.exception)
        self.assertIn(path, message)
        self.assertIn("file too large", message.lower())
        self.assertEqual(read_bytes(path), before)
        self.assertEqual(temp_files(d), [])
        info = persistence_info(r)
        self.assertEqual(info["rdb_last_bgsave_status"], "err")
        self.assertIn("file too large", info["rdb_last_error"].lower()
                      if isinstance(info["rdb_last_error"], str) else "")
        # BGSAVE fails the same way and also leaves no temporary file.
        self.assertEqual(bgsave(r), b"Background saving started")
        wait_until(lambda: persistence_info(r)["rdb_bgsave_in_progress"] == 0, 20,
                   "the background save to finish", interval=0.05)
        self.assertEqual(persistence_info(r)["rdb_last_bgsave_status"], "err")
        self.assertEqual(read_bytes(path), before)
        self.assertEqual(temp_files(d), [])
        self.assertIsNone(s.process.poll(), "server died on EFBIG")
        self.assertEqual(r.execute_command("BF.EXISTS", "large", "x"), 1)
        # Dropping the large filter makes saving possible again.
        r.delete("large")
        self.assertTrue(r.save())
        self.assertEqual(persistence_info(r)["rdb_last_bgsave_status"], "ok")


class AutoSnapshot(TempDirCase):
    """--auto-aof-rewrite-*: as Redis measures its AOF, the journal counts
    with the snapshot before it, so a large keyspace is not saved again after
    every min-size of journal."""

    AUTO = ("--auto-aof-rewrite-min-size", "1mb", "--auto-aof-rewrite-percentage", "100")

    def add_until_saved(self, server, r, key, start):
        """Adds items to `key` in batches until a save follows; returns the
        journal's bytes that the log says started it."""
        saves = persistence_info(r)["rdb_saves"]
        logged = server.log().count("grown from")
        added = 0
        while persistence_info(r)["rdb_saves"] == saves:
            self.assertLess(added, 3000000, "no automatic save")
            r.execute_command("BF.MADD", key, *range(start + added, start + added + 2000))
            added += 2000
        lines = [line for line in server.log().splitlines() if "grown from" in line]
        self.assertEqual(len(lines), logged + 1, lines)
        return int(lines[-1].split("journal is ")[1].split(" ")[0])

    def test_without_a_snapshot_the_journal_is_saved_at_min_size(self):
        s = self.server(self.make_dir(), *self.AUTO)
        r = s.client()
        journal = self.add_until_saved(s, r, "k", 0)
        self.assertGreaterEqual(journal, 1024 * 1024)
        self.assertLess(journal, 3 * 1024 * 1024)

    def test_after_a_large_snapshot_the_journal_grows_by_its_size(self):
        d = self.make_dir()
        s = self.server(d, "--auto-aof-rewrite-percentage", "0")
        r = s.client()
        # A snapshot of about 4.8 MB, every region of it touched.
        r.execute_command("BF.RESERVE", "big", 0.01, 4000000, "NONSCALING")
        for first in range(0, 100000, 2000):
            r.execute_command("BF.MADD", "big", *range(first, first + 2000))
        self.assertTrue(r.save())
        snapshot = persistence_info(r)["rdb_last_save_bytes"]
        self.assertEqual(snapshot, os.path.getsize(os.path.join(d, "dump.bloomery")))
        self.assertGreater(snapshot, 4000000)
        s.stop()
        # Loaded at start, the snapshot counts as the base.
        s = self.server(d, *self.AUTO)
        r = s.client()
        journal = self.add_until_saved(s, r, "small", 0)
        self.assertGreater(journal, snapshot)
        # Saved once more: the new snapshot, holding both, is the base now.
        snapshot = persistence_info(r)["rdb_last_save_bytes"]
        journal = self.add_until_saved(s, r, "small", 10000000)
        self.assertGreater(journal, snapshot)
        r.execute_command("BF.ADD", "small", "last")
        s.kill()
        again = self.server(d)
        r = again.client()
        self.assertEqual(r.execute_command("BF.EXISTS", "small", "last"), 1)
        self.assertEqual(missing_items(r, "big", range(100000)), [])


def limited_server(fsize_limit, **kwargs):
    """A Server whose process has RLIMIT_FSIZE set to `fsize_limit` bytes."""

    def preexec():
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize_limit, fsize_limit))

    return Server(preexec_fn=preexec, **kwargs)


if __name__ == "__main__":
    unittest.main()
