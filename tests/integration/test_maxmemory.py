"""--maxmemory (README "Limits"): filters are counted as allocated, at full
size, when reserved; past the limit writes answer -OOM while reads and
deletes go on; a filter costs few bytes per key and gives them back.

Each of the tests of a named bound here failed on the code before that bound.
"""

import subprocess
import threading
import unittest

import redis

from harness import rss_bytes, wait_until
from test_limits import OOM, LimitsTestCase
from test_protocol import Err


class Maxmemory(LimitsTestCase):
    def test_reservations_are_counted_at_full_size_and_refused_past_the_limit(self):
        s = self.start("--maxmemory", "100mb")
        c = self.raw(s)
        self.assertEqual(s.client().config_get("maxmemory")["maxmemory"], str(100 * 1024 * 1024))
        # Against the server's own start: a sanitized binary maps ~50 MB of
        # itself at start (an ASan build: about 74 MB RSS idle).
        rss_at_start = rss_bytes(s.process.pid)
        # 18M items at 0.5 %: 24.8 MB each, lazily committed but counted whole.
        accepted = 0
        for i in range(10):
            reply = c.call("BF.RESERVE", "big:%d" % i, "0.01", "18000000")
            if isinstance(reply, Err):
                self.assertErrorReply(reply, OOM)
                self.assertEqual(c.call("EXISTS", "big:%d" % i), 0)
            else:
                accepted += 1
        self.assertEqual(accepted, 4)
        memory = s.client().info("memory")
        self.assertGreaterEqual(int(memory["used_memory"]), 4 * 20 * 1000 * 1000)
        self.assertLessEqual(int(memory["used_memory"]), 100 * 1024 * 1024)
        # Nothing touched yet: less than one of the four 24.8 MB filters.
        self.assertLess(rss_bytes(s.process.pid) - rss_at_start, 24 * 1024 * 1024)
        # Reads and deletes still work; a delete makes room again.
        self.assertEqual(c.call("BF.EXISTS", "big:0", "x"), 0)
        self.assertEqual(c.call("DEL", "big:0"), 1)
        self.assertEqual(c.call("BF.RESERVE", "big:again", "0.01", "18000000"), b"OK")

    def test_concurrent_reservations_never_pass_the_limit_together(self):
        # 64 clients on 8 threads each ask for a 94 MB filter at once under a
        # 100 MB limit: the bytes are reserved before they are allocated, so
        # at most one succeeds (a check followed by an allocation let 8 in).
        s = self.start("--maxmemory", "100mb", threads=8)
        for round_number in range(3):  # a race: several bursts
            barrier = threading.Barrier(64)
            replies = [None] * 64

            def reserve(i):
                client = redis.Redis(host="127.0.0.1", port=s.port, socket_timeout=60)
                client.ping()
                barrier.wait(30)
                try:
                    replies[i] = client.execute_command("BF.RESERVE", "huge:%d" % i, "0.01",
                                                        "75000000", "NONSCALING")
                except redis.ResponseError as error:
                    replies[i] = error
                client.close()

            threads = [threading.Thread(target=reserve, args=(i,)) for i in range(64)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(120)
            created = [r for r in replies if r == b"OK"]
            self.assertLessEqual(len(created), 1, "round %d: %d filters of 94 MB created under "
                                 "a 100 MB limit" % (round_number, len(created)))
            for reply in replies:
                if reply != b"OK":
                    self.assertTrue(str(reply).startswith("OOM"), reply)
            self.assertEqual(s.client().dbsize(), len(created))
            self.assertLessEqual(int(s.client().info("memory")["used_memory"]),
                                 100 * 1024 * 1024)
            s.client().flushall()

    def test_two_hundred_large_reservations_stop_at_the_limit(self):
        s = self.start("--maxmemory", "1gb")
        r = s.client()
        pipe = r.pipeline(transaction=False)
        for i in range(200):
            pipe.execute_command("BF.RESERVE", "big:%d" % i, 0.01, 150000000)
        replies = pipe.execute(raise_on_error=False)
        ok = [x for x in replies if not isinstance(x, Exception)]
        refused = [x for x in replies if isinstance(x, Exception)]
        # Each is ~207 MB (classic) or ~215 MB (blocked, the default): as
        # many as fit in 1 GiB are created, and the next one is refused.
        size = r.execute_command("BF.INFO", "big:0", "SIZE")[0]
        used = int(r.info("memory")["used_memory"])
        self.assertGreaterEqual(len(ok), 4)
        self.assertEqual(len(ok) + len(refused), 200)
        self.assertLessEqual(used, 1024 ** 3)
        self.assertGreater(used + size, 1024 ** 3)  # one more would not have fit
        self.assertTrue(all("maxmemory" in str(e) for e in refused), refused[:1])
        self.assertTrue(r.ping())

    def test_past_the_limit_writes_are_refused_and_reads_and_deletes_served(self):
        d = self.make_dir()
        s = self.start(data_dir=d)
        r = s.client()
        for i in range(3):
            r.execute_command("BF.RESERVE", "f%d" % i, 0.01, 10000000)  # 13.8 MB each
            r.execute_command("BF.ADD", "f%d" % i, "kept")
        self.assertTrue(r.save())
        s.terminate()
        # Restarted with less memory than its data: it loads, then refuses to grow.
        s2 = self.start("--maxmemory", "20mb", data_dir=d)
        c = self.raw(s2)
        self.assertGreater(int(s2.client().info("memory")["used_memory"]), 20 * 1024 * 1024)
        self.assertErrorReply(c.call("BF.ADD", "f0", "more"), OOM)
        self.assertErrorReply(c.call("BF.MADD", "f0", "a", "b"), OOM)
        self.assertErrorReply(c.call("BF.RESERVE", "n", "0.01", "10"), OOM)
        self.assertEqual(c.call("BF.EXISTS", "f0", "kept"), 1)
        self.assertEqual(c.call("BF.MEXISTS", "f1", "kept", "no"), [1, 0])
        self.assertIsInstance(c.call("BF.INFO", "f2"), list)
        self.assertEqual(c.call("DEL", "f0", "f1"), 2)
        self.assertEqual(c.call("BF.ADD", "f2", "more"), 1)

    def test_a_million_small_filters_cost_few_bytes_each_and_are_given_back(self):
        # The target: at most 300 bytes per default filter, keyspace
        # included. Measured here on 200,000 keys.
        n = 200000
        s = self.start()
        r = s.client()
        allocator = r.info("memory")["mem_allocator"]
        rss_start = rss_bytes(s.process.pid)
        used_start = int(r.info("memory")["used_memory"])
        payload = b"".join(b"*3\r\n$6\r\nBF.ADD\r\n$%d\r\n%s\r\n$1\r\nx\r\n" % (len(k), k)
                           for k in (b"k:%d" % i for i in range(n)))
        result = subprocess.run(["redis-cli", "-p", str(s.port), "--pipe"], input=payload,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
        self.assertEqual(result.returncode, 0, result.stdout)
        self.assertEqual(r.dbsize(), n)
        # The journal's buffer (records not yet fsynced, at most about a
        # second's worth with everysec) is counted too; measure once it is
        # on disk.
        wait_until(lambda: int(r.info("persistence")["aof_buffer_length"]) == 0, 60,
                   "the journal's buffer to be on disk", interval=0.1)
        used = int(r.info("memory")["used_memory"]) - used_start
        per_key_used = used / n
        print("\n[ measured ] %d keys: used_memory %.1f B/key, RSS %.1f B/key (%s)" % (
            n, per_key_used, (rss_bytes(s.process.pid) - rss_start) / n, allocator))
        self.assertLessEqual(per_key_used, 300)
        self.assertGreaterEqual(per_key_used, 224)  # the filter alone is 224 bytes
        if allocator.startswith("jemalloc"):
            # RSS is the allocator's business: only the release build links
            # jemalloc (sanitizer builds replace malloc with their own). The
            # pages the load's buffers used go back to the kernel over
            # jemalloc's decay time (10 s): wait for that state, bounded.
            wait_until(lambda: (rss_bytes(s.process.pid) - rss_start) / n <= 320, 30,
                       lambda: "RSS of at most 320 B/key (it is %.1f)" %
                       ((rss_bytes(s.process.pid) - rss_start) / n), interval=0.2)
        r.flushall()
        memory = r.info("memory")
        self.assertEqual(int(memory["used_memory_keyspace"]), 0)
        self.assertEqual(int(memory["used_memory_filters"]), 0)
        if allocator.startswith("jemalloc"):
            wait_until(lambda: rss_bytes(s.process.pid) < rss_start + 16 * 1024 * 1024, 60,
                       "RSS to come back within 16 MB of the start", interval=0.2)


if __name__ == "__main__":
    unittest.main()
