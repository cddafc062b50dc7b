"""Stopping the server, end to end: what SIGTERM, SIGINT and SHUTDOWN
[NOSAVE|SAVE] save, as Redis does; SHUTDOWN's final save runs off the worker
(its other clients are served meanwhile, SHUTDOWN ABORT cancels it, a failed
save keeps the server running unless FORCE stops it).
"""

import os
import re
import shutil
import signal
import time
import unittest
from concurrent.futures import ThreadPoolExecutor

import redis

from harness import (DUMP, Server, TempDirCase, add_range, raw_connection, read_bytes,
                     temp_files, wait_until, write_bytes)


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

    # Saving or loading big_server's snapshot: seconds in a release build,
    # a minute or more in a sanitizer build beside other tests.
    BIG_SNAPSHOT_SECONDS = 180

    def big_server(self, d, *extra, save="3600 1"):
        # One worker: every client shares the one SHUTDOWN runs on.
        server = Server(*extra, data_dir=d, save=save, threads=1)
        self.addCleanup(server.cleanup)
        server.start()
        r = server.client()
        # An 827 MB filter with 50 hashes an item and 700,000 items: a third
        # of its words are not zero, so its snapshot, which holds only
        # those, is still about 300 MB: 0.5 to 4 s to save on the 2-core VM.
        r.execute_command("BF.RESERVE", "big", "1e-15", "92000000", "NONSCALING", "LAYOUT",
                          "CLASSIC")
        add_range(r, "big", 0, 700000)
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
        self.assertEqual(s.wait(self.BIG_SNAPSHOT_SECONDS), 0, s.log())
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
        s2 = self.server(d, start=False).start(timeout=self.BIG_SNAPSHOT_SECONDS)
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
        self.wait_for_log(s, "SHUTDOWN cancelled by SHUTDOWN ABORT", self.BIG_SNAPSHOT_SECONDS)
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


if __name__ == "__main__":
    unittest.main()
