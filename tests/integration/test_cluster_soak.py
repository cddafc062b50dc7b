"""A soak of the cluster kept in etcd, checked per key as Jepsen checks a
register: six nodes (three shards of two) under a writer that adds unique
items through redis-py's RedisCluster and counts an item acknowledged only
once WAIT says a replica holds it, while nodes are killed with SIGKILL and
restarted on their data, or paused with SIGSTOP past the node timeout and
resumed, one at a time at random moments. At the end every acknowledged
item answers 1, on a cluster whose every slot is served again.

It runs for $BLOOMERY_SOAK_SECONDS (120 by default, 45 under a sanitizer;
longer by hand: BLOOMERY_SOAK_SECONDS=1800)."""

import logging
import os
import random
import signal
import sys
import threading
import time
import unittest

from redis.cluster import RedisCluster

from test_cluster_etcd import EtcdClusterTest, cluster_info
from harness import wait_until

logging.getLogger("redis.cluster").setLevel(logging.CRITICAL)

# Two minutes in `make test`, less under a sanitizer (make asan / tsan),
# whose nodes are 5 to 15 times slower and go through fewer faults a minute
# anyway; the long soaks are run by hand.
SANITIZED = os.environ.get("BLOOMERY_SANITIZED") == "1"
SOAK_SECONDS = float(os.environ.get("BLOOMERY_SOAK_SECONDS", "45" if SANITIZED else "120"))


class Writer(threading.Thread):
    """Adds unique items to 40 filters; records (key, item) once WAIT 1
    on the key's node acknowledged it."""

    def __init__(self, port):
        super().__init__(daemon=True)
        self.port = port
        self.stop = threading.Event()
        self.acknowledged = []
        self.attempts = 0

    def run(self):
        cluster = None
        serial = 0
        while not self.stop.is_set():
            try:
                if cluster is None:
                    cluster = RedisCluster(host="127.0.0.1", port=self.port, socket_timeout=3,
                                           cluster_error_retry_attempts=2)
                key = "soak:%d" % random.randrange(40)
                serial += 1
                item = "item-%d" % serial
                self.attempts += 1
                cluster.execute_command("BF.ADD", key, item)
                node = cluster.get_node_from_key(key)
                if cluster.execute_command("WAIT", 1, 1000, target_nodes=node) >= 1:
                    self.acknowledged.append((key, item))
            except Exception:  # noqa: BLE001 - any failure: not acknowledged
                # redis-py raises several kinds while nodes come and go
                # (RedisClusterException is no RedisError); start afresh.
                cluster = None
                time.sleep(0.05)


class Soak(EtcdClusterTest):
    def test_nothing_acknowledged_is_lost_under_kills_and_pauses(self):
        servers = [self.node() for _ in range(6)]
        self.create(servers, replicas=1)
        writer = Writer(servers[0].port)
        writer.start()
        rng = random.Random(int(os.environ.get("BLOOMERY_SOAK_SEED", "0")) or None)
        events = []
        deadline = time.monotonic() + SOAK_SECONDS
        try:
            while time.monotonic() < deadline:
                time.sleep(rng.uniform(1, 4))
                victim = rng.choice(servers)
                if rng.random() < 0.5:
                    events.append(("kill", victim.port))
                    victim.kill()
                    time.sleep(rng.uniform(0, 4))
                    victim.start()
                else:
                    events.append(("pause", victim.port))
                    victim.process.send_signal(signal.SIGSTOP)
                    time.sleep(rng.uniform(2.5, 5))
                    victim.process.send_signal(signal.SIGCONT)
                # One fault at a time: the cluster heals before the next.
                self.settled(servers)
        finally:
            for server in servers:
                if server.process is not None and server.process.poll() is None:
                    server.process.send_signal(signal.SIGCONT)
            writer_alive = writer.is_alive()
            writer.stop.set()
            writer.join(timeout=30)
        self.assertTrue(writer_alive, "the writer stopped early")
        self.settled(servers)
        self.assertGreater(len(writer.acknowledged), 100,
                           "too few writes acknowledged (%d of %d tried; events %s)" %
                           (len(writer.acknowledged), writer.attempts, events))
        sys.stderr.write("soak: %d of %d adds acknowledged by WAIT; %d events: %s\n" %
                         (len(writer.acknowledged), writer.attempts, len(events), events))
        reader = self.client(servers[0])
        missing = [(key, item) for key, item in writer.acknowledged
                   if reader.execute_command("BF.EXISTS", key, item) != 1]
        self.assertEqual(missing, [], "lost after events %s" % events)
        for server in servers:
            self.assertEqual(cluster_info(server)["cluster_state"], "ok")


if __name__ == "__main__":
    unittest.main()
