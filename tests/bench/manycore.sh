#!/usr/bin/env bash
# Many-core benchmarks: runs load_bench.sh and bloom_bench with the servers on
# CPUs 0-7 and redis-benchmark on CPUs 8-15. Not a test: it measures and
# reports.
#
# Usage: [KIT=DIR] tests/bench/manycore.sh OUT PART...
#   micro      bloom_bench on 1 GiB filters, 1, 2 and 8 threads (BM_Add*, BM_Contains*)
#   hot        load_bench hot-filter cases, --threads 1 2 4 8, journal off
#   keys       load_bench many-keys cases (1M keys), --threads 1 8, journal off
#   big        the 958 MB filter: BF.RESERVE big 0.01 800000000 NONSCALING, 200M
#              items in BF.MADD batches of 100, then BF.MEXISTS, --threads 1 8
#              (-r at most 2^31 - 1: redis-benchmark reads it as an int, and a
#              larger value silently sends every item as the same literal)
#   journal    hot BF.ADD and BF.MADD with the journal on (everysec), --threads 1 7 8
#              (7: the journal's writer thread gets a CPU of its own)
# Results go to OUT/<part>/ (results.md, results.csv, plot.png; micro.json).
#
# The programs: bloomery, bloom_bench, redis-server, redis-cli and
# redis-benchmark. Without KIT they are this checkout's builds
# (build/release/bloomery; build/bench/tests/bench/bloom_bench from
# `make bench`) and redis-* on PATH. On a machine without Debian's packages,
# KIT=DIR names a directory holding bin/<each program> and lib/ with every
# shared library they load (`ldd` lists them) and the dynamic loader
# ld-linux-x86-64.so.2 of the machine they were built on; each program then
# runs through that loader.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ $# -ge 2 ] || { sed -n 2,30p "$0" >&2; exit 2; }
OUT=$1; shift

# Wrappers so the scripts find redis-* and bloomery on PATH; each execs the
# program (through the kit's loader), so the pid a script records is the
# program's.
WRAP=$(mktemp -d)
for b in bloomery redis-server redis-cli redis-benchmark bloom_bench; do
    if [ -n "${KIT:-}" ]; then
        K=$(cd "$KIT" && pwd)
        [ -x "$K/bin/$b" ] && [ -e "$K/lib/ld-linux-x86-64.so.2" ] ||
            { echo "KIT=$KIT lacks bin/$b or lib/ld-linux-x86-64.so.2" >&2; exit 1; }
        printf '#!/bin/sh\nexec %s/lib/ld-linux-x86-64.so.2 --library-path %s/lib %s/bin/%s "$@"\n' \
            "$K" "$K" "$K" "$b" >"$WRAP/$b"
    else
        case $b in
            bloomery) path=$PWD/build/release/bloomery ;;
            bloom_bench) path=$PWD/build/bench/tests/bench/bloom_bench ;;
            *) path=$(command -v "$b" || true) ;;
        esac
        if [ -z "$path" ] || [ ! -x "$path" ]; then
            echo "manycore: no $b here (build it, install redis-server and redis-tools, or set KIT)" >&2
            continue
        fi
        printf '#!/bin/sh\nexec %s "$@"\n' "$path" >"$WRAP/$b"
    fi
    chmod +x "$WRAP/$b"
done
export PATH=$WRAP:$PATH BLOOMERY_BIN=$WRAP/bloomery PYTHON=${PYTHON:-python3}
echo "manycore: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2), $(free -g | awk '/Mem/ {print $2}') GiB"

LOAD=(tests/bench/load_bench.sh --server-cpus 0-7 --client-cpus 8-15 --bench-threads 8 -c 256 -P 16)
for part in "$@"; do
    start=$(date +%s)
    case $part in
        micro)
            BLOOMERY_BENCH_THREADS=1,2,8 taskset -c 0-7 bloom_bench \
                --benchmark_filter='BM_(Add|AddMany|Contains|ContainsMany)/1073741824/' \
                --benchmark_min_time=0.5 --benchmark_out="$OUT/micro.json" --benchmark_out_format=json
            ;;
        hot)
            "${LOAD[@]}" --threads "1 2 4 8" --requests 2000000 --rounds 3 \
                --cases "add exists madd mexists" --server-args "--appendonly no" --out "$OUT/hot"
            ;;
        keys)
            "${LOAD[@]}" --threads "1 8" --requests 2000000 --rounds 3 --keys 1000000 \
                --cases "keys-add keys-exists" --server-args "--appendonly no" --out "$OUT/keys"
            ;;
        big)
            "${LOAD[@]}" --threads "1 8" --hot-capacity 800000000 --requests 40000000 --rounds 1 \
                --range 2000000000 --cases "madd mexists" --no-redis \
                --server-args "--appendonly no" --out "$OUT/big"
            ;;
        journal)
            "${LOAD[@]}" --threads "1 7 8" --requests 2000000 --rounds 3 --cases "add madd" \
                --no-redis --server-args "--appendonly yes --appendfsync everysec" --out "$OUT/journal"
            ;;
        *) echo "unknown part $part" >&2; exit 2 ;;
    esac
    echo "manycore: $part took $(($(date +%s) - start)) s"
done
