#!/usr/bin/env bash
# Server CPU per request, bloomery against RedisBloom 2.4.23 side by side
# (redis-server with redisbloom.so), both with a journal fsynced every
# second. Not a test: it measures and prints one line per run.
#
#   creates  BF.ADD k:<rand> x, -r 100000000: every request creates a small
#            filter (the default one) but for a few repeats
#   mexists  BF.MEXISTS big <100 rand> on one big filter per server,
#            BF.RESERVE big 0.01 CAPACITY NONSCALING [LAYOUT ...], warmed with
#            CAPACITY / 1000 items (every page touched), items drawn over
#            -r 2000000000 (nearly all absent)
#
# CPU per request: the server process's utime + stime (/proc/PID/stat, all
# threads) plus that of its children it has waited for (cutime + cstime:
# Redis rewrites its AOF in a forked child, bloomery snapshots in a thread
# of its own), over the run, divided by the requests (by the items for
# mexists). The run ends once neither server has a rewrite or snapshot in
# progress, so each is charged for the persistence its writes started. Runs
# alternate which server goes first, ROUNDS rounds.
#
# Usage: tests/bench/blocks_bench.sh creates|mexists [ROUNDS] [CAPACITY] [LAYOUT]
# Environment: PERSISTENCE (everysec, the default: both journal or AOF
# fsynced every second; none: neither server persists, to tell the cost of
# persistence from the rest), BLOOMERY_BIN (default build/release/bloomery), REDISBLOOM_SO
# (default /work/shared/anchors/redisbloom.so), BP / RP (ports, 7411 / 7412),
# BLOOMERY_ARGS (more bloomery flags, e.g. "--threads 1"), SERVER_CPUS /
# CLIENT_CPUS (taskset -c lists for both servers / redis-benchmark; default
# none).
set -euo pipefail

CASE=${1:?creates or mexists}
ROUNDS=${2:-3}
CAPACITY=${3:-800000000}
LAYOUT=${4:-}
BIN=${BLOOMERY_BIN:-build/release/bloomery}
SO=${REDISBLOOM_SO:-/work/shared/anchors/redisbloom.so}
BP=${BP:-7411}
RP=${RP:-7412}
TICK=$(getconf CLK_TCK)
SERVER_PIN=()
CLIENT_PIN=()
[ -n "${SERVER_CPUS:-}" ] && SERVER_PIN=(taskset -c "$SERVER_CPUS")
[ -n "${CLIENT_CPUS:-}" ] && CLIENT_PIN=(taskset -c "$CLIENT_CPUS")
case ${PERSISTENCE:-everysec} in
everysec) DURABLE=(--appendonly yes --appendfsync everysec) ;;
none) DURABLE=(--appendonly no) ;;
*)
    echo "PERSISTENCE is everysec or none" >&2
    exit 2
    ;;
esac
WORK=$(mktemp -d /tmp/blocks-bench.XXXXXX)

mkdir -p "$WORK/b" "$WORK/r"
# shellcheck disable=SC2086
"${SERVER_PIN[@]}" "$BIN" --port "$BP" --dir "$WORK/b" "${DURABLE[@]}" \
    ${BLOOMERY_ARGS:-} >"$WORK/b.log" 2>&1 &
BPID=$!
"${SERVER_PIN[@]}" redis-server --port "$RP" --save '' "${DURABLE[@]}" --dir "$WORK/r" \
    --loadmodule "$SO" >"$WORK/r.log" 2>&1 &
RPID=$!
cleanup() {
    kill "$BPID" "$RPID" 2>/dev/null || true
    wait "$BPID" "$RPID" 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT
for port in "$BP" "$RP"; do
    for _ in $(seq 100); do redis-cli -p "$port" PING >/dev/null 2>&1 && break; sleep 0.1; done
done

cpu_ticks() { awk '{print $14 + $15 + $16 + $17}' "/proc/$1/stat"; }

# Waits (up to 10 minutes) until the server on port $1 has no snapshot or
# AOF rewrite in progress (Redis clears the flag once it has waited for the
# child, so its CPU is then in cutime + cstime).
settle() {
    for _ in $(seq 6000); do
        redis-cli -p "$1" INFO persistence |
            grep -qE '^(rdb_bgsave_in_progress|aof_rewrite_in_progress):1' || return 0
        sleep 0.1
    done
}

items() {
    local out=""
    for _ in $(seq "$1"); do out+="__rand_int__ "; done
    echo "$out"
}

prepare_mexists() {
    local port=$1 layout=()
    [ "$port" = "$BP" ] && [ -n "$LAYOUT" ] && layout=(LAYOUT "$LAYOUT")
    redis-cli -p "$port" BF.RESERVE big 0.01 "$CAPACITY" NONSCALING "${layout[@]}" >/dev/null
    # shellcheck disable=SC2046
    redis-benchmark -p "$port" -n $((CAPACITY / 1000 / 100)) -r 2000000000 -P 16 -c 50 \
        BF.MADD big $(items 100) >/dev/null
}

run() {
    local name=$1 port=$2 pid=$3 requests per
    local before after
    if [ "$CASE" = creates ]; then
        requests=1000000
        redis-cli -p "$port" FLUSHALL >/dev/null
        before=$(cpu_ticks "$pid")
        "${CLIENT_PIN[@]}" redis-benchmark -p "$port" -n "$requests" -r 100000000 -P 16 -c 50 \
            BF.ADD k:__rand_int__ x >/dev/null
        settle "$port"
        after=$(cpu_ticks "$pid")
        per=$requests
    else
        requests=50000
        before=$(cpu_ticks "$pid")
        # shellcheck disable=SC2046
        "${CLIENT_PIN[@]}" redis-benchmark -p "$port" -n "$requests" -r 2000000000 -P 16 -c 50 \
            BF.MEXISTS big $(items 100) >/dev/null
        after=$(cpu_ticks "$pid")
        per=$((requests * 100))
    fi
    echo "$CASE $name round $round: $(( (after - before) * 1000000000 / TICK / per )) ns per" \
        "$([ "$CASE" = creates ] && echo request || echo item)"
}

if [ "$CASE" = mexists ]; then
    prepare_mexists "$BP"
    prepare_mexists "$RP"
    echo "bloomery: $(redis-cli -p "$BP" BF.INFO big LAYOUT) $(redis-cli -p "$BP" BF.INFO big SIZE)"
    echo "redisbloom: $(redis-cli -p "$RP" BF.INFO big SIZE)"
fi
for round in $(seq "$ROUNDS"); do
    if [ $((round % 2)) = 1 ]; then
        run bloomery "$BP" "$BPID"
        run redisbloom "$RP" "$RPID"
    else
        run redisbloom "$RP" "$RPID"
        run bloomery "$BP" "$BPID"
    fi
done
