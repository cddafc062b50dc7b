#!/usr/bin/env bash
# Instructions the server executes per command, counted by callgrind: the
# same binary, inputs and settings give the same count whatever else the
# machine does, so two builds compare to the instruction (wall-clock
# figures on a shared 2-core VM move by ±10 %). Not a test: it measures.
#
# For each binary and mode: two runs under valgrind --tool=callgrind, with N1
# and N2 commands (BF.ADD, BF.EXISTS, BF.MADD of 100) from redis-benchmark
# (-c 10 -r 100000000, one filter BF.RESERVE hot 0.01 2000000 NONSCALING,
# bloomery --threads 1); the
# difference of the totals over N2 - N1 is the cost of one command, start-up
# and shut-down cancelled out.
#
# Usage: tests/bench/instructions_bench.sh BINARY [BINARY...]
#   MODES (default: "--appendonly no|--appendfsync everysec|--appendfsync always")
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 BINARY [BINARY...]" >&2; exit 2; }
command -v valgrind >/dev/null && command -v redis-benchmark >/dev/null ||
    { echo "needs valgrind and redis-tools" >&2; exit 1; }
IFS='|' read -r -a MODES <<<"${MODES:---appendonly no|--appendfsync everysec|--appendfsync always}"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
ITEMS=$(for _ in $(seq 100); do printf ' __rand_int__'; done)

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# total_instructions BINARY MODE COMMAND N
total_instructions() {
    local port pid
    port=$(free_port)
    rm -rf "$WORK/data" && mkdir -p "$WORK/data"
    # shellcheck disable=SC2086
    valgrind --tool=callgrind --callgrind-out-file="$WORK/out" "$1" --bind 127.0.0.1 \
        --port "$port" --dir "$WORK/data" --threads 1 --save "" $2 >"$WORK/log" 2>&1 &
    pid=$!
    for _ in $(seq 600); do redis-cli -p "$port" PING 2>/dev/null | grep -q PONG && break; sleep 0.1; done
    redis-cli -p "$port" BF.RESERVE hot 0.01 2000000 NONSCALING >/dev/null
    if [ "$3" = add ]; then
        redis-benchmark -p "$port" -n "$4" -P 16 -c 10 -r 100000000 BF.ADD hot __rand_int__ >/dev/null 2>&1
    elif [ "$3" = exists ]; then
        redis-benchmark -p "$port" -n "$4" -P 16 -c 10 -r 100000000 BF.EXISTS hot __rand_int__ >/dev/null 2>&1
    else
        # shellcheck disable=SC2086
        redis-benchmark -p "$port" -n "$4" -P 4 -c 10 -r 100000000 BF.MADD hot $ITEMS >/dev/null 2>&1
    fi
    kill "$pid"
    wait "$pid" 2>/dev/null || true
    awk '/^(summary|totals):/ {print $2; exit}' "$WORK/out"
}

echo "| binary | mode | BF.ADD | BF.EXISTS | BF.MADD of 100 |"
echo "|---|---|---|---|---|"
for mode in "${MODES[@]}"; do
    for binary in "$@"; do
        a1=$(total_instructions "$binary" "$mode" add 20000)
        a2=$(total_instructions "$binary" "$mode" add 60000)
        e1=$(total_instructions "$binary" "$mode" exists 20000)
        e2=$(total_instructions "$binary" "$mode" exists 60000)
        m1=$(total_instructions "$binary" "$mode" madd 2000)
        m2=$(total_instructions "$binary" "$mode" madd 6000)
        echo "| $binary | $mode | $(( (a2 - a1) / 40000 )) | $(( (e2 - e1) / 40000 )) | $(( (m2 - m1) / 4000 )) |"
    done
done
