"""MULTI, EXEC, DISCARD, WATCH and UNWATCH with Redis's semantics, driven by
redis-py's own transactional pipelines and WATCH loops: queue-time errors
abort, errors at run time are replies, a watched key changed (or expired)
makes EXEC answer nil, a transaction is never seen half applied, and the
journal and replicas receive it as one unit."""

import socket
import threading
import unittest

import redis

from harness import (BINARY, Server, SharedServerTestCase, raw_connection, scandump,
                     wait_until)

SANITIZED = "/asan/" in BINARY or "/tsan/" in BINARY


def resp(*words):
    out = b"*%d\r\n" % len(words)
    for word in words:
        word = word if isinstance(word, bytes) else str(word).encode()
        out += b"$%d\r\n%s\r\n" % (len(word), word)
    return out


def read_reply(conn):
    """One RESP2 reply from a socket file: bytes, int, None, list or an
    Exception for an error."""
    line = conn.readline()
    kind, rest = line[:1], line[1:-2]
    if kind == b"+":
        return rest
    if kind == b"-":
        return redis.ResponseError(rest.decode())
    if kind == b":":
        return int(rest)
    if kind == b"$":
        n = int(rest)
        if n < 0:
            return None
        data = conn.read(n + 2)
        return data[:-2]
    if kind == b"*":
        n = int(rest)
        if n < 0:
            return None
        return [read_reply(conn) for _ in range(n)]
    raise AssertionError("unexpected reply %r" % line)


def client_fields(observer, client_id):
    """The CLIENT LIST fields of one client, as another client sees them."""
    for line in observer.execute_command("CLIENT", "LIST", "ID", client_id).decode().splitlines():
        fields = dict(f.split("=", 1) for f in line.split())
        if fields["id"] == str(client_id):
            return fields
    raise AssertionError("client %d is not listed" % client_id)


class Semantics(SharedServerTestCase):
    def setUp(self):
        self.r = self.server.client()
        self.r.flushall()

    def test_a_pipeline_is_one_transaction_with_every_reply(self):
        pipe = self.r.pipeline(transaction=True)
        pipe.execute_command("BF.RESERVE", "a", 0.01, 1000)
        pipe.execute_command("BF.ADD", "a", "x")
        pipe.execute_command("BF.MADD", "a", "x", "y")
        pipe.execute_command("BF.EXISTS", "a", "y")
        pipe.execute_command("BF.EXISTS", "a", "nope")
        self.assertEqual(pipe.execute(), [b"OK", 1, [0, 1], 1, 0])

    def test_queued_commands_answer_queued_and_run_at_exec(self):
        self.assertEqual(self.r.execute_command("MULTI"), b"OK")
        self.assertEqual(self.r.execute_command("BF.ADD", "q", "x"), b"QUEUED")
        # Not run yet: another client does not see the key.
        self.assertEqual(self.server.client().exists("q"), 0)
        self.assertEqual(self.r.execute_command("EXEC"), [1])
        self.assertEqual(self.r.execute_command("BF.EXISTS", "q", "x"), 1)

    def test_a_refused_command_aborts_the_whole_transaction(self):
        with raw_connection(self.server.port) as sock:
            conn = sock.makefile("rb")
            sock.sendall(resp("MULTI") + resp("BF.ADD", "k", "x") + resp("NOSUCHCOMMAND") +
                         resp("BF.ADD", "k") + resp("EXEC"))
            self.assertEqual(read_reply(conn), b"OK")
            self.assertEqual(read_reply(conn), b"QUEUED")
            self.assertIn("unknown command", str(read_reply(conn)))
            self.assertIn("wrong number of arguments", str(read_reply(conn)))
            error = read_reply(conn)
            self.assertIsInstance(error, redis.ResponseError)
            self.assertEqual(str(error),
                             "EXECABORT Transaction discarded because of previous errors.")
        self.assertEqual(self.r.exists("k"), 0)

    def test_errors_while_running_are_replies_and_the_rest_is_applied(self):
        self.r.execute_command("BF.RESERVE", "k", 0.01, 100)
        pipe = self.r.pipeline(transaction=True)
        pipe.execute_command("BF.ADD", "k", "a")
        pipe.execute_command("BF.RESERVE", "k", 0.01, 100)  # exists: an error
        pipe.execute_command("BF.ADD", "k", "b")
        results = pipe.execute(raise_on_error=False)
        self.assertEqual(results[0], 1)
        self.assertIsInstance(results[1], redis.ResponseError)
        self.assertEqual(results[2], 1)

    def test_control_errors(self):
        with self.assertRaisesRegex(redis.ResponseError, "EXEC without MULTI"):
            self.r.execute_command("EXEC")
        with self.assertRaisesRegex(redis.ResponseError, "DISCARD without MULTI"):
            self.r.execute_command("DISCARD")
        with raw_connection(self.server.port) as sock:
            conn = sock.makefile("rb")
            sock.sendall(resp("MULTI") + resp("MULTI") + resp("WATCH", "k") +
                         resp("BF.ADD", "k", "x") + resp("EXEC"))
            self.assertEqual(read_reply(conn), b"OK")
            self.assertEqual(str(read_reply(conn)), "ERR MULTI calls can not be nested")
            self.assertEqual(str(read_reply(conn)), "ERR WATCH inside MULTI is not allowed")
            self.assertEqual(read_reply(conn), b"QUEUED")
            # Neither error aborts the transaction (as in Redis).
            self.assertEqual(read_reply(conn), [1])

    def test_discard_drops_the_queue(self):
        self.r.execute_command("MULTI")
        self.r.execute_command("BF.ADD", "d", "x")
        self.assertEqual(self.r.execute_command("DISCARD"), b"OK")
        self.assertEqual(self.r.exists("d"), 0)
        with self.assertRaisesRegex(redis.ResponseError, "EXEC without MULTI"):
            self.r.execute_command("EXEC")

    def test_commands_not_allowed_inside_a_transaction(self):
        with raw_connection(self.server.port) as sock:
            conn = sock.makefile("rb")
            sock.sendall(resp("MULTI") + resp("SAVE") + resp("EXEC"))
            self.assertEqual(read_reply(conn), b"OK")
            self.assertEqual(str(read_reply(conn)),
                             "ERR Command not allowed inside a transaction")
            self.assertIn("EXECABORT", str(read_reply(conn)))

    def test_wait_inside_a_transaction_answers_at_once(self):
        pipe = self.r.pipeline(transaction=True)
        pipe.execute_command("BF.ADD", "w", "x")
        pipe.execute_command("WAIT", 1, 0)  # would wait forever outside EXEC
        self.assertEqual(pipe.execute(), [1, 0])

    def test_client_list_shows_the_queue(self):
        own_id = self.r.client_id()
        self.r.execute_command("MULTI")
        self.r.execute_command("BF.ADD", "l", "x")
        self.r.execute_command("BF.ADD", "l", "y")
        fields = client_fields(self.server.client(), own_id)
        self.assertIn("x", fields["flags"])
        self.assertEqual(fields["multi"], "2")
        self.assertGreater(int(fields["multi-mem"]), 0)
        self.r.execute_command("DISCARD")
        fields = client_fields(self.server.client(), own_id)
        self.assertNotIn("x", fields["flags"])
        self.assertEqual(fields["multi"], "-1")
        self.assertEqual(fields["multi-mem"], "0")

    def test_reset_ends_a_transaction(self):
        self.r.execute_command("MULTI")
        self.r.execute_command("BF.ADD", "r", "x")
        self.assertEqual(self.r.execute_command("RESET"), "RESET")
        with self.assertRaisesRegex(redis.ResponseError, "EXEC without MULTI"):
            self.r.execute_command("EXEC")
        self.assertEqual(self.r.exists("r"), 0)

    def test_commandstats_count_queued_commands_when_they_run(self):
        self.r.config_resetstat()
        pipe = self.r.pipeline(transaction=True)
        for i in range(3):
            pipe.execute_command("BF.ADD", "s", i)
        pipe.execute()
        stats = self.r.info("commandstats")
        self.assertEqual(stats["cmdstat_bf.add"]["calls"], 3)
        self.assertEqual(stats["cmdstat_exec"]["calls"], 1)
        self.assertEqual(stats["cmdstat_multi"]["calls"], 1)


class Watch(SharedServerTestCase):
    def setUp(self):
        self.r = self.server.client()
        self.r.flushall()

    def test_watch_loop_retries_until_it_wins(self):
        self.r.execute_command("BF.ADD", "w", "seed")
        other = self.server.client()
        attempts = []

        def move(pipe):
            attempts.append(1)
            pipe.execute_command("BF.EXISTS", "w", "seed")
            if len(attempts) == 1:
                # Someone else changes the key between WATCH and EXEC.
                other.execute_command("BF.ADD", "w", "meanwhile")
            pipe.multi()
            pipe.execute_command("BF.ADD", "w", "mine")

        result = self.r.transaction(move, "w")
        self.assertEqual(result, [1])
        self.assertEqual(len(attempts), 2)

    def test_a_watched_key_changed_makes_exec_answer_nil(self):
        cases = [
            ("an add", lambda c: c.execute_command("BF.ADD", "k", "new")),
            ("a delete", lambda c: c.delete("k")),
            ("an expiry set", lambda c: c.pexpire("k", 100000)),
            ("a rename away", lambda c: c.rename("k", "elsewhere")),
            ("a flush", lambda c: c.flushall()),
            ("a re-creation", lambda c: (c.delete("k"), c.execute_command("BF.ADD", "k", "old"))),
        ]
        for name, change in cases:
            with self.subTest(name):
                self.r.flushall()
                self.r.execute_command("BF.ADD", "k", "old")
                self.r.execute_command("WATCH", "k")
                change(self.server.client())
                self.r.execute_command("MULTI")
                self.r.execute_command("BF.ADD", "t", "x")
                self.assertIsNone(self.r.execute_command("EXEC"))
                self.assertEqual(self.r.exists("t"), 0)

    def test_a_key_created_after_watch_fails_the_exec(self):
        self.r.execute_command("WATCH", "absent")
        self.server.client().execute_command("BF.ADD", "absent", "x")
        self.r.execute_command("MULTI")
        self.r.execute_command("BF.ADD", "t", "x")
        self.assertIsNone(self.r.execute_command("EXEC"))

    def test_an_unchanged_watched_key_lets_exec_run(self):
        self.r.execute_command("BF.ADD", "k", "old")
        self.r.execute_command("WATCH", "k", "absent")
        # Adding an item already there changes nothing.
        self.server.client().execute_command("BF.ADD", "k", "old")
        self.r.execute_command("MULTI")
        self.r.execute_command("BF.ADD", "k", "mine")
        self.assertEqual(self.r.execute_command("EXEC"), [1])

    def test_a_watched_key_that_expires_fails_the_exec(self):
        self.r.execute_command("BF.ADD", "e", "x")
        self.r.pexpire("e", 300)
        self.r.execute_command("WATCH", "e")
        wait_until(lambda: self.server.client().exists("e") == 0, what="the key's expiry")
        self.r.execute_command("MULTI")
        self.r.execute_command("BF.ADD", "t", "x")
        self.assertIsNone(self.r.execute_command("EXEC"))

    def test_unwatch_and_discard_forget_the_watches(self):
        self.r.execute_command("BF.ADD", "k", "old")
        self.r.execute_command("WATCH", "k")
        self.server.client().execute_command("BF.ADD", "k", "new")
        self.r.execute_command("UNWATCH")
        self.r.execute_command("MULTI")
        self.r.execute_command("BF.ADD", "t", "x")
        self.assertEqual(self.r.execute_command("EXEC"), [1])
        self.r.execute_command("WATCH", "k")
        self.server.client().execute_command("BF.ADD", "k", "newer")
        self.r.execute_command("MULTI")
        self.r.execute_command("DISCARD")
        self.r.execute_command("MULTI")
        self.r.execute_command("BF.ADD", "t", "y")
        self.assertEqual(self.r.execute_command("EXEC"), [1])


class Isolation(unittest.TestCase):
    def test_no_reader_sees_a_transaction_half_applied(self):
        """Writers add the same item to two filters in one transaction; a
        reader reading both in one transaction must see both or neither, and
        the counts of both always equal."""
        with Server() as server:
            setup = server.client()
            for key in ("left", "right"):
                setup.execute_command("BF.RESERVE", key, 0.001, 100000)
            writers, items_per_writer = 4, 300 if SANITIZED else 1500
            failures = []
            done = threading.Event()

            def write(n):
                client = server.client()
                for i in range(items_per_writer):
                    pipe = client.pipeline(transaction=True)
                    item = "w%d-%d" % (n, i)
                    pipe.execute_command("BF.ADD", "left", item)
                    pipe.execute_command("BF.ADD", "right", item)
                    pipe.execute()

            def read():
                client = server.client()
                checks = 0
                while not done.is_set() or checks < 50:
                    pipe = client.pipeline(transaction=True)
                    pipe.execute_command("BF.CARD", "left")
                    pipe.execute_command("BF.INFO", "left", "ITEMS")
                    pipe.execute_command("BF.INFO", "right", "ITEMS")
                    pipe.execute_command("BF.CARD", "right")
                    card_left, left, right, card_right = pipe.execute()
                    if left != right or card_left != card_right:
                        failures.append((left, right, card_left, card_right))
                    checks += 1

            threads = [threading.Thread(target=write, args=(n,)) for n in range(writers)]
            reader = threading.Thread(target=read)
            reader.start()
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            done.set()
            reader.join()
            self.assertEqual(failures, [])
            info = setup.execute_command("BF.INFO", "left", "ITEMS")
            self.assertEqual(info, setup.execute_command("BF.INFO", "right", "ITEMS"))
            self.assertEqual(scandump(setup, "left"), scandump(setup, "right"))


class Durability(unittest.TestCase):
    def test_transactions_replay_and_replicate_exactly(self):
        with Server(save="") as primary:
            replica = Server("--replicaof", "127.0.0.1 %d" % primary.port)
            with replica:
                wait_until(lambda: replica.client().info("replication")["master_link_status"] ==
                           "up", what="the replica's link")
                client = primary.client()
                for i in range(200):
                    pipe = client.pipeline(transaction=True)
                    pipe.execute_command("BF.ADD", "a{t}", "i%d" % i)
                    pipe.execute_command("BF.MADD", "b{t}", "i%d" % i, "j%d" % i)
                    if i % 50 == 0:
                        pipe.execute_command("BF.RESERVE", "r%d" % i, 0.01, 10)
                        pipe.rename("r%d" % i, "renamed%d" % i)
                        pipe.pexpire("renamed%d" % i, 1000000)
                    pipe.execute()
                self.assertEqual(client.execute_command("WAIT", 1, 0), 1)
                expected = {key: scandump(client, key) for key in client.keys("*")}
                replica_client = replica.client()
                self.assertEqual({key: scandump(replica_client, key)
                                  for key in replica_client.keys("*")}, expected)
            primary.terminate()
            primary.start()
            restarted = primary.client()
            self.assertEqual({key: scandump(restarted, key) for key in restarted.keys("*")},
                             expected)


class Replica(unittest.TestCase):
    def test_a_transaction_of_writes_on_a_replica_is_aborted(self):
        with Server() as primary:
            replica = Server("--replicaof", "127.0.0.1 %d" % primary.port)
            with replica:
                wait_until(lambda: replica.client().info("replication")["master_link_status"] ==
                           "up", what="the replica's link")
                client = replica.client()
                client.execute_command("MULTI")
                # READONLY is found when queueing (the write is refused).
                with self.assertRaises(redis.exceptions.ReadOnlyError):
                    client.execute_command("BF.ADD", "k", "x")
                with self.assertRaises(redis.exceptions.ExecAbortError):
                    client.execute_command("EXEC")
                # Reads run.
                pipe = client.pipeline(transaction=True)
                pipe.execute_command("BF.EXISTS", "k", "x")
                self.assertEqual(pipe.execute(), [0])


class Limits(unittest.TestCase):
    def test_a_queue_past_the_query_buffer_limit_is_refused_and_given_back(self):
        with Server("--client-query-buffer-limit", "1mb") as server:
            client = server.client()
            before = client.info("memory")["used_memory"]
            own_id = client.client_id()
            client.execute_command("MULTI")
            refused = None
            for i in range(200):
                try:
                    client.execute_command("BF.ADD", "big", "x" * 16384 + str(i))
                except redis.ResponseError as error:
                    refused = str(error)
                    break
            self.assertIsNotNone(refused)
            self.assertIn("client-query-buffer-limit", refused)
            fields = client_fields(server.client(), own_id)
            self.assertGreater(int(fields["multi-mem"]), 900 * 1024)
            with self.assertRaises(redis.exceptions.ExecAbortError):
                client.execute_command("EXEC")
            self.assertEqual(client.exists("big"), 0)
            after = client.info("memory")["used_memory"]
            self.assertLess(after, before + 256 * 1024)


class Cluster(unittest.TestCase):
    def test_exec_of_keys_in_several_slots_is_crossslot(self):
        from harness import free_port
        port = free_port()
        with Server("--cluster-enabled", "yes", "--cluster-slots", "0-16383=127.0.0.1:%d" % port,
                    "--cluster-self", "127.0.0.1:%d" % port, port=port) as server:
            client = server.client()
            client.execute_command("MULTI")
            client.execute_command("BF.ADD", "{a}1", "x")
            client.execute_command("BF.ADD", "{b}1", "x")
            with self.assertRaisesRegex(redis.ResponseError, "CROSSSLOT"):
                client.execute_command("EXEC")
            self.assertEqual(client.exists("{a}1"), 0)
            client.execute_command("MULTI")
            client.execute_command("BF.ADD", "{a}1", "x")
            client.execute_command("BF.ADD", "{a}2", "x")
            self.assertEqual(client.execute_command("EXEC"), [1, 1])


if __name__ == "__main__":
    unittest.main()
