"""What a writer sees while MIGRATE moves a filter it writes without pause.

bloomery: a two-node cluster (map given at start, --appendonly no, --save
""); one filter of SIZE MB in a slot of node A; two writer threads
(redis-py RedisCluster) add unique items to it as fast as they can while
the slot is opened (IMPORTING / MIGRATING), the filter sent with MIGRATE
... KEYS and the slot given to B (SETSLOT NODE). A filter that changed
during its copy is copied again with its writes held: the longest add is
that pause.

Redis 7 + RedisBloom (with --redisbloom SO): two standalone servers, the
same filter moved with the same MIGRATE while the writers add to another
filter on the source (Redis runs MIGRATE on its one thread, so every client
of the source waits for the copy; a standalone source would take adds to
the moved key again after it).

Prints per round: system, MB, MIGRATE seconds, adds during the move, the
writers' p50 / p99 / max add latency in ms over the move, max ms per MB,
and whether MIGRATE answered OK; then medians per system and size. Every
process it starts is stopped by pid. Not a test.

    /usr/bin/python3 tests/bench/hot_migrate_bench.py [--sizes 8,32,64]
        [--rounds 3] [--redisbloom ../shared/anchors/redisbloom.so]
"""

import argparse
import logging
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import tempfile
import threading
import time

import redis
from redis.cluster import RedisCluster
from redis.crc import key_slot

logging.getLogger("redis.cluster").setLevel(logging.CRITICAL)  # each -ASK it follows

KEY = "{hot}filter"
OTHER = "{cold}filter"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ping(port, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if redis.Redis(port=port).ping():
                return
        except redis.RedisError:
            time.sleep(0.05)
    raise RuntimeError("no PING from %d" % port)


def start(args, workdir):
    log = open(os.path.join(workdir, "%d.log" % random.randrange(1 << 30)), "wb")
    process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT,
                               stdin=subprocess.DEVNULL)
    log.close()
    return process


def stop(processes):
    for process in processes:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    for process in processes:
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def capacity_for(megabytes):
    # bits per item at 1e-4: -ln(1e-4)/ln(2)^2 = 19.17
    return int(megabytes * 8 * 1024 * 1024 / 19.17)


class Writers:
    def __init__(self, make_client, key, count=2):
        self.latencies, self.stop, self.errors = [], threading.Event(), []
        self.threads = [threading.Thread(target=self.run, args=(make_client, key, n))
                        for n in range(count)]

    def run(self, make_client, key, n):
        client = make_client()
        i = 0
        while not self.stop.is_set():
            began = time.monotonic()
            try:
                client.execute_command("BF.ADD", key, "w%d-%d" % (n, i))
            except redis.RedisError as e:
                self.errors.append(repr(e))
            self.latencies.append((began, time.monotonic() - began))
            i += 1

    def __enter__(self):
        for thread in self.threads:
            thread.start()
        time.sleep(0.3)
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for thread in self.threads:
            thread.join(60)

    def during(self, start_at, end_at):
        return sorted(lat for began, lat in self.latencies if began <= end_at and
                      began + lat >= start_at)


def timed_migrate(source, target_port):
    """MIGRATE of KEY: when it began and ended, and its answer (or error)."""
    began = time.monotonic()
    try:
        answer = source.execute_command("MIGRATE", "127.0.0.1", target_port, "", 0, 60000,
                                        "KEYS", KEY)
    except redis.RedisError as e:
        answer = repr(e)
    return began, time.monotonic(), answer


def bloomery_round(binary, megabytes, workdir):
    ports = [free_port(), free_port()]
    slot_map = "0-8191=127.0.0.1:%d,8192-16383=127.0.0.1:%d" % tuple(ports)
    processes = [start([binary, "--bind", "127.0.0.1", "--port", str(port), "--dir",
                        tempfile.mkdtemp(dir=workdir), "--save", "", "--appendonly", "no",
                        "--cluster-enabled", "yes", "--cluster-slots", slot_map,
                        "--cluster-self", "127.0.0.1:%d" % port], workdir) for port in ports]
    try:
        for port in ports:
            wait_ping(port)
        a, b = (redis.Redis(port=port) for port in ports)
        ids = [c.execute_command("CLUSTER", "MYID").decode() for c in (a, b)]
        slot = key_slot(KEY.encode())
        a.execute_command("BF.RESERVE", KEY, 0.0001, capacity_for(megabytes))
        with Writers(lambda: RedisCluster(host="127.0.0.1", port=ports[0]), KEY) as writers:
            b.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", ids[0])
            a.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", ids[1])
            began, ended, answer = timed_migrate(a, ports[1])
            for client in (a, b):
                client.execute_command("CLUSTER", "SETSLOT", slot, "NODE", ids[1])
        return began, ended, answer, writers
    finally:
        stop(processes)


def redisbloom_round(module, megabytes, workdir):
    ports = [free_port(), free_port()]
    processes = [start(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                        "--appendonly", "no", "--dir", tempfile.mkdtemp(dir=workdir),
                        "--loadmodule", module], workdir) for port in ports]
    try:
        for port in ports:
            wait_ping(port)
        a = redis.Redis(port=ports[0])
        a.execute_command("BF.RESERVE", KEY, 0.0001, capacity_for(megabytes))
        with Writers(lambda: redis.Redis(port=ports[0]), OTHER) as writers:
            began, ended, answer = timed_migrate(a, ports[1])
            time.sleep(0.2)
        return began, ended, answer, writers
    finally:
        stop(processes)


def report(system, megabytes, outcome, rows):
    began, ended, answer, writers = outcome
    during = writers.during(began, ended)
    if not during:
        during = [0.0]
    p50 = statistics.median(during) * 1000
    p99 = during[min(len(during) - 1, int(len(during) * 0.99))] * 1000
    longest = during[-1] * 1000
    ok = answer in (b"OK", "OK")
    print("%s %d MB: migrate %.3f s, %d adds, p50 %.2f ms, p99 %.2f ms, max %.1f ms "
          "(%.2f ms/MB), %s%s" % (system, megabytes, ended - began, len(during), p50, p99,
                                  longest, longest / megabytes, "OK" if ok else answer,
                                  ", writer errors: %d" % len(writers.errors)
                                  if writers.errors else ""), flush=True)
    rows.setdefault((system, megabytes), []).append((ended - began, longest / 1000, ok))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="8,32,64")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--bin", default=os.environ.get("BLOOMERY_BIN",
                                                        "build/release/bloomery"))
    parser.add_argument("--redisbloom", default="../shared/anchors/redisbloom.so")
    options = parser.parse_args()
    workdir = tempfile.mkdtemp(prefix="hot-migrate-")
    rows = {}
    try:
        for _ in range(options.rounds):
            for megabytes in (int(s) for s in options.sizes.split(",")):
                report("bloomery", megabytes, bloomery_round(options.bin, megabytes, workdir),
                       rows)
                if os.path.exists(options.redisbloom):
                    report("redisbloom", megabytes,
                           redisbloom_round(os.path.abspath(options.redisbloom), megabytes,
                                            workdir), rows)
        print("median over %d rounds: system MB migrate_s max_add_ms ms_per_MB moved"
              % options.rounds)
        for (system, megabytes), values in sorted(rows.items()):
            print("%s %d %.3f %.1f %.2f %d/%d" % (
                system, megabytes, statistics.median(v[0] for v in values),
                statistics.median(v[1] for v in values) * 1000,
                statistics.median(v[1] for v in values) * 1000 / megabytes,
                sum(v[2] for v in values), len(values)))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
