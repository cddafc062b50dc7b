"""Replication on the wire (proto/replication.md), each side against a peer
the test plays by hand: a replica against a primary that answers PSYNC
wrongly or stalls in its snapshot, a primary against a replica that sends
commands after PSYNC, acknowledges late or does not read at all.
"""

import os
import signal
import socket
import threading
import time
import unittest

from harness import Server, ServersTestCase, add_range, free_port, wait_until
from harness import replication_info as info
from test_hostile_memory import sanitizer_memory_factor


def read_command(buffer):
    """(words, rest) of the first whole RESP array of bulk strings in
    `buffer`, or (None, buffer) while it is incomplete."""
    end = buffer.find(b"\r\n")
    if end < 0:
        return None, buffer
    count, position, words = int(buffer[1:end]), end + 2, []
    for _ in range(count):
        end = buffer.find(b"\r\n", position)
        if end < 0:
            return None, buffer
        start = end + 2
        length = int(buffer[position + 1:end])
        if len(buffer) < start + length + 2:
            return None, buffer
        words.append(buffer[start:start + length])
        position = start + length + 2
    return words, buffer[position:]


class FakePrimary:
    """A primary on 127.0.0.1 that answers REPLCONF with +OK and PSYNC with
    `answer` (bytes), then holds the connection until the replica closes it.
    Counts the connections made to it (a replica that failed reconnects)."""

    def __init__(self, answer):
        self.answer = answer
        self.connections = 0
        self.psyncs = []
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(8)
        self.port = self.listener.getsockname()[1]
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        self.listener.settimeout(0.1)
        while not self.stopped.is_set():
            try:
                connection, _ = self.listener.accept()
            except OSError:
                continue
            self.connections += 1
            threading.Thread(target=self._talk, args=(connection,), daemon=True).start()

    def _talk(self, connection):
        connection.settimeout(0.1)
        received = b""
        with connection:
            while not self.stopped.is_set():
                try:
                    data = connection.recv(65536)
                except socket.timeout:
                    continue
                except OSError:
                    return
                if not data:
                    return
                received += data
                while True:
                    words, received = read_command(received)
                    if words is None:
                        break
                    if words[0].upper() == b"PSYNC":
                        self.psyncs.append(words[1:])
                        connection.sendall(self.answer)
                    elif words[0].upper() == b"REPLCONF" and words[1].upper() != b"ACK":
                        connection.sendall(b"+OK\r\n")

    def close(self):
        self.stopped.set()
        self.thread.join(5)
        self.listener.close()


def raw_replica(port, first=b"PSYNC ? -1\r\n"):
    """A replica by hand: sends `first` (PSYNC), reads +FULLRESYNC and the
    snapshot. Returns (socket, offset where the stream starts, the stream's
    bytes received so far)."""
    feed = socket.create_connection(("127.0.0.1", port), timeout=10)
    feed.sendall(first)
    received = b""
    while received.count(b"\r\n") < 2:
        received += feed.recv(65536)
    line, header, rest = received.split(b"\r\n", 2)
    assert line.startswith(b"+FULLRESYNC "), line
    mark = header[len(b"$EOF:"):]
    while mark not in rest:
        rest += feed.recv(65536)
    return feed, int(line.split()[2]), rest[rest.index(mark) + len(mark):]


def receive_for(feed, seconds):
    """What arrives on `feed` within `seconds` (less if it closes)."""
    feed.settimeout(0.05)
    data = b""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            chunk = feed.recv(65536)
        except socket.timeout:
            continue
        if not chunk:
            break
        data += chunk
    return data


class ReplicationWireTest(ServersTestCase):
    def test_sync_files_of_a_killed_replica_are_removed(self):
        replid = b"0123456789abcdef0123456789abcdef01234567"
        mark = b"fedcba9876543210fedcba9876543210fedcba98"
        # A primary that sends 1 MB of a snapshot and then nothing more.
        stalled = FakePrimary(b"+FULLRESYNC " + replid + b" 0\r\n$EOF:" + mark + b"\r\n" +
                              b"\x00" * (1 << 20))
        self.addCleanup(stalled.close)
        replica = self.start(Server("--replicaof", "127.0.0.1 %d" % stalled.port))
        directory = replica.data_dir

        def sync_files():
            return sorted(f for f in os.listdir(directory) if f.startswith("replica-sync-"))

        def receiving():
            path = os.path.join(directory, "replica-sync-%d.tmp" % replica.process.pid)
            return os.path.exists(path) and os.path.getsize(path) >= (1 << 20) - 40

        wait_until(receiving, what="the snapshot to be received into a file")
        replica.kill()
        left = sync_files()
        self.assertEqual(len(left), 1)
        # Files of other (dead) runs too; other files stay.
        for name in ("replica-sync-999999.tmp", "replica-sync-1.tmp", "replica-sync-notes.txt",
                     "other.tmp"):
            with open(os.path.join(directory, name), "wb") as f:
                f.write(b"x" * 1000)
        # Restarted (a primary now): every stale sync file goes at start.
        replica.extra_args = []
        replica.start()
        self.assertEqual(sync_files(), ["replica-sync-notes.txt"])
        self.assertTrue(os.path.exists(os.path.join(directory, "other.tmp")))
        # And before each full synchronization.
        with open(os.path.join(directory, "replica-sync-424242.tmp"), "wb") as f:
            f.write(b"x" * 1000)
        replica.client().execute_command("REPLICAOF", "127.0.0.1", stalled.port)
        wait_until(receiving, what="the second snapshot to be received into a file")
        self.assertEqual(sync_files(), ["replica-sync-%d.tmp" % replica.process.pid,
                                        "replica-sync-notes.txt"])
        # A cut link takes its own file with it.
        replica.client().execute_command("REPLICAOF", "NO", "ONE")
        wait_until(lambda: sync_files() == ["replica-sync-notes.txt"],
                   what="the unfinished file to be removed")

    def test_bad_answers_from_a_primary_fail_the_link_not_the_replica(self):
        replid = b"0123456789abcdef0123456789abcdef01234567"
        mark = b"fedcba9876543210fedcba9876543210fedcba98"
        cases = [
            # An offset past 2^64 (std::stoull threw: the replica aborted).
            (b"+FULLRESYNC " + replid + b" 99999999999999999999\r\n", "bad offset"),
            (b"+FULLRESYNC " + replid + b" 9223372036854775808\r\n", "bad offset"),
            (b"+FULLRESYNC " + replid + b" -1\r\n", "bad offset"),
            # +CONTINUE to PSYNC ? -1: nothing to continue (it crashed).
            (b"+CONTINUE\r\n", "+CONTINUE"),
            (b"+CONTINUE " + replid + b"\r\n", "+CONTINUE"),
            (b"+FULLRESYNC not-an-id 0\r\n", "bad replication id"),
            (b"+FULLRESYNC " + replid + b"\r\n", "bad replication id"),
            (b"+FULLRESYNC " + replid + b" 0\r\n$EOF:short\r\n", "bad snapshot header"),
            (b"+FULLRESYNC " + replid + b" 0\r\n$99999999999999999999999\r\n",
             "bad snapshot header"),
            (b"+FULLRESYNC " + replid + b" 0\r\n$EOF:" + mark + b"\r\nnot a snapshot" + mark,
             "cannot load the primary's snapshot"),
            (b"-ERR go away\r\n", "refused PSYNC: -ERR go away"),
            (b"+FULL" + b"x" * 70000, "line longer than"),
            (b"\x00\x01 binary\r\n", "bad answer to PSYNC"),
        ]
        replica = self.start(Server("--replicaof", "127.0.0.1 %d" % free_port()))
        r = replica.client()
        for answer, reason in cases:
            primary = FakePrimary(answer)
            try:
                self.assertEqual(r.execute_command("REPLICAOF", "127.0.0.1", primary.port), b"OK")

                def failed_for_that_reason():
                    self.assertIsNone(replica.process.poll(), "the replica exited after %r:\n%s"
                                      % (answer[:60], replica.log()[-2000:]))
                    return reason in info(r)["master_link_last_error"]

                wait_until(failed_for_that_reason,
                           what="%r in master_link_last_error after %r" % (reason, answer[:60]))
                # It reconnects (a second later) and keeps serving meanwhile.
                wait_until(lambda: primary.connections >= 2, what="a reconnection")
                self.assertIsNone(replica.process.poll(), replica.log())
                self.assertEqual(r.ping(), True)
                state = info(r)
                self.assertEqual(state["master_link_status"], "down")
                self.assertEqual(primary.psyncs[0], [b"?", b"-1"])
            finally:
                primary.close()
        self.assertEqual(os.listdir(replica.data_dir).count("replica-sync-%d.tmp"
                                                            % replica.process.pid), 0)

    def test_commands_after_psync_never_reach_the_stream(self):
        import struct
        from formats import xxh64
        primary = self.start(Server())
        p = primary.client()
        p.execute_command("BF.ADD", "before", "x")
        # One write: WAIT's reply (deferred) must not be written into the
        # stream, nor SAVE's later on.
        feed, offset, stream = raw_replica(primary.port, b"PSYNC ? -1\r\nWAIT 0 0\r\n")
        self.addCleanup(feed.close)
        feed.sendall(b"REPLCONF ACK %d\r\nSAVE\r\nPING\r\n" % offset)
        p.execute_command("BF.MADD", "after", *range(100))
        p.execute_command("DEL", "before")
        stream += receive_for(feed, 3)
        # Journal records only (proto/journal.md): length, type, body, XXH64.
        at, records = 0, 0
        while at < len(stream):
            self.assertGreaterEqual(len(stream) - at, 13, stream[at:at + 40])
            length, kind = struct.unpack_from("<IB", stream, at)
            end = at + 5 + length
            self.assertLessEqual(end + 8, len(stream), stream[at:at + 40])
            self.assertEqual(struct.unpack_from("<Q", stream, end)[0], xxh64(stream[at:end]),
                             "not a record at %d: %r" % (at, stream[at:at + 40]))
            at, records = end + 8, records + 1
        self.assertGreaterEqual(records, 2)
        # The replica's acknowledgement was still read.
        self.assertEqual(info(p)["slave0"]["offset"], offset)

    def test_a_stop_waits_for_a_replica_up_to_shutdown_timeout(self):
        def primary_with_raw_replica(*args):
            primary = self.start(Server(*args))
            feed, offset, stream = raw_replica(primary.port)
            self.addCleanup(feed.close)
            primary.client().execute_command("BF.ADD", "k", "acknowledged")
            return primary, feed, offset + len(stream)

        # A timeout far beyond any wait below: the stop ends because the
        # replica acknowledged, not because the timeout ran out.
        for stop in ("SHUTDOWN", "SIGTERM"):
            primary, feed, offset = primary_with_raw_replica("--shutdown-timeout", "600")
            if stop == "SHUTDOWN":
                closer = socket.create_connection(("127.0.0.1", primary.port))
                self.addCleanup(closer.close)
                closer.sendall(b"SHUTDOWN NOSAVE\r\n")
            else:
                primary.process.send_signal(signal.SIGTERM)
            # The add is not acknowledged: the primary waits, its clients gone.
            wait_until(lambda: not primary.ping(), what=stop + " to close the clients")
            started = time.monotonic()
            while time.monotonic() - started < 1.0:
                self.assertIsNone(primary.process.poll(), stop + ": it did not wait")
                time.sleep(0.05)
            offset += len(receive_for(feed, 0.2))
            feed.sendall(b"REPLCONF ACK %d\r\n" % offset)
            self.assertEqual(primary.wait(120), 0, primary.log())
        # At most --shutdown-timeout, which runs from when the clients are
        # gone; SHUTDOWN NOW does not wait at all (here with a timeout it
        # could never reach).
        for args, stop, shortest in ((("--shutdown-timeout", "2"), b"SHUTDOWN NOSAVE", 2.0),
                                     (("--shutdown-timeout", "600"), b"SHUTDOWN NOSAVE NOW", 0)):
            primary, feed, _ = primary_with_raw_replica(*args)
            started = time.monotonic()
            closer = socket.create_connection(("127.0.0.1", primary.port))
            self.addCleanup(closer.close)
            closer.sendall(stop + b"\r\n")
            self.assertEqual(primary.wait(120), 0, primary.log())
            self.assertGreaterEqual(time.monotonic() - started, shortest, stop)

    def test_a_replica_that_does_not_read_costs_the_primary_little(self):
        primary = self.start(Server())
        p = primary.client()
        # A 60 MB filter with 200,000 items: a third of its words are not
        # zero, so its snapshot (about 20 MB) is far more than the feed may
        # queue.
        p.execute_command("BF.RESERVE", "big", 0.0001, 25000000, "NONSCALING")
        add_range(p, "big", 0, 200000)

        def rss_kb():
            with open("/proc/%d/status" % primary.process.pid) as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1])
            return 0

        # A save reads every page once: a sanitizer's shadow of the filter is
        # then in the baseline, not in what the stalled feed is charged.
        p.execute_command("SAVE")
        before = rss_kb()
        used_before = p.info("memory")["used_memory"]
        import socket
        silent = socket.create_connection(("127.0.0.1", primary.port))
        silent.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        silent.sendall(b"PSYNC ? -1\r\n")
        # Waits until the feed has filled what it may queue for the replica
        # (at most 8 MiB) and stopped there.
        last = []

        def feed_stalled():
            held = p.info("memory")["used_memory"] - used_before
            last.append(held)
            return (held > 4 * 1024 * 1024 and len(last) >= 5
                    and max(last[-5:]) - min(last[-5:]) < 256 * 1024)
        wait_until(feed_stalled, timeout=60, what="the feed to the silent replica to stall")
        grown = rss_kb() - before
        bound = 32 * 1024 * sanitizer_memory_factor(primary.process.pid)
        self.assertLess(grown, bound, "a stalled replica made the primary hold %d KiB" % grown)
        self.assertEqual(p.ping(), True)
        self.assertEqual(p.execute_command("BF.ADD", "big", "still-served"), 1)
        # What it holds for the stalled replica is counted (INFO used_memory),
        # and given back when the replica goes.
        held = p.info("memory")["used_memory"] - used_before
        self.assertGreater(held, 4 * 1024 * 1024)
        self.assertLess(held, 16 * 1024 * 1024)
        silent.close()
        wait_until(lambda: p.info("memory")["used_memory"] - used_before < 1024 * 1024,
                   what="the stalled replica's buffers to be given back")


if __name__ == "__main__":
    unittest.main()
