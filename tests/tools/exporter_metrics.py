#!/usr/bin/python3
"""The metric names Debian's prometheus-redis-exporter (oliver006/redis_exporter)
produces for a server, after the same workload on every server.

    exporter_metrics.py record HOST:PORT FILE   run the workload on the server (Redis 7.0
                                                with RedisBloom), scrape it and write the
                                                sorted metric names to FILE (the fixture
                                                tests/integration/fixtures/
                                                redis_exporter_metrics.txt)
    exporter_metrics.py show HOST:PORT          the same, printed

The workload leaves something for each of the exporter's sections: filters
(one with a deadline), an error reply of two kinds (errorstats), a command
slow enough for the slow log and the latency monitor (one BF.MADD of 200,000
items takes milliseconds anywhere), then the exporter scrapes once.
"""

import os
import socket
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bf_replies  # noqa: E402

EXPORTER_NAMES = ("/usr/bin/prometheus-redis-exporter", "/usr/bin/redis_exporter")


def exporter_binary():
    for path in EXPORTER_NAMES:
        if os.access(path, os.X_OK):
            return path
    return None


def workload(host_port):
    c = bf_replies.Connection(*bf_replies.address(host_port))
    try:
        for args in (["FLUSHALL"],
                     ["CONFIG", "SET", "latency-monitor-threshold", "1"],
                     ["CONFIG", "SET", "slowlog-log-slower-than", "0"],
                     ["BF.RESERVE", "big", "0.01", "300000"],
                     ["BF.MADD", "big"] + ["item%d" % i for i in range(200000)],
                     ["BF.ADD", "k", "a"],
                     ["BF.RESERVE", "t", "0.01", "100"],
                     ["EXPIRE", "t", "100000"],
                     ["BF.INFO", "k", "BOGUS"],
                     ["BF.NOSUCHCOMMAND"]):
            c.call_raw(args)
    finally:
        c.close()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scrape(host_port, port=None, timeout=60.0):
    """One scrape of the server by a fresh exporter: the /metrics text."""
    binary = exporter_binary()
    if binary is None:
        raise RuntimeError("prometheus-redis-exporter is not installed")
    port = port or free_port()
    exporter = subprocess.Popen(
        [binary, "-redis.addr", "redis://" + host_port, "-web.listen-address",
         "127.0.0.1:%d" % port, "-redis-only-metrics"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=30) as r:
                    return r.read().decode()
            except OSError:
                if exporter.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the exporter did not answer: %s" %
                                       exporter.stderr.read().decode(errors="replace"))
                time.sleep(0.05)
    finally:
        exporter.terminate()
        exporter.wait(timeout=10)
        exporter.stderr.close()


def metric_names(text):
    """Every metric name of a Prometheus text page, sorted."""
    names = set()
    for line in text.splitlines():
        if line and not line.startswith("#"):
            names.add(line.split("{", 1)[0].split(" ", 1)[0])
    return sorted(names)


def main(argv):
    if len(argv) in (2, 3) and argv[0] in ("record", "show"):
        workload(argv[1])
        names = metric_names(scrape(argv[1]))
        if argv[0] == "record" and len(argv) == 3:
            with open(argv[2], "w") as f:
                f.write("".join(name + "\n" for name in names))
            print("recorded %d metric names into %s" % (len(names), argv[2]))
        else:
            print("\n".join(names))
        return 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
