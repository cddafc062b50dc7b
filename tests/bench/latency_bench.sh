#!/usr/bin/env bash
# Latency at a fixed request rate: bloomery and redis-server + RedisBloom,
# the same durability (journal / AOF, everysec), one filter of 10^7 items at
# 1 %, driven by fixed_rate (open loop: each request is sent when due and
# timed from then). Rounds interleave the servers; reported per (command,
# rate, server): median p50, p99 and p99.9 in µs over the rounds. Not a test.
#
# Usage: tests/bench/latency_bench.sh [--rounds N] [--rates "10000 40000"]
#        [--clients N] [--seconds S] [--commands "BF.EXISTS BF.ADD"]
# FIXED_RATE (default build/bench/tests/bench/fixed_rate), BLOOMERY (default
# build/release/bloomery), REDISBLOOM_SO (default ../shared/anchors/redisbloom.so).
set -euo pipefail
cd "$(dirname "$0")/../.."

ROUNDS=3
RATES="10000 40000"
CLIENTS=50
SECONDS_EACH=10
COMMANDS="BF.EXISTS BF.ADD"
while [ $# -gt 0 ]; do
    case "$1" in
        --rounds) ROUNDS=$2; shift 2 ;;
        --rates) RATES=$2; shift 2 ;;
        --clients) CLIENTS=$2; shift 2 ;;
        --seconds) SECONDS_EACH=$2; shift 2 ;;
        --commands) COMMANDS=$2; shift 2 ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
FIXED_RATE=${FIXED_RATE:-build/bench/tests/bench/fixed_rate}
BLOOMERY=${BLOOMERY:-build/release/bloomery}
MODULE=$(realpath "${REDISBLOOM_SO:-../shared/anchors/redisbloom.so}")
WORK=$(mktemp -d "${BENCH_DIR:-${TMPDIR:-/tmp}}/latency.XXXXXX")
PID=""
cleanup() {
    [ -n "$PID" ] && kill "$PID" 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT

. tests/bench/bench_lib.sh

echo "server,command,rate,round,p50,p99,p999" >"$WORK/results.csv"
run() {  # run SERVER COMMAND RATE ROUND
    local server=$1 command=$2 rate=$3 round=$4 dir port line
    dir="$WORK/$server-$round"
    mkdir -p "$dir"
    port=$(free_port)
    if [ "$server" = bloomery ]; then
        "$BLOOMERY" --bind 127.0.0.1 --port "$port" --dir "$dir" --save "" --threads 1 \
            --appendonly yes --appendfsync everysec >"$dir/log" 2>&1 &
    else
        redis-server --bind 127.0.0.1 --port "$port" --dir "$dir" --save "" --appendonly yes \
            --appendfsync everysec --loadmodule "$MODULE" >"$dir/log" 2>&1 &
    fi
    PID=$!
    wait_ping "$port"
    redis-cli -p "$port" BF.RESERVE hot 0.01 10000000 NONSCALING >/dev/null
    line=$("$FIXED_RATE" "$port" "$rate" "$CLIENTS" "$SECONDS_EACH" "$command" hot __rand_int__)
    kill "$PID"
    wait "$PID" 2>/dev/null || true
    PID=""
    rm -rf "$dir"
    # sent,answered,p50_us,p90_us,p99_us,p999_us,max_us
    echo "$server,$command,$rate,$round,$(echo "$line" | cut -d, -f3,5,6)" >>"$WORK/results.csv"
}

for command in $COMMANDS; do
    for rate in $RATES; do
        for round in $(seq 1 "$ROUNDS"); do
            for server in bloomery redisbloom; do run "$server" "$command" "$rate" "$round"; done
        done
    done
done

python3 tests/bench/median_table.py "$WORK/results.csv" "command,rate=rate/s,server" \
    "p50=p50 µs=%.0f,p99=p99 µs=%.0f,p999=p99.9 µs=%.0f"
