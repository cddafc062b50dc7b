#!/usr/bin/env bash
# Two bloomery builds side by side with redis-server + RedisBloom, on the
# same disk with the same journal settings (appendonly yes, appendfsync
# everysec): BF.ADD (and BF.EXISTS) on one filter from 50 clients, at
# pipeline depth 1 and 16, runs interleaved round by round. Reported per
# (command, depth, server): the median requests/s, p99 (ms) and CPU the
# server process spent per request (user + system from /proc/PID/stat, µs).
# Not a test: it measures what a change costs against the build before it.
#
# Usage: BASE=path/to/old/bloomery NEW=path/to/new/bloomery \
#        tests/bench/builds_bench.sh [--rounds N] [--requests N] [--depths "1 16"]
#        [--commands "BF.ADD BF.EXISTS"] [--threads N]
# REDISBLOOM_SO (default ../shared/anchors/redisbloom.so): the module; without
# it the RedisBloom column is left out.
set -euo pipefail
cd "$(dirname "$0")/../.."

ROUNDS=5
REQUESTS=300000
DEPTHS="1 16"
COMMANDS="BF.ADD BF.EXISTS"
THREADS=1
while [ $# -gt 0 ]; do
    case "$1" in
        --rounds) ROUNDS=$2; shift 2 ;;
        --requests) REQUESTS=$2; shift 2 ;;
        --depths) DEPTHS=$2; shift 2 ;;
        --commands) COMMANDS=$2; shift 2 ;;
        --threads) THREADS=$2; shift 2 ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
: "${BASE:?set BASE to the bloomery binary to compare against}"
NEW=${NEW:-build/release/bloomery}
MODULE=${REDISBLOOM_SO:-../shared/anchors/redisbloom.so}
[ -f "$MODULE" ] && MODULE=$(realpath "$MODULE") || MODULE=""
SERVERS="base new"
[ -n "$MODULE" ] && SERVERS="base new redisbloom"
WORK=$(mktemp -d "${BENCH_DIR:-${TMPDIR:-/tmp}}/builds-bench.XXXXXX")
PID=""
cleanup() {
    [ -n "$PID" ] && kill "$PID" 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT

. tests/bench/bench_lib.sh

echo "server,command,depth,round,rps,p99_ms,cpu_us" >"$WORK/results.csv"
run() {  # run SERVER COMMAND DEPTH ROUND
    local server=$1 command=$2 depth=$3 round=$4 dir port
    dir="$WORK/$server-$RANDOM"
    mkdir -p "$dir"
    port=$(free_port)
    case $server in
        base | new)
            local bin=$BASE
            [ "$server" = new ] && bin=$NEW
            "$bin" --bind 127.0.0.1 --port "$port" --dir "$dir" --save "" --threads "$THREADS" \
                --appendonly yes --appendfsync everysec >"$dir/log" 2>&1 &
            ;;
        redisbloom)
            redis-server --bind 127.0.0.1 --port "$port" --dir "$dir" --save "" --appendonly yes \
                --appendfsync everysec --loadmodule "$MODULE" >"$dir/log" 2>&1 &
            ;;
    esac
    PID=$!
    wait_ping "$port"
    redis-cli -p "$port" BF.RESERVE hot 0.01 10000000 NONSCALING >/dev/null
    local before after line
    before=$(awk '{print $14 + $15}' "/proc/$PID/stat")
    line=$(redis-benchmark -p "$port" -c 50 -n "$REQUESTS" -r 100000000 -P "$depth" --csv \
        "$command" hot __rand_int__ | tail -1)
    after=$(awk '{print $14 + $15}' "/proc/$PID/stat")
    kill "$PID"
    wait "$PID" 2>/dev/null || true
    PID=""
    rm -rf "$dir"
    # "name","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"
    local rps p99 cpu
    rps=$(echo "$line" | cut -d, -f2 | tr -d '"')
    p99=$(echo "$line" | cut -d, -f7 | tr -d '"')
    cpu=$(python3 -c "import os; print(($after - $before) * 1e6 / os.sysconf('SC_CLK_TCK') / $REQUESTS)")
    echo "$server,$command,$depth,$round,$rps,$p99,$cpu" >>"$WORK/results.csv"
}

for depth in $DEPTHS; do
    for command in $COMMANDS; do
        for round in $(seq 1 "$ROUNDS"); do
            for server in $SERVERS; do run "$server" "$command" "$depth" "$round"; done
        done
    done
done

python3 tests/bench/median_table.py "$WORK/results.csv" "command,depth=-P,server" \
    "rps=ops/s=%.0f,p99_ms=p99 ms=%.2f,cpu_us=CPU µs/op=%.2f"
