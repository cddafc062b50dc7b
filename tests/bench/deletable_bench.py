#!/usr/bin/env python3
"""Filters that can delete, side by side in one run: bloomery's counting
Bloom filter (BF.RESERVE ... COUNTING, BF.DEL) and bloomery's Cuckoo filter
(CF.RESERVE, CF.DEL) against RedisBloom's Cuckoo filter (CF.RESERVE, CF.DEL)
in Redis, with each server's plain Bloom filter for reference. The two
servers' Cuckoo filters are created alike (capacity N, the default bucket
size 2 and BUCKETSIZE 1; other parameters their defaults, the same in both)
and sit in adjacent rows. Not a test: it measures.

  tests/bench/deletable_bench.py BLOOMERY_BINARY REDISBLOOM_SO [--items N] [--rounds R]

Per filter, at capacity N (default 1,000,000), each server fresh for each
filter and round, and single threaded (bloomery --threads 1, journal and
snapshots off; Redis with no AOF and no snapshots):
- bits per item: the filter's own size (BF.INFO / CF.INFO Size) × 8 / N,
  after N distinct adds;
- the false-positive rate measured with 200,000 items never added
  (RedisBloom's Cuckoo filter has no error-rate parameter: its 8-bit
  fingerprints give about 2·b/255 with b entries per bucket);
- server CPU per operation (user + system time of the server process, from
  /proc, over the load), all sent by redis-benchmark -P 16 -c 50 with random
  items: N/4 adds to a second, empty filter of the same kind; 2N lookups of
  which half were added; N/2 deletes of items drawn from the N added (the
  first delete of an item takes it out, a second finds it absent or not).
Rounds alternate: round r measures every filter once, in the table's order,
before round r + 1 starts, so the servers compared see the same state of
the machine. Each figure is the median of R rounds (default 3). Prints
Markdown tables: the figures, then the ratios bloomery / RedisBloom of the
two Cuckoo filters at each bucket size and of bloomery's counting filters
to RedisBloom's Cuckoo filter at its default (below 1: bloomery smaller,
fewer false positives, less CPU). Progress goes to stderr.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))

import harness  # noqa: E402
import redis  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


class Redis:
    """redis-server with RedisBloom loaded."""

    def __init__(self, module):
        self.dir = tempfile.TemporaryDirectory(prefix="bench-redis-")
        self.port = harness.free_port()
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", self.dir.name, "--loadmodule", module],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        harness.wait_until(self.ping, what="redis-server")

    def ping(self):
        try:
            return redis.Redis(port=self.port).ping()
        except redis.ConnectionError:
            return False

    def stop(self):
        self.process.terminate()
        self.process.wait(30)
        self.dir.cleanup()


class Bloomery:
    def __init__(self, binary):
        harness.BINARY = binary
        self.server = harness.Server("--appendonly", "no", threads=1)
        self.server.start()
        self.port = self.server.port
        self.process = self.server.process

    def stop(self):
        self.server.cleanup()


# name, server kind, create command, add, exists, delete, info command
KINDS = [
    ("bloomery counting, 1 %", "bloomery", ["BF.RESERVE", "f", 0.01, None, "COUNTING", "NONSCALING"],
     "BF.ADD", "BF.EXISTS", "BF.DEL", "BF.INFO"),
    ("bloomery counting, 0.1 %", "bloomery",
     ["BF.RESERVE", "f", 0.001, None, "COUNTING", "NONSCALING"], "BF.ADD", "BF.EXISTS", "BF.DEL",
     "BF.INFO"),
    ("bloomery plain (auto), 1 %", "bloomery", ["BF.RESERVE", "f", 0.01, None, "NONSCALING"],
     "BF.ADD", "BF.EXISTS", None, "BF.INFO"),
    ("bloomery Cuckoo, bucket 2 (default)", "bloomery", ["CF.RESERVE", "f", None],
     "CF.ADD", "CF.EXISTS", "CF.DEL", "CF.INFO"),
    ("RedisBloom Cuckoo, bucket 2 (default)", "redis", ["CF.RESERVE", "f", None],
     "CF.ADD", "CF.EXISTS", "CF.DEL", "CF.INFO"),
    ("bloomery Cuckoo, bucket 1", "bloomery", ["CF.RESERVE", "f", None, "BUCKETSIZE", 1],
     "CF.ADD", "CF.EXISTS", "CF.DEL", "CF.INFO"),
    ("RedisBloom Cuckoo, bucket 1", "redis", ["CF.RESERVE", "f", None, "BUCKETSIZE", 1],
     "CF.ADD", "CF.EXISTS", "CF.DEL", "CF.INFO"),
    ("RedisBloom Bloom, 1 %", "redis", ["BF.RESERVE", "f", 0.01, None, "NONSCALING"],
     "BF.ADD", "BF.EXISTS", None, "BF.INFO"),
]

# Ratio rows: label, bloomery's filter, RedisBloom's filter.
RATIOS = [
    ("Cuckoo, bucket 2 (default)", "bloomery Cuckoo, bucket 2 (default)",
     "RedisBloom Cuckoo, bucket 2 (default)"),
    ("Cuckoo, bucket 1", "bloomery Cuckoo, bucket 1", "RedisBloom Cuckoo, bucket 1"),
    ("counting 1 % / Cuckoo default", "bloomery counting, 1 %",
     "RedisBloom Cuckoo, bucket 2 (default)"),
    ("counting 0.1 % / Cuckoo default", "bloomery counting, 0.1 %",
     "RedisBloom Cuckoo, bucket 2 (default)"),
]


def load(port, items, command):
    """Adds items 0..items-1 as redis-benchmark writes __rand_int__ (12
    digits, zero-padded), pipelined."""
    r = redis.Redis(port=port)
    pipe = r.pipeline(transaction=False)
    for i in range(items):
        pipe.execute_command(command, "f", "%012d" % i)
        if len(pipe) == 10000:
            pipe.execute()
    pipe.execute()


def fpr(port, items, command):
    r = redis.Redis(port=port)
    probes = 200000
    pipe = r.pipeline(transaction=False)
    hits = 0
    for i in range(probes):
        pipe.execute_command(command, "f", "absent-%d" % (items + i))
        if len(pipe) == 10000:
            hits += sum(bool(x) for x in pipe.execute())
    hits += sum(bool(x) for x in pipe.execute())
    return hits / probes


def benchmark_cpu(server, args, n, keyspace):
    """Server CPU seconds per command over redis-benchmark's n commands,
    __rand_int__ drawn from [0, keyspace)."""
    before = cpu_seconds(server.process.pid)
    subprocess.run(["redis-benchmark", "-p", str(server.port), "-n", str(n), "-P", "16", "-c", "50",
                    "-r", str(keyspace)] + [str(a) for a in args], stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, check=True)
    return (cpu_seconds(server.process.pid) - before) / n


def size_of(port, info):
    reply = redis.Redis(port=port).execute_command(info, "f")
    fields = dict(zip(reply[::2], reply[1::2]))
    return int(fields[b"Size"])


def measure(kind, binary, module, items):
    name, server_kind, create, add, exists, delete, info = kind
    server = Bloomery(binary) if server_kind == "bloomery" else Redis(module)
    try:
        r = redis.Redis(port=server.port)
        for key in ("f", "g"):
            r.execute_command(*[items if a is None else key if a == "f" else a for a in create])
        add_cpu = benchmark_cpu(server, [add, "g", "__rand_int__"], items // 4, items)
        load(server.port, items, add)
        bits = size_of(server.port, info) * 8 / items
        rate = fpr(server.port, items, exists)
        exists_cpu = benchmark_cpu(server, [exists, "f", "__rand_int__"], 2 * items, 2 * items)
        del_cpu = None
        if delete:
            del_cpu = benchmark_cpu(server, [delete, "f", "__rand_int__"], items // 2, items)
        return bits, rate, add_cpu, exists_cpu, del_cpu
    finally:
        server.stop()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("binary")
    parser.add_argument("module")
    parser.add_argument("--items", type=int, default=1000000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    results = {kind[0]: [] for kind in KINDS}
    for round_ in range(args.rounds):
        for kind in KINDS:
            print("round %d/%d: %s" % (round_ + 1, args.rounds, kind[0]), file=sys.stderr)
            results[kind[0]].append(measure(kind, args.binary, args.module, args.items))
    med = {}
    for name, rounds in results.items():
        med[name] = [statistics.median(r[i] for r in rounds) if rounds[0][i] is not None
                     else None for i in range(5)]
    print("| filter | bits per item | false positives | add, µs CPU | lookup, µs CPU | "
          "delete, µs CPU |")
    print("|---|---|---|---|---|---|")
    for kind in KINDS:
        m = med[kind[0]]
        print("| %s | %.1f | %.3f %% | %.2f | %.2f | %s |"
              % (kind[0], m[0], 100 * m[1], 1e6 * m[2], 1e6 * m[3],
                 "%.2f" % (1e6 * m[4]) if m[4] is not None else "-"))
    print()
    print("| bloomery / RedisBloom | bits per item | false positives | add CPU | lookup CPU | "
          "delete CPU |")
    print("|---|---|---|---|---|---|")
    for label, ours, theirs in RATIOS:
        a, b = med[ours], med[theirs]
        print("| %s | %s |" % (label, " | ".join(
            "%.2f×" % (a[i] / b[i]) if b[i] else "-" for i in range(5))))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
