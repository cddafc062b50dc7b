"""Many clients at once: concurrency, isolation of a misbehaving client,
connection accounting and CLIENT KILL.
"""

import socket
import threading
import unittest

import harness
from harness import rss_bytes, wait_until
from test_protocol import Err, RespConnection, encode


def info_field(conn, section, field):
    text = conn.call("INFO", section).decode()
    for line in text.splitlines():
        if line.startswith(field + ":"):
            return line.split(":", 1)[1]
    raise AssertionError("%s not in INFO %s" % (field, section))


class ClientsTest(harness.SharedServerTestCase):

    def setUp(self):
        with RespConnection(self.server.port) as c:
            self.assertEqual(c.call("FLUSHALL"), b"OK")

    def conn(self, timeout=10.0):
        c = RespConnection(self.server.port, timeout=timeout)
        self.addCleanup(c.close)
        return c

    def connected_clients(self, probe):
        return int(info_field(probe, "clients", "connected_clients"))

    def wait_for_clients(self, probe, expected, timeout=30.0):
        wait_until(lambda: self.connected_clients(probe) == expected, timeout,
                   lambda: "connected_clients %d (now %d)" % (expected,
                                                             self.connected_clients(probe)))

    def test_many_concurrent_clients_mixed_ops(self):
        threads_n, ops = 16, 500
        errors = []
        added = [[] for _ in range(threads_n)]

        def worker(t):
            try:
                r = self.server.client()
                try:
                    pipe_items = []
                    for i in range(ops):
                        shared_item = "shared-%d-%d" % (t, i)
                        private_item = "p-%d" % i
                        if i % 3 == 0:
                            rep = r.execute_command("BF.ADD", "shared", shared_item)
                            if rep not in (0, 1):
                                errors.append(("add", rep))
                            added[t].append(("shared", shared_item))
                        elif i % 3 == 1:
                            rep = r.execute_command("BF.ADD", "private-%d" % t, private_item)
                            if rep not in (0, 1):
                                errors.append(("add", rep))
                            added[t].append(("private-%d" % t, private_item))
                        else:
                            # Everything this thread added so far must be there now.
                            key, item = added[t][i // 2]
                            if r.execute_command("BF.EXISTS", key, item) != 1:
                                errors.append(("false negative", key, item))
                            pipe_items.append(item)
                        if i % 100 == 99:
                            rep = r.execute_command("BF.MADD", "shared", *["m-%d-%d-%d" % (t, i, j) for j in range(10)])
                            if len(rep) != 10:
                                errors.append(("madd", rep))
                            added[t].extend(("shared", "m-%d-%d-%d" % (t, i, j)) for j in range(10))
                finally:
                    r.close()
            except Exception as exc:  # noqa: BLE001 - reported below
                errors.append(("exception", repr(exc)))

        workers = [threading.Thread(target=worker, args=(t,), daemon=True) for t in range(threads_n)]
        for w in workers:
            w.start()
        for w in workers:
            w.join(45)
        self.assertFalse(any(w.is_alive() for w in workers), "workers did not finish in time")
        self.assertEqual(errors, [])
        # No false negatives afterwards, for every item of every thread.
        r = self.server.client()
        self.addCleanup(r.close)
        by_key = {}
        for items in added:
            for key, item in items:
                by_key.setdefault(key, []).append(item)
        for key, items in by_key.items():
            self.assertEqual(r.execute_command("BF.MEXISTS", key, *items), [1] * len(items), key)
        distinct_shared = len(set(by_key["shared"]))
        inserted = r.execute_command("BF.INFO", "shared", "ITEMS")[0]
        self.assertLessEqual(inserted, distinct_shared)
        self.assertGreater(inserted, distinct_shared * 0.97)
        self.assertEqual(r.dbsize(), 1 + threads_n)

    def test_connected_clients_reflects_open_connections(self):
        probe = self.conn()
        self.wait_for_clients(probe, 1)
        extra = [self.conn() for _ in range(10)]
        for c in extra:
            self.assertEqual(c.call("PING"), b"PONG")
        self.wait_for_clients(probe, 11)
        for c in extra[:6]:
            c.close()
        self.wait_for_clients(probe, 5)
        listing = probe.call("CLIENT", "LIST").decode().strip().splitlines()
        self.assertEqual(len(listing), 5)
        for c in extra[6:]:
            c.close()
        self.wait_for_clients(probe, 1)

    def test_protocol_error_on_one_of_16_connections(self):
        conns = [self.conn() for _ in range(16)]
        for i, c in enumerate(conns):
            self.assertEqual(c.call("BF.ADD", "pe-%d" % i, "x"), 1)
        conns[7].send(b"*1\r\n$abc\r\n")
        data, closed = conns[7].read_all_until_closed(timeout=10)
        self.assertTrue(data.startswith(b"-ERR Protocol error"), data)
        self.assertTrue(closed)
        for i, c in enumerate(conns):
            if i == 7:
                continue
            self.assertEqual(c.call("BF.EXISTS", "pe-%d" % i, "x"), 1)
            self.assertEqual(c.call("PING"), b"PONG")
        self.assertEqual(conns[0].call("EXISTS", "pe-7"), 1)  # its earlier write stays

    def test_client_not_reading_a_huge_pipeline_does_not_block_others(self):
        hog = socket.create_connection(("127.0.0.1", self.server.port), timeout=5)
        self.addCleanup(hog.close)
        hog.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        # ~100k ECHO requests with 1 KB replies: ~100 MB of replies nobody reads.
        payload = b"x" * 1024
        chunk = encode("ECHO", payload) * 1000
        sent = [0]

        def flood():
            try:
                hog.settimeout(5)
                for _ in range(100):
                    hog.sendall(chunk)
                    sent[0] += 1
            except OSError:
                pass  # the server may stop reading us, or close us: both fine

        flooder = threading.Thread(target=flood, daemon=True)
        flooder.start()
        # Once the flood is under way (its first thousand requests sent),
        # other clients are served meanwhile. A connection the hog held up
        # would wait until the hog is closed, and time out.
        wait_until(lambda: sent[0] != 0 or not flooder.is_alive(), 60, "the flood to start",
                   interval=0.01)
        others = [self.conn(timeout=30) for _ in range(4)]
        for round_ in range(50):
            for i, c in enumerate(others):
                self.assertIn(c.call("BF.ADD", "other-%d" % i, "r%d" % round_, timeout=30), (0, 1))
                self.assertEqual(c.call("BF.EXISTS", "other-%d" % i, "r%d" % round_, timeout=30), 1)
        fresh = self.conn(timeout=30)
        self.assertEqual(fresh.call("PING"), b"PONG")
        flooder.join(30)
        self.assertFalse(flooder.is_alive())
        hog.close()
        self.assertEqual(fresh.call("PING"), b"PONG")
        self.assertIsNone(self.server.process.poll())

    def test_client_kill_id_closes_that_connection(self):
        victim = self.conn()
        victim_id = victim.call("CLIENT", "ID")
        self.assertIsInstance(victim_id, int)
        bystander = self.conn()
        killer = self.conn()
        self.assertEqual(killer.call("CLIENT", "KILL", "ID", str(victim_id)), 1)
        data, closed = victim.read_all_until_closed(timeout=5)
        self.assertEqual(data, b"")
        self.assertTrue(closed)
        self.assertEqual(bystander.call("PING"), b"PONG")
        self.assertEqual(killer.call("PING"), b"PONG")
        ids = [line.split(" ")[0] for line in killer.call("CLIENT", "LIST").decode().splitlines() if line]
        self.assertNotIn("id=%d" % victim_id, ids)
        # Killing an id that does not exist: 0 clients killed (Redis 7 replies an error
        # for the legacy form only).
        reply = killer.call("CLIENT", "KILL", "ID", str(victim_id))
        self.assertTrue(reply == 0 or isinstance(reply, Err), reply)
        self.assertIsInstance(killer.call("CLIENT", "KILL", "ID", "notanumber"), Err)
        # As Redis: the caller is skipped (SKIPME yes by default) unless it
        # says SKIPME no; then the reply still arrives first.
        own_id = str(killer.call("CLIENT", "ID"))
        self.assertEqual(killer.call("CLIENT", "KILL", "ID", own_id), 0)
        self.assertEqual(killer.call("PING"), b"PONG")
        self.assertEqual(killer.call("CLIENT", "KILL", "ID", own_id, "SKIPME", "no"), 1)
        data, closed = killer.read_all_until_closed(timeout=5)
        self.assertTrue(closed)

    def test_client_setname_visible_to_others(self):
        named = [self.conn() for _ in range(5)]
        for i, c in enumerate(named):
            self.assertEqual(c.call("CLIENT", "SETNAME", "conn-%d" % i), b"OK")
        probe = self.conn()
        listing = probe.call("CLIENT", "LIST").decode()
        for i in range(5):
            self.assertIn("name=conn-%d " % i, listing)
        self.assertEqual(named[3].call("CLIENT", "GETNAME"), b"conn-3")


if __name__ == "__main__":
    unittest.main()




class HostileClientsTest(harness.SharedServerTestCase):
    def test_announced_huge_bulks_cost_only_what_was_sent(self):
        """Clients announcing 512 MB arguments and sending little must not make
        the server reserve 512 MB each."""
        before = rss_bytes(self.server.process.pid)
        socks = []
        try:
            for _ in range(20):
                s = harness.raw_connection(self.server.port)
                s.sendall(b"*2\r\n$4\r\nECHO\r\n$536870912\r\n" + b"x" * 4096)
                socks.append(s)
            # Wait (bounded) until the server has read what the 20 sent.
            with RespConnection(self.server.port) as c:
                def buffered():
                    listing = c.call("CLIENT", "LIST").decode()
                    return sum(int(f[5:]) for f in listing.split() if f.startswith("qbuf="))
                wait_until(lambda: buffered() >= 20 * 4096, 60,
                           "the server to read what the 20 clients sent")
            grown = rss_bytes(self.server.process.pid) - before
            self.assertLess(grown, 64 * 1024 * 1024, "RSS grew by %d bytes" % grown)
        finally:
            for s in socks:
                s.close()
        with RespConnection(self.server.port) as c:
            self.assertEqual(c.call("PING"), b"PONG")
