"""Filter layouts (classic, cache-blocked, and auto, the default, which picks
per sub-filter) through the real server: the LAYOUT option,
--bf-default-layout, BF.INFO's single-field forms, bits against RedisBloom's
sizing, false positives and no false negatives in every layout, snapshots,
the journal and SCANDUMP / LOADCHUNK carrying the layout of the filter and of
each sub-filter, and files written before layouts existed
(tests/integration/fixtures: a version-1 snapshot and a SCANDUMP of the
same age) still loading.
"""

import base64
import json
import math
import os
import shutil
import unittest

import harness
from harness import Server, scandump
from test_protocol import Err, RespConnection

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
DUMP = "dump.bloomery"


def load_fixture():
    with open(os.path.join(FIXTURES, "snapshot_v1.json")) as f:
        return json.load(f)


def info_map(client, key):
    reply = client.execute_command("BF.INFO", key)
    return {reply[i].decode(): reply[i + 1] for i in range(0, len(reply), 2)}


class LayoutOptionsTest(harness.SharedServerTestCase):

    def setUp(self):
        self.r = self.server.client()
        self.addCleanup(self.r.close)
        self.r.flushall()

    def layout(self, key):
        return self.r.execute_command("BF.INFO", key, "LAYOUT")[0]

    def test_default_layout_is_auto(self):
        self.r.execute_command("BF.ADD", "auto", "x")
        self.r.execute_command("BF.RESERVE", "reserved", 0.01, 1000)
        self.r.execute_command("BF.INSERT", "inserted", "ITEMS", "a")
        self.r.execute_command("BF.RESERVE", "big", 0.01, 1000000)
        for key in ("auto", "reserved", "inserted"):
            self.assertEqual(self.layout(key), b"auto (classic)", key)
        # 1M items at 0.5 %: blocks of four cache lines cost 1.8 % more bits
        # than RedisBloom's, one or two lines more than 2 %.
        self.assertEqual(self.layout("big"), b"auto (blocked-2048)")
        self.assertEqual(self.r.config_get("bf-default-layout"), {"bf-default-layout": "auto"})

    def test_auto_blocks_only_where_it_costs_at_most_two_percent(self):
        self.assertTrue(self.r.execute_command("BF.RESERVE", "a", 0.25, 1000000, "LAYOUT", "AUTO"))
        self.assertTrue(self.r.execute_command("BF.RESERVE", "d", 0.25, 1000000))
        self.assertTrue(self.r.execute_command("BF.RESERVE", "b", 0.25, 1000000,
                                               "LAYOUT", "BLOCKED"))
        self.assertEqual(self.layout("a"), b"auto (blocked)")
        self.assertEqual(self.layout("d"), b"auto (blocked)")
        # The same sub-filter `blocked` makes (12.5 %, 1M items: 1.9 % more bits).
        self.assertEqual(self.r.execute_command("BF.INFO", "a", "SIZE"),
                         self.r.execute_command("BF.INFO", "b", "SIZE"))
        self.r.execute_command("BF.INSERT", "i", "LAYOUT", "auto", "ERROR", 0.001, "ITEMS", "x")
        self.assertEqual(self.layout("i"), b"auto (classic)")

    def test_auto_costs_at_most_two_percent_more_bits_than_redisbloom(self):
        for rate in (0.5, 0.1, 0.01, 0.001, 1e-4, 1e-5, 1e-6, 1e-9):
            for capacity in (1000, 1000000):
                key = "s:%g:%d" % (rate, capacity)
                self.r.execute_command("BF.RESERVE", key, rate, capacity)
                bits = float(self.r.execute_command("BF.INFO", key, "BITSPERITEM")[0]) * capacity
                # RedisBloom's first sub-filter: entries · -ln(p/2) / ln(2)^2
                # bits, whole 64-bit words.
                wanted = int(capacity * -math.log(rate / 2) / math.log(2) ** 2)
                redisbloom = (wanted + 63) // 64 * 64
                self.assertLessEqual(bits, 1.02 * redisbloom, key)

    def test_layout_option_on_reserve_and_insert(self):
        self.assertTrue(self.r.execute_command("BF.RESERVE", "c", 0.01, 1000, "LAYOUT", "CLASSIC"))
        self.assertTrue(self.r.execute_command("BF.RESERVE", "b", 0.01, 1000, "layout", "blocked"))
        self.assertTrue(self.r.execute_command("BF.RESERVE", "n", 0.01, 1000, "NONSCALING",
                                               "LAYOUT", "CLASSIC"))
        self.assertTrue(self.r.execute_command("BF.RESERVE", "e", 0.01, 1000, "EXPANSION", 4,
                                               "LAYOUT", "BLOCKED"))
        self.r.execute_command("BF.INSERT", "ic", "CAPACITY", 500, "LAYOUT", "CLASSIC", "ITEMS", "a")
        self.r.execute_command("BF.INSERT", "ib", "LAYOUT", "BLOCKED", "ERROR", 0.001, "ITEMS", "a")
        expected = {"c": b"classic", "b": b"blocked", "n": b"classic", "e": b"blocked",
                    "ic": b"classic", "ib": b"blocked"}
        for key, layout in expected.items():
            self.assertEqual(self.layout(key), layout, key)
        self.assertEqual(self.r.execute_command("BF.INFO", "e", "EXPANSION"), [4])

    def test_bad_layout_is_refused_and_creates_nothing(self):
        c = RespConnection(self.server.port)
        self.addCleanup(c.close)
        for args in (("BF.RESERVE", "x", "0.01", "100", "LAYOUT", "CUCKOO"),
                     ("BF.RESERVE", "x", "0.01", "100", "LAYOUT"),
                     ("BF.INSERT", "x", "LAYOUT", "SPARSE", "ITEMS", "a")):
            reply = c.call(*args)
            self.assertIsInstance(reply, Err, args)
            self.assertEqual(reply.decode(), "ERR LAYOUT must be AUTO, CLASSIC or BLOCKED", args)
        self.assertEqual(self.r.exists("x"), 0)
        # Around LAYOUT, the other words are read as RedisBloom reads them:
        # BF.RESERVE ignores a word it does not know, BF.INSERT refuses it.
        self.assertEqual(c.call("BF.INSERT", "x", "LAYOUT", "BLOCKED", "BOGUS", "ITEMS", "a"),
                         Err(b"Unknown argument received"))
        self.assertEqual(self.r.exists("x"), 0)
        self.assertEqual(c.call("BF.RESERVE", "x", "0.01", "100", "LAYOUT", "CLASSIC", "BOGUS"),
                         b"OK")
        self.assertEqual(c.call("BF.INFO", "x", "LAYOUT"), [b"classic"])

    def test_full_info_stays_redisbloom_five_pairs(self):
        self.r.execute_command("BF.RESERVE", "b", 0.01, 1000, "LAYOUT", "BLOCKED")
        reply = self.r.execute_command("BF.INFO", "b")
        self.assertEqual(reply[0::2], [b"Capacity", b"Size", b"Number of filters",
                                       b"Number of items inserted", b"Expansion rate"])

    def test_bits_per_item_reflects_the_layout(self):
        self.r.execute_command("BF.RESERVE", "c", 0.01, 1000000, "NONSCALING", "LAYOUT", "CLASSIC")
        self.r.execute_command("BF.RESERVE", "b", 0.01, 1000000, "NONSCALING", "LAYOUT", "BLOCKED")
        classic = float(self.r.execute_command("BF.INFO", "c", "BITSPERITEM")[0])
        blocked = float(self.r.execute_command("BF.INFO", "b", "BITSPERITEM")[0])
        self.assertAlmostEqual(classic, -math.log(0.01) / math.log(2) ** 2, delta=0.01)
        self.assertGreater(blocked, classic)
        self.assertLessEqual(blocked, classic * 1.15)  # blocked's bound on its extra bits at 1 %

    def test_no_false_negatives_and_rate_within_target_in_both_layouts(self):
        n = 40000  # 47 KB of bits: big enough to be blocked
        items = ["member:%d" % i for i in range(n)]
        absent = ["absent:%d" % i for i in range(100000)]
        for layout in ("CLASSIC", "BLOCKED"):
            key = "fpr:" + layout
            self.r.execute_command("BF.RESERVE", key, 0.01, n, "NONSCALING", "LAYOUT", layout)
            self.assertEqual(self.r.execute_command("BF.INFO", key, "LAYOUT"), [layout.lower().encode()])
            for i in range(0, n, 1000):
                self.r.execute_command("BF.MADD", key, *items[i:i + 1000])
            for i in range(0, n, 1000):
                self.assertEqual(set(self.r.execute_command("BF.MEXISTS", key, *items[i:i + 1000])),
                                 {1}, layout)
            false_positives = 0
            for i in range(0, len(absent), 1000):
                false_positives += sum(self.r.execute_command("BF.MEXISTS", key,
                                                              *absent[i:i + 1000]))
            rate = false_positives / len(absent)
            # 4 standard deviations over 1 % for 100,000 probes.
            self.assertLessEqual(rate, 0.01 + 4 * math.sqrt(0.01 * 0.99 / len(absent)), layout)
            self.assertGreater(rate, 0.005, layout)  # really at its designed load

    def test_default_filter_in_multi_line_blocks_keeps_its_rate(self):
        n = 200000
        items = ["member:%d" % i for i in range(n)]
        absent = ["absent:%d" % i for i in range(100000)]
        for rate, layout in ((0.01, b"auto (blocked-2048)"), (0.001, b"auto (blocked-4096)")):
            key = "fpr:%g" % rate
            self.r.execute_command("BF.RESERVE", key, rate, n, "NONSCALING")
            self.assertEqual(self.layout(key), layout)
            for i in range(0, n, 1000):
                self.r.execute_command("BF.MADD", key, *items[i:i + 1000])
            for i in range(0, n, 1000):
                self.assertEqual(set(self.r.execute_command("BF.MEXISTS", key,
                                                            *items[i:i + 1000])), {1})
            false_positives = 0
            for i in range(0, len(absent), 1000):
                false_positives += sum(self.r.execute_command("BF.MEXISTS", key,
                                                              *absent[i:i + 1000]))
            rate_found = false_positives / len(absent)
            self.assertLessEqual(rate_found,
                                 rate + 4 * math.sqrt(rate * (1 - rate) / len(absent)), key)

    def test_auto_filter_picks_each_layer_as_it_grows(self):
        # The first sub-filter (200000 at 25 %) would cost 2.4 % more bits
        # blocked: classic; the second (400000 at 12.5 %) 1.9 %: blocked.
        self.r.execute_command("BF.RESERVE", "m", 0.5, 200000)
        self.assertEqual(self.layout("m"), b"auto (classic)")
        items = ["m%d" % i for i in range(260000)]
        for i in range(0, len(items), 1000):
            self.r.execute_command("BF.MADD", "m", *items[i:i + 1000])
        self.assertEqual(self.r.execute_command("BF.INFO", "m", "FILTERS"), [2])
        self.assertEqual(self.layout("m"), b"auto (blocked, classic)")
        for i in range(0, len(items), 1000):
            self.assertEqual(set(self.r.execute_command("BF.MEXISTS", "m", *items[i:i + 1000])),
                             {1})
        absent = ["absent:%d" % i for i in range(100000)]
        false_positives = 0
        for i in range(0, len(absent), 1000):
            false_positives += sum(self.r.execute_command("BF.MEXISTS", "m", *absent[i:i + 1000]))
        rate = false_positives / len(absent)
        self.assertLessEqual(rate, 0.5 + 4 * math.sqrt(0.5 * 0.5 / len(absent)))

    def test_scaling_blocked_filter_grows_blocked_layers(self):
        self.r.execute_command("BF.RESERVE", "g", 0.01, 100, "LAYOUT", "BLOCKED")
        self.r.execute_command("BF.MADD", "g", *["i%d" % i for i in range(1000)])
        self.assertGreaterEqual(self.r.execute_command("BF.INFO", "g", "FILTERS")[0], 3)
        self.assertEqual(self.layout("g"), b"blocked")
        self.assertEqual(set(self.r.execute_command("BF.MEXISTS", "g",
                                                    *["i%d" % i for i in range(1000)])), {1})

    def test_scandump_loadchunk_round_trip_keeps_the_layout(self):
        for layout in ("CLASSIC", "BLOCKED", "AUTO"):
            src, dst = "src:" + layout, "dst:" + layout
            self.r.execute_command("BF.RESERVE", src, 0.01, 200, "LAYOUT", layout)
            self.r.execute_command("BF.MADD", src, *["v%d" % i for i in range(500)])
            for it, data in scandump(self.r, src):
                self.r.execute_command("BF.LOADCHUNK", dst, it, data)
            self.assertEqual(self.layout(dst), self.layout(src))
            self.assertEqual(scandump(self.r, dst), scandump(self.r, src))
            self.assertEqual(info_map(self.r, dst), info_map(self.r, src))
            self.assertEqual(set(self.r.execute_command("BF.MEXISTS", dst,
                                                        *["v%d" % i for i in range(500)])), {1})
            self.assertEqual(self.r.execute_command("BF.CARD", dst),
                             self.r.execute_command("BF.CARD", src))


class DefaultLayoutOptionTest(unittest.TestCase):

    def test_classic_default_from_the_command_line(self):
        with Server("--bf-default-layout", "classic") as s:
            r = s.client()
            r.execute_command("BF.ADD", "k", "x")
            self.assertEqual(r.execute_command("BF.INFO", "k", "LAYOUT"), [b"classic"])
            r.execute_command("BF.RESERVE", "b", 0.01, 100, "LAYOUT", "BLOCKED")
            self.assertEqual(r.execute_command("BF.INFO", "b", "LAYOUT"), [b"blocked"])
            self.assertEqual(r.config_get("bf-default-layout"), {"bf-default-layout": "classic"})

    def test_unknown_default_layout_stops_the_server_with_a_message(self):
        s = Server("--bf-default-layout", "sparse")
        try:
            s.start(expect_failure=True)
            self.assertNotEqual(s.process.returncode, 0)
            self.assertIn("bf-default-layout", s.log())
        finally:
            s.cleanup()


class SnapshotsAcrossLayoutsTest(unittest.TestCase):

    def test_snapshot_round_trip_keeps_each_filter_layout(self):
        with Server() as s:
            r = s.client()
            r.execute_command("BF.RESERVE", "c", 0.01, 300, "LAYOUT", "CLASSIC")
            r.execute_command("BF.RESERVE", "b", 0.01, 300, "LAYOUT", "BLOCKED")
            r.execute_command("BF.RESERVE", "big", 0.01, 200000, "NONSCALING")  # mapped, blocked
            for key in ("c", "b"):
                r.execute_command("BF.MADD", key, *["%s%d" % (key, i) for i in range(1000)])
            r.execute_command("BF.MADD", "big", *["big%d" % i for i in range(5000)])
            before = {k: (info_map(r, k), r.execute_command("BF.CARD", k),
                          r.execute_command("BF.INFO", k, "LAYOUT")) for k in ("c", "b", "big")}
            self.assertTrue(r.save())
            s.kill()  # no final save: what loads is what SAVE wrote
            s.start()
            r = s.client()
            for key, (info, card, layout) in before.items():
                self.assertEqual(info_map(r, key), info, key)
                self.assertEqual(r.execute_command("BF.CARD", key), card, key)
                self.assertEqual(r.execute_command("BF.INFO", key, "LAYOUT"), layout, key)
            self.assertEqual(set(r.execute_command("BF.MEXISTS", "b",
                                                   *["b%d" % i for i in range(1000)])), {1})
            self.assertEqual(set(r.execute_command("BF.MEXISTS", "big",
                                                   *["big%d" % i for i in range(5000)])), {1})

    def test_auto_filters_come_back_bit_for_bit_from_the_journal_and_a_snapshot(self):
        def fill(r):
            r.execute_command("BF.RESERVE", "mixed", 0.5, 200000)
            r.execute_command("BF.RESERVE", "blocked", 0.125, 1000000, "NONSCALING")
            r.execute_command("BF.RESERVE", "classic", 0.001, 10000)
            r.execute_command("BF.RESERVE", "blocks", 0.01, 100000)
            for key, n in (("mixed", 260000), ("blocked", 50000), ("classic", 30000),
                           ("blocks", 250000)):
                for i in range(0, n, 1000):
                    r.execute_command("BF.MADD", key, *["%s%d" % (key, j)
                                                        for j in range(i, i + 1000)])

        def state(r):
            return {k: (scandump(r, k), r.execute_command("BF.INFO", k, "LAYOUT"),
                        r.execute_command("BF.INFO", k, "ITEMS"))
                    for k in ("mixed", "blocked", "classic", "blocks")}

        with Server() as s:  # the journal is on; no save points
            r = s.client()
            fill(r)
            before = state(r)
            self.assertEqual(before["mixed"][1], [b"auto (blocked, classic)"])
            self.assertEqual(before["blocked"][1], [b"auto (blocked)"])
            self.assertEqual(before["classic"][1], [b"auto (classic)"])
            self.assertEqual(before["blocks"][1], [b"auto (blocked-2048, blocked-4096)"])
            # kill -9 right after the last reply (everysec writes a
            # record before its reply): everything comes back from the
            # journal.
            s.kill()
            s.start()
            self.assertEqual(state(s.client()), before)
            r = s.client()
            self.assertTrue(r.save())
            s.kill()
            code, text = harness.check_snapshot(os.path.join(s.data_dir, DUMP))
            self.assertEqual(code, 0, text)
            self.assertIn("layout auto", text)
            s.start()
            self.assertEqual(state(s.client()), before)

    def test_version_1_snapshot_from_before_layouts_still_loads(self):
        expected = load_fixture()
        s = Server()
        try:
            shutil.copy(os.path.join(FIXTURES, "snapshot_v1.bloomery"),
                        os.path.join(s.data_dir, DUMP))
            code, text = harness.check_snapshot(os.path.join(s.data_dir, DUMP))
            self.assertEqual(code, 0, text)
            self.assertIn("format version: 1", text)
            s.start()
            r = s.client()
            self.assertEqual(sorted(r.keys()), [b"auto", b"big", b"fixed", b"scaling"])
            for key, info in expected["info"].items():
                got = info_map(r, key)
                want = {info[i]: info[i + 1] for i in range(0, len(info), 2)}
                for field in ("Capacity", "Number of filters", "Number of items inserted",
                              "Expansion rate"):
                    self.assertEqual(got[field], want[field], (key, field))
                # Same words, same estimate.
                self.assertEqual(r.execute_command("BF.CARD", key), expected["card"][key], key)
                self.assertEqual(r.execute_command("BF.INFO", key, "LAYOUT"), [b"classic"], key)
            self.assertEqual(set(r.execute_command("BF.MEXISTS", "scaling",
                                                   *["item:%d" % i for i in range(250)])), {1})
            self.assertEqual(set(r.execute_command("BF.MEXISTS", "fixed",
                                                   *["f:%d" % i for i in range(500)])), {1})
            self.assertEqual(set(r.execute_command("BF.MEXISTS", "big",
                                                   *["b:%d" % i for i in range(1000)])), {1})
            self.assertEqual(r.execute_command("PEXPIRETIME", "auto"), 4102444800000)
            # Loaded classic filters keep growing classic, and save in the current format.
            r.execute_command("BF.MADD", "scaling", *["more:%d" % i for i in range(1000)])
            self.assertEqual(r.execute_command("BF.INFO", "scaling", "LAYOUT"), [b"classic"])
            self.assertTrue(r.save())
            s.kill()
            code, text = harness.check_snapshot(os.path.join(s.data_dir, DUMP))
            self.assertEqual(code, 0, text)
            self.assertIn("format version: 5", text)
            self.assertNotIn("blocked", text)
            s.start()
            self.assertEqual(set(s.client().execute_command(
                "BF.MEXISTS", "scaling", *["more:%d" % i for i in range(1000)])), {1})
        finally:
            s.cleanup()

    def test_version_1_scandump_from_before_layouts_loads_with_loadchunk(self):
        expected = load_fixture()
        with Server() as s:
            r = s.client()
            for it, data in expected["scandump_scaling"]:
                r.execute_command("BF.LOADCHUNK", "restored", it, base64.b64decode(data))
            self.assertEqual(r.execute_command("BF.INFO", "restored", "LAYOUT"), [b"classic"])
            self.assertEqual(r.execute_command("BF.CARD", "restored"),
                             expected["card"]["scaling"])
            self.assertEqual(set(r.execute_command("BF.MEXISTS", "restored",
                                                   *["item:%d" % i for i in range(250)])), {1})


if __name__ == "__main__":
    unittest.main()
