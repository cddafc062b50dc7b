"""Expiring filters (BF.RESERVE ... WINDOW) against the binary: the window's
guarantee and its fade by count and by a clock the test moves (DEBUG
JUMP-CLOCK, behind enable-debug-command), the shifts only the primary
decides, kept exactly through a restart, kill -9 and a replica (BF.SCANDUMP
identical), an outage longer than the window caught up at start in one
step, and the options' refusals.
"""

import time
import unittest

import harness
from harness import Server, ServersTestCase, TempDirCase, link_up, replica_of, scandump, wait_until

# At 1 %: k = 12, l = 87; a window of 1,000 items takes generations of 12.
K, L = 12, 87


def info(client, key, field):
    return client.execute_command("BF.INFO", key, field)[0]


def generation(client, key):
    return int(info(client, key, "GENERATION"))


def present(client, key, items):
    """How many of `items` answer 1 (BF.MEXISTS, 1,000 at a time)."""
    found = 0
    for first in range(0, len(items), 1000):
        found += sum(client.execute_command("BF.MEXISTS", key, *items[first:first + 1000]))
    return found


def add_generations(client, key, count, g, prefix):
    """Adds `count` generations of `g` items each, waiting after each for
    the shifter to start the next (so each generation holds exactly g)."""
    items = []
    for _ in range(count):
        before = generation(client, key)
        batch = ["%s:%d" % (prefix, len(items) + i) for i in range(g)]
        client.execute_command("BF.MADD", key, *batch)
        items += batch
        wait_until(lambda: generation(client, key) > before, timeout=10,
                   what="the shifter to start the next generation")
    return items


def dump_of(client, key):
    return [(it, bytes(data)) for it, data in scandump(client, key)]


class CountWindowTest(harness.SharedServerTestCase):
    def setUp(self):
        self.client = self.server.client()
        self.client.flushall()

    def test_the_last_window_answers_1_and_older_items_fade(self):
        c = self.client
        self.assertTrue(c.execute_command("BF.RESERVE", "w", 0.01, 1000, "WINDOW", "ITEMS"))
        self.assertEqual(c.execute_command("BF.INFO", "w", "SLICES"), [[K, L]])
        g = int(info(c, "w", "GENERATIONITEMS"))
        self.assertEqual(g, 12)
        self.assertEqual(int(info(c, "w", "CAPACITY")), L * g)
        items = add_generations(c, "w", 3 * (K + L), g, "item")
        # Every item of the last l generations answers 1 ...
        self.assertEqual(present(c, "w", items[-L * g:]), L * g)
        # ... and those two windows old at about the rate asked for.
        old = items[:len(items) - 2 * (K + L) * g]
        self.assertLess(present(c, "w", old), 0.03 * len(old))
        self.assertEqual(int(info(c, "w", "ITEMS")), L * g)
        self.assertLess(abs(c.execute_command("BF.CARD", "w") - (L + 1) * g), 0.1 * L * g)
        self.assertLess(float(info(c, "w", "FPR")), 0.02)

    def test_an_add_that_outruns_the_shifter_keeps_every_item_of_the_window(self):
        c = self.client
        c.execute_command("BF.RESERVE", "fast", 0.01, 10000, "WINDOW", "ITEMS")
        harness.add_range(c, "fast", 0, 200000, batch=500)
        # The last window's items are there, and the adder was held to the
        # shifts' pace: no generation took more than its items, so the rate
        # is the one asked for.
        self.assertEqual(present(c, "fast", [str(i) for i in range(190000, 200000)]), 10000)
        self.assertGreater(c.info("stats")["expiring_shifts_by_count"], 1500)
        self.assertLess(float(info(c, "fast", "FPR")), 0.0125)
        self.assertLessEqual(int(info(c, "fast", "ITEMS")), 10005 + 115)

    def test_options_and_their_refusals(self):
        c = self.client
        call = c.execute_command
        self.assertTrue(call("BF.RESERVE", "t", 0.001, 5000, "WINDOW", "7d", "SLICES", 8, 40))
        self.assertEqual(call("BF.INFO", "t", "WINDOW"), [7 * 86400 * 1000])
        self.assertEqual(call("BF.INFO", "t", "SLICES"), [[8, 40]])
        self.assertEqual(call("BF.INSERT", "i", "CAPACITY", 100, "ERROR", 0.05, "WINDOW", "90m",
                              "ITEMS", "a", "b", "a"), [1, 1, 0])
        self.assertEqual(call("BF.INFO", "i", "WINDOW"), [90 * 60 * 1000])
        self.assertEqual(call("BF.ADD", "i", "c"), 1)
        self.assertEqual(call("BF.EXISTS", "i", "c"), 1)
        self.assertEqual(call("BF.EXISTS", "i", "zzz"), 0)
        # RedisBloom's five pairs.
        self.assertEqual(call("BF.INFO", "i")[0::2],
                         [b"Capacity", b"Size", b"Number of filters", b"Number of items inserted",
                          b"Expansion rate"])
        self.assertEqual(call("TYPE", "i"), b"MBbloom--")
        refusals = [
            (("BF.RESERVE", "x", 0.01, 10, "WINDOW", "3x"), "WINDOW must be"),
            (("BF.RESERVE", "x", 0.01, 10, "WINDOW", "0s"), "WINDOW must be"),
            (("BF.RESERVE", "x", 0.01, 10, "WINDOW"), "WINDOW must be"),
            (("BF.RESERVE", "x", 0.01, 10, "WINDOW", "20ms"), "WINDOW too short"),
            (("BF.RESERVE", "x", 0.01, 10, "WINDOW", "1d", "SLICES", 3), "SLICES takes"),
            (("BF.RESERVE", "x", 0.01, 10, "WINDOW", "1d", "SLICES", 0, 5), "SLICES takes"),
            (("BF.RESERVE", "x", 0.01, 10, "WINDOW", "1d", "SLICES", 2, 5000), "SLICES takes"),
            (("BF.RESERVE", "x", 1e-9, 10, "WINDOW", "1d", "SLICES", 1, 2), "no expiring filter"),
            (("BF.RESERVE", "x", 0.01, 10, "WINDOW", "ITEMS", "NONSCALING"), "takes only"),
            (("BF.RESERVE", "x", 0.01, 10, "WINDOW", "ITEMS", "WINDOW", "1d"), "takes only"),
            (("BF.INSERT", "x", "WINDOW", "1h", "EXPANSION", 4, "ITEMS", "a"), "takes only"),
            (("BF.INSERT", "x", "SLICES", 3, 4, "ITEMS", "a"), "SLICES needs WINDOW"),
            (("BF.INSERT", "x", "NOCREATE", "WINDOW", "1h", "ITEMS", "a"), "not found"),
            (("BF.RESERVE", "i", 0.01, 10, "WINDOW", "ITEMS"), "item exists"),
            (("BF.RESERVE", "i", 0.01, 10), "item exists"),
            (("BF.LOADCHUNK", "x", 1, b"BLMAGE01" + b"\0" * 80), "checksum"),
            (("BF.LOADCHUNK", "x", 1, b"BLMAGE01"), "not an expiring filter"),
            (("BF.LOADCHUNK", "i", 2, b"\0" * 7), "does not fit"),
            (("BF.LOADCHUNK", "i", 3, b"\0" * 8), "does not fit"),
            (("BF.LOADCHUNK", "i", 2, b"\0" * 8 * 100000), "does not fit"),
        ]
        for args, text in refusals:
            with self.assertRaises(Exception, msg=str(args)) as caught:
                call(*args)
            self.assertIn(text, str(caught.exception), args)
        self.assertEqual(call("EXISTS", "x"), 0)
        # What does not take an expiring filter yet says so, and nothing
        # changes.
        target = self.server.port  # MIGRATE refuses before it connects
        for args in [("DUMP", "i"), ("BF.MERGE", "j", "i", "t"), ("BF.CARD", "i", "t"),
                     ("BF.INTERCARD", 2, "i", "t"), ("BF.DEBUG", "i"), ("CF.ADD", "i", "a"),
                     ("MIGRATE", "127.0.0.1", target, "i", 0, 1000)]:
            with self.assertRaises(Exception, msg=str(args)) as caught:
                call(*args)
            if args[0] in ("DUMP", "BF.CARD", "BF.INTERCARD", "MIGRATE"):
                self.assertIn("does not take expiring filters", str(caught.exception))
        self.assertEqual(call("EXISTS", "j"), 0)
        self.assertEqual(call("BF.EXISTS", "i", "a"), 1)
        # What every kind of key takes.
        self.assertEqual(call("TOUCH", "i", "t", "nothing"), 2)
        pipe = c.pipeline(transaction=True)
        pipe.watch("i")
        pipe.multi()
        pipe.execute_command("BF.ADD", "i", "in the transaction")
        self.assertEqual(pipe.execute(), [1])
        self.assertEqual(call("BF.EXISTS", "i", "in the transaction"), 1)

    def test_copy_and_merge_of_aligned_windows(self):
        c = self.client
        call = c.execute_command
        for key in ("a", "b"):
            call("BF.RESERVE", key, 0.01, 1000, "WINDOW", "ITEMS")
        call("BF.MADD", "a", *["a%d" % i for i in range(10)])
        call("BF.MADD", "b", *["b%d" % i for i in range(10)])
        self.assertEqual(call("COPY", "a", "copy"), 1)
        self.assertEqual(dump_of(c, "copy"), dump_of(c, "a"))
        self.assertEqual(call("BF.MERGE", "both", "a", "b"), b"OK")
        both = ["a%d" % i for i in range(10)] + ["b%d" % i for i in range(10)]
        self.assertEqual(present(c, "both", both), 20)
        self.assertEqual(int(info(c, "both", "ITEMS")), 20)
        # Generations no longer aligned: refused, nothing changed.
        add_generations(c, "a", 1, 12, "more")
        with self.assertRaises(Exception) as caught:
            call("BF.MERGE", "both", "a", "b")
        self.assertIn("same shape, window and generation", str(caught.exception))
        call("BF.RESERVE", "plain", 0.01, 1000)
        with self.assertRaises(Exception):
            call("BF.MERGE", "both", "plain", "b")
        self.assertEqual(present(c, "both", both), 20)

    def test_debug_is_refused_by_default(self):
        with self.assertRaises(Exception) as caught:
            self.client.execute_command("DEBUG", "JUMP-CLOCK", 1000)
        self.assertIn("enable-debug-command", str(caught.exception))


class TimeWindowTest(ServersTestCase):
    def test_items_fade_a_window_after_their_add_by_the_servers_clock(self):
        server = self.start(Server("--enable-debug-command", "yes"))
        c = server.client()
        # A generation a minute, of 1,150 items: the adds below shift nothing.
        c.execute_command("BF.RESERVE", "t", 0.01, 100000, "WINDOW", "87m")
        g0 = generation(c, "t")
        items = ["a%d" % i for i in range(500)]
        c.execute_command("BF.MADD", "t", *items)
        minute = 60 * 1000
        # A minute short of the window: every generation shifted by the
        # clock, every item still there.
        c.execute_command("DEBUG", "JUMP-CLOCK", 86 * minute)
        wait_until(lambda: generation(c, "t") >= g0 + 86, what="86 shifts by the clock")
        self.assertEqual(present(c, "t", items), len(items))
        self.assertEqual(generation(c, "t"), g0 + 86)
        # Ten generations past the window: gone but for false positives.
        c.execute_command("DEBUG", "JUMP-CLOCK", 11 * minute)
        wait_until(lambda: generation(c, "t") >= g0 + 97, what="11 more shifts")
        self.assertLess(present(c, "t", items), 0.03 * len(items))
        self.assertEqual(c.info("stats")["expiring_shifts_by_count"], 0)
        self.assertGreaterEqual(c.info("stats")["expiring_shifts_by_time"], 97)

    def test_a_burst_beyond_the_expected_items_shifts_early(self):
        server = self.start(Server("--enable-debug-command", "yes"))
        c = server.client()
        c.execute_command("BF.RESERVE", "t", 0.01, 1000, "WINDOW", "1d")
        items = add_generations(c, "t", 5, 12, "burst")
        self.assertGreaterEqual(int(info(c, "t", "EARLYSHIFTS")), 5)
        self.assertEqual(present(c, "t", items), len(items))


class ExactnessTest(TempDirCase, ServersTestCase):
    def setUp(self):
        ServersTestCase.setUp(self)

    def fill(self, c):
        """Two expiring filters shifted by count and by the clock, left
        where nothing more shifts for a while: the time window's next
        generation is half of one (43 minutes) away."""
        c.execute_command("BF.RESERVE", "count", 0.01, 2000, "WINDOW", "ITEMS")
        c.execute_command("BF.RESERVE", "time", 0.001, 5000, "WINDOW", "200h")  # l = 139
        add_generations(c, "count", 30, 23, "c")
        harness.add_range(c, "count", 0, 30000, batch=300)
        harness.add_range(c, "time", 0, 20000, batch=300)
        generation_ms = 200 * 3600 * 1000 // 139
        c.execute_command("DEBUG", "JUMP-CLOCK", generation_ms * 41 // 2)
        wait_until(lambda: generation(c, "time") >= 20, what="the clock's shifts")
        harness.add_range(c, "time", 20000, 25000, batch=300)
        wait_until(lambda: c.info("stats")["expiring_shifts_pending"] == 0,
                   what="every full generation shifted")
        # A copy by BF.SCANDUMP and BF.LOADCHUNK holds what its source holds.
        for it, data in dump_of(c, "time"):
            c.execute_command("BF.LOADCHUNK", "copy", it, data)
        self.assertEqual(dump_of(c, "copy"), dump_of(c, "time"))
        self.assertEqual(c.execute_command("BF.INFO", "copy"), c.execute_command("BF.INFO", "time"))
        # ... and so do COPY and a merge, journaled with their bits.
        self.assertEqual(c.execute_command("COPY", "count", "copied"), 1)
        self.assertEqual(c.execute_command("BF.MERGE", "merged", "copy", "time"), b"OK")

    def state(self, c):
        return {key: (dump_of(c, key), c.execute_command("BF.INFO", key),
                      info(c, key, "GENERATION"), info(c, key, "SHIFTED"))
                for key in ("count", "time", "copy", "copied", "merged")}

    def test_a_restart_and_kill_9_give_back_the_same_filters(self):
        data = self.make_dir()
        server = self.start(Server("--enable-debug-command", "yes", "--appendonly", "yes",
                                   data_dir=data))
        c = server.client()
        self.fill(c)
        before = self.state(c)
        harness.wait_durable(c)
        server.kill()
        server.start()
        self.assertEqual(self.state(server.client()), before)
        server.client().execute_command("SAVE")
        server.stop()
        server.start()
        self.assertEqual(self.state(server.client()), before)

    def test_a_replica_holds_the_primarys_bits_and_never_shifts_itself(self):
        primary = self.start(Server("--enable-debug-command", "yes"))
        replica = self.start(replica_of(primary))
        wait_until(lambda: link_up(replica), what="the replica's link")
        p = primary.client()
        self.fill(p)
        self.assertEqual(p.execute_command("WAIT", 1, 10000), 1)
        r = replica.client()
        self.assertEqual(self.state(r), self.state(p))
        # A replica that starts now takes them by a full sync (a snapshot).
        late = self.start(replica_of(primary))
        wait_until(lambda: link_up(late), what="the late replica's link")
        self.assertEqual(self.state(late.client()), self.state(p))
        self.assertEqual(r.info("stats")["expiring_shifts_by_time"], 0)
        self.assertEqual(r.info("stats")["expiring_shifts_by_count"], 0)
        # Promoted, it decides the shifts from then on.
        r.execute_command("REPLICAOF", "NO", "ONE")
        wait_until(lambda: r.info("replication")["role"] == "master", what="the promotion")
        before = generation(r, "count")
        r.execute_command("BF.MADD", "count", *["after%d" % i for i in range(100)])
        wait_until(lambda: generation(r, "count") > before, what="the new primary's shift")


class OutageTest(TempDirCase, ServersTestCase):
    def setUp(self):
        ServersTestCase.setUp(self)

    def test_a_server_down_longer_than_the_window_clears_it_in_one_step(self):
        data = self.make_dir()
        server = self.start(Server("--appendonly", "yes", data_dir=data))
        c = server.client()
        c.execute_command("BF.RESERVE", "t", 0.01, 1000, "WINDOW", "3s")  # 34 ms generations
        items = ["x%d" % i for i in range(300)]
        c.execute_command("BF.MADD", "t", *items)
        self.assertEqual(present(c, "t", items), len(items))
        harness.wait_durable(c)
        g = generation(c, "t")
        shifted = int(info(c, "t", "SHIFTED"))
        server.kill()
        stopped = time.time()
        # The outage: longer than the window by the wall clock.
        wait_until(lambda: time.time() - stopped > 4.0, timeout=10, what="the outage")
        started = time.time()
        server.start()
        c = server.client()
        self.assertLess(present(c, "t", items), 0.03 * len(items))
        # The generations due by the clock between the last shift and now:
        # at least those due when the server started, at most those due now.
        first = generation(c, "t")
        self.assertGreaterEqual(first, g + int((started * 1000 - shifted) // 34) - 1)
        self.assertLessEqual(first, g + int((time.time() * 1000 - shifted) // 34) + 1)
        # One step at start, not one shift per missed generation (the
        # shifter goes on every 34 ms after it: a slow start sees some).
        stats = c.info("stats")
        self.assertEqual(stats["expiring_catch_ups"], 1)
        self.assertLess(stats["expiring_shifts_by_time"], (generation(c, "t") - g) / 2)


if __name__ == "__main__":
    unittest.main()
