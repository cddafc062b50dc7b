#!/usr/bin/env bash
# Restart time with a journal: one filter of about 1 GiB snapshotted, then
# ADDS items journaled after the snapshot (BF.MADD batches of 100 through
# redis-cli --pipe), then kill -9 and time the start until PING answers (the
# snapshot load plus the replay). Prints the server's own load lines.
#
# Usage: tests/bench/restart_bench.sh [--adds N] [--capacity N] [--fsync always|everysec]
# Data goes to a temporary directory under BENCH_DIR (default $TMPDIR or /tmp).
set -euo pipefail
cd "$(dirname "$0")/../.."

ADDS=10000000
CAPACITY=860000000  # ~1 GiB of bits at 1 % (blocked layout)
FSYNC=everysec
while [ $# -gt 0 ]; do
    case "$1" in
        --adds) ADDS=$2; shift 2 ;;
        --capacity) CAPACITY=$2; shift 2 ;;
        --fsync) FSYNC=$2; shift 2 ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
BIN=${BLOOMERY_BIN:-build/release/bloomery}
WORK=$(mktemp -d "${BENCH_DIR:-${TMPDIR:-/tmp}}/restart-bench.XXXXXX")
PID=""
trap '[ -n "$PID" ] && kill -9 $PID 2>/dev/null; rm -rf "$WORK"' EXIT
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')

start() {
    "$BIN" --bind 127.0.0.1 --port "$PORT" --dir "$WORK" --save "" --appendfsync "$FSYNC" \
        --auto-aof-rewrite-percentage 0 >>"$WORK/log" 2>&1 &
    PID=$!
    local began
    began=$(date +%s.%N)
    for _ in $(seq 1 6000); do
        redis-cli -p "$PORT" PING 2>/dev/null | grep -q PONG && break
        sleep 0.01
    done
    python3 -c "import sys; print('%.2f' % (float(sys.argv[2]) - float(sys.argv[1])))" \
        "$began" "$(date +%s.%N)"
}

start >/dev/null
redis-cli -p "$PORT" BF.RESERVE big 0.01 "$CAPACITY" NONSCALING >/dev/null
redis-cli -p "$PORT" BF.INFO big SIZE
redis-cli -p "$PORT" SAVE >/dev/null
echo "snapshot: $(stat -c %s "$WORK/dump.bloomery") bytes"
python3 - "$ADDS" <<'EOF' | redis-cli -p "$PORT" --pipe | tail -1
import sys
n = int(sys.argv[1])
out = sys.stdout.buffer
for first in range(0, n, 100):
    items = [b"item:%d" % i for i in range(first, min(n, first + 100))]
    parts = [b"*%d\r\n$7\r\nBF.MADD\r\n$3\r\nbig\r\n" % (len(items) + 2)]
    parts += [b"$%d\r\n%s\r\n" % (len(x), x) for x in items]
    out.write(b"".join(parts))
EOF
sleep 2  # everysec: let the last second reach the disk
echo "journal: $(cat "$WORK"/journal.* | wc -c) bytes"
kill -9 "$PID"
wait "$PID" 2>/dev/null || true
echo "restart after kill -9: $(start) s until PING answers"
grep -E "loaded|replayed" "$WORK/log" | tail -2
redis-cli -p "$PORT" BF.MEXISTS big item:0 item:$((ADDS / 2)) item:$((ADDS - 1)) not-added | tr '\n' ' '
echo
