#!/usr/bin/env bash
# Many-core benchmarks on a machine that has none of Debian's packages: runs
# load_bench.sh and bloom_bench from the binaries and libraries that
# ../shared/tools/devkit.sh packed into .devkit/ (bloom_bench copied beside
# them as .devkit/bin/bloom_bench, its libraries into .devkit/lib), through the
# carried loader. Not a test: it measures and reports.
#
# Usage: tests/bench/manycore.sh OUT PART...
#   micro      bloom_bench on 1 GiB filters, 1, 2 and 8 threads (BM_Add*, BM_Contains*)
#   hot        load_bench hot-filter cases, --threads 1 2 4 8, journal off
#   keys       load_bench many-keys cases (1M keys), --threads 1 8, journal off
#   big        the 958 MB filter: BF.RESERVE big 0.01 800000000 NONSCALING, 200M
#              items in BF.MADD batches of 100, then BF.MEXISTS, --threads 1 8
#              (-r at most 2^31 - 1: redis-benchmark reads it as an int, and a
#              larger value silently sends every item as the same literal)
#   journal    hot BF.ADD and BF.MADD with the journal on (everysec), --threads 1 7 8
#              (7: the journal's writer thread gets a CPU of its own)
# Servers run on CPUs 0-7, redis-benchmark on 8-15 (the issue's split).
# Results go to OUT/<part>/ (results.md, results.csv, plot.png; micro.json).
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=$1; shift
K=$PWD/.devkit
[ -x "$K/bin/bloomery" ] || { echo "no .devkit (run ../shared/tools/devkit.sh first)" >&2; exit 1; }

# Wrappers so the scripts find redis-* and bloomery on PATH; each execs the
# carried loader, so the pid a script records is the program's.
WRAP=$(mktemp -d)
for b in bloomery redis-server redis-cli redis-benchmark bloom_bench; do
    printf '#!/bin/sh\nexec %s/lib/ld-linux-x86-64.so.2 --library-path %s/lib %s/bin/%s "$@"\n' \
        "$K" "$K" "$K" "$b" >"$WRAP/$b"
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
