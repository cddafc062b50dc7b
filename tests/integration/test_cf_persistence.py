"""Cuckoo filters (CF.*) kept and moved: DUMP / RESTORE, COPY, MIGRATE,
RENAME and EXPIRE, SCAN TYPE, the bytes they hold in used_memory, the
snapshot checker, and exactness: threads adding (fingerprints relocated,
sub-filters grown), deleting (auto-compaction) and loading chunks on a few
filters while snapshots are taken and a replica syncs, then the replica
and a restart after kill -9 compared byte for byte (DUMP, which holds
every slot and count) with the live filters."""

import os
import random
import threading
import unittest

import redis

from harness import (BINARY, DUMP, Server, ServersTestCase, SharedServerTestCase, add_range,
                     check_snapshot, race_snapshots_and_a_replica, wait_durable, wait_until)

SANITIZED = "/asan/" in BINARY or "/tsan/" in BINARY


def cf_info(client, key):
    reply = client.execute_command("CF.INFO", key)
    return dict(zip(reply[::2], reply[1::2]))


def cf_chunks(client, key):
    """Every CF.SCANDUMP chunk of `key`, header first."""
    chunks, cursor = [], 0
    for _ in range(100000):
        cursor, data = client.execute_command("CF.SCANDUMP", key, cursor)
        if cursor == 0:
            return chunks
        chunks.append((cursor, data))
    raise AssertionError("CF.SCANDUMP did not finish")


def fill(client, key, first, last):
    pipe = client.pipeline(transaction=False)
    for i in range(first, last):
        pipe.execute_command("CF.ADD", key, "item-%d" % i)
    return pipe.execute()


class Moves(SharedServerTestCase):
    def setUp(self):
        self.r = self.server.client()
        self.r.flushall()

    def test_dump_and_restore_carry_every_slot_and_count(self):
        self.r.execute_command("CF.RESERVE", "c", 64, "EXPANSION", 2, "BUCKETSIZE", 4)
        fill(self.r, "c", 0, 400)
        for i in range(0, 400, 7):
            self.assertEqual(self.r.execute_command("CF.DEL", "c", "item-%d" % i), 1)
        payload = self.r.dump("c")
        self.assertEqual(payload[0], 0x02)
        self.r.restore("copy", 0, payload)
        self.assertEqual(self.r.type("copy"), b"MBbloomCF")
        self.assertEqual(cf_info(self.r, "copy"), cf_info(self.r, "c"))
        self.assertEqual(cf_chunks(self.r, "copy"), cf_chunks(self.r, "c"))
        self.assertEqual(self.r.dump("copy"), payload)
        with self.assertRaises(redis.ResponseError) as busy:
            self.r.restore("copy", 0, payload)
        self.assertIn("BUSYKEY", str(busy.exception))
        # A damaged payload is refused whole.
        broken = bytearray(payload)
        broken[5] ^= 0xFF
        with self.assertRaises(redis.ResponseError) as bad:
            self.r.restore("bad", 0, bytes(broken))
        self.assertIn("DUMP payload version or checksum are wrong", str(bad.exception))
        self.assertEqual(self.r.exists("bad"), 0)

    def test_copy_rename_expire_and_scan_type(self):
        self.r.execute_command("CF.RESERVE", "c", 1000)
        fill(self.r, "c", 0, 300)
        self.r.execute_command("BF.ADD", "b", "x")
        self.assertEqual(self.r.execute_command("COPY", "c", "d"), 1)
        self.assertEqual(self.r.dump("d"), self.r.dump("c"))
        # The copy is its own filter.
        self.assertEqual(self.r.execute_command("CF.DEL", "d", "item-1"), 1)
        self.assertEqual(self.r.execute_command("CF.EXISTS", "c", "item-1"), 1)
        self.assertEqual(self.r.execute_command("COPY", "c", "b"), 0)
        self.assertEqual(self.r.execute_command("COPY", "c", "b", "REPLACE"), 1)
        self.assertEqual(self.r.type("b"), b"MBbloomCF")
        self.assertTrue(self.r.rename("c", "c2"))
        self.assertEqual(self.r.execute_command("CF.COUNT", "c2", "item-5"), 1)
        self.assertTrue(self.r.expire("c2", 1000))
        self.assertGreater(self.r.ttl("c2"), 990)
        self.r.execute_command("BF.ADD", "bloom", "x")
        cursor, keys = self.r.scan(0, count=1000, _type="MBbloomCF")
        self.assertEqual((cursor, sorted(keys)), (0, [b"b", b"c2", b"d"]))
        cursor, keys = self.r.scan(0, count=1000, _type="MBbloom--")
        self.assertEqual((cursor, keys), (0, [b"bloom"]))

    def test_used_memory_counts_the_slots(self):
        before = self.r.info("memory")["used_memory"]
        self.r.execute_command("CF.RESERVE", "big", 8 * 1024 * 1024)
        grown = self.r.info("memory")["used_memory"]
        self.assertGreater(grown - before, 8 * 1024 * 1024)
        self.assertLess(grown - before, 9 * 1024 * 1024)
        self.assertGreater(self.r.memory_usage("big"), 8 * 1024 * 1024)
        self.r.delete("big")
        wait_until(lambda: self.r.info("memory")["used_memory"] < before + 1024 * 1024,
                   what="the slots to be freed")


class Migrate(ServersTestCase):
    def test_migrate_moves_a_cuckoo_filter(self):
        source = self.start(Server())
        target = self.start(Server())
        s, t = source.client(), target.client()
        s.execute_command("CF.RESERVE", "m", 128, "EXPANSION", 2)
        fill(s, "m", 0, 500)
        payload = s.dump("m")
        self.assertEqual(s.execute_command("MIGRATE", "127.0.0.1", target.port, "m", 0, 5000),
                         b"OK")
        self.assertEqual(s.exists("m"), 0)
        self.assertEqual(t.dump("m"), payload)
        self.assertEqual(t.execute_command("CF.EXISTS", "m", "item-499"), 1)


class Limits(ServersTestCase):
    def test_max_filter_bytes_bounds_creation_and_growth(self):
        server = self.start(Server("--max-filter-bytes", "65536"))
        r = server.client()
        with self.assertRaises(redis.ResponseError) as big:
            r.execute_command("CF.RESERVE", "big", 1000000)
        self.assertEqual(str(big.exception), "Insufficient memory to create filter")
        self.assertEqual(r.exists("big"), 0)
        r.execute_command("CF.RESERVE", "grows", 1024, "EXPANSION", 2)
        refused = None
        for i in range(100000):
            try:
                r.execute_command("CF.ADD", "grows", "i%d" % i)
            except redis.ResponseError as error:
                refused = (i, str(error))
                break
        self.assertIsNotNone(refused)
        self.assertEqual(refused[1], "Memory allocation failure")
        self.assertLessEqual(r.memory_usage("grows"), 65536 + 4096)
        # Every item acknowledged is there.
        self.assertEqual(r.execute_command("CF.MEXISTS", "grows", *["i%d" % i
                                                                    for i in range(refused[0])]),
                         [1] * refused[0])


class Worker(threading.Thread):
    """Adds, deletes, compacts and loads chunks on a few small Cuckoo
    filters that grow: relocations, new sub-filters and compactions all
    depend on the order of the changes, so any reordering between live and
    replay shows in the bytes."""

    def __init__(self, port, seed, ops):
        super().__init__(daemon=True)
        self.port, self.ops = port, ops
        self.rng = random.Random(seed)
        self.failure = None

    def step(self, client):
        key = "f%d" % self.rng.randrange(3)
        roll = self.rng.random()
        items = ["i%d" % self.rng.randrange(3000) for _ in range(self.rng.randrange(1, 12))]
        if roll < 0.45:
            pipe = client.pipeline(transaction=self.rng.random() < 0.2)
            for item in items:
                pipe.execute_command("CF.ADD" if self.rng.random() < 0.7 else "CF.ADDNX",
                                     key, item)
            pipe.execute(raise_on_error=False)
        elif roll < 0.55:
            client.execute_command("CF.INSERT", key, "ITEMS", *items)
        elif roll < 0.9:
            pipe = client.pipeline(transaction=False)
            for item in items:
                pipe.execute_command("CF.DEL", key, item)
            pipe.execute(raise_on_error=False)
        elif roll < 0.95:
            client.execute_command("CF.COMPACT", key)
        else:
            # A chunk written back where it came from: a change with its
            # own record, which must not be applied twice.
            chunks = cf_chunks(client, key)
            if len(chunks) > 1:
                cursor, data = chunks[1]
                client.execute_command("CF.LOADCHUNK", key, cursor, data)

    def run(self):
        client = redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=60)
        try:
            for _ in range(self.ops):
                self.step(client)
        except Exception as error:  # surfaced by the test
            self.failure = repr(error)
        finally:
            client.close()


def state_of(client):
    return {key: client.dump(key) for key in sorted(client.keys("f[0-9]"))}


class Exactness(ServersTestCase):
    def test_changes_racing_snapshots_replay_and_replicate_exactly(self):
        seed = random.randrange(1 << 30)
        ops = 150 if SANITIZED else 500
        primary = Server("--appendfsync", "everysec", save="")
        self.start(primary)
        p = primary.client()
        for n in range(3):
            p.execute_command("CF.RESERVE", "f%d" % n, 64, "EXPANSION", 2, "MAXITERATIONS", 50)
        for n in range(4):
            # Big filters: a snapshot takes a while to write them, so the
            # small ones change between its cut and its copy of them.
            p.execute_command("BF.RESERVE", "filler%d" % n, 0.01, 5000000)
            # Items in every region of its 6 MB: a snapshot writes only the
            # regions items touched (proto/snapshot.md).
            add_range(p, "filler%d" % n, 0, 150000, batch=5000)
        workers = [Worker(primary.port, seed * 10 + n, ops) for n in range(4)]
        saves, replica = race_snapshots_and_a_replica(self, primary, workers, seed)
        live = state_of(p)
        filters = sum(cf_info(p, key)[b"Number of filters"] for key in live)
        self.assertGreater(filters, 3, "seed %d: no filter grew" % seed)
        self.assertEqual(live, state_of(replica.client()), "seed %d: the replica" % seed)
        self.assertGreater(saves, 0)
        wait_durable(p)
        self.assertEqual(primary.kill(), -9)
        primary.start(timeout=60)
        self.assertEqual(live, state_of(primary.client()),
                         "seed %d: after kill -9 (snapshot and journal)" % seed)
        # The snapshot file describes them.
        status, report = check_snapshot(os.path.join(primary.data_dir, DUMP))
        self.assertEqual(status, 0, report)
        self.assertIn(": cuckoo, sub-filters ", report)
        print("\n[ measured ] seed %d: %d CF changes on 4 threads, %d snapshots during them, "
              "%d sub-filters at the end; replica and restart identical"
              % (seed, 4 * ops, saves, filters))


if __name__ == "__main__":
    unittest.main()
