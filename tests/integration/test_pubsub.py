"""Pub/Sub with Redis 7's semantics: SUBSCRIBE, PSUBSCRIBE, their UNSUBSCRIBE
forms, PUBLISH and PUBSUB, in RESP2 (subscriber mode) and RESP3 (pushes),
ACL channel rules, CLIENT LIST / KILL TYPE pubsub, and a subscriber that
does not read is cut off at its output limit without holding the server's
memory."""

import os
import socket
import tempfile
import unittest

import redis

from harness import Server, SharedServerTestCase, raw_connection, wait_until


def resp(*words):
    out = b"*%d\r\n" % len(words)
    for word in words:
        word = word if isinstance(word, bytes) else str(word).encode()
        out += b"$%d\r\n%s\r\n" % (len(word), word)
    return out


def read_reply(conn):
    """One RESP2/RESP3 reply: (type byte, value)."""
    line = conn.readline()
    if not line:
        raise ConnectionError("closed")
    kind, rest = line[:1], line[1:-2]
    if kind in (b"+", b"-"):
        return kind, rest.decode()
    if kind == b":":
        return kind, int(rest)
    if kind == b"_":
        return kind, None
    if kind == b"#":
        return kind, rest == b"t"
    if kind == b"$":
        n = int(rest)
        if n < 0:
            return kind, None
        return kind, conn.read(n + 2)[:-2]
    if kind in (b"*", b">", b"%"):
        n = int(rest)
        if n < 0:
            return kind, None
        count = n * 2 if kind == b"%" else n
        return kind, [read_reply(conn)[1] for _ in range(count)]
    raise AssertionError("unexpected reply %r" % line)


def next_message(pubsub, timeout=10.0):
    def message():
        got = pubsub.get_message(timeout=0.5)  # the wait between looks
        return got if got is not None and got["type"] in ("message", "pmessage") else None
    return wait_until(message, timeout, "a message", interval=0)


class Messages(SharedServerTestCase):
    def setUp(self):
        self.r = self.server.client()

    def test_subscribers_receive_what_is_published(self):
        pubsub = self.server.client().pubsub()
        pubsub.subscribe("news")
        pubsub.psubscribe("weather:*")
        wait_until(lambda: self.r.pubsub_numsub("news") == [(b"news", 1)], what="the subscription")
        self.assertEqual(self.r.publish("news", "hello"), 1)
        message = next_message(pubsub)
        self.assertEqual((message["type"], message["channel"], message["data"]),
                         ("message", b"news", b"hello"))
        self.assertEqual(self.r.publish("weather:paris", "rain"), 1)
        message = next_message(pubsub)
        self.assertEqual((message["type"], message["pattern"], message["channel"], message["data"]),
                         ("pmessage", b"weather:*", b"weather:paris", b"rain"))
        self.assertEqual(self.r.publish("nobody", "x"), 0)
        pubsub.close()

    def test_subscriptions_are_confirmed_with_counts_and_unsubscribe_all(self):
        with raw_connection(self.server.port) as sock:
            conn = sock.makefile("rb")
            sock.sendall(resp("SUBSCRIBE", "a", "b", "a") + resp("PSUBSCRIBE", "p*"))
            self.assertEqual(read_reply(conn), (b"*", [b"subscribe", b"a", 1]))
            self.assertEqual(read_reply(conn), (b"*", [b"subscribe", b"b", 2]))
            self.assertEqual(read_reply(conn), (b"*", [b"subscribe", b"a", 2]))
            self.assertEqual(read_reply(conn), (b"*", [b"psubscribe", b"p*", 3]))
            sock.sendall(resp("UNSUBSCRIBE"))
            confirmations = sorted(read_reply(conn)[1][1] for _ in range(2))
            self.assertEqual(confirmations, [b"a", b"b"])
            sock.sendall(resp("PUNSUBSCRIBE", "p*", "never"))
            self.assertEqual(read_reply(conn), (b"*", [b"punsubscribe", b"p*", 0]))
            self.assertEqual(read_reply(conn), (b"*", [b"punsubscribe", b"never", 0]))
            sock.sendall(resp("UNSUBSCRIBE"))
            self.assertEqual(read_reply(conn), (b"*", [b"unsubscribe", None, 0]))
            # No longer subscribed: every command runs again.
            sock.sendall(resp("BF.ADD", "after", "x"))
            self.assertEqual(read_reply(conn), (b":", 1))

    def test_a_subscribed_resp2_client_may_only_subscribe_ping_quit_and_reset(self):
        with raw_connection(self.server.port) as sock:
            conn = sock.makefile("rb")
            sock.sendall(resp("SUBSCRIBE", "c"))
            read_reply(conn)
            sock.sendall(resp("BF.ADD", "k", "x") + resp("PING") + resp("PING", "hi"))
            kind, text = read_reply(conn)
            self.assertEqual(kind, b"-")
            self.assertEqual(text, "ERR Can't execute 'bf.add': only (P|S)SUBSCRIBE / "
                             "(P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context")
            self.assertEqual(read_reply(conn), (b"*", [b"pong", b""]))
            self.assertEqual(read_reply(conn), (b"*", [b"pong", b"hi"]))
            sock.sendall(resp("RESET") + resp("BF.EXISTS", "k", "x"))
            self.assertEqual(read_reply(conn), (b"+", "RESET"))
            self.assertEqual(read_reply(conn), (b":", 0))

    def test_resp3_messages_are_pushes_between_replies(self):
        with raw_connection(self.server.port) as sock:
            conn = sock.makefile("rb")
            sock.sendall(resp("HELLO", "3"))
            self.assertEqual(read_reply(conn)[0], b"%")
            sock.sendall(resp("SUBSCRIBE", "r3"))
            self.assertEqual(read_reply(conn), (b">", [b"subscribe", b"r3", 1]))
            # RESP3 clients keep running commands while subscribed.
            sock.sendall(resp("BF.ADD", "r3key", "x"))
            self.assertEqual(read_reply(conn), (b"#", True))  # RESP3: a boolean
            self.assertEqual(self.r.publish("r3", "pushed"), 1)
            self.assertEqual(read_reply(conn), (b">", [b"message", b"r3", b"pushed"]))

    def test_pubsub_introspection(self):
        subscribers = [self.server.client().pubsub() for _ in range(2)]
        subscribers[0].subscribe("intro:a", "intro:b")
        subscribers[1].subscribe("intro:a")
        subscribers[1].psubscribe("intro:*", "other:*")
        wait_until(lambda: self.r.pubsub_numpat() == 2, what="the patterns")
        self.assertEqual(sorted(c for c in self.r.pubsub_channels("intro:*")),
                         [b"intro:a", b"intro:b"])
        self.assertEqual(self.r.pubsub_numsub("intro:a", "intro:b", "intro:c"),
                         [(b"intro:a", 2), (b"intro:b", 1), (b"intro:c", 0)])
        # One receiver for the channel, one for the pattern, twice over.
        self.assertEqual(self.r.publish("intro:a", "m"), 3)
        stats = self.r.info("stats")
        self.assertGreaterEqual(stats["pubsub_channels"], 2)
        self.assertGreaterEqual(stats["pubsub_patterns"], 2)
        for subscriber in subscribers:
            subscriber.close()
        # Closed connections leave their channels.
        wait_until(lambda: self.r.pubsub_numsub("intro:a") == [(b"intro:a", 0)],
                   what="the subscribers to leave")
        wait_until(lambda: self.r.pubsub_numpat() == 0, what="the patterns to go")

    def test_client_list_and_kill_by_type_pubsub(self):
        subscriber = self.server.client()
        subscriber.client_setname("listener")
        pubsub = subscriber.pubsub()
        pubsub.subscribe("k1", "k2")
        pubsub.psubscribe("k*")
        wait_until(lambda: any(c.get("name") == "listener" and c["sub"] == "2"
                               for c in self.r.client_list()), what="the subscriber listed")
        line = [c for c in self.r.client_list() if c["name"] == "listener"][0]
        self.assertEqual((line["sub"], line["psub"]), ("2", "1"))
        self.assertIn("P", line["flags"])
        self.assertEqual([c["name"] for c in self.r.client_list(_type="pubsub")], ["listener"])
        # TYPE normal spares subscribers.
        self.r.execute_command("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
        self.assertEqual(self.r.execute_command("CLIENT", "KILL", "TYPE", "pubsub"), 1)
        wait_until(lambda: self.r.pubsub_numsub("k1") == [(b"k1", 0)], what="the kill")
        pubsub.close()

    def test_client_kill_maxage(self):
        young = self.server.client()
        young.client_setname("young")
        young.ping()
        self.assertEqual(self.r.execute_command("CLIENT", "KILL", "MAXAGE", 3600), 0)
        self.assertEqual(young.ping(), True)


class Channels(unittest.TestCase):
    """ACL channel rules: &pattern allows channels matching it; PSUBSCRIBE's
    pattern must be one of the user's own; new users have no channels."""

    def test_channel_rules(self):
        with tempfile.TemporaryDirectory(prefix="bloomery-acl-") as directory:
            path = os.path.join(directory, "users.acl")
            with open(path, "w") as f:
                f.write("user default on nopass ~* &* +@all\n")
                f.write("user news on >pw ~* &news:* +@all\n")
                f.write("user plain on >pw ~* +@all\n")
            with Server("--aclfile", path) as server:
                news = server.client(username="news", password="pw")
                plain = server.client(username="plain", password="pw")
                self.assertEqual(news.publish("news:1", "x"), 0)
                with self.assertRaisesRegex(redis.exceptions.NoPermissionError, "channels"):
                    news.publish("sports", "x")
                with self.assertRaisesRegex(redis.exceptions.NoPermissionError, "channels"):
                    plain.publish("news:1", "x")
                with raw_connection(server.port) as sock:
                    conn = sock.makefile("rb")
                    sock.sendall(resp("AUTH", "news", "pw"))
                    read_reply(conn)
                    # All or nothing: one channel refused subscribes to none.
                    sock.sendall(resp("SUBSCRIBE", "news:a", "sports"))
                    kind, text = read_reply(conn)
                    self.assertEqual(kind, b"-")
                    self.assertIn("NOPERM", text)
                    sock.sendall(resp("PSUBSCRIBE", "news:1*"))
                    self.assertEqual(read_reply(conn)[0], b"-")
                    sock.sendall(resp("PSUBSCRIBE", "news:*"))
                    self.assertEqual(read_reply(conn), (b"*", [b"psubscribe", b"news:*", 1]))
                users = server.client().execute_command("ACL", "LIST")
                self.assertIn(b"&news:*", b" ".join(users))
                self.assertIn(b"resetchannels", b" ".join(users))


class SlowSubscriber(unittest.TestCase):
    def test_a_subscriber_that_does_not_read_is_closed_at_its_limit(self):
        # The pubsub class applies to a subscribed client (as Redis).
        with Server("--client-output-buffer-limit", "normal 0 0 0 pubsub 4mb 0 0") as server:
            publisher = server.client()
            sock = raw_connection(server.port)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.sendall(resp("SUBSCRIBE", "flood"))
            wait_until(lambda: publisher.pubsub_numsub("flood") == [(b"flood", 1)],
                       what="the subscription")
            payload = "x" * 65536
            before = publisher.info("memory")["used_memory"]
            sent = 0
            # Never read: the server cuts it off and lets it go.
            while publisher.pubsub_numsub("flood") == [(b"flood", 1)] and sent < 4000:
                publisher.publish("flood", payload)
                sent += 1
            self.assertLess(sent, 4000)
            wait_until(lambda: publisher.info("memory")["used_memory"] < before + 2 * 1024 * 1024,
                       what="the subscriber's buffer to be given back")
            # The server carries on.
            self.assertEqual(publisher.execute_command("BF.ADD", "alive", "x"), 1)
            sock.close()


if __name__ == "__main__":
    unittest.main()
