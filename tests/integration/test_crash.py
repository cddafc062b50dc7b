"""Crash safety of snapshots: SIGKILL at random moments while clients add and
snapshots run.

A writer thread adds increasing integers with BF.MADD (spread over three keys)
and records the highest acknowledged item. Meanwhile a second thread requests
BGSAVE in a loop and the main thread runs synchronous SAVEs, which reply only
once the file is durable. Before each SAVE the main thread reads the highest
acknowledged item; when SAVE answers OK that item becomes the durable mark.
Then the server is killed with SIGKILL after a random short delay (often in
the middle of a background save), or sometimes sent SIGTERM and killed shortly
after (a kill during the shutdown snapshot).

Every restart must succeed (no torn snapshot ever), every item <= the durable
mark must answer BF.EXISTS 1 (except the items acknowledged after the last
completed snapshot of an earlier incarnation: those died with it and are
never checked), and leftover temporary files must not pile up.

BLOOMERY_CRASH_ROUNDS (default 20) sets the number of kills.
"""

import os
import random
import signal
import tempfile
import threading
import time
import unittest

import redis

from harness import Server, add_range, wait_until

ROUNDS = int(os.environ.get("BLOOMERY_CRASH_ROUNDS", "20"))
BATCH = 50
KEYS = ("crash:scaling", "crash:nonscaling", "crash:wide")
DUMP = "dump.bloomery"


def key_of(item):
    """The key an item was added to: batches rotate over KEYS."""
    return KEYS[((item - 1) // BATCH) % len(KEYS)]


def temp_files(directory):
    return sorted(name for name in os.listdir(directory) if ".tmp" in name)


class Writer(threading.Thread):
    """Adds BATCH consecutive integers per BF.MADD until stopped or disconnected."""

    def __init__(self, port, first_item):
        super().__init__(daemon=True)
        self.port = port
        self.next_item = first_item  # batches always start at 1 + k*BATCH
        self.acked = first_item - 1
        self.sent = first_item - 1
        self.stop_event = threading.Event()
        self.failure = None

    def run(self):
        client = redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=10)
        try:
            while not self.stop_event.is_set():
                first = self.next_item
                items = list(range(first, first + BATCH))
                self.sent = items[-1]
                try:
                    reply = client.execute_command("BF.MADD", key_of(first), *items)
                except (redis.ConnectionError, redis.TimeoutError, OSError):
                    return  # the server was killed
                if not isinstance(reply, list) or len(reply) != BATCH or any(
                        r not in (0, 1) for r in reply):
                    self.failure = "bad BF.MADD reply %r" % (reply,)
                    return
                self.acked = items[-1]
                self.next_item = first + BATCH
                time.sleep(0.002)
        except Exception as error:  # surfaced by the test
            self.failure = repr(error)
        finally:
            client.close()


class BackgroundSaver(threading.Thread):
    """Requests BGSAVE every few tens of milliseconds; refusals are fine."""

    def __init__(self, port, rng):
        super().__init__(daemon=True)
        self.port = port
        self.rng = rng
        self.stop_event = threading.Event()
        self.started = 0

    def run(self):
        client = redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=10)
        client.response_callbacks.pop("BGSAVE", None)
        try:
            while not self.stop_event.is_set():
                try:
                    if client.execute_command("BGSAVE") == b"Background saving started":
                        self.started += 1
                except redis.ResponseError:
                    pass
                except (redis.ConnectionError, redis.TimeoutError, OSError):
                    return
                self.stop_event.wait(self.rng.uniform(0.01, 0.12))
        finally:
            client.close()


class CrashDuringSnapshots(unittest.TestCase):

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="bloomery-crash-")
        self.addCleanup(self.tmp.cleanup)
        self.dir = self.tmp.name
        self.seed = int(os.environ.get("BLOOMERY_CRASH_SEED", str(int(time.time()))))
        self.rng = random.Random(self.seed)
        self.servers = []
        self.events = []  # what happened, for the failure message
        self.limbo = []   # (first, last): acknowledged after the last snapshot before a crash

    def tearDown(self):
        for server in self.servers:
            server.stop()

    def start_server(self, save):
        server = Server(data_dir=self.dir, save=save)
        self.servers.append(server)
        started = time.monotonic()
        try:
            server.start(timeout=30)
        except RuntimeError as error:
            self.fail("restart refused after a crash: %s\nfiles: %s" % (error, os.listdir(self.dir)))
        return server, time.monotonic() - started

    def saved_items(self, first, last):
        """Items in [first, last] minus those lost (legitimately) in earlier crashes."""
        items = []
        for item in range(first, last + 1):
            if not any(lo <= item <= hi for lo, hi in self.limbo):
                items.append(item)
        return items

    def assert_present(self, client, items, context):
        items = list(items)
        for start in range(0, len(items), 1000):
            chunk = items[start:start + 1000]
            by_key = {}
            for item in chunk:
                by_key.setdefault(key_of(item), []).append(item)
            for key, values in by_key.items():
                replies = client.execute_command("BF.MEXISTS", key, *values)
                missing = [v for v, r in zip(values, replies) if r != 1]
                if missing:
                    self.fail("%s: %d acknowledged and saved items lost in %s, e.g. %s\n"
                              "seed %d, events:\n  %s\nlog of the killed server:\n%s"
                              % (context, len(missing), key, missing[:10], self.seed,
                                 "\n  ".join(self.events[-40:]),
                                 self.servers[-2].log()[-3000:] if len(self.servers) > 1 else ""))

    def test_sigkill_at_random_moments_loses_nothing_saved(self):
        durable = 0          # every item <= durable was acknowledged before a SAVE that answered OK
        checked_upto = 0     # items verified in full after some restart
        next_item = 1
        saves_ok = 0
        bgsaves = 0
        sigterm_rounds = 0
        max_temp_files = 0
        slowest_start = 0.0

        server, _ = self.start_server('""')
        client = server.client()
        client.execute_command("BF.RESERVE", KEYS[0], 0.01, 500)
        client.execute_command("BF.RESERVE", KEYS[1], 0.001, 2000000, "NONSCALING")
        client.execute_command("BF.RESERVE", KEYS[2], 0.001, 200, "EXPANSION", 4)
        self.assertTrue(client.save())
        client.close()

        for round_number in range(ROUNDS):
            save = "1 1" if round_number % 2 else '""'
            if round_number:
                server, seconds = self.start_server(save)
                slowest_start = max(slowest_start, seconds)
                # Leftover temporary files (a kill mid-save) must not break
                # startup; that they are cleaned up is pinned deterministically
                # by test_kill_mid_save_leaves_no_lasting_temporary_file.
                max_temp_files = max(max_temp_files, len(temp_files(self.dir)))
                client = server.client()
                # Everything new since the last full check, plus a random sample
                # of older items.
                self.assert_present(client, self.saved_items(checked_upto + 1, durable),
                                    "round %d" % round_number)
                checked_upto = durable
                if durable:
                    sample = self.rng.sample(range(1, durable + 1), min(2000, durable))
                    self.assert_present(client, [i for i in sample
                                                 if not any(lo <= i <= hi for lo, hi in self.limbo)],
                                        "round %d sample" % round_number)
                client.close()

            writer = Writer(server.port, next_item)
            saver = BackgroundSaver(server.port, random.Random(self.rng.random()))
            writer.start()
            saver.start()
            control = server.client()
            control.response_callbacks.pop("BGSAVE", None)
            try:
                # Under load first: the writer's first batch of the round is
                # acknowledged, however slowly the machine starts it.
                wait_until(lambda: writer.acked >= next_item or writer.failure is not None or
                           not writer.is_alive(), 60, "the writer's first reply", interval=0.01)
                time.sleep(self.rng.uniform(0.05, 0.4))
                # Up to three SAVEs a round, and keep trying (bounded) until one
                # succeeds: a BGSAVE in progress refuses SAVE, more often on a
                # slow (loaded or sanitized) machine.
                saved_this_round = 0
                for attempt in range(40):
                    if attempt >= 3 and saved_this_round:
                        break
                    mark = writer.acked  # read BEFORE asking for the snapshot
                    try:
                        if control.save():
                            durable = max(durable, mark)
                            saves_ok += 1
                            saved_this_round += 1
                            self.events.append("round %d: SAVE ok, mark %d (acked now %d)"
                                               % (round_number, mark, writer.acked))
                        time.sleep(self.rng.uniform(0.0, 0.15))
                    except redis.ResponseError as error:
                        self.events.append("round %d: SAVE refused: %s" % (round_number, error))
                        self.assertIn("in progress", str(error))
                        time.sleep(0.02)
                time.sleep(self.rng.uniform(0.0, 0.3))
                if self.rng.random() < 0.25:
                    # SIGTERM (a final snapshot when saving is enabled), then
                    # SIGKILL a moment later, maybe in the middle of it.
                    sigterm_rounds += 1
                    mark = writer.acked
                    server.process.send_signal(signal.SIGTERM)
                    time.sleep(self.rng.uniform(0.0, 0.05))
                    if server.process.poll() == 0 and save != '""':
                        durable = max(durable, mark)
                    self.events.append("round %d: SIGTERM at acked %d, exit %s"
                                       % (round_number, mark, server.process.poll()))
                code = server.kill()
                self.events.append("round %d: killed (exit %s) at acked %d, sent %d"
                                   % (round_number, code, writer.acked, writer.sent))
            finally:
                control.close()
                writer.stop_event.set()
                saver.stop_event.set()
                writer.join(20)
                saver.join(20)
            self.assertFalse(writer.is_alive() or saver.is_alive(), "client threads hang")
            self.assertIsNone(writer.failure, writer.failure)
            bgsaves += saver.started
            # Never reuse an item number that may have reached the server;
            # what was sent after the last durable mark may or may not be back.
            if writer.sent > durable:
                self.limbo.append((max(durable + 1, next_item), writer.sent))
            next_item = writer.sent + 1
            self.assertGreater(writer.acked, 0)

        server, seconds = self.start_server('""')
        slowest_start = max(slowest_start, seconds)
        client = server.client()
        self.assert_present(client, self.saved_items(1, durable), "final full check")
        code = server.terminate()
        self.assertEqual(code, 0)

        print("\ncrash rounds %d: durable mark %d of %d sent, %d SAVEs ok, %d BGSAVEs started, "
              "%d SIGTERM+SIGKILL rounds, max leftover temp files %d, slowest start %.2f s"
              % (ROUNDS, durable, next_item - 1, saves_ok, bgsaves, sigterm_rounds,
                 max_temp_files, slowest_start))
        self.assertGreater(saves_ok, ROUNDS // 2, "too few successful SAVEs to mean anything")
        self.assertGreater(durable, 0)

    def test_kill_mid_save_leaves_no_lasting_temporary_file(self):
        server, _ = self.start_server('""')
        client = server.client()
        client.execute_command("BF.ADD", "small", "kept")
        self.assertTrue(client.save())
        with open(os.path.join(self.dir, DUMP), "rb") as f:
            saved = f.read()
        # ~48 MB of bits, items in nearly every region of them (a snapshot
        # writes only the regions items touched): a background save takes
        # long enough to be caught.
        client.execute_command("BF.RESERVE", "big", 0.01, 40000000)
        add_range(client, "big", 0, 500000, batch=10000)
        client.response_callbacks.pop("BGSAVE", None)
        caught = []

        def caught_or_finished():
            caught[:] = temp_files(self.dir)
            return caught or client.info("persistence")["rdb_bgsave_in_progress"] == 0
        for _attempt in range(10):
            self.assertEqual(client.execute_command("BGSAVE"), b"Background saving started")
            # No pause between looks: the file lives only while the save runs.
            wait_until(caught_or_finished, 20, "a temporary file or the save's end", interval=0)
            if caught:
                break
        self.assertTrue(caught, "never saw the temporary file of a running BGSAVE")
        self.assertEqual(server.kill(), -signal.SIGKILL)
        with open(os.path.join(self.dir, DUMP), "rb") as f:
            self.assertEqual(f.read(), saved, "the snapshot was replaced by an unfinished save")
        stale = temp_files(self.dir)
        self.assertTrue(stale, "the kill did not interrupt the save")

        server, _ = self.start_server('""')
        client = server.client()
        self.assertEqual(client.execute_command("BF.EXISTS", "small", "kept"), 1)
        # Not in the snapshot, but journaled.
        self.assertEqual(client.exists("big"), 1)
        self.assertTrue(client.save())
        # Each stale file is a partial copy of the whole keyspace: if nobody
        # removes them, every crash during a save leaks that much disk.
        self.assertEqual(temp_files(self.dir), [],
                         "stale temporary files of killed saves are never removed")


if __name__ == "__main__":
    unittest.main()
