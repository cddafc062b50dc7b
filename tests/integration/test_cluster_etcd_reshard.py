"""redis-cli --cluster reshard and rebalance, unmodified, on a cluster whose
map is kept in etcd (3 primaries, 3 replicas, formed by redis-cli --cluster
create), while writers add unique items through redis-py's RedisCluster and
count one only once WAIT 1 on the key's node acknowledged it. The writers
see no error their client does not handle itself, slots really move, and
every acknowledged item answers 1 on its owner and on the owner's replica.
Also info, call and fix (an open slot closed)."""

import threading
import unittest

from redis.cluster import RedisCluster

from harness import wait_until
from test_cluster_etcd import EtcdClusterTest, address, node_id, redis_cli, cluster_info

KEYS = ["f%d" % i for i in range(300)]


class Writer(threading.Thread):
    def __init__(self, port, n):
        super().__init__(daemon=True)
        self.port, self.n = port, n
        self.stop = threading.Event()
        self.acknowledged, self.failures = [], []

    def run(self):
        cluster = RedisCluster(host="127.0.0.1", port=self.port)
        try:
            i = 0
            while not self.stop.is_set():
                key, item = KEYS[(i * 7 + self.n) % len(KEYS)], "w%d-%d" % (self.n, i)
                cluster.execute_command("BF.ADD", key, item)
                node = cluster.get_node_from_key(key)
                if cluster.execute_command("WAIT", 1, 5000, target_nodes=node) >= 1:
                    self.acknowledged.append((key, item))
                i += 1
        except Exception as e:  # noqa: BLE001 - reported by the test
            self.failures.append(repr(e))
        finally:
            cluster.close()


def slots_by_port(server):
    counts = {}
    for start, end, owner, *_ in server.client().execute_command("CLUSTER", "SLOTS"):
        counts[owner[1]] = counts.get(owner[1], 0) + end - start + 1
    return counts


class ReshardUnderWriters(EtcdClusterTest):
    def test_reshard_and_rebalance_under_writers_lose_nothing(self):
        servers = [self.node() for _ in range(6)]
        self.create(servers, replicas=1)
        primaries = [s for s in servers if s.client().info("replication")["role"] == "master"]
        self.assertEqual(len(primaries), 3)
        cluster = self.client(servers[0])
        for key in KEYS:
            cluster.execute_command("BF.ADD", key, "seed")
        before = slots_by_port(servers[0])
        writers = [Writer(servers[0].port, n) for n in range(2)]
        for writer in writers:
            writer.start()
        try:
            wait_until(lambda: all(len(w.acknowledged) > 20 for w in writers),
                       what="writes to flow")
            result = redis_cli("--cluster", "reshard", address(servers[0]), "--cluster-from",
                               node_id(primaries[0]), "--cluster-to", node_id(primaries[1]),
                               "--cluster-slots", "200", "--cluster-yes", timeout=600)
            self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
            moved = slots_by_port(servers[0])
            result = redis_cli("--cluster", "rebalance", address(servers[0]), "--cluster-weight",
                               "%s=1.1" % node_id(primaries[2]), "--cluster-yes", timeout=600)
            self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        finally:
            for writer in writers:
                writer.stop.set()
            for writer in writers:
                writer.join(60)
        self.assertEqual([f for w in writers for f in w.failures], [])
        self.check(servers[0])
        self.assertEqual(moved[primaries[0].port], before[primaries[0].port] - 200)
        self.assertEqual(moved[primaries[1].port], before[primaries[1].port] + 200)
        # At weight 1.1 of 3.1 the third primary is given about 5,800 slots
        # (from 5,461), most of them from the second.
        after = slots_by_port(servers[0])
        self.assertGreater(after[primaries[2].port], 5700)
        self.assertLess(after[primaries[1].port], moved[primaries[1].port] - 200)

        acknowledged = {}
        for writer in writers:
            for key, item in writer.acknowledged:
                acknowledged.setdefault(key, []).append(item)
        self.assertGreater(sum(map(len, acknowledged.values())), 100)
        for key, items in acknowledged.items():
            self.assertEqual(cluster.execute_command("BF.MEXISTS", key, *items),
                             [1] * len(items), key)
        self.same_on_replicas(servers, acknowledged)

    def same_on_replicas(self, servers, acknowledged):
        """Every acknowledged item is on the replica of its key's owner."""
        by_port = {server.port: server for server in servers}
        cluster = self.client(servers[0])
        for key, items in acknowledged.items():
            owner = by_port[cluster.get_node_from_key(key).port]
            self.assertEqual(owner.client().execute_command("WAIT", 1, 10000), 1)
            replica = next(s for s in servers
                           if s.client().info("replication").get("master_port") == owner.port)
            pipe = replica.client().pipeline(transaction=False)
            pipe.execute_command("READONLY")
            pipe.execute_command("BF.MEXISTS", key, *items)
            self.assertEqual(pipe.execute()[1], [1] * len(items), (key, replica.port))


class ClusterTools(EtcdClusterTest):
    """redis-cli --cluster info, call and fix, unmodified."""

    def test_info_call_and_fix(self):
        servers = [self.node() for _ in range(3)]
        self.create(servers)
        cluster = self.client(servers[0])
        for key in KEYS[:30]:
            cluster.execute_command("BF.ADD", key, "x")
        result = redis_cli("--cluster", "info", address(servers[0]))
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertIn("[OK] 30 keys in 3 masters.", result.stdout)
        result = redis_cli("--cluster", "call", address(servers[0]), "DBSIZE")
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        sizes = [int(line.rsplit(":", 1)[1]) for line in result.stdout.splitlines()
                 if line.startswith("127.0.0.1:")]
        self.assertEqual(len(sizes), 3)
        self.assertEqual(sum(sizes), 30)
        # An open slot (importing on a node that does not own it): fix closes it.
        owner = cluster.get_node_from_key("f1")
        slot = cluster.keyslot("f1")
        other = next(s for s in servers if s.port != owner.port)
        other.client().execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING",
                                       node_id(next(s for s in servers if s.port == owner.port)))
        wait_until(lambda: b"[%d-<-" % slot in other.client().execute_command("CLUSTER", "NODES"),
                   what="the open slot to show")
        result = redis_cli("--cluster", "check", address(servers[0]))
        self.assertNotEqual(result.returncode, 0, result.stdout)
        result = redis_cli("--cluster", "fix", address(servers[0]), "--cluster-yes")
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        wait_until(lambda: redis_cli("--cluster", "check", address(servers[0])).returncode == 0,
                   timeout=30, what="the fixed cluster to check clean")
        self.check(servers[0])
        self.assertEqual(cluster.execute_command("BF.EXISTS", "f1", "x"), 1)
        self.fix_unassigned_slots(servers, cluster)

    def fix_unassigned_slots(self, servers, cluster):
        """Slots no node serves, one empty and one holding a filter: fix
        gives the empty one to some node and the other to the node holding
        its keys (MULTI, DELSLOTS, ADDSLOTS, SETSLOT STABLE, BUMPEPOCH, EXEC)."""
        by_port = {server.port: server for server in servers}
        held_key = "f2"
        held_slot = cluster.keyslot(held_key)
        holder = by_port[cluster.get_node_from_key(held_key).port]
        empty_slot = next(slot for slot in sorted(self.owned_slots(holder))
                          if holder.client().execute_command("CLUSTER", "COUNTKEYSINSLOT", slot) == 0)
        holder.client().execute_command("CLUSTER", "DELSLOTS", held_slot, empty_slot)
        wait_until(lambda: all(cluster_info(s)["cluster_slots_assigned"] == "16382"
                               for s in servers), what="two slots unassigned everywhere")
        result = redis_cli("--cluster", "check", address(servers[0]))
        self.assertIn("Not all 16384 slots are covered", result.stdout)
        # Coverage prompts are asked even with --cluster-yes.
        result = redis_cli("--cluster", "fix", address(servers[0]), "--cluster-yes",
                           answers="yes\nyes\n")
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        wait_until(lambda: redis_cli("--cluster", "check", address(servers[0])).returncode == 0,
                   timeout=30, what="the fixed cluster to check clean")
        self.assertIn(held_slot, self.owned_slots(holder))
        for server in servers:
            self.assertEqual(cluster_info(server)["cluster_slots_assigned"], "16384")
        self.assertEqual(cluster.execute_command("BF.EXISTS", held_key, "x"), 1)

    @staticmethod
    def owned_slots(server):
        me = next(line for line in
                  server.client().execute_command("CLUSTER", "NODES").decode().splitlines()
                  if "myself" in line)
        slots = set()
        for part in me.split()[8:]:
            if part.startswith("["):
                continue
            first, _, last = part.partition("-")
            slots.update(range(int(first), int(last or first) + 1))
        return slots


if __name__ == "__main__":
    unittest.main()
