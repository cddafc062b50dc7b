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
#   build/release/bloomery); BENCH_SYNC_ITEMS, the items added to the filter
#   copied (default 200000: a mostly empty filter, whose snapshot is small;
#   about SYNC_MB * 30000 make most of its words non-zero, so that the copy
#   carries about SYNC_MB over the link); BENCH_TLS_REPLICATION=yes runs the replicas'
#   links over TLS (primaries also listen on a --tls-port, certificates made
#   with openssl; the load still goes to the plaintext port). Needs
#   redis-tools.
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
# The replicas' links: plaintext to --port, or TLS to a --tls-port.
TLS=${BENCH_TLS_REPLICATION:-no}
PRIMARY_TLS=()
REPLICA_TLS=()
if [ "$TLS" = yes ]; then
    C="$DATA/certs"; mkdir -p "$C"
    EC=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
    ossl() { openssl "$@" >/dev/null 2>&1; }
    ossl req -x509 "${EC[@]}" -keyout "$C/ca.key" -out "$C/ca.crt" -days 2 -subj /CN=bench-ca
    for name in server client; do
        ossl req "${EC[@]}" -keyout "$C/$name.key" -out "$C/$name.csr" -subj "/CN=bench-$name"
        ossl x509 -req -in "$C/$name.csr" -CA "$C/ca.crt" -CAkey "$C/ca.key" -CAcreateserial \
            -days 2 -out "$C/$name.crt"
    done
    PRIMARY_TLS=(--tls-cert-file "$C/server.crt" --tls-key-file "$C/server.key"
                 --tls-ca-cert-file "$C/ca.crt")
    REPLICA_TLS=(--tls-replication yes --tls-ca-cert-file "$C/ca.crt"
                 --tls-client-cert-file "$C/client.crt" --tls-client-key-file "$C/client.key")
fi
# start_primary NAME: a primary on PP (and TLS port LP when TLS); LP is the
# port its replicas connect to.
start_primary() {
    PP=$(free_port)
    if [ "$TLS" = yes ]; then
        LP=$(free_port); start "$1" "$PP" --tls-port "$LP" "${PRIMARY_TLS[@]}"
    else
        LP=$PP; start "$1" "$PP"
    fi
}
cpu_ns() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{n += $1} END {printf "%.0f\n", n}'; }
link_up() { redis-cli -p "$1" info replication | tr -d '\r' | grep -q '^master_link_status:up'; }

echo "replication_bench (TLS links: $TLS): $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
printf '%-9s %-6s %12s %14s %16s\n' replicas round "req/s" "CPU us/req" "WAIT after (ms)"
for replicas in 0 1 2; do
    start_primary "primary-$replicas"; PRIMARY=$PID
    redis-cli -p "$PP" BF.RESERVE hot 0.01 100000000 NONSCALING >/dev/null
    for i in $(seq "$replicas"); do
        RP=$(free_port)
        start "replica-$replicas-$i" "$RP" --replicaof "127.0.0.1 $LP" "${REPLICA_TLS[@]}"
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

# Full synchronization of one big filter, BENCH_SYNC_REPEATS times (default
# 1): REPLICAOF, wait for the link, REPLICAOF NO ONE (the next REPLICAOF is a
# full copy again). With TLS links, a plaintext replica copies it too, in
# turns with the TLS one, so that both see the same machine load.
start_primary sync-primary
capacity=$(( SYNC_MB * 1024 * 1024 * 8 / 10 ))  # about 9.6 bits per item at 1 %
redis-cli -p "$PP" BF.RESERVE big 0.01 "$capacity" NONSCALING >/dev/null
redis-benchmark -p "$PP" -c 50 -P 16 -n "${BENCH_SYNC_ITEMS:-200000}" -r 1000000000 \
    BF.ADD big __rand_int__ >/dev/null 2>&1
bytes=$(redis-cli -p "$PP" BF.INFO big SIZE)
# What a copy carries: the primary's snapshot of the same data.
redis-cli -p "$PP" SAVE >/dev/null
sent=$(stat -c %s "$DATA/sync-primary/dump.bloomery")
echo "full synchronization of a $bytes-byte filter ($sent-byte snapshot):"
sync_once() {  # label replica-port primary-port
    local started took
    started=$(date +%s%N)
    redis-cli -p "$2" REPLICAOF 127.0.0.1 "$3" >/dev/null
    for _ in $(seq 6000); do link_up "$2" && break; sleep 0.02; done
    took=$(( ($(date +%s%N) - started) / 1000000 ))
    redis-cli -p "$2" REPLICAOF NO ONE >/dev/null
    echo "  $1: $took ms ($(echo "$sent / 1048576 / ($took / 1000)" | bc -l | cut -c1-6) MiB/s)"
}
RP=$(free_port); start sync-replica "$RP" "${REPLICA_TLS[@]}"
if [ "$TLS" = yes ]; then PLAIN_RP=$(free_port); start sync-replica-plain "$PLAIN_RP"; fi
for _ in $(seq "${BENCH_SYNC_REPEATS:-1}"); do
    if [ "$TLS" = yes ]; then
        sync_once plaintext "$PLAIN_RP" "$PP"
        sync_once TLS "$RP" "$LP"
    else
        sync_once plaintext "$RP" "$LP"
    fi
done
