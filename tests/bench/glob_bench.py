#!/usr/bin/env python3
"""A hostile KEYS pattern against a long key, for one or more builds side by
side: `*` followed by 8,000 `a` and a `b`, against a key of 1 MiB of `a`
(no match). Prints the seconds KEYS took, the median of 3 calls.

  tests/bench/glob_bench.py BINARY [BINARY ...]"""

import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))

import harness  # noqa: E402
import redis  # noqa: E402  (Debian's python3-redis)


def main():
    pattern = "*" + "a" * 8000 + "b"
    print("| binary | KEYS seconds (median of 3) |")
    print("|---|---|")
    for binary in sys.argv[1:]:
        harness.BINARY = binary
        server = harness.Server(threads=2)
        server.start()
        try:
            r = redis.Redis(host="127.0.0.1", port=server.port, socket_timeout=600)
            r.execute_command("BF.ADD", "a" * (1 << 20), "x")
            times = []
            for _ in range(3):
                started = time.perf_counter()
                assert r.keys(pattern) == []
                times.append(time.perf_counter() - started)
            print("| %s | %.4f |" % (binary, statistics.median(times)), flush=True)
        finally:
            server.stop()


if __name__ == "__main__":
    main()
