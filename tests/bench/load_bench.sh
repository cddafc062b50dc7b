#!/usr/bin/env bash
# Side-by-side load benchmark: bloomery vs redis-server on this machine, in one
# run, with redis-benchmark. Not a test: it prints requests/s per round and the
# median ratio. Needs redis-server and redis-tools (apt-get install redis-server).
#
#   tests/bench/load_bench.sh [ROUNDS] [REQUESTS]
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=${1:-5}
REQUESTS=${2:-1000000}
BIN=build/release/bloomery
[ -x "$BIN" ] || { echo "build first: make build" >&2; exit 1; }
command -v redis-server >/dev/null || { echo "needs redis-server" >&2; exit 1; }

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
DATA=$(mktemp -d)
RP=$(free_port); BP=$(free_port)
redis-server --port "$RP" --bind 127.0.0.1 --save "" --appendonly no --dir "$DATA" >/dev/null 2>&1 &
RPID=$!
"$BIN" --port "$BP" --save "" --dir "$DATA/bloomery" --loglevel warn &
BPID=$!
trap 'kill $RPID $BPID 2>/dev/null; wait $RPID $BPID 2>/dev/null; rm -rf "$DATA"' EXIT
for _ in $(seq 100); do redis-cli -p "$RP" ping >/dev/null 2>&1 && redis-cli -p "$BP" ping >/dev/null 2>&1 && break; sleep 0.05; done

rps() {  # port, then redis-benchmark arguments; prints requests per second
    local port=$1; shift
    redis-benchmark -p "$port" -q "$@" 2>/dev/null | tr '\r' '\n' | grep 'requests per second' | tail -1 |
        sed -E 's/.*: ([0-9.]+) requests per second.*/\1/'
}
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

run_case() {  # name, redis args, bloomery args
    local name=$1 redis_args=$2 bloomery_args=$3 ratios=() r b
    for round in $(seq "$ROUNDS"); do
        # Alternate the order so neither server always runs on a warmer machine.
        if (( round % 2 )); then r=$(rps "$RP" $redis_args); b=$(rps "$BP" $bloomery_args)
        else b=$(rps "$BP" $bloomery_args); r=$(rps "$RP" $redis_args); fi
        ratios+=("$(awk -v b="$b" -v r="$r" 'BEGIN {printf "%.3f", b / r}')")
        printf '%-28s round %d: redis %12.0f  bloomery %12.0f  ratio %s\n' "$name" "$round" "$r" "$b" "${ratios[-1]}"
    done
    printf '%-28s median ratio bloomery/redis: %s\n\n' "$name" "$(printf '%s\n' "${ratios[@]}" | median)"
}

COMMON="-n $REQUESTS -c 50 -P 16"
run_case "PING -P 16" "$COMMON -t ping_mbulk" "$COMMON -t ping_mbulk"
# Redis has no Bloom filter without the RedisBloom module: SET/GET of one
# small key is the closest built-in work per command.
redis-cli -p "$BP" BF.RESERVE bench 0.01 10000000 >/dev/null
run_case "BF.ADD vs SET -P 16" "$COMMON -r 1000000 SET key:__rand_int__ x" "$COMMON -r 1000000 BF.ADD bench __rand_int__"
run_case "BF.EXISTS vs GET -P 16" "$COMMON -r 1000000 GET key:__rand_int__" "$COMMON -r 1000000 BF.EXISTS bench __rand_int__"
