#!/usr/bin/env bash
# What a cold workspace's first request costs under a memory budget (issue
# 28), and that concurrent first requests share one load:
#
#   small   the first request of SAMPLES workspaces of about 100 KB (the
#           budget-bench data, `generate --scale tiny`), each never asked
#           for before: p50, p99, max of curl's time_total
#   large   workspaces of about 10, 50 and 100 MB (the generator's `medium`,
#           and two slices of it: every company and meeting, a share of
#           every other collection), served under a budget smaller than any
#           of them, so that each is held alone and the next one evicts it:
#           asked in turn ROUNDS times, every request a cold one
#   shared  CONCURRENT (default 256) first requests at once for the 50 MB
#           workspace on a replica just started: how many loads the
#           metrics count (one is the target), and whether every answer is
#           a 200 with the same body
#
# Usage: scripts/cold-bench.sh
# Environment: BIN (default target/release/portfolio-replica, built if
# missing), DATA (default bench-data/cold), SMALL_DATA (the 100 KB
# workspaces, default bench-data/budget, made by scripts/budget-bench.sh;
# that part is skipped without it), SAMPLES (default 200), ROUNDS (default
# 5), CONCURRENT (default 256), SERVER_ARGS (flags for every replica).
# Needs curl, python3. Loopback only; every process started is stopped by
# its PID at exit.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh

BIN=${BIN:-target/release/portfolio-replica}
DATA=${DATA:-bench-data/cold}
SMALL_DATA=${SMALL_DATA:-bench-data/budget}
SAMPLES=${SAMPLES:-200}
ROUNDS=${ROUNDS:-5}
CONCURRENT=${CONCURRENT:-256}
SERVER_ARGS=${SERVER_ARGS:-}
[ -x "$BIN" ] || build_release
WORK=$(mktemp -d)
SCRATCH_DIRS+=("$WORK")

# The large workspaces: medium, and two slices of it with their own ids
# and keys (printed to keys.tsv: workspace, key).
if [ ! -f "$DATA/keys.tsv" ]; then
  mkdir -p "$DATA"
  "$BIN" generate --scale medium --out "$WORK/medium" >/dev/null
  python3 - "$WORK/medium/medium.json" "$DATA" <<'PY'
import hashlib, json, sys
source, out = sys.argv[1], sys.argv[2]
full = json.load(open(source))
keep_whole = {"companies", "meetings"}
rows = []
for name, share in (("mb10", 0.09), ("mb50", 0.47), ("mb100", 1.0)):
    snap = dict(full)
    for collection, value in full.items():
        if isinstance(value, list) and collection not in keep_whole and collection != "api_keys":
            snap[collection] = value[: int(len(value) * share)]
    key = "cura_cold_" + name
    snap["workspace"] = {"id": "ws-" + name, "name": name}
    snap["api_keys"] = [{"sha256": hashlib.sha256(key.encode()).hexdigest(), "label": "bench"}]
    snap["version"] = "cold-" + name
    path = f"{out}/{name}.json"
    with open(path, "w") as f:
        json.dump(snap, f, ensure_ascii=False, separators=(",", ":"))
    rows.append((name, key))
with open(f"{out}/keys.tsv", "w") as f:
    f.writelines(f"{name}\t{key}\n" for name, key in rows)
PY
fi
for f in "$DATA"/*.json; do printf "  %s %.1f MB\n" "$f" "$(($(stat -c %s "$f") / 100000))e-1"; done

# Starts a replica over $1 with the flags after it; sets ADDR, ADMIN, PID.
start() {
  local dir=$1
  shift
  # shellcheck disable=SC2086
  "$BIN" --snapshots "$dir" --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 \
    --log-format json "$@" $SERVER_ARGS >"$WORK/server.log" 2>&1 &
  PID=$!
  track "$PID"
  wait_for_server replica "$WORK/server.log" 600 "$PID"
  ADMIN=$ADMIN_ADDR
}

metric() { curl -s "http://$ADMIN/metrics" | awk -v s="$1" '$1 == s { print $2 }'; }

# p50, p99 and max of the numbers on stdin, in ms.
quantiles() {
  python3 -c '
import sys
v = sorted(float(x) * 1000 for x in sys.stdin.read().split())
q = lambda p: v[min(len(v) - 1, int(p * len(v)))]
print(f"n={len(v)} p50={q(0.5):.2f} ms p99={q(0.99):.2f} ms max={v[-1]:.2f} ms")'
}

first_request() { # key, path
  curl -s -o /dev/null -w '%{time_total}\n' -H "Authorization: Bearer $1" "http://$ADDR$2"
}

echo "== small: first requests of ${SAMPLES} workspaces of about 100 KB (--memory-budget 256MiB)"
if [ -f "$SMALL_DATA/keys.tsv" ]; then
  start "$SMALL_DATA" --memory-budget 256MiB
  awk -F'\t' 'NR > 1 { print $3 }' "$SMALL_DATA/keys.tsv" | shuf -n "$SAMPLES" --random-source=<(yes) \
    | while read -r key; do first_request "$key" "/tasks?limit=50"; done | quantiles
  echo "   loads on demand: $(metric 'portfolio_replica_demand_loads_total{outcome="ok"}')"
  stop "$PID"
else
  echo "   (skipped: no $SMALL_DATA/keys.tsv; scripts/budget-bench.sh makes it)"
fi

echo "== large: each held alone under an 8 MiB budget, asked in turn, ${ROUNDS} rounds"
start "$DATA" --memory-budget 8MiB
for _ in $(seq "$ROUNDS"); do
  while IFS=$'\t' read -r name key; do
    printf '%s %s\n' "$name" "$(first_request "$key" "/tasks?limit=50")"
  done <"$DATA/keys.tsv"
done >"$WORK/large.txt"
for name in mb10 mb50 mb100; do
  printf '   %-6s ' "$name"
  awk -v n="$name" '$1 == n { print $2 }' "$WORK/large.txt" | quantiles
done
echo "   loads on demand: $(metric 'portfolio_replica_demand_loads_total{outcome="ok"}') for $((ROUNDS * 3)) requests"
stop "$PID"

echo "== shared: ${CONCURRENT} first requests at once for the 50 MB workspace (--memory-budget 256MiB)"
start "$DATA" --memory-budget 256MiB
python3 - "$ADDR" cura_cold_mb50 "$CONCURRENT" <<'PY'
import hashlib, http.client, sys, threading, time
addr, key, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
host, port = addr.rsplit(":", 1)
barrier = threading.Barrier(n)
results = [None] * n
def one(i):
    conn = http.client.HTTPConnection(host, int(port), timeout=60)
    conn.connect()
    barrier.wait()
    started = time.monotonic()
    conn.request("GET", "/tasks?limit=100", headers={"Authorization": f"Bearer {key}"})
    resp = conn.getresponse()
    body = resp.read()
    results[i] = (resp.status, hashlib.sha256(body).hexdigest(), time.monotonic() - started)
threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
for t in threads: t.start()
for t in threads: t.join()
statuses = {r[0] for r in results}
bodies = {r[1] for r in results}
times = sorted(r[2] for r in results)
print(f"   statuses {sorted(statuses)}, distinct bodies {len(bodies)}, "
      f"slowest {times[-1] * 1000:.0f} ms, fastest {times[0] * 1000:.0f} ms")
PY
echo "   loads on demand: $(metric 'portfolio_replica_demand_loads_total{outcome="ok"}') (misses $(metric 'portfolio_replica_resident_lookups_total{result="miss"}'))"
stop "$PID"
