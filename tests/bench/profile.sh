#!/usr/bin/env bash
# Where the server's time goes, per command: runs the release server under
# redis-benchmark load for BF.ADD, BF.EXISTS, BF.MADD and BF.MEXISTS on one hot
# filter, records each with `perf record -g` (attached to the server only) and
# prints the top symbols by self time per command. Not a test.
#
# Usage: tests/bench/profile.sh [options]
#   --threads N         bloomery --threads (default 1)
#   --requests N        requests per single-item command (default 300000);
#                       the batch commands run N / 20 commands of BATCH items
#   --batch N           items per BF.MADD / BF.MEXISTS (default 100)
#   -c N, -P N          redis-benchmark clients and pipeline (default 50, 16)
#   --top N             symbols shown per command (default 15)
#   --server-cpus LIST  taskset -c LIST for the server; --client-cpus for redis-benchmark
#   --out DIR           results (default build/bench-results/profile-<UTC time>):
#                       perf-<command>.data, top-<command>.txt, summary.md
# Environment: BLOOMERY_BIN (default build/release/bloomery, else
# build/bench/bloomery), PERF_CALLGRAPH (perf's --call-graph mode, default fp; the release build keeps no frame
# pointers, so callers are partial: use dwarf for full stacks, at a larger
# perf.data). Needs linux-perf and redis-tools (make bench installs them) and
# perf_event_open: as root it works at any kernel.perf_event_paranoid (this
# container: 2, as root); another user gets user-space samples of their own
# processes only at 2, kernel ones too at 1 or less. The allocation count
# needs root (uprobes) and is skipped otherwise.
set -euo pipefail
cd "$(dirname "$0")/../.."

THREADS=1
REQUESTS=300000
BATCH=100
CLIENTS=50
PIPELINE=16
TOP=15
SERVER_CPUS=""
CLIENT_CPUS=""
OUT=""
while (($#)); do
    case $1 in
        --threads) THREADS=$2; shift ;;
        --requests) REQUESTS=$2; shift ;;
        --batch) BATCH=$2; shift ;;
        -c) CLIENTS=$2; shift ;;
        -P) PIPELINE=$2; shift ;;
        --top) TOP=$2; shift ;;
        --server-cpus) SERVER_CPUS=$2; shift ;;
        --client-cpus) CLIENT_CPUS=$2; shift ;;
        --out) OUT=$2; shift ;;
        -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "unknown option: $1 (--help)" >&2; exit 2 ;;
    esac
    shift
done

# The release server: make build's, else make bench's (the same flags).
BIN=${BLOOMERY_BIN:-build/release/bloomery}
[ -n "${BLOOMERY_BIN:-}" ] || [ -x "$BIN" ] || BIN=build/bench/bloomery
[ -x "$BIN" ] || { echo "build first (make build or make bench), or set BLOOMERY_BIN" >&2; exit 1; }
command -v perf >/dev/null || { echo "needs perf (apt-get install linux-perf)" >&2; exit 1; }
command -v redis-benchmark >/dev/null || { echo "needs redis-benchmark (redis-tools)" >&2; exit 1; }
# perf cannot be used at all past paranoid 2 for non-root, or where the
# container forbids perf_event_open: say so and stop (tests/bench/README.md:
# the fallback is the CPU per op that load_bench.sh reads from /proc).
if ! perf stat -e task-clock -- true >/dev/null 2>&1; then
    echo "perf_event_open is not allowed here (kernel.perf_event_paranoid =" \
        "$(cat /proc/sys/kernel/perf_event_paranoid)); use load_bench.sh's CPU per op instead" >&2
    exit 1
fi
OUT=${OUT:-build/bench-results/profile-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT"
SERVER_PIN=(); CLIENT_PIN=()
[ -n "$SERVER_CPUS" ] && SERVER_PIN=(taskset -c "$SERVER_CPUS")
[ -n "$CLIENT_CPUS" ] && CLIENT_PIN=(taskset -c "$CLIENT_CPUS")

PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
DATA=$(mktemp -d)
"${SERVER_PIN[@]}" "$BIN" --bind 127.0.0.1 --port "$PORT" --save "" --dir "$DATA" --loglevel warn \
    --threads "$THREADS" &
PID=$!
PERF_PID=""
cleanup() {
    [ -n "$PERF_PID" ] && { kill -INT "$PERF_PID" 2>/dev/null || true; wait "$PERF_PID" 2>/dev/null || true; }
    kill "$PID" 2>/dev/null || true
    wait "$PID" 2>/dev/null || true
    rm -rf "$DATA"
}
trap cleanup EXIT
for _ in $(seq 200); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && break; sleep 0.05; done
redis-cli -p "$PORT" BF.RESERVE hot 0.01 100000000 NONSCALING >/dev/null

ITEMS=""
for ((i = 0; i < BATCH; i++)); do ITEMS+=" __rand_int__"; done
# Touch every page of the 120 MB filter first (100 000 items, about 24 bits
# per 4 KiB page): a fresh filter's first touches are page faults, which
# would otherwise dominate the BF.ADD profile (load_bench.sh does the same).
# shellcheck disable=SC2086
redis-benchmark -p "$PORT" -c "$CLIENTS" -P "$PIPELINE" -r 100000000 -n 1000 BF.MADD hot $ITEMS \
    >/dev/null 2>&1
declare -A COMMANDS=(
    [BF.ADD]="BF.ADD hot __rand_int__"
    [BF.EXISTS]="BF.EXISTS hot __rand_int__"
    [BF.MADD]="BF.MADD hot$ITEMS"
    [BF.MEXISTS]="BF.MEXISTS hot$ITEMS"
)
summary=$OUT/summary.md
{
    echo "Profile, $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores," \
        "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), bloomery --threads $THREADS," \
        "redis-benchmark -c $CLIENTS -P $PIPELINE -r 100000000, hot filter BF.RESERVE hot 0.01 100000000 NONSCALING." \
        "Share of the server's samples (self time) per symbol; [k] kernel, [.] user."
} >"$summary"
for name in BF.ADD BF.EXISTS BF.MADD BF.MEXISTS; do
    requests=$REQUESTS
    [[ $name == BF.M* ]] && requests=$((REQUESTS / 20))
    data=$OUT/perf-$name.data
    perf record -q -g --call-graph "${PERF_CALLGRAPH:-fp}" -p "$PID" -o "$data" 2>"$OUT/perf-$name.log" &
    PERF_PID=$!
    sleep 0.5  # perf attaches to every thread first
    # shellcheck disable=SC2086  # the command's words
    rps=$("${CLIENT_PIN[@]}" redis-benchmark -p "$PORT" -c "$CLIENTS" -P "$PIPELINE" -r 100000000 \
        -n "$requests" --csv ${COMMANDS[$name]} 2>/dev/null | tr -d '\r"' | tail -1 | cut -d, -f2)
    kill -INT "$PERF_PID"; wait "$PERF_PID" || true; PERF_PID=""
    perf report -i "$data" --stdio --no-children --sort sym -g none --percent-limit 0.5 \
        2>/dev/null | grep -E '^ +[0-9]' | head -n "$TOP" >"$OUT/top-$name.txt"
    {
        echo
        echo "$name: $requests commands at $rps commands/s"
        echo '```'
        cat "$OUT/top-$name.txt"
        echo '```'
    } >>"$summary"
done
# Allocations per command, network layer included: uprobes on the entry
# points of the allocator the server is linked with (jemalloc's malloc and
# operator new family, or glibc's and libstdc++'s), counted with perf stat
# over a run of each command. Needs root (uprobes); skipped otherwise.
probe_libs=$(ldd "$BIN" | awk '/libjemalloc|libc\.so|libstdc\+\+/ {print $3}')
probes=()
n=0
trap 'perf probe -q -d "probe_*:alloc*" >/dev/null 2>&1 || true; cleanup' EXIT
for lib in $probe_libs; do
    for fn in malloc calloc realloc posix_memalign aligned_alloc mallocx _Znwm _Znam \
        _ZnwmSt11align_val_t _ZnwmRKSt9nothrow_t; do
        # By address: perf probe wants demangled names for C++ symbols, and a
        # name would also probe the library's own PLT stub.
        address=$(nm -D --defined-only "$lib" 2>/dev/null | awk -v f="$fn" '$3 == f {print $1}')
        [ -n "$address" ] || continue
        n=$((n + 1))
        event=$(perf probe -x "$lib" --add "alloc$n=0x$address" 2>&1 |
            grep -o "probe_[A-Za-z0-9_]*:alloc$n" | head -1) || true
        [ -n "$event" ] && probes+=("$event")
    done
done
if ((${#probes[@]})); then
    {
        echo
        echo "Heap allocations per command (uprobes on malloc, calloc, realloc, aligned and C++"
        echo "operator new entry points of $(echo "$probe_libs" | xargs -n1 basename | xargs)),"
        echo "after the runs above warmed the server; each run opens $CLIENTS connections, so"
        echo "per command = (allocations in a run of 3n − in a run of n) / 2n:"
        echo
        echo "| command | n | allocations, n | allocations, 3n | per command |"
        echo "|---|---|---|---|---|"
    } >>"$summary"
    events=$(IFS=,; echo "${probes[*]}")
    count_allocations() {  # tag requests words...: allocations in the server over one run
        local tag=$1 n=$2
        shift 2
        perf stat -x, -e "$events" -p "$PID" -o "$OUT/allocs-$tag.csv" &
        PERF_PID=$!
        sleep 0.5
        "${CLIENT_PIN[@]}" redis-benchmark -p "$PORT" -c "$CLIENTS" -P "$PIPELINE" -r 100000000 \
            -n "$n" "$@" >/dev/null 2>&1
        kill -INT "$PERF_PID"; wait "$PERF_PID" || true; PERF_PID=""
        awk -F, '$1 ~ /^[0-9]+$/ {n += $1} END {print n + 0}' "$OUT/allocs-$tag.csv"
    }
    for name in BF.ADD BF.EXISTS BF.MADD BF.MEXISTS; do
        requests=$((REQUESTS / 10))
        [[ $name == BF.M* ]] && requests=$((REQUESTS / 200))
        # Each run opens -c new connections, whose set-up allocates (the
        # connection, its buffers growing to the pipeline's size): a run of
        # n and one of 3n commands differ only by the 2n commands.
        # shellcheck disable=SC2086
        one=$(count_allocations "$name-n" "$requests" ${COMMANDS[$name]})
        # shellcheck disable=SC2086
        three=$(count_allocations "$name-3n" $((3 * requests)) ${COMMANDS[$name]})
        awk -v c="$name" -v n="$requests" -v a="$one" -v b="$three" \
            'BEGIN {d = (b - a) / (2 * n); if (d < 0.00005 && d > -0.00005) d = 0;
                    printf "| %s | %d | %d | %d | %.4f |\n", c, n, a, b, d}' >>"$summary"
    done
else
    echo "(no uprobes here: allocations per command not counted)" >>"$summary"
fi

cat "$summary"
echo "perf data and reports in $OUT (perf report -i $OUT/perf-BF.ADD.data)"
