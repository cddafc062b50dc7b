#!/usr/bin/env python3
"""Many clients adding to ONE Cuckoo filter against the same clients spread
over many filters, at each worker-thread count: what one lock per Cuckoo
filter costs. Every access to a Cuckoo filter (adds, deletes and lookups
alike) takes that filter's mutex; different filters never contend. BF.ADD
on a plain Bloom filter (atomic bits, no filter lock) is measured the same
way for reference. Not a test: it measures, then checks one thing.

  /usr/bin/python3 tests/bench/cuckoo_threads_bench.py BLOOMERY_BINARY \\
      [--threads 1,2] [--adds N] [--rounds R] [--filters F] [--pipeline P]

Load (server CPU per add and throughput): for each round, each --threads
value (the server restarted with --threads T, journal and snapshots off)
and each case below, a fresh server gets N adds (default 1,000,000) of
random items (redis-benchmark's __rand_int__ over 10^9), pipelined -P 16,
on 50 connections in all, into filters reserved beforehand at capacity 2N
in all (half full at the end: no kicks past the usual, no expansion):
- "1 filter": F redis-benchmark processes (default F = 50), each -c 1, all
  adding to the one key;
- "F filters": the same F processes, each -c 1, each adding to a key of its
  own. Both cases have the same clients; only the keys differ.
- "1 filter, -c F": one redis-benchmark -c F adding to the one key.
Why F processes and not one redis-benchmark with the key
`cf:__rand_int__` and -r F: redis-benchmark fills every __rand_int__ of
a command from the same range -r, so the items would be F distinct values
too, each added over and over (a Cuckoo filter takes at most 2 × bucket
size copies of an item before it has to expand).
Throughput is the adds the server counted (INFO commandstats; a little over
N, as redis-benchmark sends whole pipelines; none may fail) over the wall
time from starting the clients until the last one exits; server CPU per add
is the server's user + system time (/proc) over the load, divided by the
same count; server sleeps per 1000 adds are its threads' voluntary context
switches (/proc/PID/task/*/status) over the load per 1000 adds: a worker
that finds a filter's mutex held sleeps on it (glibc's mutex does not
spin), and so does one waiting for input, so contention for the one
filter's lock shows as more sleeps than with F filters. Rounds alternate
thread counts and cases; each figure is the median of R rounds (default
3). On a machine with few cores the clients take CPU from the server: the
throughput there says little about the server, the CPU per add and the
sleeps more.

Correctness, once per --threads value after the rounds: 8 Python clients
(redis-py, one connection each, in threads) CF.ADD to one filter (CF.RESERVE
capacity 100,000, bucket size 2, expansion 1) at once, pipelined by 100:
20,000 items of each client's own and 1,000 items all clients add (8 copies
each: past the 4 a pair of buckets holds, so the filter expands while the
clients race). Each client records every add acknowledged with 1. Then:
every acknowledged item answers CF.EXISTS 1 (and CF.MEXISTS 1); CF.INFO's
"Number of items inserted" equals the number of acknowledged adds, "Number
of items deleted" is 0; CF.COUNT of each shared item is at least the number
of times it was acknowledged. The script exits 1 if any of that fails.

Prints Markdown tables; progress goes to stderr.
"""

import argparse
import os
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))

import harness  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")
RANGE = 1000000000  # redis-benchmark's -r: items drawn from [0, 10^9)


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def voluntary_switches(pid):
    """Voluntary context switches of all the process's threads: a thread
    that finds a mutex held sleeps on it (a futex wait), and so does one
    with nothing to read (epoll_wait)."""
    total = 0
    for task in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/status" % (pid, task)) as f:
                for line in f:
                    if line.startswith("voluntary_ctxt_switches:"):
                        total += int(line.split()[1])
        except FileNotFoundError:
            pass  # a thread that ended
    return total


def start_server(binary, threads):
    harness.BINARY = binary
    server = harness.Server("--appendonly", "no", threads=threads)
    server.start()
    return server


# family: (reserve command with the key, capacity; add command)
FAMILIES = {
    "CF": (lambda key, capacity: ["CF.RESERVE", key, capacity], "CF.ADD"),
    "BF": (lambda key, capacity: ["BF.RESERVE", key, 0.01, capacity, "NONSCALING"], "BF.ADD"),
}


def run_case(binary, threads, family, case, adds, filters, pipeline):
    """One fresh server, one load; returns (adds per second, server CPU
    seconds per add, server voluntary context switches per add)."""
    reserve, add = FAMILIES[family]
    server = start_server(binary, threads)
    try:
        r = server.client()
        if case == "many":
            keys = ["%s:%d" % (family.lower(), i) for i in range(filters)]
            for key in keys:
                r.execute_command(*reserve(key, 2 * adds // filters))
        else:
            keys = ["f"] * filters
            r.execute_command(*reserve("f", 2 * adds))
        base = ["redis-benchmark", "-h", "127.0.0.1", "-p", str(server.port), "-P",
                str(pipeline), "-r", str(RANGE), "-q"]
        if case == "one-process":
            commands = [base + ["-c", str(filters), "-n", str(adds), add, "f", "__rand_int__"]]
        else:
            # The remainder goes to the first processes, so the total is N.
            share = [adds // filters + (1 if i < adds % filters else 0) for i in range(filters)]
            commands = [base + ["-c", "1", "-n", str(n), add, key, "__rand_int__"]
                        for key, n in zip(keys, share)]
        before = cpu_seconds(server.process.pid)
        switches = voluntary_switches(server.process.pid)
        start = time.monotonic()
        processes = [subprocess.Popen(c, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                     for c in commands]
        failed = []
        for p in processes:
            _, err = p.communicate()
            if p.returncode != 0:
                failed.append(err.decode(errors="replace"))
        wall = time.monotonic() - start
        cpu = cpu_seconds(server.process.pid) - before
        switches = voluntary_switches(server.process.pid) - switches
        if failed:
            raise RuntimeError("redis-benchmark failed: %s" % failed[0])
        # The server's own count of the adds: redis-benchmark sends whole
        # pipelines, so a little more than it was asked for.
        stats = r.info("commandstats").get("cmdstat_%s" % add.lower(), {})
        calls = stats.get("calls", 0)
        if calls < adds or stats.get("failed_calls", 0) or stats.get("rejected_calls", 0):
            raise RuntimeError("%s: expected %d calls, server says %s" % (add, adds, stats))
        return calls / wall, cpu / calls, switches / calls
    finally:
        server.cleanup()


def verify(binary, threads, clients=8, own=20000, shared=1000, batch=100):
    """Returns a list of failures (empty: all held) and a summary line."""
    server = start_server(binary, threads)
    try:
        r = server.client()
        r.execute_command("CF.RESERVE", "v", 100000, "BUCKETSIZE", 2, "EXPANSION", 1)
        acked = [dict() for _ in range(clients)]  # item -> times acknowledged
        errors = [0] * clients
        crashes = []
        barrier = threading.Barrier(clients)

        def client(c):
            try:
                conn = server.client()
                # The shared items spread evenly among the client's own, so
                # every client reaches each of them at about the same time.
                step = max(1, own // shared)
                order, next_shared = [], 0
                for i in range(own):
                    order.append("own:%d:%d" % (c, i))
                    if (i + 1) % step == 0 and next_shared < shared:
                        order.append("shared:%d" % next_shared)
                        next_shared += 1
                order.extend("shared:%d" % i for i in range(next_shared, shared))
                barrier.wait()
                for i in range(0, len(order), batch):
                    pipe = conn.pipeline(transaction=False)
                    chunk = order[i:i + batch]
                    for item in chunk:
                        pipe.execute_command("CF.ADD", "v", item)
                    for item, reply in zip(chunk, pipe.execute(raise_on_error=False)):
                        if reply == 1:
                            acked[c][item] = acked[c].get(item, 0) + 1
                        else:
                            errors[c] += 1
            except Exception as e:  # noqa: BLE001 - reported below
                crashes.append(repr(e))

        workers = [threading.Thread(target=client, args=(c,)) for c in range(clients)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        failures = ["client crashed: %s" % e for e in crashes]
        times = {}
        for a in acked:
            for item, n in a.items():
                times[item] = times.get(item, 0) + n
        total = sum(times.values())
        missing = 0
        items = list(times)
        for i in range(0, len(items), 1000):
            chunk = items[i:i + 1000]
            pipe = r.pipeline(transaction=False)
            for item in chunk:
                pipe.execute_command("CF.EXISTS", "v", item)
            missing += sum(1 for x in pipe.execute() if x != 1)
            mexists = r.execute_command("CF.MEXISTS", "v", *chunk)
            missing += sum(1 for x in mexists if x != 1)
        if missing:
            failures.append("%d acknowledged items answer CF.EXISTS/MEXISTS 0" % missing)
        reply = r.execute_command("CF.INFO", "v")
        info = {k.decode(): v for k, v in zip(reply[::2], reply[1::2])}
        if info["Number of items inserted"] != total:
            failures.append("CF.INFO Number of items inserted %d, acknowledged adds %d"
                            % (info["Number of items inserted"], total))
        if info["Number of items deleted"] != 0:
            failures.append("CF.INFO Number of items deleted %d" % info["Number of items deleted"])
        pipe = r.pipeline(transaction=False)
        shared_items = ["shared:%d" % i for i in range(shared)]
        for item in shared_items:
            pipe.execute_command("CF.COUNT", "v", item)
        low = sum(1 for item, n in zip(shared_items, pipe.execute()) if n < times.get(item, 0))
        if low:
            failures.append("%d shared items have CF.COUNT below their acknowledged adds" % low)
        summary = ("--threads %d: %d clients, %d adds acknowledged (%d refused), "
                   "%d filters (expanded), inserted %d, %s"
                   % (threads, clients, total, sum(errors), info["Number of filters"],
                      info["Number of items inserted"],
                      "all checks held" if not failures else "FAILED: " + "; ".join(failures)))
        return failures, summary
    finally:
        server.cleanup()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("binary")
    parser.add_argument("--threads", default="1,2",
                        help="comma-separated server --threads values (default 1,2)")
    parser.add_argument("--adds", type=int, default=1000000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--filters", type=int, default=50,
                        help="clients in all, and filters of the many-filters case")
    parser.add_argument("--pipeline", type=int, default=16)
    args = parser.parse_args()
    thread_counts = [int(t) for t in args.threads.split(",")]
    cases = [("one", "1 filter"), ("many", "%d filters" % args.filters),
             ("one-process", "1 filter, -c %d" % args.filters)]
    results = {}
    for round_ in range(args.rounds):
        for threads in thread_counts:
            for family in FAMILIES:
                for case, _ in cases:
                    print("round %d/%d: --threads %d %s %s" % (round_ + 1, args.rounds, threads,
                                                              family, case), file=sys.stderr)
                    results.setdefault((threads, family, case), []).append(
                        run_case(args.binary, threads, family, case, args.adds, args.filters,
                                 args.pipeline))
    med = {k: tuple(statistics.median(v[i] for v in rounds) for i in range(3))
           for k, rounds in results.items()}

    print("| --threads | command | keys | adds/s | server µs CPU per add | "
          "server sleeps per 1000 adds |")
    print("|---|---|---|---|---|---|")
    for threads in thread_counts:
        for family, (_, add) in FAMILIES.items():
            for case, label in cases:
                ops, cpu, sleeps = med[(threads, family, case)]
                print("| %d | %s | %s | %.0f | %.2f | %.1f |" % (threads, add, label, ops,
                                                               1e6 * cpu, 1e3 * sleeps))
    print()
    print("Ratios, %d filters / 1 filter (same %d clients):" % (args.filters, args.filters))
    print()
    print("| --threads | command | adds/s | CPU per add | sleeps per add |")
    print("|---|---|---|---|---|")
    for threads in thread_counts:
        for family, (_, add) in FAMILIES.items():
            one, many = med[(threads, family, "one")], med[(threads, family, "many")]
            print("| %d | %s | %.2f× | %.2f× | %.2f× |" % (threads, add, many[0] / one[0],
                                                           many[1] / one[1], many[2] / one[2]))
    if len(thread_counts) > 1:
        first = thread_counts[0]
        print()
        print("Ratios, --threads T / --threads %d:" % first)
        print()
        print("| --threads | command | keys | adds/s | CPU per add |")
        print("|---|---|---|---|---|")
        for threads in thread_counts[1:]:
            for family, (_, add) in FAMILIES.items():
                for case, label in cases:
                    a, b = med[(threads, family, case)], med[(first, family, case)]
                    print("| %d | %s | %s | %.2f× | %.2f× |" % (threads, add, label, a[0] / b[0],
                                                               a[1] / b[1]))
    print()
    print("Correctness after concurrent CF.ADD to one filter:")
    print()
    failed = False
    for threads in thread_counts:
        print("verify --threads %d" % threads, file=sys.stderr)
        failures, summary = verify(args.binary, threads)
        failed = failed or bool(failures)
        print("- " + summary)
    sys.stdout.flush()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
