"""/healthz under slow HTTP clients: slow writers (a slowloris: part of a
request, then nothing) and slow readers (scrapes pipelined, replies never
read) from the probe's own address and others. A liveness probe that fails
gets the pod restarted, so whatever they do, every probe must answer.
"""

import select
import socket
import threading
import time
import unittest

from harness import wait_until
from test_metrics import MetricsServer


class SlowLoris:
    """Connections that each send part of a request line and wait, and
    connect again as soon as they are closed: `per_address` of them from each
    of `addresses` (loopback addresses: all of 127/8 is local on Linux)."""

    def __init__(self, port, addresses, per_address):
        self.port = port
        self.stop = threading.Event()
        self.connected = 0  # connections open now
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self._hold, args=(address,), daemon=True)
                        for address in addresses for _ in range(per_address)]
        for thread in self.threads:
            thread.start()

    def _count(self, delta):
        with self.lock:
            self.connected += delta

    def _hold(self, address):
        while not self.stop.is_set():
            try:
                s = socket.create_connection(("127.0.0.1", self.port), timeout=1,
                                             source_address=(address, 0))
            except OSError:
                continue
            self._count(1)
            try:
                s.sendall(b"GET /healthz HTTP/1.1\r\nHost: slow")
                while not self.stop.is_set():
                    try:
                        if s.recv(100) == b"":
                            break  # closed by the server: come back at once
                    except socket.timeout:
                        continue
            except OSError:
                pass
            finally:
                self._count(-1)
                s.close()

    def close(self):
        self.stop.set()
        for thread in self.threads:
            thread.join(10)


def server_queues(port):
    """{(peer address, peer port): (send queue, receive queue)} of the
    server's connections on `port`, from /proc/net/tcp."""
    queues = {}
    with open("/proc/net/tcp") as f:
        next(f)
        for line in f:
            fields = line.split()
            local, remote, tx_rx = fields[1], fields[2], fields[4]
            if int(local.split(":")[1], 16) != port:
                continue
            address, peer_port = remote.split(":")
            peer = (socket.inet_ntoa(bytes.fromhex(address)[::-1]), int(peer_port, 16))
            queues[peer] = tuple(int(x, 16) for x in tx_rx.split(":"))
    return queues


class SlowReaders:
    """Connections that each pipeline `pipelined` GET /metrics with a tiny
    receive buffer and never read a byte: the server's replies stall in its
    socket buffer. `per_address` of them from each of `addresses`; each
    connects again as soon as the server closes it. A thousand scrapes of
    11 KB each pass any socket buffer (tcp_wmem's largest is 4 MB); with
    200 some connections finished their replies and waited again."""

    def __init__(self, port, addresses, per_address, pipelined=1000):
        self.port = port
        self.request = b"GET /metrics HTTP/1.1\r\nHost: slow\r\n\r\n" * pipelined
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.receiving = {}  # thread -> (address, port) of its connection, once replies come
        self.threads = [threading.Thread(target=self._hold, args=(address,), daemon=True)
                        for address in addresses for _ in range(per_address)]
        for thread in self.threads:
            thread.start()

    def _note(self, endpoint):
        with self.lock:
            if endpoint is None:
                self.receiving.pop(threading.get_ident(), None)
            else:
                self.receiving[threading.get_ident()] = endpoint

    def stalled(self):
        """Whether every connection's replies have stopped: the server has
        replies left to send (requests unread) and its send queue stays put.
        Until then a connection between two replies waits for its next
        request, and the server may close it for a newcomer."""
        with self.lock:
            endpoints = set(self.receiving.values())
        if len(endpoints) < len(self.threads):
            return False
        first = server_queues(self.port)
        time.sleep(0.05)
        second = server_queues(self.port)
        return all(first.get(e) == second.get(e) and second.get(e, (0, 0))[0] > 0 and
                   second[e][1] > 0 for e in endpoints)

    def _connect(self, address):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            # Before connecting, so the window it offers stays that small.
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
            s.bind((address, 0))
            s.settimeout(1)
            s.connect(("127.0.0.1", self.port))
            s.sendall(self.request)
            return s
        except OSError:
            s.close()
            return None

    def _hold(self, address):
        closed = select.POLLHUP | select.POLLERR | select.POLLRDHUP
        while not self.stop.is_set():
            s = self._connect(address)
            if s is None:
                continue
            poller = select.poll()
            poller.register(s, select.POLLIN | select.POLLRDHUP)
            counted = False
            try:
                while not self.stop.is_set():
                    events = poller.poll(100)
                    if not events:
                        continue
                    mask = events[0][1]
                    if mask & closed:
                        break  # closed by the server: come back at once
                    if not counted:
                        # A reply arrives and is left unread: from now on
                        # only a close is watched for.
                        counted = True
                        self._note(s.getsockname())
                        poller.modify(s, select.POLLRDHUP)
            finally:
                self._note(None)
                s.close()

    def close(self):
        self.stop.set()
        for thread in self.threads:
            thread.join(10)


class SlowClients(unittest.TestCase):
    """Slow connections must not keep /healthz from answering (a liveness
    probe that fails gets the pod restarted)."""

    def setUp(self):
        # The default bounds (16, 8 per client), and a request timeout far
        # beyond the probes' own: a probe kept out by the slow connections
        # would wait for it and fail, however busy the machine.
        self.server = MetricsServer("--metrics-request-timeout", "300")
        self.addCleanup(self.server.cleanup)
        self.server.start()

    def probe_healthz(self, count, timeout=60.0):
        """The time each of `count` /healthz probes took; each must answer 200."""
        took = []
        for _ in range(count):
            started = time.monotonic()
            try:
                status, body = self.server.http("/healthz", timeout=timeout)
            except OSError as e:
                self.fail("/healthz probe %d of %d failed: %r" % (len(took) + 1, count, e))
            self.assertEqual((status, body), (200, "ok\n"))
            took.append(time.monotonic() - started)
        return took

    def attack(self, addresses, per_address):
        loris = SlowLoris(self.server.metrics_port, addresses, per_address)
        self.addCleanup(loris.close)
        wait_until(lambda: loris.connected >= min(16, len(addresses) * per_address), 60,
                   "the slow connections to connect", interval=0.01)
        return loris

    def stall_readers(self, addresses, per_address):
        readers = SlowReaders(self.server.metrics_port, addresses, per_address)
        self.addCleanup(readers.close)
        wait_until(readers.stalled, 60, "the slow readers' replies to stall", interval=0.01)
        return readers

    def test_sixteen_slow_connections_from_one_address(self):
        # Sixteen would take every slot (--metrics-max-connections 16); one
        # address holds at most 8.
        self.attack(["127.0.0.2"], 16)
        took = self.probe_healthz(30)
        print("\n[ measured ] /healthz under attack: slowest of 30 probes %.3f s" % max(took))
        self.assertTrue(self.server.client().ping())

    def test_slow_connections_from_many_addresses(self):
        # Four from each of twelve addresses, three times the listener's
        # slots: a newcomer takes the place of one of theirs, never of the
        # probe's (its address holds fewer).
        self.attack(["127.0.0.%d" % i for i in range(2, 14)], 4)
        took = self.probe_healthz(30)
        print("\n[ measured ] /healthz under attack: slowest of 30 probes %.3f s" % max(took))
        self.assertTrue(self.server.client().ping())

    def test_slow_readers_from_the_probes_address(self):
        # Eight connections of the probe's own address (its bound) each
        # pipeline scrapes and never read: every one is writing a reply that
        # stalls. Each probe takes the place of the one stalled longest.
        self.stall_readers(["127.0.0.1"], 8)
        took = self.probe_healthz(30)
        print("\n[ measured ] /healthz beside 8 slow readers of its address: slowest of 30 "
              "probes %.3f s" % max(took))
        self.assertTrue(self.server.client().ping())

    def test_slow_readers_and_writers_hold_every_slot(self):
        # Slow readers from two addresses hold all sixteen slots, and slow
        # writers of a third keep coming back for them.
        self.stall_readers(["127.0.0.2", "127.0.0.3"], 8)
        self.attack(["127.0.0.4"], 4)
        took = self.probe_healthz(30)
        print("\n[ measured ] /healthz beside 16 slow readers and 4 slow writers: slowest of 30 "
              "probes %.3f s" % max(took))
        self.assertTrue(self.server.client().ping())


if __name__ == "__main__":
    unittest.main()
