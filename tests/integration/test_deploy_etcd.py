"""The cluster kept in etcd, as deploy/ starts it (docker-compose.etcd-cluster.yml
and k8s/etcd-cluster/): its etcd members name each other alike, the bloomery
nodes reach every member and announce the addresses the formation script
passes to `redis-cli --cluster create`, and that script (shell, checked with
bash -n and sh -n, then run against stand-ins for redis-cli and getent)
creates the cluster only while no node knows another. That every node passes
`bloomery --test-config` with its arguments and environment is checked in
test_deploy with the other deployments.
"""

import os
import subprocess
import tempfile
import unittest

import yaml

from test_deploy import DEPLOY, k8s_documents


def flag_values(words):
    """{--flag: value} of ["--flag", "value", "--other=value", ...]."""
    flags, at = {}, 0
    while at < len(words):
        word = str(words[at])
        if "=" in word:
            key, _, value = word.partition("=")
            flags[key] = value
            at += 1
        else:
            flags[word] = str(words[at + 1])
            at += 2
    return flags


# Stand-ins for the tools the formation scripts call: redis-cli answers PING
# and CLUSTER INFO as a node in state $FAKE_STATE knowing $FAKE_KNOWN nodes,
# and logs each --cluster call with the password it was given; getent
# resolves NAME-N.SERVICE to 10.244.0.(10+N).
FAKE_REDIS_CLI = """#!/bin/sh
case "$*" in
  *--cluster*) echo "auth=$REDISCLI_AUTH $*" >> "$FAKE_LOG" ;;
  *PING*) echo PONG ;;
  *"CLUSTER INFO"*) printf 'cluster_state:%s\\r\\ncluster_slots_assigned:0\\r\\ncluster_known_nodes:%s\\r\\n' "$FAKE_STATE" "$FAKE_KNOWN" ;;
  *) echo "unexpected redis-cli $*" >&2; exit 1 ;;
esac
"""
FAKE_GETENT = """#!/bin/sh
[ "$1" = hosts ] || exit 2
name=${2%%.*}
printf '10.244.0.%d    %s\\n' "$((10 + ${name##*-}))" "$2"
"""


class EtcdCluster(unittest.TestCase):
    """The cluster kept in etcd: its etcd members name each other alike, the
    nodes reach every member, and the formation script (shell, checked with
    bash -n and sh -n) creates the cluster of the nodes as they announce
    themselves only when no node knows another yet."""

    def run_script(self, script, env, state, known):
        with tempfile.TemporaryDirectory() as root:
            for name, text in (("redis-cli", FAKE_REDIS_CLI), ("getent", FAKE_GETENT)):
                with open(os.path.join(root, name), "w") as f:
                    f.write(text)
                os.chmod(os.path.join(root, name), 0o755)
            log = os.path.join(root, "log")
            environment = {"PATH": root + ":/usr/bin:/bin", "FAKE_LOG": log,
                           "FAKE_STATE": state, "FAKE_KNOWN": str(known)}
            environment.update(env)
            for shell in ("sh", "bash"):
                if os.path.exists(log):
                    os.remove(log)
                result = subprocess.run([shell, "-c", script], env=environment, timeout=60,
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
                output = result.stdout.decode("utf-8", "replace")
                self.assertEqual(result.returncode, 0, "%s: %s" % (shell, output))
                calls = []
                if os.path.exists(log):
                    with open(log) as f:
                        calls = f.read().splitlines()
                yield calls

    def check_script(self, what, script, env, addresses, password):
        for shell in ("bash", "sh"):
            result = subprocess.run([shell, "-n", "-c", script], stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, timeout=60)
            self.assertEqual(result.returncode, 0,
                             "%s: %s -n: %s" % (what, shell, result.stdout.decode()))
        # Nodes that know only themselves: created once, with every node.
        for calls in self.run_script(script, env, "fail", 1):
            self.assertEqual(calls, ["auth=%s --cluster create %s --cluster-replicas 1 "
                                     "--cluster-yes" % (password, " ".join(addresses))], what)
        # 3 primaries at least, as redis-cli requires: 6 nodes, 1 replica each.
        self.assertGreaterEqual(len(addresses) // 2, 3, what)
        # Formed already (or being formed by hand): left alone.
        for state, known in (("ok", len(addresses)), ("fail", 2)):
            for calls in self.run_script(script, env, state, known):
                self.assertEqual(calls, [], "%s: %s, %d nodes known" % (what, state, known))

    def test_compose(self):
        with open(os.path.join(DEPLOY, "docker-compose.etcd-cluster.yml")) as f:
            services = yaml.safe_load(f)["services"]
        members = {n: s for n, s in services.items() if "etcd" in s.get("image", "")}
        nodes = {n: s for n, s in services.items() if s.get("image", "").startswith("bloomery")}
        self.assertEqual(len(members), 3)
        self.assertEqual(len(nodes), 6)
        clusters, endpoints = set(), set()
        for name, member in members.items():
            flags = flag_values(member["command"][1:])
            self.assertEqual(flags["--name"], name)
            self.assertEqual(flags["--advertise-client-urls"], "http://%s:2379" % name)
            self.assertEqual(flags["--initial-advertise-peer-urls"], "http://%s:2380" % name)
            self.assertEqual(flags["--listen-client-urls"], "http://0.0.0.0:2379")
            self.assertEqual(flags["--data-dir"],
                             member["volumes"][0].split(":")[1])
            clusters.add(flags["--initial-cluster"])
            endpoints.add(flags["--advertise-client-urls"])
        self.assertEqual(len(clusters), 1, clusters)
        self.assertEqual(sorted(clusters.pop().split(",")),
                         sorted("%s=http://%s:2380" % (n, n) for n in members))
        announced = []
        for name, node in nodes.items():
            environment = node["environment"]
            self.assertEqual(environment["BLOOMERY_CLUSTER_ENABLED"], "yes", name)
            self.assertEqual(set(environment["BLOOMERY_CLUSTER_ETCD"].split(",")), endpoints, name)
            self.assertEqual(sorted(node["depends_on"]), sorted(members), name)
            announce = flag_values(node["command"])["--cluster-announce"]
            self.assertEqual(announce, "%s:6379" % node["hostname"], name)
            self.assertEqual(node["hostname"], name)
            announced.append(announce)
        init = services["cluster-init"]
        self.assertTrue(init["image"].startswith("redis:"))
        self.assertEqual(init["restart"], "no")
        self.assertEqual(sorted(init["depends_on"]), sorted(nodes))
        self.assertEqual(init["env_file"], nodes["bloomery1"]["env_file"])
        self.assertEqual(init["environment"]["CLUSTER_NODES"].split(), announced)
        self.assertEqual(init["entrypoint"], ["sh", "-c"])
        script = init["command"][0]
        # Compose substitutes $VAR itself: the script's own are written $$VAR.
        self.assertNotIn("$", script.replace("$$", ""))
        script = script.replace("$$", "$")
        password = "change-me-to-a-long-random-password"
        env = {"BLOOMERY_REQUIREPASS": password,
               "CLUSTER_NODES": init["environment"]["CLUSTER_NODES"]}
        self.check_script("cluster-init", script, env, announced, password)

    def test_kubernetes(self):
        documents = [d for name, d in k8s_documents() if name.startswith("etcd-cluster/")]
        by_kind = {}
        for d in documents:
            by_kind.setdefault(d["kind"], {})[d["metadata"]["name"]] = d
        services = by_kind["Service"]
        etcd = by_kind["StatefulSet"]["etcd"]
        nodes = by_kind["StatefulSet"]["bloomery-etcd"]
        job = by_kind["Job"]["bloomery-cluster-init"]
        # etcd: members etcd-N named by its headless Service, all started at once.
        headless = etcd["spec"]["serviceName"]
        self.assertTrue(services[headless]["spec"]["publishNotReadyAddresses"])
        self.assertEqual(etcd["spec"]["podManagementPolicy"], "Parallel")
        container = etcd["spec"]["template"]["spec"]["containers"][0]
        flags = flag_values(container["args"])
        self.assertEqual(flags["--name"], "$(POD_NAME)")
        self.assertEqual(container["env"][0]["valueFrom"]["fieldRef"]["fieldPath"], "metadata.name")
        self.assertEqual(flags["--initial-advertise-peer-urls"],
                         "http://$(POD_NAME).%s:2380" % headless)
        self.assertEqual(flags["--advertise-client-urls"], "http://$(POD_NAME).%s:2379" % headless)
        replicas = etcd["spec"]["replicas"]
        self.assertEqual(replicas, 3)
        self.assertEqual(flags["--initial-cluster"],
                         ",".join("etcd-%d=http://etcd-%d.%s:2380" % (n, n, headless)
                                  for n in range(replicas)))
        mounts = [m["mountPath"] for m in container["volumeMounts"]]
        self.assertTrue(any(flags["--data-dir"].startswith(m + "/") for m in mounts))
        # The nodes reach every member.
        pod = nodes["spec"]["template"]["spec"]
        node = pod["containers"][0]
        node_flags = flag_values(node["args"][2:])  # after --config FILE
        self.assertEqual(node_flags["--cluster-etcd"].split(","),
                         ["http://etcd-%d.%s:2379" % (n, headless) for n in range(replicas)])
        env = {v["name"]: v for v in node["env"]}
        self.assertEqual(env["POD_IP"]["valueFrom"]["fieldRef"]["fieldPath"], "status.podIP")
        self.assertEqual(env["BLOOMERY_CLUSTER_ANNOUNCE"]["value"], "$(POD_IP):6379")
        self.assertFalse(pod["enableServiceLinks"])
        self.assertEqual(nodes["spec"]["podManagementPolicy"], "Parallel")
        self.assertTrue(services[nodes["spec"]["serviceName"]]["spec"]["publishNotReadyAddresses"])
        # The Job forms the cluster of exactly these pods, with their password.
        spec = job["spec"]["template"]["spec"]
        self.assertIn(spec["restartPolicy"], ("OnFailure", "Never"))
        init = spec["containers"][0]
        self.assertTrue(init["image"].startswith("redis:"))
        self.assertEqual(init["command"], ["sh", "-c"])
        init_env = {v["name"]: v for v in init["env"]}
        self.assertEqual(init_env["STATEFULSET"]["value"], nodes["metadata"]["name"])
        self.assertEqual(init_env["SERVICE"]["value"], nodes["spec"]["serviceName"])
        self.assertEqual(int(init_env["NODES"]["value"]), nodes["spec"]["replicas"])
        self.assertEqual(init_env["REPLICAS_PER_PRIMARY"]["value"], "1")
        secret = init_env["REDISCLI_AUTH"]["valueFrom"]["secretKeyRef"]
        node_secrets = [v["secret"]["secretName"] for v in pod["volumes"] if "secret" in v]
        self.assertEqual([secret["name"]], node_secrets)
        self.assertEqual(secret["key"], "password")
        script = init["args"][0]
        env = {k: v["value"] for k, v in init_env.items() if "value" in v}
        env["REDISCLI_AUTH"] = "secret-password"
        # The pod IPs that getent gives (as the pods announce them).
        addresses = ["10.244.0.%d:6379" % (10 + n) for n in range(nodes["spec"]["replicas"])]
        self.check_script("bloomery-cluster-init", script, env, addresses, "secret-password")


if __name__ == "__main__":
    unittest.main()
