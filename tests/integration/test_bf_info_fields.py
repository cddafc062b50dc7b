"""BF.INFO's single fields from valkey-bloom (ERROR, TIGHTENING,
MAXSCALEDCAPACITY) and bloomery's FPR, byte for byte under RESP2 and RESP3;
MAXSCALEDCAPACITY where growth really stops; VALIDATESCALETO on BF.RESERVE
and BF.INSERT; the FPR estimate against one computed from the bits.
"""

import os
import sys
import unittest

import redis

import harness
from harness import Server, scandump

sys.path.insert(0, os.path.join(harness.ROOT, "tests", "tools"))
import bf_replies  # noqa: E402

MEMORY_LIMIT = "ERR provided VALIDATESCALETO causes bloom object to exceed memory limit"
UNREACHABLE = "ERR provided VALIDATESCALETO causes false positive to degrade to 0"
WITH_NONSCALING = "ERR cannot use NONSCALING and VALIDATESCALETO options together"


def field(client, key, name):
    reply = client.execute_command("BF.INFO", key, name)
    assert len(reply) == 1, reply
    return reply[0]


def debug_layers(client, key):
    """BF.DEBUG's layers: dicts of bytes, bits, hashes, capacity, size."""
    lines = client.execute_command("BF.DEBUG", key)[1:]
    return [dict(part.split(b":", 1) for part in line.split()) for line in lines]


def add_until_refused(client, key, prefix, batch=1000):
    """BF.MADD distinct items until one is refused; the refusal's text."""
    n = 0
    while True:
        replies = client.execute_command("BF.MADD", key,
                                         *[b"%s:%d" % (prefix, i) for i in range(n, n + batch)])
        n += batch
        for reply in replies:
            if isinstance(reply, redis.ResponseError):
                return str(reply)
        if n > 10_000_000:
            raise AssertionError("never refused")


class RawRepliesTest(harness.SharedServerTestCase):
    def setUp(self):
        self.c = bf_replies.Connection("127.0.0.1", self.server.port)
        self.addCleanup(self.c.close)
        self.c.call_raw(["FLUSHALL"])

    def test_fields_under_resp2(self):
        self.c.call_raw(["BF.RESERVE", "k", "0.01", "1000", "NONSCALING"])
        self.assertEqual(self.c.call_raw(["BF.INFO", "k", "ERROR"]), b"*1\r\n$4\r\n0.01\r\n")
        self.assertEqual(self.c.call_raw(["BF.INFO", "k", "tightening"]), b"*1\r\n$3\r\n0.5\r\n")
        self.assertEqual(self.c.call_raw(["BF.INFO", "k", "MAXSCALEDCAPACITY"]),
                         b"*1\r\n:1000\r\n")
        self.assertEqual(self.c.call_raw(["BF.INFO", "k", "FPR"]), b"*1\r\n$1\r\n0\r\n")
        # The full reply keeps RedisBloom's five pairs.
        self.assertTrue(self.c.call_raw(["BF.INFO", "k"]).startswith(b"*10\r\n+Capacity\r\n"))

    def test_fields_under_resp3(self):
        self.c.call_raw(["HELLO", "3"])
        self.c.call_raw(["BF.RESERVE", "k", "0.001", "500", "NONSCALING"])
        self.assertEqual(self.c.call_raw(["BF.INFO", "k", "ERROR"]),
                         b"%1\r\n+Error rate\r\n,0.001\r\n")
        self.assertEqual(self.c.call_raw(["BF.INFO", "k", "TIGHTENING"]),
                         b"%1\r\n+Tightening ratio\r\n,0.5\r\n")
        self.assertEqual(self.c.call_raw(["BF.INFO", "k", "MAXSCALEDCAPACITY"]),
                         b"%1\r\n+Max scaled capacity\r\n:500\r\n")
        self.assertEqual(self.c.call_raw(["BF.INFO", "k", "FPR"]),
                         b"%1\r\n+False positive rate\r\n,0\r\n")
        self.assertRegex(self.c.call_raw(["BF.INFO", "k"]), rb"\A%5\r\n")

    def test_missing_key_and_unknown_field(self):
        self.assertEqual(self.c.call_raw(["BF.INFO", "missing", "FPR"]), b"-ERR not found\r\n")
        self.c.call_raw(["BF.ADD", "k", "a"])
        self.assertEqual(self.c.call_raw(["BF.INFO", "k", "FPRS"]),
                         b"-Invalid information value\r\n")


class MaxScaledCapacityTest(unittest.TestCase):
    """With --max-filter-bytes 16kb, growth stops where MAXSCALEDCAPACITY said."""

    @classmethod
    def setUpClass(cls):
        cls.server = Server("--max-filter-bytes", "16kb")
        cls.server.start()
        cls.client = cls.server.client()

    @classmethod
    def tearDownClass(cls):
        cls.server.cleanup()

    def setUp(self):
        self.client.flushall()

    def test_growth_stops_at_max_scaled_capacity(self):
        for scheme in ("BLOOMERY", "REDISBLOOM"):
            with self.subTest(scheme=scheme):
                key = "grow:" + scheme
                self.client.execute_command("BF.RESERVE", key, "0.01", "100", "SCHEME", scheme)
                reach = field(self.client, key, "MAXSCALEDCAPACITY")
                self.assertGreater(reach, 100 + 200 + 400)
                refusal = add_until_refused(self.client, key, key.encode())
                self.assertIn("max-filter-bytes", refusal)
                self.assertEqual(field(self.client, key, "ITEMS"), reach)
                self.assertEqual(field(self.client, key, "CAPACITY"), reach)
                # Growing did not change the answer.
                self.assertEqual(field(self.client, key, "MAXSCALEDCAPACITY"), reach)

    def test_validatescaleto_up_to_max_scaled_capacity(self):
        self.client.execute_command("BF.RESERVE", "probe", "0.01", "100", "LAYOUT", "CLASSIC")
        reach = field(self.client, "probe", "MAXSCALEDCAPACITY")
        self.client.execute_command("BF.RESERVE", "fits", "0.01", "100", "LAYOUT", "CLASSIC",
                                    "VALIDATESCALETO", str(reach))
        self.assertEqual(
            self.client.execute_command("BF.INSERT", "fits2", "LAYOUT", "CLASSIC",
                                        "VALIDATESCALETO", str(reach), "ITEMS", "a"), [1])
        for command in (["BF.RESERVE", "over", "0.01", "100", "LAYOUT", "CLASSIC",
                         "VALIDATESCALETO", str(reach + 1)],
                        ["BF.INSERT", "over", "LAYOUT", "CLASSIC", "VALIDATESCALETO",
                         str(reach + 1), "ITEMS", "a"]):
            with self.assertRaises(redis.ResponseError) as refused:
                self.client.execute_command(*command)
            self.assertEqual("ERR " + str(refused.exception), MEMORY_LIMIT)
        self.assertEqual(self.client.exists("over"), 0)


class ValidateScaleToTest(harness.SharedServerTestCase):
    def setUp(self):
        self.client = self.server.client()
        self.client.flushall()

    def refusal(self, *command):
        with self.assertRaises(redis.ResponseError) as refused:
            self.client.execute_command(*command)
        return "ERR " + str(refused.exception)

    def test_the_sub_filter_limit_stops_growth(self):
        # Expansion 1 at a loose rate: 64 sub-filters of 10 before any bound.
        self.client.execute_command("BF.RESERVE", "flat", "0.5", "10", "EXPANSION", "1",
                                    "VALIDATESCALETO", "640")
        self.assertEqual(field(self.client, "flat", "MAXSCALEDCAPACITY"), 640)
        self.assertEqual(self.refusal("BF.RESERVE", "flat2", "0.5", "10", "EXPANSION", "1",
                                      "VALIDATESCALETO", "641"), UNREACHABLE)
        self.assertEqual(self.refusal("BF.INSERT", "flat2", "ERROR", "0.5", "CAPACITY", "10",
                                      "EXPANSION", "1", "VALIDATESCALETO", "641", "ITEMS", "a"),
                         UNREACHABLE)
        self.assertEqual(self.client.exists("flat2"), 0)

    def test_nonscaling_is_refused(self):
        self.assertEqual(self.refusal("BF.RESERVE", "ns", "0.01", "100", "NONSCALING",
                                      "VALIDATESCALETO", "50"), WITH_NONSCALING)
        self.assertEqual(self.refusal("BF.INSERT", "ns", "NONSCALING", "VALIDATESCALETO", "50",
                                      "ITEMS", "a"), WITH_NONSCALING)
        self.assertEqual(self.client.exists("ns"), 0)

    def test_bad_values_are_refused(self):
        for value in ("0", "-5", "many"):
            self.assertEqual(self.refusal("BF.RESERVE", "bad", "0.01", "100", "VALIDATESCALETO",
                                          value), "ERR bad capacity")
        with self.assertRaisesRegex(redis.ResponseError, "wrong number of arguments"):
            self.client.execute_command("BF.INSERT", "bad", "VALIDATESCALETO")
        self.assertEqual(self.client.exists("bad"), 0)


class FalsePositiveRateTest(harness.SharedServerTestCase):
    """FPR against f^k computed here from the filter's own bits (a
    redisbloom-scheme filter's BF.SCANDUMP data chunks are its bit array)."""

    def setUp(self):
        self.client = self.server.client()
        self.client.flushall()

    def reserve_and_fill(self, key, first, count):
        self.client.execute_command("BF.RESERVE", key, "0.01", "1000", "NONSCALING", "SCHEME",
                                    "REDISBLOOM")
        items = [b"item:%d" % i for i in range(first, first + count)]
        self.client.execute_command("BF.MADD", key, *items)

    def expected(self, key, chunks):
        layer = debug_layers(self.client, key)[0]
        bits = int(layer[b"bits"])
        set_bits = sum(bin(byte).count("1") for _, data in chunks[1:] for byte in data)
        return (set_bits / bits) ** int(layer[b"hashes"])

    def test_fpr_at_capacity_is_near_the_target(self):
        self.reserve_and_fill("full", 0, 1000)
        fpr = float(field(self.client, "full", "FPR"))
        self.assertAlmostEqual(fpr, self.expected("full", scandump(self.client, "full")), places=12)
        self.assertGreater(fpr, 0.004)
        self.assertLess(fpr, 0.02)

    def test_fpr_of_an_overfilled_filter_passes_its_error_rate(self):
        # Two filters of the same geometry, 1000 items each; a third made of
        # the first's header and the OR of both bit arrays holds 2000 items'
        # bits in a filter sized for 1000.
        self.reserve_and_fill("a", 0, 1000)
        self.reserve_and_fill("b", 1000, 1000)
        a, b = scandump(self.client, "a"), scandump(self.client, "b")
        self.assertEqual([it for it, _ in a], [it for it, _ in b])
        merged = [a[0]] + [(it, bytes(x | y for x, y in zip(da, db)))
                           for (it, da), (_, db) in zip(a[1:], b[1:])]
        for it, data in merged:
            self.client.execute_command("BF.LOADCHUNK", "both", it, data)
        fpr = float(field(self.client, "both", "FPR"))
        error = float(field(self.client, "both", "ERROR"))
        self.assertEqual(error, 0.01)
        self.assertAlmostEqual(fpr, self.expected("both", merged), places=12)
        self.assertGreater(fpr, 5 * error)
        # Every item of both is still found.
        found = self.client.execute_command("BF.MEXISTS", "both",
                                            *[b"item:%d" % i for i in range(2000)])
        self.assertEqual(set(found), {1})


if __name__ == "__main__":
    unittest.main()
