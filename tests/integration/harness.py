"""Starts and stops the real bloomery binary for integration tests.

Every server listens on 127.0.0.1 on a free port, keeps its data in its own
temporary directory, is waited for with wait_until (the suite's one bounded
wait for a state to hold), and is stopped by pid.
The binary comes from $BLOOMERY_BIN (set by ctest), else the release build.
"""

import os
import signal
import socket
import subprocess
import tempfile
import time
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BINARY = os.environ.get("BLOOMERY_BIN", os.path.join(ROOT, "build", "release", "bloomery"))


def rss_bytes(pid):
    """Resident memory of process `pid`, in bytes (VmRSS)."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS for %d" % pid)


_handed_out = set()


def free_port():
    """A port the kernel just handed out on 127.0.0.1 (closed again at once),
    never one this process was given before: a test that picks a TLS or
    metrics port and then starts a server (which picks its own) must not
    get the same port twice."""
    for _attempt in range(1000):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _handed_out:
            _handed_out.add(port)
            return port
    raise RuntimeError("the kernel keeps handing out ports already used")


class Server:
    """One bloomery process. Use as a context manager or call start()/stop()."""

    def __init__(self, *extra_args, data_dir=None, threads=2, save='""', env=None, preexec_fn=None,
                 port=None, log_dir=None):
        self.extra_args = list(extra_args)
        # A port chosen in advance (a cluster map names every node's port
        # before any starts); None: a free one at each start.
        self.fixed_port = port
        self._tmp = tempfile.TemporaryDirectory(prefix="bloomery-test-") if data_dir is None else None
        self.data_dir = data_dir if data_dir is not None else self._tmp.name
        self.threads = threads
        self.save = save
        self.env = env
        self.preexec_fn = preexec_fn  # run in the child before exec (e.g. setrlimit)
        # Where the log goes (the data directory by default; elsewhere when
        # the test fills the data directory's disk).
        self.log_dir = log_dir
        self.port = None
        self.process = None
        self.log_path = None

    def args(self):
        return [BINARY, "--bind", "127.0.0.1", "--port", str(self.port), "--dir", self.data_dir,
                "--threads", str(self.threads), "--save", self.save] + self.extra_args

    def start(self, timeout=20.0, expect_failure=False):
        """Starts the server; returns once it answers PING (or exits, if expect_failure)."""
        for _attempt in range(5):
            self.port = self.fixed_port if self.fixed_port is not None else free_port()
            self.log_path = os.path.join(self.log_dir or self.data_dir, "server-%d.log" % self.port)
            log = open(self.log_path, "wb")
            environment = dict(os.environ)
            # The suite's own variable is no setting of the server's (it
            # would warn of a BLOOMERY_* name close to BLOOMERY_BIND).
            environment.pop("BLOOMERY_BIN", None)
            # A sanitized server stops at its first report (TSan would only
            # print it and change the exit code, which a test never sees).
            # TSan's lock-order detector tracks at most 64 locks held by one
            # thread and aborts past that; FLUSHALL holds every keyspace
            # shard's lock (64 by default) and then the journal's, so it is
            # off for servers (data races are still reported; the unit tests
            # keep it on, with fewer shards).
            environment["TSAN_OPTIONS"] = (environment.get("TSAN_OPTIONS", "") +
                                           ":halt_on_error=1:detect_deadlocks=0").lstrip(":")
            if self.env:
                environment.update(self.env)
            self.process = subprocess.Popen(self.args(), stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, env=environment,
                                            preexec_fn=self.preexec_fn)
            log.close()
            def ready():
                if self.process.poll() is not None:
                    return "exited"
                return "answering" if self.ping() else None
            try:
                state = wait_until(ready, timeout, "bloomery to answer PING")
            except WaitTimeout:
                state = None
            if state == "answering":
                return self
            if expect_failure and self.process.poll() is not None:
                return self
            if self.process.poll() is None:
                self.kill()
                raise RuntimeError("bloomery did not answer within %.0f s:\n%s" % (timeout, self.log()))
            # The port was taken between free_port() and bind: retry, unless
            # it was fixed in advance.
            if "cannot listen" not in self.log() or self.fixed_port is not None:
                if expect_failure:
                    return self
                raise RuntimeError("bloomery exited with %s:\n%s" % (self.process.returncode, self.log()))
        raise RuntimeError("could not find a free port for bloomery")

    def ping(self):
        """True once the server answers: PONG, or NOAUTH / NOPERM when a
        password or ACL file keeps an anonymous PING out."""
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
                s.sendall(b"PING\r\n")
                return s.recv(16).startswith((b"+PONG", b"-NOAUTH", b"-NOPERM"))
        except OSError:
            return False

    def log(self):
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def terminate(self, timeout=30.0):
        """SIGTERM and wait; returns the exit code."""
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.wait(timeout)

    def kill(self):
        """SIGKILL (a crash) and reap."""
        if self.process and self.process.poll() is None:
            self.process.kill()
        return self.wait(10.0)

    def wait(self, timeout=30.0):
        if self.process is None:
            return None
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)
            raise

    def stop(self):
        if self.process and self.process.poll() is None:
            try:
                self.terminate(timeout=15.0)
            except subprocess.TimeoutExpired:
                pass

    def cleanup(self):
        self.stop()
        if self._tmp is not None:
            self._tmp.cleanup()

    def client(self, **kwargs):
        import redis  # Debian's python3-redis
        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=30, **kwargs)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.cleanup()
        return False


def raw_connection(port, timeout=10.0):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


class SharedServerTestCase(unittest.TestCase):
    """A TestCase whose tests share one server, started once for the class."""

    server = None

    @classmethod
    def setUpClass(cls):
        cls.server = Server(threads=2)
        cls.server.start()

    @classmethod
    def tearDownClass(cls):
        cls.server.cleanup()


class WaitTimeout(AssertionError):
    """What wait_until raises: the test fails (it is an AssertionError)."""


def wait_until(predicate, timeout=30.0, what="condition", interval=0.02):
    """The one way a test waits for a state: calls `predicate` every
    `interval` seconds until it returns a true value, and returns that value.
    redis-py's connection errors and error replies count as "not yet"; any
    other exception stops the wait. After `timeout` seconds it raises
    WaitTimeout, "timed out waiting for <what>"; `what` may be a function,
    called then, to say what the state was."""
    import redis  # Debian's python3-redis
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = predicate()
            if value:
                return value
        except (redis.ConnectionError, redis.ResponseError):
            pass
        if time.monotonic() >= deadline:
            raise WaitTimeout("timed out after %g s waiting for %s" %
                              (timeout, what() if callable(what) else what))
        time.sleep(interval)


def journal_end(client):
    """A journal offset at or past the end of every record appended so far.
    A worker thread may still hold its latest records in a buffer of its
    own; WAIT moves every such buffer into the journal's stream (its target
    is every record before it), and INFO's aof_appended_offset is then the
    end of the stream."""
    client.execute_command("WAIT", 0, 0)
    return client.info("persistence")["aof_appended_offset"]


def wait_durable(client, offset=None, timeout=60.0):
    """Waits until the journal is durable (fdatasynced) up to `offset`, by
    default up to everything appended when called: with --appendfsync
    everysec the writer gets there by itself within about a second, more on
    a busy machine."""
    target = journal_end(client) if offset is None else offset
    wait_until(lambda: client.info("persistence")["aof_durable_offset"] >= target,
               timeout=timeout, what="the journal to be durable up to %d" % target)
    return target


def missing_items(client, key, items):
    """The items of `items` that BF.MEXISTS answers 0 for in `key` (false
    negatives), asked 1,000 at a time."""
    missing = []
    items = list(items)
    for start in range(0, len(items), 1000):
        chunk = items[start:start + 1000]
        answers = client.execute_command("BF.MEXISTS", key, *chunk)
        missing += [item for item, answer in zip(chunk, answers) if answer != 1]
    return missing


def check_snapshot(path):
    """Runs `bloomery --check-snapshot path`; returns (returncode, stdout+stderr text)."""
    result = subprocess.run([BINARY, "--check-snapshot", path], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, timeout=60)
    text = (result.stdout + result.stderr).decode("utf-8", "replace")
    return result.returncode, text


def scandump(client, key):
    """Every BF.SCANDUMP chunk of `key`, header first, as [(iterator, bytes)]."""
    chunks = []
    cursor = 0
    for _ in range(100000):
        cursor, data = client.execute_command("BF.SCANDUMP", key, cursor)
        if cursor == 0:
            return chunks
        chunks.append((cursor, data))
    raise AssertionError("BF.SCANDUMP did not finish")


# ---------------------------------------------------------------------------
# Snapshot files in a data directory (proto/snapshot.md).

DUMP = "dump.bloomery"


def persistence_info(client):
    return client.info("persistence")


def bgsave(client):
    """BGSAVE's raw status reply (redis-py would turn it into True)."""
    client.response_callbacks.pop("BGSAVE", None)
    return client.execute_command("BGSAVE")


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def write_bytes(path, data):
    with open(path, "wb") as f:
        f.write(data)


def temp_files(directory):
    return sorted(name for name in os.listdir(directory) if ".tmp" in name)


class TempDirCase(unittest.TestCase):
    """A TestCase whose servers keep their data in directories it makes and
    removes."""

    def make_dir(self):
        tmp = tempfile.TemporaryDirectory(prefix="bloomery-persist-")
        self.addCleanup(tmp.cleanup)
        return tmp.name

    def server(self, data_dir, *extra, save='""', start=True):
        server = Server(*extra, data_dir=data_dir, save=save)
        self.addCleanup(server.cleanup)
        if start:
            server.start()
        return server


# ---------------------------------------------------------------------------
# Replication (proto/replication.md).

class ServersTestCase(unittest.TestCase):
    """A TestCase whose tests start servers of their own with start(); every
    one is stopped after the test."""

    def setUp(self):
        self.servers = []

    def tearDown(self):
        for server in self.servers:
            server.cleanup()

    def start(self, server):
        self.servers.append(server)
        return server.start()


def replication_info(client, section="replication"):
    return client.info(section)


def race_snapshots_and_a_replica(case, primary, workers, seed):
    """Runs `workers` (threads with a `failure` attribute, started here) to
    their end while snapshots of `primary` are taken one after another and a
    replica of it starts (its full sync races them too), then waits for the
    replica's link and for it to acknowledge everything. `case` is a
    ServersTestCase; `seed` names the run in failures. Returns (snapshots
    taken, the replica)."""
    p = primary.client()
    for worker in workers:
        worker.start()
    saves, replica = 0, None
    while any(worker.is_alive() for worker in workers):
        if bgsave(p) == b"Background saving started":
            saves += 1
        wait_until(lambda: p.info("persistence")["rdb_bgsave_in_progress"] == 0,
                   what="the snapshot to finish")
        if replica is None:
            replica = case.start(replica_of(primary))
    for worker in workers:
        worker.join(300)
        case.assertIsNone(worker.failure, "seed %d" % seed)
    if replica is None:
        replica = case.start(replica_of(primary))
    wait_until(lambda: link_up(replica), what="the replica's link")
    case.assertEqual(p.execute_command("WAIT", 1, 0), 1)
    return saves, replica


def replica_of(primary, *extra, **kwargs):
    return Server("--replicaof", "127.0.0.1 %d" % primary.port, *extra, **kwargs)


def link_up(server):
    return replication_info(server.client())["master_link_status"] == "up"


def add_range(client, key, first, last, batch=1000):
    """BF.MADD of the items first..last-1 (decimal strings), `batch` a
    command, pipelined."""
    pipe = client.pipeline(transaction=False)
    for start in range(first, last, batch):
        pipe.execute_command("BF.MADD", key, *range(start, min(start + batch, last)))
        if len(pipe) == 50:
            pipe.execute()
    pipe.execute()
