"""SAVE runs on the persistence thread.

The client that sends SAVE waits for its reply (sent once the snapshot is
durable) and its pipelined commands wait behind it, but every other client on
the same worker thread keeps being served meanwhile. Also pins what happens
when the waiting client disconnects, is killed, or the server stops.

Assertions are on the order of events, never on durations: the filter is big
enough (60 MB) that a save takes many round trips of a PING.
"""

import os
import select
import unittest

import harness
from test_protocol import Err, RespConnection

BIG_CAPACITY = 50000000  # 1 %: about 60 MB of bits to write and fsync


def has_data(sock):
    readable, _, _ = select.select([sock], [], [], 0)
    return bool(readable)


def error_replies(conn):
    for line in conn.call("INFO", "stats").decode().splitlines():
        if line.startswith("total_error_replies:"):
            return int(line.split(":")[1])
    raise AssertionError("no total_error_replies in INFO stats")


class SaveOffWorker(unittest.TestCase):

    def setUp(self):
        # One worker: every connection shares the thread a blocking SAVE would stall.
        self.server = harness.Server(threads=1)
        self.server.start()
        self.addCleanup(self.server.cleanup)
        with RespConnection(self.server.port) as c:
            self.assertEqual(c.call("BF.RESERVE", "big", "0.01", BIG_CAPACITY, "NONSCALING"), b"OK")
            self.assertEqual(c.call("BF.MADD", "big", *["item%d" % i for i in range(1000)]), [1] * 1000)

    def conn(self, timeout=60.0):
        c = RespConnection(self.server.port, timeout=timeout)
        self.addCleanup(c.close)
        return c

    def test_other_clients_on_the_same_worker_are_served_while_save_runs(self):
        saver, other = self.conn(), self.conn()
        self.assertEqual(other.call("PING"), b"PONG")
        saver.send(b"SAVE\r\n")
        served_before_save_replied = 0
        # Bounded: at most 100,000 round trips (a save is far shorter).
        for i in range(100000):
            if i % 2 == 0:
                self.assertEqual(other.call("PING"), b"PONG")
            else:
                self.assertEqual(other.call("BF.EXISTS", "big", "item7"), 1)
            if has_data(saver.sock):
                break
            served_before_save_replied += 1
        self.assertEqual(saver.read(), b"OK")
        # On a worker blocked by the save, the first PING is answered only
        # after SAVE's reply has been sent, so this count is 0.
        self.assertGreaterEqual(served_before_save_replied, 3)
        self.assertTrue(os.path.isfile(os.path.join(self.server.data_dir, "dump.bloomery")))

    def test_pipelined_commands_wait_behind_save_and_reply_in_order(self):
        c = self.conn()
        c.send(b"SAVE\r\nPING\r\nBF.EXISTS big item1\r\nECHO after\r\n")
        self.assertEqual(c.read_n(4), [b"OK", b"PONG", 1, b"after"])

    def test_second_save_while_one_runs_is_refused_with_redis_wording(self):
        first, second, probe = self.conn(), self.conn(), self.conn()
        errors_before = error_replies(probe)
        first.send(b"SAVE\r\n")
        second.send(b"SAVE\r\n")
        replies = sorted([first.read(), second.read()], key=repr)
        self.assertEqual(replies, [Err(b"ERR Background save already in progress"), b"OK"])
        # The refusal, written by a deferred reply, counts as an error reply.
        self.assertEqual(error_replies(probe), errors_before + 1)

    def test_client_gone_while_waiting_for_save_leaves_the_server_healthy(self):
        for _ in range(3):
            c = RespConnection(self.server.port)
            c.send(b"SAVE\r\nPING\r\n")
            c.close()
        probe = self.conn()
        # Our own SAVE succeeds once theirs are done (bounded retries).
        harness.wait_until(lambda: probe.call("SAVE") == b"OK", 60, "our own SAVE to succeed",
                           interval=0.05)
        self.assertEqual(probe.call("PING"), b"PONG")

    def test_client_killed_while_waiting_for_save_is_closed_and_others_carry_on(self):
        saver, admin = self.conn(), self.conn()
        saver_id = saver.call("CLIENT", "ID")
        saver.send(b"SAVE\r\n")
        # CLIENT LIST flags the waiting client "b" (blocked), as Redis does.
        flagged = False
        for _ in range(10000):  # bounded; stops at the flag or at SAVE's reply
            listing = admin.call("CLIENT", "LIST").decode()
            line = [l for l in listing.splitlines() if l.startswith("id=%d " % saver_id)][0]
            if " flags=b " in line:
                flagged = True
                break
            if has_data(saver.sock):
                break
        self.assertTrue(flagged, "never saw flags=b before SAVE replied")
        killed = admin.call("CLIENT", "KILL", "ID", saver_id)
        self.assertEqual(killed, 1)
        data, closed = saver.read_all_until_closed(timeout=60)
        self.assertTrue(closed)
        self.assertEqual(admin.call("BF.EXISTS", "big", "item3"), 1)

    def test_sigterm_while_a_client_waits_for_save_exits_cleanly(self):
        saver = self.conn()
        saver.send(b"SAVE\r\n")
        other = self.conn()
        self.assertEqual(other.call("PING"), b"PONG")
        self.assertEqual(self.server.terminate(timeout=60), 0, self.server.log())
        log = self.server.log()
        self.assertNotIn("[error]", log)
        self.assertNotIn("[critical]", log)


if __name__ == "__main__":
    unittest.main()
