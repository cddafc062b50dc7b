#!/usr/bin/env bash
# Snapshot benchmark (not a test; ctest does not run it).
#
# On this machine and disk: creates a ~1 GiB filter in a release bloomery with
# periodic saving disabled, fills part of it, then measures
#   - SAVE wall time and throughput, next to `dd ... conv=fsync` of 1 GiB to the
#     same directory (the disk's own sequential write + fsync speed);
#   - BF.EXISTS latency (p50/p99, redis-benchmark 7) with no snapshot running
#     and while BGSAVE runs back to back;
#   - load time at restart (the server's "loaded N filters (...) in X s" line).
# Prints a small table. Kills only the servers it started (by pid) and removes
# its files. Usage:
#   tests/bench/snapshot_bench.sh            # dir under /tmp
#   BENCH_DIR=/data tests/bench/snapshot_bench.sh
# Env: BLOOMERY_BIN, BENCH_DIR, FILL_ITEMS (default 20000000),
#      EXISTS_REQUESTS (default 300000).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BIN="${BLOOMERY_BIN:-$ROOT/build/release/bloomery}"
FILL_ITEMS="${FILL_ITEMS:-20000000}"
EXISTS_REQUESTS="${EXISTS_REQUESTS:-300000}"
# m = -n ln p / (ln 2)^2; RedisBloom-style sizing tightens the first layer to
# p/2 = 0.00005, i.e. 20.61 bits per item: 416,000,000 items -> ~1.0 GiB.
CAPACITY="${CAPACITY:-416000000}"

for tool in redis-cli redis-benchmark dd python3; do
    command -v "$tool" >/dev/null || { echo "missing $tool" >&2; exit 1; }
done
[ -x "$BIN" ] || { echo "no binary at $BIN (cmake --build build/release --target bloomery)" >&2; exit 1; }

WORK="$(mktemp -d "${BENCH_DIR:-/tmp}/bloomery-snapbench.XXXXXX")"
SERVER_PID=""
SAVER_PID=""

cleanup() {
    if [ -n "$SAVER_PID" ] && kill -0 "$SAVER_PID" 2>/dev/null; then kill "$SAVER_PID" 2>/dev/null || true; wait "$SAVER_PID" 2>/dev/null || true; fi
    if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
        kill -KILL "$SERVER_PID" 2>/dev/null || true
        wait "$SERVER_PID" 2>/dev/null || true
    fi
    rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }

PORT=""
LOG=""
start_server() {
    PORT="$(free_port)"
    LOG="$WORK/server-$PORT.log"
    "$BIN" --bind 127.0.0.1 --port "$PORT" --dir "$WORK" --save "" --threads 2 \
        --max-filter-bytes 2gb >"$LOG" 2>&1 &
    SERVER_PID=$!
    local started
    started="$(now)"
    for _ in $(seq 1 1200); do   # up to 120 s: loading 1 GiB from a busy disk
        if redis-cli -p "$PORT" PING 2>/dev/null | grep -q PONG; then
            READY_SECONDS="$(elapsed "$started" "$(now)")"
            return 0
        fi
        kill -0 "$SERVER_PID" 2>/dev/null || { cat "$LOG" >&2; echo "server exited" >&2; exit 1; }
        sleep 0.1
    done
    echo "server not ready" >&2
    exit 1
}

stop_server() {  # SHUTDOWN NOSAVE, then make sure the pid is gone
    redis-cli -p "$PORT" SHUTDOWN NOSAVE >/dev/null 2>&1 || true
    for _ in $(seq 1 300); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
    SERVER_PID=""
}

cli() { redis-cli -p "$PORT" "$@"; }
info_field() { cli INFO persistence | tr -d '\r' | awk -F: -v k="$1" '$1 == k { print $2 }'; }

# p50 / p99 from redis-benchmark 7 --csv:
# "test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"
exists_latency() {
    redis-benchmark -p "$PORT" -c 8 -n "$EXISTS_REQUESTS" -r 1000000000 --csv \
        BF.EXISTS big __rand_int__ | tail -n 1 | tr -d '"' |
        awk -F, '{ printf "%s %s %s %s", $2, $5, $7, $8 }'
}

echo "bloomery snapshot benchmark: dir $WORK ($(df -h "$WORK" | awk 'NR==2 {print $1}')), $(nproc) cores"
start_server
echo "reserving big: error rate 0.0001, capacity $CAPACITY"
cli BF.RESERVE big 0.0001 "$CAPACITY" >/dev/null
FILTER_BYTES="$(cli BF.INFO big SIZE | tail -n 1)"
echo "filter size: $FILTER_BYTES bytes"

echo "filling with $FILL_ITEMS random items (redis-benchmark, pipelined)"
t0="$(now)"
redis-benchmark -p "$PORT" -c 8 -P 64 -n "$FILL_ITEMS" -r 1000000000 -q \
    BF.ADD big __rand_int__ | tr '\r' '\n' | tail -n 1
FILL_SECONDS="$(elapsed "$t0" "$(now)")"
echo "items counted: $(cli BF.CARD big)"

echo "SAVE"
t0="$(now)"
reply="$(cli SAVE)"
SAVE_SECONDS="$(elapsed "$t0" "$(now)")"
[ "$reply" = "OK" ] || { echo "SAVE failed: $reply" >&2; exit 1; }
SNAP_BYTES="$(stat -c %s "$WORK/dump.bloomery")"
SAVE_MBS="$(awk -v b="$SNAP_BYTES" -v s="$SAVE_SECONDS" 'BEGIN { printf "%.0f", b / 1048576 / s }')"

echo "dd 1 GiB conv=fsync"
t0="$(now)"
dd if=/dev/zero of="$WORK/dd.test" bs=1M count=1024 conv=fsync status=none
DD_SECONDS="$(elapsed "$t0" "$(now)")"
rm -f "$WORK/dd.test"
DD_MBS="$(awk -v s="$DD_SECONDS" 'BEGIN { printf "%.0f", 1024 / s }')"

echo "BF.EXISTS latency, no snapshot running"
read -r IDLE_RPS IDLE_P50 IDLE_P99 IDLE_MAX <<<"$(exists_latency)"

echo "BF.EXISTS latency, BGSAVE back to back"
(
    while true; do
        redis-cli -p "$PORT" BGSAVE >/dev/null 2>&1 || exit 0
        for _ in $(seq 1 6000); do
            redis-cli -p "$PORT" INFO persistence 2>/dev/null | grep -q '^rdb_bgsave_in_progress:0' && break
            sleep 0.05
        done
    done
) &
SAVER_PID=$!
sleep 0.5
SAVES_BEFORE="$(info_field rdb_saves)"
read -r BUSY_RPS BUSY_P50 BUSY_P99 BUSY_MAX <<<"$(exists_latency)"
SAVES_DURING=$(( $(info_field rdb_saves) - SAVES_BEFORE ))
kill "$SAVER_PID" 2>/dev/null || true
wait "$SAVER_PID" 2>/dev/null || true
SAVER_PID=""
for _ in $(seq 1 1200); do
    [ "$(info_field rdb_bgsave_in_progress)" = "0" ] && break
    sleep 0.1
done
LAST_STATUS="$(info_field rdb_last_bgsave_status)"

echo "restart and load"
stop_server
start_server
LOAD_LINE="$(grep -o 'loaded .* in [0-9.]* s' "$LOG" | head -n 1 || true)"
LOAD_SECONDS="$(sed -E 's/.* in ([0-9.]+) s$/\1/' <<<"$LOAD_LINE")"
LOAD_MBS="$(awk -v b="$SNAP_BYTES" -v s="$LOAD_SECONDS" 'BEGIN { if (s > 0) printf "%.0f", b / 1048576 / s; else print "-" }')"
CARD_AFTER="$(cli BF.CARD big)"
stop_server

printf '\n%-44s %s\n' "measure" "value"
printf '%-44s %s\n' "filter size (BF.INFO SIZE)" "$FILTER_BYTES bytes"
printf '%-44s %s\n' "snapshot file" "$SNAP_BYTES bytes"
printf '%-44s %s s\n' "fill ($FILL_ITEMS BF.ADD, -P 64 -c 8)" "$FILL_SECONDS"
printf '%-44s %s s (%s MB/s)\n' "SAVE" "$SAVE_SECONDS" "$SAVE_MBS"
printf '%-44s %s s (%s MB/s)\n' "dd 1 GiB conv=fsync, same dir" "$DD_SECONDS" "$DD_MBS"
printf '%-44s %s rps, p50 %s ms, p99 %s ms, max %s ms\n' "BF.EXISTS idle (-c 8)" "$IDLE_RPS" "$IDLE_P50" "$IDLE_P99" "$IDLE_MAX"
printf '%-44s %s rps, p50 %s ms, p99 %s ms, max %s ms\n' "BF.EXISTS during BGSAVE loop ($SAVES_DURING saves)" "$BUSY_RPS" "$BUSY_P50" "$BUSY_P99" "$BUSY_MAX"
printf '%-44s %s\n' "last bgsave status" "$LAST_STATUS"
printf '%-44s %s s (%s MB/s); ready after %s s\n' "load at restart" "${LOAD_SECONDS:-?}" "$LOAD_MBS" "$READY_SECONDS"
printf '%-44s %s\n' "server log" "${LOAD_LINE:-no load line}"
printf '%-44s %s\n' "BF.CARD after restart" "$CARD_AFTER"
