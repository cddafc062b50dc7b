"""The commands on keys, through redis-py against the real binary: DBSIZE,
DEL, UNLINK, EXISTS, TYPE, KEYS patterns, SCAN, RENAME, and expiry (TTL,
EXPIRE and its options, EXPIREAT, EXPIRETIME, expired filters vanishing).
"""

import time
import unittest

import harness
from test_generic_commands import CommandsTestCase


class KeyCommandsTest(CommandsTestCase):

    # ---- keyspace ---------------------------------------------------------

    def test_dbsize_del_unlink_exists_type(self):
        self.assertEqual(self.r.dbsize(), 0)
        for k in ("a", "b", "c", "d"):
            self.r.execute_command("BF.ADD", k, "x")
        self.assertEqual(self.r.dbsize(), 4)
        self.assertEqual(self.r.exists("a", "a", "b", "missing"), 3)
        self.assertEqual(self.r.exists("missing"), 0)
        self.assertEqual(self.r.type("a"), b"MBbloom--")
        self.assertEqual(self.r.type("missing"), b"none")
        self.assertEqual(self.r.delete("a", "b", "missing"), 2)
        self.assertEqual(self.r.delete("a"), 0)
        self.assertEqual(self.r.unlink("c", "d", "c"), 2)
        self.assertEqual(self.r.dbsize(), 0)
        self.assertEqual(self.r.execute_command("BF.EXISTS", "a", "x"), 0)
        self.assertTrue(self.error_of("DEL").startswith("ERR wrong number of arguments"))

    def test_keys_patterns(self):
        names = ["hello", "hallo", "hxllo", "hllo", "heeeello", "user:1", "user:2", "user:10", "a*b", "x"]
        for n in names:
            self.r.execute_command("BF.ADD", n, "i")

        def keys(p):
            return sorted(k.decode() for k in self.r.keys(p))
        self.assertEqual(keys("*"), sorted(names))
        self.assertEqual(keys("h?llo"), ["hallo", "hello", "hxllo"])
        self.assertEqual(keys("h*llo"), ["hallo", "heeeello", "hello", "hllo", "hxllo"])
        self.assertEqual(keys("h[ae]llo"), ["hallo", "hello"])
        self.assertEqual(keys("h[^e]llo"), ["hallo", "hxllo"])
        self.assertEqual(keys("h[a-b]llo"), ["hallo"])
        self.assertEqual(keys("user:?"), ["user:1", "user:2"])
        self.assertEqual(keys("user:*"), ["user:1", "user:10", "user:2"])
        self.assertEqual(keys("a\\*b"), ["a*b"])
        self.assertEqual(keys("nomatch*"), [])
        self.assertEqual(keys("x"), ["x"])

    def test_scan_returns_every_key_exactly_once(self):
        pipe = self.r.pipeline(transaction=False)
        for i in range(500):
            pipe.execute_command("BF.ADD", "key:%d" % i, "v")
        for i in range(50):
            pipe.execute_command("BF.ADD", "other:%d" % i, "v")
        pipe.execute()
        expected = {b"key:%d" % i for i in range(500)} | {b"other:%d" % i for i in range(50)}

        def full_scan(*extra):
            seen = []
            cursor = b"0"
            for _ in range(10000):
                reply = self.r.execute_command("SCAN", cursor, *extra)
                cursor, batch = reply
                seen.extend(batch)
                if cursor in (b"0", 0):
                    return seen
            self.fail("SCAN did not terminate")

        for extra in ((), ("COUNT", "7"), ("COUNT", "1000")):
            seen = full_scan(*extra)
            self.assertEqual(len(seen), len(set(seen)), "duplicates with %r" % (extra,))
            self.assertEqual(set(seen), expected)
        seen = full_scan("MATCH", "other:*", "COUNT", "20")
        self.assertEqual(sorted(seen), sorted(k for k in expected if k.startswith(b"other:")))
        seen = full_scan("TYPE", "MBbloom--")
        self.assertEqual(len(seen), 550)
        self.assertEqual(set(seen), expected)
        self.assertEqual(full_scan("TYPE", "string"), [])
        # redis-py's scan_iter agrees.
        self.assertEqual(set(self.r.scan_iter(match="key:1*", count=50)),
                         {k for k in expected if k.startswith(b"key:1")})
        self.assertEqual(self.error_of("SCAN", "notanumber"), "ERR invalid cursor")
        self.assertTrue(self.error_of("SCAN", "0", "COUNT", "0").startswith("ERR"))
        self.assertTrue(self.error_of("SCAN", "0", "BOGUS", "1").startswith("ERR"))

    def test_rename(self):
        self.r.execute_command("BF.RESERVE", "a", "0.01", "777")
        self.r.execute_command("BF.ADD", "a", "item")
        self.assertTrue(self.r.rename("a", "b"))
        self.assertEqual(self.r.exists("a"), 0)
        self.assertEqual(self.r.execute_command("BF.EXISTS", "b", "item"), 1)
        self.assertEqual(self.r.execute_command("BF.INFO", "b", "CAPACITY"), [777])
        self.assertEqual(self.error_of("RENAME", "missing", "x"), "ERR no such key")
        self.assertEqual(self.r.exists("x"), 0)
        # Onto an existing key: overwrites it.
        self.r.execute_command("BF.ADD", "c", "other")
        self.assertTrue(self.r.rename("b", "c"))
        self.assertEqual(self.r.execute_command("BF.INFO", "c", "CAPACITY"), [777])
        self.assertEqual(self.r.dbsize(), 1)
        # To itself: fine, nothing changes.
        self.assertTrue(self.r.rename("c", "c"))
        self.assertEqual(self.r.execute_command("BF.EXISTS", "c", "item"), 1)
        # TTL travels with the key.
        self.r.expire("c", 1000)
        self.r.rename("c", "d")
        self.assertGreater(self.r.ttl("d"), 900)  # 1000 s, less the time taken

    # ---- expiry -----------------------------------------------------------

    def test_ttl_pttl_persist(self):
        self.assertEqual(self.r.ttl("missing"), -2)
        self.assertEqual(self.r.pttl("missing"), -2)
        self.r.execute_command("BF.ADD", "k", "x")
        self.assertEqual(self.r.ttl("k"), -1)
        self.assertEqual(self.r.pttl("k"), -1)
        self.assertEqual(self.r.expire("k", 100), True)
        self.assertIn(self.r.ttl("k"), (99, 100))
        self.assertTrue(98000 < self.r.pttl("k") <= 100000)
        self.assertTrue(self.r.persist("k"))
        self.assertFalse(self.r.persist("k"))
        self.assertFalse(self.r.persist("missing"))
        self.assertEqual(self.r.ttl("k"), -1)
        self.assertEqual(self.r.expire("missing", 100), False)
        self.assertEqual(self.r.exists("missing"), 0)
        self.assertTrue(self.r.pexpire("k", 50000))
        self.assertTrue(49000 < self.r.pttl("k") <= 50000)
        self.assertEqual(self.error_of("EXPIRE", "k", "abc"), "ERR value is not an integer or out of range")
        self.assertEqual(self.error_of("EXPIRE", "k", "1.5"), "ERR value is not an integer or out of range")
        # Still there, TTL unchanged by the failed calls.
        self.assertTrue(49000 < self.r.pttl("k") <= 50000)

    def test_expire_options_nx_xx_gt_lt(self):
        self.r.execute_command("BF.ADD", "k", "x")
        e = lambda *a: self.r.execute_command("EXPIRE", "k", *a)
        self.assertEqual(e("100", "XX"), 0)   # no TTL yet
        self.assertEqual(self.r.ttl("k"), -1)
        self.assertEqual(e("100", "GT"), 0)   # no TTL counts as infinite
        self.assertEqual(self.r.ttl("k"), -1)
        self.assertEqual(e("100", "NX"), 1)
        self.assertEqual(e("200", "NX"), 0)
        self.assertIn(self.r.ttl("k"), (99, 100))
        self.assertEqual(e("200", "XX"), 1)
        self.assertIn(self.r.ttl("k"), (199, 200))
        self.assertEqual(e("100", "GT"), 0)
        self.assertEqual(e("300", "GT"), 1)
        self.assertIn(self.r.ttl("k"), (299, 300))
        self.assertEqual(e("400", "LT"), 0)
        self.assertEqual(e("50", "LT"), 1)
        self.assertIn(self.r.ttl("k"), (49, 50))
        self.assertEqual(e("60", "xx", "gt"), 1)  # case-insensitive, combinable
        self.assertEqual(self.error_of("EXPIRE", "k", "10", "NX", "XX"),
                         "ERR NX and XX, GT or LT options at the same time are not compatible")
        self.assertEqual(self.error_of("EXPIRE", "k", "10", "GT", "LT"),
                         "ERR GT and LT options at the same time are not compatible")
        self.assertTrue(self.error_of("EXPIRE", "k", "10", "BOGUS").startswith("ERR"))
        self.r.persist("k")
        self.assertEqual(e("100", "LT"), 1)  # no TTL is infinite: anything is less
        self.assertEqual(self.r.execute_command("PEXPIRE", "k", "500000", "GT"), 1)
        self.assertTrue(499000 < self.r.pttl("k") <= 500000)

    def test_expireat_and_expiretime(self):
        self.r.execute_command("BF.ADD", "k", "x")
        self.assertEqual(self.r.execute_command("EXPIRETIME", "k"), -1)
        self.assertEqual(self.r.execute_command("PEXPIRETIME", "k"), -1)
        self.assertEqual(self.r.execute_command("EXPIRETIME", "missing"), -2)
        self.assertEqual(self.r.execute_command("PEXPIRETIME", "missing"), -2)
        at = int(time.time()) + 1000
        self.assertEqual(self.r.execute_command("EXPIREAT", "k", at), 1)
        self.assertEqual(self.r.execute_command("EXPIRETIME", "k"), at)
        self.assertEqual(self.r.execute_command("PEXPIRETIME", "k"), at * 1000)
        self.assertTrue(990 <= self.r.ttl("k") <= 1000)
        pat = int(time.time() * 1000) + 2000500
        self.assertEqual(self.r.execute_command("PEXPIREAT", "k", pat), 1)
        self.assertEqual(self.r.execute_command("PEXPIRETIME", "k"), pat)
        self.assertEqual(self.r.execute_command("EXPIRETIME", "k"), pat // 1000)
        self.assertEqual(self.r.execute_command("EXPIREAT", "k", at, "GT"), 0)
        self.assertEqual(self.r.execute_command("EXPIREAT", "k", at, "LT"), 1)
        self.assertEqual(self.r.execute_command("EXPIREAT", "missing", at), 0)
        # A time in the past deletes the key at once.
        self.assertEqual(self.r.execute_command("EXPIREAT", "k", int(time.time()) - 10), 1)
        self.assertEqual(self.r.exists("k"), 0)
        self.r.execute_command("BF.ADD", "n", "x")
        self.assertEqual(self.r.execute_command("EXPIRE", "n", "-1"), 1)
        self.assertEqual(self.r.exists("n"), 0)
        self.assertEqual(self.r.ttl("n"), -2)

    def test_expired_filters_vanish(self):
        for i in range(5):
            self.r.execute_command("BF.ADD", "short:%d" % i, "x")
        self.r.execute_command("BF.ADD", "long", "x")
        for i in range(5):
            self.assertTrue(self.r.pexpire("short:%d" % i, 100))
        before_expired = int(self.info_section("stats").get("expired_keys", "0"))
        self.assertEqual(self.info_section("keyspace")["db0"].split(",")[1], "expires=5")
        harness.wait_until(lambda: not self.r.exists("short:0"), 60, "short:0 to expire")
        self.assertEqual(self.r.exists("short:0"), 0)
        self.assertEqual(self.r.exists(*["short:%d" % i for i in range(5)]), 0)
        self.assertEqual(self.r.ttl("short:1"), -2)
        self.assertEqual(self.r.execute_command("BF.EXISTS", "short:2", "x"), 0)
        self.assertEqual(self.r.exists("short:2"), 0)  # BF.EXISTS did not resurrect it
        # Expired keys disappear from KEYS / SCAN / DBSIZE without being touched.
        self.assertEqual(self.r.keys("*"), [b"long"])
        self.assertEqual(self.raw().call("INFO", "keyspace").split(b"db0:")[1][:6], b"keys=1")
        # Redis deletes an expired key when it is accessed (EXISTS above), so
        # DBSIZE agrees with KEYS and INFO keyspace.
        self.assertEqual(self.r.dbsize(), 1, "DBSIZE still counts expired keys that EXISTS reported gone")
        self.assertEqual(self.r.execute_command("SCAN", "0", "COUNT", "1000")[1], [b"long"])
        # BF.ADD to an expired key starts a fresh filter without a TTL.
        self.assertEqual(self.r.execute_command("BF.ADD", "short:3", "x"), 1)
        self.assertEqual(self.r.ttl("short:3"), -1)
        self.assertEqual(self.r.execute_command("BF.INFO", "short:3", "ITEMS"), [1])
        after_expired = int(self.info_section("stats").get("expired_keys", "0"))
        self.assertGreaterEqual(after_expired - before_expired, 5)


if __name__ == "__main__":
    unittest.main()
