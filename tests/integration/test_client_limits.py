"""Per-client limits at and just past their bounds: --maxclients,
--client-output-buffer-limit, --timeout and the limits before AUTH on inline
requests (the query-buffer and protocol limits are in test_hostile_memory.py
and test_protocol.py)."""

import os
import signal
import socket
import threading
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
        limit, tries = 5, 12
        s = self.start("--maxclients", str(limit))
        first = self.connection(s)
        # The harness's readiness probe may still be counted: wait until the
        # first client is the only one.
        deadline = time.monotonic() + 30
        while b"connected_clients:1\r\n" not in first.call("INFO", "clients"):
            self.assertLess(time.monotonic(), deadline)
            time.sleep(0.02)
        # The others connect all at once, each from its own thread: exactly
        # limit - 1 of them are served, the rest refused and closed.
        barrier = threading.Barrier(tries - 1)
        answers = [None] * (tries - 1)
        socks = [None] * (tries - 1)

        def connect(i):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            socks[i] = sock
            sock.settimeout(30)
            barrier.wait(30)
            sock.connect(("127.0.0.1", s.port))
            sock.sendall(b"PING\r\n")
            data = b""
            try:
                while b"\r\n" not in data:
                    chunk = sock.recv(100)
                    if not chunk:
                        break
                    data += chunk
            except ConnectionResetError:
                pass
            answers[i] = data
        threads = [threading.Thread(target=connect, args=(i,)) for i in range(tries - 1)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        self.addCleanup(lambda: [sock.close() for sock in socks if sock])
        served = [i for i, data in enumerate(answers) if data == b"+PONG\r\n"]
        refused = [i for i, data in enumerate(answers) if i not in served]
        self.assertEqual(len(served), limit - 1, answers)
        for i in refused:
            self.assertIn(answers[i], (b"-ERR max number of clients reached\r\n", b""), answers)
            self.assertTrue(closed_by_peer(socks[i]))
        # Every served one is still served; rejected_connections counts the rest.
        for i in served:
            socks[i].sendall(b"PING\r\n")
            self.assertEqual(socks[i].recv(100), b"+PONG\r\n")
        self.assertEqual(int(first.call("INFO", "stats").split(b"rejected_connections:")[1]
                             .split(b"\r\n")[0]), len(refused))
        self.assertEqual(self.info_clients(first), limit)
        # A slot that frees up can be taken again.
        socks[served[-1]].close()
        self.admitted_connection(s)

    def admitted_connection(self, s):
        # Connects until the server has a free slot for it: slots come back
        # when the server notices a close, a moment after the client's.
        deadline = time.monotonic() + 30
        while True:
            c = RespConnection(s.port)
            self.addCleanup(c.close)
            try:
                if c.call("PING") == b"PONG":
                    return c
            except (ConnectionError, AssertionError, OSError):
                pass
            self.assertLess(time.monotonic(), deadline, "a freed slot never came back")
            time.sleep(0.05)

    def info_clients(self, conn):
        text = conn.call("INFO", "clients").decode()
        return int(text.split("connected_clients:")[1].split("\r\n")[0])

    def test_a_burst_of_connects_never_serves_more_than_maxclients(self):
        # A slot is taken when the connection is accepted, not later on its
        # worker thread: a burst of 200 connects with --maxclients 5 is
        # served at most 5 times.
        limit, burst = 5, 200
        s = self.start("--maxclients", str(limit))
        socks = []

        def close_all():
            for sock in socks:
                sock.close()
        self.addCleanup(close_all)
        # Stopped, the server accepts nothing while the kernel queues the
        # connections (backlog 511); resumed, it meets them all at once.
        os.kill(s.process.pid, signal.SIGSTOP)
        try:
            for _ in range(burst):
                sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                sock.connect(("127.0.0.1", s.port))
                socks.append(sock)
        finally:
            os.kill(s.process.pid, signal.SIGCONT)
        served, refused = [], []
        for sock in socks:
            sock.settimeout(20)
            sock.sendall(b"PING\r\n")
        for sock in socks:
            data = b""
            try:
                while b"\r\n" not in data:
                    chunk = sock.recv(100)
                    if not chunk:
                        break
                    data += chunk
            except ConnectionResetError:
                pass
            if data == b"+PONG\r\n":
                served.append(sock)
            else:
                self.assertIn(data, (b"-ERR max number of clients reached\r\n", b""))
                refused.append(sock)
        self.assertLessEqual(len(served), limit)
        self.assertGreaterEqual(len(served), 1)
        self.assertEqual(len(served) + len(refused), burst)
        for sock in refused:
            self.assertTrue(closed_by_peer(sock))
        # Every slot comes back once its connection is gone, whatever path
        # closed it: the count returns to the asker alone.
        close_all()
        socks.clear()
        probe = self.admitted_connection(s)
        deadline = time.monotonic() + 30
        while self.info_clients(probe) != 1:
            self.assertLess(time.monotonic(), deadline, "connected_clients never returned to 1")
            time.sleep(0.02)
        others = [self.connection(s) for _ in range(limit - 1)]
        for c in others:
            self.assertEqual(c.call("PING"), b"PONG")
        self.assertEqual(self.info_clients(probe), limit)
        extra = raw_connection(s.port)
        self.addCleanup(extra.close)
        extra.settimeout(10)
        self.assertEqual(extra.recv(100), b"-ERR max number of clients reached\r\n")

    def test_inline_requests_past_the_limits_before_auth_are_answered_and_closed(self):
        # An inline AUTH of 11 words or of a 16 KiB + 1 word is refused with
        # the protocol error and closed, not run.
        s = self.start("--requirepass", "secret")
        for line, error in (
                (b"AUTH" + b" x" * 10 + b"\r\n", b"unauthenticated multibulk length"),
                (b'AUTH "" "" "" "" "" "" "" "" "" ""\r\n', b"unauthenticated multibulk length"),
                (b"AUTH " + b"x" * (16 * 1024 + 1) + b"\r\n", b"unauthenticated bulk length"),
                (b'AUTH "' + b"x" * (16 * 1024 + 1) + b'"\r\n', b"unauthenticated bulk length")):
            c = self.connection(s)
            c.send(line)
            data, closed = c.read_all_until_closed()
            self.assertEqual(data, b"-ERR Protocol error: " + error + b"\r\n", line[:40])
            self.assertTrue(closed, line[:40])
        # At the limits: run as usual, and the connection stays.
        c = self.connection(s)
        c.send(b"AUTH" + b" x" * 9 + b"\r\n")
        self.assertEqual(c.read(), Err(b"ERR syntax error"))
        c.send(b"AUTH " + b"x" * (16 * 1024) + b"\r\n")
        self.assertTrue(c.read().startswith(b"WRONGPASS"))
        c.send(b"AUTH secret\r\nBF.MADD k" + b"".join(b" i%d" % i for i in range(20)) + b"\r\n")
        self.assertEqual(c.read(), b"OK")
        self.assertEqual(c.read(), [1] * 20)

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
        # The busy client sends a command between every look at the idle
        # one, so it is never idle for anything near the timeout, however
        # slowly the machine runs this loop.
        s = self.start("--timeout", "2")
        idle = raw_connection(s.port)
        self.addCleanup(idle.close)
        busy = self.connection(s)
        idle.settimeout(0.05)
        deadline = time.monotonic() + 60
        closed = False
        while not closed:
            self.assertLess(time.monotonic(), deadline, "the idle client was never closed")
            self.assertEqual(busy.call("PING"), b"PONG")
            try:
                closed = idle.recv(100) == b""
            except socket.timeout:
                pass
            except (ConnectionResetError, BrokenPipeError):
                closed = True
        self.assertEqual(busy.call("PING"), b"PONG")
        self.assertNotIsInstance(busy.call("CONFIG", "GET", "timeout"), Err)


if __name__ == "__main__":
    unittest.main()
