"""Migrating from RedisBloom (README "Migrating from RedisBloom"): RedisBloom
2.4's own dumps and RDB files (tests/fixtures/redisbloom, made by
make_fixtures.py and make_cuckoo_rdb.py with RedisBloom; these tests do not
need it) loaded into the real binary with redis-py, then compared with what
RedisBloom answered.
"""

import base64
import hashlib
import json
import os
import subprocess
import sys
import unittest

import redis

from harness import BINARY, ROOT, Server, check_snapshot, scandump, wait_until

FIXTURES = os.path.join(ROOT, "tests", "fixtures", "redisbloom")
TOOL = os.path.join(ROOT, "deploy", "migrate-from-redisbloom.py")


def load_json(name):
    with open(os.path.join(FIXTURES, name)) as f:
        return json.load(f)


FILTERS = load_json("filters.json")
LEGACY = load_json("legacy.json")
CUCKOO = load_json("cuckoo_rdb.json")


def items_of(spec):
    if "pattern" in spec:
        return [(spec["pattern"] % i).encode() for i in range(spec["count"])]
    return [base64.b64decode(x) for x in spec["b64"]]


def chunks_of(entries):
    return [(it, base64.b64decode(data)) for it, data in entries]


def loadchunks(client, key, chunks):
    for it, data in chunks:
        client.execute_command("BF.LOADCHUNK", key, it, data)


def mexists(client, key, items):
    out = []
    for start in range(0, len(items), 1000):
        out += client.execute_command("BF.MEXISTS", key, *items[start:start + 1000])
    return "".join(str(x) for x in out)


def madd(client, key, items):
    """BF.MADD in batches, each reply an int or the error text that stops it
    (as make_fixtures.py records RedisBloom's)."""
    out = []
    for start in range(0, len(items), 500):
        for reply in client.execute_command("BF.MADD", key, *items[start:start + 500]):
            if isinstance(reply, redis.ResponseError):
                out.append(str(reply))
                return out
            out.append(int(reply))
    return out


def info(client, key):
    reply = client.execute_command("BF.INFO", key)
    return {reply[i].decode(): reply[i + 1] for i in range(0, len(reply), 2)}


def cf_scandump(client, key):
    """Every CF.SCANDUMP chunk of `key`, as [(iterator, bytes)]."""
    chunks, cursor = [], 0
    while True:
        cursor, data = client.execute_command("CF.SCANDUMP", key, cursor)
        if cursor == 0:
            return chunks
        chunks.append((cursor, data))


def cf_chunks_of(entries):
    return [(it, bytes.fromhex(data)) for it, data in entries]


def cf_info(client, key):
    reply = client.execute_command("CF.INFO", key)
    return {reply[i].decode(): reply[i + 1] for i in range(0, len(reply), 2)}


def cf_items(f):
    return ["%s:%d" % (f["items"]["prefix"], i) for i in range(f["items"]["count"])]


def cf_mexists(client, key, items):
    out = []
    for start in range(0, len(items), 1000):
        out += client.execute_command("CF.MEXISTS", key, *items[start:start + 1000])
    return "".join(str(int(x)) for x in out)


def load_cuckoo(client, f):
    """A fixture's Cuckoo filter as RedisBloom held it (an empty one has no
    dump: made again with its CF.RESERVE)."""
    if f["chunks"]:
        for it, data in cf_chunks_of(f["chunks"]):
            client.execute_command("CF.LOADCHUNK", f["key"], it, data)
    else:
        client.execute_command("CF.RESERVE", f["key"], *f["create"])
    if f["pexpiretime"] > 0:
        client.pexpireat(f["key"], f["pexpiretime"])


def dump_digest(chunks):
    h = hashlib.sha256()
    for it, data in chunks:
        h.update(b"%d:%d:" % (it, len(data)))
        h.update(data)
    return h.hexdigest()


class MigrationTestCase(unittest.TestCase):
    def start(self, server):
        self.addCleanup(server.cleanup)
        return server.start()

    def load_all(self, client, filters=None):
        for f in FILTERS["filters"] if filters is None else filters:
            loadchunks(client, f["key"], chunks_of(f["chunks"]))


class LoadchunkOfRedisBloomDumps(MigrationTestCase):
    def test_every_item_answers_as_in_redisbloom_and_the_dump_is_its_own(self):
        server = self.start(Server())
        c = server.client()
        for f in FILTERS["filters"]:
            key = f["key"]
            with self.subTest(key=key):
                loadchunks(c, key, chunks_of(f["chunks"]))
                self.assertEqual(c.execute_command("BF.INFO", key, "SCHEME"), [b"redisbloom"])
                held = items_of(f["items"])
                self.assertEqual(mexists(c, key, held), "1" * len(held))
                self.assertEqual(mexists(c, key, items_of(f["absent"])), f["absent_answers"])
                self.assertEqual(info(c, key), f["info"])
                self.assertEqual(c.execute_command("BF.CARD", key), f["card"])
                # BF.SCANDUMP gives back RedisBloom's chunks, byte for byte.
                self.assertEqual(scandump(c, key), chunks_of(f["chunks"]))

    def test_further_adds_land_as_redisbloom_put_them(self):
        server = self.start(Server())
        c = server.client()
        for f in FILTERS["filters"]:
            key = f["key"]
            with self.subTest(key=key):
                loadchunks(c, key, chunks_of(f["chunks"]))
                after = f["after"]
                self.assertEqual(madd(c, key, items_of(f["more"])), after["replies"])
                self.assertEqual(info(c, key), after["info"])
                self.assertEqual(c.execute_command("BF.CARD", key), after["card"])
                self.assertEqual(mexists(c, key, items_of(f["absent"])), after["absent_answers"])
                self.assertEqual(dump_digest(scandump(c, key)), after["dump_sha256"])

    def test_older_redisbloom_encodings_grow_as_they_did(self):
        server = self.start(Server())
        c = server.client()
        for f in LEGACY["filters"]:
            key = f["key"]
            with self.subTest(key=key):
                loadchunks(c, key, chunks_of(f["loaded_chunks"]))
                self.assertEqual(madd(c, key, items_of(f["items"])), f["replies"])
                self.assertEqual(scandump(c, key), chunks_of(f["chunks"]))
                self.assertEqual(mexists(c, key, items_of(f["absent"])), f["absent_answers"])
                self.assertEqual(info(c, key), f["info"])

    def test_malformed_redisbloom_chunks_change_nothing(self):
        server = self.start(Server("--appendonly", "yes"))
        c = server.client()
        f = next(f for f in FILTERS["filters"] if f["key"] == "rb:scaling")
        chunks = chunks_of(f["chunks"])
        header = chunks[0][1]
        bad_headers = {
            "truncated": (header[:-1], "ERR received bad data"),  # no header of either format
            "size field": (b"\x01" + header[1:], "ERR received bad data"),
            "bits not bytes * 8": (header[:28] + b"\x01" + header[29:], "ERR received bad data"),
            "ENTS_IS_BITS": (header[:12] + bytes([header[12] | 2]) + header[13:],
                             "ERR unsupported RedisBloom filter options"),
        }
        c.execute_command("WAIT", 0, 0)
        before = c.info("persistence")["aof_appended_offset"]
        for name, (bad, error) in bad_headers.items():
            with self.subTest(header=name):
                with self.assertRaises(redis.ResponseError) as refused:
                    c.execute_command("BF.LOADCHUNK", "bad", 1, bad)
                self.assertTrue(str(refused.exception).startswith(error[4:]), str(refused.exception))
                self.assertEqual(c.exists("bad"), 0)
        loadchunks(c, "dst", chunks[:1])
        c.execute_command("WAIT", 0, 0)
        created = c.info("persistence")["aof_appended_offset"]
        # The refused headers wrote nothing; the good one its CREATE record.
        self.assertLess(created - before, 13 + 4 + 3 + 8 + 8 + 4 + len(header) + 1)
        it, data = chunks[1]
        for name, (bad_it, bad_data, error) in {
                "iterator below the length": (3, data, "received bad data"),
                "past the filter": (10 ** 9, data, "invalid offset - no link found"),
                "across sub-filters": (it + 8, data, "invalid chunk - Too big for current filter"),
        }.items():
            with self.subTest(chunk=name):
                with self.assertRaises(redis.ResponseError) as refused:
                    c.execute_command("BF.LOADCHUNK", "dst", bad_it, bad_data)
                self.assertEqual(str(refused.exception), error)
        # Nothing of it set a bit or reached the journal.
        self.assertEqual(c.execute_command("BF.INFO", "dst", "ITEMS"),
                         [f["info"]["Number of items inserted"]])
        self.assertEqual(set(b for _, d in scandump(c, "dst")[1:] for b in d), {0})
        c.execute_command("WAIT", 0, 0)
        self.assertEqual(c.info("persistence")["aof_appended_offset"], created)
        # The right chunks still load, and then it is RedisBloom's filter.
        loadchunks(c, "dst", chunks[1:])
        self.assertEqual(scandump(c, "dst"), chunks)

    def test_bloomerys_own_dumps_still_load_beside_redisbloom_ones(self):
        server = self.start(Server())
        c = server.client()
        c.execute_command("BF.RESERVE", "own", 0.01, 1000)
        c.execute_command("BF.MADD", "own", *range(2000))
        own = scandump(c, "own")
        self.assertTrue(own[0][1].startswith(b"BLMDUMP1"))
        loadchunks(c, "own-copy", own)
        self.assertEqual(scandump(c, "own-copy"), own)
        self.assertEqual(c.execute_command("BF.INFO", "own-copy", "SCHEME"), [b"bloomery"])


class RestartAndReplicaKeepMigratedFilters(MigrationTestCase):
    def test_snapshot_journal_and_replica_keep_every_bit(self):
        primary = self.start(Server("--appendonly", "yes"))
        p = primary.client()
        replica = self.start(Server("--replicaof", "127.0.0.1 %d" % primary.port))
        wait_until(lambda: replica.client().info("replication")["master_link_status"] == "up",
                   what="the replica's link")
        half = len(FILTERS["filters"]) // 2
        self.load_all(p, FILTERS["filters"][:half])
        self.assertTrue(p.save())  # half in the snapshot, half in the journal only
        self.load_all(p, FILTERS["filters"][half:])
        for f in FILTERS["filters"]:
            madd(p, f["key"], items_of(f["more"]))
        self.assertEqual(p.execute_command("WAIT", 1, 30000), 1)
        live = {f["key"]: scandump(p, f["key"]) for f in FILTERS["filters"]}
        r = replica.client()
        for f in FILTERS["filters"]:
            self.assertEqual(scandump(r, f["key"]), live[f["key"]], f["key"])
            self.assertEqual(dump_digest(live[f["key"]]), f["after"]["dump_sha256"], f["key"])
        primary.kill()  # a crash: the snapshot and the journal after it
        primary.start()
        p = primary.client()
        for f in FILTERS["filters"]:
            self.assertEqual(scandump(p, f["key"]), live[f["key"]], f["key"])
            self.assertEqual(p.execute_command("BF.INFO", f["key"], "SCHEME"), [b"redisbloom"])
        # And a snapshot taken now holds them as they are, for --check-snapshot too.
        self.assertTrue(p.save())
        code, text = check_snapshot(os.path.join(primary.data_dir, "dump.bloomery"))
        self.assertEqual(code, 0, text)
        self.assertIn("scheme redisbloom (options 5)", text)
        self.assertIn("scheme redisbloom (options 13)", text)  # the NONSCALING one
        primary.terminate()
        primary.start()
        for f in FILTERS["filters"]:
            self.assertEqual(scandump(primary.client(), f["key"]), live[f["key"]], f["key"])


class ImportRdb(MigrationTestCase):
    def run_import(self, rdb, data_dir):
        return subprocess.run([BINARY, "--import-rdb", rdb, "--dir", data_dir],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              stdin=subprocess.DEVNULL, timeout=120)

    def test_import_then_start_serves_every_filter_with_its_ttl(self):
        server = Server()
        self.addCleanup(server.cleanup)
        result = self.run_import(os.path.join(FIXTURES, "dump.rdb"), server.data_dir)
        out = result.stdout.decode()
        self.assertEqual(result.returncode, 0, out + result.stderr.decode())
        self.assertIn("Bloom filters imported: %d (2 with a TTL)" % len(FILTERS["filters"]), out)
        self.assertIn("Cuckoo filters imported: 1 (0 with a TTL)", out)
        self.assertIn("1 expired, 1 outside database 0", out)
        self.assertNotIn("MBbloomCF", out)
        server.start()
        c = server.client()
        self.assertEqual(c.dbsize(), len(FILTERS["filters"]) + 1)
        self.assertEqual(c.execute_command("CF.EXISTS", "cf:one", "cuckoo"), 1)
        for f in FILTERS["filters"]:
            key = f["key"]
            with self.subTest(key=key):
                self.assertEqual(scandump(c, key), chunks_of(f["chunks"]))
                self.assertEqual(info(c, key), f["info"])
                self.assertEqual(c.execute_command("PEXPIRETIME", key), f["pexpiretime"])
                self.assertEqual(madd(c, key, items_of(f["more"])), f["after"]["replies"])
                self.assertEqual(dump_digest(scandump(c, key)), f["after"]["dump_sha256"])
        for gone in ("rb:soon", "rb:db1", "str:plain"):
            self.assertEqual(c.exists(gone), 0, gone)

    def test_import_serves_redisblooms_cuckoo_filters_slot_for_slot(self):
        server = Server("--appendonly", "yes", "--appendfsync", "always")
        self.addCleanup(server.cleanup)
        result = self.run_import(os.path.join(FIXTURES, "cuckoo.rdb"), server.data_dir)
        out = result.stdout.decode()
        self.assertEqual(result.returncode, 0, out + result.stderr.decode())
        self.assertIn("Cuckoo filters imported: %d (1 with a TTL)" % len(CUCKOO["filters"]), out)
        self.assertIn("Cuckoo filter 'cf:db1' is in database 1", out)
        server.start()
        c = server.client()
        self.assertEqual(c.dbsize(), len(CUCKOO["filters"]) + 1)
        for f in CUCKOO["filters"]:
            key = f["key"]
            with self.subTest(key=key):
                self.assertEqual(c.type(key), b"MBbloomCF")
                self.assertEqual(cf_scandump(c, key), cf_chunks_of(f["chunks"]))
                self.assertEqual(cf_info(c, key), f["info"])
                self.assertEqual(cf_mexists(c, key, cf_items(f)), f["exists"])
                self.assertEqual(c.execute_command("PEXPIRETIME", key), f["pexpiretime"])
        bloom = CUCKOO["bloom"][0]
        self.assertEqual(scandump(c, bloom["key"]), cf_chunks_of(bloom["chunks"]))
        for gone in CUCKOO["expired"] + CUCKOO["other_database"]:
            self.assertEqual(c.exists(gone), 0, gone)
        # They take adds, and a crash keeps them: a snapshot of the imported
        # filters and the journal after it.
        self.assertTrue(c.save())
        c.execute_command("CF.ADD", "cf:default", "after-import")
        live = cf_scandump(c, "cf:default")
        server.kill()
        server.start()
        self.assertEqual(cf_scandump(server.client(), "cf:default"), live)

    def test_import_reads_redisblooms_older_cuckoo_encodings(self):
        server = Server()
        self.addCleanup(server.cleanup)
        result = self.run_import(os.path.join(FIXTURES, "cuckoo_legacy.rdb"), server.data_dir)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        server.start()
        c = server.client()
        for f in CUCKOO["legacy"]:
            self.assertEqual(cf_scandump(c, f["key"]), cf_chunks_of(f["chunks"]), f["key"])
            self.assertEqual(cf_info(c, f["key"]), f["info"], f["key"])

    def test_import_refuses_a_corrupt_file_and_existing_data(self):
        server = Server()
        self.addCleanup(server.cleanup)
        with open(os.path.join(FIXTURES, "dump.rdb"), "rb") as f:
            good = f.read()
        corrupt = os.path.join(server.data_dir, "corrupt.rdb")
        with open(corrupt, "wb") as f:
            f.write(good[:len(good) // 2])
        data_dir = os.path.join(server.data_dir, "data")
        result = self.run_import(corrupt, data_dir)
        self.assertEqual(result.returncode, 1)
        self.assertIn(corrupt + ": offset ", result.stderr.decode())
        self.assertFalse(os.path.exists(os.path.join(data_dir, "dump.bloomery")))
        self.assertEqual(self.run_import(os.path.join(FIXTURES, "legacy.rdb"), data_dir).returncode, 0)
        again = self.run_import(os.path.join(FIXTURES, "dump.rdb"), data_dir)
        self.assertEqual(again.returncode, 1)
        self.assertIn("exists", again.stderr.decode())

    def test_import_reads_redisblooms_older_encodings(self):
        server = Server()
        self.addCleanup(server.cleanup)
        self.assertEqual(self.run_import(os.path.join(FIXTURES, "legacy.rdb"),
                                         server.data_dir).returncode, 0)
        server.start()
        c = server.client()
        for f in LEGACY["filters"]:
            self.assertEqual(scandump(c, f["key"]), chunks_of(f["loaded_chunks"]), f["key"])
            self.assertEqual(madd(c, f["key"], items_of(f["items"])), f["replies"], f["key"])
            self.assertEqual(scandump(c, f["key"]), chunks_of(f["chunks"]), f["key"])


class MigrationTool(MigrationTestCase):
    def run_tool(self, source, target, *extra):
        result = subprocess.run([sys.executable, TOOL, "--from", "127.0.0.1:%d" % source.port,
                                 "--to", "127.0.0.1:%d" % target.port] + list(extra),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                stdin=subprocess.DEVNULL, timeout=300)
        return result.returncode, result.stdout.decode(), result.stderr.decode()

    def test_copies_redisbloom_and_bloomery_filters_with_ttls_and_verifies(self):
        source = self.start(Server())
        target = self.start(Server())
        s = source.client()
        self.load_all(s)  # RedisBloom's filters, as a RedisBloom source would dump them
        for f in FILTERS["filters"]:
            if f["pexpiretime"] > 0:
                s.pexpireat(f["key"], f["pexpiretime"])
        s.execute_command("BF.RESERVE", "own:blocked", 0.001, 50000, "LAYOUT", "BLOCKED")
        s.execute_command("BF.MADD", "own:blocked", *range(30000))
        s.execute_command("BF.INSERT", "own:small", "ITEMS", "a", "b")
        s.pexpire("own:small", 600000)
        # 18 MB holding 100 items: SCANDUMP skips its untouched regions.
        s.execute_command("BF.RESERVE", "own:sparse", 0.001, 10000000)
        s.execute_command("BF.MADD", "own:sparse", *range(100))
        code, out, err = self.run_tool(source, target, "--verify", "--sample", "300")
        self.assertEqual(code, 0, out + err)
        self.assertIn("copied %d Bloom filters" % (len(FILTERS["filters"]) + 3), out)
        self.assertIn("verified", out)
        t = target.client()
        for f in FILTERS["filters"]:
            self.assertEqual(scandump(t, f["key"]), chunks_of(f["chunks"]), f["key"])
            if f["pexpiretime"] > 0:
                self.assertEqual(t.execute_command("PEXPIRETIME", f["key"]) // 60000,
                                 f["pexpiretime"] // 60000, f["key"])
        for key in ("own:blocked", "own:small", "own:sparse"):
            self.assertEqual(scandump(t, key), scandump(s, key), key)
        self.assertEqual(t.execute_command("BF.MEXISTS", "own:sparse", *range(100)), [1] * 100)
        self.assertTrue(0 < t.pttl("own:small") <= 600000)
        self.assertEqual(t.pttl("own:blocked"), -1)
        # Again: every key exists now, refused unless --replace.
        code, out, err = self.run_tool(source, target, "--quiet")
        self.assertEqual(code, 1)
        self.assertIn("already exists on the target", err)
        code, out, err = self.run_tool(source, target, "--replace", "--verify", "--match", "rb:*")
        self.assertEqual(code, 0, err)
        self.assertIn("copied %d Bloom filters" % len(FILTERS["filters"]), out)

    def test_a_filter_whose_dump_carries_zeros_its_copy_leaves_out_verifies(self):
        # Counters BF.DEL brought back to zero stay in the source's dump as
        # zeros; the copy leaves them out of its own (as bloomery leaves out
        # what RedisBloom dumps of an empty 18 MB filter). --verify checks
        # the bits both dumps describe.
        source = self.start(Server())
        target = self.start(Server())
        s = source.client()
        s.execute_command("BF.RESERVE", "counting", 0.01, 100000, "COUNTING")
        s.execute_command("BF.MADD", "counting", *["c-%d" % i for i in range(200)])
        for i in range(100):
            s.execute_command("BF.DEL", "counting", "c-%d" % i)
        code, out, err = self.run_tool(source, target, "--verify")
        self.assertEqual(code, 0, out + err)
        self.assertIn("copied 1 Bloom filters", out)
        t = target.client()
        self.assertEqual(t.execute_command("BF.MEXISTS", "counting",
                                           *["c-%d" % i for i in range(100, 200)]), [1] * 100)
        self.assertEqual(t.execute_command("BF.INFO", "counting", "ITEMS"),
                         s.execute_command("BF.INFO", "counting", "ITEMS"))

    def test_dry_run_and_bad_arguments(self):
        source = self.start(Server())
        target = self.start(Server())
        self.load_all(source.client(), FILTERS["filters"][:2])
        code, out, err = self.run_tool(source, target, "--dry-run")
        self.assertEqual(code, 0, err)
        self.assertIn("would copy 2 Bloom filters", out)
        self.assertEqual(target.client().dbsize(), 0)
        self.assertEqual(self.run_tool(source, target, "--count", "0")[0], 2)
        result = subprocess.run([sys.executable, TOOL, "--from", "nohost", "--to", "x:1"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
        self.assertEqual(result.returncode, 2)
        # An unreachable target is a clear error, not a traceback.
        target.stop()
        code, out, err = self.run_tool(source, target)
        self.assertEqual(code, 1)
        self.assertIn("cannot reach the target", err)

    def test_copies_cuckoo_filters_with_ttls_and_verifies(self):
        # A bloomery source holding RedisBloom's Cuckoo filters as RedisBloom
        # dumped them (CF chunks are RedisBloom's format both ways), and
        # filters made on bloomery.
        source = self.start(Server())
        target = self.start(Server())
        s = source.client()
        for f in CUCKOO["filters"]:
            load_cuckoo(s, f)
        s.execute_command("CF.RESERVE", "own:cf", 200, "BUCKETSIZE", 4, "EXPANSION", 2)
        s.execute_command("CF.INSERT", "own:cf", "ITEMS", *range(600))
        for i in range(0, 600, 5):
            s.execute_command("CF.DEL", "own:cf", i)
        s.pexpire("own:cf", 600000)
        s.execute_command("BF.ADD", "bloom", "x")
        code, out, err = self.run_tool(source, target, "--verify", "--sample", "300")
        self.assertEqual(code, 0, out + err)
        self.assertIn("copied 1 Bloom filters and %d Cuckoo filters" % (len(CUCKOO["filters"]) + 1),
                      out)
        self.assertIn("verified", out)
        t = target.client()
        for f in CUCKOO["filters"]:
            key = f["key"]
            with self.subTest(key=key):
                self.assertEqual(cf_scandump(t, key), cf_chunks_of(f["chunks"]))
                self.assertEqual(cf_info(t, key), f["info"])
                self.assertEqual(cf_mexists(t, key, cf_items(f)), f["exists"])
                if f["pexpiretime"] > 0:
                    self.assertEqual(t.execute_command("PEXPIRETIME", key) // 60000,
                                     f["pexpiretime"] // 60000)
                else:
                    self.assertEqual(t.pttl(key), -1)
        self.assertEqual(cf_scandump(t, "own:cf"), cf_scandump(s, "own:cf"))
        self.assertEqual(cf_info(t, "own:cf"), cf_info(s, "own:cf"))
        self.assertTrue(0 < t.pttl("own:cf") <= 600000)
        # Existing keys stop it; --replace copies them again.
        code, out, err = self.run_tool(source, target, "--quiet", "--match", "cf:*")
        self.assertEqual(code, 1)
        self.assertIn("already exists on the target", err)
        code, out, err = self.run_tool(source, target, "--replace", "--verify", "--match", "cf:*")
        self.assertEqual(code, 0, err)
        self.assertIn("copied 0 Bloom filters and %d Cuckoo filters" % len(CUCKOO["filters"]), out)
        code, out, err = self.run_tool(source, target, "--dry-run", "--match", "own:*")
        self.assertIn("would copy own:cf (Cuckoo filter)", out)

    def test_an_empty_cuckoo_filter_is_made_again_with_its_settings(self):
        # No dump to copy: CF.RESERVE with the source's settings, and a
        # warning for the deletes count that cannot be carried.
        source = self.start(Server())
        target = self.start(Server())
        s = source.client()
        s.execute_command("CF.RESERVE", "cf:emptied", 500, "BUCKETSIZE", 3, "MAXITERATIONS", 7,
                          "EXPANSION", 4)
        s.execute_command("CF.ADD", "cf:emptied", "x")
        s.execute_command("CF.DEL", "cf:emptied", "x")
        code, out, err = self.run_tool(source, target, "--verify")
        self.assertEqual(code, 0, out + err)
        self.assertIn("cf:emptied is an empty Cuckoo filter of 1 sub-filters with 1 deletes", err)
        want = cf_info(s, "cf:emptied")
        want["Number of items deleted"] = 0
        self.assertEqual(cf_info(target.client(), "cf:emptied"), want)


if __name__ == "__main__":
    unittest.main()
