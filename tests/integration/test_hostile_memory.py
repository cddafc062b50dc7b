"""Memory a hostile client can make the server hold.

A client may announce a 512 MB bulk and then trickle a few bytes at a time.
The server must hold memory in proportion to the bytes it actually received,
not to the number of reads, and count it toward client-query-buffer-limit.

A request's arguments cost bookkeeping too: an inline line of 21,800 empty
quoted words, or a multibulk request of a million empty arguments. Before
authentication such a request is refused at its eleventh word; after, its
bookkeeping is counted in used_memory while it runs and given back after it,
so RSS stays near what used_memory reports.

A primary is a peer too: one that streams an endless snapshot fills no more
of a replica's disk than the replica could ever load.
"""

import os
import resource
import socket
import threading
import unittest

import harness
from test_protocol import Err, RespConnection, encode

CONNECTIONS = 1000
ROUNDS = 8
BYTES_PER_ROUND = 3
RSS_LIMIT = 100 * 1024 * 1024

# Two shapes of a hostile header: a lone 512 MB argument, and a 512 MB
# argument after a command name and a key.
HEADERS = (
    b"*1\r\n$536870912\r\n",
    b"*3\r\n$6\r\nBF.ADD\r\n$1\r\nk\r\n$536870912\r\n",
)


def vm_rss_bytes(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS for pid %d" % pid)


def sanitizer_memory_factor(pid):
    """How much more memory a sanitizer build holds for the same work: TSan
    keeps shadow and metadata per heap block (measured here: 108 MB flat for
    the 1,000 connections below, 12 MB in a release build), ASan red zones and
    a quarantine (54-64 MB). The bound is scaled, the per-round check stays."""
    with open("/proc/%d/maps" % pid) as f:
        maps = f.read()
    if "libtsan" in maps:
        return 4
    if "libasan" in maps:
        return 2
    return 1


def rss_is_the_servers(pid):
    """Whether RSS shows what the server holds: not under TSan, whose shadow
    and metadata grow with every block the process ever touched (282 MB for
    500 connections that a release build serves in 40 MB). ASan builds keep a
    small quarantine (ArgumentBookkeeping.start) and are measured."""
    with open("/proc/%d/maps" % pid) as f:
        return "libtsan" not in f.read()


def raise_open_file_limit(wanted):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < wanted:
        target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def client_list_qbuf_sum(conn):
    listing = conn.call("CLIENT", "LIST", timeout=30).decode()
    return sum(int(field[5:]) for field in listing.split() if field.startswith("qbuf="))


class TricklingHugeBulks(unittest.TestCase):

    def test_1000_clients_trickling_into_announced_512mb_bulks_stay_under_100mb_rss(self):
        if raise_open_file_limit(CONNECTIONS + 64) < CONNECTIONS + 64:
            self.skipTest("cannot open %d sockets (RLIMIT_NOFILE)" % CONNECTIONS)
        server = harness.Server("--maxclients", str(CONNECTIONS + 100), threads=2)
        server.start()
        self.addCleanup(server.cleanup)
        socks = []

        def close_all():
            for s in socks:
                s.close()
        self.addCleanup(close_all)

        expected_held = 0
        for i in range(CONNECTIONS):
            s = socket.create_connection(("127.0.0.1", server.port), timeout=10)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            header = HEADERS[i % len(HEADERS)]
            s.sendall(header)
            expected_held += len(header)
            socks.append(s)

        rss_limit = RSS_LIMIT * sanitizer_memory_factor(server.process.pid)
        probe = RespConnection(server.port, timeout=30)
        self.addCleanup(probe.close)
        rss_by_round = []
        for round_number in range(ROUNDS):
            for s in socks:
                s.sendall(b"x" * BYTES_PER_ROUND)
            expected_held += BYTES_PER_ROUND * CONNECTIONS
            # Wait (bounded) until the server has read every byte sent, so each
            # round is at least one read per connection.
            harness.wait_until(lambda: client_list_qbuf_sum(probe) >= expected_held, 60,
                               "the server to read what was sent", interval=0.05)
            rss = vm_rss_bytes(server.process.pid)
            rss_by_round.append(rss)
            # Checked every round so that a regression stops here instead of
            # taking the machine's memory.
            self.assertLess(rss, rss_limit, "RSS by round: %s" % rss_by_round)

        with RespConnection(server.port) as fresh:
            self.assertEqual(fresh.call("PING"), b"PONG")
        # CLIENT LIST reports each query buffer's capacity (qbuf + qbuf-free):
        # at least what is held, and no more than a read chunk or two each.
        listing = probe.call("CLIENT", "LIST", timeout=30).decode()
        capacity = sum(int(f.split("=")[1]) for f in listing.split()
                       if f.startswith("qbuf=") or f.startswith("qbuf-free="))
        self.assertGreaterEqual(capacity, expected_held)
        self.assertLess(capacity, (CONNECTIONS + 1) * 64 * 1024)


def info_int(conn, field, section="memory"):
    text = conn.call("INFO", section, timeout=30).decode()
    for line in text.split("\r\n"):
        if line.startswith(field + ":"):
            return int(line.split(":", 1)[1])
    raise AssertionError("no %s in INFO %s" % (field, section))


def read_line(sock, timeout=30.0):
    """The first reply line (up to CRLF), or what came before the peer closed."""
    sock.settimeout(timeout)
    data = b""
    while b"\r\n" not in data:
        try:
            chunk = sock.recv(4096)
        except ConnectionResetError:
            break
        if not chunk:
            break
        data += chunk
    return data


def wait_for_rss_below(pid, limit, rss_before, timeout=60.0):
    """Waits until RSS is below `limit` (the allocator returns freed pages to
    the kernel within seconds) and returns it; fails saying what it stayed
    at."""
    def below():
        rss = vm_rss_bytes(pid)
        return rss if rss < limit else None
    return harness.wait_until(below, timeout,
                              lambda: "RSS below %d MB (it is %d MB, %d MB before)" %
                              (limit // MB, vm_rss_bytes(pid) // MB, rss_before // MB),
                              interval=0.1)


MB = 1024 * 1024
# The most empty quoted words a 64 KiB inline line holds (3 bytes each).
INLINE_WORDS = 21800
ARGUMENTS = 1048576


class ArgumentBookkeeping(unittest.TestCase):
    """What the arguments of one request make the server hold, measured as RSS."""

    def start(self, *args):
        if raise_open_file_limit(700) < 700:
            self.skipTest("cannot open 600 sockets (RLIMIT_NOFILE)")
        # Under ASan, freed blocks wait in a quarantine (256 MB by default)
        # before they are reused or returned; a small one lets RSS show what
        # the server itself still holds. Release builds ignore the variable.
        asan = os.environ.get("ASAN_OPTIONS", "")
        server = harness.Server("--maxclients", "1000", *args, threads=2,
                                env={"ASAN_OPTIONS": (asan + ":quarantine_size_mb=8").lstrip(":")})
        server.start()
        self.addCleanup(server.cleanup)
        return server

    def sockets(self, server, count):
        socks = []

        def close_all():
            for s in socks:
                s.close()
        self.addCleanup(close_all)
        for _ in range(count):
            socks.append(harness.raw_connection(server.port, timeout=30))
        return socks

    def test_500_inline_auths_of_21800_words_are_refused_closed_and_hold_nothing(self):
        # Each is refused at its 11th word (the limit before AUTH), not run
        # as one AUTH keeping 1.6 MB of word storage behind per connection.
        server = self.start("--requirepass", "secret")
        probe = RespConnection(server.port, timeout=30)
        self.addCleanup(probe.close)
        self.assertEqual(probe.call("AUTH", "secret"), b"OK")
        rss_before = vm_rss_bytes(server.process.pid)
        line = b"AUTH" + b' ""' * INLINE_WORDS + b"\r\n"
        self.assertLessEqual(len(line), 64 * 1024)
        socks = self.sockets(server, 500)
        for s in socks:
            s.sendall(line)
        replies = [read_line(s) for s in socks]
        if rss_is_the_servers(server.process.pid):
            limit = rss_before + 50 * MB * sanitizer_memory_factor(server.process.pid)
            wait_for_rss_below(server.process.pid, limit, rss_before)
        expected = b"-ERR Protocol error: unauthenticated multibulk length\r\n"
        self.assertEqual(replies, [expected] * len(socks))
        # Answered and closed, as a multibulk request over the limit is.
        for s in socks:
            self.assertEqual(read_line(s, timeout=10), b"")
        self.assertEqual(probe.call("PING"), b"PONG")

    def test_500_inline_commands_of_21800_words_leave_small_buffers_behind(self):
        # Argument bookkeeping of about 1.4 MB per client is given back once
        # the command has run, not kept by each of the 500.
        server = self.start()
        probe = RespConnection(server.port, timeout=30)
        self.addCleanup(probe.close)
        rss_before = vm_rss_bytes(server.process.pid)
        used_before = info_int(probe, "used_memory")
        line = b"ECHO" + b' ""' * INLINE_WORDS + b"\r\n"
        socks = self.sockets(server, 500)
        for s in socks:
            s.sendall(line)
        replies = [read_line(s) for s in socks]
        self.assertEqual(replies,
                         [b"-ERR wrong number of arguments for 'echo' command\r\n"] * len(socks))
        factor = sanitizer_memory_factor(server.process.pid)
        limit = rss_before + 64 * MB * factor
        measured = rss_is_the_servers(server.process.pid)
        if measured:
            rss = wait_for_rss_below(server.process.pid, limit, rss_before)
        # What is left is counted: 500 idle query buffers (16 KiB, or up to
        # 64 KiB where the line filled one exactly) and little else.
        used = info_int(probe, "used_memory")
        self.assertGreaterEqual(used - used_before, 500 * 16 * 1024)
        self.assertLess(used - used_before, 500 * 80 * 1024)
        if measured:
            self.assertLess(rss - rss_before, (used - used_before) + 40 * MB * factor)
        # Still connected and served.
        for s in socks[:10]:
            s.sendall(b"PING\r\n")
            self.assertEqual(read_line(s), b"+PONG\r\n")

    def test_50_requests_of_a_million_arguments_are_counted_refused_past_maxmemory_and_given_back(self):
        # 50 such ECHOs hold about 400 MB of argument views: counted in
        # used_memory, so under --maxmemory 50mb writes are refused, and
        # given back once they have run.
        server = self.start("--maxmemory", "50mb")
        probe = RespConnection(server.port, timeout=60)
        self.addCleanup(probe.close)
        pid = server.process.pid
        rss_before = vm_rss_bytes(pid)
        used_before = info_int(probe, "used_memory")
        head = b"*%d\r\n$4\r\nECHO\r\n" % ARGUMENTS + b"$0\r\n\r\n" * (ARGUMENTS - 2)
        socks = self.sockets(server, 50)
        # Every request but its last argument: the server holds 50 requests
        # of 6 MB in the middle of being parsed.
        for s in socks:
            s.sendall(head)
        harness.wait_until(lambda: client_list_qbuf_sum(probe) >= len(head) * len(socks), 120,
                           "the server to read what was sent", interval=0.05)
        rss = vm_rss_bytes(pid)
        used = info_int(probe, "used_memory")
        # What they hold is counted (a partly received request holds its
        # bytes and nothing per argument), and past --maxmemory writes are
        # refused while reads go on.
        self.assertGreater(used, 50 * MB)
        self.assertEqual(probe.call("BF.ADD", "k", "x"),
                         Err(b"OOM command not allowed when used memory > 'maxmemory'."))
        self.assertEqual(probe.call("BF.EXISTS", "k", "x"), 0)
        if sanitizer_memory_factor(pid) == 1:
            self.assertLess(rss - rss_before, 1.5 * (used - used_before) + 32 * MB,
                            "RSS +%d MB, used_memory +%d MB" % ((rss - rss_before) // MB,
                                                                (used - used_before) // MB))
        for s in socks:
            s.sendall(b"$0\r\n\r\n")
        replies = [read_line(s, timeout=60) for s in socks]
        self.assertEqual(replies,
                         [b"-ERR wrong number of arguments for 'echo' command\r\n"] * len(socks))
        # Given back: the connections are idle again with small buffers.
        used = info_int(probe, "used_memory")
        self.assertLess(used - used_before, 50 * 32 * 1024)
        self.assertEqual(probe.call("BF.ADD", "k", "x"), 1)
        if sanitizer_memory_factor(pid) == 1:
            # (A sanitizer's allocator keeps freed memory in quarantine.)
            limit = rss_before + 64 * MB
            wait_for_rss_below(pid, limit, rss_before)


class QueryBufferLimit(unittest.TestCase):
    LIMIT = 1024 * 1024

    @classmethod
    def setUpClass(cls):
        cls.server = harness.Server("--client-query-buffer-limit", "1mb")
        cls.server.start()

    @classmethod
    def tearDownClass(cls):
        cls.server.cleanup()

    def command_of_total_size(self, total):
        """A BF.ADD whose encoding is exactly `total` bytes."""
        item_len = total - len(encode("BF.ADD", "k", ""))
        while len(encode("BF.ADD", "k", b"y" * item_len)) > total:
            item_len -= 1
        command = encode("BF.ADD", "k", b"y" * item_len)
        self.assertEqual(len(command), total)
        return command

    def test_command_of_exactly_the_limit_is_served(self):
        with RespConnection(self.server.port) as c:
            c.send(self.command_of_total_size(self.LIMIT))
            self.assertEqual(c.read(timeout=20), 1)
            self.assertEqual(c.call("PING"), b"PONG")

    def test_one_byte_past_the_limit_closes_only_that_client(self):
        with RespConnection(self.server.port) as other, RespConnection(self.server.port) as big:
            self.assertEqual(other.call("PING"), b"PONG")
            big.send(self.command_of_total_size(self.LIMIT + 1))
            data, closed = big.read_all_until_closed(timeout=20)
            self.assertTrue(closed, "the client over the limit was not closed")
            self.assertEqual(data, b"")
            self.assertEqual(other.call("PING"), b"PONG")
            self.assertEqual(other.call("BF.ADD", "k2", "a"), 1)
        self.assertIn("client-query-buffer-limit", self.server.log())

    def test_trickled_bulk_past_the_limit_is_closed(self):
        with RespConnection(self.server.port) as c:
            c.send(b"*2\r\n$4\r\nECHO\r\n$536870912\r\n")
            sent = 0
            closed = False
            chunk = b"z" * 65536
            # Bounded: 40 chunks of 64 KB is 2.5 MB, well past the 1 MB limit.
            for _ in range(40):
                try:
                    c.send(chunk)
                except OSError:
                    closed = True
                    break
                sent += len(chunk)
            if not closed:
                _data, closed = c.read_all_until_closed(timeout=20)
            self.assertTrue(closed)
        with RespConnection(self.server.port) as c:
            self.assertEqual(c.call("PING"), b"PONG")


class EndlessSnapshotPrimary:
    """A primary on 127.0.0.1 that answers a replica's REPLCONF with +OK and
    its PSYNC with a full copy whose snapshot never ends: zeros, up to
    `most` bytes (so that a replica without a bound fills no disk), until
    the replica closes the link. It takes one replica, once."""

    def __init__(self, most):
        self.most = most
        self.sent = 0  # snapshot bytes sent when the replica closed the link
        self.cut = threading.Event()
        self.stopped = threading.Event()
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(1)
        self.port = self.listener.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    @staticmethod
    def _command(connection, name):
        """Reads one command (three words: REPLCONF listening-port N, PSYNC ? -1)."""
        data = b""
        while name not in data or data.count(b"\r\n") < 7:
            chunk = connection.recv(4096)
            if not chunk:
                raise ConnectionError("the replica left")
            data += chunk

    def _serve(self):
        self.listener.settimeout(30)
        try:
            connection, _ = self.listener.accept()
        except OSError:
            return
        finally:
            self.listener.close()  # a replica that comes back finds nobody
        with connection:
            try:
                connection.settimeout(30)
                self._command(connection, b"REPLCONF")
                connection.sendall(b"+OK\r\n")
                self._command(connection, b"PSYNC")
                connection.sendall(b"+FULLRESYNC " + b"ab" * 20 + b" 0\r\n$EOF:" + b"cd" * 20 +
                                   b"\r\n")
                chunk = bytes(1 << 16)
                while self.sent < self.most and not self.stopped.is_set():
                    connection.sendall(chunk)
                    self.sent += len(chunk)
                # Sent all it would: wait for the replica to close, or the end.
                connection.settimeout(0.1)
                while not self.stopped.is_set():
                    try:
                        if not connection.recv(4096):
                            break
                    except socket.timeout:
                        continue
                else:
                    return  # stopped with the link still open: no cut
            except OSError:
                pass
            self.cut.set()

    def close(self):
        self.stopped.set()
        self.thread.join(40)


class HostilePrimary(unittest.TestCase):
    def test_an_endless_snapshot_stops_at_the_replicas_maxmemory_and_its_file_goes(self):
        # The bound: --maxmemory, what the replica could hold once loaded.
        # Without it, a replica once wrote 300 MB and counting.
        limit = 4 * MB
        primary = EndlessSnapshotPrimary(most=16 * limit)
        self.addCleanup(primary.close)
        replica = harness.Server("--maxmemory", "4mb", "--replicaof",
                                 "127.0.0.1 %d" % primary.port)
        replica.start()
        self.addCleanup(replica.cleanup)
        path = os.path.join(replica.data_dir, "replica-sync-%d.tmp" % replica.process.pid)
        largest = 0

        def link_cut():
            nonlocal largest
            if primary.cut.is_set():
                return True
            try:
                largest = max(largest, os.path.getsize(path))
            except OSError:
                pass  # not there yet, or already removed
            return False
        harness.wait_until(link_cut, 30,
                           lambda: "the replica to cut the link (its file holds %d bytes, the "
                           "primary sent %d)" % (largest, primary.sent), interval=0.002)
        self.assertLessEqual(largest, limit)
        # It read up to the bound (the rest of what was sent sat in socket
        # buffers) and no further.
        self.assertGreaterEqual(primary.sent, limit)
        self.assertLess(primary.sent, 16 * limit)
        harness.wait_until(lambda: not os.path.exists(path), 10, "the sync file to be removed",
                           interval=0.01)
        # The reason, as INFO and the log give it (INFO's once the link's
        # thread has recorded it, just after closing).
        reason = "the primary's snapshot passes 4194304 bytes"
        with RespConnection(replica.port) as c:
            harness.wait_until(lambda: reason in c.call("INFO", "replication").decode(), 10,
                               "the reason in INFO replication", interval=0.01)
        self.assertIn(reason, replica.log())


if __name__ == "__main__":
    unittest.main()
