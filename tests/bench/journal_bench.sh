#!/usr/bin/env bash
# What the journal costs: BF.ADD on one filter with --appendonly no, and with
# --appendfsync everysec and always, at pipeline depth 1 and 16, side by side
# with redis-server under the same AOF settings (appendonly no / appendfsync
# everysec / always) on the same disk, running BF.ADD with the RedisBloom
# module at REDISBLOOM_SO (default ../shared/anchors/redisbloom.so) when that
# file exists, SET otherwise. Not a test: it measures.
#
# Each (server, mode, depth) runs ROUNDS times, servers alternating first;
# reported: median requests/s and median p99 (ms) from redis-benchmark --csv,
# and the median CPU the server process spent per request (user + system
# time from /proc/PID/stat over the run, in microseconds).
# Data directories are under BENCH_DIR (default: a temporary directory in
# $TMPDIR or /tmp: put it on the disk you want to measure).
#
# Usage: tests/bench/journal_bench.sh [--rounds N] [--requests N] [--clients N]
#        [--threads N] [--out FILE]
set -euo pipefail
cd "$(dirname "$0")/../.."

ROUNDS=3
REQUESTS=100000
CLIENTS=50
THREADS=1
OUT=""
while [ $# -gt 0 ]; do
    case "$1" in
        --rounds) ROUNDS=$2; shift 2 ;;
        --requests) REQUESTS=$2; shift 2 ;;
        --clients) CLIENTS=$2; shift 2 ;;
        --threads) THREADS=$2; shift 2 ;;
        --out) OUT=$2; shift 2 ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
BIN=${BLOOMERY_BIN:-build/release/bloomery}
[ -x "$BIN" ] || { echo "build bloomery first (make build)" >&2; exit 1; }
command -v redis-server >/dev/null || { echo "needs redis-server (make bench-deps)" >&2; exit 1; }
MODULE=${REDISBLOOM_SO:-../shared/anchors/redisbloom.so}
[ -f "$MODULE" ] && MODULE=$(realpath "$MODULE") || MODULE=""
WORK=$(mktemp -d "${BENCH_DIR:-${TMPDIR:-/tmp}}/journal-bench.XXXXXX")
PIDS=()
cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    rm -rf "$WORK"
}
trap cleanup EXIT

. tests/bench/bench_lib.sh

# start SERVER MODE -> sets PORT and PID
start() {
    local server=$1 mode=$2 dir="$WORK/$1-$2-$RANDOM"
    mkdir -p "$dir"
    PORT=$(free_port)
    if [ "$server" = bloomery ]; then
        local journal=(--appendonly yes --appendfsync "$mode")
        [ "$mode" = off ] && journal=(--appendonly no)
        "$BIN" --bind 127.0.0.1 --port "$PORT" --dir "$dir" --save "" --threads "$THREADS" \
            "${journal[@]}" >"$dir/log" 2>&1 &
    else
        local aof=(--appendonly yes --appendfsync "$mode")
        [ "$mode" = off ] && aof=(--appendonly no)
        local module=()
        [ -n "$MODULE" ] && module=(--loadmodule "$MODULE")
        redis-server --bind 127.0.0.1 --port "$PORT" --dir "$dir" --save "" \
            "${aof[@]}" "${module[@]}" >"$dir/log" 2>&1 &
    fi
    PID=$!
    PIDS+=("$PID")
    wait_ping "$PORT"
    if [ "$server" = bloomery ] || [ -n "$MODULE" ]; then
        redis-cli -p "$PORT" BF.RESERVE hot 0.01 10000000 NONSCALING >/dev/null
    fi
}

RESULTS="$WORK/results.csv"
echo "server,mode,pipeline,round,rps,p99_ms,cpu_us" >"$RESULTS"
run() {  # run SERVER MODE PIPELINE ROUND
    local server=$1 mode=$2 depth=$3 round=$4
    start "$server" "$mode"
    local command=(BF.ADD hot __rand_int__)
    [ "$server" = redis ] && [ -z "$MODULE" ] && command=(SET key:__rand_int__ x)
    local n=$REQUESTS
    [ "$depth" = 1 ] && n=$((REQUESTS / 4))
    local line ticks_before ticks_after
    ticks_before=$(awk '{print $14 + $15}' "/proc/$PID/stat")
    line=$(redis-benchmark -p "$PORT" -n "$n" -c "$CLIENTS" -P "$depth" -r 100000000 --csv \
        "${command[@]}" | tail -1)
    # "name","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"
    local rps p99
    rps=$(echo "$line" | cut -d, -f2 | tr -d '"')
    p99=$(echo "$line" | cut -d, -f7 | tr -d '"')
    ticks_after=$(awk '{print $14 + $15}' "/proc/$PID/stat")
    local cpu_us
    cpu_us=$(python3 -c "import os,sys; print(($ticks_after - $ticks_before) * 1e6 / os.sysconf('SC_CLK_TCK') / $n)")
    echo "$server,$mode,$depth,$round,$rps,$p99,$cpu_us" >>"$RESULTS"
    kill "$PID"
    wait "$PID" 2>/dev/null || true
}

for round in $(seq 1 "$ROUNDS"); do
    for depth in 1 16; do
        for mode in off everysec always; do
            if [ $((round % 2)) = 1 ]; then
                run bloomery "$mode" "$depth" "$round"
                run redis "$mode" "$depth" "$round"
            else
                run redis "$mode" "$depth" "$round"
                run bloomery "$mode" "$depth" "$round"
            fi
        done
    done
done

OTHER="redis-server SET"
[ -n "$MODULE" ] && OTHER="RedisBloom BF.ADD"
python3 - "$RESULTS" "$OTHER" <<'EOF' | tee "${OUT:-/dev/null}"
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
other = sys.argv[2]
def med(server, mode, depth, field):
    values = [float(r[field]) for r in rows
              if r["server"] == server and r["mode"] == mode and r["pipeline"] == depth]
    return statistics.median(values)
print("| pipeline | journal | bloomery BF.ADD ops/s | p99 ms | CPU µs/op | %s ops/s | p99 ms "
      "| CPU µs/op | ratio (ops/s) |" % other)
print("|---|---|---|---|---|---|---|---|---|")
for depth in ("1", "16"):
    for mode in ("off", "everysec", "always"):
        b, r = med("bloomery", mode, depth, "rps"), med("redis", mode, depth, "rps")
        print("| -P %s | %s | %.0f | %.2f | %.2f | %.0f | %.2f | %.2f | %.2f |" % (
            depth, mode, b, med("bloomery", mode, depth, "p99_ms"),
            med("bloomery", mode, depth, "cpu_us"), r, med("redis", mode, depth, "p99_ms"),
            med("redis", mode, depth, "cpu_us"), b / r))
EOF
