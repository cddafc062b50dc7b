"""Real etcd members on 127.0.0.1 for the cluster's integration tests:
Debian's /usr/bin/etcd (`make test` installs etcd-server), each member on
free ports with its data in a temporary directory, waited for by polling its
/health, stopped by pid. Short heartbeats keep elections (and etcd's
minimum lease) short."""

import json
import os
import shutil
import signal
import subprocess
import tempfile
import urllib.request

from harness import free_port, wait_until

ETCD = shutil.which("etcd") or "/usr/bin/etcd"


class EtcdCluster:
    def __init__(self, members=3):
        self.directory = tempfile.mkdtemp(prefix="bloomery-etcd-")
        self.members = [{"name": "m%d" % i, "client": free_port(), "peer": free_port(),
                         "process": None} for i in range(members)]

    @property
    def endpoints(self):
        return ",".join("http://127.0.0.1:%d" % m["client"] for m in self.members)

    def _args(self, member):
        client = "http://127.0.0.1:%d" % member["client"]
        peer = "http://127.0.0.1:%d" % member["peer"]
        initial = ",".join("%s=http://127.0.0.1:%d" % (m["name"], m["peer"])
                           for m in self.members)
        return [ETCD, "--name", member["name"],
                "--data-dir", os.path.join(self.directory, member["name"]),
                "--listen-client-urls", client, "--advertise-client-urls", client,
                "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                "--initial-cluster", initial, "--initial-cluster-state", "new",
                "--initial-cluster-token", os.path.basename(self.directory),
                "--heartbeat-interval", "50", "--election-timeout", "500",
                "--log-level", "warn"]

    def start_member(self, index):
        member = self.members[index]
        if member["process"] is not None and member["process"].poll() is None:
            return
        log = open(os.path.join(self.directory, member["name"] + ".log"), "ab")
        member["process"] = subprocess.Popen(self._args(member), stdout=log,
                                             stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        log.close()

    def healthy(self, index):
        url = "http://127.0.0.1:%d/health" % self.members[index]["client"]
        try:
            with urllib.request.urlopen(url, timeout=2) as answer:
                return json.loads(answer.read()).get("health") == "true"
        except (OSError, ValueError):
            return False

    def leader_index(self):
        """The index of the member that leads now (asked of each member
        until one answers), or None."""
        for member in self.members:
            url = "http://127.0.0.1:%d/v3/maintenance/status" % member["client"]
            try:
                request = urllib.request.Request(url, data=b"{}", method="POST")
                with urllib.request.urlopen(request, timeout=2) as answer:
                    status = json.loads(answer.read())
            except (OSError, ValueError):
                continue
            leader = status.get("leader")
            for index, other in enumerate(self.members):
                other_url = "http://127.0.0.1:%d/v3/maintenance/status" % other["client"]
                try:
                    request = urllib.request.Request(other_url, data=b"{}", method="POST")
                    with urllib.request.urlopen(request, timeout=2) as answer:
                        if json.loads(answer.read())["header"]["member_id"] == leader:
                            return index
                except (OSError, ValueError, KeyError):
                    continue
        return None

    def start(self):
        for index in range(len(self.members)):
            self.start_member(index)
        for index in range(len(self.members)):
            wait_until(lambda i=index: self.healthy(i), timeout=60,
                       what="etcd member %d to be healthy" % index, interval=0.1)
        return self

    def stop_member(self, index, sig=signal.SIGKILL):
        process = self.members[index]["process"]
        if process is not None and process.poll() is None:
            process.send_signal(sig)
            process.wait(timeout=30)

    def pause_member(self, index):
        self.members[index]["process"].send_signal(signal.SIGSTOP)

    def resume_member(self, index):
        self.members[index]["process"].send_signal(signal.SIGCONT)

    def stop(self):
        for index, member in enumerate(self.members):
            if member["process"] is not None and member["process"].poll() is None:
                member["process"].send_signal(signal.SIGCONT)
                self.stop_member(index)
        shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
