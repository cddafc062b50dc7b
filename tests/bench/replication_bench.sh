#!/usr/bin/env bash
# Replication benchmark: what replicas cost a primary, and how fast a replica
# copies one. Not a test: it measures and reports.
#
# 1. BF.ADD on a primary (redis-benchmark -P 16, random items into one hot
#    filter) with 0, 1 and 2 replicas attached, ROUNDS rounds each; reports
#    requests/s, the primary's CPU per request (from /proc), and how long
#    after the last reply WAIT <replicas> saw every add acknowledged.
# 2. A full synchronization of a filter of SYNC_MB megabytes: seconds from
#    REPLICAOF until the replica's link is up.
#
# Usage: tests/bench/replication_bench.sh [ROUNDS] [REQUESTS] [SYNC_MB]
#   defaults 3, 500000, 512. Environment: BLOOMERY_BIN (default
#   build/release/bloomery). Needs redis-tools.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=${1:-3}
REQUESTS=${2:-500000}
SYNC_MB=${3:-512}
BIN=${BLOOMERY_BIN:-build/release/bloomery}
[ -x "$BIN" ] || { echo "build first (make build)" >&2; exit 1; }

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
DATA=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; rm -rf "$DATA"; }
trap cleanup EXIT
start() {  # name port extra-args...: starts a server, records its pid in PID
    local name=$1 port=$2; shift 2
    mkdir -p "$DATA/$name"
    "$BIN" --bind 127.0.0.1 --port "$port" --dir "$DATA/$name" --save "" --loglevel warn \
        --threads 2 "$@" >"$DATA/$name.log" 2>&1 &
    PID=$!
    PIDS+=("$PID")
    for _ in $(seq 200); do redis-cli -p "$port" ping >/dev/null 2>&1 && return 0; sleep 0.05; done
    echo "server $name did not start" >&2; cat "$DATA/$name.log" >&2; exit 1
}
cpu_ns() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{n += $1} END {printf "%.0f\n", n}'; }
link_up() { redis-cli -p "$1" info replication | tr -d '\r' | grep -q '^master_link_status:up'; }

echo "replication_bench: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
printf '%-9s %-6s %12s %14s %16s\n' replicas round "req/s" "CPU us/req" "WAIT after (ms)"
for replicas in 0 1 2; do
    PP=$(free_port); start "primary-$replicas" "$PP"; PRIMARY=$PID
    redis-cli -p "$PP" BF.RESERVE hot 0.01 100000000 NONSCALING >/dev/null
    for i in $(seq "$replicas"); do
        RP=$(free_port); start "replica-$replicas-$i" "$RP" --replicaof "127.0.0.1 $PP"
        for _ in $(seq 400); do link_up "$RP" && break; sleep 0.05; done
    done
    for round in $(seq "$ROUNDS"); do
        before=$(cpu_ns "$PRIMARY")
        rps=$(redis-benchmark -p "$PP" -c 50 -P 16 -n "$REQUESTS" -r 100000000 --csv \
            BF.ADD hot __rand_int__ 2>/dev/null | tr -d '"\r' | grep -v '^test' | tail -1 | cut -d, -f2)
        after=$(cpu_ns "$PRIMARY")
        started=$(date +%s%N)
        acked=$(redis-cli -p "$PP" WAIT "$replicas" 60000)
        waited=$(( ($(date +%s%N) - started) / 1000000 ))
        [ "$acked" -ge "$replicas" ] || echo "only $acked replicas acknowledged" >&2
        printf '%-9s %-6s %12.0f %14.3f %16s\n' "$replicas" "$round" "$rps" \
            "$(echo "($after - $before) / 1000 / $REQUESTS" | bc -l)" "$waited"
    done
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
    PIDS=()
done

# Full synchronization of one big filter.
PP=$(free_port); start sync-primary "$PP"
capacity=$(( SYNC_MB * 1024 * 1024 * 8 / 10 ))  # about 9.6 bits per item at 1 %
redis-cli -p "$PP" BF.RESERVE big 0.01 "$capacity" NONSCALING >/dev/null
redis-benchmark -p "$PP" -c 50 -P 16 -n 200000 -r 100000000 BF.ADD big __rand_int__ >/dev/null 2>&1
bytes=$(redis-cli -p "$PP" BF.INFO big SIZE)
RP=$(free_port); start sync-replica "$RP"
started=$(date +%s%N)
redis-cli -p "$RP" REPLICAOF 127.0.0.1 "$PP" >/dev/null
for _ in $(seq 6000); do link_up "$RP" && break; sleep 0.02; done
took=$(( ($(date +%s%N) - started) / 1000000 ))
echo "full synchronization of a $bytes-byte filter: $took ms ($(echo "$bytes / 1048576 / ($took / 1000)" | bc -l | cut -c1-6) MiB/s)"
