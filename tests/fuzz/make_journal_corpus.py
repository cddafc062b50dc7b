#!/usr/bin/python3
"""Writes the seed corpus and dictionary of journal_reader_fuzz: record
streams as the server writes them (proto/journal.md), without the segment
header, which the target supplies.

    /usr/bin/python3 tests/fuzz/make_journal_corpus.py
"""

import os
import shutil
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "integration"))
from formats import build_dump_header, xxh64  # noqa: E402

CREATE, ADD, DELETE, RENAME, EXPIRE, FLUSHALL, CHUNK = range(1, 8)
CF_CREATE, CF_CHANGE = 12, 13
AGE_CREATE, AGE_ADD, AGE_SHIFT, AGE_WORDS = 14, 15, 16, 17


def record(kind, body):
    head = struct.pack("<IB", len(body), kind)
    return head + body + struct.pack("<Q", xxh64(head + body))


def s(data):
    data = data.encode() if isinstance(data, str) else data
    return struct.pack("<I", len(data)) + data


def create(key, filter_id, capacity=100, error_rate=0.01, bits=960, hashes=7, deadline=0):
    header = build_dump_header(error_rate, capacity, 2, 0, [(capacity, error_rate / 2, bits, hashes, 0)])
    return record(CREATE, s(key) + struct.pack("<qQ", deadline, filter_id) + s(header))


def add(filter_id, entries):
    body = struct.pack("<QI", filter_id, len(entries))
    for layer, h1, h2 in entries:
        body += struct.pack("<BQQ", layer, h1, h2)
    return record(ADD, body)


def cf_create(key, filter_id, seq=0, buckets=4, bucket_size=2, filters=1, expansion=2):
    header = struct.pack("<QQQQHHH", 0, buckets, 0, filters, bucket_size, 20, expansion)
    return record(CF_CREATE, s(key) + struct.pack("<qQQ", 0, filter_id, seq) + s(header))


def cf_change(filter_id, seq, kind, body):
    return record(CF_CHANGE, struct.pack("<QQB", filter_id, seq, kind) + body)


def cf_insert(filter_id, seq, fingerprint, sub, offset, moves=(), filters=1):
    body = struct.pack("<HBHQI", filters, fingerprint, sub, offset, len(moves))
    for fp, (f1, o1), (f2, o2) in moves:
        body += struct.pack("<BHQHQ", fp, f1, o1, f2, o2)
    return cf_change(filter_id, seq, 1, body)


def age_header(k=4, l=6, generation_items=100, slice_bits=1024, error_rate=0.01, window_ms=0,
               generation=0, shifted_ms=0):
    body = b"BLMAGE01" + struct.pack("<IIQQdQIQQ", k, l, generation_items, slice_bits, error_rate,
                                     window_ms, 512, generation, shifted_ms)
    return body + struct.pack("<Q", xxh64(body))


def age_create(key, filter_id, counts=(), **header):
    dumped = age_header(**header) + struct.pack("<I%dQ" % len(counts), len(counts), *counts)
    return record(AGE_CREATE, s(key) + struct.pack("<qQ", 0, filter_id) + s(dumped))


def age_words(filter_id, generation, first, words):
    return record(AGE_WORDS, struct.pack("<QQQ%dQ" % len(words), filter_id, generation, first,
                                         *words))


def age_add(filter_id, entries):
    body = struct.pack("<QI", filter_id, len(entries))
    for generation, h1, h2 in entries:
        body += struct.pack("<QQQ", generation, h1, h2)
    return record(AGE_ADD, body)


def age_shift(filter_id, generation, ms):
    return record(AGE_SHIFT, struct.pack("<QQQ", filter_id, generation, ms))


def main():
    seeds = []
    base = create("k", 1) + add(1, [(0, 0x1234, 0x5678), (0, 0xDEADBEEF, 0x1)])
    seeds.append(("create-add", base))
    seeds.append(("grow", base + add(1, [(3, i * 7919, i * 104729) for i in range(16)])))
    seeds.append(("rename-expire-del", base + record(RENAME, s("k") + s("j")) +
                  record(EXPIRE, s("j") + struct.pack("<q", 4102444800000)) +
                  record(DELETE, s("j")) + add(1, [(0, 1, 2)])))
    seeds.append(("flushall", base + record(FLUSHALL, b"") + create("k", 2) + add(2, [(0, 5, 6)])))
    seeds.append(("chunk", base + record(CHUNK, struct.pack("<Qq", 1, 1) + s(b"\xff" * 120))))
    cuckoo = cf_create("c", 3) + cf_insert(3, 1, 7, 0, 2) + cf_insert(3, 2, 9, 0, 2, [(7, (0, 2), (0, 5))])
    seeds.append(("cuckoo", cuckoo + cf_change(3, 3, 2, struct.pack("<HQB", 0, 5, 0))
                  + cf_change(3, 4, 3, b"") + cf_change(3, 5, 4, struct.pack("<q", 3) + s(b"\x01\x02"))
                  + cf_change(3, 0, 4, struct.pack("<q", 9) + s(b"\x03" * 8))))
    seeds.append(("cuckoo-grow-gap", cuckoo + cf_insert(3, 3, 4, 1, 6, filters=2)
                  + cf_insert(3, 9, 4, 0, 1) + cf_insert(3, 2, 4, 0, 1)))
    age = age_create("a", 4) + age_add(4, [(0, 11, 13), (0, 17, 19)]) + age_shift(4, 1, 1000)
    seeds.append(("age", age + age_add(4, [(3, 23, 29), (1, 31, 37)]) + age_shift(4, 2, 2000)
                  + age_shift(4, 40, 3000) + age_add(4, [(0, 41, 43)])))
    seeds.append(("age-words", age_create("w", 6, counts=(3, 2), generation=1)
                  + age_words(6, 1, 0, [0xff, 1 << 63]) + age_shift(6, 2, 10)
                  + age_words(6, 1, 8, [7] * 16) + age_words(6, 5, 100, [9])))
    seeds.append(("age-time-window", age_create("t", 5, window_ms=60000, shifted_ms=5)
                  + age_add(5, [(0, 1, 3)]) + age_shift(5, 1, 6005) + record(DELETE, s("t"))
                  + age_add(5, [(1, 5, 7)])))
    seeds.append(("torn", base + add(1, [(0, 9, 9)])[:-5]))
    seeds.append(("zeros", base + b"\0" * 64))
    seeds.append(("empty", b""))
    directory = os.path.join(HERE, "corpus", "journal_reader_fuzz")
    shutil.rmtree(directory, ignore_errors=True)
    os.makedirs(directory)
    for name, data in seeds:
        with open(os.path.join(directory, name), "wb") as f:
            f.write(data)
    with open(os.path.join(HERE, "journal_reader_fuzz.dict"), "w") as f:
        f.write("# journal record types and framing\n# Written by tests/fuzz/make_journal_corpus.py.\n")
        for token in (b"\x01", b"\x02", b"\x03", b"\x04", b"\x05", b"\x06", b"\x07", b"\x0C", b"\x0D",
                      b"\x0E", b"\x0F", b"\x10", b"BLMAGE01",
                      b"\x00\x00\x00\x00", b"\xff\xff\xff\x7f"):
            f.write('"%s"\n' % "".join("\\x%02X" % b for b in token))
    print("journal_reader_fuzz: %d seeds" % len(seeds))


if __name__ == "__main__":
    main()
