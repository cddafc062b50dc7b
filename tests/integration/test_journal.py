"""The journal (README "Durability", proto/journal.md): kill -9 under load,
disk errors, the on-disk promises and the operator's tools.

BLOOMERY_JOURNAL_KILLS sets the number of kill -9 rounds with
--appendfsync always (default 100; 25 under sanitizers, whose builds are
several times slower); everysec and no run a quarter as many each.
"""

import glob
import os
import random
import resource
import signal
import subprocess
import tempfile
import threading
import time
import unittest

import redis

from harness import BINARY, Server, missing_items, wait_until

SANITIZED = "/asan/" in BINARY or "/tsan/" in BINARY
KILLS = int(os.environ.get("BLOOMERY_JOURNAL_KILLS", "25" if SANITIZED else "100"))
BATCH = 40


def segments(directory):
    return sorted(p for p in glob.glob(os.path.join(directory, "journal.*"))
                  if not p.endswith(".stale"))


class Adder(threading.Thread):
    """Adds consecutive integers to `key` with pipelined BF.MADD batches and
    records when each batch was acknowledged."""

    def __init__(self, port, key, first, pipeline=4):
        super().__init__(daemon=True)
        self.port, self.key, self.next_item, self.pipeline = port, key, first, pipeline
        self.acked = []  # (monotonic time of the reply, first item, last item)
        self.stop_event = threading.Event()

    def run(self):
        try:
            client = redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=10)
            while not self.stop_event.is_set():
                pipe = client.pipeline(transaction=False)
                batches = []
                for _ in range(self.pipeline):
                    items = list(range(self.next_item, self.next_item + BATCH))
                    self.next_item += BATCH
                    pipe.execute_command("BF.MADD", self.key, *items)
                    batches.append(items)
                pipe.execute()
                now = time.monotonic()
                for items in batches:
                    self.acked.append((now, items[0], items[-1]))
        except (redis.ConnectionError, redis.TimeoutError, OSError):
            pass  # the server was killed


class Reader(threading.Thread):
    """Asks BF.EXISTS for items already sent and records those answering 1."""

    def __init__(self, port, adder):
        super().__init__(daemon=True)
        self.port, self.adder = port, adder
        self.seen = []
        self.stop_event = threading.Event()

    def run(self):
        try:
            client = redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=10)
            rng = random.Random(self.port)
            while not self.stop_event.is_set():
                top = self.adder.next_item - 1
                if top < 1:
                    time.sleep(0.001)
                    continue
                item = rng.randint(max(1, top - 4 * BATCH), top)
                if client.execute_command("BF.EXISTS", self.adder.key, item) == 1:
                    self.seen.append(item)
        except (redis.ConnectionError, redis.TimeoutError, OSError):
            pass


class JournalTestCase(unittest.TestCase):
    def setUp(self):
        self.servers = []
        tmp = tempfile.TemporaryDirectory(prefix="bloomery-journal-")
        self.addCleanup(tmp.cleanup)
        self.dir = tmp.name

    def tearDown(self):
        for server in self.servers:
            server.cleanup()

    def start(self, *args, data_dir=None, save='""', **kwargs):
        server = Server(*args, data_dir=data_dir or self.dir, save=save, **kwargs)
        self.servers.append(server)
        server.start(timeout=60)
        return server


class KillUnderLoad(JournalTestCase):
    def kill_rounds(self, policy, rounds, seed):
        """Each round: two adders and a reader against one server, SIGKILL
        at a random moment, restart on the same directory. Every batch that
        was acknowledged, and every item a reader saw answer 1, must answer
        1 after the restart. Snapshots run every second or so in half the
        rounds, so the journal is also cut and dropped under load."""
        directory = self.dir
        rng = random.Random(seed)
        next_item = {"a": 1, "b": 1}
        checked = 0
        slowest_start = 0.0
        for round_number in range(rounds):
            save = "1 1" if round_number % 2 else ""
            began = time.monotonic()
            server = self.start("--appendfsync", policy, data_dir=directory, save=save)
            slowest_start = max(slowest_start, time.monotonic() - began)
            adders = [Adder(server.port, "j:" + key, next_item[key]) for key in ("a", "b")]
            readers = [Reader(server.port, adders[0])]
            for thread in adders + readers:
                thread.start()
            time.sleep(rng.uniform(0.03, 0.25))
            self.assertEqual(server.kill(), -signal.SIGKILL)
            for thread in adders + readers:
                thread.stop_event.set()
                thread.join(10)
            for adder, key in zip(adders, ("a", "b")):
                next_item[key] = adder.next_item
            self.servers.remove(server)

            server = self.start("--appendfsync", policy, data_dir=directory)
            client = server.client()
            for adder in adders:
                acked = [i for (_t, lo, hi) in adder.acked for i in range(lo, hi + 1)]
                self.assertEqual(missing_items(client, adder.key, acked), [],
                                 "round %d: acknowledged adds lost" % round_number)
                checked += len(acked)
            self.assertEqual(missing_items(client, "j:a", readers[0].seen), [],
                             "round %d: an item that answered 1 answers 0" % round_number)
            server.terminate()
            self.servers.remove(server)
        print("\n[ measured ] %d kills with appendfsync %s: %d acknowledged items checked, "
              "0 lost; slowest restart %.2f s" % (rounds, policy, checked, slowest_start))
        self.assertGreater(checked, rounds * BATCH)

    def test_always_loses_no_acknowledged_add_and_no_item_seen_present(self):
        self.kill_rounds("always", KILLS, 20261124)

    def test_everysec_loses_no_acknowledged_add_to_a_crash_of_the_process(self):
        # everysec writes the records before it answers (fdatasync once a
        # second covers a crash of the machine, not tested here): a kill
        # loses nothing a client was told, written or seen.
        self.kill_rounds("everysec", max(KILLS // 4, 5), 20261125)

    def test_no_fsync_loses_no_acknowledged_add_to_a_crash_of_the_process(self):
        self.kill_rounds("no", max(KILLS // 4, 5), 20261127)

    def test_kill_right_after_the_last_reply_loses_nothing(self):
        # The last add's reply, then SIGKILL at once: nothing may still wait
        # in the server for the writer thread's next round.
        for policy in ("everysec", "no"):
            directory = tempfile.mkdtemp(prefix="bloomery-kill-now-", dir=self.dir)
            for round_number in range(10):
                server = self.start("--appendfsync", policy, data_dir=directory)
                client = server.client()
                items = ["%d:%d" % (round_number, i) for i in range(50)]
                for item in items:
                    client.execute_command("BF.ADD", "now", item)
                self.assertEqual(server.kill(), -signal.SIGKILL)
                self.servers.remove(server)
                server = self.start("--appendfsync", policy, data_dir=directory)
                self.assertEqual(missing_items(server.client(), "now", items), [],
                                 "%s, round %d" % (policy, round_number))
                server.terminate()
                self.servers.remove(server)


class Durability(JournalTestCase):
    def test_shutdown_nosave_and_no_save_points_keep_journaled_adds(self):
        server = self.start(save="")
        client = server.client()
        client.execute_command("BF.RESERVE", "k", 0.01, 1000)
        client.execute_command("BF.MADD", "k", "a", "b")
        client.execute_command("BF.ADD", "auto", "x")
        client.execute_command("PEXPIREAT", "auto", 4102444800000)
        client.rename("auto", "renamed")
        try:
            client.execute_command("SHUTDOWN", "NOSAVE")
        except redis.ConnectionError:
            pass
        self.assertEqual(server.wait(30), 0)
        self.assertFalse(os.path.exists(os.path.join(server.data_dir, "dump.bloomery")))
        again = self.start(data_dir=server.data_dir)
        client = again.client()
        self.assertEqual(client.execute_command("BF.MEXISTS", "k", "a", "b", "c"), [1, 1, 0])
        self.assertEqual(client.execute_command("BF.EXISTS", "renamed", "x"), 1)
        self.assertEqual(client.exists("auto"), 0)
        self.assertEqual(client.pttl("renamed") > 0, True)
        persistence = client.info("persistence")
        self.assertEqual(persistence["aof_enabled"], 1)
        self.assertGreater(persistence["aof_loaded_records"], 0)

    def test_items_never_reach_the_disk_in_the_clear(self):
        server = self.start()
        client = server.client()
        secret = "https://example.com/private/" + "x7q" * 5
        client.execute_command("BF.ADD", "urls", secret)
        client.save()
        server.terminate()
        for path in glob.glob(os.path.join(server.data_dir, "*")):
            if path.endswith(".log"):
                continue
            with open(path, "rb") as f:
                self.assertNotIn(secret.encode(), f.read(), path)

    def test_bgrewriteaof_snapshots_and_drops_the_covered_journal(self):
        # always: the kill below must not race the last add's write.
        server = self.start("--appendfsync", "always")
        client = server.client()
        for i in range(50):
            client.execute_command("BF.MADD", "r", *range(i * 200, i * 200 + 200))
        grown = client.info("persistence")["aof_current_size"]
        self.assertGreater(grown, 50 * 200 * 17)
        client.response_callbacks.pop("BGREWRITEAOF", None)
        self.assertEqual(client.execute_command("BGREWRITEAOF"),
                         b"Background append only file rewriting started")
        wait_until(lambda: not client.info("persistence")["aof_rewrite_in_progress"] and
                   client.info("persistence")["aof_rewrites"] != 0, 30, "the rewrite to finish",
                   interval=0.05)
        info = client.info("persistence")
        self.assertEqual(info["aof_last_bgrewrite_status"], "ok")
        self.assertLess(info["aof_current_size"], 1000)
        self.assertEqual(len(segments(server.data_dir)), 1)
        client.execute_command("BF.ADD", "r", "after")
        server.kill()
        again = self.start("--appendfsync", "always", data_dir=server.data_dir)
        client = again.client()
        self.assertEqual(missing_items(client, "r", range(0, 50 * 200)), [])
        self.assertEqual(client.execute_command("BF.EXISTS", "r", "after"), 1)

    def test_a_full_disk_refuses_writes_keeps_reads_and_recovers(self):
        # RLIMIT_FSIZE stands in for a full disk (EFBIG instead of ENOSPC, the
        # same path); the soft limit is raised again from outside with
        # prlimit, as freeing space would.
        limit = 256 * 1024

        def small_files():
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))

        server = self.start("--appendfsync", "always", preexec_fn=small_files)
        client = redis.Redis(host="127.0.0.1", port=server.port, socket_timeout=3)
        acked = []
        refused = None
        for i in range(0, 40000, 100):
            try:
                client.execute_command("BF.MADD", "full", *range(i, i + 100))
                acked += range(i, i + 100)
            except redis.ResponseError as error:
                refused = str(error)
                break
            except redis.TimeoutError:
                # The batch whose record hit the limit is not durable: its
                # reply waits (it is not acknowledged) until the disk
                # recovers. Later writes are refused at once.
                client = redis.Redis(host="127.0.0.1", port=server.port, socket_timeout=3)
                try:
                    client.execute_command("BF.ADD", "full", "next")
                except redis.ResponseError as error:
                    refused = str(error)
                break
        self.assertIsNotNone(refused, "the journal never reached the file size limit")
        self.assertIn("MISCONF Errors writing to the AOF file", refused)
        info = client.info("persistence")
        self.assertEqual(info["aof_last_write_status"], "err")
        self.assertIn("File too large", info["aof_last_write_error"])
        # Reads are served; writes stay refused.
        self.assertEqual(missing_items(client, "full", acked), [])
        with self.assertRaises(redis.ResponseError):
            client.execute_command("BF.ADD", "full", "refused")
        resource.prlimit(server.process.pid, resource.RLIMIT_FSIZE,
                         (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
        # Refused (an error reply) until the writer has retried and succeeded.
        wait_until(lambda: client.execute_command("BF.ADD", "full", "recovered") in (0, 1), 15,
                   "writes to be accepted again", interval=0.1)
        self.assertEqual(client.execute_command("BF.EXISTS", "full", "recovered"), 1)
        self.assertEqual(client.info("persistence")["aof_last_write_status"], "ok")
        server.kill()
        again = self.start("--appendfsync", "always", data_dir=server.data_dir)
        client = again.client()
        self.assertEqual(missing_items(client, "full", acked + ["recovered"]), [])


class SmallDisk:
    """A data directory whose disk fills up: a 4 MiB tmpfs where the test
    may mount one (as root), else a plain directory whose files the server
    may not grow (RLIMIT_FSIZE, set on the running server with prlimit:
    EFBIG instead of ENOSPC, the same path in the server)."""

    def __init__(self, test):
        self.path = tempfile.mkdtemp(prefix="bloomery-small-disk-")
        test.addCleanup(os.rmdir, self.path)
        mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", self.path],
                                 capture_output=True)
        self.tmpfs = mounted.returncode == 0
        if self.tmpfs:
            test.addCleanup(subprocess.run, ["umount", "-l", self.path], capture_output=True)
        self.filler = os.path.join(self.path, "filler")

    def fill(self, pid):
        if not self.tmpfs:
            size = max(os.path.getsize(p) for p in segments(self.path))
            resource.prlimit(pid, resource.RLIMIT_FSIZE, (size, resource.RLIM_INFINITY))
            return
        fd = os.open(self.filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        try:
            for size in (65536, 4096, 1):  # down to what is left of a page
                try:
                    while os.write(fd, bytes(size)) > 0:
                        pass
                except OSError:
                    pass
        finally:
            os.close(fd)

    def free(self, pid):
        if not self.tmpfs:
            resource.prlimit(pid, resource.RLIMIT_FSIZE,
                             (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
        elif os.path.exists(self.filler):
            os.remove(self.filler)


class FullDisk(JournalTestCase):
    """No reply says an add is kept while its record is not written: on a
    full disk the batch whose record failed waits for the writer's retry,
    and the writes after it are refused with -MISCONF."""

    def add_until_the_disk_refuses(self, server):
        """BF.MADDs of 20 new items until one is held (no reply within a
        second) and a later one refused; returns the items acknowledged."""
        client = redis.Redis(host="127.0.0.1", port=server.port, socket_timeout=1)
        acked, held = [], False
        for start in range(0, 200000, 20):
            items = ["i%d" % i for i in range(start, start + 20)]
            try:
                client.execute_command("BF.MADD", "k", *items)
                acked += items
            except redis.TimeoutError:
                held = True
                client = redis.Redis(host="127.0.0.1", port=server.port, socket_timeout=1)
            except redis.ResponseError as error:
                self.assertIn("MISCONF", str(error))
                break
        self.assertTrue(held, "no reply was held when the journal's write failed")
        return acked

    def check_policy(self, policy):
        disk = SmallDisk(self)
        server = self.start("--appendfsync", policy, data_dir=disk.path, log_dir=self.dir)
        server.client().execute_command("BF.RESERVE", "k", 0.01, 100000)
        # Killed while the disk is full: only what was acknowledged counts.
        disk.fill(server.process.pid)
        acked = self.add_until_the_disk_refuses(server)
        self.assertEqual(server.kill(), -signal.SIGKILL)
        disk.free(server.process.pid)
        again = self.start("--appendfsync", policy, data_dir=disk.path, log_dir=self.dir)
        self.assertEqual(missing_items(again.client(), "k", acked), [],
                         policy + ": acknowledged adds lost")
        # A held reply leaves once space is back and the retry wrote it.
        disk.fill(again.process.pid)
        state = {"sent_at": None, "acked": [], "held": None, "freed": False}
        adder = threading.Thread(target=self.add_until_held, args=(again.port, state), daemon=True)
        adder.start()
        wait_until(lambda: not adder.is_alive() or (state["sent_at"] is not None and
                                                    time.monotonic() - state["sent_at"] > 1.0),
                   what="a reply to be held")
        self.assertTrue(adder.is_alive(), policy + ": no reply was held on the full disk")
        state["freed"] = True
        disk.free(again.process.pid)
        adder.join(30)
        self.assertIsNotNone(state["held"], policy + ": the held reply never came")
        self.assertEqual(again.kill(), -signal.SIGKILL)
        third = self.start("--appendfsync", policy, data_dir=disk.path, log_dir=self.dir)
        client = third.client()
        self.assertEqual(missing_items(client, "held", state["acked"]), [], policy)
        self.assertEqual(missing_items(client, "k", acked), [], policy)
        third.terminate()
        return disk.tmpfs, len(acked) + len(state["acked"])

    @staticmethod
    def add_until_held(port, state):
        """BF.MADDs of 20 new items to "held" until one is answered only
        after the test freed the disk (or one is refused)."""
        client = redis.Redis(host="127.0.0.1", port=port, socket_timeout=60)
        for start in range(0, 200000, 20):
            items = ["h%d" % i for i in range(start, start + 20)]
            state["sent_at"] = time.monotonic()
            try:
                client.execute_command("BF.MADD", "held", *items)
            except redis.ResponseError:
                return
            state["sent_at"] = None
            state["acked"] += items
            if state["freed"]:
                state["held"] = items
                return

    def test_acknowledged_adds_survive_kill_9_on_a_full_disk_under_every_policy(self):
        results = [(policy,) + self.check_policy(policy) for policy in ("always", "everysec", "no")]
        for policy, tmpfs, acked in results:
            print("\n[ measured ] appendfsync %s, %s: %d acknowledged items kept, the held "
                  "reply sent once space was back" % (policy, "tmpfs" if tmpfs else "RLIMIT_FSIZE",
                                                     acked))


class Tools(JournalTestCase):
    def test_a_bad_record_refuses_the_start_and_check_journal_repairs_it(self):
        server = self.start("--appendfsync", "always")
        client = server.client()
        for i in range(20):
            client.execute_command("BF.MADD", "c", *range(i * 10, i * 10 + 10))
        server.kill()
        path = segments(server.data_dir)[-1]
        size = os.path.getsize(path)
        with open(path, "r+b") as f:
            f.seek(size // 2)
            byte = f.read(1)
            f.seek(size // 2)
            f.write(bytes([byte[0] ^ 0x20]))
        refused = Server(data_dir=server.data_dir)
        self.servers.append(refused)
        refused.start(expect_failure=True)
        self.assertNotEqual(refused.wait(30), 0)
        self.assertIn(path, refused.log())
        self.assertIn("offset", refused.log())
        check = subprocess.run([BINARY, "--check-journal", path], capture_output=True, text=True,
                               timeout=60)
        self.assertEqual(check.returncode, 1, check.stdout + check.stderr)
        self.assertIn("checksum", check.stderr)
        fixed = subprocess.run([BINARY, "--check-journal", path, "--fix"], capture_output=True,
                               text=True, timeout=60)
        self.assertEqual(fixed.returncode, 0, fixed.stdout + fixed.stderr)
        self.assertIn("fixed", fixed.stdout)
        self.assertLess(os.path.getsize(path), size)
        again = self.start(data_dir=server.data_dir)
        # What came before the bad record is there.
        self.assertEqual(again.client().execute_command("BF.EXISTS", "c", 0), 1)

    def test_a_torn_last_record_is_cut_off_with_a_warning(self):
        server = self.start("--appendfsync", "always")
        client = server.client()
        client.execute_command("BF.MADD", "t", *range(100))
        server.kill()
        path = segments(server.data_dir)[-1]
        with open(path, "ab") as f:
            f.write(b"\x30\x00\x00\x00\x02torn")
        # --check-journal tells a torn last write (2: a start cuts it off)
        # from corruption (1), and changes nothing without --fix.
        size = os.path.getsize(path)
        check = subprocess.run([BINARY, "--check-journal", path], capture_output=True, text=True,
                               timeout=60)
        self.assertEqual(check.returncode, 2, check.stdout + check.stderr)
        self.assertIn("torn", check.stderr)
        self.assertEqual(os.path.getsize(path), size)
        again = self.start(data_dir=server.data_dir)
        self.assertIn("cutting", again.log())
        self.assertEqual(missing_items(again.client(), "t", range(100)), [])

    def record_offsets(self, path):
        """File offsets of the records of a segment, in order."""
        offsets = []
        with open(path, "rb") as f:
            data = f.read()
        position = 40  # the segment header
        while position + 13 <= len(data):
            offsets.append(position)
            position += 13 + int.from_bytes(data[position:position + 4], "little")
        return offsets

    def refused_start(self, data_dir):
        refused = Server(data_dir=data_dir)
        self.servers.append(refused)
        refused.start(expect_failure=True)
        self.assertNotEqual(refused.wait(30), 0)
        return refused

    def journal_of_adds(self, count):
        """A stopped server's data dir after `count` BF.ADDs to "k": (data dir,
        its newest segment, that segment's size, the file offset of its middle
        record)."""
        server = self.start()
        client = server.client()
        for i in range(count):
            client.execute_command("BF.ADD", "k", "item-%d" % i)
        self.assertEqual(server.terminate(), 0)
        path = segments(server.data_dir)[-1]
        offsets = self.record_offsets(path)
        return server.data_dir, path, os.path.getsize(path), offsets[len(offsets) // 2]

    def test_a_corrupt_length_in_the_middle_refuses_the_start_and_changes_nothing(self):
        # A length field made huge mid-file reads as "the file ends inside a
        # record", but valid records follow it: a crash cannot leave that.
        # The start is refused naming the file and the offset, nothing on
        # disk changes, and --check-journal calls it corrupt, not torn.
        data_dir, path, size, middle = self.journal_of_adds(2000)
        with open(path, "r+b") as f:
            f.seek(middle + 3)
            f.write(b"\x7f")
        refused = self.refused_start(data_dir)
        self.assertIn(path, refused.log())
        self.assertIn("offset %d" % (middle - 40), refused.log())
        self.assertEqual(os.path.getsize(path), size)
        check = subprocess.run([BINARY, "--check-journal", path], capture_output=True, text=True,
                               timeout=60)
        self.assertEqual(check.returncode, 1, check.stdout + check.stderr)
        self.assertNotIn("torn", check.stdout + check.stderr)
        self.assertEqual(os.path.getsize(path), size)

    def test_zeros_from_the_middle_to_the_end_refuse_the_start(self):
        data_dir, path, size, middle = self.journal_of_adds(200)
        with open(path, "r+b") as f:
            f.seek(middle)
            f.write(bytes(size - middle))
        refused = self.refused_start(data_dir)
        self.assertIn(path, refused.log())
        self.assertEqual(os.path.getsize(path), size)
        fixed = subprocess.run([BINARY, "--check-journal", path, "--fix"], capture_output=True,
                               text=True, timeout=60)
        self.assertEqual(fixed.returncode, 0, fixed.stdout + fixed.stderr)
        self.assertEqual(os.path.getsize(path), middle)
        again = self.start(data_dir=data_dir)
        self.assertEqual(again.client().execute_command("BF.EXISTS", "k", "item-0"), 1)

    def test_a_refused_loadchunk_is_not_journaled(self):
        server = self.start()
        client = server.client()
        client.execute_command("BF.RESERVE", "k", 0.01, 10000000)
        base = client.info("persistence")["aof_current_size"]
        chunk = bytes(8 * 1024 * 1024)  # whole words, but no valid checksum
        for _ in range(5):
            with self.assertRaises(redis.ResponseError):
                client.execute_command("BF.LOADCHUNK", "k", 1 + len(chunk) - 8, chunk)
        client.execute_command("BF.ADD", "k", "after")
        self.assertEqual(client.execute_command("WAIT", 0, 0), 0)
        wait_until(lambda: client.info("persistence")["aof_buffer_length"] == 0,
                   what="the journal buffers to be written")
        grown = client.info("persistence")["aof_current_size"] - base
        self.assertLess(grown, 4096, "refused chunks reached the journal")

    def test_a_segment_name_beyond_64_bits_does_not_stop_the_start(self):
        server = self.start()
        server.client().execute_command("BF.ADD", "k", "x")
        self.assertEqual(server.terminate(), 0)
        with open(os.path.join(server.data_dir, "journal.99999999999999999999"), "w") as f:
            f.write("stray")
        again = self.start(data_dir=server.data_dir)
        self.assertEqual(again.client().execute_command("BF.EXISTS", "k", "x"), 1)

    def test_a_short_file_this_server_did_not_write_is_never_deleted(self):
        # Named like the newest segment and shorter than a header, but not
        # the start of one: no crash of ours left it. The start is refused,
        # naming it, and the file stays as it was.
        server = self.start()
        server.client().execute_command("BF.ADD", "k", "x")
        self.assertEqual(server.terminate(), 0)
        stray = os.path.join(server.data_dir, "journal.18446744073709551615")
        with open(stray, "wb") as f:
            f.write(b"0123456789abcdef")
        refused = self.refused_start(server.data_dir)
        self.assertIn(stray, refused.log())
        self.assertIn("not a file this server wrote", refused.log())
        with open(stray, "rb") as f:
            self.assertEqual(f.read(), b"0123456789abcdef")
        # Moved away as the message says, the server starts with its data.
        os.rename(stray, os.path.join(server.data_dir, "stray.bin"))
        again = self.start(data_dir=server.data_dir)
        self.assertEqual(again.client().execute_command("BF.EXISTS", "k", "x"), 1)


if __name__ == "__main__":
    unittest.main(verbosity=2)
