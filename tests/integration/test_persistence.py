"""Snapshots end to end: the real binary, real files, real restarts.

Round trips of every filter kind through SAVE and restart, SIGTERM / SHUTDOWN
semantics, BGSAVE and INFO persistence, save points, refusal of corrupt or
foreign snapshot files (truncation, bit flips, crafted out-of-range fields with
valid checksums) and failures to save (directory replaced by a file,
RLIMIT_FSIZE). The format is proto/snapshot.md.
"""

import os
import random
import re
import resource
import shutil
import signal
import struct
import tempfile
import time
import unittest
from concurrent.futures import ThreadPoolExecutor

import redis

from formats import build_snapshot, parse_snapshot
from harness import Server, check_snapshot, raw_connection, scandump, wait_until

DUMP = "dump.bloomery"

# ---------------------------------------------------------------------------
# Helpers.


def persistence_info(client):
    return client.info("persistence")


def bgsave(client):
    """BGSAVE's raw status reply (redis-py would turn it into True)."""
    client.response_callbacks.pop("BGSAVE", None)
    return client.execute_command("BGSAVE")


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def write_bytes(path, data):
    with open(path, "wb") as f:
        f.write(data)


def temp_files(directory):
    return sorted(name for name in os.listdir(directory) if ".tmp" in name)


class TempDirCase(unittest.TestCase):
    def make_dir(self):
        tmp = tempfile.TemporaryDirectory(prefix="bloomery-persist-")
        self.addCleanup(tmp.cleanup)
        return tmp.name

    def server(self, data_dir, *extra, save='""', start=True):
        server = Server(*extra, data_dir=data_dir, save=save)
        self.addCleanup(server.cleanup)
        if start:
            server.start()
        return server

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


# ---------------------------------------------------------------------------

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
        self.assertEqual(struct.unpack_from("<I", data, 8)[0], 4)
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
        self.assertEqual(header["version"], 4)
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


class ShutdownAndSignals(TempDirCase):

    def test_sigterm_saves_when_saving_is_enabled(self):
        d = self.make_dir()
        s = self.server(d, save="3600 1")
        r = s.client()
        r.execute_command("BF.MADD", "k", *["v%d" % i for i in range(100)])
        self.assertFalse(os.path.exists(os.path.join(d, DUMP)))
        self.assertEqual(s.terminate(), 0)
        self.assertTrue(os.path.isfile(os.path.join(d, DUMP)))
        self.assertEqual(temp_files(d), [])
        s2 = self.server(d, save="3600 1")
        self.assertEqual(s2.client().execute_command("BF.MEXISTS", "k", *["v%d" % i for i in range(100)]),
                         [1] * 100)

    def test_sigint_saves_when_saving_is_enabled(self):
        d = self.make_dir()
        s = self.server(d, save="3600 1")
        r = s.client()
        r.execute_command("BF.ADD", "k", "v")
        s.process.send_signal(signal.SIGINT)
        self.assertEqual(s.wait(30), 0)
        s2 = self.server(d)
        self.assertEqual(s2.client().execute_command("BF.EXISTS", "k", "v"), 1)

    def test_sigterm_with_saving_disabled_writes_nothing(self):
        d = self.make_dir()
        s = self.server(d, save='""')
        r = s.client()
        r.execute_command("BF.ADD", "k", "v")
        self.assertEqual(s.terminate(), 0)
        # No snapshot; only the journal, which holds the add.
        self.assertEqual([n for n in os.listdir(d)
                          if not n.startswith("server-") and not n.startswith("journal.")], [])

    def test_sigterm_with_saving_disabled_keeps_the_previous_snapshot(self):
        d = self.make_dir()
        s = self.server(d, save='""')
        r = s.client()
        r.execute_command("BF.ADD", "old", "v")
        self.assertTrue(r.save())
        snapshot = read_bytes(os.path.join(d, DUMP))
        r.execute_command("BF.ADD", "new", "v")
        self.assertEqual(s.terminate(), 0)
        self.assertEqual(read_bytes(os.path.join(d, DUMP)), snapshot)

    def test_shutdown_nosave_does_not_save(self):
        d = self.make_dir()
        # Snapshots alone (with the journal, SHUTDOWN NOSAVE loses nothing:
        # test_journal.py).
        s = self.server(d, "--appendonly", "no", save="3600 1")
        r = s.client()
        r.execute_command("BF.ADD", "before", "v")
        self.assertTrue(r.save())
        r.execute_command("BF.ADD", "after", "v")
        r.execute_command("BF.ADD", "before", "w")
        try:
            r.execute_command("SHUTDOWN", "NOSAVE")
        except redis.ConnectionError:
            pass
        self.assertEqual(s.wait(30), 0)
        s2 = self.server(d, "--appendonly", "no", save="3600 1")
        r2 = s2.client()
        self.assertEqual(r2.execute_command("BF.EXISTS", "before", "v"), 1)
        self.assertEqual(r2.exists("after"), 0)
        self.assertEqual(r2.execute_command("BF.CARD", "before"), 1)

    def test_shutdown_save_saves_even_when_saving_is_disabled(self):
        d = self.make_dir()
        s = self.server(d, save='""')
        r = s.client()
        r.execute_command("BF.MADD", "k", "a", "b", "c")
        try:
            r.execute_command("SHUTDOWN", "SAVE")
        except redis.ConnectionError:
            pass
        self.assertEqual(s.wait(30), 0)
        self.assertEqual(temp_files(d), [])
        s2 = self.server(d)
        self.assertEqual(s2.client().execute_command("BF.MEXISTS", "k", "a", "b", "c"), [1, 1, 1])

    def test_plain_shutdown_saves_when_saving_is_enabled(self):
        d = self.make_dir()
        s = self.server(d, save="3600 1")
        r = s.client()
        r.execute_command("BF.ADD", "k", "v")
        try:
            r.execute_command("SHUTDOWN")
        except redis.ConnectionError:
            pass
        self.assertEqual(s.wait(30), 0)
        s2 = self.server(d)
        self.assertEqual(s2.client().execute_command("BF.EXISTS", "k", "v"), 1)


class ShutdownOffTheWorker(TempDirCase):
    """SHUTDOWN's final save runs off the worker: the worker's other clients
    are served until the server goes; a failed save keeps it running, ABORT
    cancels a SHUTDOWN still saving, FORCE stops anyway."""

    def big_server(self, d, *extra, save="3600 1"):
        # One worker: every client shares the one SHUTDOWN runs on.
        server = Server(*extra, data_dir=d, save=save, threads=1)
        self.addCleanup(server.cleanup)
        server.start()
        r = server.client()
        # 825 MB of snapshot: 0.5 to 4 s to save on the 2-core VM.
        r.execute_command("BF.RESERVE", "big", "0.0001", "300000000", "NONSCALING")
        r.execute_command("BF.ADD", "big", "x")
        return server

    def wait_for_log(self, server, text, timeout=30):
        wait_until(lambda: text in server.log(), timeout,
                   lambda: "%r in the log:\n%s" % (text, server.log()[-2000:]), interval=0.01)

    def test_the_worker_serves_its_other_clients_while_shutdown_saves(self):
        d = self.make_dir()
        s = self.big_server(d)
        pinger = s.client()
        self.assertTrue(pinger.ping())
        closer = raw_connection(s.port)
        self.addCleanup(closer.close)
        closer.sendall(b"SHUTDOWN\r\n")
        sent = time.monotonic()
        answered = []  # (sent, answered) of each PING
        deadline = sent + 60
        while time.monotonic() < deadline:
            started = time.monotonic()
            try:
                pinger.ping()
            except redis.ConnectionError:
                break
            answered.append((started, time.monotonic()))
        closed = time.monotonic()
        self.assertEqual(s.wait(60), 0, s.log())
        saved = re.search(r"snapshot saved: 1 filters, \d+ bytes, ([0-9.]+) s", s.log())
        if float(saved.group(1)) < 0.3:
            self.skipTest("the save took %s s: too short to tell" % saved.group(1))
        # Served while the snapshot was written: the save starts at once, so
        # a worker blocked by it would have answered no PING sent in the
        # second half of the time until the connection closed.
        halfway = sent + (closed - sent) / 2
        self.assertTrue(any(started >= halfway for started, _ in answered),
                        "no PING answered in the second half of a %.2f s save (%d answered)"
                        % (closed - sent, len(answered)))
        self.assertIn("SHUTDOWN: final snapshot saved", s.log())
        s2 = self.server(d)
        self.assertEqual(s2.client().execute_command("BF.EXISTS", "big", "x"), 1)

    def test_shutdown_abort_cancels_a_shutdown_still_saving(self):
        d = self.make_dir()
        s = self.big_server(d)
        r = s.client()
        with ThreadPoolExecutor(1) as pool:
            shutdown = pool.submit(lambda: s.client().execute_command("SHUTDOWN"))
            self.wait_for_log(s, "SHUTDOWN requested by a client")
            self.assertTrue(r.execute_command("SHUTDOWN", "ABORT"))  # +OK
            with self.assertRaises(redis.ResponseError) as failed:
                shutdown.result(60)
        self.assertEqual(str(failed.exception), "Errors trying to SHUTDOWN. Check logs.")
        # It keeps serving, after the save too.
        self.wait_for_log(s, "SHUTDOWN cancelled by SHUTDOWN ABORT")
        self.assertIsNone(s.process.poll())
        self.assertEqual(r.execute_command("BF.ADD", "big", "y"), 1)
        with self.assertRaises(redis.ResponseError) as nothing:
            r.execute_command("SHUTDOWN", "ABORT")
        self.assertEqual(str(nothing.exception), "No shutdown in progress.")
        for wrong in (("SAVE", "NOSAVE"), ("ABORT", "NOW"), ("LATER",)):
            with self.assertRaises(redis.ResponseError) as syntax:
                r.execute_command("SHUTDOWN", *wrong)
            self.assertEqual(str(syntax.exception), "syntax error")
        self.assertTrue(r.ping())

    def test_a_failed_final_save_keeps_serving_unless_forced(self):
        root = self.make_dir()
        d = os.path.join(root, "data")
        os.mkdir(d)
        s = self.server(d, "--appendonly", "no", save="3600 1")
        r = s.client()
        r.execute_command("BF.ADD", "k", "v")
        shutil.rmtree(d)
        write_bytes(d, b"not a directory\n")
        with self.assertRaises(redis.ResponseError) as failed:
            r.execute_command("SHUTDOWN")
        self.assertEqual(str(failed.exception), "Errors trying to SHUTDOWN. Check logs.")
        self.assertIsNone(s.process.poll())
        self.assertEqual(r.execute_command("BF.EXISTS", "k", "v"), 1)
        try:
            r.execute_command("SHUTDOWN", "FORCE")
        except redis.ConnectionError:
            pass
        self.assertEqual(s.wait(30), 0)


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
        r.execute_command("BF.RESERVE", "large", 0.01, 200000)  # ~240 KB of bits
        r.execute_command("BF.ADD", "large", "x")
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


def limited_server(fsize_limit, **kwargs):
    """A Server whose process has RLIMIT_FSIZE set to `fsize_limit` bytes."""

    def preexec():
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize_limit, fsize_limit))

    return Server(preexec_fn=preexec, **kwargs)


# ---------------------------------------------------------------------------

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
        cases = [("truncated at %d" % n, self.good[:n], ()) for n in range(len(self.good))]
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
            ("version 5", self.mutated(lambda h, r: h.__setitem__("version", 5)), ("version 5",)),
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
            ("version 5", self.mutated(lambda h, r: h.__setitem__("version", 5)), ("version 5",)),
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
