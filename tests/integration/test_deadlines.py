"""Deadlines are redone, never re-decided (proto/journal.md, "Deadlines").

A key whose deadline was moved or removed before it passed keeps every item
after kill -9, after SIGTERM and on replicas, even when the old deadline has
passed by the time the records are redone; a key that did expire is gone
everywhere. Each test lets real deadlines pass during the test.
"""

import os
import socket
import threading
import time
import unittest

from harness import BINARY, Server, missing_items, scandump, wait_until

SANITIZED = "/asan/" in BINARY or "/tsan/" in BINARY
# Short deadlines: long enough that the command after them (PERSIST, a
# longer EXPIRE) lands before they pass, even on a sanitizer build; every
# test checks that it did.
SHORT_MS = 3000 if SANITIZED else 1200


def key_state(client):
    """Every visible key: (EXPIRETIME in seconds, BF.INFO, SCANDUMP chunks)."""
    state = {}
    for key in sorted(client.keys("*")):
        state[key] = (client.execute_command("EXPIRETIME", key),
                      client.execute_command("BF.INFO", key), scandump(client, key))
    return state


def wait_past(deadline_ms):
    """Waits (polling the clock) until the wall clock is past `deadline_ms`."""
    while time.time() * 1000 < deadline_ms + 50:
        time.sleep(0.02)


class Patterns:
    """The ways a user keeps a key alive by moving its deadline. Each
    returns {key: items that must answer 1}; `doomed` gets the keys that
    must be gone once the short deadlines pass."""

    def __init__(self, client):
        self.c = client
        self.doomed = []

    def items(self, key, n):
        return ["%s-%d" % (key, i) for i in range(n)]

    def expire_add_persist(self):
        items = self.items("eap", 500)
        self.c.execute_command("BF.MADD", "eap", *items[:3])
        assert self.c.pexpire("eap", SHORT_MS)
        self.c.execute_command("BF.MADD", "eap", *items[3:])
        assert self.c.persist("eap")
        return {"eap": items}

    def sliding_ttl(self):
        # EXPIRE after each add, the later ones far in the future.
        items = self.items("slide", 500)
        for i in range(0, 500, 50):
            self.c.execute_command("BF.MADD", "slide", *items[i:i + 50])
            assert self.c.pexpire("slide", SHORT_MS if i < 250 else 3600 * 1000)
        return {"slide": items}

    def expire_rename_persist(self):
        items = self.items("src", 500)
        self.c.execute_command("BF.MADD", "src", *items)
        assert self.c.pexpire("src", SHORT_MS)
        self.c.rename("src", "dst")
        assert self.c.persist("dst")
        return {"dst": items}

    def restore_persist(self):
        items = self.items("orig", 500)
        self.c.execute_command("BF.MADD", "orig", *items)
        payload = self.c.dump("orig")
        self.c.execute_command("RESTORE", "restored", SHORT_MS, payload)
        assert self.c.persist("restored")
        return {"orig": items, "restored": items}

    def expire_save_persist(self):
        items = self.items("saved", 500)
        self.c.execute_command("BF.MADD", "saved", *items)
        assert self.c.pexpire("saved", SHORT_MS)
        self.c.save()
        assert self.c.persist("saved")
        return {"saved": items}

    def expiring_for_real(self):
        # Keys whose deadline passes: gone after every restart and on
        # replicas; one renamed, one restored, one with a moved deadline.
        self.c.execute_command("BF.MADD", "gone", "a", "b")
        self.c.pexpire("gone", SHORT_MS // 2)
        self.c.execute_command("BF.ADD", "gone-renamed", "a")
        self.c.pexpire("gone-renamed", SHORT_MS // 2)
        self.c.rename("gone-renamed", "gone-renamed-to")
        self.c.execute_command("BF.ADD", "gone-moved", "a")
        self.c.pexpire("gone-moved", 3600 * 1000)
        self.c.pexpire("gone-moved", SHORT_MS // 2)
        self.doomed += ["gone", "gone-renamed-to", "gone-moved"]
        return {}

    def all(self):
        """Runs every pattern; returns (every key's items, the latest short
        deadline set, in ms since the epoch)."""
        started = time.time() * 1000
        expected = {}
        for pattern in (self.expire_add_persist, self.sliding_ttl, self.expire_rename_persist,
                        self.restore_persist, self.expire_save_persist, self.expiring_for_real):
            expected.update(pattern())
        # Every PERSIST above returned 1, so none came after its deadline.
        assert time.time() * 1000 < started + SHORT_MS, "too slow: a deadline passed mid-pattern"
        return expected, time.time() * 1000 + SHORT_MS


class Restarts(unittest.TestCase):
    def setUp(self):
        self.servers = []

    def tearDown(self):
        for server in self.servers:
            server.cleanup()

    def check(self, client, expected, live, what):
        for key, items in expected.items():
            self.assertEqual(missing_items(client, key, items), [], "%s: %s" % (what, key))
        self.assertEqual(client.ttl("eap"), -1, what)
        self.assertEqual(sorted(key_state(client)), sorted(live), what + ": keys")
        self.assertTrue(key_state(client) == live, what + ": deadlines, BF.INFO or bits differ")

    def test_moved_deadlines_keep_every_item_through_kill_9_and_sigterm(self):
        # --save "": the journal alone carries the deadlines (a SAVE in the
        # middle puts some in the snapshot too).
        server = Server(save='""')
        self.servers.append(server)
        server.start()
        client = server.client()
        patterns = Patterns(client)
        expected, last_deadline = patterns.all()
        wait_past(last_deadline)
        live = key_state(client)
        for key in patterns.doomed:
            self.assertEqual(client.exists(key), 0, key)
        self.check(client, expected, live, "live")

        self.assertEqual(server.kill(), -9)
        server.start()
        self.check(server.client(), expected, live, "after kill -9")
        # The keys that expired while the server was down left as DELs:
        # nothing comes back at the next start either.
        self.assertEqual(server.client().dbsize(), len(live))

        self.assertEqual(server.terminate(), 0)
        server.start()
        self.check(server.client(), expected, live, "after SIGTERM")

    def test_keys_that_expire_while_the_server_is_down_are_gone_and_journaled_as_dels(self):
        server = Server(save='""')
        self.servers.append(server)
        server.start()
        client = server.client()
        client.execute_command("BF.MADD", "short", "a", "b")
        client.pexpire("short", SHORT_MS)
        client.execute_command("BF.MADD", "long", "a", "b")
        client.expire("long", 3600)
        deadline = time.time() * 1000 + SHORT_MS
        self.assertEqual(server.kill(), -9)
        wait_past(deadline)
        server.start()
        client = server.client()
        self.assertEqual(client.keys("*"), [b"long"])
        self.assertEqual(client.dbsize(), 1)
        self.assertEqual(client.info("persistence")["rdb_last_load_keys_expired"], 1)
        self.assertEqual(server.kill(), -9)
        server.start()
        self.assertEqual(server.client().dbsize(), 1)


class HeldLink:
    """A TCP proxy between a replica and its primary that can hold what the
    primary sends: the replica then applies it later, after deadlines that
    the records were decided before have passed on its clock. `hold_after`
    (bytes from the primary) starts holding once seen."""

    def __init__(self, primary_port, hold_after=None):
        self.primary_port = primary_port
        self.hold_after = hold_after
        self.holding = threading.Event()
        self.released = threading.Event()
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(4)
        self.port = self.listener.getsockname()[1]
        self.sockets = [self.listener]
        threading.Thread(target=self.accept, daemon=True).start()

    def hold(self):
        self.holding.set()

    def release(self):
        self.released.set()

    def accept(self):
        # One link after another: a replica that restarts connects again.
        while True:
            try:
                replica, _ = self.listener.accept()
                primary = socket.create_connection(("127.0.0.1", self.primary_port))
            except OSError:
                return
            self.sockets += [replica, primary]
            for source, target, from_primary in ((replica, primary, False),
                                                 (primary, replica, True)):
                threading.Thread(target=self.pump, args=(source, target, from_primary),
                                 daemon=True).start()

    def pump(self, source, target, from_primary):
        seen = b""
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                if from_primary and self.hold_after is not None and not self.holding.is_set():
                    at = (seen + data).find(self.hold_after)
                    if at >= 0:
                        # Up to the end of the mark's line goes; the rest waits.
                        end = (seen + data).index(b"\n", at) + 1 - len(seen)
                        target.sendall(data[:end])
                        self.holding.set()
                        data = data[end:]
                        self.released.wait(120)
                        if data:
                            target.sendall(data)
                        continue
                    seen = (seen + data)[-len(self.hold_after):]
                if from_primary and self.holding.is_set():
                    self.released.wait(120)
                target.sendall(data)
        except OSError:
            pass
        finally:
            for s in (source, target):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self):
        self.released.set()
        for s in self.sockets:
            s.close()


class Replicas(unittest.TestCase):
    def setUp(self):
        self.servers = []
        self.links = []

    def tearDown(self):
        for link in self.links:
            link.close()
        for server in self.servers:
            server.cleanup()

    def start(self, *args):
        server = Server(*args)
        self.servers.append(server)
        server.start()
        return server

    def replica_through(self, link):
        return self.start("--replicaof", "127.0.0.1 %d" % link.port)

    def assert_same_keys(self, p, r, what):
        primary, replica = key_state(p), key_state(r)
        self.assertEqual(sorted(primary), sorted(replica), what + ": keys")
        self.assertTrue(primary == replica, what + ": deadlines, BF.INFO or bits differ")

    def test_persist_that_reaches_the_replica_after_the_deadline_keeps_the_keys(self):
        primary = self.start()
        link = HeldLink(primary.port)
        self.links.append(link)
        replica = self.replica_through(link)
        r = replica.client()
        wait_until(lambda: r.info("replication")["master_link_status"] == "up",
                   what="the replica's link")
        p = primary.client()
        keys = ["k%d" % i for i in range(400)]
        pipe = p.pipeline(transaction=False)
        for key in keys:
            pipe.execute_command("BF.MADD", key, key + "-a", key + "-b")
        pipe.execute()
        self.assertEqual(p.execute_command("WAIT", 1, 0), 1)
        deadline = int(time.time() * 1000) + SHORT_MS
        pipe = p.pipeline(transaction=False)
        for key in keys:
            pipe.pexpireat(key, deadline)
        pipe.execute()
        # The PEXPIREATs reach the replica; what follows waits in the link
        # until the deadline has passed on the replica's clock.
        self.assertEqual(p.execute_command("WAIT", 1, 0), 1)
        link.hold()
        pipe = p.pipeline(transaction=False)
        for key in keys[:300]:
            pipe.persist(key)
        self.assertEqual(pipe.execute(), [True] * 300)
        self.assertLess(time.time() * 1000, deadline, "too slow: the deadline passed")
        wait_past(deadline)
        # Logically expired on the replica, and hidden, not yet deleted.
        self.assertEqual(r.exists("k0"), 0)
        self.assertEqual(r.exists("k399"), 0)
        link.release()
        self.assertEqual(p.execute_command("WAIT", 1, 5000), 1)
        for key in keys[:300]:
            self.assertEqual(missing_items(r, key, [key + "-a", key + "-b"]), [], key)
        self.assert_same_keys(p, r, "after the held PERSISTs")
        self.assertEqual(len(key_state(r)), 300)
        # The 100 left to expire: the primary's DELs remove them (its
        # active expiry finds them within a few cycles).
        wait_until(lambda: p.dbsize() == 300, what="the primary to expire the rest")
        wait_until(lambda: r.dbsize() == 300, what="the primary's DELs on the replica")

    def test_every_pattern_reaches_a_replica_after_its_deadlines_intact(self):
        primary = self.start()
        link = HeldLink(primary.port)
        self.links.append(link)
        replica = self.replica_through(link)
        r = replica.client()
        wait_until(lambda: r.info("replication")["master_link_status"] == "up",
                   what="the replica's link")
        p = primary.client()
        # Everything the patterns record reaches the replica only once
        # their short deadlines have passed on its clock.
        link.hold()
        patterns = Patterns(p)
        expected, last_deadline = patterns.all()
        wait_past(last_deadline)
        link.release()
        self.assertEqual(p.execute_command("WAIT", 1, 10000), 1)
        for key, items in expected.items():
            self.assertEqual(missing_items(r, key, items), [], key)
        for key in patterns.doomed:
            self.assertEqual(r.exists(key), 0, key)
        self.assert_same_keys(p, r, "on the replica")
        # A replica restarted from its own journal keeps them too.
        self.assertEqual(replica.kill(), -9)
        replica.start()
        r = replica.client()
        wait_until(lambda: r.info("replication")["master_link_status"] == "up",
                   what="the restarted replica's link")
        self.assertEqual(p.execute_command("WAIT", 1, 10000), 1)
        self.assert_same_keys(p, r, "on the restarted replica")

    def test_persist_during_a_full_sync_after_the_deadline_keeps_the_key(self):
        primary = self.start()
        p = primary.client()
        items = ["x%d" % i for i in range(2000)]
        p.execute_command("BF.MADD", "k", *items)
        p.pexpire("k", SHORT_MS)
        deadline = time.time() * 1000 + SHORT_MS
        # The snapshot (with k's deadline) goes out; the stream after it
        # (the PERSIST) is held until the deadline has passed.
        link = HeldLink(primary.port, hold_after=b"+FULLRESYNC")
        self.links.append(link)
        replica = self.replica_through(link)
        wait_until(link.holding.is_set, what="the full synchronization to begin")
        self.assertTrue(p.persist("k"))
        self.assertLess(time.time() * 1000, deadline, "too slow: the deadline passed")
        wait_past(deadline)
        link.release()
        r = replica.client()
        wait_until(lambda: r.info("replication")["master_link_status"] == "up",
                   what="the replica's link")
        self.assertEqual(p.execute_command("WAIT", 1, 5000), 1)
        self.assertEqual(missing_items(r, "k", items), [])
        self.assertEqual(r.ttl("k"), -1)
        self.assert_same_keys(p, r, "after the full synchronization")

    def test_promoted_replica_expires_what_its_primary_left(self):
        primary = self.start()
        link = HeldLink(primary.port)
        self.links.append(link)
        replica = self.replica_through(link)
        r = replica.client()
        wait_until(lambda: r.info("replication")["master_link_status"] == "up",
                   what="the replica's link")
        p = primary.client()
        p.execute_command("BF.ADD", "short", "a")
        p.pexpire("short", SHORT_MS)
        p.execute_command("BF.ADD", "long", "a")
        self.assertEqual(p.execute_command("WAIT", 1, 0), 1)
        deadline = time.time() * 1000 + SHORT_MS
        # The primary's DEL, once its expiry finds the key, never arrives:
        # the link holds it, and the primary dies.
        link.hold()
        wait_past(deadline)
        # Hidden on the replica, but kept until the primary's DEL.
        self.assertEqual(r.exists("short"), 0)
        self.assertEqual(r.dbsize(), 2)
        self.assertEqual(primary.kill(), -9)
        self.assertEqual(r.execute_command("REPLICAOF", "NO", "ONE"), b"OK")
        wait_until(lambda: r.dbsize() == 1, what="the promoted replica to expire the key")
        self.assertEqual(r.keys("*"), [b"long"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
