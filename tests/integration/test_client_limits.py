"""Per-client limits at and just past their bounds: --maxclients,
--client-output-buffer-limit and --timeout (the query-buffer and protocol
limits are in test_hostile_memory.py and test_protocol.py)."""

import socket
import time
import unittest

from harness import Server, raw_connection
from test_protocol import Err, RespConnection


def closed_by_peer(sock, timeout=10.0):
    """True once the server has closed `sock` (EOF or reset), within `timeout`."""
    sock.settimeout(timeout)
    try:
        while True:
            data = sock.recv(65536)
            if not data:
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False


class ClientLimits(unittest.TestCase):
    def start(self, *args):
        server = Server(*args)
        self.addCleanup(server.cleanup)
        server.start()
        return server

    def connection(self, server):
        c = RespConnection(server.port)
        self.addCleanup(c.close)
        return c

    def test_maxclients_admits_exactly_that_many(self):
        s = self.start("--maxclients", "5")
        first = self.connection(s)
        # The harness's readiness probe may still be counted: wait until the
        # first client is the only one.
        deadline = time.monotonic() + 10
        while b"connected_clients:1\r\n" not in first.call("INFO", "clients"):
            self.assertLess(time.monotonic(), deadline)
            time.sleep(0.02)
        clients = [first] + [self.connection(s) for _ in range(4)]
        for c in clients:
            self.assertEqual(c.call("PING"), b"PONG")
        extra = raw_connection(s.port)
        self.addCleanup(extra.close)
        extra.settimeout(10)
        self.assertEqual(extra.recv(100), b"-ERR max number of clients reached\r\n")
        self.assertTrue(closed_by_peer(extra))
        self.assertEqual(int(clients[0].call("INFO", "stats").split(b"rejected_connections:")[1]
                             .split(b"\r\n")[0]), 1)
        # A slot that frees up can be taken again.
        clients.pop().close()
        deadline = time.monotonic() + 10
        while True:
            c = RespConnection(s.port)
            self.addCleanup(c.close)
            try:
                if c.call("PING") == b"PONG":
                    break
            except (ConnectionError, AssertionError, OSError):
                pass
            self.assertLess(time.monotonic(), deadline, "the freed slot never came back")
            time.sleep(0.05)

    def test_output_buffer_limit_serves_a_reply_of_exactly_the_limit(self):
        limit = 65536
        s = self.start("--client-output-buffer-limit", str(limit))
        # "$65526\r\n" + 65526 bytes + "\r\n" is exactly 65,536 bytes.
        n = limit - len(str(limit)) - 5
        c = self.connection(s)
        self.assertEqual(c.call("ECHO", b"x" * n), b"x" * n)
        # One byte more: that client is closed, others carry on.
        over = raw_connection(s.port)
        self.addCleanup(over.close)
        payload = b"x" * (n + 1)
        over.sendall(b"*2\r\n$4\r\nECHO\r\n$%d\r\n%s\r\n" % (len(payload), payload))
        self.assertTrue(closed_by_peer(over))
        self.assertEqual(c.call("PING"), b"PONG")

    def test_timeout_closes_idle_clients_only(self):
        s = self.start("--timeout", "1")
        idle = raw_connection(s.port)
        self.addCleanup(idle.close)
        busy = self.connection(s)
        started = time.monotonic()
        while time.monotonic() - started < 3:
            self.assertEqual(busy.call("PING"), b"PONG")
            time.sleep(0.2)
        self.assertTrue(closed_by_peer(idle, timeout=10))
        self.assertEqual(busy.call("PING"), b"PONG")
        self.assertNotIsInstance(busy.call("CONFIG", "GET", "timeout"), Err)


if __name__ == "__main__":
    unittest.main()
