"""deploy/ cannot drift from the binary: every container of every compose
file and Kubernetes manifest is started as `bloomery --test-config` with the
arguments and environment it would get (the image's ENV from the Dockerfile,
the compose file's env_file and environment, the manifest's env), its mounted
files (config file, Secret, data volume) put in a temporary directory at the
paths the container would see them under. YAML is parsed with Debian's
python3-yaml. Probes, health checks and scrape annotations must point at the
ports the configuration opens (the cluster kept in etcd is checked further
in test_deploy_etcd). And the Makefile's `make run` serves as README
says, with ARGS overriding its defaults.
"""

import glob
import os
import re
import shlex
import signal
import subprocess
import tempfile
import unittest

import redis
import yaml

import harness
from harness import BINARY, ROOT

DEPLOY = os.path.join(ROOT, "deploy")
# The directories of Kubernetes manifests checked here (k8s/sentinel/ holds
# Redis Sentinel's, checked in SentinelDeployments).
K8S_DIRS = [os.path.join(DEPLOY, "k8s"), os.path.join(DEPLOY, "k8s", "etcd-cluster")]


def k8s_documents():
    """(file name, document) of every manifest in K8S_DIRS."""
    documents = []
    for directory in K8S_DIRS:
        for path in sorted(glob.glob(os.path.join(directory, "*.yaml"))):
            name = os.path.relpath(path, os.path.join(DEPLOY, "k8s"))
            with open(path) as f:
                documents += [(name, d) for d in yaml.safe_load_all(f) if d]
    return documents


def expand_k8s(text, env):
    """$(VAR) as the kubelet expands it in env values, command and args:
    only variables defined before; $$ stands for a literal $."""
    def one(match):
        if match.group(0) == "$$":
            return "$"
        return env.get(match.group(1), match.group(0))
    return re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)", one, text)


def fake_field(field, pod_name, replica):
    """What the downward API gives a pod for fieldRef.fieldPath."""
    return {"metadata.name": pod_name, "metadata.namespace": "default",
            "status.podIP": "10.244.0.%d" % (10 + replica)}[field]


def image_environment():
    """The ENV of the Dockerfile's last stage, and its ENTRYPOINT."""
    with open(os.path.join(ROOT, "Dockerfile")) as f:
        text = f.read().replace("\\\n", " ")
    stages = re.split(r"(?m)^FROM ", text)
    env, entrypoint = {}, None
    for line in stages[-1].splitlines():
        line = line.strip()
        if line.startswith("ENV "):
            for word in shlex.split(line[4:]):
                key, _, value = word.partition("=")
                env[key] = value
        elif line.startswith("ENTRYPOINT "):
            entrypoint = yaml.safe_load(line[len("ENTRYPOINT "):])
    return env, entrypoint


class Mounts:
    """Container paths -> files in a temporary directory."""

    def __init__(self, root):
        self.root = root
        self.paths = {}  # container path -> local path

    def add_dir(self, container_path):
        local = os.path.join(self.root, "mnt" + container_path)
        os.makedirs(local, exist_ok=True)
        self.paths[container_path] = local

    def add_file(self, container_path, content):
        local = os.path.join(self.root, "mnt" + container_path)
        os.makedirs(os.path.dirname(local), exist_ok=True)
        with open(local, "w") as f:
            f.write(self.map_text(content))
        self.paths[container_path] = local

    def map_text(self, text):
        """Replaces container paths (longest first) by their local copies."""
        for container_path in sorted(self.paths, key=len, reverse=True):
            text = re.sub(re.escape(container_path) + r"(?=$|[/\"' ,:])",
                          self.paths[container_path], text)
        return text


def test_config(test, what, args, env, hostname):
    environment = {k: v for k, v in os.environ.items() if not k.startswith("BLOOMERY_")}
    environment.update(env)
    environment["HOSTNAME"] = hostname
    result = subprocess.run([BINARY, "--test-config"] + args, env=environment,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
    output = result.stdout.decode("utf-8", "replace")
    test.assertEqual(result.returncode, 0, "%s: bloomery --test-config %s\n%s" % (what, args, output))
    test.assertIn("configuration OK", output, what)
    return output


def configured_port(output, name):
    """The port --test-config reports for 'listen' (RESP) or 'metrics'."""
    for line in output.splitlines():
        line = line.strip()
        if name == "listen" and line.startswith("listen:"):
            return int(re.search(r"port (\d+)", line).group(1))
        if name == "metrics" and line.startswith("metrics:"):
            found = re.search(r":(\d+)/metrics", line)
            return int(found.group(1)) if found else None
    return None


class ComposeFiles(unittest.TestCase):
    def test_every_service_of_every_compose_file_passes_test_config(self):
        image_env, entrypoint = image_environment()
        self.assertEqual(entrypoint, ["/usr/local/bin/bloomery"])
        files = sorted(glob.glob(os.path.join(DEPLOY, "docker-compose*.yml")))
        self.assertGreaterEqual(len(files), 3)
        services_seen = 0
        for path in files:
            with open(path) as f:
                compose = yaml.safe_load(f)
            for name, service in compose["services"].items():
                what = "%s: service %s" % (os.path.basename(path), name)
                if not service.get("image", "").startswith("bloomery"):
                    continue  # Redis Sentinel: checked in SentinelDeployments
                with tempfile.TemporaryDirectory() as root:
                    mounts = Mounts(root)
                    for volume in service.get("volumes", []):
                        source, target = volume.split(":")[:2]
                        if source.startswith("."):
                            with open(os.path.join(DEPLOY, source)) as f:
                                content = f.read()
                            mounts.add_dir("/data")  # the image's data dir, in files too
                            mounts.add_file(target, content)
                        else:
                            mounts.add_dir(target)
                    env = {k: mounts.map_text(v) for k, v in image_env.items()}
                    for env_file in service.get("env_file", []):
                        # The real file is the operator's; its example is committed.
                        with open(os.path.join(DEPLOY, env_file + ".example")) as f:
                            for line in f:
                                line = line.strip()
                                if line and not line.startswith("#"):
                                    key, _, value = line.partition("=")
                                    env[key] = value
                    for key, value in (service.get("environment") or {}).items():
                        env[key] = mounts.map_text(str(value))
                    args = [mounts.map_text(str(a)) for a in service.get("command", [])]
                    output = test_config(self, what, args, env, hostname=name)
                    if "--replicaof" in args:
                        self.assertIn("replication: replica of", output, what)
                    if "--cluster-announce" in args:
                        announce = args[args.index("--cluster-announce") + 1]
                        self.assertIn("cluster: this node is %s, of cluster" % announce, output,
                                      what)
                    # The health check PINGs the port the server listens on.
                    check = service["healthcheck"]["test"]
                    self.assertEqual(check[:3], ["CMD", "/usr/local/bin/bloomery", "--health-check"],
                                     what)
                    self.assertEqual(int(check[3].rsplit(":", 1)[1]),
                                     configured_port(output, "listen"), what)
                    published = [str(p).split(":")[1] for p in service.get("ports", [])]
                    for port in published:
                        self.assertIn(int(port), [configured_port(output, "listen"),
                                                  configured_port(output, "metrics")], what)
                    services_seen += 1
        self.assertGreaterEqual(services_seen, 13)


def sentinel_monitor(text):
    """(host, port, quorum) of the one 'sentinel monitor bloom ...' line."""
    lines = [l.split() for l in text.splitlines() if l.strip().startswith("sentinel monitor")]
    assert len(lines) == 1, text
    _, _, name, host, port, quorum = lines[0]
    assert name == "bloom", text
    return host, int(port), int(quorum)


class SentinelDeployments(unittest.TestCase):
    """The Sentinel deployments watch a bloomery primary that exists, with a
    quorum a majority of their sentinels reaches, and authenticate with the
    password the bloomery nodes require."""

    def test_compose(self):
        with open(os.path.join(DEPLOY, "docker-compose.sentinel.yml")) as f:
            compose = yaml.safe_load(f)
        services = compose["services"]
        sentinels = {n: s for n, s in services.items() if s["image"].startswith("redis")}
        nodes = {n: s for n, s in services.items() if s["image"].startswith("bloomery")}
        self.assertEqual(len(sentinels), 3)
        with open(os.path.join(DEPLOY, "sentinel.conf")) as f:
            host, port, quorum = sentinel_monitor(f.read())
        self.assertIn(host, nodes)
        self.assertNotIn("--replicaof", nodes[host]["command"])
        self.assertEqual(port, 6379)
        self.assertEqual(quorum, 2)
        replicas = [n for n, s in nodes.items() if "--replicaof" in s["command"]]
        self.assertEqual(len(replicas), 2)
        for name in replicas:
            command = nodes[name]["command"]
            at = command.index("--replicaof")
            self.assertEqual(command[at + 1:at + 3], [host, "6379"])
        for name, sentinel in sentinels.items():
            script = " ".join(sentinel["command"])
            self.assertIn("sentinel auth-pass bloom $$BLOOMERY_REQUIREPASS", script, name)
            self.assertIn("redis-sentinel /data/sentinel.conf", script, name)
            self.assertEqual(sentinel["env_file"], nodes[host]["env_file"], name)
            self.assertTrue(any(v.endswith(":/etc/bloomery/sentinel.conf:ro")
                                for v in sentinel["volumes"]), name)

    def test_kubernetes(self):
        with open(os.path.join(DEPLOY, "k8s", "sentinel", "sentinel.yaml")) as f:
            documents = [d for d in yaml.safe_load_all(f) if d]
        with open(os.path.join(DEPLOY, "k8s", "bloomery.yaml")) as f:
            bloomery = [d for d in yaml.safe_load_all(f) if d]
        config = [d for d in documents if d["kind"] == "ConfigMap"][0]["data"]["sentinel.conf"]
        host, port, quorum = sentinel_monitor(config)
        nodes = [d for d in bloomery if d["kind"] == "StatefulSet"][0]
        headless = nodes["spec"]["serviceName"]
        self.assertEqual(host, "%s-0.%s" % (nodes["metadata"]["name"], headless))
        self.assertEqual(port, 6379)
        sentinels = [d for d in documents if d["kind"] == "StatefulSet"][0]
        self.assertEqual(sentinels["spec"]["replicas"], 3)
        self.assertEqual(quorum, 2)
        spec = sentinels["spec"]["template"]["spec"]
        secrets = [v["secret"]["secretName"] for v in spec["volumes"] if "secret" in v]
        node_secrets = [v["secret"]["secretName"]
                        for v in nodes["spec"]["template"]["spec"]["volumes"] if "secret" in v]
        self.assertEqual(secrets, node_secrets)
        self.assertIn("sentinel auth-pass bloom", " ".join(spec["containers"][0]["args"]))


class KubernetesManifests(unittest.TestCase):
    def test_every_container_of_every_manifest_passes_test_config(self):
        image_env, _ = image_environment()
        documents = k8s_documents()
        config_maps = {d["metadata"]["name"]: d["data"] for _, d in documents
                       if d["kind"] == "ConfigMap"}
        secrets = {d["metadata"]["name"]: d.get("stringData", {}) for _, d in documents
                   if d["kind"] == "Secret"}
        self.assertIn("bloomery-auth", secrets)
        sets = [(f, d) for f, d in documents if d["kind"] == "StatefulSet"]
        self.assertGreaterEqual(len(sets), 4)
        for path, stateful_set in sets:
            spec = stateful_set["spec"]
            pod = spec["template"]["spec"]
            self.assertTrue(pod["securityContext"]["runAsNonRoot"], path)
            self.assertGreater(pod["terminationGracePeriodSeconds"], 30, path)
            volumes = {v["name"]: v for v in pod.get("volumes", [])}
            claims = {c["metadata"]["name"] for c in spec.get("volumeClaimTemplates", [])}
            annotations = spec["template"]["metadata"].get("annotations", {})
            for replica in range(spec["replicas"]):
                pod_name = "%s-%d" % (stateful_set["metadata"]["name"], replica)
                for container in pod["containers"]:
                    what = "%s: %s, container %s" % (path, pod_name, container["name"])
                    self.assertTrue(container["securityContext"]["readOnlyRootFilesystem"], what)
                    self.assertIn("memory", container["resources"]["limits"], what)
                    if not container["image"].startswith("bloomery"):
                        continue  # etcd: checked in test_deploy_etcd
                    with tempfile.TemporaryDirectory() as root:
                        mounts = Mounts(root)
                        mounts.add_dir("/data")
                        files = []
                        for mount in container.get("volumeMounts", []):
                            target = mount["mountPath"]
                            if mount["name"] in claims:
                                mounts.add_dir(target)
                                continue
                            volume = volumes[mount["name"]]
                            if "configMap" in volume:
                                data = config_maps[volume["configMap"]["name"]]
                                if "subPath" in mount:
                                    files.append((target, data[mount["subPath"]]))
                                else:
                                    for key, content in data.items():
                                        files.append((target + "/" + key, content))
                            elif "secret" in volume:
                                data = secrets[volume["secret"]["secretName"]]
                                for key, content in data.items():
                                    files.append((target + "/" + key, content))
                            else:
                                self.fail("%s: unknown volume %s" % (what, mount["name"]))
                        for target, content in files:
                            mounts.add_file(target, content)
                        env = {k: mounts.map_text(v) for k, v in image_env.items()}
                        defined = {}  # what $(VAR) may name: the container's own env
                        for variable in container.get("env", []):
                            if "value" in variable:
                                value = expand_k8s(str(variable["value"]), defined)
                            else:
                                value = fake_field(variable["valueFrom"]["fieldRef"]["fieldPath"],
                                                   pod_name, replica)
                            defined[variable["name"]] = value
                            env[variable["name"]] = mounts.map_text(value)
                        args = [mounts.map_text(expand_k8s(str(a), defined))
                                for a in container.get("args", [])]
                        output = test_config(self, what, args, env, hostname=pod_name)
                        ports = {p["name"]: p["containerPort"] for p in container["ports"]}
                        self.assertEqual(ports["redis"], configured_port(output, "listen"), what)
                        self.assertEqual(ports["metrics"], configured_port(output, "metrics"), what)
                        self.assertEqual(container["livenessProbe"]["httpGet"]["port"], "metrics",
                                         what)
                        readiness = container["readinessProbe"]
                        if "exec" in readiness:
                            # bloomery PINGs the port the server listens on.
                            check = readiness["exec"]["command"]
                            self.assertEqual(check[:2], ["/usr/local/bin/bloomery",
                                                         "--health-check"], what)
                            self.assertEqual(int(check[2].rsplit(":", 1)[1]), ports["redis"], what)
                        else:
                            self.assertEqual(readiness["httpGet"]["port"], "metrics", what)
                            self.assertEqual(readiness["httpGet"]["path"], "/readyz", what)
                        self.assertEqual(container["livenessProbe"]["httpGet"]["path"], "/healthz")
                        self.assertEqual(int(annotations["prometheus.io/port"]), ports["metrics"],
                                         what)
                        if "--replicaof" in args:
                            # Every pod gets the same --replicaof: pod 0, which it
                            # names, serves as the primary, the others follow it.
                            if replica == 0:
                                self.assertIn("replication: primary (--replicaof", output, what)
                            else:
                                self.assertIn("replication: replica of %s-0." %
                                              stateful_set["metadata"]["name"], output, what)
                        if "--cluster-self" in args:
                            self.assertIn("this node is %s." % pod_name, output, what)
                        if "BLOOMERY_CLUSTER_ANNOUNCE" in env:
                            self.assertIn("this node is %s, of cluster"
                                          % env["BLOOMERY_CLUSTER_ANNOUNCE"], output, what)

    def test_services_select_the_pods_and_ports_they_name(self):
        documents = [d for _, d in k8s_documents()]
        sets = [d for d in documents if d["kind"] == "StatefulSet"]
        for service in (d for d in documents if d["kind"] == "Service"):
            name = service["metadata"]["name"]
            selector = dict(service["spec"]["selector"])
            selector.pop("statefulset.kubernetes.io/pod-name", None)
            selected = [s for s in sets
                        if all(s["spec"]["template"]["metadata"]["labels"].get(k) == v
                               for k, v in selector.items())]
            self.assertTrue(selected, name)
            # Every port it names is one the selected pods open.
            for stateful_set in selected:
                opened = {p["containerPort"]: p.get("name")
                          for c in stateful_set["spec"]["template"]["spec"]["containers"]
                          for p in c.get("ports", [])}
                for port in service["spec"]["ports"]:
                    target = port.get("targetPort", port["port"])
                    self.assertTrue(target in opened or target in opened.values(),
                                    "%s: port %s" % (name, target))
            # A StatefulSet's serviceName is a headless Service selecting it.
        for stateful_set in sets:
            headless = [d for d in documents if d["kind"] == "Service"
                        and d["metadata"]["name"] == stateful_set["spec"]["serviceName"]]
            self.assertEqual(len(headless), 1, stateful_set["metadata"]["name"])
            self.assertEqual(headless[0]["spec"].get("clusterIP"), "None",
                             stateful_set["metadata"]["name"])


class MakeRun(unittest.TestCase):
    """README's first command, `make run`, serves on 127.0.0.1:6379 with data
    in ./data, and ARGS overrides those defaults (make run ARGS="--port
    6380" was refused: "--port given twice"). The Makefile's `serve` target
    is what `make run` runs once built; it is run here as it is, on the
    binary under test, in a scratch directory."""

    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="bloomery-make-run-")
        self.addCleanup(self._tmp.cleanup)
        self.cwd = self._tmp.name

    def serve(self, args, **kwargs):
        environment = {k: v for k, v in os.environ.items() if not k.startswith("BLOOMERY_")}
        return subprocess.Popen(
            ["make", "--no-print-directory", "-f", os.path.join(ROOT, "Makefile"), "serve",
             "BUILD_DIR=" + os.path.dirname(os.path.abspath(BINARY)), "ARGS=" + args],
            cwd=self.cwd, env=environment, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            start_new_session=True, **kwargs)

    def test_the_defaults_are_the_readmes(self):
        process = self.serve("--test-config")
        output = process.communicate(timeout=60)[0].decode("utf-8", "replace")
        self.assertEqual(process.returncode, 0, output)
        self.assertIn("listen: 127.0.0.1 port 6379,", output)
        self.assertIn("data: ./data (to be created)", output)

    def test_args_override_the_defaults(self):
        port = harness.free_port()
        process = self.serve("--port %d --save \"\"" % port)
        self.addCleanup(self.stop, process)
        client = redis.Redis(host="127.0.0.1", port=port, socket_timeout=10)
        harness.wait_until(lambda: self.answers(client, process), timeout=30,
                           what="make serve ARGS='--port %d' answering" % port)
        self.assertEqual(client.config_get("port"), {"port": str(port)})
        self.assertEqual(client.config_get("bind"), {"bind": "127.0.0.1"})
        self.assertEqual(client.config_get("dir"), {"dir": "./data"})
        self.assertTrue(os.path.isdir(os.path.join(self.cwd, "data")))
        # Every default is overridden alike.
        other = os.path.join(self.cwd, "other")
        second = self.serve("--test-config --port %d --bind ::1 --dir %s" % (port, other))
        output = second.communicate(timeout=60)[0].decode("utf-8", "replace")
        self.assertEqual(second.returncode, 0, output)
        self.assertIn("listen: ::1 port %d," % port, output)
        self.assertIn("data: %s (to be created)" % other, output)

    def answers(self, client, process):
        if process.poll() is not None:
            raise AssertionError("make serve exited: " + process.stdout.read().decode())
        try:
            return client.ping()
        except redis.exceptions.ConnectionError:
            return False

    @staticmethod
    def stop(process):
        # make, its shell and the server are one process group.
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)
        process.stdout.close()


if __name__ == "__main__":
    unittest.main()
