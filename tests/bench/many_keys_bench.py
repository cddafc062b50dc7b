#!/usr/bin/env python3
"""Millions of small filters: what the idle server spends, what DBSIZE, INFO
keyspace and SCAN cost, and memory per key, for one or more builds side by
side in one run.

  tests/bench/many_keys_bench.py [--keys N] [--idle-seconds S] BINARY [BINARY ...]

Each binary gets a fresh server (2 worker threads, default persistence, no
snapshots) loaded with N keys by `redis-cli --pipe` (`BF.ADD k:<i> x`, one
key in ten with PEXPIRE 3600000), then, once the journal's rewrites that
the load triggered are done: CPU share of one core over S idle
seconds; per command, the server's own microseconds per call (INFO
commandstats) and the median client round trip of 50 calls; used_memory
and RSS per key. Prints one Markdown row per binary."""

import argparse
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))

import harness  # noqa: E402
import many_keys  # noqa: E402


def measure(binary, keys, idle_seconds):
    harness.BINARY = binary
    server = harness.Server(threads=2)
    server.start()
    try:
        r = server.client()
        used0 = int(r.info("memory")["used_memory"])
        rss0 = harness.rss_bytes(server.process.pid)
        started = time.monotonic()
        with_deadline = many_keys.load_keys(server.port, 0, keys)
        load_seconds = time.monotonic() - started
        harness.wait_until(lambda: many_keys.settled(r), timeout=1800,
                           what="the journal to settle")
        row = {
            "binary": binary,
            "keys": keys,
            "with_deadline": with_deadline,
            "load_s": load_seconds,
            "used_per_key": (int(r.info("memory")["used_memory"]) - used0) / keys,
            "rss_per_key": (harness.rss_bytes(server.process.pid) - rss0) / keys,
            "idle_cpu": many_keys.idle_cpu_share(server.process.pid, idle_seconds),
        }
        row.update(many_keys.server_usec_per_call(r, many_keys.BOUNDED_CALLS))
        return row
    finally:
        server.stop()


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keys", type=int, default=10_000_000)
    parser.add_argument("--idle-seconds", type=float, default=10.0)
    parser.add_argument("binaries", nargs="+")
    args = parser.parse_args()
    commit = subprocess.run(["git", "-C", HERE, "rev-parse", "--short", "HEAD"],
                            stdout=subprocess.PIPE, text=True).stdout.strip()
    print("# %s, commit %s, %d cores" % (time.strftime("%Y-%m-%d"), commit, os.cpu_count()))
    print("| binary | keys | idle CPU (% of a core) | DBSIZE µs server / round trip "
          "| INFO keyspace µs | SCAN 0 MATCH nomatch* COUNT 10 µs | used_memory B/key "
          "| RSS B/key | load s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for binary in args.binaries:
        row = measure(binary, args.keys, args.idle_seconds)
        print("| %s | %d | %.2f | %.1f / %.0f | %.1f / %.0f | %.1f / %.0f | %.1f | %.1f | %.0f |" % (
            row["binary"], row["keys"], row["idle_cpu"] * 100, row["dbsize"][0], row["dbsize"][1],
            row["info"][0], row["info"][1], row["scan"][0], row["scan"][1], row["used_per_key"],
            row["rss_per_key"], row["load_s"]), flush=True)


if __name__ == "__main__":
    main()
