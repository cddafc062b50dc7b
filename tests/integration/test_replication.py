"""Replication (README "Replication", proto/replication.md): a primary and
replicas on loopback, driven by redis-py.

BLOOMERY_REPLICATION_ITEMS sets how many items the big test adds (default
1,000,000; 200,000 under sanitizers, whose builds are several times slower).
"""

import os
import signal
import socket
import threading
import time
import unittest

import redis

from harness import BINARY, Server, free_port, scandump, wait_until
from test_hostile_memory import sanitizer_memory_factor

SANITIZED = "/asan/" in BINARY or "/tsan/" in BINARY
ITEMS = int(os.environ.get("BLOOMERY_REPLICATION_ITEMS", "200000" if SANITIZED else "1000000"))
BATCH = 1000


def info(client, section="replication"):
    return client.info(section)


def replica_of(primary, *extra, **kwargs):
    return Server("--replicaof", "127.0.0.1 %d" % primary.port, *extra, **kwargs)


def link_up(server):
    return info(server.client())["master_link_status"] == "up"


def add_range(client, key, first, last):
    """BF.MADD of the items first..last-1 (decimal strings), pipelined."""
    pipe = client.pipeline(transaction=False)
    for start in range(first, last, BATCH):
        pipe.execute_command("BF.MADD", key, *range(start, min(start + BATCH, last)))
        if len(pipe) == 50:
            pipe.execute()
    pipe.execute()


def missing(client, key, first, last):
    """How many of first..last-1 answer 0 (a false negative)."""
    count = 0
    pipe = client.pipeline(transaction=False)
    for start in range(first, last, BATCH):
        pipe.execute_command("BF.MEXISTS", key, *range(start, min(start + BATCH, last)))
    for reply in pipe.execute():
        count += sum(1 for found in reply if not found)
    return count


def same_filters(test, primary, replica, keys):
    p, r = primary.client(), replica.client()
    for key in keys:
        test.assertEqual(p.execute_command("BF.INFO", key), r.execute_command("BF.INFO", key), key)
        test.assertEqual(scandump(p, key), scandump(r, key), key)


def read_command(buffer):
    """(words, rest) of the first whole RESP array of bulk strings in
    `buffer`, or (None, buffer) while it is incomplete."""
    end = buffer.find(b"\r\n")
    if end < 0:
        return None, buffer
    count, position, words = int(buffer[1:end]), end + 2, []
    for _ in range(count):
        end = buffer.find(b"\r\n", position)
        if end < 0:
            return None, buffer
        start = end + 2
        length = int(buffer[position + 1:end])
        if len(buffer) < start + length + 2:
            return None, buffer
        words.append(buffer[start:start + length])
        position = start + length + 2
    return words, buffer[position:]


class FakePrimary:
    """A primary on 127.0.0.1 that answers REPLCONF with +OK and PSYNC with
    `answer` (bytes), then holds the connection until the replica closes it.
    Counts the connections made to it (a replica that failed reconnects)."""

    def __init__(self, answer):
        self.answer = answer
        self.connections = 0
        self.psyncs = []
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(8)
        self.port = self.listener.getsockname()[1]
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        self.listener.settimeout(0.1)
        while not self.stopped.is_set():
            try:
                connection, _ = self.listener.accept()
            except OSError:
                continue
            self.connections += 1
            threading.Thread(target=self._talk, args=(connection,), daemon=True).start()

    def _talk(self, connection):
        connection.settimeout(0.1)
        received = b""
        with connection:
            while not self.stopped.is_set():
                try:
                    data = connection.recv(65536)
                except socket.timeout:
                    continue
                except OSError:
                    return
                if not data:
                    return
                received += data
                while True:
                    words, received = read_command(received)
                    if words is None:
                        break
                    if words[0].upper() == b"PSYNC":
                        self.psyncs.append(words[1:])
                        connection.sendall(self.answer)
                    elif words[0].upper() == b"REPLCONF" and words[1].upper() != b"ACK":
                        connection.sendall(b"+OK\r\n")

    def close(self):
        self.stopped.set()
        self.thread.join(5)
        self.listener.close()


def raw_replica(port, first=b"PSYNC ? -1\r\n"):
    """A replica by hand: sends `first` (PSYNC), reads +FULLRESYNC and the
    snapshot. Returns (socket, offset where the stream starts, the stream's
    bytes received so far)."""
    feed = socket.create_connection(("127.0.0.1", port), timeout=10)
    feed.sendall(first)
    received = b""
    while received.count(b"\r\n") < 2:
        received += feed.recv(65536)
    line, header, rest = received.split(b"\r\n", 2)
    assert line.startswith(b"+FULLRESYNC "), line
    mark = header[len(b"$EOF:"):]
    while mark not in rest:
        rest += feed.recv(65536)
    return feed, int(line.split()[2]), rest[rest.index(mark) + len(mark):]


def receive_for(feed, seconds):
    """What arrives on `feed` within `seconds` (less if it closes)."""
    feed.settimeout(0.05)
    data = b""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            chunk = feed.recv(65536)
        except socket.timeout:
            continue
        if not chunk:
            break
        data += chunk
    return data


class ReplicationTest(unittest.TestCase):
    def setUp(self):
        self.servers = []

    def tearDown(self):
        for server in self.servers:
            server.cleanup()

    def start(self, server):
        self.servers.append(server)
        return server.start()

    def primary_and_replica(self, *primary_args):
        """A primary and one replica whose link is up."""
        primary = self.start(Server(*primary_args))
        replica = self.start(replica_of(primary))
        wait_until(lambda: link_up(replica), what="the replica's link")
        return primary, replica

    def test_two_replicas_hold_every_add_of_a_million(self):
        primary = self.start(Server("--appendfsync", "everysec"))
        p = primary.client()
        # Before the replicas: reaches them in the full synchronization.
        p.execute_command("BF.RESERVE", "urls", 0.001, ITEMS, "NONSCALING")
        add_range(p, "urls", 0, ITEMS // 2)
        p.execute_command("BF.ADD", "gone", "x")
        p.execute_command("BF.ADD", "old-name", "y")
        replicas = [self.start(replica_of(primary)) for _ in range(2)]
        for replica in replicas:
            wait_until(lambda: link_up(replica), what="the replica's link")
        # After: streamed. Keyspace changes too.
        add_range(p, "urls", ITEMS // 2, ITEMS)
        p.delete("gone")
        p.rename("old-name", "new-name")
        p.execute_command("BF.INSERT", "scaling", "CAPACITY", 100, "ITEMS", *range(1000))
        p.expire("new-name", 3600)
        self.assertEqual(p.execute_command("WAIT", 2, 30000), 2)
        for replica in replicas:
            r = replica.client()
            self.assertEqual(missing(r, "urls", 0, ITEMS), 0)
            self.assertEqual(r.exists("gone"), 0)
            self.assertEqual(r.exists("old-name"), 0)
            self.assertEqual(r.execute_command("BF.EXISTS", "new-name", "y"), 1)
            self.assertGreater(r.ttl("new-name"), 3000)
            same_filters(self, primary, replica, ["urls", "new-name", "scaling"])
        state = info(p)
        self.assertEqual(state["connected_slaves"], 2)
        for i in range(2):
            line = state["slave%d" % i]
            self.assertEqual(line["state"], "online")
            self.assertIn(line["port"], [replicas[0].port, replicas[1].port])
            self.assertEqual(line["offset"], state["master_repl_offset"])

    def test_replica_refuses_writes_and_reports_its_link(self):
        primary, replica = self.primary_and_replica()
        r = replica.client()
        with self.assertRaises(redis.ResponseError) as refused:
            r.execute_command("BF.ADD", "k", "v")
        self.assertEqual(str(refused.exception),
                         "You can't write against a read only replica.")
        with self.assertRaises(redis.ResponseError) as wait_refused:
            r.execute_command("WAIT", 1, 10)
        self.assertIn("WAIT cannot be used with replica instances", str(wait_refused.exception))
        state = info(r)
        self.assertEqual(state["role"], "slave")
        self.assertEqual(state["master_host"], "127.0.0.1")
        self.assertEqual(state["master_port"], primary.port)
        self.assertEqual(state["master_sync_in_progress"], 0)
        self.assertEqual(r.config_get("replicaof")["replicaof"], "127.0.0.1 %d" % primary.port)
        self.assertEqual(primary.client().config_get("replicaof")["replicaof"], "")
        role = r.execute_command("ROLE")
        self.assertEqual(role[0], b"slave")
        self.assertEqual(role[3], b"connected")
        p = primary.client()
        p_role = p.execute_command("ROLE")
        self.assertEqual(p_role[0], b"master")
        self.assertEqual(p_role[2][0][1], str(replica.port).encode())
        clients = p.execute_command("CLIENT", "LIST").decode()
        self.assertIn("flags=S", clients)
        # WAIT with a timeout returns the count when too few acknowledge.
        p.execute_command("BF.ADD", "k", "v")
        started = time.monotonic()
        self.assertEqual(p.execute_command("WAIT", 2, 300), 1)
        self.assertGreaterEqual(time.monotonic() - started, 0.25)
        self.assertEqual(p.execute_command("WAIT", 0, 0), 1)
        with self.assertRaises(redis.ResponseError):
            p.execute_command("WAIT", 1, -1)

    def test_a_primary_without_journal_refuses_replicas(self):
        primary = self.start(Server("--appendonly", "no"))
        with self.assertRaises(redis.ResponseError) as refused:
            primary.client().execute_command("PSYNC", "?", -1)
        self.assertIn("--appendonly no", str(refused.exception))
        self.assertEqual(primary.client().execute_command("WAIT", 1, 50), 0)

    def test_replica_killed_and_restarted_catches_up(self):
        primary, replica = self.primary_and_replica()
        p = primary.client()
        add_range(p, "k", 0, 20000)
        self.assertEqual(p.execute_command("WAIT", 1, 10000), 1)
        replica.kill()
        add_range(p, "k", 20000, 40000)  # while it is down
        replica.start()
        wait_until(lambda: link_up(replica), what="the restarted replica's link")
        add_range(p, "k", 40000, 60000)
        self.assertEqual(p.execute_command("WAIT", 1, 10000), 1)
        self.assertEqual(missing(replica.client(), "k", 0, 60000), 0)
        same_filters(self, primary, replica, ["k"])

    def test_a_cut_link_resumes_from_its_offset(self):
        primary, replica = self.primary_and_replica()
        p = primary.client()
        add_range(p, "k", 0, 10000)
        self.assertEqual(p.execute_command("WAIT", 1, 10000), 1)
        # Redis keeps the sync counters in INFO stats.
        before = p.info("stats")
        self.assertEqual(before["sync_full"], 1)
        # Cut the link from the primary's side; the replica reconnects.
        for line in p.execute_command("CLIENT", "LIST").decode().splitlines():
            if "flags=S" in line:
                address = [f for f in line.split() if f.startswith("addr=")][0][5:]
                p.execute_command("CLIENT", "KILL", address)
        add_range(p, "k", 10000, 20000)
        wait_until(lambda: info(p)["connected_slaves"] == 1 and link_up(replica),
                   what="the link to come back")
        self.assertEqual(p.execute_command("WAIT", 1, 10000), 1)
        after = p.info("stats")
        self.assertEqual(after["sync_full"], 1, "a cut link must not need a full copy")
        self.assertEqual(after["sync_partial_ok"], before["sync_partial_ok"] + 1)
        self.assertEqual(missing(replica.client(), "k", 0, 20000), 0)
        same_filters(self, primary, replica, ["k"])

    def test_promoted_replica_holds_every_add_wait_acknowledged(self):
        primary, replica = self.primary_and_replica("--appendfsync", "always")
        p = primary.client()
        acknowledged = 0
        for start in range(0, 30000, 500):
            p.execute_command("BF.MADD", "k", *range(start, start + 500))
            if p.execute_command("WAIT", 1, 5000) >= 1:
                acknowledged = start + 500
        self.assertEqual(acknowledged, 30000)
        primary.kill()
        r = replica.client()
        self.assertEqual(r.execute_command("REPLICAOF", "NO", "ONE"), b"OK")
        self.assertEqual(info(r)["role"], "master")
        self.assertEqual(missing(r, "k", 0, acknowledged), 0)
        # It takes writes now, journaled: they survive its own crash.
        r.execute_command("BF.ADD", "after", "promotion")
        # everysec wrote it before the reply: a kill right after keeps it.
        replica.kill()
        replica.extra_args = []  # restarted as the primary it now is
        replica.start()
        r = replica.client()
        self.assertEqual(info(r)["role"], "master")
        self.assertEqual(missing(r, "k", 0, acknowledged), 0)
        self.assertEqual(r.execute_command("BF.EXISTS", "after", "promotion"), 1)

    def test_replicaof_at_run_time_replaces_the_data_and_no_one_keeps_it(self):
        primary = self.start(Server())
        other = self.start(Server())
        primary.client().execute_command("BF.ADD", "from-primary", "x")
        o = other.client()
        o.execute_command("BF.ADD", "only-here", "y")
        self.assertEqual(o.execute_command("REPLICAOF", "127.0.0.1", primary.port), b"OK")
        wait_until(lambda: link_up(other), what="the new replica's link")
        self.assertEqual(o.exists("only-here"), 0)
        self.assertEqual(o.execute_command("BF.EXISTS", "from-primary", "x"), 1)
        self.assertEqual(o.execute_command("REPLICAOF", "NO", "ONE"), b"OK")
        o.execute_command("BF.ADD", "mine-again", "z")
        self.assertEqual(o.execute_command("BF.EXISTS", "from-primary", "x"), 1)
        with self.assertRaises(redis.ResponseError):
            o.execute_command("REPLICAOF", "127.0.0.1", "notaport")

    def test_sync_files_of_a_killed_replica_are_removed(self):
        replid = b"0123456789abcdef0123456789abcdef01234567"
        mark = b"fedcba9876543210fedcba9876543210fedcba98"
        # A primary that sends 1 MB of a snapshot and then nothing more.
        stalled = FakePrimary(b"+FULLRESYNC " + replid + b" 0\r\n$EOF:" + mark + b"\r\n" +
                              b"\x00" * (1 << 20))
        self.addCleanup(stalled.close)
        replica = self.start(Server("--replicaof", "127.0.0.1 %d" % stalled.port))
        directory = replica.data_dir

        def sync_files():
            return sorted(f for f in os.listdir(directory) if f.startswith("replica-sync-"))

        def receiving():
            path = os.path.join(directory, "replica-sync-%d.tmp" % replica.process.pid)
            return os.path.exists(path) and os.path.getsize(path) >= (1 << 20) - 40

        wait_until(receiving, what="the snapshot to be received into a file")
        replica.kill()
        left = sync_files()
        self.assertEqual(len(left), 1)
        # Files of other (dead) runs too; other files stay.
        for name in ("replica-sync-999999.tmp", "replica-sync-1.tmp", "replica-sync-notes.txt",
                     "other.tmp"):
            with open(os.path.join(directory, name), "wb") as f:
                f.write(b"x" * 1000)
        # Restarted (a primary now): every stale sync file goes at start.
        replica.extra_args = []
        replica.start()
        self.assertEqual(sync_files(), ["replica-sync-notes.txt"])
        self.assertTrue(os.path.exists(os.path.join(directory, "other.tmp")))
        # And before each full synchronization.
        with open(os.path.join(directory, "replica-sync-424242.tmp"), "wb") as f:
            f.write(b"x" * 1000)
        replica.client().execute_command("REPLICAOF", "127.0.0.1", stalled.port)
        wait_until(receiving, what="the second snapshot to be received into a file")
        self.assertEqual(sync_files(), ["replica-sync-%d.tmp" % replica.process.pid,
                                        "replica-sync-notes.txt"])
        # A cut link takes its own file with it.
        replica.client().execute_command("REPLICAOF", "NO", "ONE")
        wait_until(lambda: sync_files() == ["replica-sync-notes.txt"],
                   what="the unfinished file to be removed")

    def test_replicaof_is_refused_in_cluster_mode(self):
        # The slot map says who replicates whom; REPLICAOF at run time would
        # drop the slots this node serves.
        port = free_port()
        node = self.start(Server("--cluster-enabled", "yes", "--cluster-slots",
                                 "0-16383=127.0.0.1:%d" % port, "--cluster-self",
                                 "127.0.0.1:%d" % port, port=port))
        primary = self.start(Server())
        c = node.client()
        c.execute_command("BF.ADD", "k", "v")
        for args in (("127.0.0.1", primary.port), ("NO", "ONE")):
            for command in ("REPLICAOF", "SLAVEOF"):
                with self.assertRaises(redis.ResponseError) as refused:
                    c.execute_command(command, *args)
                self.assertEqual(str(refused.exception), "REPLICAOF not allowed in cluster mode.")
        self.assertEqual(info(c)["role"], "master")
        self.assertEqual(c.execute_command("BF.EXISTS", "k", "v"), 1)
        self.assertEqual(c.execute_command("BF.ADD", "k", "w"), 1)

    def test_password_protected_primary(self):
        primary = self.start(Server("--requirepass", "s3cret"))
        p = primary.client(password="s3cret")
        p.execute_command("BF.ADD", "k", "v")
        wrong = self.start(replica_of(primary, "--masterauth", "nope"))
        wait_until(lambda: "AUTH" in info(wrong.client())["master_link_last_error"],
                   what="the refused link's error")
        self.assertEqual(info(wrong.client())["master_link_status"], "down")
        right = self.start(replica_of(primary, "--masterauth", "s3cret"))
        wait_until(lambda: link_up(right), what="the authenticated link")
        self.assertEqual(right.client().execute_command("BF.EXISTS", "k", "v"), 1)

    def test_replicaof_naming_this_server_starts_it_as_the_primary(self):
        # A StatefulSet gives every pod "--replicaof bloomery-0... 6379";
        # pod 0 must serve as the primary, not replicate itself.
        port = free_port()
        server = self.start(Server("--replicaof", "127.0.0.1 %d" % port, port=port))
        c = server.client()
        self.assertEqual(info(c)["role"], "master")
        self.assertEqual(c.execute_command("BF.ADD", "k", "v"), 1)
        self.assertIn("names this server", server.log())

    def test_metrics_report_replication(self):
        import urllib.request
        from prometheus_client.parser import text_string_to_metric_families

        def scrape(port):
            with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10) as r:
                families = text_string_to_metric_families(r.read().decode())
            return {s.name + repr(sorted(s.labels.items())): s.value
                    for family in families for s in family.samples}

        primary_metrics, replica_metrics = free_port(), free_port()
        primary = self.start(Server("--metrics-port", str(primary_metrics)))
        replica = self.start(replica_of(primary, "--metrics-port", str(replica_metrics)))
        wait_until(lambda: link_up(replica), what="the replica's link")
        primary.client().execute_command("BF.MADD", "k", *range(100))
        self.assertEqual(primary.client().execute_command("WAIT", 1, 5000), 1)
        label = [("replica", "127.0.0.1:%d" % replica.port)]
        # The primary's own records (its pings to replicas) may move its
        # offset after WAIT returned: scrapes of both sides taken while the
        # replica holds, and has acknowledged, all of it.
        scraped = {}

        def caught_up():
            scraped["p"] = scrape(primary_metrics)
            scraped["r"] = scrape(replica_metrics)
            offset = scraped["p"]["bloomery_replication_offset[]"]
            return (scraped["p"]["bloomery_replication_replica_acked_offset" + repr(label)] ==
                    offset and scraped["r"]["bloomery_replication_offset[]"] == offset)

        wait_until(caught_up, what="the replica to hold and acknowledge the primary's offset")
        p, r = scraped["p"], scraped["r"]
        self.assertEqual(p["bloomery_replication_is_replica[]"], 0)
        self.assertEqual(p["bloomery_replication_connected_replicas[]"], 1)
        self.assertEqual(p["bloomery_replication_replica_acked_offset" + repr(label)],
                         p["bloomery_replication_offset[]"])
        self.assertEqual(p["bloomery_replication_replica_lag_bytes" + repr(label)], 0)
        self.assertEqual(p["bloomery_replication_full_syncs_total[]"], 1)
        self.assertEqual(r["bloomery_replication_is_replica[]"], 1)
        self.assertEqual(r["bloomery_replication_link_up[]"], 1)
        self.assertEqual(r["bloomery_replication_offset[]"], p["bloomery_replication_offset[]"])

    def test_a_replica_never_answers_from_data_it_has_not_synchronized(self):
        # Before its first copy a replica's data (empty, or old files) would
        # answer 0 for items its primary holds: it refuses, and /readyz says 503.
        import urllib.error
        import urllib.request
        nowhere = free_port()
        metrics = free_port()
        replica = self.start(Server("--replicaof", "127.0.0.1 %d" % nowhere,
                                    "--metrics-port", str(metrics)))
        r = replica.client()
        with self.assertRaises(redis.ResponseError) as refused:
            r.execute_command("BF.EXISTS", "k", "v")
        self.assertIn("MASTERDOWN", str(refused.exception))
        self.assertEqual(r.ping(), True)
        with self.assertRaises(urllib.error.HTTPError) as not_ready:
            urllib.request.urlopen("http://127.0.0.1:%d/readyz" % metrics, timeout=10)
        self.assertEqual(not_ready.exception.code, 503)
        # Once synchronized it serves, also with the link down again
        # (replica-serve-stale-data yes, as Redis), unless told not to.
        primary = self.start(Server())
        primary.client().execute_command("BF.ADD", "k", "v")
        strict = self.start(replica_of(primary, "--replica-serve-stale-data", "no"))
        self.assertEqual(r.execute_command("REPLICAOF", "127.0.0.1", primary.port), b"OK")
        wait_until(lambda: link_up(replica) and link_up(strict), what="both links")
        self.assertEqual(r.execute_command("BF.EXISTS", "k", "v"), 1)
        with urllib.request.urlopen("http://127.0.0.1:%d/readyz" % metrics, timeout=10) as ok:
            self.assertEqual(ok.status, 200)
        primary.kill()
        wait_until(lambda: not link_up(replica) and not link_up(strict), what="links down")
        self.assertEqual(r.execute_command("BF.EXISTS", "k", "v"), 1)
        with self.assertRaises(redis.ResponseError) as stale:
            strict.client().execute_command("BF.EXISTS", "k", "v")
        self.assertIn("replica-serve-stale-data is set to 'no'", str(stale.exception))

    def test_bad_answers_from_a_primary_fail_the_link_not_the_replica(self):
        replid = b"0123456789abcdef0123456789abcdef01234567"
        mark = b"fedcba9876543210fedcba9876543210fedcba98"
        cases = [
            # An offset past 2^64 (std::stoull threw: the replica aborted).
            (b"+FULLRESYNC " + replid + b" 99999999999999999999\r\n", "bad offset"),
            (b"+FULLRESYNC " + replid + b" 9223372036854775808\r\n", "bad offset"),
            (b"+FULLRESYNC " + replid + b" -1\r\n", "bad offset"),
            # +CONTINUE to PSYNC ? -1: nothing to continue (it crashed).
            (b"+CONTINUE\r\n", "+CONTINUE"),
            (b"+CONTINUE " + replid + b"\r\n", "+CONTINUE"),
            (b"+FULLRESYNC not-an-id 0\r\n", "bad replication id"),
            (b"+FULLRESYNC " + replid + b"\r\n", "bad replication id"),
            (b"+FULLRESYNC " + replid + b" 0\r\n$EOF:short\r\n", "bad snapshot header"),
            (b"+FULLRESYNC " + replid + b" 0\r\n$99999999999999999999999\r\n",
             "bad snapshot header"),
            (b"+FULLRESYNC " + replid + b" 0\r\n$EOF:" + mark + b"\r\nnot a snapshot" + mark,
             "cannot load the primary's snapshot"),
            (b"-ERR go away\r\n", "refused PSYNC: -ERR go away"),
            (b"+FULL" + b"x" * 70000, "line longer than"),
            (b"\x00\x01 binary\r\n", "bad answer to PSYNC"),
        ]
        replica = self.start(Server("--replicaof", "127.0.0.1 %d" % free_port()))
        r = replica.client()
        for answer, reason in cases:
            primary = FakePrimary(answer)
            try:
                self.assertEqual(r.execute_command("REPLICAOF", "127.0.0.1", primary.port), b"OK")

                def failed_for_that_reason():
                    self.assertIsNone(replica.process.poll(), "the replica exited after %r:\n%s"
                                      % (answer[:60], replica.log()[-2000:]))
                    return reason in info(r)["master_link_last_error"]

                wait_until(failed_for_that_reason,
                           what="%r in master_link_last_error after %r" % (reason, answer[:60]))
                # It reconnects (a second later) and keeps serving meanwhile.
                wait_until(lambda: primary.connections >= 2, what="a reconnection")
                self.assertIsNone(replica.process.poll(), replica.log())
                self.assertEqual(r.ping(), True)
                state = info(r)
                self.assertEqual(state["master_link_status"], "down")
                self.assertEqual(primary.psyncs[0], [b"?", b"-1"])
            finally:
                primary.close()
        self.assertEqual(os.listdir(replica.data_dir).count("replica-sync-%d.tmp"
                                                            % replica.process.pid), 0)

    def test_commands_after_psync_never_reach_the_stream(self):
        import struct
        from formats import xxh64
        primary = self.start(Server())
        p = primary.client()
        p.execute_command("BF.ADD", "before", "x")
        # One write: WAIT's reply (deferred) must not be written into the
        # stream, nor SAVE's later on.
        feed, offset, stream = raw_replica(primary.port, b"PSYNC ? -1\r\nWAIT 0 0\r\n")
        self.addCleanup(feed.close)
        feed.sendall(b"REPLCONF ACK %d\r\nSAVE\r\nPING\r\n" % offset)
        p.execute_command("BF.MADD", "after", *range(100))
        p.execute_command("DEL", "before")
        stream += receive_for(feed, 3)
        # Journal records only (proto/journal.md): length, type, body, XXH64.
        at, records = 0, 0
        while at < len(stream):
            self.assertGreaterEqual(len(stream) - at, 13, stream[at:at + 40])
            length, kind = struct.unpack_from("<IB", stream, at)
            end = at + 5 + length
            self.assertLessEqual(end + 8, len(stream), stream[at:at + 40])
            self.assertEqual(struct.unpack_from("<Q", stream, end)[0], xxh64(stream[at:end]),
                             "not a record at %d: %r" % (at, stream[at:at + 40]))
            at, records = end + 8, records + 1
        self.assertGreaterEqual(records, 2)
        # The replica's acknowledgement was still read.
        self.assertEqual(info(p)["slave0"]["offset"], offset)

    def test_info_answers_while_replicaof_waits_for_a_link_to_stop(self):
        # Stopping a link waits for a snapshot load in progress; REPLICAOF
        # once did that holding the lock INFO, ROLE and /metrics take.
        from concurrent.futures import ThreadPoolExecutor
        primary = self.start(Server())
        # 825 MB: a load of 0.5 to 2 s on the 2-core VM.
        primary.client().execute_command("BF.RESERVE", "big", "0.0001", "300000000",
                                         "NONSCALING")
        primary.client().execute_command("BF.ADD", "big", "x")
        other = self.start(Server())
        replica = self.start(Server())
        r = replica.client()
        for round, replace in enumerate((("127.0.0.1", other.port), ("NO", "ONE"))):
            self.assertEqual(r.execute_command("REPLICAOF", "127.0.0.1", primary.port), b"OK")
            # The primary writes and sends 825 MB first: minutes under TSan.
            wait_until(lambda: replica.log().count("loading it") > round,
                       timeout=300, what="the load to begin")
            # INFO in a loop while REPLICAOF waits for the load to end. Had
            # INFO waited behind it, no INFO sent in the second half of
            # REPLICAOF's wait would have finished before REPLICAOF did.
            answered = []  # (sent, answered) of each INFO
            replica_client = replica.client()

            def replace_link():
                reply = replica_client.execute_command("REPLICAOF", *replace)
                return reply, time.monotonic()
            with ThreadPoolExecutor(1) as pool:
                sent = time.monotonic()
                replaced = pool.submit(replace_link)
                while not replaced.done() or not answered:
                    started = time.monotonic()
                    self.assertIn(info(r)["role"], ("master", "slave"))
                    answered.append((started, time.monotonic()))
                reply, replaced_at = replaced.result()
                self.assertEqual(reply, b"OK")
            halfway = sent + (replaced_at - sent) / 2
            # A REPLICAOF that found the load already over did not wait, and
            # says nothing about INFO.
            waited = replaced_at - sent
            self.assertTrue(
                waited < 0.1 or any(started >= halfway and done < replaced_at
                                    for started, done in answered),
                "no INFO answered while REPLICAOF waited (%.2f s; INFO took at most %.2f s)"
                % (waited, max(done - started for started, done in answered)))
            if replace[0] == "NO":
                # Answered once the link stopped: writes are taken at once.
                self.assertEqual(info(r)["role"], "master")
                self.assertEqual(r.execute_command("BF.ADD", "after", "promotion"), 1)
            else:
                # Until it has a copy of the other primary, what the link
                # replaced loaded is never served.
                def linked_and_never_served():
                    if link_up(replica):
                        return True
                    try:
                        self.assertEqual(r.execute_command("BF.EXISTS", "big", "x"), 0)
                    except redis.BusyLoadingError:
                        pass  # -LOADING: the other primary's copy is loading
                    except redis.ResponseError as refused:
                        self.assertRegex(str(refused), "^MASTERDOWN ")
                    return False
                wait_until(linked_and_never_served, 300, "the link to the other primary",
                           interval=0)
                self.assertEqual(r.exists("big"), 0)

    def test_shutdown_waits_for_replicas_to_acknowledge_every_write(self):
        primary, replica = self.primary_and_replica()
        p = primary.client()
        # Writes and SHUTDOWN in one pipeline: every write is answered before
        # SHUTDOWN runs, and the replica is still behind when it does.
        pipe = p.pipeline(transaction=False)
        for start in range(0, 200000, BATCH):
            pipe.execute_command("BF.MADD", "k", *range(start, start + BATCH))
        pipe.execute_command("SHUTDOWN", "NOSAVE")
        try:
            pipe.execute()
        except redis.ConnectionError:
            pass
        self.assertEqual(primary.wait(30), 0, primary.log())
        self.assertEqual(missing(replica.client(), "k", 0, 200000), 0)

    def test_a_stop_waits_for_a_replica_up_to_shutdown_timeout(self):
        def primary_with_raw_replica(*args):
            primary = self.start(Server(*args))
            feed, offset, stream = raw_replica(primary.port)
            self.addCleanup(feed.close)
            primary.client().execute_command("BF.ADD", "k", "acknowledged")
            return primary, feed, offset + len(stream)

        # A timeout far beyond any wait below: the stop ends because the
        # replica acknowledged, not because the timeout ran out.
        for stop in ("SHUTDOWN", "SIGTERM"):
            primary, feed, offset = primary_with_raw_replica("--shutdown-timeout", "600")
            if stop == "SHUTDOWN":
                closer = socket.create_connection(("127.0.0.1", primary.port))
                self.addCleanup(closer.close)
                closer.sendall(b"SHUTDOWN NOSAVE\r\n")
            else:
                primary.process.send_signal(signal.SIGTERM)
            # The add is not acknowledged: the primary waits, its clients gone.
            wait_until(lambda: not primary.ping(), what=stop + " to close the clients")
            started = time.monotonic()
            while time.monotonic() - started < 1.0:
                self.assertIsNone(primary.process.poll(), stop + ": it did not wait")
                time.sleep(0.05)
            offset += len(receive_for(feed, 0.2))
            feed.sendall(b"REPLCONF ACK %d\r\n" % offset)
            self.assertEqual(primary.wait(120), 0, primary.log())
        # At most --shutdown-timeout, which runs from when the clients are
        # gone; SHUTDOWN NOW does not wait at all (here with a timeout it
        # could never reach).
        for args, stop, shortest in ((("--shutdown-timeout", "2"), b"SHUTDOWN NOSAVE", 2.0),
                                     (("--shutdown-timeout", "600"), b"SHUTDOWN NOSAVE NOW", 0)):
            primary, feed, _ = primary_with_raw_replica(*args)
            started = time.monotonic()
            closer = socket.create_connection(("127.0.0.1", primary.port))
            self.addCleanup(closer.close)
            closer.sendall(stop + b"\r\n")
            self.assertEqual(primary.wait(120), 0, primary.log())
            self.assertGreaterEqual(time.monotonic() - started, shortest, stop)

    def test_a_replica_that_does_not_read_costs_the_primary_little(self):
        primary = self.start(Server())
        p = primary.client()
        # A 64 MB filter: its snapshot is far more than the feed may queue.
        p.execute_command("BF.RESERVE", "big", 0.0001, 25000000, "NONSCALING")
        add_range(p, "big", 0, 20000)

        def rss_kb():
            with open("/proc/%d/status" % primary.process.pid) as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1])
            return 0

        # A save reads every page once: a sanitizer's shadow of the filter is
        # then in the baseline, not in what the stalled feed is charged.
        p.execute_command("SAVE")
        before = rss_kb()
        used_before = p.info("memory")["used_memory"]
        import socket
        silent = socket.create_connection(("127.0.0.1", primary.port))
        silent.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        silent.sendall(b"PSYNC ? -1\r\n")
        # Waits until the feed has filled what it may queue for the replica
        # (at most 8 MiB) and stopped there.
        last = []

        def feed_stalled():
            held = p.info("memory")["used_memory"] - used_before
            last.append(held)
            return (held > 4 * 1024 * 1024 and len(last) >= 5
                    and max(last[-5:]) - min(last[-5:]) < 256 * 1024)
        wait_until(feed_stalled, timeout=60, what="the feed to the silent replica to stall")
        grown = rss_kb() - before
        bound = 32 * 1024 * sanitizer_memory_factor(primary.process.pid)
        self.assertLess(grown, bound, "a stalled replica made the primary hold %d KiB" % grown)
        self.assertEqual(p.ping(), True)
        self.assertEqual(p.execute_command("BF.ADD", "big", "still-served"), 1)
        # What it holds for the stalled replica is counted (INFO used_memory),
        # and given back when the replica goes.
        held = p.info("memory")["used_memory"] - used_before
        self.assertGreater(held, 4 * 1024 * 1024)
        self.assertLess(held, 16 * 1024 * 1024)
        silent.close()
        wait_until(lambda: p.info("memory")["used_memory"] - used_before < 1024 * 1024,
                   what="the stalled replica's buffers to be given back")


if __name__ == "__main__":
    unittest.main()
