"""DUMP, RESTORE, MIGRATE, COPY, RENAMENX, TOUCH and RANDOMKEY (README
"Commands", proto/dump.md), driven by redis-py: Redis 7's replies and
errors, and the journal records they write replayed after kill -9 and on a
replica, each filter byte-identical (BF.SCANDUMP) to the one it came from.
"""

import base64
import json
import os
import signal
import time
import unittest

import redis

from harness import Server, free_port, scandump, wait_durable, wait_until

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures")
BAD_PAYLOAD = "ERR DUMP payload version or checksum are wrong"


def redisbloom_filter(client, key):
    """A RedisBloom-scheme filter under `key`: the first of RedisBloom 2.4's
    own dumps (tests/fixtures/redisbloom) loaded with BF.LOADCHUNK."""
    with open(os.path.join(FIXTURES, "redisbloom", "filters.json")) as f:
        spec = json.load(f)["filters"][0]
    for iterator, data in spec["chunks"]:
        client.execute_command("BF.LOADCHUNK", key, iterator, base64.b64decode(data))
    assert client.execute_command("BF.INFO", key, "SCHEME") == [b"redisbloom"]


def fill(client, key, first, last, capacity=1000, error_rate=0.01, expansion=None):
    """BF.RESERVE key, then BF.MADD of first..last-1 (decimal strings)."""
    args = ["BF.RESERVE", key, error_rate, capacity]
    if expansion is not None:
        args += ["EXPANSION", expansion]
    client.execute_command(*args)
    for start in range(first, last, 1000):
        client.execute_command("BF.MADD", key, *range(start, min(start + 1000, last)))


def server_ms(client):
    seconds, micros = client.time()
    return seconds * 1000 + micros // 1000


def expire_soon(client, *keys):
    """Gives `keys` a deadline 200 ms ahead and waits until the server's
    clock is past it, without reading the keys (a read would erase them)."""
    deadline = server_ms(client) + 200
    for key in keys:
        client.pexpireat(key, deadline)
    wait_until(lambda: server_ms(client) > deadline, what="the keys' deadline to pass")


def error_of(call, *args):
    """The error text a command answers (fails the test if it succeeds)."""
    try:
        reply = call(*args)
    except redis.ResponseError as error:
        text = str(error)
        # redis-py drops the "ERR " of a plain error (and only of that one:
        # BUSYKEY, IOERR... reach it whole); put it back to compare the
        # server's full text.
        if type(error) is redis.ResponseError and text.split(" ", 1)[0] not in (
                "BUSYKEY", "IOERR", "NOKEY", "WRONGTYPE"):
            text = "ERR " + text
        return text
    raise AssertionError("%r answered %r, not an error" % (args, reply))


class DumpRestoreTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Server(threads=2)
        cls.server.start()

    @classmethod
    def tearDownClass(cls):
        cls.server.cleanup()

    def setUp(self):
        self.c = self.server.client()
        self.c.flushall()

    def test_round_trip_is_byte_identical(self):
        # A scaling filter with several layers, and a RedisBloom-scheme one.
        fill(self.c, "grown", 0, 5000, capacity=500, expansion=2)
        self.assertGreater(self.c.execute_command("BF.INFO", "grown", "FILTERS")[0], 1)
        redisbloom_filter(self.c, "rb")
        self.c.execute_command("BF.MADD", "rb", *range(3000))
        for key in ("grown", "rb"):
            payload = self.c.dump(key)
            self.assertIsInstance(payload, bytes)
            # Redis's shape: 2-byte version then CRC64 at the end.
            self.assertEqual(payload[-10:-8], b"\x02\xbf")  # 0xBF02: layers as runs
            self.assertTrue(self.c.restore(key + ".copy", 0, payload))
            self.assertEqual(scandump(self.c, key), scandump(self.c, key + ".copy"))
            self.assertEqual(self.c.execute_command("BF.INFO", key),
                             self.c.execute_command("BF.INFO", key + ".copy"))
            self.assertEqual(self.c.ttl(key + ".copy"), -1)
        # The restored filter answers for every item added to the original.
        answers = self.c.execute_command("BF.MEXISTS", "grown.copy", *range(5000))
        self.assertEqual(answers, [1] * 5000)

    def test_mostly_empty_filter_dumps_and_scandumps_what_it_holds(self):
        self.c.execute_command("BF.RESERVE", "sparse", 0.001, 10000000)  # 18 MB
        self.c.execute_command("BF.MADD", "sparse", *range(100))
        payload = self.c.dump("sparse")
        # About 1,000 non-zero words, as runs: not 18 MB.
        self.assertLess(len(payload), 64 * 1024)
        self.assertTrue(self.c.restore("sparse.copy", 0, payload))
        chunks = scandump(self.c, "sparse")
        self.assertEqual(scandump(self.c, "sparse.copy"), chunks)
        # SCANDUMP skips untouched regions: chunks of what the filter holds,
        # each at its own iterator, which LOADCHUNK places.
        self.assertLess(sum(len(data) for _, data in chunks), 2 * 1024 * 1024)
        for it, data in chunks:
            self.c.execute_command("BF.LOADCHUNK", "sparse.chunks", it, data)
        self.assertEqual(scandump(self.c, "sparse.chunks"), chunks)
        self.assertEqual(self.c.execute_command("BF.MEXISTS", "sparse.chunks", *range(100)),
                         [1] * 100)

    def test_dump_of_missing_key_is_nil(self):
        self.assertIsNone(self.c.dump("nothing"))

    def test_checksum_and_version_are_checked(self):
        fill(self.c, "f", 0, 100)
        payload = bytearray(self.c.dump("f"))
        for where in (5, len(payload) - 1, len(payload) - 10):
            bad = bytearray(payload)
            bad[where] ^= 0x01
            self.assertEqual(error_of(self.c.restore, "g", 0, bytes(bad)), BAD_PAYLOAD)
        self.assertEqual(error_of(self.c.restore, "g", 0, bytes(payload[:-1])), BAD_PAYLOAD)
        self.assertEqual(error_of(self.c.restore, "g", 0, b"short"), BAD_PAYLOAD)
        self.assertEqual(error_of(self.c.restore, "g", 0, b""), BAD_PAYLOAD)
        self.assertEqual(self.c.exists("g"), 0)

    def test_redis_payloads_are_refused(self):
        with open(os.path.join(FIXTURES, "redis", "dump_payloads.json")) as f:
            fixture = json.load(f)
        self.assertTrue(fixture["payloads"])
        for name, entry in fixture["payloads"].items():
            payload = bytes.fromhex(entry["hex"])
            self.assertEqual(error_of(self.c.restore, "from-redis-" + name, 0, payload), BAD_PAYLOAD)
            self.assertEqual(self.c.exists("from-redis-" + name), 0)

    def test_busykey_and_replace(self):
        fill(self.c, "a", 0, 100)
        fill(self.c, "b", 1000, 1100)
        payload = self.c.dump("a")
        self.assertEqual(error_of(self.c.restore, "b", 0, payload),
                         "BUSYKEY Target key name already exists.")
        # BUSYKEY comes before the TTL and the payload are read (Redis's order).
        self.assertEqual(error_of(self.c.execute_command, "RESTORE", "b", "-5", "junk"),
                         "BUSYKEY Target key name already exists.")
        self.assertTrue(self.c.restore("b", 0, payload, replace=True))
        self.assertEqual(scandump(self.c, "a"), scandump(self.c, "b"))

    def test_ttl_absttl_and_options(self):
        fill(self.c, "a", 0, 10)
        payload = self.c.dump("a")
        self.assertTrue(self.c.restore("t", 100000, payload))
        self.assertTrue(90000 < self.c.pttl("t") <= 100000)
        at = int(time.time() * 1000) + 500000
        self.assertTrue(self.c.restore("abs", at, payload, absttl=True))
        self.assertEqual(self.c.execute_command("PEXPIRETIME", "abs"), at)
        # A deadline already past: OK, and no key (REPLACE deletes the old one).
        self.assertTrue(self.c.restore("gone", 1, payload, absttl=True))
        self.assertEqual(self.c.exists("gone"), 0)
        self.assertTrue(self.c.restore("t", 1, payload, absttl=True, replace=True))
        self.assertEqual(self.c.exists("t"), 0)
        self.assertEqual(error_of(self.c.execute_command, "RESTORE", "n", "-1", payload),
                         "ERR Invalid TTL value, must be >= 0")
        self.assertEqual(error_of(self.c.execute_command, "RESTORE", "n", "x", payload),
                         "ERR value is not an integer or out of range")
        self.assertTrue(self.c.restore("idle", 0, payload, idletime=1000))
        # The key's idle time starts at IDLETIME (OBJECT IDLETIME counts on
        # from it); without IDLETIME a restored key is new, idle 0.
        self.assertGreaterEqual(self.c.object("idletime", "idle"), 1000)
        self.assertLess(self.c.object("idletime", "idle"), 1000 + 60)
        self.assertTrue(self.c.restore("fresh", 0, payload))
        self.assertLess(self.c.object("idletime", "fresh"), 60)
        # FREQ sets the use counter (OBJECT FREQ), decayed from then on.
        self.c.config_set("lfu-decay-time", 0)
        self.addCleanup(self.c.config_set, "lfu-decay-time", 1)
        self.assertTrue(self.c.restore("freq", 0, payload, frequency=100))
        self.assertEqual(self.c.object("freq", "freq"), 100)
        self.assertTrue(self.c.restore("freq", 0, payload, frequency=255, replace=True))
        self.assertEqual(self.c.object("freq", "freq"), 255)
        self.assertEqual(error_of(self.c.execute_command, "RESTORE", "n", 0, payload,
                                  "IDLETIME", "-1"), "ERR Invalid IDLETIME value, must be >= 0")
        self.assertEqual(error_of(self.c.execute_command, "RESTORE", "n", 0, payload, "FREQ",
                                  "256"), "ERR Invalid FREQ value, must be >= 0 and <= 255")
        # IDLETIME and FREQ together are a syntax error, as in Redis.
        self.assertEqual(error_of(self.c.execute_command, "RESTORE", "n", 0, payload, "IDLETIME",
                                  "1", "FREQ", "1"), "ERR syntax error")
        self.assertEqual(error_of(self.c.execute_command, "RESTORE", "n", 0, payload, "BOGUS"),
                         "ERR syntax error")
        self.assertEqual(self.c.exists("n"), 0)


class KeyCommandsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Server(threads=2)
        cls.server.start()

    @classmethod
    def tearDownClass(cls):
        cls.server.cleanup()

    def setUp(self):
        self.c = self.server.client()
        self.c.flushall()

    def test_copy(self):
        fill(self.c, "src", 0, 3000, capacity=500)
        self.c.pexpire("src", 600000)
        self.assertEqual(self.c.copy("src", "dst"), True)
        self.assertEqual(scandump(self.c, "src"), scandump(self.c, "dst"))
        self.assertTrue(0 < self.c.pttl("dst") <= 600000)
        # The copy is its own filter: adds to one do not reach the other.
        self.c.execute_command("BF.ADD", "src", "only-in-src")
        self.assertEqual(self.c.execute_command("BF.EXISTS", "dst", "only-in-src"), 0)
        self.assertEqual(self.c.copy("src", "dst"), False)
        self.assertEqual(self.c.copy("src", "dst", replace=True), True)
        self.assertEqual(scandump(self.c, "src"), scandump(self.c, "dst"))
        self.assertEqual(self.c.copy("missing", "x"), False)
        self.assertEqual(self.c.execute_command("COPY", "src", "db0", "DB", "0"), 1)
        self.assertEqual(error_of(self.c.execute_command, "COPY", "src", "db1", "DB", "1"),
                         "ERR DB index is out of range")
        self.assertEqual(error_of(self.c.execute_command, "COPY", "src", "src"),
                         "ERR source and destination objects are the same")
        self.assertEqual(error_of(self.c.execute_command, "COPY", "src", "x", "NOPE"),
                         "ERR syntax error")
        self.assertEqual(self.c.exists("x", "db1"), 0)

    def test_renamenx(self):
        fill(self.c, "a", 0, 10)
        fill(self.c, "b", 10, 20)
        before = scandump(self.c, "a")
        self.assertEqual(self.c.renamenx("a", "b"), False)
        self.assertEqual(self.c.renamenx("a", "a"), False)
        self.assertEqual(self.c.renamenx("a", "c"), True)
        self.assertEqual(self.c.exists("a"), 0)
        self.assertEqual(scandump(self.c, "c"), before)
        self.assertEqual(error_of(self.c.renamenx, "nothing", "d"), "ERR no such key")
        # A name taken only by a key past its deadline is free.
        expire_soon(self.c, "b")
        self.assertEqual(self.c.renamenx("c", "b"), True)

    def test_touch(self):
        fill(self.c, "a", 0, 10)
        fill(self.c, "b", 0, 10)
        self.assertEqual(self.c.touch("a", "b", "missing", "a"), 3)
        self.assertEqual(self.c.touch("missing"), 0)
        # TOUCH uses the key: its idle time starts again.
        self.assertTrue(self.c.restore("old", 0, self.c.dump("a"), idletime=5000))
        self.assertGreaterEqual(self.c.object("idletime", "old"), 5000)
        self.assertEqual(self.c.touch("old"), 1)
        self.assertLess(self.c.object("idletime", "old"), 60)

    def test_randomkey(self):
        self.assertIsNone(self.c.randomkey())
        keys = {"k%d" % i for i in range(20)}
        for key in keys:
            self.c.execute_command("BF.ADD", key, "x")
        seen = set()
        for _ in range(2000):
            key = self.c.randomkey().decode()
            self.assertIn(key, keys)
            seen.add(key)
            if seen == keys:
                break
        self.assertEqual(seen, keys)
        # Keys past their deadline are not drawn.
        self.c.flushall()
        self.c.execute_command("BF.ADD", "live", "x")
        for i in range(10):
            self.c.execute_command("BF.ADD", "dying%d" % i, "x")
        expire_soon(self.c, *("dying%d" % i for i in range(10)))
        for _ in range(50):
            self.assertEqual(self.c.randomkey(), b"live")


class MigrateTest(unittest.TestCase):
    def setUp(self):
        self.source = Server(threads=2).start()
        self.addCleanup(self.source.cleanup)
        self.target = Server("--requirepass", "secret", threads=2).start()
        self.addCleanup(self.target.cleanup)
        self.s = self.source.client()
        self.t = self.target.client(password="secret")

    def migrate(self, *args):
        return self.s.execute_command("MIGRATE", "127.0.0.1", self.target.port, *args)

    def test_single_key_moves(self):
        fill(self.s, "f", 0, 3000, capacity=500)
        self.s.pexpire("f", 600000)
        before = scandump(self.s, "f")
        self.assertEqual(error_of(self.migrate, "f", 0, 5000),
                         "ERR Target instance replied with error: NOAUTH Authentication required.")
        self.assertEqual(self.s.exists("f"), 1)
        # bloomery has one database: the target refuses SELECT 1, the key stays.
        self.assertEqual(error_of(self.migrate, "f", 1, 5000, "AUTH", "secret"),
                         "ERR Target instance replied with error: ERR DB index is out of range")
        self.assertEqual(self.s.exists("f"), 1)
        self.assertEqual(self.t.exists("f"), 0)
        self.assertEqual(self.migrate("f", 0, 5000, "AUTH", "secret"), b"OK")
        self.assertEqual(self.s.exists("f"), 0)
        self.assertEqual(scandump(self.t, "f"), before)
        self.assertTrue(0 < self.t.pttl("f") <= 600000)
        self.assertEqual(self.migrate("f", 0, 5000, "AUTH", "secret"), b"NOKEY")

    def test_refused_inside_a_transaction(self):
        # MIGRATE waits for another server, which a transaction (that no
        # other client sees half applied) cannot: refused while queueing, so
        # EXEC answers EXECABORT and nothing runs.
        fill(self.s, "m", 0, 100)
        pipe = self.s.pipeline(transaction=True)
        pipe.execute_command("BF.ADD", "other", "x")
        pipe.execute_command("MIGRATE", "127.0.0.1", self.target.port, "m", 0, 5000, "AUTH",
                             "secret")
        with self.assertRaisesRegex(redis.ResponseError, "EXECABORT|not allowed inside"):
            pipe.execute()
        self.assertEqual(self.s.exists("other"), 0)
        self.assertEqual(self.s.exists("m"), 1)
        self.assertEqual(self.t.exists("m"), 0)

    def test_keys_copy_and_replace(self):
        for i in range(5):
            fill(self.s, "k%d" % i, i * 100, i * 100 + 100)
        dumps = {i: scandump(self.s, "k%d" % i) for i in range(5)}
        self.assertEqual(self.migrate("", 0, 5000, "COPY", "AUTH2", "default", "secret", "KEYS",
                                      "k0", "k1", "absent", "k2"), b"OK")
        for i in range(3):
            self.assertEqual(self.s.exists("k%d" % i), 1)
            self.assertEqual(scandump(self.t, "k%d" % i), dumps[i])
        self.assertEqual(self.t.exists("absent"), 0)
        # Without REPLACE a key the target has is BUSYKEY; the source keeps it.
        self.assertEqual(error_of(self.migrate, "", 0, 5000, "AUTH", "secret", "KEYS", "k0"),
                         "ERR Target instance replied with error: BUSYKEY Target key name "
                         "already exists.")
        self.assertEqual(self.s.exists("k0"), 1)
        self.s.execute_command("BF.ADD", "k0", "newer")
        newer = scandump(self.s, "k0")
        self.assertEqual(self.migrate("", 0, 5000, "REPLACE", "AUTH", "secret", "KEYS", "k0", "k3",
                                      "k4"), b"OK")
        self.assertEqual(self.s.exists("k0", "k3", "k4"), 0)
        self.assertEqual(scandump(self.t, "k0"), newer)
        for i in (3, 4):
            self.assertEqual(scandump(self.t, "k%d" % i), dumps[i])

    def test_a_cached_connection_the_target_closed_is_replaced(self):
        # A target on a fixed port, restarted between two MIGRATEs: the
        # second finds its cached connection closed, connects again and
        # sends the key once.
        port = free_port()
        target = Server(threads=2, port=port).start()
        self.addCleanup(target.cleanup)
        fill(self.s, "a", 0, 100)
        fill(self.s, "b", 100, 200)
        expected = scandump(self.s, "b")
        self.assertEqual(self.s.execute_command("MIGRATE", "127.0.0.1", port, "a", 0, 5000), b"OK")
        target.terminate()
        target.start()
        self.assertEqual(self.s.execute_command("MIGRATE", "127.0.0.1", port, "b", 0, 5000), b"OK")
        self.assertEqual(self.s.exists("a", "b"), 0)
        self.assertEqual(scandump(target.client(), "b"), expected)

    def test_argument_errors(self):
        fill(self.s, "f", 0, 10)
        self.assertEqual(error_of(self.migrate, "f", 0, 5000, "KEYS", "f"),
                         "ERR When using MIGRATE KEYS option, the key argument must be set to the "
                         "empty string")
        self.assertEqual(error_of(self.migrate, "f", 0, 5000, "AUTH"), "ERR syntax error")
        self.assertEqual(error_of(self.migrate, "f", 0, 5000, "BOGUS"), "ERR syntax error")
        self.assertEqual(error_of(self.migrate, "f", "x", 5000),
                         "ERR value is not an integer or out of range")
        self.assertEqual(self.migrate("missing", 0, 5000), b"NOKEY")
        # Nobody listens on this port: Redis finds the refusal at its first
        # write, and says so.
        dead = free_port()
        self.assertEqual(error_of(self.s.execute_command, "MIGRATE", "127.0.0.1", dead, "f", 0,
                                  2000), "IOERR error or timeout writing to target instance")
        # A host that does not resolve fails the connect.
        self.assertEqual(error_of(self.s.execute_command, "MIGRATE", "nohost.invalid", 6379, "f",
                                  0, 2000), "IOERR error or timeout connecting to the client")
        self.assertEqual(self.s.exists("f"), 1)
        # COMMAND GETKEYS finds MIGRATE's keys in either form.
        self.assertEqual(self.s.execute_command("COMMAND GETKEYS", "MIGRATE", "h", "1", "f", "0",
                                                "1"), ["f"])
        self.assertEqual(self.s.execute_command("COMMAND GETKEYS", "MIGRATE", "h", "1", "", "0",
                                                "1", "AUTH", "KEYS", "KEYS", "a", "b"),
                         ["a", "b"])


class JournalReplayTest(unittest.TestCase):
    """Every key RESTORE, COPY, RENAMENX and MIGRATE made or removed comes
    back the same after kill -9 (journal replay) and on a replica."""

    def make_changes(self, c, other_port=None):
        fill(c, "orig", 0, 4000, capacity=500)
        redisbloom_filter(c, "rb")
        c.execute_command("BF.MADD", "rb", *range(800))
        payload = c.dump("orig")
        c.restore("restored", 0, payload)
        c.restore("restored.ttl", 900000, payload)
        c.restore("rb.restored", 0, c.dump("rb"))
        # Bits of more than a few MiB: journaled as several CHUNK records.
        c.execute_command("BF.RESERVE", "big", 0.0001, 1000000)
        c.execute_command("BF.MADD", "big", *range(0, 200000, 7))
        c.restore("big.restored", 0, c.dump("big"))
        c.copy("big", "big.copied")
        c.copy("orig", "copied")
        # The copy's source changes after it; the copy must not.
        c.execute_command("BF.MADD", "orig", *range(4000, 6000))
        c.renamenx("copied", "renamed")
        fill(c, "replaced", 10000, 10100)
        c.restore("replaced", 0, payload, replace=True)
        fill(c, "to-move", 20000, 20100)
        if other_port is not None:
            self.assertEqual(c.execute_command("MIGRATE", "127.0.0.1", other_port, "to-move", 0,
                                               5000), b"OK")

    KEYS = ["orig", "rb", "restored", "restored.ttl", "rb.restored", "renamed", "replaced",
            "big.restored", "big.copied"]

    def state(self, c):
        return {key: scandump(c, key) for key in self.KEYS}, sorted(c.keys("*"))

    def test_replay_after_kill(self):
        other = Server(threads=2).start()
        self.addCleanup(other.cleanup)
        server = Server("--appendfsync", "always", threads=2).start()
        self.addCleanup(server.cleanup)
        c = server.client()
        self.make_changes(c, other.port)
        before = self.state(c)
        self.assertNotIn(b"to-move", before[1])
        self.assertNotIn(b"copied", before[1])
        wait_durable(c)
        self.assertEqual(server.kill(), -signal.SIGKILL)
        server.start()
        c = server.client()
        self.assertEqual(self.state(c), before)
        self.assertTrue(0 < c.pttl("restored.ttl") <= 900000)

    def test_replica_matches(self):
        primary = Server(threads=2).start()
        self.addCleanup(primary.cleanup)
        replica = Server("--replicaof", "127.0.0.1 %d" % primary.port, threads=2).start()
        self.addCleanup(replica.cleanup)
        other = Server(threads=2).start()
        self.addCleanup(other.cleanup)
        p, r = primary.client(), replica.client()
        wait_until(lambda: r.info("replication")["master_link_status"] == "up",
                   what="the replica's link")
        self.make_changes(p, other.port)
        expected = self.state(p)
        wait_until(lambda: self.state(r) == expected, timeout=60, what="the replica to match")


if __name__ == "__main__":
    unittest.main()
