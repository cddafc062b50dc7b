"""Two million small filters (150,000 under a sanitizer): the work
the server does at idle and the cost of DBSIZE, INFO keyspace and SCAN do
not grow with the key count, memory per key stays small, and SCAN still
returns every key. (tests/bench's
many_keys_bench.py measures the same at ten million.)"""

import os
import unittest

import harness
import many_keys

# A sanitized build (5 to 15 times slower, its own allocator) checks the same
# paths, the keyspace's growth through several rehashes included, with fewer
# keys; the bounds below are per key.
KEYS = 150_000 if os.environ.get("BLOOMERY_SANITIZED") == "1" else 2_000_000


class TwoMillionKeys(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.server = harness.Server(threads=2)
        cls.server.start()
        cls.r = cls.server.client()
        memory = cls.r.info("memory")
        cls.used_start = int(memory["used_memory"])
        cls.allocator = memory["mem_allocator"]
        cls.rss_start = harness.rss_bytes(cls.server.process.pid)
        cls.with_deadline = many_keys.load_keys(cls.server.port, 0, KEYS)
        # The journal's buffer is counted in used_memory until it is on
        # disk, and the rewrites the load triggers are busy, not idle:
        # measure once both are done.
        harness.wait_until(lambda: many_keys.settled(cls.r), timeout=600,
                           what="the journal to settle")

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def test_counts_are_exact(self):
        self.assertEqual(self.r.dbsize(), KEYS)
        keyspace = self.r.info("keyspace")["db0"]
        self.assertEqual(keyspace["keys"], KEYS)
        self.assertEqual(keyspace["expires"], self.with_deadline)
        # An hour away, less the time the load took.
        self.assertGreater(keyspace["avg_ttl"], 3_000_000)
        self.assertLessEqual(keyspace["avg_ttl"], 3_600_000)

    def test_memory_per_key_stays_under_300_bytes(self):
        used = (int(self.r.info("memory")["used_memory"]) - self.used_start) / KEYS
        rss = (harness.rss_bytes(self.server.process.pid) - self.rss_start) / KEYS
        print("\n[ measured ] %d keys (%d with a deadline): used_memory %.1f B/key, RSS %.1f B/key"
              % (KEYS, self.with_deadline, used, rss))
        self.assertLessEqual(used, 300)
        if self.allocator.startswith("jemalloc"):
            # Only the release build links jemalloc; sanitizers bring their own.
            self.assertLessEqual(rss, 300)

    def test_idle_server_uses_under_two_percent_of_a_core(self):
        share = many_keys.idle_cpu_share(self.server.process.pid, 10.0)
        print("\n[ measured ] idle with %d keys: %.2f %% of a core" % (KEYS, share * 100))
        # The bound is the release build's (jemalloc). A sanitizer build runs
        # the same idle work 5 to 15 times slower (TSan: 2.2 % where the
        # release build spends 0.3 %), so it gets five times the bound: work
        # that grew with the key count would still pass it many times over.
        self.assertLess(share, 0.02 if self.allocator.startswith("jemalloc") else 0.10)

    def test_dbsize_info_and_scan_take_under_a_millisecond(self):
        results = many_keys.server_usec_per_call(self.r, many_keys.BOUNDED_CALLS)
        for name, (server_usec, client_usec) in sorted(results.items()):
            print("\n[ measured ] %s: %.1f us in the server, %.0f us round trip (median)"
                  % (name, server_usec, client_usec))
            self.assertLess(server_usec, 1000, name)

    def test_scan_with_nothing_matching_returns_a_cursor_to_go_on(self):
        cursor, keys = self.r.scan(0, match="nomatch*", count=10)
        self.assertEqual(keys, [])
        self.assertNotEqual(cursor, 0)
        cursor, keys = self.r.scan(0, _type="string", count=10)
        self.assertEqual(keys, [])
        self.assertNotEqual(cursor, 0)

    def test_a_full_scan_returns_every_key(self):
        seen = set()
        cursor, calls = 0, 0
        while True:
            cursor, keys = self.r.scan(cursor, count=5000)
            seen.update(keys)
            calls += 1
            if cursor == 0 or calls > 100_000:
                break
        self.assertEqual(cursor, 0)
        self.assertEqual(len(seen), KEYS)
        self.assertIn(b"k:0", seen)
        self.assertIn(b"k:%d" % (KEYS - 1), seen)


if __name__ == "__main__":
    unittest.main()
