"""valkey-bloom's TIGHTENING r on BF.RESERVE and BF.INSERT: exact replies and
error texts, the layers a filter grows (error p·(1 − r)·r^i, read from its
BF.SCANDUMP header), BF.INFO TIGHTENING, MAXSCALEDCAPACITY and
VALIDATESCALETO at the filter's ratio, and the ratio kept through DUMP /
RESTORE, COPY, BF.LOADCHUNK, a restart (journal replay and snapshot), a
replica (full sync and the stream) and MIGRATE.
"""

import os
import sys
import unittest

import formats
import harness
from harness import (Server, ServersTestCase, TempDirCase, link_up, replica_of, scandump,
                     wait_until)

sys.path.insert(0, os.path.join(harness.ROOT, "tests", "tools"))
import bf_replies  # noqa: E402

BAD_RATIO = b"-ERR bad tightening ratio\r\n"
RANGE = b"-ERR (0 < tightening ratio range < 1)\r\n"
WITH_REDISBLOOM = (b"-ERR TIGHTENING must be 0.5 with the redisbloom scheme: its error rates "
                   b"halve at each sub-filter, as RedisBloom's\r\n")
UNREACHABLE = b"-ERR provided VALIDATESCALETO causes false positive to degrade to 0\r\n"
OK = b"+OK\r\n"


def header_of(client, key):
    return formats.parse_dump_header(scandump(client, key)[0][1])


def add_items(client, key, first, last):
    client.execute_command("BF.MADD", key, *["item:%d" % i for i in range(first, last)])


def all_present(client, key, first, last):
    replies = client.execute_command("BF.MEXISTS", key,
                                     *["item:%d" % i for i in range(first, last)])
    return all(reply == 1 for reply in replies)


def tightening(client, key):
    return float(client.execute_command("BF.INFO", key, "TIGHTENING")[0])


class TighteningRepliesTest(harness.SharedServerTestCase):
    def setUp(self):
        self.c = bf_replies.Connection("127.0.0.1", self.server.port)
        self.addCleanup(self.c.close)
        self.c.call_raw(["FLUSHALL"])
        self.client = self.server.client()

    def call(self, *args):
        return self.c.call_raw([str(a) for a in args])

    def test_reserve_and_insert_take_a_ratio_info_answers_it(self):
        self.assertEqual(self.call("BF.RESERVE", "r", "0.01", "100", "TIGHTENING", "0.25"), OK)
        self.assertEqual(self.call("BF.INFO", "r", "TIGHTENING"), b"*1\r\n$4\r\n0.25\r\n")
        self.assertEqual(self.call("BF.INSERT", "i", "tightening", "0.75", "ITEMS", "a"),
                         b"*1\r\n:1\r\n")
        self.assertEqual(self.call("BF.INFO", "i", "TIGHTENING"), b"*1\r\n$4\r\n0.75\r\n")
        self.assertEqual(self.call("BF.ADD", "d", "a"), b":1\r\n")
        self.assertEqual(self.call("BF.INFO", "d", "TIGHTENING"), b"*1\r\n$3\r\n0.5\r\n")
        # An existing filter keeps its own ratio: BF.INSERT's is for creating.
        self.assertEqual(self.call("BF.INSERT", "r", "TIGHTENING", "0.9", "ITEMS", "b"),
                         b"*1\r\n:1\r\n")
        self.call("HELLO", "3")
        self.assertEqual(self.call("BF.INFO", "r", "TIGHTENING"),
                         b"%1\r\n+Tightening ratio\r\n,0.25\r\n")

    def test_valkey_bloom_error_texts(self):
        for bad in ("abc", "", "0.5x"):
            self.assertEqual(self.call("BF.RESERVE", "k", "0.01", "100", "TIGHTENING", bad),
                             BAD_RATIO, bad)
            self.assertEqual(self.call("BF.INSERT", "k", "TIGHTENING", bad, "ITEMS", "a"),
                             BAD_RATIO, bad)
        for bad in ("0", "1", "1.5", "-0.25", "inf"):
            self.assertEqual(self.call("BF.RESERVE", "k", "0.01", "100", "TIGHTENING", bad),
                             RANGE, bad)
            self.assertEqual(self.call("BF.INSERT", "k", "TIGHTENING", bad, "ITEMS", "a"),
                             RANGE, bad)
        self.assertEqual(self.call("BF.RESERVE", "k", "0.01", "100", "TIGHTENING"), BAD_RATIO)
        self.assertEqual(self.call("BF.INSERT", "k", "TIGHTENING"),
                         b"-ERR wrong number of arguments for 'bf.insert' command\r\n")
        self.assertEqual(self.client.exists("k"), 0)

    def test_redisbloom_scheme_has_only_one_half(self):
        self.assertEqual(self.call("BF.RESERVE", "k", "0.01", "100", "SCHEME", "REDISBLOOM",
                                   "TIGHTENING", "0.25"), WITH_REDISBLOOM)
        self.assertEqual(self.call("BF.INSERT", "k", "SCHEME", "REDISBLOOM", "TIGHTENING", "0.75",
                                   "ITEMS", "a"), WITH_REDISBLOOM)
        self.assertEqual(self.client.exists("k"), 0)
        self.assertEqual(self.call("BF.RESERVE", "k", "0.01", "100", "SCHEME", "REDISBLOOM",
                                   "TIGHTENING", "0.5"), OK)
        self.assertEqual(self.call("BF.INFO", "k", "SCHEME"), b"*1\r\n$10\r\nredisbloom\r\n")

    def test_nonscaling_keeps_the_ratio_and_its_one_layer_has_the_rate(self):
        self.assertEqual(self.call("BF.RESERVE", "n", "0.01", "100", "NONSCALING", "TIGHTENING",
                                   "0.25"), OK)
        self.assertEqual(self.call("BF.INFO", "n", "TIGHTENING"), b"*1\r\n$4\r\n0.25\r\n")
        header = header_of(self.client, "n")
        self.assertEqual(header["flags"] & (1 | 8), 1 | 8)  # NONSCALING, a ratio
        self.assertEqual(header["layers"][0]["error_rate"], 0.01)

    def test_words_do_not_count_toward_reserve_arity(self):
        self.assertEqual(self.call("BF.RESERVE", "k", "0.01", "100", "EXPANSION", "4", "LAYOUT",
                                   "CLASSIC", "TIGHTENING", "0.25", "VALIDATESCALETO", "1000"), OK)
        self.assertEqual(self.call("BF.INFO", "k", "EXPANSION"), b"*1\r\n:4\r\n")

    def test_growth_follows_the_ratio_without_false_negatives(self):
        self.client.execute_command("BF.RESERVE", "g", "0.01", "100", "TIGHTENING", "0.25")
        add_items(self.client, "g", 0, 1000)
        header = header_of(self.client, "g")
        self.assertEqual(header["tightening"], 0.25)
        self.assertEqual([layer["capacity"] for layer in header["layers"]], [100, 200, 400, 800])
        expected = 0.01 * (1 - 0.25)
        for layer in header["layers"]:
            self.assertEqual(layer["error_rate"], expected)
            expected *= 0.25
        self.assertTrue(all_present(self.client, "g", 0, 1000))
        # A default filter's header is as before the ratio could be chosen.
        self.client.execute_command("BF.RESERVE", "d", "0.01", "100")
        add_items(self.client, "d", 0, 1000)
        plain = scandump(self.client, "d")[0][1]
        self.assertEqual(len(plain), 40 + 40 * 4 + 8)
        self.assertEqual(formats.parse_dump_header(plain)["flags"] & 8, 0)
        self.assertEqual([layer["error_rate"] for layer in formats.parse_dump_header(plain)
                          ["layers"]], [0.005, 0.0025, 0.00125, 0.000625])

    def test_max_scaled_capacity_and_validatescaleto_use_the_ratio(self):
        # 1e-15 at r = 0.25: 51 hashes in the first layer and 2 more in each,
        # so 39 layers of one item before one would need more than 128.
        args = ["1e-15", "1", "EXPANSION", "1", "TIGHTENING", "0.25"]
        self.assertEqual(self.call("BF.RESERVE", "v", *args, "VALIDATESCALETO", "40"),
                         UNREACHABLE)
        self.assertEqual(self.call("BF.RESERVE", "v", *args, "VALIDATESCALETO", "39"), OK)
        self.assertEqual(self.call("BF.INFO", "v", "MAXSCALEDCAPACITY"), b"*1\r\n:39\r\n")
        self.assertEqual(self.call("BF.RESERVE", "w", "1e-15", "1", "EXPANSION", "1"), OK)
        self.assertEqual(self.call("BF.INFO", "w", "MAXSCALEDCAPACITY"), b"*1\r\n:64\r\n")

    def test_dump_restore_copy_and_loadchunk_keep_the_ratio(self):
        self.client.execute_command("BF.RESERVE", "g", "0.01", "100", "TIGHTENING", "0.25")
        add_items(self.client, "g", 0, 500)
        before = scandump(self.client, "g")
        self.client.restore("restored", 0, self.client.dump("g"))
        self.client.copy("g", "copied")
        for key, chunk in [("loaded", c) for c in before]:
            self.client.execute_command("BF.LOADCHUNK", key, *chunk)
        for key in ("restored", "copied", "loaded"):
            self.assertEqual(tightening(self.client, key), 0.25, key)
            self.assertEqual(scandump(self.client, key), before, key)
            add_items(self.client, key, 500, 1000)
            self.assertEqual(header_of(self.client, key)["layers"][-1]["error_rate"],
                             0.01 * 0.75 * 0.25 ** 3)
            self.assertTrue(all_present(self.client, key, 0, 1000), key)


class TighteningRestartTest(TempDirCase):
    """The ratio after a crash (journal replay) and from a snapshot, and the
    layers the filter grows afterwards."""

    def fill(self, client):
        client.execute_command("BF.RESERVE", "q", "0.01", "100", "TIGHTENING", "0.25")
        client.execute_command("BF.INSERT", "n", "NONSCALING", "TIGHTENING", "0.75", "ITEMS", "x")
        client.execute_command("BF.RESERVE", "d", "0.01", "100")
        for key in ("q", "d"):
            add_items(client, key, 0, 400)

    def test_journal_replay_and_snapshot_keep_the_ratio(self):
        data_dir = self.make_dir()
        server = self.server(data_dir)
        client = server.client()
        self.fill(client)
        dumps = {key: scandump(client, key) for key in ("q", "n", "d")}
        server.kill()
        server = self.server(data_dir)
        client = server.client()
        for key, dump in dumps.items():
            self.assertEqual(scandump(client, key), dump, key)
        self.assertEqual(tightening(client, "q"), 0.25)
        self.assertEqual(tightening(client, "n"), 0.75)
        client.save()
        _, records, _ = formats.parse_snapshot(harness.read_bytes(
            os.path.join(data_dir, harness.DUMP)))
        ratios = {r["key"]: (r["tightening"], r["nonscaling"]) for r in records}
        self.assertEqual(ratios, {b"q": (0.25, 0), b"n": (0.75, 1), b"d": (0.5, 0)})
        server.terminate()
        server = self.server(data_dir)
        client = server.client()
        for key, dump in dumps.items():
            self.assertEqual(scandump(client, key), dump, key)
        add_items(client, "q", 400, 1000)
        self.assertEqual(header_of(client, "q")["layers"][-1]["error_rate"],
                         0.01 * 0.75 * 0.25 ** 3)
        self.assertTrue(all_present(client, "q", 0, 1000))


class TighteningReplicaTest(ServersTestCase):
    def test_replica_and_migrate_keep_the_ratio(self):
        primary = self.start(Server())
        client = primary.client()
        client.execute_command("BF.RESERVE", "before", "0.01", "100", "TIGHTENING", "0.25")
        add_items(client, "before", 0, 300)
        replica = self.start(replica_of(primary))
        wait_until(lambda: link_up(replica), what="the replica's link")
        client.execute_command("BF.INSERT", "after", "CAPACITY", "100", "TIGHTENING", "0.75",
                               "ITEMS", "a")
        for key in ("before", "after"):
            add_items(client, key, 300, 800)
        self.assertEqual(client.execute_command("WAIT", 1, 30000), 1)
        for key in ("before", "after"):
            self.assertEqual(scandump(replica.client(), key), scandump(client, key), key)
        self.assertEqual(tightening(replica.client(), "after"), 0.75)

        target = self.start(Server())
        self.assertEqual(client.execute_command("MIGRATE", "127.0.0.1", target.port, "before", 0,
                                                5000), b"OK")
        self.assertEqual(tightening(target.client(), "before"), 0.25)
        self.assertTrue(all_present(target.client(), "before", 0, 800))


if __name__ == "__main__":
    unittest.main()
