#!/usr/bin/env bash
# Where a request's CPU goes: the kernel's floor against the servers. Runs,
# interleaved round by round, io_floor (a +PONG server: a bare epoll loop,
# Boost.Asio, io_uring where built), redis-server answering PING, bloomery
# and redis-server + RedisBloom answering BF.EXISTS on one 10^7-item filter
# at 1 % (journal on, everysec, for both). Reported per (server, depth,
# clients): median server CPU per request in ns (every thread's on-CPU time
# from /proc/PID/task/*/schedstat, so nanoseconds, not clock ticks), ops/s
# and p99. What io_floor costs is what any server on this machine and
# kernel pays for the sockets alone. Not a test.
#
# Usage: tests/bench/io_floor_bench.sh [--rounds N] [--requests N]
#        [--depths "1 16"] [--clients "50"] [--servers "..."]
#        [--commands "BF.EXISTS BF.ADD"] (what bloomery and RedisBloom answer)
# IO_FLOOR (default build/bench/tests/bench/io_floor), BLOOMERY (default
# build/release/bloomery), REDISBLOOM_SO (default ../shared/anchors/redisbloom.so).
set -euo pipefail
cd "$(dirname "$0")/../.."

ROUNDS=3
REQUESTS=300000
DEPTHS="1 16"
CLIENTS="50"
SERVERS="epoll asio io_uring redis bloomery redisbloom"
COMMANDS="BF.EXISTS"
while [ $# -gt 0 ]; do
    case "$1" in
        --rounds) ROUNDS=$2; shift 2 ;;
        --requests) REQUESTS=$2; shift 2 ;;
        --depths) DEPTHS=$2; shift 2 ;;
        --clients) CLIENTS=$2; shift 2 ;;
        --servers) SERVERS=$2; shift 2 ;;
        --commands) COMMANDS=$2; shift 2 ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
IO_FLOOR=${IO_FLOOR:-build/bench/tests/bench/io_floor}
BLOOMERY=${BLOOMERY:-build/release/bloomery}
MODULE=$(realpath "${REDISBLOOM_SO:-../shared/anchors/redisbloom.so}")
WORK=$(mktemp -d "${BENCH_DIR:-${TMPDIR:-/tmp}}/io-floor.XXXXXX")
PID=""
cleanup() {
    [ -n "$PID" ] && kill "$PID" 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT

. tests/bench/bench_lib.sh

# %.0f, not %d: mawk caps %d at 2^31 - 1, about 2.1 s of CPU.
cpu_ns() { cat /proc/"$1"/task/*/schedstat | awk '{s += $1} END {printf "%.0f", s}'; }

start() {  # start SERVER PORT DIR: starts it in the background, sets PID
    local server=(redis-server --bind 127.0.0.1 --port "$2" --dir "$3" --save "" --appendonly yes
        --appendfsync everysec)
    case $1 in
        epoll | asio | io_uring) server=("$IO_FLOOR" "$1" "$2") ;;
        bloomery) server=("$BLOOMERY" --bind 127.0.0.1 --port "$2" --dir "$3" --save "" --threads 1
            --appendonly yes --appendfsync everysec) ;;
        redisbloom) server+=(--loadmodule "$MODULE") ;;
    esac
    "${server[@]}" >"$3/log" 2>&1 &
    PID=$!
}

echo "server,command,depth,clients,round,rps,p99_ms,cpu_ns" >"$WORK/results.csv"
run() {  # run SERVER COMMAND DEPTH CLIENTS ROUND
    local server=$1 bf=$2 depth=$3 clients=$4 round=$5 dir port command
    dir="$WORK/$server-$round"
    mkdir -p "$dir"
    port=$(free_port)
    start "$server" "$port" "$dir"
    wait_ping "$port"
    command=(PING)
    case $server in
        bloomery | redisbloom)
            redis-cli -p "$port" BF.RESERVE hot 0.01 10000000 NONSCALING >/dev/null
            command=("$bf" hot __rand_int__)
            ;;
    esac
    local before after line
    before=$(cpu_ns "$PID")
    line=$(redis-benchmark -p "$port" -c "$clients" -n "$REQUESTS" -r 100000000 -P "$depth" \
        --csv "${command[@]}" 2>/dev/null | tail -1)
    after=$(cpu_ns "$PID")
    kill "$PID"
    wait "$PID" 2>/dev/null || true
    PID=""
    rm -rf "$dir"
    local rps p99
    rps=$(echo "$line" | cut -d, -f2 | tr -d '"')
    p99=$(echo "$line" | cut -d, -f7 | tr -d '"')
    echo "$server,$bf,$depth,$clients,$round,$rps,$p99,$(((after - before) / REQUESTS))" \
        >>"$WORK/results.csv"
}

for clients in $CLIENTS; do
    for depth in $DEPTHS; do
        for round in $(seq 1 "$ROUNDS"); do
            for server in $SERVERS; do
                case $server in
                    bloomery | redisbloom)
                        for bf in $COMMANDS; do run "$server" "$bf" "$depth" "$clients" "$round"; done
                        ;;
                    *) run "$server" PING "$depth" "$clients" "$round" ;;
                esac
            done
        done
    done
done

python3 tests/bench/median_table.py "$WORK/results.csv" "server,command,depth=-P,clients" \
    "cpu_ns=CPU ns/request=%.0f,rps=ops/s=%.0f,p99_ms=p99 ms=%.2f"
