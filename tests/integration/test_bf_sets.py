"""BF.MERGE, BF.CARD of several keys and BF.INTERCARD, end to end: replies
and errors, the union answering every item of every source, deadlines, MULTI,
and the merged filter after a restart (the journal's records of a merge are
its result: test_exactness replays merges racing adds bit for bit)."""

import unittest

import redis

from harness import Server, add_range, missing_items, scandump


class SetCommands(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Server("--appendfsync", "always")
        cls.server.start()
        cls.r = cls.server.client()

    @classmethod
    def tearDownClass(cls):
        cls.server.cleanup()

    def setUp(self):
        self.r.flushall()

    def info(self, key):
        reply = self.r.execute_command("BF.INFO", key)
        return dict(zip(reply[::2], reply[1::2]))

    def test_merge_of_one_shape_answers_every_item_and_keeps_the_shape(self):
        r = self.r
        r.execute_command("BF.RESERVE", "a", 0.01, 10000)
        r.execute_command("BF.RESERVE", "b", 0.01, 10000)
        add_range(r, "a", 0, 3000)
        add_range(r, "b", 2000, 5000)
        self.assertEqual(r.execute_command("BF.MERGE", "u", "a", "b"), b"OK")
        self.assertEqual(missing_items(r, "u", [str(i) for i in range(5000)]), [])
        info = self.info("u")
        self.assertEqual(info[b"Number of filters"], 1)
        self.assertEqual(info[b"Capacity"], 10000)
        self.assertAlmostEqual(info[b"Number of items inserted"], 5000, delta=100)
        self.assertAlmostEqual(r.execute_command("BF.CARD", "u"), 5000, delta=100)
        self.assertAlmostEqual(r.execute_command("BF.CARD", "a", "b"), 5000, delta=100)
        self.assertAlmostEqual(r.execute_command("BF.INTERCARD", 2, "a", "b"), 1000, delta=100)
        # The sources are unchanged.
        self.assertAlmostEqual(r.execute_command("BF.CARD", "a"), 3000, delta=60)

    def test_merge_into_a_source_keeps_its_deadline_and_replaces_any_other_key(self):
        r = self.r
        add_range(r, "a", 0, 50)
        add_range(r, "b", 50, 90)
        r.expire("a", 1000)
        self.assertEqual(r.execute_command("BF.MERGE", "a", "a", "b"), b"OK")
        self.assertGreater(r.ttl("a"), 900)
        self.assertEqual(missing_items(r, "a", [str(i) for i in range(90)]), [])
        add_range(r, "dest", 1000, 1010)
        r.expire("dest", 1000)
        self.assertEqual(r.execute_command("BF.MERGE", "dest", "b"), b"OK")
        self.assertEqual(r.ttl("dest"), -1)
        self.assertEqual(r.execute_command("BF.EXISTS", "dest", "1000"), 0)
        self.assertEqual(r.execute_command("BF.EXISTS", "dest", "60"), 1)

    def test_filters_of_other_shapes_are_appended_not_counted_together(self):
        r = self.r
        r.execute_command("BF.RESERVE", "small", 0.001, 100)
        r.execute_command("BF.RESERVE", "big", 0.01, 5000, "NONSCALING")
        add_range(r, "small", 0, 100)
        add_range(r, "big", 100, 1000)
        self.assertEqual(r.execute_command("BF.MERGE", "m", "small", "big"), b"OK")
        self.assertEqual(self.info("m")[b"Number of filters"], 2)
        self.assertEqual(missing_items(r, "m", [str(i) for i in range(1000)]), [])
        shapes = "the filters must have one sub-filter each, all of the same size and hash functions"
        for command in (("BF.CARD", "small", "big"), ("BF.INTERCARD", 2, "small", "big")):
            with self.assertRaisesRegex(redis.ResponseError, "^%s$" % shapes):
                r.execute_command(*command)
        # A NONSCALING destination cannot take another shape's layer.
        with self.assertRaisesRegex(redis.ResponseError, "NONSCALING filter merges only"):
            r.execute_command("BF.MERGE", "big", "big", "small")

    def test_errors(self):
        r = self.r
        r.execute_command("BF.RESERVE", "full", 0.01, 100, "NONSCALING")
        r.execute_command("BF.RESERVE", "other", 0.01, 100, "NONSCALING")
        add_range(r, "full", 0, 100)
        add_range(r, "other", 100, 200)
        with self.assertRaisesRegex(
                redis.ResponseError,
                r"^the merged filter's estimated false positive rate 0\.\d+ exceeds its error "
                r"rate 0\.01; FORCE merges anyway$"):
            r.execute_command("BF.MERGE", "full", "full", "other")
        self.assertEqual(r.execute_command("BF.EXISTS", "full", "150"), 0)
        self.assertEqual(r.execute_command("BF.MERGE", "full", "full", "other", "force"), b"OK")
        self.assertEqual(missing_items(r, "full", [str(i) for i in range(200)]), [])
        with self.assertRaisesRegex(redis.ResponseError, "^not found$"):
            r.execute_command("BF.MERGE", "d", "full", "nothing")
        self.assertEqual(r.exists("d"), 0)
        with self.assertRaisesRegex(redis.ResponseError, "^numkeys should be between 2 and 8$"):
            r.execute_command("BF.INTERCARD", 9, *["k%d" % i for i in range(9)])
        with self.assertRaisesRegex(redis.ResponseError, "^Number of keys can't be different"):
            r.execute_command("BF.INTERCARD", 2, "full", "other", "third")
        with self.assertRaisesRegex(redis.ResponseError, "wrong number of arguments"):
            r.execute_command("BF.MERGE", "d")
        # Missing keys: empty sets.
        self.assertEqual(r.execute_command("BF.CARD", "none1", "none2"), 0)
        self.assertEqual(r.execute_command("BF.INTERCARD", 2, "full", "none"), 0)

    def test_merge_in_a_transaction_and_command_getkeys(self):
        r = self.r
        add_range(r, "a", 0, 10)
        pipe = r.pipeline(transaction=True)
        pipe.execute_command("BF.ADD", "b", "10")
        pipe.execute_command("BF.MERGE", "a", "a", "b")
        pipe.execute_command("BF.EXISTS", "a", "10")
        self.assertEqual(pipe.execute(), [1, b"OK", 1])
        # redis-py's COMMAND callback expects COMMAND's own reply: a bare client.
        raw = redis.Redis(port=self.server.port)
        raw.response_callbacks.pop("COMMAND", None)
        self.addCleanup(raw.close)
        getkeys = lambda *args: raw.execute_command("COMMAND", "GETKEYS", *args)
        self.assertEqual(getkeys("BF.MERGE", "d", "s1", "force"), [b"d", b"s1"])
        self.assertEqual(getkeys("BF.MERGE", "d", "s1", "s2", "FORCE"), [b"d", b"s1", b"s2"])
        self.assertEqual(getkeys("BF.MERGE", "d", "force"), [b"d", b"force"])
        self.assertEqual(getkeys("BF.INTERCARD", 2, "x", "y"), [b"x", b"y"])


class MergeAfterRestart(unittest.TestCase):
    def test_the_merged_filter_comes_back_bit_for_bit_after_kill_9(self):
        server = Server("--appendfsync", "always")
        self.addCleanup(server.cleanup)
        server.start()
        r = server.client()
        add_range(r, "a", 0, 500)
        add_range(r, "b", 400, 1500)
        r.execute_command("BF.MERGE", "a", "a", "b", "FORCE")
        add_range(r, "a", 1500, 1600)  # adds after the merge, on its result
        add_range(r, "b", 5000, 6000)  # and to a source, which must not reach it
        before = scandump(r, "a")
        server.kill()
        server.start()
        r = server.client()
        self.assertEqual(scandump(r, "a"), before)
        self.assertEqual(missing_items(r, "a", [str(i) for i in range(1600)]), [])


if __name__ == "__main__":
    unittest.main()
