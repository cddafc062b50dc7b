"""Cluster mode: three nodes on loopback with a static slot map, driven by
redis-py's RedisCluster, redis-cli -c and redis-benchmark --cluster, and the
slot-moving tool deploy/move-slots.py."""

import os
import subprocess
import sys
import unittest

import redis
from redis.cluster import ClusterNode, RedisCluster
from redis.crc import key_slot

import harness
from harness import ROOT, Server, free_port

MOVE_SLOTS = os.path.join(ROOT, "deploy", "move-slots.py")


def free_ports(count):
    ports = set()
    while len(ports) < count:
        ports.add(free_port())
    return sorted(ports)


def three_node_map(ports):
    return ("0-5460=127.0.0.1:%d,5461-10922=127.0.0.1:%d,10923-16383=127.0.0.1:%d"
            % tuple(ports))


def owner_index(slot):
    return 0 if slot <= 5460 else 1 if slot <= 10922 else 2


def cluster_node(port, slot_map, *extra, self_spec=None, **kwargs):
    return Server("--cluster-enabled", "yes", "--cluster-slots", slot_map, "--cluster-self",
                  self_spec or "127.0.0.1:%d" % port, *extra, port=port, **kwargs)


class ThreeNodes(unittest.TestCase):
    """One three-node cluster shared by the tests of this class."""

    @classmethod
    def setUpClass(cls):
        cls.ports = free_ports(3)
        cls.map = three_node_map(cls.ports)
        cls.nodes = [cluster_node(port, cls.map, "--appendonly", "no") for port in cls.ports]
        try:
            for node in cls.nodes:
                node.start()
        except Exception:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        for node in cls.nodes:
            node.cleanup()

    def setUp(self):
        for node in self.nodes:
            node.client().flushall()

    def test_redis_py_cluster_puts_each_filter_on_the_node_owning_its_slot(self):
        cluster = RedisCluster(startup_nodes=[ClusterNode("127.0.0.1", self.ports[0])],
                               socket_timeout=30)
        try:
            self.assertEqual(len(cluster.get_primaries()), 3)
            bloom = cluster.bf()
            names = ["filter:%d" % i for i in range(1000)]
            for i, name in enumerate(names):
                self.assertEqual(bloom.add(name, "item-%d" % i), 1)
            for i, name in enumerate(names):
                self.assertEqual(bloom.exists(name, "item-%d" % i), 1, name)
            absent = sum(bloom.exists(name, "absent") for name in names)
            self.assertLess(absent, 50)  # 1 % false positives expected
            # The keyed generic commands route too.
            self.assertEqual(cluster.exists("filter:1"), 1)
            self.assertEqual(cluster.expire("filter:1", 100), True)
            self.assertEqual(cluster.type("filter:2"), b"MBbloom--")
            self.assertEqual(cluster.delete("filter:3"), 1)
        finally:
            cluster.close()
        # Each filter lives where its slot says, and only there.
        seen = set()
        for index, node in enumerate(self.nodes):
            keys = {key.decode() for key in node.client().keys("*")}
            self.assertGreater(len(keys), 250, "node %d holds %d filters" % (index, len(keys)))
            for key in keys:
                self.assertEqual(owner_index(key_slot(key.encode())), index, key)
            seen |= keys
        self.assertEqual(seen, set(names) - {"filter:3"})

    def test_every_node_describes_the_same_cluster(self):
        clients = [node.client(decode_responses=True) for node in self.nodes]
        slots = [client.execute_command("CLUSTER", "SLOTS") for client in clients]
        self.assertEqual(slots[0], slots[1])
        self.assertEqual(slots[0], slots[2])
        ids = [client.execute_command("CLUSTER", "MYID") for client in clients]
        self.assertEqual(len(set(ids)), 3)
        self.assertEqual([entry[2][2] for entry in slots[0]], ids)
        self.assertEqual([(entry[0], entry[1], entry[2][1]) for entry in slots[0]],
                         [(0, 5460, self.ports[0]), (5461, 10922, self.ports[1]),
                          (10923, 16383, self.ports[2])])
        for index, client in enumerate(clients):
            info = client.execute_command("CLUSTER", "INFO")
            self.assertIn("cluster_state:ok", info)
            self.assertIn("cluster_known_nodes:3", info)
            self.assertIn("cluster_my_epoch:%d" % (index + 1), info)
            lines = client.execute_command("CLUSTER", "NODES")
            self.assertIn("%s 127.0.0.1:%d@" % (ids[index], self.ports[index]), lines)
            myself = [line for line in lines.splitlines() if "myself" in line]
            self.assertEqual(len(myself), 1)
            self.assertTrue(myself[0].startswith(ids[index]))
            self.assertEqual(client.info("cluster")["cluster_enabled"], 1)
            shards = client.execute_command("CLUSTER", "SHARDS")
            self.assertEqual(len(shards), 3)

    def test_redis_cli_follows_moved(self):
        # "foo" is slot 12182, the third node's; ask the first.
        first = str(self.ports[0])
        out = subprocess.run(["redis-cli", "-p", first, "BF.ADD", "foo", "x"],
                             capture_output=True, text=True, timeout=30).stdout
        self.assertEqual(out.strip(), "MOVED 12182 127.0.0.1:%d" % self.ports[2])
        out = subprocess.run(["redis-cli", "-c", "-p", first, "BF.ADD", "foo", "x"],
                             capture_output=True, text=True, timeout=30).stdout
        self.assertEqual(out.strip(), "1")
        out = subprocess.run(["redis-cli", "-c", "-p", first, "BF.EXISTS", "foo", "x"],
                             capture_output=True, text=True, timeout=30).stdout
        self.assertEqual(out.strip(), "1")
        self.assertEqual(self.nodes[2].client().execute_command("BF.EXISTS", "foo", "x"), 1)
        self.assertEqual(self.nodes[0].client().dbsize(), 0)

    def test_redis_cli_cluster_check_finds_a_consistent_cluster(self):
        result = subprocess.run(["redis-cli", "--cluster", "check", "127.0.0.1:%d" % self.ports[1]],
                                capture_output=True, text=True, timeout=30)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertIn("All nodes agree about slots configuration", result.stdout)
        self.assertIn("All 16384 slots covered", result.stdout)

    def test_keys_in_several_slots_answer_crossslot_and_keyless_commands_run_anywhere(self):
        client = self.nodes[0].client()
        with self.assertRaisesRegex(redis.ResponseError, "^CROSSSLOT Keys in request don't hash"):
            client.execute_command("EXISTS", "a", "b", "c")
        with self.assertRaisesRegex(redis.ResponseError, "^MOVED 12182 "):
            client.execute_command("BF.MADD", "foo", "x", "y")
        # Hash tags keep several keys in one slot ("{b}" is 3300, the first node's).
        client.execute_command("BF.ADD", "{b}1", "x")
        client.execute_command("BF.ADD", "{b}2", "x")
        self.assertEqual(client.execute_command("EXISTS", "{b}1", "{b}2", "{b}3"), 2)
        self.assertTrue(client.execute_command("RENAME", "{b}1", "{b}3"))
        self.assertEqual(client.execute_command("CLUSTER", "COUNTKEYSINSLOT", 3300), 2)
        self.assertEqual(sorted(client.execute_command("CLUSTER", "GETKEYSINSLOT", 3300, 10)),
                         [b"{b}2", b"{b}3"])
        self.assertEqual(client.execute_command("DEL", "{b}2", "{b}3"), 2)
        # Set operations: every key in one slot; FORCE is not a key.
        client.execute_command("BF.ADD", "{b}1", "x")
        client.execute_command("BF.ADD", "{b}2", "x")
        self.assertEqual(client.execute_command("BF.MERGE", "{b}3", "{b}1", "{b}2", "FORCE"), b"OK")
        self.assertEqual(client.execute_command("BF.CARD", "{b}1", "{b}2"), 1)
        self.assertEqual(client.execute_command("BF.INTERCARD", 2, "{b}1", "{b}3"), 1)
        for command in (("BF.MERGE", "{b}3", "{b}1", "a"), ("BF.CARD", "{b}1", "a"),
                        ("BF.INTERCARD", 2, "{b}1", "a")):
            with self.assertRaisesRegex(redis.ResponseError, "^CROSSSLOT"):
                client.execute_command(*command)
        self.assertEqual(client.execute_command("DEL", "{b}1", "{b}2", "{b}3"), 3)
        self.assertEqual(client.ping(), True)
        self.assertEqual(client.dbsize(), 0)
        self.assertEqual(client.execute_command("CLUSTER", "KEYSLOT", "{user1000}.following"),
                         3443)

    def test_redis_benchmark_cluster_adds_on_every_node(self):
        result = subprocess.run(
            ["redis-benchmark", "--cluster", "-h", "127.0.0.1", "-p", str(self.ports[1]),
             "-n", "3000", "-c", "6", "-r", "100000", "-q",
             "BF.ADD", "bf{tag}:__rand_int__", "__rand_int__"],
            capture_output=True, text=True, timeout=60)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertIn("requests per second", result.stdout)
        for index, node in enumerate(self.nodes):
            client = node.client()
            self.assertGreater(client.dbsize(), 0, "node %d got no BF.ADD" % index)
            for key in client.keys("*"):
                self.assertEqual(owner_index(key_slot(key)), index, key)


class ReplicaInTheMap(unittest.TestCase):
    def test_a_replica_in_the_map_copies_its_primary_and_serves_reads_after_readonly(self):
        primary_port, replica_port, other_port = free_ports(3)
        slot_map = "0-8191=127.0.0.1:%d|127.0.0.1:%d,8192-16383=127.0.0.1:%d" % (
            primary_port, replica_port, other_port)
        with cluster_node(primary_port, slot_map) as primary, \
                cluster_node(replica_port, slot_map) as replica:
            # "b" is slot 3300, the primary's. The replica follows the primary
            # the map gives it (no --replicaof needed).
            primary.client().execute_command("BF.MADD", "b", "x", "y")
            self.assertEqual(primary.client().execute_command("WAIT", 1, 10000), 1)
            client = replica.client(decode_responses=True)
            # WAIT may count a full copy once it is sent; the replica serves
            # it once loaded, when its link is up.
            harness.wait_until(lambda: client.info("replication")["master_link_status"] == "up",
                               what="the replica's link to come up")
            self.assertEqual(client.info("replication")["master_port"], primary_port)
            slots = client.execute_command("CLUSTER", "SLOTS")
            self.assertEqual([node[1] for node in slots[0][2:]], [primary_port, replica_port])
            shards = client.execute_command("CLUSTER", "SHARDS")
            roles = [dict(zip(node[0::2], node[1::2]))["role"] for node in shards[0][3]]
            self.assertEqual(roles, ["master", "replica"])
            self.assertIn(" myself,slave ", client.execute_command("CLUSTER", "NODES"))
            with self.assertRaisesRegex(redis.ResponseError, "^MOVED 3300 127.0.0.1:%d" % primary_port):
                client.execute_command("BF.EXISTS", "b", "x")
            connection = client.connection_pool.get_connection("READONLY")
            try:
                connection.send_command("READONLY")
                self.assertEqual(connection.read_response(), "OK")
                connection.send_command("BF.MEXISTS", "b", "x", "y", "z")
                self.assertEqual(connection.read_response(), [1, 1, 0])
                connection.send_command("BF.ADD", "b", "x")
                with self.assertRaisesRegex(redis.ResponseError, "^MOVED 3300"):
                    connection.read_response()
            finally:
                client.connection_pool.release(connection)

    def test_replicaof_must_agree_with_the_map(self):
        primary_port, replica_port, other_port = free_ports(3)
        slot_map = "0-8191=127.0.0.1:%d|127.0.0.1:%d,8192-16383=127.0.0.1:%d" % (
            primary_port, replica_port, other_port)
        wrong = cluster_node(replica_port, slot_map, "--replicaof", "127.0.0.1 %d" % other_port)
        try:
            wrong.start(expect_failure=True)
            self.assertNotEqual(wrong.wait(10), 0)
            self.assertIn("is not 127.0.0.1:%d's primary" % replica_port, wrong.log())
        finally:
            wrong.cleanup()


class StartAndMove(unittest.TestCase):
    def test_a_bad_map_stops_the_server_with_a_clear_message(self):
        port = free_port()
        cases = [
            ("0-200=127.0.0.1:%d,100-16383=127.0.0.1:1" % port, None, "slot 100 is assigned twice"),
            ("0-16000=127.0.0.1:%d" % port, None, "slots 16001-16383 are not assigned"),
            ("0-16383=127.0.0.1:1", None, "is not in the map"),
            ("0-16383=127.0.0.1:%d" % port, "auto", "does not end in -N"),
        ]
        for slot_map, self_spec, message in cases:
            server = cluster_node(port, slot_map, self_spec=self_spec,
                                  env={"HOSTNAME": "bloomery"})
            try:
                server.start(expect_failure=True)
                self.assertNotEqual(server.wait(10), 0)
                self.assertIn(message, server.log())
            finally:
                server.cleanup()

    def test_auto_self_takes_the_pod_ordinal(self):
        ports = free_ports(3)
        slot_map = three_node_map(ports)
        with cluster_node(ports[1], slot_map, self_spec="auto",
                          env={"HOSTNAME": "bloomery-1"}) as node:
            lines = node.client(decode_responses=True).execute_command("CLUSTER", "NODES")
            myself = [line for line in lines.splitlines() if "myself" in line][0]
            self.assertIn(" 127.0.0.1:%d@" % ports[1], myself)
            self.assertIn(" connected 5461-10922", myself)

    def test_move_slots_then_update_the_map(self):
        source_port, target_port = free_ports(2)
        password = "move-secret"
        old_map = "0-8191=127.0.0.1:%d,8192-16383=127.0.0.1:%d" % (source_port, target_port)
        # Slot 3300 ("{b}...") moves from the source to the target.
        new_map = ("0-3299=127.0.0.1:%d,3300=127.0.0.1:%d,3301-8191=127.0.0.1:%d,"
                   "8192-16383=127.0.0.1:%d" % (source_port, target_port, source_port, target_port))
        source = cluster_node(source_port, old_map, "--requirepass", password)
        target = cluster_node(target_port, old_map, "--requirepass", password)
        try:
            source.start()
            target.start()
            s = source.client(password=password)
            for i in range(120):
                s.execute_command("BF.ADD", "{b}%d" % i, "item-%d" % i)
            s.execute_command("BF.RESERVE", "{b}big", 0.001, 200000)
            s.execute_command("BF.MADD", "{b}big", *["u%d" % i for i in range(5000)])
            s.execute_command("PEXPIRE", "{b}big", 3600000)
            s.execute_command("BF.ADD", "hello", "x")  # slot 866, stays
            self.assertEqual(s.execute_command("CLUSTER", "COUNTKEYSINSLOT", 3300), 121)
            env = dict(os.environ, REDISCLI_AUTH=password)
            result = subprocess.run(
                [sys.executable, MOVE_SLOTS, "--from", "127.0.0.1:%d" % source_port,
                 "--to", "127.0.0.1:%d" % target_port, "--batch", "50", "3300"],
                capture_output=True, text=True, timeout=120, env=env)
            self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
            self.assertIn("moved 121 filters", result.stdout)
            self.assertEqual(s.execute_command("CLUSTER", "COUNTKEYSINSLOT", 3300), 0)
            self.assertEqual(s.execute_command("BF.EXISTS", "hello", "x"), 1)
            t = target.client(password=password)
            self.assertEqual(t.execute_command("CLUSTER", "COUNTKEYSINSLOT", 3300), 121)
            # Both nodes serve the new owner at once (CLUSTER SETSLOT NODE).
            with self.assertRaisesRegex(redis.ResponseError,
                                        "MOVED 3300 127.0.0.1:%d" % target_port):
                s.execute_command("BF.EXISTS", "{b}7", "item-7")
            self.assertEqual(t.execute_command("BF.EXISTS", "{b}7", "item-7"), 1)
            # Run again: nothing left to move.
            again = subprocess.run(
                [sys.executable, MOVE_SLOTS, "--from", "127.0.0.1:%d" % source_port,
                 "--to", "127.0.0.1:%d" % target_port, "3300"],
                capture_output=True, text=True, timeout=60, env=env)
            self.assertEqual(again.returncode, 0, again.stdout + again.stderr)
            self.assertIn("slot 3300: already served by 127.0.0.1:%d" % target_port, again.stdout)
            self.assertIn("moved 0 filters", again.stdout)

            # The operator's part: the new map on every node, one restart each
            # (the journal keeps the data).
            for node in (source, target):
                node.terminate()
                node.extra_args[node.extra_args.index("--cluster-slots") + 1] = new_map
                node.start()
            cluster = RedisCluster(host="127.0.0.1", port=source_port, password=password,
                                   socket_timeout=30)
            try:
                bloom = cluster.bf()
                for i in range(120):
                    self.assertEqual(bloom.exists("{b}%d" % i, "item-%d" % i), 1)
                self.assertEqual(bloom.mexists("{b}big", *["u%d" % i for i in range(5000)]),
                                 [1] * 5000)
                self.assertEqual(cluster.bf().info("{b}big").insertedNum, 5000)
                ttl = cluster.pttl("{b}big")
                self.assertTrue(3000000 < ttl <= 3600000, ttl)
                self.assertEqual(cluster.pttl("{b}1"), -1)
                self.assertEqual(bloom.exists("hello", "x"), 1)
            finally:
                cluster.close()
            self.assertEqual(target.client(password=password).execute_command(
                "BF.EXISTS", "{b}7", "item-7"), 1)

            # A filter left behind on a node that no longer owns its slot (the
            # node restarted on the old map and took an add there): the node
            # says so at start, and --force moves it over.
            source.terminate()
            source.extra_args[source.extra_args.index("--cluster-slots") + 1] = old_map
            source.start()
            self.assertEqual(source.client(password=password).execute_command(
                "BF.ADD", "{b}late", "x"), 1)
            source.terminate()
            source.extra_args[source.extra_args.index("--cluster-slots") + 1] = new_map
            source.start()
            self.assertIn("1 keys in 1 slots this node does not serve (first: slot 3300, "
                          "127.0.0.1:%d's)" % target_port, source.log())
            wrong = subprocess.run(
                [sys.executable, MOVE_SLOTS, "--from", "127.0.0.1:%d" % source_port,
                 "--to", "127.0.0.1:%d" % target_port, "3300"],
                capture_output=True, text=True, timeout=60, env=env)
            self.assertEqual(wrong.returncode, 1)
            self.assertIn("slot 3300 belongs to 127.0.0.1:%d in the source's map" % target_port,
                          wrong.stderr)
            late = subprocess.run(
                [sys.executable, MOVE_SLOTS, "--from", "127.0.0.1:%d" % source_port,
                 "--to", "127.0.0.1:%d" % target_port, "--force", "3300"],
                capture_output=True, text=True, timeout=60, env=env)
            self.assertEqual(late.returncode, 0, late.stdout + late.stderr)
            self.assertIn("moved 1 filters", late.stdout)
            self.assertEqual(target.client(password=password).execute_command(
                "BF.EXISTS", "{b}late", "x"), 1)
        finally:
            source.cleanup()
            target.cleanup()


if __name__ == "__main__":
    unittest.main()
