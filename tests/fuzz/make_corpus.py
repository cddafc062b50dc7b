#!/usr/bin/python3
"""Writes the seed corpora and dictionaries of the libFuzzer targets.

    /usr/bin/python3 tests/fuzz/make_corpus.py [--binary build/release/bloomery]

(Debian's python3 with python3-redis, as the integration tests.)

Seeds that hold filter bytes (BF.SCANDUMP output, snapshot files) come from
the real server, started on a free loopback port by tests/integration/harness.py
(so `make build` first); the rest are written here. Re-running replaces
tests/fuzz/corpus/<target>/ and tests/fuzz/<target>.dict; the output is
deterministic except for snapshot timestamps and the server's hash seeds, if any.

Input layouts are documented at the top of each *_fuzz.cpp; the encoders
below mirror them.
"""

import argparse
import json
import os
import shutil
import struct
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))


def write_corpus(target, seeds):
    directory = os.path.join(HERE, "corpus", target)
    shutil.rmtree(directory, ignore_errors=True)
    os.makedirs(directory)
    for name, data in seeds:
        with open(os.path.join(directory, name), "wb") as f:
            f.write(data)
    print("%s: %d seeds" % (target, len(seeds)))


def write_dict(target, entries, comment):
    def escape(token):
        out = ""
        for b in token:
            out += chr(b) if 0x20 <= b < 0x7F and b not in (0x22, 0x5C) else "\\x%02X" % b
        return out

    with open(os.path.join(HERE, target + ".dict"), "w") as f:
        f.write("# %s\n# Written by tests/fuzz/make_corpus.py.\n" % comment)
        seen = set()
        for token in entries:
            token = token.encode() if isinstance(token, str) else token
            if token and token not in seen:
                seen.add(token)
                f.write('"%s"\n' % escape(token))


# ---- resp_parser_fuzz: 5 bytes of settings, then the client's byte stream ----

def resp_command(*words):
    out = b"*%d\r\n" % len(words)
    for w in words:
        w = w.encode() if isinstance(w, str) else w
        out += b"$%d\r\n%s\r\n" % (len(w), w)
    return out


def resp_parser_seeds():
    whole = bytes([0, 0, 0, 0, 0])  # default limits, one chunk
    split = bytes([0, 7, 1, 0, 5])  # default limits, chunks of 1..5 bytes
    small = bytes([0x1F, 3, 0, 0, 3])  # small limits, so limit errors are near
    streams = [
        resp_command("BF.ADD", "k", "item"),
        resp_command("BF.MADD", "k", "a", "b", "c") + resp_command("BF.MEXISTS", "k", "a", "z"),
        b"PING\r\nBF.EXISTS k a\r\n  echo   \"quoted arg\"  'single'\r\n",
        b"PING\n\r\n\r\n",
        resp_command("ECHO", b"\x00\r\n\xff"),
        b"*0\r\n*-1\r\n*1\r\n$0\r\n\r\n",
        b"*2\r\n$4\r\nECHO\r\n$536870912\r\nabc",
        b"*1048577\r\n",
        b"*1\r\n$-1\r\n",
        b"*2\r\n$3\r\nGET\r\n$3\r\nabcX\r\n",
        b"set k \"a\\x41\\n\"\r\n",
        b"\"unbalanced\r\n",
        resp_command("HELLO", "3") + resp_command("BF.INFO", "k"),
    ]
    seeds = []
    for i, stream in enumerate(streams):
        seeds.append(("whole-%02d" % i, whole + stream))
        seeds.append(("split-%02d" % i, split + stream))
    seeds.append(("small-limits-bulk", small + resp_command("ECHO", "x" * 40)))
    seeds.append(("small-limits-inline", small + b"PING " + b"y" * 60 + b"\r\n"))
    seeds.append(("small-limits-multibulk", small + resp_command(*(["a"] * 20))))
    return seeds


RESP_DICT = ["*", "$", ":", "+", "-", "\r\n", "\n", "\r", "*1\r\n", "*2\r\n", "*3\r\n", "$0\r\n",
             "$1\r\n", "$-1\r\n", "*-1\r\n", "*0\r\n", "-1", "0", "2147483648", "536870912",
             "536870913", "9223372036854775807", "9223372036854775808", "18446744073709551616",
             "PING", "BF.ADD", "\"", "'", "\\x", "\\\"", " ", "\t"]


# ---- command_fuzz: a program of steps (see command_fuzz.cpp) ----

def lp(data):
    """A length byte and the bytes (at most 255)."""
    data = data.encode() if isinstance(data, str) else data
    assert len(data) <= 255, len(data)
    return bytes([len(data)]) + data


RAW_ARG = 200  # any argument byte >= 160 is followed by raw bytes


def cmd(*words):
    """A command step, the name and every argument given as raw bytes."""
    out = bytes([0, 255]) + lp(words[0]) + bytes([len(words) - 1])
    assert len(words) - 1 < 12
    for w in words[1:]:
        out += bytes([RAW_ARG]) + lp(w)
    return out


def key_byte(key):
    return {"k0": 0, "k1": 1, "k2": 2, "k3": 3}[key]


def add_then_exists(key, items, form=0, capacity=None):
    """form bits 0-2: item count - 1; 3-4: ADD / MADD / INSERT; 6: CAPACITY; 7: ERROR."""
    assert 1 <= len(items) <= 5
    form = (form & ~0x07) | (len(items) - 1)
    out = bytes([4, key_byte(key), form])
    for item in items:
        out += lp(item)
    if form & 0x40:
        out += bytes([capacity or 9])
    return out


ADD, MADD, INSERT = 0x00, 0x08, 0x10


def round_trip(source, target):
    return bytes([6, key_byte(source), key_byte(target)])


def mutated_chunk(source, target, piece, at, value, fix_checksum):
    how = piece | (0x10 if fix_checksum else 0)
    return bytes([7, key_byte(source), key_byte(target), how, at >> 8, at & 0xFF, value])


def command_seeds(dumps):
    programs = {
        "reserve-add-exists": cmd("BF.RESERVE", "k0", "0.01", "100")
        + add_then_exists("k0", ["a", "b", "c"], MADD)
        + add_then_exists("k0", ["a"], ADD)
        + cmd("BF.INFO", "k0") + cmd("BF.CARD", "k0"),
        "insert-options": add_then_exists("k1", ["x", "y"], INSERT | 0x40 | 0x80, capacity=5)
        + cmd("BF.INSERT", "k2", "CAPACITY", "10", "ERROR", "0.001", "EXPANSION", "4", "ITEMS", "a")
        + cmd("BF.INSERT", "k3", "NOCREATE", "ITEMS", "a")
        + cmd("BF.INSERT", "k4", "LAYOUT", "CLASSIC", "ITEMS", "a", "b")
        + cmd("BF.RESERVE", "k5", "0.01", "30", "LAYOUT", "BLOCKED") + cmd("BF.INFO", "k5", "LAYOUT")
        + cmd("BF.INFO", "k5", "BITSPERITEM") + cmd("BF.RESERVE", "k6", "0.01", "30", "LAYOUT", "X")
        + cmd("BF.INSERT", "k3", "NONSCALING", "EXPANSION", "2", "ITEMS", "a"),
        "nonscaling-full": cmd("BF.RESERVE", "k0", "0.001", "3", "NONSCALING")
        + cmd("BF.MADD", "k0", "a", "b", "c", "d", "e")
        + add_then_exists("k0", ["f", "a"], MADD) + cmd("BF.INFO", "k0", "EXPANSION"),
        "scaling-round-trip": cmd("BF.RESERVE", "k2", "0.1", "2", "EXPANSION", "1")
        + cmd("BF.MADD", "k2", *["i%d" % i for i in range(10)])
        + cmd("BF.MADD", "k2", *["j%d" % i for i in range(10)])
        + round_trip("k2", "k3") + cmd("BF.INFO", "k3", "FILTERS"),
        "default-round-trip": add_then_exists("k0", ["u", "v", "w", "x", "y"], MADD)
        + round_trip("k0", "k1") + add_then_exists("k1", ["u"], ADD),
        "hash-count-bound": cmd("BF.RESERVE", "k0", "1e-300", "10") + round_trip("k0", "k1"),
        "error-rate-bounds": cmd("BF.RESERVE", "k0", "0", "1") + cmd("BF.RESERVE", "k0", "1", "1")
        + cmd("BF.RESERVE", "k0", "nan", "1") + cmd("BF.RESERVE", "k0", "inf", "1")
        + cmd("BF.RESERVE", "k0", "4.9e-324", "1") + cmd("BF.RESERVE", "k0", "0.5", "-1")
        + cmd("BF.RESERVE", "k0", "0.5", "9223372036854775807")
        + cmd("BF.RESERVE", "k0", "0.5", "10", "EXPANSION", "32769")
        + cmd("BF.RESERVE", "k0", "0.5", "10", "EXPANSION", "32768", "NONSCALING"),
        "max-filter-bytes": cmd("BF.RESERVE", "k0", "0.0001", "100000000")
        + cmd("BF.RESERVE", "k1", "0.01", "200000") + cmd("BF.RESERVE", "k2", "0.01", "1", "EXPANSION", "32768")
        + cmd("BF.MADD", "k2", "a", "b", "c", "d") + round_trip("k2", "k3"),
        "keyspace": cmd("BF.ADD", "k0", "a") + cmd("BF.ADD", "k1", "b") + cmd("EXPIRE", "k0", "100")
        + cmd("TTL", "k0") + cmd("PTTL", "k0") + cmd("EXPIRETIME", "k0") + cmd("PEXPIREAT", "k1", "1")
        + cmd("EXISTS", "k0", "k1", "k2") + cmd("RENAME", "k0", "k2") + cmd("TYPE", "k2")
        + cmd("SCAN", "0", "MATCH", "k*", "COUNT", "10", "TYPE", "MBbloom--")
        + cmd("KEYS", "[k-l]?") + cmd("EXPIRE", "k2", "10", "NX") + cmd("EXPIRE", "k2", "5", "GT")
        + cmd("PERSIST", "k2") + cmd("DBSIZE") + cmd("DEL", "k2", "k1") + cmd("FLUSHALL", "ASYNC"),
        "server": cmd("HELLO", "3", "SETNAME", "fuzz") + cmd("BF.INFO", "k0") + cmd("PING", "hi")
        + cmd("ECHO", "\r\n") + cmd("CLIENT", "LIST") + cmd("CLIENT", "INFO")
        + cmd("CLIENT", "SETNAME", "a b") + cmd("CLIENT", "SETINFO", "LIB-NAME", "x")
        + cmd("CLIENT", "KILL", "ID", "2") + cmd("CONFIG", "GET", "*") + cmd("CONFIG", "SET", "maxmemory", "1")
        + cmd("COMMAND", "INFO", "bf.add") + cmd("COMMAND", "DOCS", "bf.reserve")
        + cmd("COMMAND", "GETKEYS", "bf.madd", "k", "a") + cmd("COMMAND", "COUNT")
        + cmd("MODULE", "LIST") + cmd("INFO", "memory") + cmd("TIME") + cmd("LASTSAVE")
        + cmd("SAVE") + cmd("BGSAVE") + cmd("SELECT", "1") + cmd("HELLO", "2"),
        "unknown-and-arity": cmd("NOSUCH", "a\r\nb") + cmd("BF.ADD", "k0") + cmd("CLIENT", "NOPE")
        + cmd("BF.INFO", "k0", "SIZE", "x") + cmd("BF.SCANDUMP", "k0", "-1")
        + cmd("BF.LOADCHUNK", "k0", "0", "x"),
        "mutated-header": cmd("BF.RESERVE", "k0", "0.01", "20") + cmd("BF.ADD", "k0", "a")
        + mutated_chunk("k0", "k1", 0, 52, 0xFF, True) + mutated_chunk("k0", "k2", 0, 12, 0x00, True)
        + mutated_chunk("k0", "k3", 0, 36, 0x40, True),
        "tightening": cmd("BF.RESERVE", "k0", "0.01", "3", "TIGHTENING", "0.25")
        + cmd("BF.MADD", "k0", *["t%d" % i for i in range(10)]) + round_trip("k0", "k1")
        + cmd("BF.INFO", "k1", "TIGHTENING") + cmd("BF.INFO", "k1", "MAXSCALEDCAPACITY")
        + cmd("BF.INSERT", "k2", "NONSCALING", "TIGHTENING", "0.75", "ITEMS", "a")
        + cmd("BF.RESERVE", "k3", "0.01", "3", "TIGHTENING", "1") + cmd("BF.RESERVE", "k3", "0.01",
                                                                        "3", "TIGHTENING", "x")
        + cmd("BF.RESERVE", "k3", "0.01", "3", "TIGHTENING", "1e-300", "VALIDATESCALETO", "100")
        + cmd("BF.INSERT", "k4", "SCHEME", "REDISBLOOM", "TIGHTENING", "0.25", "ITEMS", "a"),
        "counting": cmd("BF.RESERVE", "k0", "0.01", "3", "COUNTING")
        + cmd("BF.MADD", "k0", *["c%d" % (i % 4) for i in range(10)])
        + cmd("BF.MADD", "k0", *["c%d" % (i % 3) for i in range(10)]) + round_trip("k0", "k1")
        + cmd("BF.DEL", "k1", "c1") + cmd("BF.DEL", "k1", "nope") + cmd("BF.DEL", "k9", "x")
        + cmd("BF.INSERT", "k2", "COUNTING", "NONSCALING", "ITEMS", "a", "a")
        + cmd("BF.MERGE", "k3", "k0", "k2") + cmd("BF.MERGE", "k4", "k0", "k5")
        + cmd("BF.RESERVE", "k5", "0.01", "3", "COUNTING", "LAYOUT", "BLOCKED")
        + cmd("BF.RESERVE", "k5", "1e-9", "3", "COUNTING") + cmd("BF.DEL", "k5"),
        "cuckoo": cmd("CF.RESERVE", "k0", "8", "BUCKETSIZE", "2", "EXPANSION", "2",
                      "MAXITERATIONS", "5")
        + b"".join(cmd("CF.ADD", "k0", "c%d" % i) for i in range(12))
        + cmd("CF.INSERT", "k0", "CAPACITY", "4", "ITEMS", "a", "b", "a")
        + cmd("CF.INSERTNX", "k1", "NOCREATE", "ITEMS", "a") + cmd("CF.ADDNX", "k0", "a")
        + cmd("CF.DEL", "k0", "c1") + cmd("CF.DEL", "k0", "nope") + cmd("CF.COMPACT", "k0")
        + cmd("CF.COUNT", "k0", "a") + cmd("CF.MEXISTS", "k0", "a", "z") + cmd("CF.INFO", "k0")
        + cmd("CF.SCANDUMP", "k0", "0") + cmd("CF.SCANDUMP", "k0", "1")
        + cmd("DUMP", "k0") + cmd("COPY", "k0", "k2") + cmd("CF.DEL", "k2", "c2")
        + cmd("BF.ADD", "k0", "x") + cmd("BF.EXISTS", "k0", "x") + cmd("CF.ADD", "k3", "y")
        + cmd("CF.LOADCHUNK", "k1", "1", "\x01" + "\x00" * 7 + "\x04" + "\x00" * 23
              + "\x01" + "\x00" * 7 + "\x02\x00\x14\x00\x01\x00")
        + cmd("CF.LOADCHUNK", "k1", "9", "\x05" * 8) + cmd("CF.LOADCHUNK", "k1", "3", "\x05" * 8)
        + cmd("CF.EXISTS", "k1", "a") + cmd("CF.RESERVE", "k1", "1", "BUCKETSIZE", "300"),
        # Blocks of 4,096 bits (AUTO at 0.5 %, 42 KB), copied and grown.
        "auto-blocks": cmd("BF.RESERVE", "k0", "0.01", "30000") + cmd("BF.INFO", "k0", "LAYOUT")
        + add_then_exists("k0", ["a", "b", "c"], MADD) + round_trip("k0", "k1")
        + cmd("BF.INSERT", "k2", "CAPACITY", "30000", "LAYOUT", "AUTO", "ITEMS", "x")
        + add_then_exists("k1", ["a", "d"], INSERT) + cmd("BF.INFO", "k1"),
        "mutated-chunk": cmd("BF.RESERVE", "k0", "0.01", "20") + cmd("BF.MADD", "k0", "a", "b")
        + round_trip("k0", "k1") + mutated_chunk("k0", "k1", 1, 3, 0xFF, True)
        + mutated_chunk("k0", "k1", 1, 3, 0x01, False) + add_then_exists("k1", ["a", "b"], MADD),
    }
    for name, payload in PAYLOADS.items():
        programs["restore-" + name] = (cmd("RESTORE", "k1", "0", payload) + cmd("BF.INFO", "k1")
                                       + add_then_exists("k1", ["a", "z"], MADD)
                                       + cmd("DUMP", "k1") + round_trip("k1", "k2"))
    programs["sparse-copy-dump"] = (cmd("BF.RESERVE", "k0", "0.01", "40000")
                                    + add_then_exists("k0", ["a", "b", "c"], MADD)
                                    + cmd("COPY", "k0", "k1") + cmd("DUMP", "k1")
                                    + round_trip("k0", "k2") + cmd("BF.MERGE", "k3", "k0", "k2"))
    # Real SCANDUMP pieces loaded with BF.LOADCHUNK as plain commands.
    for name, pieces in dumps.items():
        if all(len(data) <= 255 for _, data in pieces) and len(pieces) < 60:
            program = b"".join(cmd("BF.LOADCHUNK", "k3", str(it), data) for it, data in pieces)
            programs["loadchunk-" + name] = program + cmd("BF.INFO", "k3") + round_trip("k3", "k0")
    return sorted(programs.items())


def command_dict():
    with open(os.path.join(ROOT, "proto", "commands.json")) as f:
        table = json.load(f)["commands"]
    names = []
    for entry in table:
        names.append(entry["name"])
        for sub in entry.get("subcommands", []):
            names.append(sub["name"].split("|")[1])
    options = ["NONSCALING", "EXPANSION", "CAPACITY", "ERROR", "ITEMS", "NOCREATE", "SIZE",
               "FILTERS", "LAYOUT", "CLASSIC", "BLOCKED", "BITSPERITEM", "SCHEME", "TIGHTENING", "VALIDATESCALETO", "MAXSCALEDCAPACITY", "BUCKETSIZE", "MAXITERATIONS", "MATCH", "COUNT", "TYPE", "NX", "XX", "GT", "LT", "BLMDUMP1", "0.01",
               "1e-300", "inf", "nan", "-1", "9223372036854775807", "18446744073709551615", "k*"]
    return names + options


# ---- loadchunk_fuzz: settings, items, then (u32 iter, u16 length, bytes) records ----

def loadchunk_input(settings, items, pieces):
    out = bytes([settings, items])
    for it, data in pieces:
        assert len(data) <= 0xFFFF
        out += struct.pack("<IH", it, len(data)) + data
    return out


LOADCHUNK_DICT = [b"BLMDUMP1", struct.pack("<I", 1), struct.pack("<I", 64), struct.pack("<I", 65),
                  struct.pack("<I", 5), struct.pack("<I", 13), struct.pack("<I", 2),
                  struct.pack("<I", 0xFFFFFFFF), struct.pack("<Q", 64), struct.pack("<Q", 1 << 63),
                  struct.pack("<d", 1.0), struct.pack("<d", 0.5), struct.pack("<d", 1e-300),
                  struct.pack("<d", float("inf")), struct.pack("<d", float("nan")),
                  struct.pack("<d", 5e-324), struct.pack("<Q", 0xFFFFFFFFFFFFFFFF),
                  struct.pack("<I", 8), struct.pack("<I", 9), struct.pack("<d", 0.25)]


# ---- snapshot_reader_fuzz: whole snapshot files ----

SNAPSHOT_DICT = [b"BLOOMERY", struct.pack("<I", 1), struct.pack("<I", 0xFFFFFFFF),
                 struct.pack("<Q", 0), struct.pack("<Q", 0xFFFFFFFFFFFFFFFF), struct.pack("<d", 0.01),
                 struct.pack("<d", 0.25), struct.pack("<d", 0.5)]


# ---- The server's part ----

# Filters whose SCANDUMP seeds loadchunk_fuzz and command_fuzz: small, so every
# chunk stays short, but covering each header shape.
FILTERS = {
    "default": [["BF.MADD", "f", "a", "b", "c"]],
    "reserve": [["BF.RESERVE", "f", "0.01", "50"]] + [["BF.ADD", "f", "i%d" % i] for i in range(30)],
    "nonscaling": [["BF.RESERVE", "f", "0.001", "20", "NONSCALING"], ["BF.MADD", "f", "x", "y"]],
    "layers": [["BF.RESERVE", "f", "0.05", "4", "EXPANSION", "1"]]
    + [["BF.ADD", "f", "n%d" % i] for i in range(24)],
    "expansion4": [["BF.INSERT", "f", "CAPACITY", "8", "ERROR", "0.2", "EXPANSION", "4", "ITEMS"]
                   + ["e%d" % i for i in range(40)]],
    "many-hashes": [["BF.RESERVE", "f", "1e-15", "4"], ["BF.ADD", "f", "z"]],
    "classic": [["BF.RESERVE", "f", "0.01", "40", "LAYOUT", "CLASSIC"]]
    + [["BF.ADD", "f", "c%d" % i] for i in range(50)],
    "blocked-nonscaling": [["BF.RESERVE", "f", "0.001", "60", "NONSCALING", "LAYOUT", "BLOCKED"],
                           ["BF.MADD", "f", "p", "q", "r"]],
    "tightening": [["BF.RESERVE", "f", "0.01", "10", "TIGHTENING", "0.25"]]
    + [["BF.ADD", "f", "t%d" % i] for i in range(40)],
    "counting": [["BF.RESERVE", "f", "0.01", "10", "COUNTING"]]
    + [["BF.ADD", "f", "c%d" % (i % 7)] for i in range(60)] + [["BF.DEL", "f", "c1"]],
    # 42 KB at 0.5 %: blocks of 4,096 bits (the smallest within 2 % there).
    "auto-blocks": [["BF.RESERVE", "f", "0.01", "30000"], ["BF.MADD", "f", "a", "b", "c"]],
    # A 48 KB layer with two items: BF.SCANDUMP skips its untouched regions.
    "sparse": [["BF.RESERVE", "f", "0.01", "40000", "LAYOUT", "CLASSIC"], ["BF.MADD", "f", "a", "b"]],
}

# DUMP payloads (format 0xBF02: layers as runs) of small filters, taken from
# the server, for RESTORE seeds of command_fuzz.
PAYLOADS = {}


# RedisBloom 2.4's own dumps (tests/fixtures/redisbloom, made with RedisBloom):
# its header format and raw chunks, 64-bit and 32-bit hashing, power-of-two
# sub-filters.
REDISBLOOM_DUMPS = {"redisbloom-tiny": ("filters.json", "rb:tiny", "chunks"),
                    "redisbloom-exp1": ("filters.json", "rb:exp1", "chunks"),
                    "redisbloom-nonscaling": ("filters.json", "rb:nonscaling", "chunks"),
                    "redisbloom-legacy-v1": ("legacy.json", "legacy:v1", "loaded_chunks")}


def redisbloom_dumps():
    import base64
    out = {}
    for name, (fixture, key, field) in REDISBLOOM_DUMPS.items():
        with open(os.path.join(ROOT, "tests", "fixtures", "redisbloom", fixture)) as f:
            entry = next(e for e in json.load(f)["filters"] if e["key"] == key)
        out[name] = [(it, base64.b64decode(data)) for it, data in entry[field]]
    return out


def scandump(client, key):
    pieces, it = [], 0
    while True:
        nxt, data = client.execute_command("BF.SCANDUMP", key, it)
        if nxt == 0:
            return pieces
        pieces.append((nxt, data))
        it = nxt


def from_server(binary):
    import harness  # tests/integration/harness.py
    if binary:
        harness.BINARY = binary
    if not os.path.exists(harness.BINARY):
        sys.exit("no server binary at %s: run `make build` or pass --binary" % harness.BINARY)
    dumps, snapshots = {}, []
    with harness.Server() as server:
        client = server.client()
        for name, commands in FILTERS.items():
            client.delete("f")
            for command in commands:
                client.execute_command(*command)
            dumps[name] = scandump(client, "f")
        for name, commands in (("one-layer", [["BF.RESERVE", "f", "0.1", "5", "NONSCALING"],
                                              ["BF.ADD", "f", "a"]]),
                               ("counting", [["BF.RESERVE", "f", "0.2", "3", "COUNTING"],
                                             ["BF.MADD", "f", "a", "a", "b"]])):
            client.delete("f")
            for command in commands:
                client.execute_command(*command)
            PAYLOADS[name] = client.dump("f")

        def snapshot(name, commands):
            client.flushall()
            for command in commands:
                client.execute_command(*command)
            client.save()
            with open(os.path.join(server.data_dir, "dump.bloomery"), "rb") as f:
                snapshots.append((name, f.read()))

        snapshot("empty", [])
        snapshot("one-default", [["BF.ADD", "k", "a"]])
        snapshot("mixed", [["BF.RESERVE", "a", "0.01", "10", "NONSCALING"], ["BF.ADD", "a", "x"],
                           ["BF.RESERVE", "b", "0.1", "2", "EXPANSION", "1"],
                           ["BF.MADD", "b", "1", "2", "3", "4", "5", "6", "7"],
                           ["BF.ADD", "c", "y"], ["PEXPIREAT", "c", str(int(time.time() * 1000) + 10**9)]])
        snapshot("expansion", FILTERS["expansion4"])
        snapshot("tightening", FILTERS["tightening"]
                 + [["BF.INSERT", "n", "NONSCALING", "TIGHTENING", "0.75", "ITEMS", "x"]])
        snapshot("counting", FILTERS["counting"])
        snapshot("auto-blocks", FILTERS["auto-blocks"])
        # Expiring filters: a count window shifted by its adds (a ring gone
        # round), a time window, and one loaded by chunks.
        snapshot("expiring", [["BF.RESERVE", "w", "0.01", "200", "WINDOW", "ITEMS", "SLICES", "4",
                               "6"]]
                 + [["BF.MADD", "w"] + ["i%d" % (i * 40 + j) for j in range(40)] for i in range(12)]
                 + [["BF.INSERT", "t", "WINDOW", "2d", "ITEMS", "a", "b"]])
        # Layers of 48 KB and 1.2 MB holding a few items: runs and long gaps.
        snapshot("sparse", [["BF.RESERVE", "s", "0.01", "40000"], ["BF.MADD", "s", "a", "b", "c"],
                            ["BF.RESERVE", "t", "0.01", "1000000", "COUNTING"],
                            ["BF.MADD", "t", "a", "a", "b"], ["BF.DEL", "t", "b"]])
        snapshot("cuckoo", [["CF.RESERVE", "c", "8", "EXPANSION", "2"]]
                 + [["CF.ADD", "c", "i%d" % i] for i in range(40)]
                 + [["CF.DEL", "c", "i3"], ["CF.ADD", "d", "x"], ["BF.ADD", "b", "y"]])
        rb = redisbloom_dumps()
        snapshot("redisbloom", [["BF.LOADCHUNK", name, it, data]
                                for name in ("redisbloom-tiny", "redisbloom-legacy-v1")
                                for it, data in rb[name]])
    dumps.update(redisbloom_dumps())
    return dumps, snapshots


# ---- cuckoo_fuzz: a CF.SCANDUMP header, u8 chunks, (u32 iter, u16 length,
# bytes) each, then one byte per operation ----

def cuckoo_seeds():
    """RedisBloom's own dumps (tests/fixtures/redisbloom/cuckoo), each with
    a run of inserts, deletes and a compaction after it."""
    directory = os.path.join(ROOT, "tests", "fixtures", "redisbloom", "cuckoo")
    ops = bytes([(i << 2) | (i % 3) for i in range(64)]) + bytes([3]) + bytes(
        [(i << 2) | 2 for i in range(0, 64, 2)])
    seeds = []
    for name in sorted(os.listdir(directory)):
        with open(os.path.join(directory, name)) as f:
            chunks = [(it, bytes.fromhex(data)) for it, data in json.load(f)["chunks"]]
        header, data = chunks[0][1], chunks[1:]
        body = header + bytes([len(data)])
        for it, piece in data:
            body += struct.pack("<IH", it, len(piece)) + piece
        seeds.append((name[:-len(".json")], body + ops))
    return seeds


CUCKOO_DICT = [struct.pack("<Q", 1), struct.pack("<Q", 0), struct.pack("<H", 2),
               struct.pack("<H", 20), struct.pack("<H", 0xFFFF), struct.pack("<Q", 1 << 56),
               struct.pack("<I", 1), struct.pack("<I", 0xFFFFFFFF)]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--binary", help="bloomery server binary (default: build/release/bloomery)")
    args = parser.parse_args()

    dumps, snapshots = from_server(args.binary)

    write_corpus("resp_parser_fuzz", resp_parser_seeds())
    write_dict("resp_parser_fuzz", RESP_DICT, "RESP framing tokens and limits")

    write_corpus("command_fuzz", command_seeds(dumps))
    write_dict("command_fuzz", command_dict(), "Command names, options and numbers at bounds")

    seeds = []
    for name, pieces in sorted(dumps.items()):
        seeds.append((name, loadchunk_input(0x0F, 0, pieces)))
        seeds.append((name + "-small-chunks-add", loadchunk_input(0x31, 40, pieces)))
        seeds.append((name + "-header-only-fix", loadchunk_input(0x13, 200, pieces[:1])))
    write_corpus("loadchunk_fuzz", seeds)
    write_dict("loadchunk_fuzz", LOADCHUNK_DICT, "Dump magic and little-endian values at bounds")

    write_corpus("cuckoo_fuzz", cuckoo_seeds())
    write_dict("cuckoo_fuzz", CUCKOO_DICT, "Little-endian values at the bounds of a Cuckoo header")

    write_corpus("snapshot_reader_fuzz", snapshots)
    write_dict("snapshot_reader_fuzz", SNAPSHOT_DICT, "Snapshot magic and little-endian values")


if __name__ == "__main__":
    main()
