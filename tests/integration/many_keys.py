"""Millions of small filters, made fast and measured: shared by
test_many_keys.py (2M keys, with bounds) and tests/bench/many_keys_bench.py
(10M keys, figures for the report).

Keys are made through `redis-cli --pipe`, as an operator bulk-loads Redis:
`BF.ADD k:<i> x` (a default filter per key), and one key in ten also gets a
deadline an hour away (PEXPIRE), as users with one filter per tenant or per
day have."""

import os
import statistics
import subprocess
import time

TICKS = os.sysconf("SC_CLK_TCK")




def cpu_seconds(pid):
    """User + system CPU the process has used, in seconds."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS




def load_keys(port, first, count, expire_every=10, chunk=500000):
    """Makes keys k:<first> .. k:<first+count-1>; returns how many got a
    deadline. Fed in chunks so the payload never holds millions of
    commands at once."""
    with_deadline = 0
    for start in range(first, first + count, chunk):
        end = min(start + chunk, first + count)
        parts = []
        for i in range(start, end):
            key = b"k:%d" % i
            parts.append(b"*3\r\n$6\r\nBF.ADD\r\n$%d\r\n%s\r\n$1\r\nx\r\n" % (len(key), key))
            if expire_every and i % expire_every == 0:
                parts.append(b"*3\r\n$7\r\nPEXPIRE\r\n$%d\r\n%s\r\n$7\r\n3600000\r\n" % (len(key), key))
                with_deadline += 1
        result = subprocess.run(["redis-cli", "-p", str(port), "--pipe"], input=b"".join(parts),
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=1800)
        if result.returncode != 0 or b"errors: 0" not in result.stdout:
            raise RuntimeError("redis-cli --pipe failed: %r" % result.stdout[-500:])
    return with_deadline


def settled(client):
    """True once every record is written and no journal rewrite or snapshot
    runs or waits: a bulk load grows the journal, and the rewrites it
    triggers (a snapshot of every key) are work, not idling."""
    client.execute_command("WAIT", 0, 0)
    p = client.info("persistence")
    return (int(p["aof_buffer_length"]) == 0 and int(p["aof_rewrite_in_progress"]) == 0
            and int(p["aof_rewrite_scheduled"]) == 0 and int(p.get("aof_pending_rewrite", 0)) == 0
            and int(p["rdb_bgsave_in_progress"]) == 0)


def idle_cpu_share(pid, seconds=10.0):
    """The share of one core the process used over `seconds` of wall time
    (a measurement window: nothing is waited for)."""
    cpu0, wall0 = cpu_seconds(pid), time.monotonic()
    time.sleep(seconds)
    return (cpu_seconds(pid) - cpu0) / (time.monotonic() - wall0)


def server_usec_per_call(client, calls):
    """Runs each command of `calls` (name -> argument list) 50 times after a
    CONFIG RESETSTAT; returns name -> (server microseconds per call from
    INFO commandstats, median client round trip in microseconds)."""
    results = {}
    for name, args in calls.items():
        client.execute_command("CONFIG", "RESETSTAT")
        trips = []
        for _ in range(50):
            t0 = time.perf_counter()
            client.execute_command(*args)
            trips.append((time.perf_counter() - t0) * 1e6)
        stats = client.info("commandstats")
        entry = stats.get("cmdstat_" + name)
        if entry is None:
            raise RuntimeError("no commandstats for %s: %r" % (name, sorted(stats)))
        results[name] = (float(entry["usec_per_call"]), statistics.median(trips))
    return results


BOUNDED_CALLS = {
    "dbsize": ["DBSIZE"],
    "info": ["INFO", "keyspace"],
    "scan": ["SCAN", "0", "MATCH", "nomatch*", "COUNT", "10"],
}
