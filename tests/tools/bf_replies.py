#!/usr/bin/python3
"""Sends one list of BF.* commands (odd inputs included) to a server and
records, prints or compares its replies byte for byte.

    bf_replies.py record HOST:PORT FILE    run the cases on a RedisBloom server and write
                                           the fixture (tests/integration/fixtures/
                                           bf_replies.json) that test_bf_replies.py replays
    bf_replies.py diff HOST:PORT HOST:PORT  run the cases on both (each from an empty
                                           keyspace, FLUSHALL first) and print every case
                                           whose replies differ, side by side
    bf_replies.py show HOST:PORT           print every case and its reply

RedisBloom 2.4.23 in Redis 7.0 (/work/shared/anchors/README.md):

    redis-server --port 7000 --save '' --appendonly no --loadmodule redisbloom.so

The cases run in order on one RESP2 connection: later cases see the keys the
earlier ones made. A reply is kept as its raw RESP bytes.
"""

import json
import socket
import sys

# Each case is one command. Keys are reset by the FLUSHALL that starts a run.
CASES = [
    # ---- BF.RESERVE: arity ----
    ["BF.RESERVE"],
    ["BF.RESERVE", "r"],
    ["BF.RESERVE", "r", "0.01"],
    ["BF.RESERVE", "r", "0.01", "100", "EXPANSION", "2", "NONSCALING", "x"],
    ["BF.RESERVE", "r", "0.01", "100", "a", "b", "c", "d"],
    # error rate
    ["BF.RESERVE", "r", "abc", "100"],
    ["BF.RESERVE", "r", "", "100"],
    ["BF.RESERVE", "r", "0.01x", "100"],
    ["BF.RESERVE", "r", " 0.01", "100"],
    ["BF.RESERVE", "r", "nan", "100"],
    ["BF.RESERVE", "r", "inf", "100"],
    ["BF.RESERVE", "r", "-inf", "100"],
    ["BF.RESERVE", "r", "0", "100"],
    ["BF.RESERVE", "r", "1", "100"],
    ["BF.RESERVE", "r", "-0.5", "100"],
    ["BF.RESERVE", "r", "1.5", "100"],
    ["BF.RESERVE", "r", "0x10", "100"],
    # capacity
    ["BF.RESERVE", "r", "0.01", "abc"],
    ["BF.RESERVE", "r", "0.01", "0"],
    ["BF.RESERVE", "r", "0.01", "-1"],
    ["BF.RESERVE", "r", "0.01", "1.5"],
    ["BF.RESERVE", "r", "0.01", ""],
    ["BF.RESERVE", "r", "0.01", "+5"],
    ["BF.RESERVE", "r", "0.01", "9223372036854775808"],
    ["BF.RESERVE", "r", "abc", "abc"],
    # expansion and NONSCALING
    ["BF.RESERVE", "r", "0.01", "100", "EXPANSION"],
    ["BF.RESERVE", "r", "0.01", "100", "EXPANSION", "abc"],
    ["BF.RESERVE", "r", "0.01", "100", "EXPANSION", "2", "NONSCALING"],
    ["BF.RESERVE", "r", "0.01", "100", "NONSCALING", "EXPANSION", "2"],
    ["BF.RESERVE", "r", "0.01", "100", "NONSCALING", "EXPANSION"],
    ["BF.RESERVE", "r", "0.01", "100", "nonscaling", "expansion", "x"],
    # created
    ["BF.RESERVE", "r1", "0.01", "100"],
    ["BF.RESERVE", "r1", "0.01", "100"],
    ["BF.RESERVE", "r1", "abc", "100"],
    ["BF.RESERVE", "r1", "0.5", "10", "NONSCALING"],
    ["BF.RESERVE", "r2", "0.001", "1000", "EXPANSION", "4"],
    ["BF.RESERVE", "r3", "0.1", "10", "NONSCALING"],
    ["BF.RESERVE", "r4", "0.01", "100", "expansion", "1"],
    ["BF.RESERVE", "r5", "0.01", "100", "nonscaling"],
    ["BF.RESERVE", "r6", "0.9999", "1"],
    ["BF.RESERVE", "r7", "0.000001", "5"],
    # words RedisBloom does not know are ignored; its bounds are not bloomery's
    ["BF.RESERVE", "r8", "0.01", "100", "FOO"],
    ["BF.RESERVE", "r9", "0.01", "100", "EXPANSION", "3", "FOO"],
    ["BF.INFO", "r9", "EXPANSION"],
    ["BF.RESERVE", "r10", "0.01", "100", "NONSCALING", "NONSCALING"],
    ["BF.RESERVE", "r11", "0.01", "100", "EXPANSION", "0"],
    ["BF.RESERVE", "r12", "0.01", "100", "EXPANSION", "99999"],
    ["BF.RESERVE", "r13", "1e-20", "100"],
    ["DEL", "r11", "r12", "r13"],
    ["BF.RESERVE", "NONSCALING", "0.01", "100"],
    ["BF.INFO", "NONSCALING", "EXPANSION"],
    ["BF.INFO", "r1", "CAPACITY"],
    ["BF.INFO", "r1", "FILTERS"],
    ["BF.INFO", "r1", "ITEMS"],
    ["BF.INFO", "r1", "EXPANSION"],
    ["BF.INFO", "r2", "EXPANSION"],
    ["BF.INFO", "r2", "CAPACITY"],
    ["BF.INFO", "r3", "EXPANSION"],
    ["BF.INFO", "r4", "EXPANSION"],
    ["BF.INFO", "r5", "expansion"],
    ["BF.INFO", "r6", "capacity"],
    ["BF.INFO", "r7", "Capacity"],
    # ---- BF.ADD ----
    ["BF.ADD"],
    ["BF.ADD", "a"],
    ["BF.ADD", "a", "x", "y"],
    ["BF.ADD", "a", "x"],
    ["BF.ADD", "a", "x"],
    ["BF.ADD", "a", "X"],
    ["BF.ADD", "a", ""],
    ["BF.ADD", "a", ""],
    ["BF.ADD", "a", "\x00\xff\r\n"],
    ["BF.ADD", "a", "\x00\xff\r\n"],
    ["BF.ADD", "r1", "one"],
    ["BF.ADD", "r1", "one"],
    ["BF.INFO", "a", "ITEMS"],
    ["BF.INFO", "a", "CAPACITY"],
    ["BF.INFO", "a", "EXPANSION"],
    ["BF.INFO", "a", "FILTERS"],
    ["BF.INFO", "r1", "ITEMS"],
    # ---- BF.MADD ----
    ["BF.MADD"],
    ["BF.MADD", "m"],
    ["BF.MADD", "m", "a"],
    ["BF.MADD", "m", "a", "b", "c"],
    ["BF.MADD", "m", "a", "d", "d", "e"],
    ["BF.MADD", "m", ""],
    ["BF.INFO", "m", "ITEMS"],
    # ---- non-scaling filters when full ----
    ["BF.RESERVE", "ns", "0.01", "2", "NONSCALING"],
    ["BF.ADD", "ns", "1"],
    ["BF.ADD", "ns", "2"],
    ["BF.ADD", "ns", "3"],
    ["BF.ADD", "ns", "1"],
    ["BF.MADD", "ns", "1", "4", "5"],
    ["BF.MADD", "ns", "2", "1"],
    ["BF.INFO", "ns", "ITEMS"],
    ["BF.INFO", "ns", "FILTERS"],
    ["BF.RESERVE", "ns2", "0.01", "3", "NONSCALING"],
    ["BF.MADD", "ns2", "a", "b", "c", "d", "e"],
    ["BF.INFO", "ns2", "ITEMS"],
    # ---- a scaling filter grows ----
    ["BF.RESERVE", "g", "0.01", "2", "EXPANSION", "2"],
    ["BF.MADD", "g", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10"],
    ["BF.INFO", "g", "FILTERS"],
    ["BF.INFO", "g", "CAPACITY"],
    ["BF.INFO", "g", "ITEMS"],
    ["BF.RESERVE", "g1", "0.01", "2", "EXPANSION", "1"],
    ["BF.MADD", "g1", "1", "2", "3", "4", "5", "6", "7"],
    ["BF.INFO", "g1", "FILTERS"],
    ["BF.INFO", "g1", "CAPACITY"],
    # ---- BF.EXISTS / BF.MEXISTS ----
    ["BF.EXISTS"],
    ["BF.EXISTS", "a"],
    ["BF.EXISTS", "a", "x", "y"],
    ["BF.EXISTS", "a", "x"],
    ["BF.EXISTS", "a", "X"],
    ["BF.EXISTS", "a", "never-added"],
    ["BF.EXISTS", "a", ""],
    ["BF.EXISTS", "a", "\x00\xff\r\n"],
    ["BF.EXISTS", "missing", "x"],
    ["BF.MEXISTS"],
    ["BF.MEXISTS", "a"],
    ["BF.MEXISTS", "a", "x"],
    ["BF.MEXISTS", "a", "x", "never-added", "X", ""],
    ["BF.MEXISTS", "missing", "x", "y"],
    ["BF.MEXISTS", "m", "a", "b", "c", "d", "e", "f"],
    # ---- BF.INSERT: arity and tokens ----
    ["BF.INSERT"],
    ["BF.INSERT", "i"],
    ["BF.INSERT", "i", "ITEMS"],
    ["BF.INSERT", "i", "CAPACITY", "100"],
    ["BF.INSERT", "i", "CAPACITY", "100", "ITEMS"],
    ["BF.INSERT", "i", "CAPACITY"],
    ["BF.INSERT", "i", "ERROR"],
    ["BF.INSERT", "i", "EXPANSION"],
    ["BF.INSERT", "i", "x", "y"],
    ["BF.INSERT", "i", "FOO", "ITEMS", "a"],
    ["BF.INSERT", "i", "CAPACITY", "abc", "ITEMS", "a"],
    ["BF.INSERT", "i", "CAPACITY", "0", "ITEMS", "a"],
    ["BF.INSERT", "i", "CAPACITY", "-5", "ITEMS", "a"],
    ["BF.INSERT", "i", "ERROR", "abc", "ITEMS", "a"],
    ["BF.INSERT", "i", "ERROR", "0", "ITEMS", "a"],
    ["BF.INSERT", "i", "ERROR", "1", "ITEMS", "a"],
    ["BF.INSERT", "i", "ERROR", "-0.1", "ITEMS", "a"],
    ["BF.INSERT", "i", "ERROR", "1.5", "ITEMS", "a"],
    ["BF.INSERT", "i", "EXPANSION", "abc", "ITEMS", "a"],
    ["BF.INSERT", "i", "EXPANSION", "0", "ITEMS", "a"],
    ["BF.INSERT", "i", "EXPANSION", "-1", "ITEMS", "a"],
    ["BF.INSERT", "i", "NOCREATE", "ITEMS", "a"],
    ["BF.INSERT", "i", "NOCREATE", "CAPACITY", "0", "ITEMS", "a"],
    ["EXISTS", "i"],
    ["BF.INSERT", "i", "ITEMS", "a"],
    ["BF.INSERT", "i", "ITEMS", "a", "b", "a"],
    ["BF.INSERT", "i", "NOCREATE", "ITEMS", "c"],
    ["BF.INSERT", "i", "CAPACITY", "5", "ERROR", "0.5", "ITEMS", "CAPACITY", "NOCREATE"],
    ["BF.INFO", "i", "CAPACITY"],
    ["BF.INFO", "i", "ITEMS"],
    ["BF.INSERT", "i2", "capacity", "50", "error", "0.001", "expansion", "3", "items", "x"],
    ["BF.INFO", "i2", "CAPACITY"],
    ["BF.INFO", "i2", "EXPANSION"],
    ["BF.INSERT", "i3", "EXPANSION", "1", "NONSCALING", "ITEMS", "a", "b"],
    ["BF.INFO", "i3", "EXPANSION"],
    ["BF.INFO", "i3", "FILTERS"],
    ["BF.INSERT", "i4", "NONSCALING", "EXPANSION", "3", "ITEMS", "a"],
    ["BF.INFO", "i4", "EXPANSION"],
    ["BF.INSERT", "i5", "NONSCALING", "CAPACITY", "2", "ITEMS", "a", "b", "c", "d"],
    ["BF.INFO", "i5", "ITEMS"],
    ["BF.INSERT", "i6", "ITEMS", "a", "ITEMS", "NONSCALING"],
    ["BF.INFO", "i6", "ITEMS"],
    ["BF.INSERT", "i7", "ERROR", "0.01", "ERROR", "0.1", "ITEMS", "a"],
    ["BF.INSERT", "i8", "CAPACITY", "100", "CAPACITY", "7", "ITEMS", "a"],
    ["BF.INFO", "i8", "CAPACITY"],
    # RedisBloom reads a token by its first letters
    ["BF.INSERT", "i9", "ERRORS", "0.1", "ITEMS", "a"],
    ["BF.INSERT", "i10", "EXP", "5", "ITEMS", "a"],
    ["BF.INFO", "i10", "EXPANSION"],
    ["BF.INSERT", "i11", "CAP", "9", "ITEMS", "a"],
    ["BF.INFO", "i11", "CAPACITY"],
    ["BF.INSERT", "i12", "I", "a"],
    ["BF.INSERT", "i13", "NOC", "ITEMS", "a"],
    ["BF.INSERT", "i14", "NX", "ITEMS", "a"],
    ["BF.INFO", "i14", "EXPANSION"],
    ["BF.INSERT", "i15", "e", "0.2", "ITEMS", "a"],
    ["BF.INSERT", "i16", "", "ITEMS", "a"],
    ["BF.INSERT", "i16", "NONSCALING"],
    ["BF.INSERT", "i16", "NOCREATE", "NONSCALING", "ITEMS"],
    # on an existing filter the options are not applied
    ["BF.INSERT", "r1", "CAPACITY", "9999", "ITEMS", "one", "two"],
    ["BF.INFO", "r1", "CAPACITY"],
    ["BF.INSERT", "ns", "ITEMS", "1", "6"],
    # ---- BF.INFO ----
    ["BF.INFO"],
    ["BF.INFO", "r1", "CAPACITY", "x"],
    ["BF.INFO", "missing"],
    ["BF.INFO", "missing", "CAPACITY"],
    ["BF.INFO", "missing", "BOGUS"],
    ["BF.INFO", "r1", "BOGUS"],
    ["BF.INFO", "r1", ""],
    ["BF.INFO", "r1", "CAPACITYX"],
    ["BF.INFO", "r1", "items"],
    ["BF.INFO", "r1", "Filters"],
    ["BF.INFO", "r1"],
    ["BF.INFO", "ns"],
    # ---- BF.CARD ----
    ["BF.CARD"],
    ["BF.CARD", "a", "b"],
    ["BF.CARD", "missing"],
    ["BF.CARD", "r1"],
    ["BF.CARD", "a"],
    # ---- BF.DEBUG ----
    ["BF.DEBUG"],
    ["BF.DEBUG", "a", "b"],
    ["BF.DEBUG", "missing"],
    ["BF.DEBUG", "r1"],
    ["BF.DEBUG", "g"],
    # ---- BF.SCANDUMP / BF.LOADCHUNK (errors; the chunks' format is not compared) ----
    ["BF.SCANDUMP"],
    ["BF.SCANDUMP", "r1"],
    ["BF.SCANDUMP", "r1", "0", "x"],
    ["BF.SCANDUMP", "missing", "0"],
    ["BF.SCANDUMP", "missing", "abc"],
    ["BF.SCANDUMP", "r1", "abc"],
    ["BF.SCANDUMP", "r1", "1.5"],
    ["BF.SCANDUMP", "r1", "-1"],
    ["BF.SCANDUMP", "r1", "99999"],
    ["BF.LOADCHUNK"],
    ["BF.LOADCHUNK", "l", "1"],
    ["BF.LOADCHUNK", "l", "1", "x", "y"],
    ["BF.LOADCHUNK", "l", "abc", "data"],
    ["BF.LOADCHUNK", "l", "2", "data"],
    ["BF.LOADCHUNK", "r1", "1", "data"],
    # a payload that is no header of either format, and iterators below 1
    ["BF.LOADCHUNK", "l", "1", "garbage"],
    ["BF.LOADCHUNK", "l", "1", ""],
    ["BF.LOADCHUNK", "l", "1", "x" * 100],
    ["BF.LOADCHUNK", "l", "0", "data"],
    ["BF.LOADCHUNK", "l", "-1", "data"],
    ["BF.LOADCHUNK", "r1", "0", "data"],
    ["BF.LOADCHUNK", "r1", "-1", "data"],
    # bloomery's own format: a damaged header, a chunk for a filter of its scheme
    ["BF.LOADCHUNK", "l", "1", "BLMDUMP1" + "x" * 80],
    ["BF.LOADCHUNK", "r1", "99999", "data"],
    # ---- the keys, seen by generic commands ----
    ["TYPE", "r1"],
    ["TYPE", "missing"],
    ["EXISTS", "r1", "a", "missing", "m"],
    ["OBJECT", "ENCODING", "r1"],
    ["OBJECT", "ENCODING", "missing"],
    ["OBJECT", "REFCOUNT", "r1"],
    ["OBJECT", "FREQ", "r1"],
    ["OBJECT", "FREQ", "missing"],
    ["OBJECT", "IDLETIME", "missing"],
    ["OBJECT", "BOGUS", "r1"],
    ["OBJECT", "ENCODING"],
    ["MEMORY", "USAGE", "missing"],
    ["MEMORY", "USAGE", "r1", "SAMPLES"],
    ["MEMORY", "USAGE", "r1", "SAMPLES", "-1"],
    ["MEMORY", "USAGE", "r1", "SAMPLES", "abc"],
    ["MEMORY", "USAGE", "r1", "FOO"],
    ["MEMORY", "USAGE", "missing", "SAMPLES", "x"],
    ["MEMORY", "USAGE"],
    ["MEMORY", "BOGUS"],
    ["LATENCY", "HISTORY", "never-seen"],
    ["LATENCY", "GRAPH", "never-seen"],
    ["LATENCY", "RESET", "never-seen"],
    ["LATENCY", "HISTORY"],
    ["LATENCY", "BOGUS"],
    ["DEL", "r1", "missing"],
    ["BF.EXISTS", "r1", "one"],
    ["BF.ADD", "r1", "one"],
    ["BF.INFO", "r1", "CAPACITY"],
    ["RENAME", "a", "a2"],
    ["BF.EXISTS", "a2", "x"],
    ["BF.EXISTS", "a", "x"],
    ["EXPIRE", "a2", "100"],
    ["TTL", "a2"],
    ["PERSIST", "a2"],
    ["TTL", "a2"],
    ["DBSIZE"],
]


def encode(args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        data = a.encode("latin-1") if isinstance(a, str) else a
        out.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(out)


class Connection:
    def __init__(self, host, port, timeout=10.0):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.buffer = b""

    def close(self):
        self.sock.close()

    def _fill(self):
        data = self.sock.recv(65536)
        if not data:
            raise ConnectionError("the server closed the connection")
        self.buffer += data

    def _line(self, start):
        while True:
            end = self.buffer.find(b"\r\n", start)
            if end >= 0:
                return end
            self._fill()

    def _reply_end(self, start):
        """The offset just past one complete reply starting at `start`."""
        end = self._line(start)
        kind = self.buffer[start:start + 1]
        if kind in (b"+", b"-", b":", b"_", b"#", b",", b"("):
            return end + 2
        if kind in (b"$", b"=", b"!"):
            n = int(self.buffer[start + 1:end])
            if n < 0:
                return end + 2
            while len(self.buffer) < end + 2 + n + 2:
                self._fill()
            return end + 2 + n + 2
        if kind in (b"*", b"~", b">", b"%", b"|"):
            n = int(self.buffer[start + 1:end])
            if kind in (b"%", b"|"):
                n *= 2
            at = end + 2
            for _ in range(max(n, 0)):
                at = self._reply_end(at)
            return at
        raise ValueError("not a RESP reply: %r" % self.buffer[start:start + 40])

    def call_raw(self, args):
        """The reply's raw bytes."""
        self.sock.sendall(encode(args))
        end = self._reply_end(0)
        reply, self.buffer = self.buffer[:end], self.buffer[end:]
        return reply


def address(text):
    host, _, port = text.rpartition(":")
    return host or "127.0.0.1", int(port)


def run(host_port, cases=CASES):
    """[(case, raw reply)] for every case, from an empty keyspace."""
    c = Connection(*address(host_port))
    try:
        c.call_raw(["FLUSHALL"])
        return [(case, c.call_raw(case)) for case in cases]
    finally:
        c.close()


def main(argv):
    if len(argv) == 3 and argv[0] == "record":
        replies = run(argv[1])
        c = Connection(*address(argv[1]))
        try:
            version = c.call_raw(["INFO", "server"]).decode("latin-1")
            modules = c.call_raw(["MODULE", "LIST"]).decode("latin-1")
        finally:
            c.close()
        redis_version = [l.split(":", 1)[1] for l in version.split("\r\n")
                         if l.startswith("redis_version:")][0]
        bf_version = modules.split("$3\r\nver\r\n:", 1)[1].split("\r\n", 1)[0]
        # One case a line; a reply is its RESP bytes as latin-1 text.
        lines = [json.dumps({"id": i, "args": case, "reply": reply.decode("latin-1")})
                 for i, (case, reply) in enumerate(replies)]
        with open(argv[2], "w") as f:
            f.write('{"recorded_from": %s,\n "cases": [\n  ' % json.dumps(
                "redis-server %s, RedisBloom module ver %s" % (redis_version, bf_version)))
            f.write(",\n  ".join(lines))
            f.write("\n ]\n}\n")
        print("recorded %d cases from %s into %s" % (len(replies), argv[1], argv[2]))
        return 0
    if len(argv) == 3 and argv[0] == "diff":
        left, right = run(argv[1]), run(argv[2])
        differ = 0
        for i, ((case, a), (_, b)) in enumerate(zip(left, right)):
            if a != b:
                differ += 1
                print("#%d %r\n  %s: %r\n  %s: %r" % (i, case, argv[1], a, argv[2], b))
        print("%d of %d cases differ" % (differ, len(left)))
        return 1 if differ else 0
    if len(argv) == 2 and argv[0] == "show":
        for i, (case, reply) in enumerate(run(argv[1])):
            print("#%d %r -> %r" % (i, case, reply))
        return 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
