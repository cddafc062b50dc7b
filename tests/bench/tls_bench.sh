#!/usr/bin/env bash
# TLS vs plaintext on one bloomery, in one run, with redis-benchmark (--tls).
# Not a test: prints requests/s per round and the median ratio TLS/plaintext.
# Makes its own throw-away CA and certificates with the openssl command.
#
#   tests/bench/tls_bench.sh [ROUNDS] [REQUESTS] [CLIENTS] [PIPELINE]
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=${1:-3}
REQUESTS=${2:-500000}
CLIENTS=${3:-50}
PIPELINE=${4:-16}
BIN=build/release/bloomery
[ -x "$BIN" ] || { echo "build first: make build" >&2; exit 1; }

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
DATA=$(mktemp -d)
EC=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
(
    cd "$DATA"
    openssl req -x509 "${EC[@]}" -keyout ca.key -out ca.crt -days 1 -subj /CN=bench-ca 2>/dev/null
    for name in server client; do
        openssl req "${EC[@]}" -keyout $name.key -out $name.csr -subj /CN=bench-$name 2>/dev/null
        openssl x509 -req -in $name.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 1 \
            -out $name.crt 2>/dev/null
    done
)
PP=$(free_port); TP=$(free_port)
"$BIN" --port "$PP" --tls-port "$TP" --tls-cert-file "$DATA/server.crt" \
    --tls-key-file "$DATA/server.key" --tls-ca-cert-file "$DATA/ca.crt" \
    --save "" --dir "$DATA/data" --loglevel warn &
BPID=$!
trap 'kill $BPID 2>/dev/null; wait $BPID 2>/dev/null; rm -rf "$DATA"' EXIT
for _ in $(seq 100); do redis-cli -p "$PP" ping >/dev/null 2>&1 && break; sleep 0.05; done
TLS=(--tls --cacert "$DATA/ca.crt" --cert "$DATA/client.crt" --key "$DATA/client.key")

rps() {  # port, then redis-benchmark arguments; prints requests per second
    local port=$1; shift
    redis-benchmark -p "$port" -q "$@" 2>/dev/null | tr '\r' '\n' | grep 'requests per second' | tail -1 |
        sed -E 's/.*: ([0-9.]+) requests per second.*/\1/'
}
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

run_case() {  # name, then redis-benchmark arguments
    local name=$1 ratios=() p t; shift
    for round in $(seq "$ROUNDS"); do
        # Alternate the order so neither always runs on a warmer machine.
        if (( round % 2 )); then p=$(rps "$PP" "$@"); t=$(rps "$TP" "${TLS[@]}" "$@")
        else t=$(rps "$TP" "${TLS[@]}" "$@"); p=$(rps "$PP" "$@"); fi
        ratios+=("$(awk -v t="$t" -v p="$p" 'BEGIN {printf "%.3f", t / p}')")
        printf '%-22s round %d: plaintext %10.0f  TLS %10.0f  ratio %s\n' "$name" "$round" "$p" "$t" "${ratios[-1]}"
    done
    printf '%-22s median ratio TLS/plaintext: %s\n\n' "$name" "$(printf '%s\n' "${ratios[@]}" | median)"
}

COMMON=(-n "$REQUESTS" -c "$CLIENTS" -P "$PIPELINE")
run_case "PING" "${COMMON[@]}" -t ping_mbulk
redis-cli -p "$PP" BF.RESERVE bench 0.01 10000000 >/dev/null
run_case "BF.ADD" "${COMMON[@]}" -r 1000000 BF.ADD bench __rand_int__
