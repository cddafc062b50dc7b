"""An item that was added never answers 0: after a restart from snapshot and
journal, on a replica after WAIT, and after a failover, every filter is the
live one bit for bit (every BF.SCANDUMP chunk) and count for count
(proto/journal.md, "Exactness").

BLOOMERY_EXACTNESS_OPS sets the operations per thread of the random test
(default 600; 200 under sanitizers, whose builds are several times slower).
"""

import os
import random
import threading
import time
import unittest

import redis

from harness import BINARY, Server, missing_items, scandump, wait_until

SANITIZED = "/asan/" in BINARY or "/tsan/" in BINARY
OPS = int(os.environ.get("BLOOMERY_EXACTNESS_OPS", "200" if SANITIZED else "600"))


def state_of(client):
    """Every key's BF.INFO and SCANDUMP chunks (a Cuckoo filter's CF.INFO
    and DUMP, which holds every slot and count), and its deadline
    (EXPIRETIME, in seconds: -1 for none)."""
    state = {}
    for key in sorted(client.keys("*")):
        if client.type(key) == b"MBbloomCF":
            state[key] = (client.execute_command("CF.INFO", key), client.dump(key),
                          client.execute_command("EXPIRETIME", key))
            continue
        state[key] = (client.execute_command("BF.INFO", key), scandump(client, key),
                      client.execute_command("EXPIRETIME", key))
    return state


def wait_past(deadline_ms):
    """Waits (polling the clock) until the wall clock is past `deadline_ms`."""
    while time.time() * 1000 < deadline_ms + 50:
        time.sleep(0.02)


class ExactnessTestCase(unittest.TestCase):
    def setUp(self):
        self.servers = []

    def tearDown(self):
        for server in self.servers:
            server.cleanup()

    def start(self, server, timeout=60):
        self.servers.append(server)
        server.start(timeout=timeout)
        return server

    def replica_of(self, primary, *extra):
        replica = self.start(Server("--replicaof", "127.0.0.1 %d" % primary.port, *extra))
        wait_until(lambda: replica.client().info("replication")["master_link_status"] == "up",
                   what="the replica's link")
        return replica

    def assert_same_state(self, expected, actual, what):
        self.assertEqual(sorted(expected), sorted(actual), what + ": keys")
        for key in expected:
            self.assertEqual(expected[key][0], actual[key][0], "%s: BF.INFO of %r" % (what, key))
            self.assertEqual(expected[key][2], actual[key][2], "%s: deadline of %r" % (what, key))
            self.assertTrue(expected[key][1] == actual[key][1],
                            "%s: SCANDUMP of %r differs" % (what, key))


def high_error_rate_adds(client):
    """One client: BF.RESERVE f 0.9 100 EXPANSION 2, then 60 rounds of a
    BF.MADD of 128 items and 64 BF.ADDs. Returns every item added."""
    client.execute_command("BF.RESERVE", "f", 0.9, 100, "EXPANSION", 2)
    items, n = [], 0
    for _ in range(60):
        batch = ["i%d" % (n + j) for j in range(128)]
        n += 128
        client.execute_command("BF.MADD", "f", *batch)
        items += batch
        for _ in range(64):
            client.execute_command("BF.ADD", "f", "i%d" % n)
            items.append("i%d" % n)
            n += 1
    return items


def cuckoo_adds(client):
    """One client: CF.RESERVE c 64 EXPANSION 2 (it grows to several
    sub-filters, relocating), 3,000 CF.ADDs and a CF.DEL of every third.
    Returns the items still added."""
    client.execute_command("CF.RESERVE", "c", 64, "EXPANSION", 2)
    pipe = client.pipeline(transaction=False)
    for i in range(3000):
        pipe.execute_command("CF.ADD", "c", "c%d" % i)
    pipe.execute()
    pipe = client.pipeline(transaction=False)
    for i in range(0, 3000, 3):
        pipe.execute_command("CF.DEL", "c", "c%d" % i)
    pipe.execute()
    return ["c%d" % i for i in range(3000) if i % 3 != 0]


def cuckoo_missing(client, items):
    return [item for item, present in zip(items, client.execute_command("CF.MEXISTS", "c", *items))
            if not present]


class OneClient(ExactnessTestCase):
    def test_restart_from_the_journal_gives_back_every_item_and_every_bit(self):
        server = self.start(Server(save=""))
        client = server.client()
        items = high_error_rate_adds(client)
        cuckoo_items = cuckoo_adds(client)
        before = state_of(client)
        self.assertEqual(server.terminate(), 0)
        server.start(timeout=60)
        client = server.client()
        self.assertEqual(missing_items(client, "f", items), [])
        self.assertEqual(cuckoo_missing(client, cuckoo_items), [])
        self.assert_same_state(before, state_of(client), "after the restart")

    def test_a_replica_after_wait_holds_every_item_and_every_bit(self):
        primary = self.start(Server(save=""))
        replica = self.replica_of(primary)
        p = primary.client()
        items = high_error_rate_adds(p)
        cuckoo_items = cuckoo_adds(p)
        self.assertEqual(p.execute_command("WAIT", 1, 0), 1)
        r = replica.client()
        self.assertEqual(missing_items(r, "f", items), [])
        self.assertEqual(cuckoo_missing(r, cuckoo_items), [])
        self.assert_same_state(state_of(p), state_of(r), "on the replica")


class Worker(threading.Thread):
    """Random operations on a small shared set of keys and some of its own:
    RESERVE at error rates from 0.9 to 1e-6 (COUNTING and expiring filters
    among them),
    Cuckoo filters' CF.ADD, ADDNX, INSERT, DEL, COMPACT and LOADCHUNK,
    ADD, MADD, INSERT, BF.DEL of items added before (counting filters'
    saturating counters: their order matters), DEL, RENAME,
    EXPIRE (far ahead, in the past, PERSIST, and deadlines that pass during
    the test: short PEXPIREs, often moved or removed before they pass),
    LOADCHUNK of another key's dump, transactions (MULTI ... EXEC) of
    several of those, FLUSHALL, SAVE and BGSAVE. Refusals are part of the
    game. `last_deadline` is the latest short deadline it set (ms)."""

    RATES = (0.9, 0.5, 0.1, 0.01, 0.001, 0.0001, 0.000001)

    def __init__(self, port, number, seed, ops):
        super().__init__(daemon=True)
        self.port, self.number, self.ops = port, number, ops
        self.rng = random.Random(seed)
        self.failure = None
        self.done = 0
        self.counter = 0
        self.last_deadline = 0
        self.recent = {}  # key: items this worker added to it lately, for BF.DEL
        self.deleted = 0  # BF.DELs that answered 1
        self.cf_deleted = 0  # CF.DELs that answered 1

    def key(self):
        r = self.rng.random()
        if r < 0.55:
            return "shared:%d" % self.rng.randrange(8)
        if r < 0.75:
            return "counting:%d" % self.rng.randrange(3)  # created COUNTING by the test
        return "own:%d:%d" % (self.number, self.rng.randrange(4))

    def item(self, key=None):
        self.counter += 1
        item = "t%d-%d" % (self.number, self.counter)
        if key is not None:
            self.recent[key] = self.recent.get(key, [])[-99:] + [item]
        return item

    def added_to(self, key):
        """An item this worker added to `key` lately, or one it never added."""
        items = self.recent.get(key)
        return self.rng.choice(items) if items and self.rng.random() < 0.9 else "never"

    def run(self):
        client = redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=60)
        client.response_callbacks.pop("BGSAVE", None)
        try:
            for _ in range(self.ops):
                try:
                    self.step(client)
                    if self.rng.random() < 0.15:
                        self.cuckoo_op(client)
                except redis.ResponseError:
                    pass
                self.done += 1
        except Exception as error:  # surfaced by the test
            self.failure = repr(error)
        finally:
            client.close()

    def cuckoo_step(self, c, key):
        """A change to a Cuckoo filter: adds (relocating, growing), deletes
        of items added before (or never), compaction, a reload of its own
        chunk. Against a Bloom filter's key: WRONGTYPE, part of the game."""
        r = self.rng.random()
        if r < 0.45:
            c.execute_command("CF.ADD" if r < 0.35 else "CF.ADDNX", key, self.item(key))
        elif r < 0.6:
            c.execute_command("CF.INSERT", key, "CAPACITY", 64, "ITEMS",
                              *[self.item(key) for _ in range(self.rng.randrange(1, 30))])
        elif r < 0.85:
            self.cf_deleted += c.execute_command("CF.DEL", key, self.added_to(key))
        elif r < 0.9:
            c.execute_command("CF.COMPACT", key)
        else:
            iterator, data = c.execute_command("CF.SCANDUMP", key, 1)
            if iterator != 0:
                c.execute_command("CF.LOADCHUNK", key, iterator, data)

    def cuckoo_op(self, c):
        """On top of the Bloom operations: one of the Cuckoo filters the
        test created, mostly changed by CF commands, else given what any key
        takes (DEL, RENAME, the deadlines), never a BF command that would
        make it a Bloom filter's key nor a RENAME onto a Bloom filter's."""
        key = "cuckoo:%d" % self.rng.randrange(3)
        r = self.rng.random()
        if r < 0.85:
            self.cuckoo_step(c, key)
        elif r < 0.9:
            c.delete(key)
        elif r < 0.95:
            # Among the Cuckoo names: the Bloom filters keep theirs.
            c.execute_command("RENAME", key, "cuckoo:%d" % self.rng.randrange(3))
        else:
            self.step(c, key, self.rng.uniform(0.80, 0.85))  # its deadline

    def step(self, c, key=None, r=None):
        r = self.rng.random() if r is None else r
        key = self.key() if key is None else key
        if r < 0.10:
            args = ["BF.RESERVE", key, self.rng.choice(self.RATES), self.rng.choice((10, 100, 1000))]
            if self.rng.random() < 0.2:
                # An expiring filter: adds shift it (a day is never up here).
                c.execute_command(*args, "WINDOW", self.rng.choice(("ITEMS", "1d")))
                return
            if self.rng.random() < 0.3:
                args.append("NONSCALING")
            elif self.rng.random() < 0.5:
                args += ["EXPANSION", self.rng.choice((1, 2, 4))]
            if self.rng.random() < 0.5:
                args.append("COUNTING")
            c.execute_command(*args)
        elif r < 0.28:
            c.execute_command("BF.ADD", key, self.item(key))
        elif r < 0.35:
            # Deletes racing other threads' adds to the same counting filter;
            # sometimes an item never added there (its counters are others').
            key = "counting:%d" % self.rng.randrange(3)
            # A counting filter there (made again if another thread deleted
            # it, or replaced if a plain one took the name) holding an item
            # of this thread's, deleted first.
            item = self.item(key)
            c.execute_command("BF.INSERT", key, "COUNTING", "ITEMS", item)
            try:
                self.deleted += c.execute_command("BF.DEL", key, item)
            except redis.ResponseError:
                c.delete(key)
                c.execute_command("BF.INSERT", key, "COUNTING", "ITEMS", item)
                self.deleted += c.execute_command("BF.DEL", key, item)
            for _ in range(self.rng.randrange(1, 4)):
                self.deleted += c.execute_command("BF.DEL", key, self.added_to(key))
        elif r < 0.60:
            c.execute_command("BF.MADD", key,
                              *[self.item(key) for _ in range(self.rng.randrange(1, 200))])
        elif r < 0.70:
            counting = self.rng.choice((["COUNTING"], [], ["WINDOW", "ITEMS"]))
            c.execute_command("BF.INSERT", key, "CAPACITY", self.rng.choice((10, 50, 500)), "ERROR",
                              self.rng.choice(self.RATES), *counting, "ITEMS",
                              *[self.item(key) for _ in range(self.rng.randrange(1, 100))])
        elif r < 0.75:
            c.delete(key)
        elif r < 0.80:
            c.execute_command("RENAME", key, self.key())
        elif r < 0.85:
            choice = self.rng.random()
            if choice < 0.3:
                c.expire(key, 3600)
            elif choice < 0.5:
                c.persist(key)
            elif choice < 0.6:
                c.pexpire(key, -1)  # in the past: deletes
            else:
                # Passes during the test, unless a later EXPIRE or PERSIST
                # (or a RENAME onto the key) moves it first.
                ms = self.rng.randrange(20, 800)
                self.last_deadline = max(self.last_deadline, time.time() * 1000 + ms)
                c.pexpire(key, ms)
        elif r < 0.885:
            # A merge into a key (itself a source or not) while others add
            # to the sources; FORCE past the rate, so most go through.
            sources = [key] + [self.key() for _ in range(self.rng.randrange(1, 3))]
            dest = self.rng.choice((key, self.key()))
            c.execute_command("BF.MERGE", dest, *sources, "FORCE")
        elif r < 0.92:
            # A restore: the dump of one key loaded chunk by chunk into another.
            target = "restored:%d:%d" % (self.number, self.counter)
            self.counter += 1
            iterator = 0
            for _ in range(10000):
                iterator, data = c.execute_command("BF.SCANDUMP", key, iterator)
                if iterator == 0:
                    break
                c.execute_command("BF.LOADCHUNK", target, iterator, data)
        elif r < 0.93:
            # Early on only, so plenty is left to compare at the end.
            if self.rng.random() < 0.1 and self.done < self.ops // 2:
                c.execute_command("FLUSHALL")
        elif r < 0.96:
            # A transaction of several writes to several keys: one unit in
            # the journal and on the replica.
            pipe = c.pipeline(transaction=True)
            for _ in range(self.rng.randrange(2, 6)):
                choice = self.rng.random()
                target = self.key()
                if choice < 0.4:
                    pipe.execute_command("BF.ADD", target, self.item(target))
                elif choice < 0.7:
                    pipe.execute_command("BF.MADD", target,
                                         *[self.item(target) for _ in range(self.rng.randrange(1, 50))])
                elif choice < 0.72:
                    pipe.execute_command("BF.MERGE", target, self.key(), target, "FORCE")
                elif choice < 0.75:
                    pipe.execute_command("BF.DEL", target, self.added_to(target))
                elif choice < 0.8:
                    pipe.execute_command("RENAME", target, self.key())
                elif choice < 0.9:
                    pipe.expire(target, 3600)
                else:
                    pipe.delete(target)
            pipe.execute(raise_on_error=False)
        elif r < 0.98:
            c.execute_command("BGSAVE")
        else:
            c.execute_command("SAVE")


class RandomOperations(ExactnessTestCase):
    def test_threads_of_random_operations_restart_and_replicate_exactly(self):
        # appendfsync always: everything acknowledged is durable, so a kill
        # after the last reply must give back exactly what was live.
        seed = int(os.environ.get("BLOOMERY_EXACTNESS_SEED", str(int(time.time()))))
        primary = self.start(Server("--appendfsync", "always", save=""))
        replica = self.replica_of(primary)
        for n in range(3):
            primary.client().execute_command("BF.RESERVE", "counting:%d" % n, 0.01, 100, "COUNTING")
            primary.client().execute_command("CF.RESERVE", "cuckoo:%d" % n, 64, "EXPANSION", 2)
        workers = [Worker(primary.port, n, seed * 10 + n, OPS) for n in range(4)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(600)
            self.assertFalse(worker.is_alive(), "a worker did not finish")
            self.assertIsNone(worker.failure, "seed %d" % seed)
        p = primary.client()
        self.assertEqual(p.execute_command("WAIT", 1, 0), 1)
        # Every short deadline has passed before the sides are compared (a
        # key expiring between two reads would differ by the moment read).
        wait_past(max(worker.last_deadline for worker in workers))
        live = state_of(p)
        self.assertGreater(len(live), 3, "seed %d: too few keys left to compare" % seed)
        self.assert_same_state(live, state_of(replica.client()), "seed %d: the replica" % seed)

        merges = p.info("commandstats").get("cmdstat_bf.merge", {})
        self.assertGreater(merges.get("calls", 0) - merges.get("failed_calls", 0), 0,
                           "seed %d: no merge went through" % seed)
        deleted = sum(worker.deleted for worker in workers)
        self.assertGreater(deleted, 0, "seed %d: no BF.DEL took an item out" % seed)
        cf_adds = p.info("commandstats").get("cmdstat_cf.add", {})
        self.assertGreater(cf_adds.get("calls", 0) - cf_adds.get("failed_calls", 0), 0,
                           "seed %d: no CF.ADD went through" % seed)
        self.assertEqual(primary.kill(), -9)
        primary.start(timeout=60)
        self.assert_same_state(live, state_of(primary.client()),
                               "seed %d: after kill -9 and restart" % seed)
        items = sum(dict(zip(v[0][::2], v[0][1::2]))[b"Number of items inserted"]
                    for v in live.values())
        print("\n[ measured ] seed %d: %d operations on 4 threads (%d merges, %d refused; %d "
              "counting deletes, %d Cuckoo deletes); %d keys (%d Cuckoo filters), %d items compared "
              "bit for bit on the replica and after kill -9"
              % (seed, 4 * OPS, merges["calls"], merges["failed_calls"], deleted,
                 sum(worker.cf_deleted for worker in workers), len(live),
                 sum(1 for key in live if isinstance(live[key][1], bytes)), items))


class Crashes(ExactnessTestCase):
    def test_default_configuration_keeps_each_keys_items_through_kill_9(self):
        # Three clients add with BF.MADD, each to its own key and to a shared
        # one; once everything written is durable (everysec's second has
        # passed), kill -9: each key holds its own items, bit for bit.
        server = self.start(Server())
        items = {}
        lock = threading.Lock()

        def add(number):
            client = redis.Redis(host="127.0.0.1", port=server.port, socket_timeout=60)
            own, shared = [], []
            for start in range(0, 60000, 1000):
                batch = ["c%d-%d" % (number, i) for i in range(start, start + 1000)]
                pipe = client.pipeline(transaction=False)
                pipe.execute_command("BF.MADD", "own:%d" % number, *batch)
                pipe.execute_command("BF.MADD", "shared", *batch[:200])
                pipe.execute()
                own += batch
                shared += batch[:200]
            with lock:
                items["own:%d" % number] = own
                items.setdefault("shared", []).extend(shared)

        threads = [threading.Thread(target=add, args=(n,)) for n in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(300)
        client = server.client()
        # No wait for the journal: every add was written before its reply,
        # so a kill -9 right after the reads loses nothing.
        live = state_of(client)
        self.assertEqual(server.kill(), -9)
        server.start(timeout=60)
        client = server.client()
        for key, added in items.items():
            self.assertEqual(missing_items(client, key, added), [], key)
        self.assert_same_state(live, state_of(client), "after kill -9")

    def test_failover_after_wait_keeps_every_item(self):
        primary = self.start(Server())
        replica = self.replica_of(primary)
        p = primary.client()
        added = []
        for start in range(0, 100000, 1000):
            batch = ["f%d" % i for i in range(start, start + 1000)]
            p.execute_command("BF.MADD", "urls", *batch)
            added += batch
        self.assertEqual(p.execute_command("WAIT", 1, 0), 1)
        live = state_of(p)
        self.assertEqual(primary.kill(), -9)
        r = replica.client()
        self.assertEqual(r.execute_command("REPLICAOF", "NO", "ONE"), b"OK")
        self.assertEqual(missing_items(r, "urls", added), [])
        self.assert_same_state(live, state_of(r), "on the promoted replica")


if __name__ == "__main__":
    unittest.main()
