"""Memory a hostile client can make the server hold (issue 6, defect 2).

A client may announce a 512 MB bulk and then trickle a few bytes at a time.
The server must hold memory in proportion to the bytes it actually received,
not to the number of reads, and count it toward client-query-buffer-limit.
"""

import resource
import socket
import time
import unittest

import harness
from test_protocol import RespConnection, encode

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
            deadline = time.monotonic() + 60
            held = client_list_qbuf_sum(probe)
            while held < expected_held and time.monotonic() < deadline:
                time.sleep(0.05)
                held = client_list_qbuf_sum(probe)
            self.assertGreaterEqual(held, expected_held, "server did not read what was sent")
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


if __name__ == "__main__":
    unittest.main()
