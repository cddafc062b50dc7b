"""The work of tests/bench/failover_bench.sh for one system (run it through
that script): a cluster of 3 primaries with --replicas each (1: six nodes) of bloomery with
its map in a 3-member etcd, or of redis-server 7 with RedisBloom; a writer
adding unique items by BF.ADD then WAIT 1 on the same connection to the
key's primary, an item acknowledged when WAIT answers 1; ROUNDS times a
random primary killed with SIGKILL, the seconds from the kill until a BF.ADD
to one of its slots answers, then the node restarted on its data and waited
for as a replica with its link up and the cluster ok everywhere; at the end
every acknowledged item looked up with BF.EXISTS.

Prints one line per round, "round N victim PORT seconds S", then
"result SYSTEM ROUNDS_OK ACKED LOST s1,s2,...". Every process it starts is
stopped by pid. Writes the nodes' and etcd's logs under DIR."""

import argparse
import json
import logging
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request

import redis
from redis.cluster import ClusterNode, RedisCluster
from redis.crc import key_slot

POLL = 0.02

logging.getLogger("redis.cluster").setLevel(logging.CRITICAL)


def free_port(taken):
    """A free port on 127.0.0.1 whose bus port (+10000) is free too."""
    while True:
        port = random.randrange(20000, 55000)
        if port in taken or port + 10000 in taken:
            continue
        try:
            for p in (port, port + 10000):
                s = socket.socket()
                s.bind(("127.0.0.1", p))
                s.close()
        except OSError:
            continue
        taken.update((port, port + 10000))
        return port


def wait_until(check, timeout, what, interval=0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except (redis.RedisError, OSError):
            pass
        time.sleep(interval)
    raise RuntimeError("timed out after %ss waiting for %s" % (timeout, what))


def client(port, timeout=2.0):
    return redis.Redis(host="127.0.0.1", port=port, socket_timeout=timeout,
                       socket_connect_timeout=timeout)


def info(port, section="replication"):
    return client(port).info(section)


def cluster_info(port):
    text = client(port).execute_command("CLUSTER", "INFO").decode()
    return dict(line.split(":", 1) for line in text.split("\r\n") if ":" in line)


class Etcd:
    def __init__(self, directory, taken):
        self.directory = directory
        self.members = [{"name": "m%d" % i, "client": free_port(taken), "peer": free_port(taken)}
                        for i in range(3)]
        self.processes = []

    @property
    def endpoints(self):
        return ",".join("http://127.0.0.1:%d" % m["client"] for m in self.members)

    def start(self):
        initial = ",".join("%s=http://127.0.0.1:%d" % (m["name"], m["peer"]) for m in self.members)
        for m in self.members:
            c, p = "http://127.0.0.1:%d" % m["client"], "http://127.0.0.1:%d" % m["peer"]
            log = open(os.path.join(self.directory, "etcd-%s.log" % m["name"]), "ab")
            self.processes.append(subprocess.Popen(
                ["etcd", "--name", m["name"], "--data-dir",
                 os.path.join(self.directory, "etcd-" + m["name"]),
                 "--listen-client-urls", c, "--advertise-client-urls", c,
                 "--listen-peer-urls", p, "--initial-advertise-peer-urls", p,
                 "--initial-cluster", initial, "--initial-cluster-state", "new",
                 "--initial-cluster-token", "failover-bench",
                 "--heartbeat-interval", "50", "--election-timeout", "500",
                 "--log-level", "warn"],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL))
            log.close()
        for m in self.members:
            def healthy(m=m):
                url = "http://127.0.0.1:%d/health" % m["client"]
                with urllib.request.urlopen(url, timeout=2) as answer:
                    return json.loads(answer.read()).get("health") == "true"
            wait_until(healthy, 60, "etcd member %s" % m["name"], interval=0.1)

    def stop(self):
        for p in self.processes:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=30)


class Node:
    def __init__(self, system, port, directory, args):
        self.system, self.port, self.dir, self.args = system, port, directory, args
        self.process = None
        os.makedirs(directory, exist_ok=True)

    def start(self):
        log = open(self.dir + ".log", "ab")
        self.process = subprocess.Popen(self.args, cwd=self.dir, stdout=log,
                                        stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        log.close()
        wait_until(lambda: client(self.port).ping(), 30, "node %d to answer PING" % self.port)

    def kill(self):
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=30)

    def log_tail(self, lines=40):
        try:
            with open(self.dir + ".log", errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except OSError:
            return ""


def make_nodes(system, directory, taken, etcd, bloomery, module, count):
    nodes = []
    for i in range(count):
        port = free_port(taken)
        d = os.path.join(directory, "%s-%d" % (system, port))
        if system == "bloomery":
            args = [bloomery, "--cluster-enabled", "yes", "--cluster-etcd", etcd.endpoints,
                    "--cluster-name", "failover-bench", "--cluster-node-timeout", "2000",
                    "--bind", "127.0.0.1", "--port", str(port), "--dir", d,
                    "--appendonly", "yes", "--save", ""]
        else:
            args = ["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                    "--cluster-enabled", "yes", "--cluster-node-timeout", "2000",
                    "--appendonly", "yes", "--save", "", "--dir", d,
                    "--loadmodule", module]
        nodes.append(Node(system, port, d, args))
    return nodes


def settled(nodes):
    """Every node answers, the cluster is ok everywhere with 6 known nodes,
    no node flags another as failing, every replica's link is up."""
    for n in nodes:
        ci = cluster_info(n.port)
        if ci.get("cluster_state") != "ok" or ci.get("cluster_known_nodes") != str(len(nodes)):
            return False
        text = client(n.port).execute_command("CLUSTER", "NODES").decode()
        for line in text.splitlines():
            if "fail" in line.split()[2]:
                return False
        r = info(n.port)
        if r["role"] == "slave" and r.get("master_link_status") != "up":
            return False
    return True


def roles(nodes):
    """{port: master_port or None} of the live nodes."""
    out = {}
    for n in nodes:
        r = info(n.port)
        out[n.port] = int(r["master_port"]) if r["role"] == "slave" else None
    return out


class Writer(threading.Thread):
    def __init__(self, ports):
        super().__init__(daemon=True)
        self.ports = ports
        self.stop_flag = threading.Event()
        self.acked = []          # (key, item)
        self.attempts = 0
        self.errors = 0
        self.unacked = 0

    def connect(self):
        while not self.stop_flag.is_set():
            try:
                return RedisCluster(startup_nodes=[ClusterNode("127.0.0.1", p) for p in self.ports],
                                    socket_timeout=2, socket_connect_timeout=2)
            except (redis.RedisError, OSError, IndexError):
                time.sleep(0.05)
        return None

    def run(self):
        rc = self.connect()
        i = 0
        while rc is not None and not self.stop_flag.is_set():
            i += 1
            key, item = "fo:%d" % (i % 1024), "item-%d" % i
            self.attempts += 1
            try:
                node = rc.get_node_from_key(key)
                pipe = node.redis_connection.pipeline(transaction=False)
                pipe.execute_command("BF.ADD", key, item)
                pipe.execute_command("WAIT", 1, 500)
                added, replicas = pipe.execute(raise_on_error=False)
                if isinstance(added, Exception) or isinstance(replicas, Exception):
                    raise redis.ResponseError(str(added))
                if replicas >= 1:
                    self.acked.append((key, item))
                else:
                    self.unacked += 1
            except (redis.RedisError, OSError, IndexError, KeyError, AttributeError):
                self.errors += 1
                time.sleep(0.01)
                try:
                    rc.nodes_manager.initialize()
                except (redis.RedisError, OSError, IndexError, KeyError, AttributeError):
                    try:
                        rc.close()
                    except Exception:
                        pass
                    rc = self.connect()


def slots_owner(port, slot):
    """The port owning slot as node `port` sees it, or None."""
    for entry in client(port, 0.5).execute_command("CLUSTER", "SLOTS"):
        if entry[0] <= slot <= entry[1]:
            return int(entry[2][1])
    return None


def failover_seconds(nodes, victim, replica_port, probe_key, deadline_s=60):
    """Kills victim; seconds until a BF.ADD of probe_key (one of victim's
    slots) answers, polled every 20 ms on every owner the survivors name."""
    slot = key_slot(probe_key.encode())
    survivors = [n.port for n in nodes if n is not victim]
    t0 = time.monotonic()
    victim.kill()
    n = 0
    while time.monotonic() - t0 < deadline_s:
        candidates = {replica_port}
        for port in survivors:
            try:
                owner = slots_owner(port, slot)
                if owner is not None:
                    candidates.add(owner)
            except (redis.RedisError, OSError):
                pass
        candidates.discard(victim.port)
        for port in candidates:
            n += 1
            try:
                reply = client(port, 0.5).execute_command("BF.ADD", probe_key, "probe-%d" % n)
                if isinstance(reply, int):
                    return time.monotonic() - t0, port
            except (redis.RedisError, OSError):
                pass
        time.sleep(POLL)
    return None, None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("system", choices=["bloomery", "redisbloom"])
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--bloomery", default="build/release/bloomery")
    ap.add_argument("--module", default="")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--between", type=int, default=500,
                    help="acknowledged adds to wait for before each kill")
    ap.add_argument("--replicas", type=int, default=1, help="replicas per primary (3 primaries)")
    a = ap.parse_args()
    random.seed(a.seed)
    taken = set()
    etcd = None
    nodes = []
    writer = None
    times = []
    try:
        if a.system == "bloomery":
            etcd = Etcd(a.dir, taken)
            etcd.start()
        nodes = make_nodes(a.system, a.dir, taken, etcd, a.bloomery, a.module,
                           3 * (1 + a.replicas))
        for n in nodes:
            n.start()
        if a.system == "bloomery":
            for n in nodes:
                wait_until(lambda n=n: b"127.0.0.1" in client(n.port).execute_command(
                    "CLUSTER", "NODES"), 30, "node %d to reach etcd" % n.port)
        create = subprocess.run(["redis-cli", "--cluster", "create"] +
                                ["127.0.0.1:%d" % n.port for n in nodes] +
                                ["--cluster-replicas", str(a.replicas), "--cluster-yes"],
                                capture_output=True, text=True, timeout=180,
                                stdin=subprocess.DEVNULL)
        if create.returncode != 0 or "[OK] All 16384 slots covered" not in create.stdout:
            raise RuntimeError("create failed:\n" + create.stdout + create.stderr)
        wait_until(lambda: settled(nodes), 60, "the cluster to settle")
        writer = Writer([n.port for n in nodes])
        writer.start()
        wait_until(lambda: len(writer.acked) >= 200, 60, "the writer's first 200 acknowledged adds")
        by_port = {n.port: n for n in nodes}
        for r in range(1, a.rounds + 1):
            # Writes in flight at the kill: a fresh stretch of acknowledged adds first.
            target = len(writer.acked) + a.between
            wait_until(lambda: len(writer.acked) >= target, 60,
                       "%d more acknowledged adds before round %d" % (a.between, r), interval=0.01)
            role = roles(nodes)
            primaries = sorted(p for p, m in role.items() if m is None)
            victim = by_port[random.choice(primaries)]
            replica_port = [p for p, m in role.items() if m == victim.port][0]
            probe_slot_key = None
            for i in range(100000):
                k = "probe:%d:%d" % (r, i)
                try:
                    if slots_owner(replica_port, key_slot(k.encode())) == victim.port:
                        probe_slot_key = k
                        break
                except (redis.RedisError, OSError):
                    pass
            acked_before = len(writer.acked)
            seconds, new_primary = failover_seconds(nodes, victim, replica_port, probe_slot_key)
            if seconds is None:
                print("round %d victim %d FAILED: no write to its slots within 60 s" %
                      (r, victim.port), flush=True)
                for n in nodes:
                    print("--- log of %d (tail) ---\n%s" % (n.port, n.log_tail()), flush=True)
                break
            times.append(seconds)
            restart = time.monotonic()
            victim.start()
            wait_until(lambda: info(victim.port)["role"] == "slave" and
                       info(victim.port).get("master_link_status") == "up", 120,
                       "node %d to rejoin as a replica" % victim.port)
            # settled(): every replica's link up, the victim's other replicas
            # following the new primary included.
            wait_until(lambda: settled(nodes), 120, "the cluster to settle after round %d" % r)
            print("round %d victim %d replica %d new_primary %d seconds %.3f rejoin %.2f "
                  "acked_during %d" % (r, victim.port, replica_port, new_primary, seconds,
                                       time.monotonic() - restart,
                                       len(writer.acked) - acked_before), flush=True)
        writer.stop_flag.set()
        writer.join(timeout=30)
        # Every acknowledged item answers 1.
        rc = RedisCluster(startup_nodes=[ClusterNode("127.0.0.1", n.port) for n in nodes],
                          socket_timeout=10)
        lost = []
        acked = list(writer.acked)
        for start in range(0, len(acked), 500):
            batch = acked[start:start + 500]
            pipe = rc.pipeline()
            for key, item in batch:
                pipe.execute_command("BF.EXISTS", key, item)
            for (key, item), found in zip(batch, pipe.execute()):
                if found != 1:
                    lost.append((key, item))
        print("writer attempts %d acknowledged %d not_acknowledged %d errors %d" %
              (writer.attempts, len(acked), writer.unacked, writer.errors), flush=True)
        for key, item in lost[:20]:
            print("lost %s %s" % (key, item), flush=True)
        print("result %s %d %d %d %s" % (a.system, len(times), len(acked), len(lost),
                                          ",".join("%.3f" % t for t in times)), flush=True)
    finally:
        if writer is not None:
            writer.stop_flag.set()
        for n in nodes:
            n.kill()
        if etcd is not None:
            etcd.stop()


if __name__ == "__main__":
    sys.exit(main())
