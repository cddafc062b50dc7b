"""Slots that move: CLUSTER SETSLOT IMPORTING / MIGRATING / STABLE / NODE,
ADDSLOTS and DELSLOTS, -ASK and -TRYAGAIN while a slot is open, ASKING
honoured only for a slot being imported, and deploy/move-slots.py under
writers: nothing acknowledged is lost, and a move that stops leaves no
partial copy behind."""

import logging
import subprocess
import sys
import threading
import time
import unittest

import redis
from redis.cluster import RedisCluster

import harness
from redis.crc import key_slot

from test_cluster import MOVE_SLOTS, cluster_node, free_ports, three_node_map

TWO_NODE_MAP = "0-8191=127.0.0.1:%d,8192-16383=127.0.0.1:%d"

# RedisCluster logs every -ASK and -MOVED it follows with a traceback.
logging.getLogger("redis.cluster").setLevel(logging.CRITICAL)


def tagged(tag, count):
    """`count` keys of one slot, and that slot."""
    return ["{%s}%d" % (tag, i) for i in range(count)], key_slot(("{%s}" % tag).encode())


def first_tag(low, high):
    """A hash tag whose slot lies in [low, high]."""
    for i in range(100000):
        tag = "t%d" % i
        if low <= key_slot(tag.encode()) <= high:
            return tag
    raise AssertionError("no tag in range")


class TwoNodeCluster(unittest.TestCase):
    """Node a serves slots 0-8191, node b 8192-16383 (self.a, self.b: clients)."""

    def setUp(self):
        self.ports = free_ports(2)
        slot_map = TWO_NODE_MAP % tuple(self.ports)
        self.nodes = [cluster_node(port, slot_map) for port in self.ports]
        for node in self.nodes:
            node.start()
        self.a, self.b = (node.client() for node in self.nodes)

    def tearDown(self):
        for node in self.nodes:
            node.cleanup()


class TwoNodes(TwoNodeCluster):
    def setUp(self):
        super().setUp()
        self.a_id = self.a.execute_command("CLUSTER", "MYID").decode()
        self.b_id = self.b.execute_command("CLUSTER", "MYID").decode()
        self.tag = first_tag(100, 8191)
        self.slot = key_slot(self.tag.encode())

    def error(self, conn, *command):
        with self.assertRaises(redis.ResponseError) as caught:
            conn.execute_command(*command)
        return str(caught.exception)

    def open_slot(self):
        """Slot self.slot migrating from a to b."""
        self.assertTrue(self.b.execute_command("CLUSTER", "SETSLOT", self.slot, "IMPORTING",
                                               self.a_id))
        self.assertTrue(self.a.execute_command("CLUSTER", "SETSLOT", self.slot, "MIGRATING",
                                               self.b_id))

    def asking(self, conn, *command):
        pipe = conn.pipeline(transaction=False)
        pipe.execute_command("ASKING")
        pipe.execute_command(*command)
        return pipe.execute(raise_on_error=False)[1]

    def test_setslot_and_slot_assignment_answer_as_redis(self):
        self.a.execute_command("BF.ADD", "{%s}k" % self.tag, "x")
        cases = [
            (self.a, ("CLUSTER", "SETSLOT", 100, "IMPORTING", self.b_id),
             "I'm already the owner of hash slot 100"),
            (self.a, ("CLUSTER", "SETSLOT", 9000, "MIGRATING", self.b_id),
             "I'm not the owner of hash slot 9000"),
            (self.a, ("CLUSTER", "SETSLOT", 100, "MIGRATING", "f" * 40),
             "I don't know about node " + "f" * 40),
            (self.a, ("CLUSTER", "SETSLOT", 100, "NODE", "f" * 40), "Unknown node " + "f" * 40),
            (self.a, ("CLUSTER", "SETSLOT", 16384, "STABLE"), "Invalid or out of range slot"),
            (self.a, ("CLUSTER", "SETSLOT", -1, "STABLE"), "Invalid or out of range slot"),
            (self.a, ("CLUSTER", "SETSLOT", 100, "SIDEWAYS", self.b_id),
             "Invalid CLUSTER SETSLOT action or number of arguments"),
            (self.a, ("CLUSTER", "SETSLOT", 100, "STABLE", "extra"),
             "Invalid CLUSTER SETSLOT action or number of arguments"),
            (self.a, ("CLUSTER", "SETSLOT", self.slot, "NODE", self.b_id),
             "Can't assign hashslot %d to a different node while I still hold keys for this "
             "hash slot." % self.slot),
            (self.a, ("CLUSTER", "ADDSLOTS", 100), "Slot 100 is already busy"),
            (self.a, ("CLUSTER", "ADDSLOTSRANGE", 5, 3), "start slot number 5 is greater than "
             "end slot number 3"),
            (self.a, ("CLUSTER", "ADDSLOTSRANGE", 1, 2, 3),
             "wrong number of arguments for 'cluster|addslotsrange' command"),
            (self.a, ("CLUSTER", "DELSLOTS", 100, 100), "Slot 100 specified multiple times"),
            (self.a, ("CLUSTER", "DELSLOTS", "x"), "Invalid or out of range slot"),
        ]
        for conn, command, text in cases:
            with self.subTest(command=command):
                self.assertIn(text, self.error(conn, *command))
        # Nothing of that changed the map.
        self.assertEqual(self.a.execute_command("CLUSTER", "INFO").decode().count(
            "cluster_slots_assigned:16384"), 1)

    def test_unassigned_slots_answer_clusterdown(self):
        self.assertTrue(self.a.execute_command("CLUSTER", "DELSLOTSRANGE", 0, 9))
        info = self.a.execute_command("CLUSTER", "INFO").decode()
        self.assertIn("cluster_state:fail", info)
        self.assertIn("cluster_slots_assigned:16374", info)
        zero = first_tag(0, 9)
        self.assertIn("CLUSTERDOWN Hash slot not served",
                      self.error(self.a, "BF.ADD", "{%s}k" % zero, "x"))
        # Every slot is served again, but this node's map lacked one: the whole
        # cluster was down for it, as with cluster-require-full-coverage yes.
        self.assertIn("CLUSTERDOWN The cluster is down",
                      self.error(self.a, "BF.ADD", "{%s}k" % self.tag, "x"))
        self.assertEqual(self.a.execute_command("PING"), True)  # keyless commands run
        self.assertTrue(self.a.execute_command("CLUSTER", "ADDSLOTS", *range(10)))
        self.assertIn("cluster_state:ok", self.a.execute_command("CLUSTER", "INFO").decode())
        self.assertEqual(self.a.execute_command("BF.ADD", "{%s}k" % zero, "x"), 1)

    def test_asking_is_honoured_only_for_a_slot_being_imported(self):
        key = "{%s}stranded" % self.tag
        reply = self.asking(self.b, "BF.ADD", key, "x")
        self.assertIsInstance(reply, redis.ResponseError)
        self.assertIn("MOVED %d 127.0.0.1:%d" % (self.slot, self.ports[0]), str(reply))
        self.assertEqual(self.b.dbsize(), 0)
        self.open_slot()
        self.assertEqual(self.asking(self.b, "BF.ADD", key, "x"), 1)
        self.assertIn("MOVED", self.error(self.b, "BF.EXISTS", key, "x"))
        # Once stable again, ASKING lets nothing through.
        self.b.execute_command("CLUSTER", "SETSLOT", self.slot, "STABLE")
        self.assertIsInstance(self.asking(self.b, "BF.ADD", key, "y"), redis.ResponseError)

    def test_an_open_slot_asks_for_missing_keys_and_retries_partial_multi_key_requests(self):
        here, gone = "{%s}here" % self.tag, "{%s}gone" % self.tag
        self.a.execute_command("BF.ADD", here, "x")
        self.open_slot()
        nodes_a = self.a.execute_command("CLUSTER", "NODES").decode()
        nodes_b = self.b.execute_command("CLUSTER", "NODES").decode()
        self.assertIn("[%d->-%s]" % (self.slot, self.b_id), nodes_a)
        self.assertIn("[%d-<-%s]" % (self.slot, self.a_id), nodes_b)
        self.assertEqual(self.a.execute_command("BF.EXISTS", here, "x"), 1)
        self.assertIn("ASK %d 127.0.0.1:%d" % (self.slot, self.ports[1]),
                      self.error(self.a, "BF.ADD", gone, "x"))
        self.assertIn("TRYAGAIN", self.error(self.a, "EXISTS", here, gone))
        # On the importing node, after ASKING: one missing key is served, two
        # keys of which one is missing are not.
        self.assertEqual(self.asking(self.b, "BF.ADD", gone, "x"), 1)
        self.assertIn("TRYAGAIN", str(self.asking(self.b, "EXISTS", here, gone)))
        # ASKING before MULTI covers the queued commands and EXEC.
        pipe = self.b.pipeline(transaction=False)
        for command in (("ASKING",), ("MULTI",), ("BF.ADD", gone, "y"), ("EXEC",)):
            pipe.execute_command(*command)
        self.assertEqual(pipe.execute()[-1], [1])
        self.a.execute_command("CLUSTER", "SETSLOT", self.slot, "STABLE")
        self.assertEqual(self.a.execute_command("BF.EXISTS", gone, "x"), 0)
        self.assertNotIn("->-", self.a.execute_command("CLUSTER", "NODES").decode())

    def test_redis_py_follows_ask_and_moved_while_a_slot_moves(self):
        old = "{%s}old" % self.tag
        self.a.execute_command("BF.ADD", old, "x")
        self.open_slot()
        cluster = RedisCluster(host="127.0.0.1", port=self.ports[0])
        try:
            cluster.execute_command("BF.ADD", "{%s}new" % self.tag, "y")
            self.assertEqual(self.asking(self.b, "BF.EXISTS", "{%s}new" % self.tag, "y"), 1)
            self.assertEqual(self.a.execute_command("CLUSTER", "COUNTKEYSINSLOT", self.slot), 1)
            self.assertEqual(cluster.execute_command("BF.EXISTS", old, "x"), 1)
            # The move ends: a's key goes, both nodes name b.
            self.asking(self.b, "RESTORE", old, 0, self.a.dump(old))
            self.a.delete(old)
            self.b.execute_command("CLUSTER", "SETSLOT", self.slot, "NODE", self.b_id)
            self.a.execute_command("CLUSTER", "SETSLOT", self.slot, "NODE", self.b_id)
            self.assertEqual(cluster.execute_command("BF.EXISTS", old, "x"), 1)
            self.assertEqual(cluster.execute_command("BF.EXISTS", "{%s}new" % self.tag, "y"), 1)
            epoch_b = self.b.execute_command("CLUSTER", "INFO").decode()
            self.assertIn("cluster_my_epoch:3", epoch_b)  # above both ranks of the map
        finally:
            cluster.close()


    def test_a_cuckoo_filter_moves_with_its_slot(self):
        key = "{%s}cf" % self.tag
        self.a.execute_command("CF.RESERVE", key, 64, "EXPANSION", 2)
        pipe = self.a.pipeline(transaction=False)
        for i in range(300):
            pipe.execute_command("CF.ADD", key, "i%d" % i)
        pipe.execute()
        self.assertEqual(self.a.execute_command("CF.DEL", key, "i7"), 1)
        payload = self.a.dump(key)
        self.open_slot()
        self.assertEqual(self.a.execute_command("MIGRATE", "127.0.0.1", self.ports[1], "", 0,
                                                5000, "KEYS", key), b"OK")
        # Gone from a, which sends its clients to b for it; b serves it.
        self.assertIn("ASK", self.error(self.a, "CF.ADD", key, "late"))
        self.assertEqual(self.asking(self.b, "CF.EXISTS", key, "i1"), 1)
        self.b.execute_command("CLUSTER", "SETSLOT", self.slot, "NODE", self.b_id)
        self.a.execute_command("CLUSTER", "SETSLOT", self.slot, "NODE", self.b_id)
        self.assertEqual(self.b.dump(key), payload)
        self.assertEqual(self.b.type(key), b"MBbloomCF")
        self.assertIn("MOVED", self.error(self.a, "CF.EXISTS", key, "i1"))
        cluster = RedisCluster(host="127.0.0.1", port=self.ports[0])
        try:
            self.assertEqual(cluster.execute_command("CF.EXISTS", key, "i299"), 1)
            self.assertEqual(cluster.execute_command("CF.COUNT", key, "i7"), 0)
        finally:
            cluster.close()


class HotFilterMoves(TwoNodeCluster):
    """A filter that takes adds without pause while MIGRATE copies it (a
    crawler's): re-sending it alone would never catch up, so its writes are
    held for the second copy, then sent on with -ASK. The move ends; the writers see
    only what their cluster client handles; nothing acknowledged is lost."""

    def test_a_filter_written_without_pause_moves_exactly(self):
        key = "{hot}filter"
        slot = key_slot(key.encode())
        self.assertLessEqual(slot, 8191)
        self.a.execute_command("BF.RESERVE", key, 0.0001, 3_000_000)  # about 7 MB
        ids = [c.execute_command("CLUSTER", "MYID").decode() for c in (self.a, self.b)]
        acknowledged, stop, failures = [[], []], threading.Event(), []

        def write(n):
            cluster = RedisCluster(host="127.0.0.1", port=self.ports[0])
            try:
                i = 0
                while not stop.is_set():
                    if cluster.execute_command("BF.ADD", key, "w%d-%d" % (n, i)) is not None:
                        acknowledged[n].append("w%d-%d" % (n, i))
                    i += 1
            except Exception as e:  # noqa: BLE001 - reported by the test
                failures.append(e)
            finally:
                cluster.close()

        writers = [threading.Thread(target=write, args=(n,)) for n in range(2)]
        for writer in writers:
            writer.start()
        try:
            harness.wait_until(lambda: min(map(len, acknowledged)) > 200, what="writes to flow")
            self.b.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", ids[0])
            self.a.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", ids[1])
            self.assertEqual(self.a.execute_command("MIGRATE", "127.0.0.1", self.ports[1], "",
                                                    0, 10000, "KEYS", key), b"OK")
            for client in (self.a, self.b):
                client.execute_command("CLUSTER", "SETSLOT", slot, "NODE", ids[1])
            count = sum(map(len, acknowledged))
            harness.wait_until(lambda: sum(map(len, acknowledged)) > count + 200,
                               what="writes to go on at the new owner")
        finally:
            stop.set()
            for writer in writers:
                writer.join(60)
        self.assertEqual(failures, [])
        self.assertIn("holds their writes", self.nodes[0].log())
        self.assertEqual(self.a.execute_command("CLUSTER", "COUNTKEYSINSLOT", slot), 0)
        items = acknowledged[0] + acknowledged[1]
        for start in range(0, len(items), 1000):
            chunk = items[start:start + 1000]
            self.assertEqual(self.b.execute_command("BF.MEXISTS", key, *chunk), [1] * len(chunk))


class MoveSlotsUnderWriters(TwoNodeCluster):
    def move(self, slot, *extra):
        return subprocess.run(
            [sys.executable, MOVE_SLOTS, "--from", "127.0.0.1:%d" % self.ports[0],
             "--to", "127.0.0.1:%d" % self.ports[1], *extra, str(slot)],
            capture_output=True, text=True, timeout=300)

    def test_nothing_acknowledged_is_lost_while_filters_move(self):
        keys, slot = tagged(first_tag(0, 8191), 40)
        for key in keys:
            self.a.execute_command("BF.RESERVE", key, 0.001, 20000)
            self.a.execute_command("BF.MADD", key, *["seed-%d" % i for i in range(2000)])
        acknowledged, stop, failures = [], threading.Event(), []

        def write():
            cluster = RedisCluster(host="127.0.0.1", port=self.ports[0])
            try:
                i = 0
                while not stop.is_set():
                    key = keys[i % len(keys)]
                    item = "live-%d" % i
                    if cluster.execute_command("BF.ADD", key, item) is not None:
                        acknowledged.append((key, item))
                    i += 1
                    time.sleep(0.002)  # paced: a filter is rarely written during its copy
            except Exception as e:  # noqa: BLE001 - reported by the test
                failures.append(e)
            finally:
                cluster.close()

        writer = threading.Thread(target=write)
        writer.start()
        try:
            result = self.move(slot, "--attempts", "50", "--batch", "7")
            # Writes raced the move; how many depends on the machine's speed
            # (a sanitized build moves in fewer of the writer's paced steps),
            # so the writer goes on, now to the new owner, until it has 50.
            during = len(acknowledged)
            harness.wait_until(lambda: len(acknowledged) > 50 or failures, timeout=60,
                               what="50 acknowledged writes")
        finally:
            stop.set()
            writer.join(60)
        self.assertEqual(failures, [])
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertIn("moved 40 filters", result.stdout)
        self.assertGreater(during, 0, "no write was acknowledged while the filters moved")
        self.assertGreater(len(acknowledged), 50)
        self.assertEqual(self.a.execute_command("CLUSTER", "COUNTKEYSINSLOT", slot), 0)
        cluster = RedisCluster(host="127.0.0.1", port=self.ports[0])
        try:
            for key, item in acknowledged:
                self.assertEqual(cluster.execute_command("BF.EXISTS", key, item), 1, (key, item))
            for key in keys:
                self.assertEqual(cluster.execute_command("BF.EXISTS", key, "seed-1999"), 1)
        finally:
            cluster.close()

    def test_filters_whose_dumps_leave_out_different_zeros_move(self):
        # A counting filter whose counters BF.DEL brought back to zero keeps
        # those regions marked, so its dump carries them as zeros; its copy,
        # loaded from those zeros, leaves them out of its own dump. Both
        # dumps describe the same bits, and the move checks the bits.
        keys, slot = tagged(first_tag(0, 8191), 2)
        counting, sparse = keys
        self.a.execute_command("BF.RESERVE", counting, 0.01, 100000, "COUNTING")
        self.a.execute_command("BF.MADD", counting, *["c-%d" % i for i in range(200)])
        for i in range(100):
            self.a.execute_command("BF.DEL", counting, "c-%d" % i)
        self.a.execute_command("BF.RESERVE", sparse, 0.0001, 10000000)
        self.a.execute_command("BF.MADD", sparse, *["s-%d" % i for i in range(50)])
        result = self.move(slot)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertIn("moved 2 filters", result.stdout)
        cluster = RedisCluster(host="127.0.0.1", port=self.ports[0])
        try:
            kept = cluster.execute_command("BF.MEXISTS", counting,
                                           *["c-%d" % i for i in range(100, 200)])
            self.assertEqual([int(x) for x in kept], [1] * 100)
            gone = cluster.execute_command("BF.MEXISTS", counting,
                                           *["c-%d" % i for i in range(100)])
            self.assertLess(sum(int(x) for x in gone), 10)
            added = cluster.execute_command("BF.MEXISTS", sparse, *["s-%d" % i for i in range(50)])
            self.assertEqual([int(x) for x in added], [1] * 50)
        finally:
            cluster.close()

    def test_a_move_that_stops_leaves_no_partial_copy(self):
        keys, slot = tagged(first_tag(0, 8191), 1)
        hot = keys[0]
        self.a.execute_command("BF.RESERVE", hot, 0.0001, 2000000)
        stop = threading.Event()

        def hammer():
            conn = redis.Redis(port=self.ports[0])
            i = 0
            while not stop.is_set():
                pipe = conn.pipeline(transaction=False)
                for _ in range(50):
                    pipe.execute_command("BF.ADD", hot, "h-%d" % i)
                    i += 1
                pipe.execute()
            conn.close()

        writer = threading.Thread(target=hammer)
        writer.start()
        try:
            result = self.move(slot, "--attempts", "2")
        finally:
            stop.set()
            writer.join(60)
        self.assertEqual(result.returncode, 1, result.stdout + result.stderr)
        self.assertIn("kept changing", result.stderr)
        pipe = self.b.pipeline(transaction=False)
        pipe.execute_command("ASKING")
        pipe.execute_command("EXISTS", hot)
        self.assertEqual(pipe.execute()[1], 0)
        # The slot stays open; with the writer gone a rerun finishes the move.
        self.assertIn("->-", self.a.execute_command("CLUSTER", "NODES").decode())
        items = self.a.execute_command("BF.CARD", hot)
        again = self.move(slot)
        self.assertEqual(again.returncode, 0, again.stdout + again.stderr)
        self.assertIn("moved 1 filters", again.stdout)
        self.assertEqual(self.b.execute_command("BF.CARD", hot), items)
        self.assertEqual(self.b.execute_command("BF.EXISTS", hot, "h-0"), 1)


class RedisCliReshards(unittest.TestCase):
    """redis-cli --cluster reshard and rebalance, unmodified, while a
    RedisCluster client adds to filters in the slots that move."""

    def setUp(self):
        self.ports = free_ports(3)
        slot_map = three_node_map(self.ports)
        self.nodes = [cluster_node(port, slot_map) for port in self.ports]
        for node in self.nodes:
            node.start()
        self.ids = [node.client().execute_command("CLUSTER", "MYID").decode()
                    for node in self.nodes]

    def tearDown(self):
        for node in self.nodes:
            node.cleanup()

    def redis_cli(self, *args):
        result = subprocess.run(["redis-cli", "--cluster", *args], capture_output=True,
                                text=True, timeout=300)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        return result.stdout

    def test_reshard_and_rebalance_under_writers_lose_nothing(self):
        entry = "127.0.0.1:%d" % self.ports[0]
        cluster = RedisCluster(host="127.0.0.1", port=self.ports[0])
        keys = ["f%d" % i for i in range(300)]
        for key in keys:
            cluster.execute_command("BF.ADD", key, "seed")
        acknowledged, stop, failures = [], threading.Event(), []

        def write():
            writer = RedisCluster(host="127.0.0.1", port=self.ports[0])
            try:
                i = 0
                while not stop.is_set():
                    key = keys[(i * 7) % len(keys)]
                    if writer.execute_command("BF.ADD", key, "w%d" % i) is not None:
                        acknowledged.append((key, "w%d" % i))
                    i += 1
            except Exception as e:  # noqa: BLE001 - reported by the test
                failures.append(e)
            finally:
                writer.close()

        thread = threading.Thread(target=write)
        thread.start()
        try:
            self.redis_cli("reshard", entry, "--cluster-from", self.ids[0], "--cluster-to",
                           self.ids[1], "--cluster-slots", "600", "--cluster-yes")
            self.redis_cli("rebalance", entry, "--cluster-weight", "%s=2" % self.ids[2],
                           "--cluster-yes")
        finally:
            stop.set()
            thread.join(60)
        self.assertEqual(failures, [])
        self.assertGreater(len(acknowledged), 100)
        check = self.redis_cli("check", entry)
        self.assertIn("All nodes agree about slots configuration", check)
        self.assertIn("All 16384 slots covered", check)
        self.assertNotIn("[WARNING]", check)
        served = [0, 0, 0]
        for first, last, primary, *_ in self.nodes[0].client().execute_command("CLUSTER",
                                                                                "SLOTS"):
            served[self.ports.index(int(primary[1]))] += last - first + 1
        self.assertEqual(sum(served), 16384)
        self.assertGreater(served[2], 7000)  # weight 2 of 4: about half the slots
        for node in self.nodes:
            self.assertIn(b"cluster_state:ok", node.client().execute_command("CLUSTER", "INFO"))
        try:
            for key, item in acknowledged:
                self.assertEqual(cluster.execute_command("BF.EXISTS", key, item), 1, (key, item))
            for key in keys:
                self.assertEqual(cluster.execute_command("BF.EXISTS", key, "seed"), 1, key)
        finally:
            cluster.close()
        self.assertEqual(sum(node.client().dbsize() for node in self.nodes), len(keys))


if __name__ == "__main__":
    unittest.main()
