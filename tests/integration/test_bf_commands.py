"""BF.* command semantics and exact error texts, compared with RedisBloom's
documented behaviour, through redis-py (raw execute_command and r.bf()).
"""

import random
import unittest

import redis

import harness
from test_protocol import Err, RespConnection


def err_text(exc, expected):
    """redis-py strips an 'ERR ' prefix (and only that one); put it back for
    comparison with RedisBloom's texts, some of which have none."""
    return "ERR " + str(exc) if expected.startswith("ERR ") else str(exc)


class BfCommandsTest(harness.SharedServerTestCase):

    def setUp(self):
        self.r = self.server.client()
        self.addCleanup(self.r.close)
        self.r.flushall()
        helper_client = self.server.client()  # r.bf() installs callbacks: keep them off self.r
        self.addCleanup(helper_client.close)
        self.bf = helper_client.bf()

    def raw(self):
        c = RespConnection(self.server.port)
        self.addCleanup(c.close)
        return c

    def assertError(self, expected, *args):
        """The exact error text, checked on the wire (with its '-ERR ' prefix)."""
        c = self.raw()
        reply = c.call(*args)
        self.assertIsInstance(reply, Err, "%r replied %r" % (args, reply))
        self.assertEqual(reply.decode(), expected, "command %r" % (args,))
        # And through redis-py.
        with self.assertRaises(redis.ResponseError) as ctx:
            self.r.execute_command(*args)
        self.assertEqual(err_text(ctx.exception, expected), expected)

    def info(self, key):
        flat = self.r.execute_command("BF.INFO", key)
        self.assertEqual(len(flat), 10)
        return dict(zip([k.decode() for k in flat[::2]], flat[1::2]))

    # ---- BF.RESERVE -------------------------------------------------------

    def test_reserve_creates_and_existing_key_is_item_exists(self):
        self.assertTrue(self.r.execute_command("BF.RESERVE", "k", "0.01", "1000"))
        self.assertEqual(self.r.type("k"), b"MBbloom--")
        self.assertError("ERR item exists", "BF.RESERVE", "k", "0.01", "1000")
        self.assertError("ERR item exists", "BF.RESERVE", "k", "0.5", "10", "NONSCALING")
        self.assertEqual(self.info("k")["Capacity"], 1000)

    def test_reserve_bad_error_rate(self):
        self.assertError("ERR bad error rate", "BF.RESERVE", "k", "abc", "100")
        self.assertError("ERR bad error rate", "BF.RESERVE", "k", "", "100")
        self.assertError("ERR bad error rate", "BF.RESERVE", "k", "0.01x", "100")
        # RedisBloom's text, its trailing space included.
        for bad in ("0", "1", "-1", "1.5", "0.0"):
            self.assertError("ERR (0 < error rate range < 1) ", "BF.RESERVE", "k", bad, "100")
        self.assertEqual(self.r.exists("k"), 0)

    def test_reserve_bad_capacity(self):
        self.assertError("ERR bad capacity", "BF.RESERVE", "k", "0.01", "abc")
        self.assertError("ERR bad capacity", "BF.RESERVE", "k", "0.01", "1.5")
        for bad in ("0", "-1", "-100"):
            self.assertError("ERR (capacity should be larger than 0)", "BF.RESERVE", "k", "0.01", bad)
        self.assertEqual(self.r.exists("k"), 0)

    def test_reserve_expansion_and_nonscaling_options(self):
        self.assertError("ERR expansion should be greater or equal to 1",
                         "BF.RESERVE", "k", "0.01", "100", "EXPANSION", "0")
        self.assertError("ERR expansion should be greater or equal to 1", "BF.RESERVE", "k", "0.01", "100", "EXPANSION", "-3")
        self.assertError("ERR bad expansion", "BF.RESERVE", "k", "0.01", "100", "EXPANSION", "x")
        self.assertError("ERR no expansion", "BF.RESERVE", "k", "0.01", "100", "EXPANSION")
        # RedisBloom's text has no "ERR " prefix.
        self.assertError("Nonscaling filters cannot expand", "BF.RESERVE", "k", "0.01", "100", "NONSCALING", "EXPANSION", "2")
        self.assertError("Nonscaling filters cannot expand", "BF.RESERVE", "k", "0.01", "100", "EXPANSION", "2", "NONSCALING")
        self.assertEqual(self.r.exists("k"), 0)
        # RedisBloom ignores words it does not know.
        self.assertTrue(self.r.execute_command("BF.RESERVE", "bogus", "0.01", "100", "BOGUS"))
        self.assertEqual(self.info("bogus")["Expansion rate"], 2)
        self.assertTrue(self.r.execute_command("BF.RESERVE", "e4", "0.01", "100", "EXPANSION", "4"))
        self.assertEqual(self.info("e4")["Expansion rate"], 4)
        self.assertTrue(self.r.execute_command("BF.RESERVE", "ns", "0.01", "100", "nonscaling"))
        self.assertIsNone(self.info("ns")["Expansion rate"])

    def test_reserve_wrong_arity(self):
        msg = "ERR wrong number of arguments for 'bf.reserve' command"
        self.assertError(msg, "BF.RESERVE")
        self.assertError(msg, "BF.RESERVE", "k")
        self.assertError(msg, "BF.RESERVE", "k", "0.01")
        self.assertError(msg, "bf.ReSeRvE", "k", "0.01")
        self.assertError("ERR wrong number of arguments for 'bf.add' command", "BF.ADD", "k")
        self.assertError("ERR wrong number of arguments for 'bf.add' command", "BF.ADD", "k", "a", "b")
        self.assertError("ERR wrong number of arguments for 'bf.exists' command", "BF.EXISTS", "k")
        self.assertError("ERR wrong number of arguments for 'bf.madd' command", "BF.MADD", "k")
        self.assertError("ERR wrong number of arguments for 'bf.mexists' command", "BF.MEXISTS", "k")
        self.assertError("ERR wrong number of arguments for 'bf.card' command", "BF.CARD")
        self.assertError("ERR wrong number of arguments for 'bf.info' command", "BF.INFO")
        self.assertEqual(self.r.dbsize(), 0)

    def test_reserve_via_redis_py_helper(self):
        self.assertTrue(self.bf.create("h", 0.001, 5000))
        self.assertTrue(self.bf.create("h2", 0.01, 10, expansion=3))
        self.assertTrue(self.bf.create("h3", 0.01, 10, noScale=True))
        info = self.bf.info("h")
        self.assertEqual(info.capacity, 5000)
        self.assertEqual(info.filterNum, 1)
        self.assertEqual(info.insertedNum, 0)
        self.assertEqual(info.expansionRate, 2)
        self.assertEqual(self.bf.info("h2").expansionRate, 3)
        self.assertIsNone(self.bf.info("h3").expansionRate)
        with self.assertRaises(redis.ResponseError):
            self.bf.create("h", 0.01, 10)

    # ---- BF.ADD / EXISTS / MADD / MEXISTS ---------------------------------

    def test_add_returns_1_then_0_and_creates_default_filter(self):
        self.assertEqual(self.r.execute_command("BF.ADD", "k", "a"), 1)
        self.assertEqual(self.r.execute_command("BF.ADD", "k", "a"), 0)
        self.assertEqual(self.bf.add("k", "b"), 1)
        self.assertEqual(self.bf.add("k", "b"), 0)
        info = self.info("k")
        self.assertEqual(info["Capacity"], 100)
        self.assertEqual(info["Expansion rate"], 2)
        self.assertEqual(info["Number of filters"], 1)
        self.assertEqual(info["Number of items inserted"], 2)
        self.assertGreater(info["Size"], 0)
        self.assertEqual(self.bf.exists("k", "a"), 1)
        self.assertEqual(self.bf.exists("k", "c"), 0)

    def test_exists_and_mexists_on_missing_key_do_not_create(self):
        self.assertEqual(self.r.execute_command("BF.EXISTS", "nokey", "a"), 0)
        self.assertEqual(self.r.execute_command("BF.MEXISTS", "nokey", "a", "b", "c"), [0, 0, 0])
        self.assertEqual(self.bf.mexists("nokey", "x"), [0])
        self.assertEqual(self.r.exists("nokey"), 0)
        self.assertEqual(self.r.dbsize(), 0)
        self.assertEqual(self.r.execute_command("BF.CARD", "nokey"), 0)
        self.assertEqual(self.r.exists("nokey"), 0)

    def test_madd_and_mexists(self):
        self.assertEqual(self.bf.madd("m", "a", "b", "a", "c"), [1, 1, 0, 1])
        self.assertEqual(self.bf.mexists("m", "a", "b", "c", "d"), [1, 1, 1, 0])
        self.assertEqual(self.r.execute_command("BF.MADD", "m", "d"), [1])
        self.assertEqual(self.info("m")["Number of items inserted"], 4)
        self.assertEqual(self.info("m")["Capacity"], 100)

    def test_wrong_key_is_case_sensitive_and_binary(self):
        self.assertEqual(self.bf.add("Key", "x"), 1)
        self.assertEqual(self.bf.exists("key", "x"), 0)
        self.assertEqual(self.bf.exists("Key", "X"), 0)
        self.assertEqual(self.bf.exists("Key", "x"), 1)

    # ---- BF.INFO ----------------------------------------------------------

    def test_info_full_and_single_fields(self):
        self.r.execute_command("BF.RESERVE", "k", "0.01", "100")
        self.r.execute_command("BF.MADD", "k", "a", "b", "c")
        flat = self.r.execute_command("BF.INFO", "k")
        self.assertEqual([x.decode() for x in flat[::2]],
                         ["Capacity", "Size", "Number of filters", "Number of items inserted", "Expansion rate"])
        full = self.info("k")
        self.assertEqual(full["Capacity"], 100)
        self.assertEqual(full["Number of filters"], 1)
        self.assertEqual(full["Number of items inserted"], 3)
        self.assertEqual(full["Expansion rate"], 2)
        # Size is bytes of the filter: at least the bit array of 100 items at 1 % (~120 bytes).
        self.assertGreaterEqual(full["Size"], 100)
        self.assertEqual(self.r.execute_command("BF.INFO", "k", "CAPACITY"), [100])
        self.assertEqual(self.r.execute_command("BF.INFO", "k", "capacity"), [100])
        self.assertEqual(self.r.execute_command("BF.INFO", "k", "SIZE"), [full["Size"]])
        self.assertEqual(self.r.execute_command("BF.INFO", "k", "FILTERS"), [1])
        self.assertEqual(self.r.execute_command("BF.INFO", "k", "ITEMS"), [3])
        self.assertEqual(self.r.execute_command("BF.INFO", "k", "EXPANSION"), [2])

    def test_info_nonscaling_missing_key_and_bad_field(self):
        self.r.execute_command("BF.RESERVE", "ns", "0.01", "100", "NONSCALING")
        self.assertEqual(self.r.execute_command("BF.INFO", "ns", "EXPANSION"), [None])
        self.assertIsNone(self.info("ns")["Expansion rate"])
        self.assertError("ERR not found", "BF.INFO", "missing")
        self.assertError("ERR not found", "BF.INFO", "missing", "CAPACITY")
        self.assertError("Invalid information value", "BF.INFO", "ns", "BOGUS")
        self.assertError("ERR wrong number of arguments for 'bf.info' command", "BF.INFO", "ns", "CAPACITY", "SIZE")
        self.assertEqual(self.r.exists("missing"), 0)

    # ---- scaling ----------------------------------------------------------

    def test_scaling_adds_a_sub_filter_of_double_capacity(self):
        self.r.execute_command("BF.RESERVE", "s", "0.01", "10")
        added = 0
        i = 0
        while added < 10 and i < 1000:
            added += self.r.execute_command("BF.ADD", "s", "item-%d" % i)
            i += 1
        self.assertEqual(added, 10)
        self.assertEqual(self.r.execute_command("BF.INFO", "s", "FILTERS"), [1])
        self.assertEqual(self.r.execute_command("BF.INFO", "s", "ITEMS"), [10])
        self.assertEqual(self.r.execute_command("BF.INFO", "s", "CAPACITY"), [10])
        while added < 11 and i < 2000:
            added += self.r.execute_command("BF.ADD", "s", "item-%d" % i)
            i += 1
        self.assertEqual(added, 11)
        self.assertEqual(self.r.execute_command("BF.INFO", "s", "FILTERS"), [2])
        self.assertEqual(self.r.execute_command("BF.INFO", "s", "CAPACITY"), [30])
        self.assertEqual(self.r.execute_command("BF.INFO", "s", "ITEMS"), [11])
        # Keep going: 10 + 20 + 40 = 70 after the third sub-filter starts.
        while added < 31 and i < 5000:
            added += self.r.execute_command("BF.ADD", "s", "item-%d" % i)
            i += 1
        self.assertEqual(self.r.execute_command("BF.INFO", "s", "FILTERS"), [3])
        self.assertEqual(self.r.execute_command("BF.INFO", "s", "CAPACITY"), [70])
        # Every item added before is still there (no false negatives across layers).
        self.assertEqual(self.r.execute_command("BF.MEXISTS", "s", *["item-%d" % j for j in range(i)]), [1] * i)

    def test_expansion_factor_applies(self):
        self.r.execute_command("BF.RESERVE", "e", "0.01", "10", "EXPANSION", "3")
        added = 0
        i = 0
        while added < 11 and i < 2000:
            added += self.r.execute_command("BF.ADD", "e", "x%d" % i)
            i += 1
        self.assertEqual(self.r.execute_command("BF.INFO", "e", "CAPACITY"), [40])
        self.assertEqual(self.r.execute_command("BF.INFO", "e", "FILTERS"), [2])

    def test_nonscaling_full_filter_rejects_new_items(self):
        self.r.execute_command("BF.RESERVE", "ns", "0.01", "10", "NONSCALING")
        added = 0
        i = 0
        while added < 10 and i < 1000:
            added += self.r.execute_command("BF.ADD", "ns", "item-%d" % i)
            i += 1
        self.assertEqual(added, 10)
        # A new (not yet present) item is refused.
        probe = None
        for j in range(1000, 3000):
            if self.r.execute_command("BF.EXISTS", "ns", "new-%d" % j) == 0:
                probe = "new-%d" % j
                break
        self.assertIsNotNone(probe)
        self.assertError("ERR non scaling filter is full", "BF.ADD", "ns", probe)
        self.assertEqual(self.r.execute_command("BF.INFO", "ns", "FILTERS"), [1])
        self.assertEqual(self.r.execute_command("BF.INFO", "ns", "ITEMS"), [10])
        # A present item still answers 0 rather than an error (as RedisBloom: it is not added).
        self.assertEqual(self.r.execute_command("BF.ADD", "ns", "item-0"), 0)
        # MADD: replies stop at the first error.
        reply = self.r.execute_command("BF.MADD", "ns", "item-0", "item-1", probe, "item-2", "other")
        self.assertEqual(len(reply), 3, reply)
        self.assertEqual(reply[:2], [0, 0])
        self.assertIsInstance(reply[2], redis.ResponseError)
        self.assertEqual(err_text(reply[2], "ERR "), "ERR non scaling filter is full")
        c = self.raw()
        c.send(b"*4\r\n$7\r\nBF.MADD\r\n$2\r\nns\r\n$6\r\nitem-3\r\n$%d\r\n%s\r\n" % (len(probe), probe.encode()))
        self.assertEqual(c.read_raw(len(b"*2\r\n:0\r\n-ERR non scaling filter is full\r\n")),
                         b"*2\r\n:0\r\n-ERR non scaling filter is full\r\n")

    def test_madd_on_nearly_full_nonscaling_filter(self):
        self.r.execute_command("BF.RESERVE", "ns", "0.01", "3", "NONSCALING")
        self.assertEqual(self.r.execute_command("BF.ADD", "ns", "first"), 1)
        reply = self.r.execute_command("BF.MADD", "ns", "p1", "p2", "p3", "p4", "p5")
        # Two fit (1, 1), the third new item errors and the rest are not tried.
        self.assertEqual(len(reply), 3, reply)
        self.assertEqual(reply[:2], [1, 1])
        self.assertIsInstance(reply[2], redis.ResponseError)
        self.assertEqual(self.r.execute_command("BF.MEXISTS", "ns", "p1", "p2", "p4", "p5"), [1, 1, 0, 0])
        self.assertEqual(self.r.execute_command("BF.INFO", "ns", "ITEMS"), [3])

    # ---- BF.INSERT --------------------------------------------------------

    def test_insert_creates_with_options(self):
        self.assertEqual(self.r.execute_command("BF.INSERT", "i", "CAPACITY", "1000", "ERROR", "0.001",
                                                "EXPANSION", "4", "ITEMS", "a", "b", "a"), [1, 1, 0])
        info = self.info("i")
        self.assertEqual(info["Capacity"], 1000)
        self.assertEqual(info["Expansion rate"], 4)
        self.assertEqual(info["Number of items inserted"], 2)
        # A 0.1 % filter is bigger than a 1 % one of the same capacity.
        self.r.execute_command("BF.RESERVE", "ref", "0.01", "1000")
        self.assertGreater(info["Size"], self.info("ref")["Size"])
        self.assertEqual(self.r.execute_command("BF.INSERT", "n", "NONSCALING", "CAPACITY", "2", "ITEMS", "x"), [1])
        self.assertIsNone(self.info("n")["Expansion rate"])
        self.assertEqual(self.bf.insert("h", ["p", "q"], capacity=50, error=0.05), [1, 1])
        self.assertEqual(self.info("h")["Capacity"], 50)
        self.assertEqual(self.bf.insert("h2", ["p"], noScale=True), [1])
        self.assertIsNone(self.info("h2")["Expansion rate"])
        # Defaults when no option is given.
        self.assertEqual(self.r.execute_command("BF.INSERT", "d", "ITEMS", "z"), [1])
        self.assertEqual(self.info("d")["Capacity"], 100)
        self.assertEqual(self.info("d")["Expansion rate"], 2)

    def test_insert_takes_nonscaling_with_expansion_as_redisbloom_does(self):
        # Unlike BF.RESERVE, RedisBloom's BF.INSERT takes an expansion beside
        # NONSCALING, whatever the order, and makes a non-scaling filter.
        for order in (("NONSCALING", "EXPANSION", "2"), ("EXPANSION", "2", "NONSCALING")):
            key = "ne-%s" % order[0]
            self.assertEqual(self.r.execute_command("BF.INSERT", key, "CAPACITY", "2", *order,
                                                    "ITEMS", "a"), [1])
            self.assertIsNone(self.info(key)["Expansion rate"])

    def test_insert_options_ignored_on_existing_filter(self):
        self.r.execute_command("BF.RESERVE", "i", "0.01", "500")
        self.assertEqual(self.r.execute_command("BF.INSERT", "i", "CAPACITY", "9999", "EXPANSION", "7",
                                                "ITEMS", "a"), [1])
        info = self.info("i")
        self.assertEqual(info["Capacity"], 500)
        self.assertEqual(info["Expansion rate"], 2)
        self.assertEqual(info["Number of items inserted"], 1)

    def test_insert_nocreate(self):
        self.assertError("ERR not found", "BF.INSERT", "missing", "NOCREATE", "ITEMS", "a")
        with self.assertRaises(redis.ResponseError):
            self.bf.insert("missing", ["a"], noCreate=True)
        self.assertEqual(self.r.exists("missing"), 0)
        self.r.execute_command("BF.RESERVE", "there", "0.01", "100")
        self.assertEqual(self.r.execute_command("BF.INSERT", "there", "NOCREATE", "ITEMS", "a", "b"), [1, 1])
        self.assertEqual(self.bf.insert("there", ["b", "c"], noCreate=True), [0, 1])

    def test_insert_everything_after_items_is_an_item(self):
        self.assertEqual(self.r.execute_command("BF.INSERT", "i", "ITEMS", "NOCREATE", "CAPACITY", "5",
                                                "ITEMS"), [1, 1, 1, 1])
        self.assertEqual(self.info("i")["Capacity"], 100)
        self.assertEqual(self.r.execute_command("BF.MEXISTS", "i", "NOCREATE", "CAPACITY", "5", "ITEMS"),
                         [1, 1, 1, 1])

    def test_insert_errors(self):
        self.assertError("ERR wrong number of arguments for 'bf.insert' command", "BF.INSERT", "i", "ITEMS")
        self.assertError("ERR wrong number of arguments for 'bf.insert' command", "BF.INSERT", "i", "CAPACITY", "10", "ITEMS")
        # RedisBloom's BF.INSERT texts, without "ERR ".
        self.assertError("Unknown argument received", "BF.INSERT", "i", "CAPACITY", "10", "a", "b")  # no ITEMS
        self.assertError("Unknown argument received", "BF.INSERT", "i", "BOGUS", "ITEMS", "a")
        self.assertError("Bad capacity", "BF.INSERT", "i", "CAPACITY", "x", "ITEMS", "a")
        self.assertError("Bad argument received", "BF.INSERT", "i", "CAPACITY", "0", "ITEMS", "a")
        self.assertError("Bad error rate", "BF.INSERT", "i", "ERROR", "x", "ITEMS", "a")
        self.assertError("Bad argument received", "BF.INSERT", "i", "ERROR", "2", "ITEMS", "a")
        self.assertError("Bad argument received", "BF.INSERT", "i", "EXPANSION", "0", "ITEMS", "a")
        self.assertError("ERR expansion should be at most 32768", "BF.INSERT", "i", "EXPANSION",
                         "32769", "ITEMS", "a")
        self.assertError("ERR wrong number of arguments for 'bf.insert' command", "BF.INSERT", "i", "CAPACITY")
        self.assertEqual(self.r.exists("i"), 0)

    # ---- BF.CARD ----------------------------------------------------------

    def test_card(self):
        self.assertEqual(self.r.execute_command("BF.CARD", "missing"), 0)
        self.r.execute_command("BF.RESERVE", "c", "0.001", "100000")
        self.assertEqual(self.r.execute_command("BF.CARD", "c"), 0)
        items = ["card-%d" % i for i in range(1000)]
        for start in range(0, 1000, 250):
            self.r.execute_command("BF.MADD", "c", *items[start:start + 250])
        card = self.r.execute_command("BF.CARD", "c")
        self.assertGreaterEqual(card, 970)
        self.assertLessEqual(card, 1030)
        self.r.execute_command("BF.MADD", "c", *items[:500])
        self.assertEqual(self.r.execute_command("BF.CARD", "c"), card)
        small = self.r.execute_command("BF.MADD", "small", "a", "b", "c")
        self.assertEqual(small, [1, 1, 1])
        self.assertEqual(self.r.execute_command("BF.CARD", "small"), 3)

    def test_card_on_saturated_filter_is_finite(self):
        self.r.execute_command("BF.RESERVE", "sat", "0.5", "1", "NONSCALING")
        self.r.execute_command("BF.ADD", "sat", "a")
        card = self.r.execute_command("BF.CARD", "sat")
        self.assertIsInstance(card, int)
        self.assertGreaterEqual(card, 1)
        self.assertLess(card, 1 << 62)

    # ---- accuracy ---------------------------------------------------------

    def test_no_false_negatives_and_fpr_within_tolerance(self):
        for rate in (0.01, 0.001):
            key = "acc-%s" % rate
            self.r.execute_command("BF.RESERVE", key, str(rate), "20000")
            present = ["present-%d-%s" % (i, rate) for i in range(20000)]
            pipe = self.r.pipeline(transaction=False)
            for start in range(0, 20000, 1000):
                pipe.execute_command("BF.MADD", key, *present[start:start + 1000])
            replies = pipe.execute()
            added = sum(sum(rep) for rep in replies)
            self.assertGreater(added, 20000 * (1 - rate * 1.5))
            self.assertEqual(self.r.execute_command("BF.INFO", key, "FILTERS"), [1])
            pipe = self.r.pipeline(transaction=False)
            for start in range(0, 20000, 1000):
                pipe.execute_command("BF.MEXISTS", key, *present[start:start + 1000])
            for rep in pipe.execute():
                self.assertEqual(rep, [1] * 1000)
            absent = ["absent-%d-%s" % (i, rate) for i in range(20000)]
            pipe = self.r.pipeline(transaction=False)
            for start in range(0, 20000, 1000):
                pipe.execute_command("BF.MEXISTS", key, *absent[start:start + 1000])
            false_positives = sum(sum(rep) for rep in pipe.execute())
            fpr = false_positives / 20000
            # At capacity the measured rate must not exceed the requested one (with
            # sampling slack); it should also not be absurdly low (wasted memory).
            self.assertLessEqual(fpr, rate * 1.3, "rate %s measured %s" % (rate, fpr))
            self.assertGreater(fpr, rate / 20, "rate %s measured %s" % (rate, fpr))

    def test_no_false_negatives_on_a_scaling_default_filter(self):
        items = ["s%d" % i for i in range(5000)]
        pipe = self.r.pipeline(transaction=False)
        for start in range(0, 5000, 500):
            pipe.execute_command("BF.MADD", "grow", *items[start:start + 500])
        pipe.execute()
        self.assertGreater(self.r.execute_command("BF.INFO", "grow", "FILTERS")[0], 5)
        self.assertEqual(self.r.execute_command("BF.MEXISTS", "grow", *items), [1] * 5000)
        absent = self.r.execute_command("BF.MEXISTS", "grow", *["a%d" % i for i in range(5000)])
        self.assertLess(sum(absent) / 5000, 0.02)

    # ---- SCANDUMP / LOADCHUNK ---------------------------------------------

    def dump(self, key):
        chunks = []
        it = 0
        for _ in range(10000):
            it, data = self.bf.scandump(key, it)
            if it == 0:
                self.assertIn(data, (None, b""))
                break
            self.assertLessEqual(len(data), 16 * 1024 * 1024 + 64)
            chunks.append((it, data))
        else:
            self.fail("SCANDUMP did not finish")
        return chunks

    def load(self, key, chunks):
        for it, data in chunks:
            self.assertTrue(self.bf.loadchunk(key, it, data) in (True, b"OK"))

    def test_scandump_loadchunk_round_trip(self):
        self.r.execute_command("BF.RESERVE", "src", "0.01", "100", "EXPANSION", "2")
        items = ["rt-%d" % i for i in range(700)]  # several sub-filters
        self.r.execute_command("BF.MADD", "src", *items)
        self.assertGreater(self.r.execute_command("BF.INFO", "src", "FILTERS")[0], 2)
        chunks = self.dump("src")
        self.assertGreaterEqual(len(chunks), 2)
        self.assertEqual(chunks[0][0], 1)
        self.load("dst", chunks)
        self.assertEqual(self.info("dst"), self.info("src"))
        probe = items + ["absent-%d" % i for i in range(3000)]
        self.assertEqual(self.r.execute_command("BF.MEXISTS", "dst", *probe),
                         self.r.execute_command("BF.MEXISTS", "src", *probe))
        self.assertEqual(self.r.execute_command("BF.CARD", "dst"), self.r.execute_command("BF.CARD", "src"))
        self.assertEqual(self.r.type("dst"), b"MBbloom--")
        # The copy is independent.
        fresh = next(x for x in ("only-in-dst-%d" % j for j in range(1000))
                     if self.r.execute_command("BF.EXISTS", "dst", x) == 0)
        self.assertEqual(self.r.execute_command("BF.ADD", "dst", fresh), 1)
        self.assertEqual(self.r.execute_command("BF.EXISTS", "dst", fresh), 1)
        self.assertEqual(self.r.execute_command("BF.INFO", "src", "ITEMS")[0] + 1,
                         self.r.execute_command("BF.INFO", "dst", "ITEMS")[0])
        # NONSCALING survives the trip.
        self.r.execute_command("BF.INSERT", "nsrc", "NONSCALING", "CAPACITY", "50", "ITEMS", "a", "b")
        self.load("ndst", self.dump("nsrc"))
        self.assertEqual(self.info("ndst"), self.info("nsrc"))
        self.assertIsNone(self.info("ndst")["Expansion rate"])

    def test_scandump_of_a_large_filter_uses_bounded_chunks(self):
        # ~18 MB of bits: more than one 16 MB chunk.
        self.r.execute_command("BF.RESERVE", "big", "0.01", "15000000", "NONSCALING")
        self.r.execute_command("BF.MADD", "big", *["b%d" % i for i in range(2000)])
        size = self.info("big")["Size"]
        self.assertGreater(size, 16 * 1024 * 1024)
        chunks = self.dump("big")
        self.assertGreaterEqual(len(chunks), 3)  # header + at least two data chunks
        self.load("big2", chunks)
        chunks = None
        self.assertEqual(self.info("big2"), self.info("big"))
        probe = ["b%d" % i for i in range(2000)] + ["nb%d" % i for i in range(2000)]
        self.assertEqual(self.r.execute_command("BF.MEXISTS", "big2", *probe),
                         self.r.execute_command("BF.MEXISTS", "big", *probe))
        self.r.delete("big", "big2")

    def test_scandump_errors(self):
        self.assertError("ERR not found", "BF.SCANDUMP", "missing", "0")
        self.r.execute_command("BF.ADD", "k", "a")
        self.assertError("ERR not found", "BF.SCANDUMP", "missing", "abc")
        self.assertError("Second argument must be numeric", "BF.SCANDUMP", "k", "abc")
        # A negative iterator is the end, as RedisBloom's.
        self.assertEqual(self.r.execute_command("BF.SCANDUMP", "k", "-1"), [0, b""])
        # An iterator past the end is the end.
        end = self.r.execute_command("BF.SCANDUMP", "k", "999999999")
        self.assertEqual(end[0], 0)

    def test_loadchunk_bad_input_is_an_error_and_changes_nothing(self):
        self.r.execute_command("BF.RESERVE", "src", "0.01", "100")
        items = ["lc-%d" % i for i in range(300)]
        self.r.execute_command("BF.MADD", "src", *items)
        chunks = self.dump("src")
        header_it, header = chunks[0]
        self.assertEqual(header_it, 1)

        # Missing key with iter != 1.
        self.assertError("ERR not found", "BF.LOADCHUNK", "nokey", str(chunks[1][0]), chunks[1][1])
        self.assertEqual(self.r.exists("nokey"), 0)
        # Truncated and corrupted headers do not create the key.
        # A truncated header fails its length check or, when what is left still
        # looks long enough, its checksum; a flipped byte past the magic fails
        # the checksum. A payload that is no header of either format (no
        # magic: garbage, or a flipped byte in the magic) gets RedisBloom's
        # answer.
        truncated = ("ERR invalid dump header", "ERR dump header checksum mismatch")
        flipped = ("ERR dump header checksum mismatch",)
        no_header = ("ERR received bad data",)
        for bad, expected in (
                (header[:len(header) // 2], truncated),
                (header[:-1], truncated),
                (b"", no_header),
                (b"garbage" * 10, no_header),
                (header[:5] + bytes([header[5] ^ 0xFF]) + header[6:], no_header),
                (header[:9] + bytes([header[9] ^ 0xFF]) + header[10:], flipped),
                (header[:-3] + bytes([header[-3] ^ 0x01]) + header[-2:], flipped)):
            reply = self.raw().call("BF.LOADCHUNK", "dst", "1", bad)
            self.assertIsInstance(reply, Err)
            self.assertIn(reply.decode(), expected)
            self.assertEqual(self.r.exists("dst"), 0)
        # Bad iterators.
        self.assertError("ERR not found", "BF.LOADCHUNK", "dst", "0", header)
        self.assertError("ERR Second argument must be numeric", "BF.LOADCHUNK", "dst", "abc", header)
        self.assertError("ERR not found", "BF.LOADCHUNK", "dst", "-1", header)
        self.assertEqual(self.r.exists("dst"), 0)

        # A good header creates an empty filter of the same geometry.
        self.assertTrue(self.bf.loadchunk("dst", 1, header))
        self.assertEqual(self.r.execute_command("BF.MEXISTS", "dst", *items[:50]), [0] * 50)
        for it, data in chunks[1:]:
            flipped = bytearray(data)
            flipped[len(flipped) // 2] ^= 0x40
            self.assertError("ERR chunk checksum mismatch", "BF.LOADCHUNK", "dst", str(it), bytes(flipped))
            self.assertError("ERR invalid chunk length", "BF.LOADCHUNK", "dst", str(it), data[:-1])
            # A wrong iterator: past the end for the last chunk, otherwise the
            # offset no longer matches the one the checksum covers.
            reply = self.raw().call("BF.LOADCHUNK", "dst", str(it + 8), data)
            self.assertIsInstance(reply, Err)
            self.assertIn(reply.decode(), ("ERR chunk out of range", "ERR chunk checksum mismatch"))
            # Iterator 1 is a header, and dst exists already: RedisBloom reads
            # it as data and refuses it so.
            self.assertError("ERR received bad data", "BF.LOADCHUNK", "dst", "1", data)
        # None of that wrote a bit.
        self.assertEqual(self.r.execute_command("BF.MEXISTS", "dst", *items), [0] * len(items))
        self.assertEqual(self.r.execute_command("BF.CARD", "dst"), 0)
        # A header for an existing key is refused.
        self.assertError("ERR received bad data", "BF.LOADCHUNK", "src", "1", header)
        self.assertEqual(self.r.execute_command("BF.MEXISTS", "src", *items), [1] * len(items))
        # The right chunks still load afterwards.
        self.load("dst", chunks[1:])
        self.assertEqual(self.r.execute_command("BF.MEXISTS", "dst", *items), [1] * len(items))
        self.assertEqual(self.info("dst"), self.info("src"))
        self.assertTrue(self.r.ping())

    def test_loadchunk_wrong_arity(self):
        self.assertError("ERR wrong number of arguments for 'bf.loadchunk' command", "BF.LOADCHUNK", "k", "1")
        self.assertError("ERR wrong number of arguments for 'bf.scandump' command", "BF.SCANDUMP", "k")

    # ---- misc -------------------------------------------------------------

    def test_random_mix_matches_a_python_set_for_present_items(self):
        rng = random.Random(99)
        truth = set()
        self.r.execute_command("BF.RESERVE", "mix", "0.001", "5000")
        for _ in range(2000):
            item = "m%d" % rng.randrange(3000)
            if rng.random() < 0.5:
                got = self.r.execute_command("BF.ADD", "mix", item)
                if item in truth:
                    self.assertEqual(got, 0)
                truth.add(item)
            elif item in truth:
                self.assertEqual(self.r.execute_command("BF.EXISTS", "mix", item), 1)
        items_inserted = self.r.execute_command("BF.INFO", "mix", "ITEMS")[0]
        self.assertLessEqual(items_inserted, len(truth))
        self.assertGreaterEqual(items_inserted, len(truth) - 10)


if __name__ == "__main__":
    unittest.main()
