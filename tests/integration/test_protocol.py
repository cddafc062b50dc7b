"""Wire-protocol behaviour of bloomery, driven over raw sockets.

Pins what proto/resp.md promises and what a Redis user expects: pipelining,
requests split at any byte, inline commands, protocol errors (reply, then the
connection is closed, other clients unaffected), binary-safe and very large
arguments, RESP3 after HELLO 3, QUIT.

Also holds a tiny RESP reader (RespConnection) that the other integration test
files import.
"""

import random
import socket
import threading
import time
import unittest

import harness


class Err(bytes):
    """An error reply (the text after '-')."""


class Simple(bytes):
    """A simple-string reply (the text after '+')."""


class Map(list):
    """A RESP3 map reply, as a list of (key, value) pairs."""


class NullType:
    def __repr__(self):
        return "Null"


NULL3 = NullType()  # RESP3 '_' null, distinct from a RESP2 nil bulk (None)


def parse_reply(buf, pos=0):
    """Parses one reply from buf[pos:]; returns (value, new_pos) or None if incomplete."""
    end = buf.find(b"\r\n", pos)
    if end < 0:
        return None
    kind = buf[pos:pos + 1]
    line = bytes(buf[pos + 1:end])
    pos = end + 2
    if kind == b"+":
        return Simple(line), pos
    if kind == b"-":
        return Err(line), pos
    if kind == b":":
        return int(line), pos
    if kind == b"_":
        return NULL3, pos
    if kind == b"#":
        return line == b"t", pos
    if kind == b",":
        return float(line), pos
    if kind in (b"$", b"="):
        n = int(line)
        if n < 0:
            return None, pos
        if len(buf) < pos + n + 2:
            return None
        data = bytes(buf[pos:pos + n])
        if buf[pos + n:pos + n + 2] != b"\r\n":
            raise AssertionError("bulk not followed by CRLF")
        return data, pos + n + 2
    if kind in (b"*", b"~", b"%", b">"):
        n = int(line)
        if n < 0:
            return None, pos
        count = n * 2 if kind == b"%" else n
        items = []
        for _ in range(count):
            parsed = parse_reply(buf, pos)
            if parsed is None:
                return None
            value, pos = parsed
            items.append(value)
        if kind == b"%":
            return Map(zip(items[::2], items[1::2])), pos
        return items, pos
    raise AssertionError("unknown reply type %r in %r" % (kind, bytes(buf[pos - 10:pos + 40])))


def encode(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        if isinstance(a, str):
            a = a.encode()
        elif isinstance(a, int):
            a = str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class RespConnection:
    """A raw socket with a reply buffer; every read is bounded by a deadline."""

    def __init__(self, port, timeout=10.0):
        self.sock = harness.raw_connection(port, timeout=timeout)
        self.timeout = timeout
        self.buf = bytearray()
        self.pos = 0

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def send(self, data):
        self.sock.sendall(data)

    def _fill(self, deadline):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("no complete reply in time; have %r" % bytes(self.buf[self.pos:self.pos + 200]))
        self.sock.settimeout(min(remaining, self.timeout))
        try:
            data = self.sock.recv(1 << 20)
        except socket.timeout:
            return
        if not data:
            raise ConnectionError("closed by server; unparsed %r" % bytes(self.buf[self.pos:self.pos + 200]))
        self.buf += data

    def read(self, timeout=None):
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            parsed = parse_reply(self.buf, self.pos)
            if parsed is not None:
                value, self.pos = parsed
                if self.pos > (1 << 20):
                    del self.buf[:self.pos]
                    self.pos = 0
                return value
            self._fill(deadline)

    def read_n(self, n, timeout=None):
        deadline = time.monotonic() + (timeout or self.timeout)
        return [self.read(max(0.01, deadline - time.monotonic())) for _ in range(n)]

    def read_raw(self, nbytes, timeout=None):
        """Exactly nbytes of raw reply bytes (not parsed)."""
        deadline = time.monotonic() + (timeout or self.timeout)
        while len(self.buf) - self.pos < nbytes:
            self._fill(deadline)
        data = bytes(self.buf[self.pos:self.pos + nbytes])
        self.pos += nbytes
        return data

    def call(self, *args, timeout=None):
        self.send(encode(*args))
        return self.read(timeout)

    def read_all_until_closed(self, timeout=10.0):
        """Returns (all remaining bytes, closed_by_server)."""
        deadline = time.monotonic() + timeout
        data = bytes(self.buf[self.pos:])
        self.buf = bytearray()
        self.pos = 0
        while time.monotonic() < deadline:
            self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                chunk = self.sock.recv(65536)
            except socket.timeout:
                return data, False
            except ConnectionResetError:
                return data, True
            if not chunk:
                return data, True
            data += chunk
        return data, False


def read_exact_stream(sock, expected_len, timeout=20.0):
    """Reads exactly expected_len bytes (or whatever arrives before timeout/close)."""
    deadline = time.monotonic() + timeout
    chunks = []
    total = 0
    while total < expected_len and time.monotonic() < deadline:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            data = sock.recv(1 << 20)
        except socket.timeout:
            break
        if not data:
            break
        chunks.append(data)
        total += len(data)
    return b"".join(chunks)


class ProtocolTest(harness.SharedServerTestCase):

    def setUp(self):
        with RespConnection(self.server.port) as c:
            self.assertEqual(c.call("FLUSHALL"), b"OK")

    def conn(self):
        c = RespConnection(self.server.port)
        self.addCleanup(c.close)
        return c

    def assertServerAlive(self):
        with RespConnection(self.server.port) as c:
            self.assertEqual(c.call("PING"), b"PONG")
        self.assertIsNone(self.server.process.poll(), "server process exited")

    # ---- pipelining -------------------------------------------------------

    def test_pipeline_of_10000_mixed_commands_in_one_send_replies_all_in_order(self):
        commands = []
        expect = []  # (kind, value)
        for i in range(10000):
            which = i % 4
            if which == 0:
                commands.append(encode("PING"))
                expect.append(("eq", b"PONG"))
            elif which == 1:
                commands.append(encode("BF.ADD", "pipe", "item-%d" % i))
                expect.append(("add", None))
            elif which == 2:
                commands.append(encode("BF.EXISTS", "pipe", "item-%d" % (i - 1)))
                expect.append(("eq", 1))
            else:
                commands.append(encode("ECHO", "echo-%d" % i))
                expect.append(("eq", b"echo-%d" % i))
        stream = b"".join(commands)
        c = self.conn()
        sender = threading.Thread(target=c.send, args=(stream,), daemon=True)
        sender.start()  # read concurrently so neither side's buffers can deadlock
        replies = c.read_n(len(commands), timeout=40)
        sender.join(10)
        self.assertFalse(sender.is_alive())
        self.assertEqual(len(replies), 10000)
        added = 0
        for i, ((kind, value), got) in enumerate(zip(expect, replies)):
            if kind == "eq":
                self.assertEqual(got, value, "reply %d" % i)
            else:
                self.assertIn(got, (0, 1), "reply %d" % i)
                added += got
        # 2500 distinct new items into a scaling 1 % filter: nearly all are new.
        self.assertGreater(added, 2400)
        # Nothing else was sent: the connection is quiet and still usable.
        self.assertEqual(c.call("BF.EXISTS", "pipe", "item-9997"), 1)
        self.assertEqual(c.call("BF.INFO", "pipe", "ITEMS"), [added])

    def _stream_small(self):
        return b"".join([
            encode("PING"),
            b"PING\r\n",
            encode("ECHO", b"hello\r\nworld"),
            b"ECHO \"quoted word\" \r\n",
            b"\r\n",
            encode("BF.ADD", "split", "present"),
            encode("BF.EXISTS", "split", "present"),
            b"*0\r\n",
            encode("BF.MEXISTS", "split", "present", "absent-xyz"),
            b"BF.EXISTS split 'present'\n",
            encode("ECHO", b""),
            encode("ECHO", b"\x00\x01\xff"),
            encode("NOSUCHCOMMAND", "x"),
            encode("PING", "last"),
        ])

    def _reference(self, stream, n):
        c = self.conn()
        c.send(stream)
        replies = c.read_n(n)
        c.close()
        return replies

    def test_small_stream_split_at_every_byte_boundary_gives_identical_replies(self):
        with RespConnection(self.server.port) as c:
            self.assertIn(c.call("BF.ADD", "split", "present"), (0, 1))
        stream = self._stream_small()
        n = 12
        reference = self._reference(stream, n)
        self.assertEqual(reference[:4], [b"PONG", b"PONG", b"hello\r\nworld", b"quoted word"])
        self.assertEqual(reference[4:8], [0, 1, [1, 0], 1])
        self.assertEqual(reference[8:10], [b"", b"\x00\x01\xff"])
        self.assertIsInstance(reference[10], Err)
        self.assertTrue(reference[10].startswith(b"ERR unknown command"), reference[10])
        self.assertEqual(reference[11:], [b"last"])
        for cut in range(1, len(stream)):
            with RespConnection(self.server.port) as c:
                c.send(stream[:cut])
                time.sleep(0.002)  # let the first part be read on its own
                c.send(stream[cut:])
                got = c.read_n(n, timeout=10)
                self.assertEqual(got, reference, "split at byte %d" % cut)
        # And one byte per send.
        with RespConnection(self.server.port) as c:
            for i in range(len(stream)):
                c.send(stream[i:i + 1])
            self.assertEqual(c.read_n(n, timeout=10), reference)

    def test_large_stream_in_random_chunks_gives_identical_replies(self):
        rng = random.Random(1234)
        parts = []
        count = 0
        for i in range(3000):
            r = i % 5
            if r == 0:
                parts.append(encode("BF.ADD", "chunks", "k%d" % (i % 700)))
            elif r == 1:
                parts.append(encode("BF.EXISTS", "chunks", "k%d" % (i % 900)))
            elif r == 2:
                parts.append(encode("ECHO", bytes(rng.randrange(256) for _ in range(rng.randrange(0, 40)))))
            elif r == 3:
                parts.append(b"PING\r\n")
            else:
                parts.append(encode("BF.MEXISTS", "chunks", "k1", "k%d" % i, "zz%d" % i))
            count += 1
        stream = b"".join(parts)
        reference = self._reference(stream, count)
        # Fresh filter for the chunked run so BF.ADD answers match.
        with RespConnection(self.server.port) as c:
            self.assertEqual(c.call("DEL", "chunks"), 1)
        c = self.conn()
        pos = 0
        while pos < len(stream):
            size = rng.choice([1, 2, 3, 7, 64, 500, 1400, 5000])
            c.send(stream[pos:pos + size])
            pos += size
            if rng.random() < 0.02:
                time.sleep(0.001)
        got = c.read_n(count, timeout=30)
        self.assertEqual(got, reference)

    # ---- inline -----------------------------------------------------------

    def test_inline_commands_with_quotes(self):
        c = self.conn()
        c.send(b"PING\r\n")
        self.assertEqual(c.read(), b"PONG")
        c.send(b'BF.ADD inl "a b"\r\n')
        self.assertEqual(c.read(), 1)
        self.assertEqual(c.call("BF.EXISTS", "inl", "a b"), 1)
        self.assertEqual(c.call("BF.EXISTS", "inl", "a"), 0)
        c.send(b"ECHO 'x y'\r\n")
        self.assertEqual(c.read(), b"x y")
        c.send(b'ECHO "\\x41\\n\\t"\r\n')
        self.assertEqual(c.read(), b"A\n\t")
        c.send(b"ECHO   spaced\t\n")  # bare \n ends an inline line too
        self.assertEqual(c.read(), b"spaced")
        c.send(b"bf.exists INL 'a b'\r\n")  # command names are case-insensitive, keys are not
        self.assertEqual(c.read(), 0)
        c.send(b"bf.exists inl 'a b'\r\n")
        self.assertEqual(c.read(), 1)

    def test_empty_lines_are_ignored(self):
        c = self.conn()
        c.send(b"\r\n\n   \r\n\t\r\nPING\r\n\r\n" + encode("ECHO", "end"))
        self.assertEqual(c.read(), b"PONG")
        self.assertEqual(c.read(), b"end")
        # Nothing else came back.
        c.send(encode("ECHO", "after"))
        self.assertEqual(c.read(), b"after")
        self.assertEqual(bytes(c.buf[c.pos:]), b"")

    def test_zero_and_negative_multibulk_counts_are_noops(self):
        c = self.conn()
        c.send(b"*0\r\n*-1\r\n" + encode("ECHO", "x"))
        self.assertEqual(c.read(), b"x")
        self.assertEqual(bytes(c.buf[c.pos:]), b"")

    # ---- protocol errors --------------------------------------------------

    def _check_protocol_error(self, payload, expected_text=None):
        bystander = self.conn()
        self.assertEqual(bystander.call("PING"), b"PONG")
        bad = self.conn()
        try:
            bad.send(payload)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server may close while we are still sending
        data, closed = bad.read_all_until_closed(timeout=10)
        self.assertTrue(data.startswith(b"-ERR Protocol error"), "payload %r got %r" % (payload[:40], data[:100]))
        self.assertTrue(data.endswith(b"\r\n"))
        self.assertEqual(data.count(b"\r\n"), 1, data)
        if expected_text is not None:
            self.assertEqual(data, b"-ERR Protocol error: " + expected_text + b"\r\n")
        self.assertTrue(closed, "server did not close the connection after %r" % payload[:40])
        # The other, already open connection keeps working, as does the server.
        self.assertEqual(bystander.call("PING"), b"PONG")
        self.assertEqual(bystander.call("BF.ADD", "alive", "x"), 1)
        self.assertEqual(bystander.call("DEL", "alive"), 1)
        self.assertServerAlive()

    def test_protocol_error_bad_multibulk_count(self):
        self._check_protocol_error(b"*abc\r\n", b"invalid multibulk length")

    def test_protocol_error_negative_bulk_length(self):
        self._check_protocol_error(b"*1\r\n$-5\r\n", b"invalid bulk length")

    def test_protocol_error_integer_instead_of_bulk(self):
        self._check_protocol_error(b"*1\r\n:5\r\n", b"expected '$', got ':'")

    def test_protocol_error_bulk_length_over_limit(self):
        self._check_protocol_error(b"*2\r\n$4\r\nECHO\r\n$%d\r\n" % (512 * 1024 * 1024 + 1),
                                   b"invalid bulk length")

    def test_bulk_length_at_limit_header_is_accepted(self):
        # The exact limit is legal: the server waits for the data, no error.
        c = self.conn()
        c.send(b"*2\r\n$4\r\nECHO\r\n$%d\r\n" % (512 * 1024 * 1024))
        data, closed = c.read_all_until_closed(timeout=0.5)
        self.assertEqual(data, b"")
        self.assertFalse(closed)

    def test_protocol_error_multibulk_count_over_limit(self):
        self._check_protocol_error(b"*1048577\r\n", b"invalid multibulk length")

    def test_protocol_error_overlong_inline_line(self):
        self._check_protocol_error(b"a" * (64 * 1024 + 100), b"too big inline request")

    def test_protocol_error_overlong_multibulk_header(self):
        self._check_protocol_error(b"*" + b"1" * (64 * 1024 + 100), b"too big mbulk count string")

    def test_protocol_error_unbalanced_quotes(self):
        self._check_protocol_error(b'ECHO "abc\r\n', b"unbalanced quotes in request")

    def test_protocol_error_missing_crlf_after_bulk(self):
        self._check_protocol_error(b"*1\r\n$4\r\nPINGxx", b"missing CRLF after bulk data")

    def test_replies_before_a_protocol_error_are_delivered(self):
        c = self.conn()
        c.send(encode("ECHO", "first") + b"PING\r\n" + b"*1\r\n:5\r\n" + encode("ECHO", "never"))
        data, closed = c.read_all_until_closed(timeout=10)
        self.assertTrue(data.startswith(b"$5\r\nfirst\r\n+PONG\r\n-ERR Protocol error"), data)
        self.assertNotIn(b"never", data)
        self.assertTrue(closed)

    # ---- binary safety and size -------------------------------------------

    def test_binary_safe_items(self):
        c = self.conn()
        self.assertEqual(c.call("BF.RESERVE", "bin", "0.0001", "10000"), b"OK")
        weird = b"a\x00b\r\nc\r\n*1\r\n$4\r\nPING\r\n"
        self.assertEqual(c.call("BF.ADD", "bin", weird), 1)
        self.assertEqual(c.call("BF.EXISTS", "bin", weird), 1)
        self.assertEqual(c.call("BF.ADD", "bin", weird), 0)
        self.assertEqual(c.call("BF.EXISTS", "bin", b"a"), 0)
        self.assertEqual(c.call("BF.EXISTS", "bin", b"a\x00b"), 0)
        self.assertEqual(c.call("BF.ADD", "bin", b""), 1)  # the empty item is an item
        self.assertEqual(c.call("BF.EXISTS", "bin", b""), 1)
        self.assertEqual(c.call("ECHO", weird), weird)
        allbytes = bytes(range(256))
        self.assertEqual(c.call("ECHO", allbytes), allbytes)
        # Binary key names too.
        self.assertEqual(c.call("BF.ADD", b"k\x00\r\n", b"x"), 1)
        self.assertEqual(c.call("EXISTS", b"k\x00\r\n"), 1)
        self.assertEqual(c.call("EXISTS", b"k\x00"), 0)
        self.assertEqual(c.call("PING"), b"PONG")

    def test_very_large_bulk_item(self):
        big = bytes(random.Random(7).getrandbits(8) for _ in range(4096)) * 2048  # 8 MiB
        c = self.conn()
        req = encode("BF.ADD", "huge", big)
        sender = threading.Thread(target=c.send, args=(req,), daemon=True)
        sender.start()
        self.assertEqual(c.read(timeout=30), 1)
        sender.join(10)
        self.assertEqual(c.call("BF.EXISTS", "huge", big, timeout=30), 1)
        self.assertEqual(c.call("BF.EXISTS", "huge", big[:-1], timeout=30), 0)
        sender = threading.Thread(target=c.send, args=(encode("ECHO", big),), daemon=True)
        sender.start()
        self.assertEqual(c.read(timeout=30), big)
        sender.join(10)
        self.assertEqual(c.call("PING"), b"PONG")

    # ---- RESP3 ------------------------------------------------------------

    def test_hello_3_switches_to_resp3(self):
        c = self.conn()
        # RESP2 first: BF.INFO of a NONSCALING filter has a nil expansion.
        self.assertEqual(c.call("BF.RESERVE", "ns", "0.01", "100", "NONSCALING"), b"OK")
        c.send(encode("BF.INFO", "ns", "EXPANSION"))
        self.assertEqual(c.read_raw(len(b"*1\r\n$-1\r\n")), b"*1\r\n$-1\r\n")
        full2 = c.call("BF.INFO", "ns")
        self.assertIsInstance(full2, list)
        self.assertEqual(len(full2), 10)
        self.assertIsNone(full2[9])

        c.send(encode("HELLO", "3"))
        self.assertEqual(c.read_raw(1), b"%")  # a map
        c.pos -= 1
        hello = c.read()
        self.assertIsInstance(hello, Map)
        fields = {bytes(k): v for k, v in hello}
        self.assertEqual(fields[b"proto"], 3)
        self.assertIn(b"server", fields)
        self.assertIn(b"version", fields)
        self.assertIn(b"id", fields)

        # One field is a map of one under RESP3 (RedisBloom 2.8).
        c.send(encode("BF.INFO", "ns", "EXPANSION"))
        expected = b"%1\r\n+Expansion rate\r\n_\r\n"
        self.assertEqual(c.read_raw(len(expected)), expected)
        c.send(encode("BF.INFO", "ns"))
        self.assertEqual(c.read_raw(4), b"%5\r\n")
        c.pos -= 4
        info = c.read()
        self.assertIsInstance(info, Map)
        d = {bytes(k): v for k, v in info}
        self.assertEqual(set(d), {b"Capacity", b"Size", b"Number of filters",
                                  b"Number of items inserted", b"Expansion rate"})
        self.assertEqual(d[b"Capacity"], 100)
        self.assertIs(d[b"Expansion rate"], NULL3)
        # Scalar replies are unchanged in RESP3.
        self.assertEqual(c.call("BF.ADD", "ns", "a"), 1)
        self.assertEqual(c.call("PING"), b"PONG")
        # Back to RESP2.
        c.send(encode("HELLO", "2"))
        self.assertEqual(c.read_raw(1), b"*")
        c.pos -= 1
        self.assertIsInstance(c.read(), list)
        c.send(encode("BF.INFO", "ns", "EXPANSION"))
        self.assertEqual(c.read_raw(len(b"*1\r\n$-1\r\n")), b"*1\r\n$-1\r\n")

    def test_hello_unsupported_version(self):
        c = self.conn()
        reply = c.call("HELLO", "4")
        self.assertIsInstance(reply, Err)
        self.assertTrue(reply.startswith(b"NOPROTO"), reply)
        self.assertEqual(c.call("PING"), b"PONG")

    # ---- QUIT -------------------------------------------------------------

    def test_quit_replies_ok_and_closes(self):
        c = self.conn()
        c.send(encode("QUIT") + encode("BF.ADD", "afterquit", "x"))
        data, closed = c.read_all_until_closed(timeout=10)
        self.assertEqual(data, b"+OK\r\n")
        self.assertTrue(closed)
        with RespConnection(self.server.port) as d:
            self.assertEqual(d.call("EXISTS", "afterquit"), 0)

    def test_inline_quit(self):
        c = self.conn()
        c.send(b"quit\r\n")
        data, closed = c.read_all_until_closed(timeout=10)
        self.assertEqual(data, b"+OK\r\n")
        self.assertTrue(closed)


if __name__ == "__main__":
    unittest.main()
