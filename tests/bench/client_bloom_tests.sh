#!/usr/bin/env bash
# The client libraries' own Bloom-filter and Cuckoo-filter tests against
# bloomery and, beside it, against Redis with RedisBloom: redis-py's
# tests/test_bloom.py and tests/test_asyncio/test_bloom.py (the BF tests, -k bf,
# and the CF tests, -k cf, at the tag that matches Debian's python3-redis 4.3)
# and node-redis's packages/bloom BF specs (lib/commands/bloom) and CF specs
# (lib/commands/cuckoo), each over RESP3, as they are written, and over RESP2.
# Not a test of the suite: the clients' tests are theirs, run from a scratch
# directory and never copied into this repository. tests/bench/README.md
# ("Client libraries' Bloom tests") has the results.
#
# Usage: tests/bench/client_bloom_tests.sh REDIS_PY_GIT NODE_REDIS_GIT [HOST:PORT]
#   REDIS_PY_GIT     a clone of github.com/redis/redis-py (tag v4.3.4 is used)
#   NODE_REDIS_GIT   a clone of github.com/redis/node-redis (tag bloom@6.2.1)
#   HOST:PORT        Redis with RedisBloom to run the same tests against (optional),
#                    e.g. redis-server --port 7000 --loadmodule redisbloom.so
# Environment: BLOOMERY_BIN (default build/release/bloomery), SCRATCH (default a
# new directory under /tmp), REDIS_PY_TAG, NODE_REDIS_TAG.
# Needs /usr/bin/python3 with python3-redis, python3-pytest and
# python3-packaging (Debian; python3-pytest-asyncio for the asyncio tests too),
# node >= 20 and npm (npm install runs in SCRATCH).
set -euo pipefail
[ $# -ge 2 ] || { sed -n '2,21p' "$0"; exit 2; }
REDIS_PY_GIT=$1
NODE_REDIS_GIT=$2
REDISBLOOM=${3:-}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BLOOMERY_BIN=${BLOOMERY_BIN:-$ROOT/build/release/bloomery}
REDIS_PY_TAG=${REDIS_PY_TAG:-v4.3.4}
NODE_REDIS_TAG=${NODE_REDIS_TAG:-bloom@6.2.1}
SCRATCH=${SCRATCH:-$(mktemp -d /tmp/client-bloom-tests.XXXXXX)}
mkdir -p "$SCRATCH"

free_port() {
    /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# redis-py's tests, as they are at the tag.
rm -rf "$SCRATCH/redis-py" && mkdir -p "$SCRATCH/redis-py"
git -C "$REDIS_PY_GIT" archive "$REDIS_PY_TAG" tests | tar -x -C "$SCRATCH/redis-py"
# Its markers, declared so that pytest does not warn about each.
printf '[pytest]\nmarkers =\n    redismod\n    experimental\n    onlynoncluster\n' \
    >"$SCRATCH/redis-py/pytest.ini"

# node-redis's bloom package at the tag, with the published @redis/client of
# the same version; a stand-in for @redis/test-utils connects to $REDIS_URL
# instead of starting Redis in Docker.
NR=$SCRATCH/node-redis
if [ ! -d "$NR/node_modules/@redis/client" ]; then
    mkdir -p "$NR"
    (cd "$NR" && echo '{"name": "client-bloom-tests", "private": true}' >package.json &&
        npm install --no-audit --no-fund "@redis/client@${NODE_REDIS_TAG#bloom@}" mocha@10 tsx@4 \
            >npm.log 2>&1)
fi
rm -rf "$NR/bloom" && mkdir -p "$NR/bloom" "$NR/shim"
git -C "$NODE_REDIS_GIT" archive "$NODE_REDIS_TAG" packages/bloom | tar -x -C "$NR/bloom"
cat >"$NR/shim/test-utils.ts" <<'EOF'
// Stands in for @redis/test-utils: each test gets a client of $REDIS_URL,
// emptied with FLUSHALL first. NR_RESP=2 runs the specs over RESP2.
import { createClient } from '@redis/client';

export default class TestUtils {
  static createDefault() {
    return new TestUtils();
  }

  testWithClient(title: string, fn: (client: any) => Promise<unknown>, options: any) {
    it(title, async function () {
      const clientOptions = { ...(options?.clientOptions ?? {}) };
      if (process.env.NR_RESP) clientOptions.RESP = Number(process.env.NR_RESP);
      const client = createClient({ url: process.env.REDIS_URL, ...clientOptions });
      await client.connect();
      try {
        await client.flushAll();
        await fn(client);
      } finally {
        client.destroy();
      }
    });
  }
}
EOF
cat >"$NR/tsconfig.json" <<'EOF'
{
  "compilerOptions": {
    "target": "ES2022", "module": "commonjs", "moduleResolution": "node", "esModuleInterop": true,
    "baseUrl": ".",
    "paths": {
      "@redis/client/lib/*": ["node_modules/@redis/client/dist/lib/*"],
      "@redis/test-utils": ["shim/test-utils.ts"]
    }
  }
}
EOF

# run_all NAME HOST:PORT
run_all() {
    local name=$1 address=$2 family label file
    echo "== $name ($address)"
    for family in bf cf; do
        for file in tests/test_bloom.py tests/test_asyncio/test_bloom.py; do
            if [ "$file" = tests/test_asyncio/test_bloom.py ] &&
                ! /usr/bin/python3 -c 'import pytest_asyncio' 2>/dev/null; then
                continue
            fi
            echo "-- redis-py $REDIS_PY_TAG $file -k $family"
            (cd "$SCRATCH/redis-py" && /usr/bin/python3 -m pytest -p no:cacheprovider -q -rfEs \
                "$file" -k "$family" --redis-url="redis://$address/0" \
                --redismod-url="redis://$address") || true
        done
    done
    for family in bloom cuckoo; do
        [ $family = bloom ] && label=BF || label=CF
        for resp in 3 2; do
            echo "-- node-redis $NODE_REDIS_TAG packages/bloom $label specs ($family/*.spec.ts), RESP$resp"
            (cd "$NR" && NR_RESP=$resp REDIS_URL="redis://$address" npx mocha -r tsx --exit \
                "bloom/packages/bloom/lib/commands/$family/*.spec.ts" 2>&1 |
                grep -E '^ +[0-9]+ (passing|failing|pending)|^ +[0-9]+\) ') || true
        done
    done
}

PORT=$(free_port)
DATA=$(mktemp -d)
"$BLOOMERY_BIN" --bind 127.0.0.1 --port "$PORT" --dir "$DATA" --save "" >"$DATA/log" 2>&1 &
PID=$!
trap 'kill $PID 2>/dev/null || true; rm -rf "$DATA"' EXIT
for _ in $(seq 200); do redis-cli -p "$PORT" PING 2>/dev/null | grep -q PONG && break; sleep 0.05; done
run_all bloomery "127.0.0.1:$PORT"
[ -n "$REDISBLOOM" ] && run_all "Redis with RedisBloom" "$REDISBLOOM"
exit 0
