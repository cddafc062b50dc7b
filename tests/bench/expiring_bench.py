#!/usr/bin/env python3
"""Expiring filters against plain filters of the same error rate, in the
server, side by side in one run. Not a test: it measures.

  tests/bench/expiring_bench.py BLOOMERY_BINARY [--items N] [--rounds R]

Per filter (BF.RESERVE f p N NONSCALING, and BF.RESERVE f p N WINDOW ITEMS:
the last N items), at 1 % and 0.1 %, each on a fresh server with the journal
and snapshots off:
- bits per item: BF.INFO Size × 8 / N (N the plain filter's capacity, the
  expiring filter's guaranteed window; Size counts everything the filter
  holds);
- the false-positive rate measured with 200,000 items never added, after 3N
  distinct adds (the expiring filter has shifted through three windows; the
  plain one took N);
- server CPU per command (user + system time of the server process, from
  /proc), sent by redis-benchmark -P 16 -c 50 with random items: N adds to a
  second, empty filter (the expiring one shifting every g adds), then 2N
  lookups in the full one;
- the same adds with the server on 1 and on 2 worker threads
  (redis-benchmark --threads 2): CPU per add at 2 threads over 1 says whether
  one filter's adders contend (1.0: they share nothing more than on one).
Rounds alternate: round r measures every filter once, in the table's order,
before round r + 1 starts. Each figure is the median of R rounds (default
3). Prints Markdown tables: the figures, then the ratios expiring / plain at
each rate. Progress goes to stderr.
"""

import argparse
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))

import harness  # noqa: E402
import redis  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")

# name, create arguments after the key (None: N)
KINDS = [
    ("plain, 1 %", [0.01, None, "NONSCALING"]),
    ("expiring, 1 %", [0.01, None, "WINDOW", "ITEMS"]),
    ("plain, 0.1 %", [0.001, None, "NONSCALING"]),
    ("expiring, 0.1 %", [0.001, None, "WINDOW", "ITEMS"]),
]


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def start(binary, threads):
    harness.BINARY = binary
    server = harness.Server("--appendonly", "no", threads=threads)
    server.start()
    return server


def benchmark_cpu(server, args, n, keyspace, client_threads=1):
    """Server CPU seconds per command over redis-benchmark's n commands,
    __rand_int__ drawn from [0, keyspace)."""
    before = cpu_seconds(server.process.pid)
    subprocess.run(["redis-benchmark", "-p", str(server.port), "-n", str(n), "-P", "16", "-c", "50",
                    "--threads", str(client_threads), "-r", str(keyspace)]
                   + [str(a) for a in args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   check=True)
    return (cpu_seconds(server.process.pid) - before) / n


def create(r, key, spec, items):
    r.execute_command("BF.RESERVE", key, *[items if a is None else a for a in spec])


def load(r, items, first=0):
    pipe = r.pipeline(transaction=False)
    for start_ in range(first, first + items, 500):
        pipe.execute_command("BF.MADD", "f", *["%012d" % i for i in
                                               range(start_, min(start_ + 500, first + items))])
        if len(pipe) == 20:
            pipe.execute()
    pipe.execute()


def fpr(r, items):
    probes, hits = 200000, 0
    for first in range(0, probes, 1000):
        hits += sum(r.execute_command("BF.MEXISTS", "f", *["absent-%d" % (items + first + i)
                                                           for i in range(1000)]))
    return hits / probes


def measure(spec, binary, items):
    expiring = "WINDOW" in spec
    server = start(binary, 1)
    try:
        r = redis.Redis(port=server.port)
        for key in ("f", "g"):
            create(r, key, spec, items)
        add_cpu = benchmark_cpu(server, ["BF.ADD", "g", "__rand_int__"], items, 10**12)
        load(r, 3 * items if expiring else items)
        size = int(r.execute_command("BF.INFO", "f", "SIZE")[0])
        bits = size * 8 / items
        rate = fpr(r, 3 * items)
        exists_cpu = benchmark_cpu(server, ["BF.EXISTS", "f", "__rand_int__"], 2 * items,
                                   6 * items)
    finally:
        server.cleanup()
    server = start(binary, 2)
    try:
        r = redis.Redis(port=server.port)
        create(r, "g", spec, items)
        add_cpu_2 = benchmark_cpu(server, ["BF.ADD", "g", "__rand_int__"], items, 10**12, 2)
    finally:
        server.cleanup()
    return bits, rate, add_cpu, exists_cpu, add_cpu_2


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("binary")
    parser.add_argument("--items", type=int, default=1000000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    results = {name: [] for name, _ in KINDS}
    for round_ in range(args.rounds):
        for name, spec in KINDS:
            print("round %d/%d: %s" % (round_ + 1, args.rounds, name), file=sys.stderr)
            results[name].append(measure(spec, args.binary, args.items))
    med = {name: [statistics.median(r[i] for r in rounds) for i in range(5)]
           for name, rounds in results.items()}
    print("N = %d, medians of %d rounds\n" % (args.items, args.rounds))
    print("| filter | bits per item | measured rate | ns CPU per add | ns CPU per lookup "
          "| ns CPU per add, 2 threads | 2 threads / 1 |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, _ in KINDS:
        bits, rate, add, exists, add2 = med[name]
        print("| %s | %.2f | %.3f %% | %.0f | %.0f | %.0f | %.2f |"
              % (name, bits, 100 * rate, add * 1e9, exists * 1e9, add2 * 1e9, add2 / add))
    print("\n| expiring / plain | bits | CPU per add | CPU per lookup |")
    print("|---|---:|---:|---:|")
    for rate in ("1 %", "0.1 %"):
        e, p = med["expiring, " + rate], med["plain, " + rate]
        print("| %s | %.2f | %.2f | %.2f |" % (rate, e[0] / p[0], e[2] / p[2], e[3] / p[3]))


if __name__ == "__main__":
    main()
