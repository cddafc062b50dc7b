"""A cluster whose map is kept in etcd (--cluster-etcd), formed and changed
by redis-cli --cluster, unmodified: create of 3 primaries and 3 replicas,
a node that knows others or holds keys refused, add-node (primary and
replica), reshard, del-node, a node restarted on its data, etcd not up when
a node starts, and the CLUSTER subcommands' replies and errors. Every test
runs against 3 real etcd members on loopback, each under a cluster name of
its own."""

import logging
import signal
import subprocess
import threading
import time
import unittest
import urllib.request

import redis
from redis.cluster import ClusterNode, RedisCluster

from etcd_harness import EtcdCluster
from harness import BINARY, Server, wait_until
from test_cluster import cluster_node, free_ports

logging.getLogger("redis.cluster").setLevel(logging.CRITICAL)

NODE_TIMEOUT_MS = "2000"


def redis_cli(*args, timeout=180, answers=None):
    """Runs redis-cli; `answers` is what it reads on stdin (its prompts
    that --cluster-yes does not answer)."""
    return subprocess.run(["redis-cli", *args], capture_output=True, text=True,
                          timeout=timeout, input=answers,
                          stdin=None if answers is not None else subprocess.DEVNULL)


def address(server):
    return "127.0.0.1:%d" % server.port


def node_id(server):
    return server.client().execute_command("CLUSTER", "MYID").decode()


def cluster_info(server):
    text = server.client().execute_command("CLUSTER", "INFO").decode()
    return dict(line.split(":", 1) for line in text.split("\r\n") if ":" in line)


def known_nodes(server):
    return int(cluster_info(server)["cluster_known_nodes"])


class EtcdClusterTest(unittest.TestCase):
    """One etcd of 3 members for the class; nodes per test."""

    @classmethod
    def setUpClass(cls):
        cls.etcd = EtcdCluster(3).start()

    @classmethod
    def tearDownClass(cls):
        cls.etcd.stop()

    def setUp(self):
        self.nodes = []
        self.name = self.id().rsplit(".", 1)[-1][:60].replace("_", "-")

    def tearDown(self):
        for node in self.nodes:
            node.cleanup()

    def node(self, *extra, data_dir=None, start=True):
        server = Server("--cluster-enabled", "yes", "--cluster-etcd", self.etcd.endpoints,
                        "--cluster-name", self.name, "--cluster-node-timeout", NODE_TIMEOUT_MS,
                        *extra, data_dir=data_dir)
        if start:
            server.start()
        self.nodes.append(server)
        return server

    def registered(self, server):
        """Waits until the node reached etcd (its registration is written)."""
        wait_until(lambda: b"127.0.0.1" in server.client().execute_command("CLUSTER", "NODES"),
                   timeout=30, what="the node to reach etcd")

    def create(self, servers, replicas=0):
        for server in servers:
            self.registered(server)
        result = redis_cli("--cluster", "create", *map(address, servers),
                           "--cluster-replicas", str(replicas), "--cluster-yes")
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertIn("[OK] All 16384 slots covered", result.stdout)
        self.settled(servers)
        return result

    def settled(self, servers):
        """Every node sees every other, the map is whole, and each replica's
        link to its primary is up."""
        def agreed():
            for server in servers:
                info = cluster_info(server)
                if info["cluster_state"] != "ok" or int(info["cluster_known_nodes"]) != len(servers):
                    return False
                role = server.client().info("replication")
                if role["role"] == "slave" and role.get("master_link_status") != "up":
                    return False
            return True
        wait_until(agreed, timeout=60, what="the cluster to settle")

    def pair(self):
        """A primary serving every slot and its replica, linked."""
        primary, replica = self.node(), self.node()
        self.registered(primary)
        self.registered(replica)
        primary.client().execute_command("CLUSTER", "ADDSLOTSRANGE", 0, 16383)
        replica.client().execute_command("CLUSTER", "MEET", "127.0.0.1", primary.port)
        wait_until(lambda: known_nodes(replica) == 2, what="the replica to be met")
        replica.client().execute_command("CLUSTER", "REPLICATE", node_id(primary))
        self.settled([primary, replica])
        return primary, replica

    def check(self, server):
        result = redis_cli("--cluster", "check", address(server))
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertIn("[OK] All nodes agree about slots configuration.", result.stdout)
        self.assertIn("[OK] All 16384 slots covered.", result.stdout)

    def client(self, server):
        return RedisCluster(startup_nodes=[ClusterNode("127.0.0.1", server.port)])


class Create(EtcdClusterTest):
    def test_create_three_primaries_with_replicas_and_write_through_them(self):
        servers = [self.node() for _ in range(6)]
        self.create(servers, replicas=1)
        self.check(servers[0])
        roles = [s.client().info("replication")["role"] for s in servers]
        self.assertEqual(sorted(roles), ["master"] * 3 + ["slave"] * 3)

        cluster = self.client(servers[0])
        keys = ["urls:%d" % i for i in range(60)]
        for key in keys:
            cluster.execute_command("BF.MADD", key, *["%s-%d" % (key, i) for i in range(50)])
        primaries = [s for s in servers if s.client().info("replication")["role"] == "master"]
        for primary in primaries:
            self.assertEqual(primary.client().execute_command("WAIT", 1, 10000), 1)
        # Every replica holds its primary's filters, bit for bit.
        for replica in (s for s in servers if s not in primaries):
            link = replica.client().info("replication")
            primary = [p for p in primaries if p.port == int(link["master_port"])][0]
            owned = [key for key in keys if primary.client().execute_command(
                "CLUSTER", "COUNTKEYSINSLOT",
                primary.client().execute_command("CLUSTER", "KEYSLOT", key)) > 0]
            self.assertGreater(len(owned), 0)
            for key in owned:
                dumped = primary.client().execute_command("DUMP", key)
                reader = replica.client()
                reader.execute_command("READONLY")
                self.assertEqual(reader.execute_command("DUMP", key), dumped, key)
        for key in keys:
            self.assertEqual(cluster.execute_command("BF.EXISTS", key, key + "-7"), 1)

    def test_create_refuses_a_node_that_knows_others_or_holds_keys(self):
        a, b, c = (self.node() for _ in range(3))
        for server in (a, b, c):
            self.registered(server)
        self.assertEqual(a.client().execute_command("CLUSTER", "MEET", "127.0.0.1", b.port), b"OK")
        wait_until(lambda: known_nodes(b) == 2, what="b to know a")
        result = redis_cli("--cluster", "create", address(a), address(b), address(c),
                           "--cluster-yes")
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("is not empty", result.stdout)
        # A node started on a standalone server's data.
        standalone = Server()
        standalone.start()
        standalone.client().execute_command("BF.ADD", "kept", "x")
        directory = standalone.data_dir
        standalone.stop()
        holder = self.node(data_dir=directory)
        self.registered(holder)
        result = redis_cli("--cluster", "create", address(c), address(holder),
                           address(self.node()), "--cluster-yes")
        standalone.cleanup()
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("is not empty", result.stdout)


class Membership(EtcdClusterTest):
    def test_add_node_reshard_and_del_node(self):
        servers = [self.node() for _ in range(3)]
        self.create(servers)
        cluster = self.client(servers[0])
        items = {"f:%d" % i: ["f:%d-%d" % (i, j) for j in range(20)] for i in range(100)}
        for key, values in items.items():
            cluster.execute_command("BF.MADD", key, *values)

        new, replica = self.node(), self.node()
        self.registered(new)
        self.registered(replica)
        result = redis_cli("--cluster", "add-node", address(new), address(servers[0]))
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertIn("[OK] New node added correctly.", result.stdout)
        result = redis_cli("--cluster", "add-node", address(replica), address(servers[0]),
                           "--cluster-slave", "--cluster-master-id", node_id(new))
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.settled(servers + [new, replica])
        self.assertEqual(replica.client().info("replication")["master_port"], new.port)

        result = redis_cli("--cluster", "reshard", address(servers[0]), "--cluster-from", "all",
                           "--cluster-to", node_id(new), "--cluster-slots", "300",
                           "--cluster-yes")
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.check(servers[0])
        self.assertGreater(new.client().execute_command("DBSIZE"), 0)
        for key, values in items.items():
            self.assertEqual(cluster.execute_command("BF.MEXISTS", key, *values),
                             [1] * len(values), key)
        self.assertEqual(new.client().execute_command("WAIT", 1, 10000), 1)

        # Emptied again, the new primary and its replica leave.
        result = redis_cli("--cluster", "reshard", address(servers[0]),
                           "--cluster-from", node_id(new), "--cluster-to", node_id(servers[0]),
                           "--cluster-slots", "300", "--cluster-yes")
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        for leaving in (replica, new):
            result = redis_cli("--cluster", "del-node", address(servers[0]), node_id(leaving))
            self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.settled(servers)
        self.assertEqual(known_nodes(new), 1)
        self.check(servers[0])
        for key, values in items.items():
            self.assertEqual(cluster.execute_command("BF.MEXISTS", key, *values),
                             [1] * len(values), key)

    def test_a_node_restarted_on_its_data_keeps_its_id_and_role(self):
        servers = [self.node() for _ in range(4)]
        self.create(servers[:3])
        primary = servers[0]
        replica = servers[3]
        self.registered(replica)
        replica.client().execute_command("CLUSTER", "MEET", "127.0.0.1", primary.port)
        wait_until(lambda: known_nodes(replica) == 4, what="the replica to be met")
        self.assertEqual(
            replica.client().execute_command("CLUSTER", "REPLICATE", node_id(primary)), b"OK")
        self.settled(servers)
        before = node_id(replica)
        replica.terminate()
        replica.start()
        self.assertEqual(node_id(replica), before)
        self.settled(servers)
        self.assertEqual(replica.client().info("replication")["master_port"], primary.port)

    def test_a_replica_reset_leaves_empty_and_can_be_added_again(self):
        primary, replica = self.pair()
        primary.client().execute_command("BF.MADD", "kept", "a", "b")
        self.assertEqual(primary.client().execute_command("WAIT", 1, 10000), 1)
        self.assertEqual(replica.client().execute_command("CLUSTER", "RESET"), b"OK")
        # As Redis: it follows nobody and holds nothing; its primary keeps all.
        self.assertEqual(replica.client().info("replication")["role"], "master")
        self.assertEqual(replica.client().execute_command("DBSIZE"), 0)
        self.assertEqual(known_nodes(replica), 1)
        wait_until(lambda: known_nodes(primary) == 1, what="the primary to see it leave")
        self.assertEqual(primary.client().execute_command("BF.MEXISTS", "kept", "a", "b"), [1, 1])
        result = redis_cli("--cluster", "add-node", address(replica), address(primary),
                           "--cluster-slave", "--cluster-master-id", node_id(primary))
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.settled([primary, replica])
        wait_until(lambda: replica.client().info("replication").get("master_link_status") == "up",
                   timeout=30, what="the replica's link")
        self.assertEqual(primary.client().execute_command("WAIT", 1, 10000), 1)
        pipe = replica.client().pipeline(transaction=False)
        pipe.execute_command("READONLY")
        pipe.execute_command("BF.MEXISTS", "kept", "a", "b")
        self.assertEqual(pipe.execute()[1], [1, 1])

    def test_a_node_started_before_etcd_joins_once_etcd_is_up(self):
        late = EtcdCluster(1)
        try:
            server = Server("--cluster-enabled", "yes", "--cluster-etcd", late.endpoints,
                            "--cluster-node-timeout", NODE_TIMEOUT_MS)
            server.start()
            self.nodes.append(server)
            self.assertEqual(server.client().ping(), True)
            self.assertEqual(known_nodes(server), 1)
            with self.assertRaisesRegex(redis.ResponseError, "CLUSTERDOWN"):
                server.client().execute_command("BF.ADD", "k", "x")
            late.start()
            wait_until(lambda: b"connected to etcd" in server.log().encode(), timeout=30,
                       what="the node to reach etcd")
            self.assertEqual(server.client().execute_command("CLUSTER", "ADDSLOTSRANGE", 0, 16383),
                             b"OK")
            wait_until(lambda: cluster_info(server)["cluster_state"] == "ok",
                       what="the node to serve every slot")
            self.assertEqual(server.client().execute_command("BF.ADD", "k", "x"), 1)
        finally:
            late.stop()


class Failover(EtcdClusterTest):
    def primaries(self, servers):
        return [s for s in servers if s.process.poll() is None and
                s.client().info("replication")["role"] == "master"]

    def test_a_killed_primary_is_replaced_by_its_replica_and_returns_as_one(self):
        metrics_ports = [free_ports(1)[0] for _ in range(6)]
        servers = [self.node("--metrics-port", str(port)) for port in metrics_ports]
        self.create(servers, replicas=1)
        cluster = self.client(servers[0])
        acknowledged = []
        for i in range(200):
            key = "k:%d" % i
            cluster.execute_command("BF.ADD", key, "item-%d" % i)
            acknowledged.append(key)
        for primary in self.primaries(servers):
            self.assertEqual(primary.client().execute_command("WAIT", 1, 10000), 1)
        victim = self.primaries(servers)[0]
        victim_id = node_id(victim)
        replica = [s for s in servers
                   if s.client().info("replication").get("master_port") == victim.port][0]
        victim.kill()
        wait_until(lambda: replica.client().info("replication")["role"] == "master",
                   timeout=30, what=lambda: "the replica to take over\n" + replica.log()[-3000:])
        survivors = [s for s in servers if s is not victim]
        wait_until(lambda: all(cluster_info(s)["cluster_state"] == "ok" for s in survivors),
                   timeout=30, what="every survivor to see the cluster whole")
        cluster = self.client(replica)
        for i, key in enumerate(acknowledged):
            self.assertEqual(cluster.execute_command("BF.EXISTS", key, "item-%d" % i), 1, key)
        self.assertEqual(cluster.execute_command("BF.ADD", "after", "x"), 1)
        # /metrics and --health-check say what happened.
        port = metrics_ports[servers.index(replica)]
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10) as page:
            metrics = page.read().decode()
        for line in ("bloomery_cluster_failovers_total 1", "bloomery_cluster_is_primary 1",
                     "bloomery_cluster_state_ok 1", "bloomery_cluster_etcd_connected 1",
                     "bloomery_cluster_writes_allowed 1", "bloomery_cluster_known_nodes 6"):
            self.assertIn(line + "\n", metrics)
        self.assertRegex(metrics, r"bloomery_cluster_lease_renewals_total [1-9]")
        self.assertRegex(metrics, r"bloomery_cluster_role_changes_total [1-9]")
        probe = subprocess.run([BINARY, "--health-check", address(replica)],
                               capture_output=True, text=True, timeout=30)
        self.assertEqual(probe.stdout + probe.stderr, "bloomery: %s: PONG, role master, "
                         "cluster_state ok\n" % address(replica))
        # The old primary comes back on its data as the new primary's replica.
        victim.start()
        self.assertEqual(node_id(victim), victim_id)
        wait_until(lambda: victim.client().info("replication").get("master_port") == replica.port
                   and victim.client().info("replication")["master_link_status"] == "up",
                   timeout=60, what="the old primary to follow the new one")
        self.settled(servers)
        self.check(servers[0])

    def test_a_paused_primary_takes_no_write_the_new_primary_lacks(self):
        primary, replica = self.pair()
        writer = primary.client()
        writer.execute_command("BF.ADD", "paused", "before")
        self.assertEqual(writer.execute_command("WAIT", 1, 10000), 1)
        primary.process.send_signal(signal.SIGSTOP)
        try:
            wait_until(lambda: replica.client().info("replication")["role"] == "master",
                       timeout=30, what="the replica to take over")
        finally:
            primary.process.send_signal(signal.SIGCONT)
        # Resumed past its lease, the old primary refuses writes, then
        # redirects them once it reads the new map.
        try:
            reply = writer.execute_command("BF.ADD", "paused", "after-pause")
            self.fail("the paused primary took a write: %r" % (reply,))
        except redis.ResponseError as error:
            self.assertRegex(str(error), "^(CLUSTERDOWN|MOVED)")
        wait_until(lambda: primary.client().info("replication").get("master_port") ==
                   replica.port, timeout=30, what="the old primary to follow the new one")
        self.assertEqual(replica.client().execute_command("BF.EXISTS", "paused", "before"), 1)


class ManualFailover(EtcdClusterTest):
    def test_failover_hands_over_without_losing_an_acknowledged_write(self):
        primary, replica = self.pair()
        with self.assertRaisesRegex(redis.ResponseError, "send CLUSTER FAILOVER to a replica"):
            primary.client().execute_command("CLUSTER", "FAILOVER")
        with self.assertRaisesRegex(redis.ResponseError, "syntax error"):
            replica.client().execute_command("CLUSTER", "FAILOVER", "SOON")
        acknowledged, stop = [], threading.Event()

        def write():  # no WAIT: the handshake alone must keep every add
            writer, serial = primary.client(), 0
            while not stop.is_set():
                serial += 1
                try:
                    writer.execute_command("BF.ADD", "handed", "item-%d" % serial)
                    acknowledged.append("item-%d" % serial)
                except redis.RedisError:
                    time.sleep(0.01)
        thread = threading.Thread(target=write)
        thread.start()
        try:
            wait_until(lambda: len(acknowledged) > 200, what="writes to flow")
            self.assertEqual(replica.client().execute_command("CLUSTER", "FAILOVER"), b"OK")
            wait_until(lambda: primary.client().info("replication").get("master_port") ==
                       replica.port, timeout=30, what="the old primary to follow")
        finally:
            stop.set()
            thread.join(timeout=30)
        self.assertEqual(replica.client().info("replication")["role"], "master")
        self.assertEqual(replica.client().execute_command("BF.MEXISTS", "handed", *acknowledged),
                         [1] * len(acknowledged))
        # The old primary stood where the new one took over: it resumed.
        wait_until(lambda: primary.client().info("replication")["master_link_status"] == "up",
                   timeout=30, what="the old primary's link")
        self.assertEqual(replica.client().info("stats")["sync_full"], 0)
        self.assertEqual(replica.client().info("stats")["sync_partial_ok"], 1)
        # TAKEOVER: at once, without the handshake.
        self.settled([primary, replica])
        self.assertEqual(primary.client().execute_command("CLUSTER", "FAILOVER", "TAKEOVER"),
                         b"OK")
        wait_until(lambda: primary.client().info("replication")["role"] == "master",
                   timeout=30, what="the takeover")
        self.settled([primary, replica])
        self.assertEqual(primary.client().execute_command("BF.ADD", "handed", "back"), 1)


class EtcdOutages(EtcdClusterTest):
    def test_one_etcd_member_down_changes_nothing(self):
        servers = [self.node() for _ in range(3)]
        self.create(servers)
        cluster = self.client(servers[0])
        # The leader: its loss makes the others elect another (etcd answers
        # "leader changed" meanwhile).
        def leader():
            index = self.etcd.leader_index()
            return None if index is None else (index,)
        down = wait_until(leader, what="etcd's leader")[0]
        self.etcd.stop_member(down)
        try:
            # Leases keep being renewed past the node timeout, the map
            # keeps changing, and writes keep being taken.
            result = redis_cli("--cluster", "reshard", address(servers[0]),
                               "--cluster-from", node_id(servers[1]),
                               "--cluster-to", node_id(servers[0]), "--cluster-slots", "20",
                               "--cluster-yes")
            self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
            deadline = time.monotonic() + 2 * int(NODE_TIMEOUT_MS) / 1000
            while time.monotonic() < deadline:
                for i in range(20):
                    cluster.execute_command("BF.ADD", "m:%d" % i, "x")
            self.check(servers[0])
        finally:
            self.etcd.start_member(down)
            wait_until(lambda: self.etcd.healthy(down), timeout=60, what="the member back")

    def test_all_of_etcd_down_refuses_writes_after_the_lease_then_heals(self):
        own = EtcdCluster(1).start()
        try:
            servers = [Server("--cluster-enabled", "yes", "--cluster-etcd", own.endpoints,
                              "--cluster-node-timeout", NODE_TIMEOUT_MS) for _ in range(3)]
            for server in servers:
                server.start()
                self.nodes.append(server)
            self.create(servers)
            cluster = self.client(servers[0])
            cluster.execute_command("BF.ADD", "kept", "before")
            own.stop_member(0)
            # Reads go on from the last map; writes stop once the lease
            # cannot have been renewed (as a minority partition's).
            owner = [s for s in servers
                     if s.client().execute_command("CLUSTER", "COUNTKEYSINSLOT",
                                                   s.client().execute_command(
                                                       "CLUSTER", "KEYSLOT", "kept")) == 1][0]

            def refused():
                try:
                    owner.client().execute_command("BF.ADD", "kept", "during")
                    return False
                except redis.ResponseError as error:
                    return "cluster is down" in str(error).lower()
            wait_until(refused, timeout=30, what="writes to be refused without etcd")
            self.assertEqual(owner.client().execute_command("BF.EXISTS", "kept", "before"), 1)
            own.start_member(0)
            wait_until(lambda: own.healthy(0), timeout=60, what="etcd back")
            wait_until(lambda: cluster.execute_command("BF.ADD", "kept", "after") == 1,
                       timeout=60, what="writes to be taken again")
            self.settled(servers)
            self.assertEqual(cluster.execute_command("BF.EXISTS", "kept", "before"), 1)
        finally:
            own.stop()


class Replies(EtcdClusterTest):
    def test_membership_commands_answer_as_redis(self):
        a, b = self.node(), self.node()
        for server in (a, b):
            self.registered(server)
        client = a.client()
        a_id, b_id = node_id(a), node_id(b)
        self.assertEqual(client.execute_command("CLUSTER", "SET-CONFIG-EPOCH", 5), b"OK")
        with self.assertRaisesRegex(redis.ResponseError, "already non-zero"):
            client.execute_command("CLUSTER", "SET-CONFIG-EPOCH", 6)
        self.assertEqual(client.execute_command("CLUSTER", "BUMPEPOCH"), b"STILL 5")
        with self.assertRaisesRegex(redis.ResponseError, "Invalid config epoch specified: -1"):
            b.client().execute_command("CLUSTER", "SET-CONFIG-EPOCH", -1)
        with self.assertRaisesRegex(redis.ResponseError, "Invalid base port specified: x"):
            client.execute_command("CLUSTER", "MEET", "127.0.0.1", "x")
        with self.assertRaisesRegex(redis.ResponseError, "no node of this cluster"):
            client.execute_command("CLUSTER", "MEET", "127.0.0.1", 1)
        with self.assertRaisesRegex(redis.ResponseError, "Unknown node " + b_id):
            client.execute_command("CLUSTER", "REPLICATE", b_id)
        self.assertEqual(client.execute_command("CLUSTER", "MEET", "127.0.0.1", b.port), b"OK")
        wait_until(lambda: known_nodes(b) == 2, what="b to know a")
        self.assertEqual(cluster_info(a)["cluster_my_epoch"], "5")
        # b (epoch 0) bumps past a; then a past b, inside MULTI: EXEC's reply
        # waits for the change to be in etcd.
        self.assertEqual(b.client().execute_command("CLUSTER", "BUMPEPOCH"), b"BUMPED 6")
        wait_until(lambda: cluster_info(a)["cluster_current_epoch"] == "6",
                   what="a to see epoch 6")
        pipe = client.pipeline(transaction=True)
        pipe.execute_command("CLUSTER", "BUMPEPOCH")
        pipe.execute_command("CLUSTER", "BUMPEPOCH")
        self.assertEqual(pipe.execute(), [b"BUMPED 7", b"STILL 7"])
        self.assertEqual(cluster_info(a)["cluster_my_epoch"], "7")
        with self.assertRaisesRegex(redis.ResponseError, "does not know any other node"):
            b.client().execute_command("CLUSTER", "SET-CONFIG-EPOCH", 7)
        with self.assertRaisesRegex(redis.ResponseError, "Can't replicate myself"):
            client.execute_command("CLUSTER", "REPLICATE", a_id)
        with self.assertRaisesRegex(redis.ResponseError, "can't forget myself"):
            client.execute_command("CLUSTER", "FORGET", a_id)
        self.assertEqual(client.execute_command("CLUSTER", "ADDSLOTSRANGE", 0, 16383), b"OK")
        with self.assertRaisesRegex(redis.ResponseError, "must be empty and without assigned"):
            client.execute_command("CLUSTER", "REPLICATE", b_id)
        self.assertEqual(b.client().execute_command("CLUSTER", "REPLICATE", a_id), b"OK")
        with self.assertRaisesRegex(redis.ResponseError, "only replicate a master, not a replica"):
            client.execute_command("CLUSTER", "REPLICATE", b_id)
        with self.assertRaisesRegex(redis.ResponseError, "Can't forget my master"):
            b.client().execute_command("CLUSTER", "FORGET", a_id)
        replicas = client.execute_command("CLUSTER", "REPLICAS", a_id)
        self.assertEqual(len(replicas), 1)
        self.assertTrue(replicas[0].startswith(b_id.encode()), replicas)
        self.assertIn(b" slave " + a_id.encode(), replicas[0])
        with self.assertRaisesRegex(redis.ResponseError, "not a master"):
            client.execute_command("CLUSTER", "SLAVES", b_id)
        self.assertEqual(b.client().execute_command("CLUSTER", "MYSHARDID").decode(), a_id)
        self.assertEqual(client.execute_command("CLUSTER", "COUNT-FAILURE-REPORTS", b_id), 0)
        # FORGET: gone from the map; forgetting it again answers OK (del-node
        # sends it to every node).
        b.client().execute_command("CLUSTER", "RESET", "SOFT")
        wait_until(lambda: known_nodes(a) == 1, what="a to see b leave")
        self.assertEqual(known_nodes(b), 1)
        self.assertEqual(client.execute_command("CLUSTER", "MEET", "127.0.0.1", b.port), b"OK")
        wait_until(lambda: known_nodes(a) == 2, what="b back")
        self.assertEqual(client.execute_command("CLUSTER", "FORGET", b_id), b"OK")
        self.assertEqual(client.execute_command("CLUSTER", "FORGET", b_id), b"OK")
        wait_until(lambda: known_nodes(b) == 1, what="b to see itself forgotten")
        client.execute_command("BF.ADD", "k", "x")
        with self.assertRaisesRegex(redis.ResponseError, "CLUSTER RESET can't be called"):
            client.execute_command("CLUSTER", "RESET")

    def test_a_static_map_node_refuses_meet_and_reset(self):
        port = free_ports(1)[0]
        server = cluster_node(port, "0-16383=127.0.0.1:%d" % port)
        server.start()
        self.nodes.append(server)
        for command in (("MEET", "127.0.0.1", port + 1), ("RESET",)):
            with self.assertRaisesRegex(redis.ResponseError, "--cluster-etcd"):
                server.client().execute_command("CLUSTER", *command)

    def test_bad_settings_are_refused_at_start(self):
        cases = [
            (["--cluster-etcd", self.etcd.endpoints], "need --cluster-enabled yes"),
            (["--cluster-enabled", "yes", "--cluster-etcd", "etcd:2379"], "bad etcd endpoint"),
            (["--cluster-enabled", "yes", "--cluster-etcd", self.etcd.endpoints,
              "--cluster-slots", "0-16383=127.0.0.1:1"], "for the static map"),
            (["--cluster-enabled", "yes", "--cluster-etcd", self.etcd.endpoints,
              "--cluster-name", "a/b"], "--cluster-name"),
            (["--cluster-enabled", "yes", "--cluster-etcd", self.etcd.endpoints,
              "--cluster-announce", "nohost"], "--cluster-announce"),
            (["--cluster-enabled", "yes"], "--cluster-etcd"),
        ]
        for args, expected in cases:
            server = Server(*args)
            result = subprocess.run(server.args() + ["--test-config"], capture_output=True,
                                    text=True)
            server.cleanup()
            self.assertNotEqual(result.returncode, 0, args)
            self.assertIn(expected, result.stdout + result.stderr, args)


if __name__ == "__main__":
    unittest.main()
