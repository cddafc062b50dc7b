#!/usr/bin/env python3
"""Prints a Markdown table of medians from a benchmark script's CSV.

Usage: median_table.py CSV KEYS COLUMNS
  KEYS     comma-separated key columns, e.g. "command,depth,server"; a row per
           distinct key, in the order first seen, headed by the column names
           (or "name=Title")
  COLUMNS  comma-separated value columns as "name=Title=format", e.g.
           "rps=ops/s=%.0f,p99_ms=p99 ms=%.2f": the median over the rounds
"""
import csv
import statistics
import sys


def split(spec):
    name, _, rest = spec.partition("=")
    title, _, fmt = rest.partition("=")
    return name, title or name, fmt or "%s"


def main():
    path, keys, columns = sys.argv[1], sys.argv[2].split(","), sys.argv[3].split(",")
    keys = [split(k) for k in keys]
    columns = [split(c) for c in columns]
    rows = list(csv.DictReader(open(path)))
    titles = [title for _, title, _ in keys + columns]
    print("| " + " | ".join(titles) + " |")
    print("|" + "---|" * len(titles))
    seen = []
    for row in rows:
        key = tuple(row[name] for name, _, _ in keys)
        if key not in seen:
            seen.append(key)
    for key in seen:
        mine = [r for r in rows if tuple(r[name] for name, _, _ in keys) == key]
        cells = list(key)
        for name, _, fmt in columns:
            cells.append(fmt % statistics.median(float(r[name]) for r in mine))
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
