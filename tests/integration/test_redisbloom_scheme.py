"""Filters created with the redisbloom scheme (SCHEME REDISBLOOM on BF.RESERVE
and BF.INSERT, or --bf-scheme redisbloom for filters created without it) are
the filters RedisBloom 2.4 creates for the same arguments: after the same
adds their BF.SCANDUMP chunks are byte for byte RedisBloom's
(tests/fixtures/redisbloom/created.json, made by make_created_fixtures.py
with RedisBloom; these tests do not need it), so RedisBloom can load them.
"""

import base64
import json
import os
import shutil
import tempfile
import unittest

import redis

from harness import ROOT, Server, ServersTestCase, link_up, replica_of, scandump, wait_until
from test_redisbloom_migration import info, madd

FIXTURES = os.path.join(ROOT, "tests", "fixtures", "redisbloom")

with open(os.path.join(FIXTURES, "created.json")) as f:
    CREATED = json.load(f)["filters"]


def items_of(spec):
    return [(spec["pattern"] % i).encode() for i in range(spec["count"])]


def with_scheme(create):
    """The fixture's creating command with SCHEME REDISBLOOM: BF.RESERVE's at
    the end, BF.INSERT's before ITEMS, and BF.ADD's auto-create as the
    BF.INSERT that creates the same filter (RedisBloom's defaults are the
    server's: 0.01, 100, expansion 2)."""
    name = create[0].upper()
    if name == "BF.RESERVE":
        return create + ["SCHEME", "REDISBLOOM"]
    if name == "BF.INSERT":
        at = [word.upper() for word in create].index("ITEMS")
        return create[:at] + ["SCHEME", "REDISBLOOM"] + create[at:]
    assert name == "BF.ADD", create
    return ["BF.INSERT", create[1], "SCHEME", "REDISBLOOM", "ITEMS", create[2]]


class SchemeTestCase(unittest.TestCase):
    def check_same_as_redisbloom(self, client, entry):
        key = entry["key"]
        replies = madd(client, key, items_of(entry["items"]))
        self.assertEqual(replies, entry["replies"], key)
        self.assertEqual(info(client, key), entry["info"], key)
        expected = [(it, base64.b64decode(data)) for it, data in entry["chunks"]]
        self.assertEqual(scandump(client, key), expected, key)
        self.assertEqual(client.execute_command("BF.INFO", key, "SCHEME"), [b"redisbloom"])


class SchemeOptionTest(SchemeTestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Server()
        cls.server.start()
        cls.client = cls.server.client()

    @classmethod
    def tearDownClass(cls):
        cls.server.cleanup()

    def test_created_with_scheme_redisbloom_dumps_as_redisbloom(self):
        self.assertGreaterEqual(len(CREATED), 4)
        for entry in CREATED:
            with self.subTest(key=entry["key"]):
                self.client.delete(entry["key"])
                self.client.execute_command(*with_scheme(entry["create"]))
                self.check_same_as_redisbloom(self.client, entry)

    def test_default_scheme_is_bloomery(self):
        self.client.execute_command("BF.ADD", "plain:auto", "x")
        self.client.execute_command("BF.RESERVE", "plain:reserve", "0.01", "100")
        for key in ("plain:auto", "plain:reserve"):
            self.assertEqual(self.client.execute_command("BF.INFO", key, "SCHEME"), [b"bloomery"])
        self.assertEqual(self.client.config_get("bf-scheme"), {"bf-scheme": "bloomery"})

    def test_scheme_words_in_any_case(self):
        self.client.execute_command("BF.RESERVE", "case:rb", "0.01", "100", "scheme", "RedisBloom")
        self.client.execute_command("BF.INSERT", "case:bl", "Scheme", "bloomery", "ITEMS", "a")
        self.assertEqual(self.client.execute_command("BF.INFO", "case:rb", "SCHEME"),
                         [b"redisbloom"])
        self.assertEqual(self.client.execute_command("BF.INFO", "case:bl", "SCHEME"), [b"bloomery"])

    def test_bad_scheme_is_refused(self):
        for command in (["BF.RESERVE", "bad:scheme", "0.01", "100", "SCHEME", "CUCKOO"],
                        ["BF.INSERT", "bad:scheme", "SCHEME", "CUCKOO", "ITEMS", "a"]):
            with self.assertRaisesRegex(redis.ResponseError, "SCHEME must be BLOOMERY or REDISBLOOM"):
                self.client.execute_command(*command)
        self.assertEqual(self.client.exists("bad:scheme"), 0)

    def test_layout_with_redisbloom_scheme_is_refused(self):
        for command in (["BF.RESERVE", "bad:layout", "0.01", "100", "SCHEME", "REDISBLOOM",
                         "LAYOUT", "BLOCKED"],
                        ["BF.INSERT", "bad:layout", "LAYOUT", "CLASSIC", "SCHEME", "REDISBLOOM",
                         "ITEMS", "a"]):
            with self.assertRaisesRegex(redis.ResponseError,
                                        "LAYOUT cannot be used with the redisbloom scheme"):
                self.client.execute_command(*command)
        self.assertEqual(self.client.exists("bad:layout"), 0)

    def test_scheme_words_do_not_count_toward_reserve_arity(self):
        # RedisBloom's 7 arguments, plus SCHEME's two and LAYOUT's two.
        self.client.execute_command("BF.RESERVE", "arity:ok", "0.01", "100", "EXPANSION", "4",
                                    "SCHEME", "BLOOMERY", "LAYOUT", "CLASSIC")
        with self.assertRaisesRegex(redis.ResponseError, "wrong number of arguments"):
            self.client.execute_command("BF.RESERVE", "arity:bad", "0.01", "100", "EXPANSION",
                                        "4", "other", "words", "SCHEME", "BLOOMERY")


class SchemeConfiguredTest(SchemeTestCase):
    """--bf-scheme redisbloom: filters created without SCHEME, BF.ADD's
    auto-create included, are RedisBloom's."""

    @classmethod
    def setUpClass(cls):
        cls.server = Server("--bf-scheme", "redisbloom")
        cls.server.start()
        cls.client = cls.server.client()

    @classmethod
    def tearDownClass(cls):
        cls.server.cleanup()

    def test_created_without_scheme_dumps_as_redisbloom(self):
        for entry in CREATED:
            with self.subTest(key=entry["key"]):
                self.client.delete(entry["key"])
                self.client.execute_command(*entry["create"])
                self.check_same_as_redisbloom(self.client, entry)

    def test_config_get_shows_the_scheme(self):
        self.assertEqual(self.client.config_get("bf-scheme"), {"bf-scheme": "redisbloom"})

    def test_scheme_bloomery_still_gives_bloomery_filters(self):
        self.client.execute_command("BF.RESERVE", "own", "0.01", "1000", "SCHEME", "BLOOMERY",
                                    "LAYOUT", "BLOCKED")
        self.assertEqual(self.client.execute_command("BF.INFO", "own", "SCHEME"), [b"bloomery"])
        self.assertEqual(self.client.execute_command("BF.INFO", "own", "LAYOUT"), [b"blocked"])

    def test_layout_without_scheme_is_refused(self):
        with self.assertRaisesRegex(redis.ResponseError,
                                    "LAYOUT cannot be used with the redisbloom scheme"):
            self.client.execute_command("BF.RESERVE", "laid", "0.01", "100", "LAYOUT", "BLOCKED")


class SchemeRestartTest(unittest.TestCase):
    """The scheme is kept with the filter: after a crash (journal replay)
    and after a snapshot the dumps are still RedisBloom's."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="bloomery-scheme-")
        self.addCleanup(shutil.rmtree, self.dir, True)

    def start(self):
        server = Server(data_dir=self.dir)
        server.start()
        self.addCleanup(server.cleanup)
        return server

    def check_dumps(self, client):
        for entry in CREATED:
            expected = [(it, base64.b64decode(data)) for it, data in entry["chunks"]]
            self.assertEqual(scandump(client, entry["key"]), expected, entry["key"])

    def test_journal_replay_and_snapshot_keep_the_scheme(self):
        server = self.start()
        client = server.client()
        for entry in CREATED:
            client.execute_command(*with_scheme(entry["create"]))
            madd(client, entry["key"], items_of(entry["items"]))
        self.check_dumps(client)
        server.kill()
        server = self.start()
        self.check_dumps(server.client())
        server.client().save()
        server.terminate()
        server = self.start()
        self.check_dumps(server.client())


class SchemeReplicaTest(ServersTestCase):
    def test_a_replica_of_a_bf_scheme_redisbloom_primary_holds_redisbloom_s_filters(self):
        # The replica runs with the default scheme: what it replays says
        # which scheme each filter has, it decides nothing.
        primary = self.start(Server("--bf-scheme", "redisbloom"))
        replica = self.start(replica_of(primary))
        wait_until(lambda: link_up(replica), what="the replica's link")
        client = primary.client()
        for entry in CREATED:
            client.execute_command(*entry["create"])
            madd(client, entry["key"], items_of(entry["items"]))
        self.assertEqual(client.execute_command("WAIT", 1, 30000), 1)
        for entry in CREATED:
            expected = [(it, base64.b64decode(data)) for it, data in entry["chunks"]]
            self.assertEqual(scandump(replica.client(), entry["key"]), expected, entry["key"])


if __name__ == "__main__":
    unittest.main()
