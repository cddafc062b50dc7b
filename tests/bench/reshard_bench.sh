#!/usr/bin/env bash
# Resharding with Redis Cluster's own tool: `redis-cli --cluster reshard`
# moves SLOTS slots holding FILTERS filters from one primary to another, on a
# three-node bloomery cluster (map given at start) and on a three-node Redis 7
# Cluster with RedisBloom, alternating round by round on the same machine.
# Prints, per round and server, the seconds the reshard took, filters/s and
# MB/s (the filters' DUMP bytes), then the medians and bloomery's ratio.
# Not a test.
#
#   tests/bench/reshard_bench.sh [ROUNDS] [FILTERS] [ITEMS_PER_FILTER] [SLOTS]
#
# REDISBLOOM_SO (default ../shared/anchors/redisbloom.so): without it only
# bloomery runs. Every server: --appendonly no --save "" on loopback.
# MAP=etcd: bloomery keeps its map in a 3-member etcd on loopback (started
# once, a cluster name per round) and is formed by `redis-cli --cluster
# create`, as Redis is; every SETSLOT of the reshard is then an etcd
# transaction. MAP=static (the default): the map given at start.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=${1:-3}
FILTERS=${2:-2000}
ITEMS=${3:-1000}
SLOTS=${4:-2000}
BIN=build/release/bloomery
[ -x "$BIN" ] || { echo "build first: make build" >&2; exit 1; }
MODULE=${REDISBLOOM_SO:-../shared/anchors/redisbloom.so}
[ -f "$MODULE" ] && MODULE=$(realpath "$MODULE") || MODULE=""

MAP=${MAP:-static}
DATA=$(mktemp -d)
PIDS=()
ETCD_PIDS=()
ENDPOINTS=""
trap 'for p in "${PIDS[@]}" "${ETCD_PIDS[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; rm -rf "$DATA"' EXIT
# A free port whose cluster bus port (+10000) fits too (Redis refuses one that does not).
free_port() {
    python3 -c '
import random, socket
while True:
    port = random.randrange(20000, 55000)
    try:
        for p in (port, port + 10000):
            s = socket.socket(); s.bind(("127.0.0.1", p)); s.close()
        print(port); break
    except OSError:
        pass'
}
wait_ping() {
    for _ in $(seq 200); do redis-cli -p "$1" ping >/dev/null 2>&1 && return; sleep 0.05; done
    echo "no server on $1" >&2; exit 1
}
stop_all() {  # the round's servers (etcd, if any, runs on)
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
    PIDS=()
}

start_bloomery() {  # ports...
    local map="0-5460=127.0.0.1:$1,5461-10922=127.0.0.1:$2,10923-16383=127.0.0.1:$3" port
    for port in "$@"; do
        mkdir -p "$DATA/b$port"
        "$BIN" --port "$port" --appendonly no --save "" --dir "$DATA/b$port" --loglevel warn \
            --cluster-enabled yes --cluster-slots "$map" --cluster-self "127.0.0.1:$port" \
            >"$DATA/b$port.log" 2>&1 &
        PIDS+=($!)
    done
    for port in "$@"; do wait_ping "$port"; done
}
start_etcd() {
    local i client peer initial="" clients=()
    for i in 0 1 2; do
        client=$(free_port); peer=$(free_port)
        clients+=("$client"); initial+="${initial:+,}m$i=http://127.0.0.1:$peer"
        PEERS[$i]=$peer
    done
    for i in 0 1 2; do
        etcd --name "m$i" --data-dir "$DATA/etcd$i" \
            --listen-client-urls "http://127.0.0.1:${clients[$i]}" \
            --advertise-client-urls "http://127.0.0.1:${clients[$i]}" \
            --listen-peer-urls "http://127.0.0.1:${PEERS[$i]}" \
            --initial-advertise-peer-urls "http://127.0.0.1:${PEERS[$i]}" \
            --initial-cluster "$initial" --initial-cluster-state new \
            --initial-cluster-token reshard-bench --heartbeat-interval 50 \
            --election-timeout 500 --log-level warn >"$DATA/etcd$i.log" 2>&1 &
        ETCD_PIDS+=($!)
        ENDPOINTS+="${ENDPOINTS:+,}http://127.0.0.1:${clients[$i]}"
    done
    for _ in $(seq 300); do
        ETCDCTL_API=3 etcdctl --endpoints "$ENDPOINTS" endpoint health >/dev/null 2>&1 && return
        sleep 0.1
    done
    echo "etcd did not start" >&2; exit 1
}
start_bloomery_etcd() {  # ports...
    local port name="reshard-$RANDOM-$RANDOM"
    for port in "$@"; do
        mkdir -p "$DATA/b$port"
        "$BIN" --port "$port" --appendonly no --save "" --dir "$DATA/b$port" --loglevel warn \
            --cluster-enabled yes --cluster-etcd "$ENDPOINTS" --cluster-name "$name" \
            >"$DATA/b$port.log" 2>&1 &
        PIDS+=($!)
    done
    for port in "$@"; do
        wait_ping "$port"
        for _ in $(seq 300); do
            redis-cli -p "$port" cluster nodes | grep -q 127.0.0.1 && break
            sleep 0.1
        done
    done
    form_cluster "$@"
}
form_cluster() {  # ports...
    local port
    redis-cli --cluster create "127.0.0.1:$1" "127.0.0.1:$2" "127.0.0.1:$3" --cluster-yes >/dev/null
    for port in "$@"; do
        for _ in $(seq 200); do
            redis-cli -p "$port" cluster info | grep -q "cluster_state:ok" && break
            sleep 0.1
        done
    done
}
start_redis() {  # ports...
    local port
    for port in "$@"; do
        mkdir -p "$DATA/r$port"
        (cd "$DATA/r$port" && redis-server --port "$port" --cluster-enabled yes --appendonly no \
            --save '' --loglevel warning --loadmodule "$MODULE" >"$DATA/r$port.log" 2>&1) &
        PIDS+=($!)
    done
    for port in "$@"; do wait_ping "$port"; done
    form_cluster "$@"
}

# Loads FILTERS filters into slots 0..SLOTS-1 (node 1's) and prints their DUMP bytes.
load() {  # port
    /usr/bin/python3 - "$1" "$FILTERS" "$ITEMS" "$SLOTS" <<'PY'
import sys
import redis
from redis.crc import key_slot
port, filters, items, slots = (int(x) for x in sys.argv[1:])
r = redis.Redis(port=port)
keys, i = [], 0
while len(keys) < filters:
    key = "f%d" % i
    if key_slot(key.encode()) < slots:
        keys.append(key)
    i += 1
total = 0
for key in keys:
    pipe = r.pipeline(transaction=False)
    pipe.execute_command("BF.RESERVE", key, 0.01, items)
    pipe.execute_command("BF.MADD", key, *["%s-%d" % (key, n) for n in range(items)])
    pipe.execute()
    total += len(r.dump(key))
print(total)
PY
}

reshard() {  # port from_id to_id -> seconds
    local start end
    start=$(date +%s.%N)
    redis-cli --cluster reshard "127.0.0.1:$1" --cluster-from "$2" --cluster-to "$3" \
        --cluster-slots "$SLOTS" --cluster-yes --cluster-pipeline 10 >/dev/null
    end=$(date +%s.%N)
    python3 -c "print(round($end - $start, 3))"
}

round() {  # kind
    local p1 p2 p3 bytes from to seconds
    p1=$(free_port); p2=$(free_port); p3=$(free_port)
    case "$1" in
        bloomery) start_bloomery "$p1" "$p2" "$p3" ;;
        bloomery-etcd) start_bloomery_etcd "$p1" "$p2" "$p3" ;;
        *) start_redis "$p1" "$p2" "$p3" ;;
    esac
    bytes=$(load "$p1")
    from=$(redis-cli -p "$p1" cluster myid)
    to=$(redis-cli -p "$p2" cluster myid)
    seconds=$(reshard "$p1" "$from" "$to")
    [ "$(redis-cli -p "$p2" dbsize)" = "$FILTERS" ] || { echo "$1: not every filter moved" >&2; exit 1; }
    stop_all
    python3 -c "print('$1', $seconds, round($FILTERS / $seconds, 1), round($bytes / 1e6 / $seconds, 2))"
}

KINDS="bloomery"
if [ "$MAP" = etcd ]; then
    declare -a PEERS
    start_etcd
    KINDS="bloomery-etcd"
fi
[ -n "$MODULE" ] && KINDS="$KINDS redisbloom"
echo "server seconds filters_per_s MB_per_s  ($FILTERS filters of $ITEMS items in $SLOTS slots)"
for r in $(seq "$ROUNDS"); do
    for kind in $KINDS; do round "$kind"; done
done >"$DATA/rows"
cat "$DATA/rows"
python3 - "$DATA/rows" <<'PY'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1]) if line.strip()]
med = {}
for kind in sorted({r[0] for r in rows}):
    mine = [r for r in rows if r[0] == kind]
    med[kind] = [statistics.median(float(r[i]) for r in mine) for i in (1, 2, 3)]
    print("median %-10s %7.2f s %9.1f filters/s %7.2f MB/s" % (kind, *med[kind]))
ours = "bloomery-etcd" if "bloomery-etcd" in med else "bloomery"
if "redisbloom" in med:
    print("%s / redisbloom filters/s: %.2fx" % (ours, med[ours][1] / med["redisbloom"][1]))
PY
