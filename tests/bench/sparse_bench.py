#!/usr/bin/python3
"""What a large, mostly empty filter costs to persist and copy (not a test).

One filter at a time, `BF.RESERVE urls 0.0001 1000000000` (2.6 GB), holding
each of FILLS items in turn (BF.MADD of u0, u1, ...), or full (every word
non-zero: 16 MiB BF.LOADCHUNK chunks of random words). For each: SAVE time
and file size, DUMP time and size, BF.SCANDUMP time, chunks and bytes, and
(--sync) a replica's full synchronization: seconds from start to its link
up, the bytes the primary sent, the replica's RSS. ROUNDS rounds of each,
medians. With --old BIN, the full filter's SAVE is also timed with that
build, in the same run (one server at a time).

Usage: tests/bench/sparse_bench.py [--bin B] [--old B] [--fills 1000,1000000]
           [--full] [--sync] [--rounds 3]
Kills only the servers it started (by pid); removes its directory.
"""

import argparse
import ctypes
import os
import re
import shutil
import socket
import statistics
import struct
import subprocess
import tempfile
import time

import redis

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
XXH = ctypes.CDLL("libxxhash.so.0")
XXH.XXH64.restype = ctypes.c_uint64
XXH.XXH64.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_uint64]
CHUNK = 16 << 20


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Server:
    def __init__(self, binary, work, name, extra=()):
        self.dir = os.path.join(work, name)
        os.makedirs(self.dir, exist_ok=True)
        self.port = free_port()
        self.log = open(os.path.join(work, name + ".log"), "w")
        self.proc = subprocess.Popen(
            [binary, "--bind", "127.0.0.1", "--port", str(self.port), "--dir", self.dir,
             "--save", "", "--threads", "2", "--max-filter-bytes", "3gb", *extra],
            stdout=self.log, stderr=subprocess.STDOUT)
        self.client = redis.Redis(port=self.port, socket_timeout=600)
        for _ in range(600):
            try:
                self.client.ping()
                return
            except redis.ConnectionError:
                time.sleep(0.05)
        raise RuntimeError(name + " did not start")

    def rss_mb(self):
        with open("/proc/%d/status" % self.proc.pid) as f:
            return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1)) / 1024

    def stop(self):
        self.proc.kill()
        self.proc.wait()
        self.log.close()


def fill(client, items):
    batch = 5000
    for start in range(0, items, batch):
        names = ["u%d" % i for i in range(start, min(items, start + batch))]
        client.execute_command("BF.MADD", "urls", *names)


def fill_full(client):
    """Every word non-zero: random 16 MiB chunks over the whole layer."""
    header = client.execute_command("BF.SCANDUMP", "urls", 0)[1]
    client.delete("urls")
    client.execute_command("BF.LOADCHUNK", "urls", 1, header)
    total = struct.unpack_from("<Q", header, 56)[0] // 8  # the layer's bits / 8
    no_zero = bytes([1] + list(range(1, 256)))  # no zero byte, so no zero word
    for offset in range(0, total, CHUNK):
        payload = os.urandom(min(CHUNK, total - offset)).translate(no_zero)
        seeded = struct.pack("<Q", offset) + payload
        chunk = payload + struct.pack("<Q", XXH.XXH64(seeded, len(seeded), 0))
        client.execute_command("BF.LOADCHUNK", "urls", offset + len(payload) + 1, chunk)


def timed(fn):
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def measure_save(server, rounds):
    # A save the journal's growth started (after a fill) finishes first.
    while server.client.info("persistence").get("rdb_bgsave_in_progress"):
        time.sleep(0.1)
    times = [timed(lambda: server.client.execute_command("SAVE"))[0] for _ in range(rounds)]
    size = os.path.getsize(os.path.join(server.dir, "dump.bloomery"))
    return statistics.median(times), size


def measure_dump(server, rounds):
    times, size = [], None
    for _ in range(rounds):
        try:
            t, payload = timed(lambda: server.client.execute_command("DUMP", "urls"))
        except redis.ResponseError as e:
            return None, str(e)
        times.append(t)
        size = len(payload)
    return statistics.median(times), size


def measure_scandump(server, rounds):
    times, chunks, size = [], 0, 0
    for _ in range(rounds):
        def walk():
            it, n, b = 0, 0, 0
            while True:
                it, data = server.client.execute_command("BF.SCANDUMP", "urls", it)
                if it == 0:
                    return n, b
                n, b = n + 1, b + len(data)
        t, (chunks, size) = timed(walk)
        times.append(t)
    return statistics.median(times), chunks, size


def measure_sync(binary, work, primary, rounds):
    times, sent, rss, load_s = [], None, None, []
    for r in range(rounds):
        start = time.perf_counter()
        replica = Server(binary, work, "replica%d" % r,
                         ("--replicaof", "127.0.0.1 %d" % primary.port))
        while replica.client.info("replication").get("master_link_status") != "up":
            time.sleep(0.005)
        times.append(time.perf_counter() - start)
        rss = replica.rss_mb()
        with open(replica.log.name) as f:
            loaded = re.findall(r"loaded \d+ filters from the primary in ([\d.]+) s", f.read())
        load_s.append(float(loaded[-1]) if loaded else None)
        replica.stop()
        shutil.rmtree(replica.dir)
    with open(primary.log.name) as f:
        found = re.findall(r"snapshot of \d+ filters, (\d+) bytes, sent in ([\d.]+) s", f.read())
    sent = (int(found[-1][0]), statistics.median(float(t) for _, t in found)) if found else None
    return statistics.median(times), sent, rss, load_s


def run_fill(binary, work, label, items, args):
    server = Server(binary, work, "primary-" + label)
    try:
        server.client.execute_command("BF.RESERVE", "urls", "0.0001", "1000000000")
        t_fill, _ = timed(lambda: fill_full(server.client) if items is None else fill(server.client, items))
        row = {"fill": label, "fill_s": t_fill, "rss_mb": server.rss_mb()}
        row["save_s"], row["save_bytes"] = measure_save(server, args.rounds)
        row["dump_s"], row["dump_bytes"] = measure_dump(server, args.rounds)
        if args.scandump:
            row["scan_s"], row["scan_chunks"], row["scan_bytes"] = measure_scandump(server, args.rounds)
        if args.sync:
            (row["sync_s"], row["sync_bytes_and_send_s"], row["replica_rss_mb"],
             row["replica_load_s"]) = measure_sync(binary, work, server, args.rounds)
        return row
    finally:
        server.stop()
        shutil.rmtree(server.dir)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bin", default=os.path.join(ROOT, "build/release/bloomery"))
    p.add_argument("--old", help="an earlier build: the full filter's SAVE with it too")
    p.add_argument("--fills", default="1000,1000000,10000000")
    p.add_argument("--full", action="store_true")
    p.add_argument("--sync", action="store_true")
    p.add_argument("--scandump", action="store_true")
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    work = tempfile.mkdtemp(prefix="bloomery-sparse-")
    try:
        fills = [(f, int(f)) for f in args.fills.split(",") if f]
        if args.full:
            fills.append(("full", None))
        for label, items in fills:
            print(run_fill(args.bin, work, label, items, args), flush=True)
        if args.old:
            for name, binary in (("old", args.old), ("new", args.bin)):
                # No journal: 2.6 GB of chunk records would only start saves.
                server = Server(binary, work, "full-" + name, ("--appendonly", "no"))
                try:
                    server.client.execute_command("BF.RESERVE", "urls", "0.0001", "1000000000")
                    fill_full(server.client)
                    save_s, size = measure_save(server, args.rounds)
                    print({"build": name, "fill": "full", "save_s": save_s, "save_bytes": size},
                          flush=True)
                finally:
                    server.stop()
                    shutil.rmtree(server.dir)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
