#!/usr/bin/env bash
# BF.ADD through redis-benchmark on one bloomery and on a three-node cluster
# (redis-benchmark --cluster) on this machine, side by side, alternating.
# Not a test: prints requests/s and the servers' CPU per request each round,
# then the medians. Every server: --appendonly no --save "" on loopback.
#
#   tests/bench/cluster_bench.sh [ROUNDS] [REQUESTS] [CLIENTS] [PIPELINE] [NODE_THREADS]
#
# Keys are bf{tag}:<random of 100000>: with --cluster, redis-benchmark puts in
# {tag} a hash tag of a slot the client's node owns, so each of its clients
# adds to filters of one node without redirects; on one node the tag is
# literal. The single node runs with --threads NODE_THREADS and with as many
# threads as the cluster has in all (3 x NODE_THREADS), and in cluster mode
# with a map of its own that gives it every slot.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=${1:-3}
REQUESTS=${2:-500000}
CLIENTS=${3:-48}
PIPELINE=${4:-16}
NODE_THREADS=${5:-1}
BIN=build/release/bloomery
[ -x "$BIN" ] || { echo "build first: make build" >&2; exit 1; }

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
DATA=$(mktemp -d)
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; rm -rf "$DATA"' EXIT

start() {  # port threads [more flags...]; records the pid
    local port=$1 threads=$2; shift 2
    mkdir -p "$DATA/$port"
    "$BIN" --port "$port" --threads "$threads" --appendonly no --save "" --dir "$DATA/$port" \
        --loglevel warn "$@" &
    PIDS+=($!)
    for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && return; sleep 0.05; done
    echo "bloomery on $port did not start" >&2; exit 1
}
cpu_ticks() {  # pids; prints utime + stime in clock ticks, summed
    local total=0 pid
    for pid in "$@"; do
        total=$((total + $(awk '{print $14 + $15}' "/proc/$pid/stat")))
    done
    echo "$total"
}

S1=$(free_port); SN=$(free_port); C=($(free_port) $(free_port) $(free_port))
MAP="0-5460=127.0.0.1:${C[0]},5461-10922=127.0.0.1:${C[1]},10923-16383=127.0.0.1:${C[2]}"
start "$S1" "$NODE_THREADS"; SINGLE_PID=${PIDS[-1]}
start "$SN" $((3 * NODE_THREADS)); SINGLE_N_PID=${PIDS[-1]}
# One node in cluster mode serving every slot: the same work as the first
# single node plus the slot check, so the pair shows what the check costs.
S1C=$(free_port)
start "$S1C" "$NODE_THREADS" --cluster-enabled yes --cluster-slots "0-16383=127.0.0.1:$S1C" \
    --cluster-self "127.0.0.1:$S1C"
SINGLE_CLUSTER_PID=${PIDS[-1]}
CLUSTER_PIDS=()
for port in "${C[@]}"; do
    start "$port" "$NODE_THREADS" --cluster-enabled yes --cluster-slots "$MAP" \
        --cluster-self "127.0.0.1:$port"
    CLUSTER_PIDS+=("${PIDS[-1]}")
done
TICK=$(getconf CLK_TCK)
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

measure() {  # label, pids (comma-separated), then redis-benchmark arguments
    local label=$1 pids=(${2//,/ }); shift 2
    local before after rps
    before=$(cpu_ticks "${pids[@]}")
    rps=$(redis-benchmark -q -n "$REQUESTS" -c "$CLIENTS" -P "$PIPELINE" -r 100000 "$@" \
              BF.ADD 'bf{tag}:__rand_int__' __rand_int__ 2>/dev/null | tr '\r' '\n' |
          grep 'requests per second' | tail -1 | sed -E 's/.*: ([0-9.]+) requests per second.*/\1/')
    after=$(cpu_ticks "${pids[@]}")
    local us=$(awk -v t=$((after - before)) -v k="$TICK" -v n="$REQUESTS" \
                   'BEGIN {printf "%.2f", t / k * 1e6 / n}')
    printf '%-44s %10.0f req/s  %6s us CPU per request\n' "$label" "$rps" "$us"
    echo "$label|$rps|$us" >> "$DATA/results"
}

echo "$(date -u +%F) $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "BF.ADD, $REQUESTS requests, -c $CLIENTS -P $PIPELINE, keys bf{tag}:<rand 100000>"
for round in $(seq "$ROUNDS"); do
    echo "round $round"
    measure "one node, --threads $NODE_THREADS" "$SINGLE_PID" -p "$S1"
    # (Not --cluster: redis-benchmark wants at least 3 primaries. The node
    # owns every slot, so the literal {tag} is its own.)
    measure "one node in cluster mode, --threads $NODE_THREADS" "$SINGLE_CLUSTER_PID" -p "$S1C"
    measure "one node, --threads $((3 * NODE_THREADS))" "$SINGLE_N_PID" -p "$SN"
    measure "3-node cluster, --threads $NODE_THREADS each" "$(IFS=,; echo "${CLUSTER_PIDS[*]}")" \
        --cluster -p "${C[0]}"
done
echo "medians"
for label in "one node, --threads $NODE_THREADS" "one node in cluster mode, --threads $NODE_THREADS" \
             "one node, --threads $((3 * NODE_THREADS))" \
             "3-node cluster, --threads $NODE_THREADS each"; do
    rps=$(grep -F "$label|" "$DATA/results" | cut -d'|' -f2 | median)
    us=$(grep -F "$label|" "$DATA/results" | cut -d'|' -f3 | median)
    printf '%-44s %10.0f req/s  %6s us CPU per request\n' "$label" "$rps" "$us"
done
