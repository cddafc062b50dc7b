#!/usr/bin/python3
"""Writes the seed corpus of replica_stream_fuzz: what a real primary sends a
replica (its +FULLRESYNC, snapshot and records, captured from the server
binary), behind the answers to AUTH and REPLCONF, and a few answers a replica
must refuse.

    BLOOMERY_BIN=build/release/bloomery /usr/bin/python3 tests/fuzz/make_replica_corpus.py

Each seed starts with the two bytes the target reads first: the session's
flags (bit 0: AUTH sent first; bit 1: PSYNC asks to resume) and the size of
each read less one.
"""

import os
import shutil
import socket
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "integration"))
from harness import Server  # noqa: E402

OUT = os.path.join(HERE, "corpus", "replica_stream_fuzz")
REPLID = b"0123456789abcdef0123456789abcdef01234567"
MARK = b"fedcba9876543210fedcba9876543210fedcba98"


def receive_for(connection, seconds):
    connection.settimeout(0.1)
    data = b""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            chunk = connection.recv(65536)
        except socket.timeout:
            continue
        if not chunk:
            break
        data += chunk
    return data


def capture():
    """(full, stream): a full synchronization of a primary holding a filter,
    then the records of a few writes; and those records alone."""
    with Server() as primary:
        client = primary.client()
        client.execute_command("BF.RESERVE", "seeded", 0.01, 50)
        client.execute_command("BF.MADD", "seeded", *range(20))
        with socket.create_connection(("127.0.0.1", primary.port)) as replica:
            replica.sendall(b"PSYNC ? -1\r\n")
            snapshot = receive_for(replica, 1.0)
            client.execute_command("BF.ADD", "k", "v")
            client.execute_command("BF.MADD", "seeded", *range(20, 120))  # grows a layer
            client.execute_command("BF.INSERT", "other", "CAPACITY", 10, "ITEMS", "a", "b")
            client.execute_command("RENAME", "other", "renamed")
            client.execute_command("EXPIRE", "renamed", 100)
            client.execute_command("DEL", "k")
            client.execute_command("FLUSHALL")
            stream = receive_for(replica, 1.5)
    return snapshot + stream, stream


def main():
    full, stream = capture()
    seeds = {
        "full-sync": b"\x00\xff" + b"+OK\r\n" + full,
        "full-sync-auth-small-reads": b"\x01\x06" + b"+OK\r\n+OK\r\n" + full,
        "resume": b"\x02\xff" + b"+OK\r\n+CONTINUE " + REPLID + b"\r\n" + stream,
        "resume-byte-at-a-time": b"\x02\x00" + b"+OK\r\n+CONTINUE\r\n" + stream,
        "empty-snapshot": b"\x00\xff+OK\r\n+FULLRESYNC " + REPLID + b" 0\r\n$EOF:" + MARK +
                          b"\r\n" + MARK,
        "offset-too-large": b"\x00\xff+OK\r\n+FULLRESYNC " + REPLID +
                            b" 99999999999999999999\r\n",
        "continue-to-full": b"\x00\xff+OK\r\n+CONTINUE\r\n",
        "auth-refused": b"\x01\xff-WRONGPASS invalid username-password pair\r\n",
        "bad-header": b"\x00\xff+OK\r\n+FULLRESYNC " + REPLID + b" 0\r\n$12345\r\n",
    }
    shutil.rmtree(OUT, ignore_errors=True)
    os.makedirs(OUT)
    for name, data in seeds.items():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)
    print("wrote %d seeds to %s" % (len(seeds), OUT))


if __name__ == "__main__":
    main()
