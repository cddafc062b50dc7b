#!/usr/bin/env bash
# Load benchmark: bloomery against redis-server on this machine with
# redis-benchmark, side by side. Not a test: it measures and reports.
#
# For each bloomery --threads count (the server is restarted per count) and
# each workload it runs ROUNDS rounds, alternating which server goes first so
# neither always runs on a warmer machine, and records per run: requests/s,
# server CPU per request (CPU time of the server process over the run /
# requests), and redis-benchmark's p50
# and p99 latency (its --csv columns); the CPU time comes from /proc (cpu_ns). Medians over rounds go to a markdown
# table (results.md), every run to results.csv, and ops/s and CPU per op by
# thread count to plot.png (python3-matplotlib).
#
# Workloads (redis-server has no Bloom filter without the RedisBloom module,
# so it runs the closest built-in command of the same shape):
#   ping        PING                                   | PING
#   add         BF.ADD hot <rand>                      | SET key:<rand> x
#   exists      BF.EXISTS hot <rand>                   | GET key:<rand>
#   madd        BF.MADD hot <100 rand>                 | MSET <100 key:<rand> x pairs>
#   mexists     BF.MEXISTS hot <100 rand>              | MGET <100 key:<rand>>
#   keys-add    BF.ADD k:<rand> x (creates filters)    | SADD k:<rand> x (creates sets)
#   keys-exists BF.EXISTS k:<rand> x                   | SISMEMBER k:<rand> x
# `hot` is one filter, BF.RESERVE hot 0.01 HOT_CAPACITY NONSCALING (by default
# 100 M, 120 MB), made once per server start and warmed (WARM_ITEMS random
# items, untimed, so that every page of it is mapped: a fresh filter's first
# touches are page faults, which cost more than the adds, see README.md "Sizing"); the
# adds of all rounds go to it (keep rounds × requests × 6 below its capacity). <rand> is redis-benchmark's __rand_int__ (each
# occurrence drawn anew) over -r RANGE; the keys-* cases draw keys from KEYS
# and start from an empty server (FLUSHALL) before keys-add, so keys-add
# creates about KEYS·(1 − e^(−n/KEYS)) filters and adds to the rest.
#
# /usr/bin/python3 (Debian's, with python3-matplotlib) summarizes and plots.
#
# Usage: tests/bench/load_bench.sh [options]
#   --threads "1 2"       bloomery --threads values to sweep (default "1 2")
#   --rounds N            rounds per workload and server (default 3)
#   --requests N          requests per run of single-item workloads (default 100000);
#                         batch workloads run N / 20 commands of BATCH items
#   --batch N             items per BF.MADD / BF.MEXISTS (default 100)
#   -c N, -P N            redis-benchmark clients and pipeline depth (default 50, 16)
#   --bench-threads N     redis-benchmark --threads (default 0: its single thread)
#   --range N             -r for the hot-filter workloads (default 100000000; at most
#                         2147483647: redis-benchmark reads an int, and past it sends
#                         the literal __rand_int__, one item over and over)
#   --keys N              key range of the keys-* workloads (default 100000)
#   --hot-capacity N      capacity of the hot filter (default 100000000)
#   --warm-items N        items added to it before measuring (default capacity / 1000:
#                         7 bits each, about 24 per 4 KiB page, so every page is touched)
#   --server-cpus LIST    taskset -c LIST for both servers (e.g. 0-7)
#   --client-cpus LIST    taskset -c LIST for redis-benchmark (e.g. 8-15)
#   --cases "LIST"        subset of the workloads above (default: all)
#   --no-redis            bloomery only
#   --server-args "ARGS"  more bloomery flags (e.g. "--appendonly no")
#   --out DIR             results directory (default build/bench-results/load-<UTC time>)
# Environment: BLOOMERY_BIN (default build/release/bloomery, else build/bench/bloomery),
# PYTHON (default /usr/bin/python3) for the summary and plot.
# Needs redis-server, redis-tools, python3-matplotlib (make bench installs them).
#
# On a 16-core machine:
#   tests/bench/load_bench.sh --threads "1 2 4 8" --server-cpus 0-7 --client-cpus 8-15 \
#       --bench-threads 8 -c 256 -P 16 --requests 2000000 --keys 1000000
set -euo pipefail
cd "$(dirname "$0")/../.."

THREADS="1 2"
ROUNDS=3
REQUESTS=100000
BATCH=100
CLIENTS=50
PIPELINE=16
BENCH_THREADS=0
RANGE=100000000
KEYS=100000
HOT_CAPACITY=100000000
WARM_ITEMS=""
SERVER_CPUS=""
CLIENT_CPUS=""
CASES="ping add exists madd mexists keys-add keys-exists"
WITH_REDIS=1
SERVER_ARGS=""
OUT=""
while (($#)); do
    case $1 in
        --threads) THREADS=$2; shift ;;
        --rounds) ROUNDS=$2; shift ;;
        --requests) REQUESTS=$2; shift ;;
        --batch) BATCH=$2; shift ;;
        -c) CLIENTS=$2; shift ;;
        -P) PIPELINE=$2; shift ;;
        --bench-threads) BENCH_THREADS=$2; shift ;;
        --range) RANGE=$2; shift ;;
        --keys) KEYS=$2; shift ;;
        --hot-capacity) HOT_CAPACITY=$2; shift ;;
        --warm-items) WARM_ITEMS=$2; shift ;;
        --server-cpus) SERVER_CPUS=$2; shift ;;
        --client-cpus) CLIENT_CPUS=$2; shift ;;
        --cases) CASES=$2; shift ;;
        --no-redis) WITH_REDIS=0 ;;
        --server-args) SERVER_ARGS=$2; shift ;;
        --out) OUT=$2; shift ;;
        -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "unknown option: $1 (--help)" >&2; exit 2 ;;
    esac
    shift
done

((RANGE <= 2147483647 && KEYS <= 2147483647)) ||
    { echo "--range and --keys must be at most 2147483647 (redis-benchmark's -r is an int)" >&2; exit 2; }
WARM_ITEMS=${WARM_ITEMS:-$((HOT_CAPACITY / 1000))}
# The release server: make build's, else make bench's (the same flags).
BIN=${BLOOMERY_BIN:-build/release/bloomery}
[ -n "${BLOOMERY_BIN:-}" ] || [ -x "$BIN" ] || BIN=build/bench/bloomery
[ -x "$BIN" ] || { echo "build first (make build or make bench), or set BLOOMERY_BIN" >&2; exit 1; }
command -v redis-benchmark >/dev/null || { echo "needs redis-benchmark (redis-tools)" >&2; exit 1; }
if ((WITH_REDIS)); then
    command -v redis-server >/dev/null || { echo "needs redis-server (or --no-redis)" >&2; exit 1; }
fi
OUT=${OUT:-build/bench-results/load-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT"
CSV=$OUT/results.csv
echo "server,threads,case,round,requests,items,rps,cpu_us_per_op,p50_ms,p99_ms" >"$CSV"
TICKS=$(getconf CLK_TCK)
SERVER_PIN=(); CLIENT_PIN=()
[ -n "$SERVER_CPUS" ] && SERVER_PIN=(taskset -c "$SERVER_CPUS")
[ -n "$CLIENT_CPUS" ] && CLIENT_PIN=(taskset -c "$CLIENT_CPUS")
BENCH_OPTS=(-c "$CLIENTS" -P "$PIPELINE")
((BENCH_THREADS > 0)) && BENCH_OPTS+=(--threads "$BENCH_THREADS")

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
DATA=$(mktemp -d)
RPID=""; BPID=""
stop() {  # pid: stops a server this script started
    [ -n "$1" ] || return 0
    kill "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true
}
trap 'stop "$BPID"; stop "$RPID"; rm -rf "$DATA"' EXIT
wait_ready() {  # port
    for _ in $(seq 200); do redis-cli -p "$1" ping >/dev/null 2>&1 && return 0; sleep 0.05; done
    echo "server on port $1 did not start" >&2; exit 1
}
start_bloomery() {  # threads
    BP=$(free_port)
    "${SERVER_PIN[@]}" "$BIN" --bind 127.0.0.1 --port "$BP" --save "" --dir "$DATA/bloomery" \
        --loglevel warn --threads "$1" $SERVER_ARGS &
    BPID=$!
    wait_ready "$BP"
}
start_redis() {
    RP=$(free_port)
    "${SERVER_PIN[@]}" redis-server --port "$RP" --bind 127.0.0.1 --save "" --appendonly no \
        --dir "$DATA" >/dev/null 2>&1 &
    RPID=$!
    wait_ready "$RP"
}

# Server CPU time in ns: the sum over its threads of the time on a CPU from
# /proc/<pid>/task/*/schedstat (ns resolution; the servers' threads live as
# long as they do), or utime + stime from /proc/<pid>/stat (clock ticks,
# 10 ms) where the kernel has no schedstat.
cpu_ns() {
    if [ -r "/proc/$1/schedstat" ]; then
        cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{n += $1} END {printf "%.0f\n", n}'
    else
        awk -v hz="$TICKS" '{printf "%.0f\n", ($14 + $15) * 1e9 / hz}' "/proc/$1/stat"
    fi
}

# Words of one command with N random items, e.g. rand_items 3 'x:' -> x:__rand_int__ ×3.
rand_items() {
    local n=$1 prefix=$2 suffix=${3:-} i out=""
    for ((i = 0; i < n; i++)); do out+=" ${prefix}__rand_int__${suffix}"; done
    echo "$out"
}
MADD_ITEMS=$(rand_items "$BATCH" "")
MSET_PAIRS=$(rand_items "$BATCH" "key:" " x")
MGET_KEYS=$(rand_items "$BATCH" "key:")

# Sets: REQ (commands), ITEMS (items per command), RANGE_OPT, CMD (words) for
# a case and server; returns 1 for PING's built-in test.
case_args() {  # server case
    local server=$1 name=$2
    ITEMS=1; REQ=$REQUESTS; RANGE_OPT=(-r "$RANGE")
    case $name in
        ping) CMD=(-t ping_mbulk); RANGE_OPT=() ;;
        add) [ "$server" = redis ] && CMD=(SET key:__rand_int__ x) || CMD=(BF.ADD hot __rand_int__) ;;
        exists) [ "$server" = redis ] && CMD=(GET key:__rand_int__) || CMD=(BF.EXISTS hot __rand_int__) ;;
        madd | mexists)
            ITEMS=$BATCH; REQ=$((REQUESTS / 20))
            # shellcheck disable=SC2206  # word splitting of the item lists is the point
            case $server-$name in
                redis-madd) CMD=(MSET $MSET_PAIRS) ;;
                redis-mexists) CMD=(MGET $MGET_KEYS) ;;
                bloomery-madd) CMD=(BF.MADD hot $MADD_ITEMS) ;;
                bloomery-mexists) CMD=(BF.MEXISTS hot $MADD_ITEMS) ;;
            esac ;;
        keys-add) RANGE_OPT=(-r "$KEYS")
            [ "$server" = redis ] && CMD=(SADD k:__rand_int__ x) || CMD=(BF.ADD k:__rand_int__ x) ;;
        keys-exists) RANGE_OPT=(-r "$KEYS")
            [ "$server" = redis ] && CMD=(SISMEMBER k:__rand_int__ x) || CMD=(BF.EXISTS k:__rand_int__ x) ;;
        *) echo "unknown case $name" >&2; exit 2 ;;
    esac
}

# keys-add starts from an empty server every round, so that it creates keys.
prepare() {  # server case port
    if [ "$2" = keys-add ]; then redis-cli -p "$3" FLUSHALL >/dev/null; fi
}

# One redis-benchmark run against a server; appends a CSV row, prints
# "rps cpu_us_per_op p50 p99".
measure() {  # server threads case round port pid
    local server=$1 threads=$2 name=$3 round=$4 port=$5 pid=$6 before after csv
    case_args "$server" "$name"
    prepare "$server" "$name" "$port"
    before=$(cpu_ns "$pid")
    csv=$("${CLIENT_PIN[@]}" redis-benchmark -p "$port" "${BENCH_OPTS[@]}" -n "$REQ" \
        "${RANGE_OPT[@]}" --csv "${CMD[@]}" 2>/dev/null | tr -d '\r' | grep -v '^"test"' | tail -1)
    after=$(cpu_ns "$pid")
    # "test","rps","avg","min","p50","p95","p99","max"
    awk -F'","' -v s="$server" -v t="$threads" -v c="$name" -v r="$round" -v n="$REQ" \
        -v items="$ITEMS" -v ns=$((after - before)) -v csv="$CSV" '
        { gsub(/"/, "", $0); split($0, f, ",");
          cpu = ns / n / 1000;
          printf "%s,%s,%s,%s,%d,%d,%.0f,%.3f,%s,%s\n", s, t, c, r, n, items, f[2], cpu, f[5], f[7] >> csv;
          printf "%.0f %.3f %s %s\n", f[2], cpu, f[5], f[7] }' <<<"$csv"
}

report_line() {  # label values
    printf '%-12s %-9s %-7s round %s: %10.0f req/s  %8.3f us CPU/req  p50 %6s ms  p99 %6s ms\n' "$@"
}

machine="$(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "load_bench: $(date -u '+%Y-%m-%d %H:%M UTC'), $machine; results in $OUT"
((WITH_REDIS)) && start_redis
for threads in $THREADS; do
    start_bloomery "$threads"
    redis-cli -p "$BP" BF.RESERVE hot 0.01 "$HOT_CAPACITY" NONSCALING >/dev/null
    # shellcheck disable=SC2086  # the item list
    redis-benchmark -p "$BP" -c "$CLIENTS" -P "$PIPELINE" -r "$RANGE" -n $((WARM_ITEMS / BATCH)) \
        BF.MADD hot $MADD_ITEMS >/dev/null 2>&1
    for name in $CASES; do
        for round in $(seq "$ROUNDS"); do
            # Alternate the order so neither server always runs second.
            if ((WITH_REDIS && round % 2)); then
                read -r rps cpu p50 p99 < <(measure redis 1 "$name" "$round" "$RP" "$RPID")
                report_line "$name" redis 1 "$round" "$rps" "$cpu" "$p50" "$p99"
            fi
            read -r rps cpu p50 p99 < <(measure bloomery "$threads" "$name" "$round" "$BP" "$BPID")
            report_line "$name" bloomery "$threads" "$round" "$rps" "$cpu" "$p50" "$p99"
            if ((WITH_REDIS && !(round % 2))); then
                read -r rps cpu p50 p99 < <(measure redis 1 "$name" "$round" "$RP" "$RPID")
                report_line "$name" redis 1 "$round" "$rps" "$cpu" "$p50" "$p99"
            fi
        done
    done
    stop "$BPID"; BPID=""
done

# Medians, the markdown table and the plot.
${PYTHON:-/usr/bin/python3} - "$OUT" "$machine" "$ROUNDS" "$REQUESTS" "$BATCH" "$CLIENTS" "$PIPELINE" \
    "$BENCH_THREADS" "$RANGE" "$KEYS" "$HOT_CAPACITY" "$SERVER_CPUS" "$CLIENT_CPUS" "$SERVER_ARGS" <<'EOF'
import csv, statistics, sys, time
out, machine, rounds, requests, batch, clients, pipeline, bthreads, rng, keys, hot, scpu, ccpu, sargs = sys.argv[1:]
rows = list(csv.DictReader(open(f"{out}/results.csv")))
cases = list(dict.fromkeys(r["case"] for r in rows))
groups = {}
for r in rows:
    groups.setdefault((r["case"], r["server"], int(r["threads"])), []).append(r)
def med(rs, field):
    return statistics.median(float(r[field]) for r in rs)
redis = {}  # case -> redis runs (redis runs once per bloomery thread count)
for (c, s, _), rs in groups.items():
    if s == "redis":
        redis.setdefault(c, []).extend(rs)
redis_rps = {c: med(rs, "rps") for c, rs in redis.items()}
lines = [f"Load benchmark, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {machine}.",
         "",
         f"redis-benchmark -c {clients} -P {pipeline}" + (f" --threads {bthreads}" if bthreads != "0" else "")
         + f", {requests} requests per run ({int(requests) // 20} for batches of {batch}), "
         f"median of {rounds} rounds; hot filter: BF.RESERVE hot 0.01 {hot} NONSCALING, -r {rng}; "
         f"keys-*: -r {keys}." + (f" Servers on CPUs {scpu}, load generator on {ccpu}." if scpu or ccpu else "")
         + (f" bloomery flags: `{sargs}`." if sargs else ""),
         "CPU/op: server user+system CPU per command (per item in brackets for batches). "
         "redis runs the closest built-in command (script header).",
         "",
         "| case | server | threads | ops/s | items/s | CPU µs/op | p50 ms | p99 ms | ops/s vs redis |",
         "|---|---|---|---|---|---|---|---|---|"]
for c in cases:
    entries = [(("redis", 1), redis[c])] if c in redis else []
    entries += sorted(((s, t), rs) for (cc, s, t), rs in groups.items() if cc == c and s == "bloomery")
    for (s, t), rs in entries:
        rps, cpu = med(rs, "rps"), med(rs, "cpu_us_per_op")
        items = int(rs[0]["items"])
        cpu_text = f"{cpu:.2f}" + (f" ({cpu / items * 1000:.0f} ns)" if items > 1 else "")
        ratio = f"{rps / redis_rps[c]:.2f}×" if s == "bloomery" and c in redis_rps else ""
        lines.append(f"| {c} | {s} | {t} | {rps:,.0f} | {rps * items:,.0f} | {cpu_text} | "
                     f"{med(rs, 'p50_ms'):.3f} | {med(rs, 'p99_ms'):.3f} | {ratio} |")
open(f"{out}/results.md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))

try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    print("no matplotlib (apt-get install python3-matplotlib): no plot")
    sys.exit(0)
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
for i, c in enumerate(cases):
    color = f"C{i}"
    pts = sorted((t, med(rs, "rps"), med(rs, "cpu_us_per_op"))
                 for (cc, s, t), rs in groups.items() if cc == c and s == "bloomery")
    if not pts:
        continue
    xs = [p[0] for p in pts]
    ax1.plot(xs, [p[1] for p in pts], "o-", color=color, label=f"bloomery {c}")
    ax2.plot(xs, [p[2] for p in pts], "o-", color=color, label=f"bloomery {c}")
    if c in redis:
        ax1.axhline(med(redis[c], "rps"), color=color, linestyle=":", linewidth=1)
        ax2.axhline(med(redis[c], "cpu_us_per_op"), color=color, linestyle=":", linewidth=1)
for ax, title in ((ax1, "commands/s"), (ax2, "server CPU µs per command")):
    ax.set_xlabel("bloomery --threads")
    ax.set_title(title)
    ax.set_xticks(sorted({t for (_, s, t) in groups if s == "bloomery"}))
    ax.set_yscale("log")
    ax.grid(True, which="both", alpha=0.3)
ax1.legend(fontsize=7)
fig.suptitle(f"bloomery load benchmark (dotted: redis-server, closest built-in command) — {machine}",
             fontsize=9)
fig.tight_layout()
fig.savefig(f"{out}/plot.png", dpi=110)
print(f"plot: {out}/plot.png")
EOF
