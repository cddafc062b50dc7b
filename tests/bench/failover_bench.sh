#!/usr/bin/env bash
# Failover of a killed primary: a six-node cluster (3 primaries, 3 replicas,
# --cluster-node-timeout 2000, --appendonly yes) of bloomery with its map in
# a 3-member etcd on loopback (--heartbeat-interval 50 --election-timeout
# 500), then Redis 7 Cluster with RedisBloom, formed by `redis-cli --cluster
# create --cluster-replicas 1`. A writer adds unique items (BF.ADD, then
# WAIT 1 on the same connection; an item is acknowledged when WAIT answers 1)
# while ROUNDS times a random primary is killed with SIGKILL: the seconds from
# the kill until a BF.ADD to one of its slots answers (polled every 20 ms on
# the owners the survivors' CLUSTER SLOTS name), then the node is restarted
# on its data and waited for as a replica with its link up and the cluster ok
# everywhere; before each kill the writer gets 500 more adds acknowledged
# (BETWEEN), so writes are in flight when it comes. At the end every
# acknowledged item is looked up (BF.EXISTS).
# Prints per round and system the failover seconds, then p50 / p99 / min /
# max, bloomery's ratio to Redis and the acknowledged items lost. Not a test.
#
#   tests/bench/failover_bench.sh [ROUNDS]
#
# ROUNDS defaults to 20. Environment: BLOOMERY_BIN (default
# build/release/bloomery), REDISBLOOM_SO (default
# ../shared/anchors/redisbloom.so; without it only bloomery runs), SEED
# (default 1, the choice of victims), BETWEEN (default 500), REPLICAS (per
# primary: 1 by default, six nodes; 2 makes nine, and each round also waits
# for the victim's other replica to follow the new primary), KEEP_LOGS (a
# directory to copy the servers' and etcd's logs into). Needs /usr/bin/etcd,
# redis-server, redis-cli and Debian's python3-redis (/usr/bin/python3).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=${1:-20}
BIN=${BLOOMERY_BIN:-build/release/bloomery}
[ -x "$BIN" ] || { echo "build first (make build), or set BLOOMERY_BIN" >&2; exit 1; }
BIN=$(realpath "$BIN")
unset BLOOMERY_BIN  # the servers warn of a BLOOMERY_ variable that is not a setting
MODULE=${REDISBLOOM_SO:-../shared/anchors/redisbloom.so}
[ -f "$MODULE" ] && MODULE=$(realpath "$MODULE") || MODULE=""
PY=/usr/bin/python3
command -v etcd >/dev/null || { echo "needs etcd (apt-get install etcd-server)" >&2; exit 1; }

DATA=$(mktemp -d)
keep_logs() {
    [ -n "${KEEP_LOGS:-}" ] || return 0
    local d
    for d in "$DATA"/*/; do
        mkdir -p "$KEEP_LOGS/$(basename "$d")"
        cp "$d"*.log "$KEEP_LOGS/$(basename "$d")/" 2>/dev/null || true
    done
}
trap 'keep_logs; rm -rf "$DATA"' EXIT

KINDS="bloomery"
[ -n "$MODULE" ] && KINDS="bloomery redisbloom"
for kind in $KINDS; do
    mkdir -p "$DATA/$kind"
    # The helper starts, kills and stops every process by pid.
    "$PY" tests/bench/failover_bench.py "$kind" --rounds "$ROUNDS" --dir "$DATA/$kind" \
        --bloomery "$BIN" --module "$MODULE" --seed "${SEED:-1}" --between "${BETWEEN:-500}" \
        --replicas "${REPLICAS:-1}" 2>&1 | tee "$DATA/$kind.out" ||
        echo "$kind: the run stopped early (above)"
done
grep -h '^result ' "$DATA"/*.out >"$DATA/results" || true
"$PY" - "$DATA/results" <<'PY'
import sys
rows = {}
for line in open(sys.argv[1]):
    _, kind, ok, acked, lost, times = (line.split() + [""])[:6]
    rows[kind] = (int(ok), int(acked), int(lost), sorted(float(t) for t in times.split(",") if t))
def pct(values, p):  # nearest rank
    return values[max(0, -(-len(values) * p // 100) - 1)]
print("%-10s %6s %7s %7s %7s %7s %9s %5s" % ("system", "kills", "p50 s", "p99 s", "min s", "max s", "acked", "lost"))
stats = {}
for kind, (ok, acked, lost, t) in rows.items():
    if not t:
        print("%-10s %6d no failover measured %9d %5d" % (kind, ok, acked, lost)); continue
    stats[kind] = (pct(t, 50), pct(t, 99))
    print("%-10s %6d %7.3f %7.3f %7.3f %7.3f %9d %5d" % (kind, ok, *stats[kind], t[0], t[-1], acked, lost))
if "bloomery" in stats and "redisbloom" in stats:
    print("bloomery / redis failover time: p50 %.2fx, p99 %.2fx" % (
        stats["bloomery"][0] / stats["redisbloom"][0], stats["bloomery"][1] / stats["redisbloom"][1]))
PY
