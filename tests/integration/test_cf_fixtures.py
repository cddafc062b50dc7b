"""Cuckoo filters move between RedisBloom and bloomery both ways: for each
fixture RedisBloom 2.4.23 made (tests/fixtures/redisbloom/cuckoo, written by
make_cuckoo_fixtures.py), its CF.SCANDUMP chunks loaded with CF.LOADCHUNK
give a filter that answers as RedisBloom's did (CF.INFO, CF.EXISTS,
CF.COUNT) and dumps the same chunks; and the same commands run on bloomery
give RedisBloom's replies and byte for byte RedisBloom's chunks, which
RedisBloom's CF.LOADCHUNK takes. Also the @cuckoo ACL category."""

import glob
import json
import os
import unittest

import redis

from harness import SharedServerTestCase

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures",
                        "redisbloom", "cuckoo")


def fixtures():
    for path in sorted(glob.glob(os.path.join(FIXTURES, "*.json"))):
        with open(path) as f:
            yield os.path.basename(path), json.load(f)


def chunks_of(client, key):
    chunks, cursor = [], 0
    for _ in range(100000):
        cursor, data = client.execute_command("CF.SCANDUMP", key, cursor)
        if cursor == 0:
            return chunks
        chunks.append([cursor, data.hex()])
    raise AssertionError("CF.SCANDUMP did not finish")


def info_of(client, key):
    reply = client.execute_command("CF.INFO", key)
    return {name.decode(): value for name, value in zip(reply[::2], reply[1::2])}


class BothWays(SharedServerTestCase):
    def setUp(self):
        self.r = self.server.client()
        self.r.flushall()

    def answers_as_redisbloom(self, key, fixture, name):
        self.assertEqual(info_of(self.r, key), fixture["info"], name)
        items = fixture["items"]
        exists = self.r.execute_command("CF.MEXISTS", key, *items)
        self.assertEqual(list(exists), fixture["exists"], name)
        pipe = self.r.pipeline(transaction=False)
        for item in items:
            pipe.execute_command("CF.COUNT", key, item)
        self.assertEqual(pipe.execute(), fixture["counts"], name)
        self.assertEqual(chunks_of(self.r, key), fixture["chunks"], name)

    def test_redisbloom_chunks_load_and_answer_alike(self):
        for name, fixture in fixtures():
            key = "loaded:" + name
            for cursor, data in fixture["chunks"]:
                self.assertEqual(self.r.execute_command("CF.LOADCHUNK", key, cursor,
                                                        bytes.fromhex(data)), b"OK", name)
            self.answers_as_redisbloom(key, fixture, name)

    def test_the_same_commands_make_redisbloom_s_bytes(self):
        for name, fixture in fixtures():
            key = "built:" + name
            self.assertEqual(self.r.execute_command("CF.RESERVE", key, *fixture["reserve"]),
                             b"OK", name)
            pipe = self.r.pipeline(transaction=False)
            for op, item in fixture["ops"]:
                pipe.execute_command("CF." + op.upper(), key, item)
            replies = [str(reply) if isinstance(reply, redis.ResponseError) else reply
                       for reply in pipe.execute(raise_on_error=False)]
            self.assertEqual(replies, fixture["replies"], name)
            self.answers_as_redisbloom(key, fixture, name)


class AclCategory(SharedServerTestCase):
    def test_acl_category_cuckoo_holds_the_cf_commands(self):
        r = self.server.client()
        self.assertIn(b"cuckoo", r.execute_command("ACL", "CAT"))
        self.assertEqual(sorted(r.execute_command("ACL", "CAT", "cuckoo")), sorted(
            [b"cf.reserve", b"cf.add", b"cf.addnx", b"cf.insert", b"cf.insertnx", b"cf.exists",
             b"cf.mexists", b"cf.count", b"cf.del", b"cf.compact", b"cf.info", b"cf.scandump",
             b"cf.loadchunk"]))
        self.assertNotIn(b"cf.add", r.execute_command("ACL", "CAT", "bloom"))


if __name__ == "__main__":
    unittest.main()
