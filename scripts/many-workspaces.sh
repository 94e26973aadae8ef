#!/usr/bin/env bash
# Many small workspaces in one replica (BENCHMARKS.md, "Many workspaces"):
# for each count N (default 500 2000 8000), N workspaces of about 100 KB
# (`generate --scale tiny --workspaces N`) against one file holding the
# same records (the N files merged into one workspace), side by side:
#
#   start    time from exec to /readyz 200, and the first scan's own figure
#   memory   RSS once ready, against the JSON's bytes; bytes per workspace
#            beyond what one file of the same records costs
#   requests (REQUESTS=1) a company's task page over random keys of the N
#            workspaces, against random companies of the one file: wrk,
#            64 connections, server on CPU 0 and wrk on CPU 1 (the start
#            itself has both cores)
#   reload   (RELOAD=1) one file renamed over with one record changed: time
#            until its new version serves; then 10% of the files at once
#
# Usage: scripts/many-workspaces.sh [N...]
# Environment: SCALE (tiny, or micro for ~10 KB), BIN (default
# target/release/portfolio-replica, built if missing), DATA (default
# bench-data/many), DURATION (s per wrk run, default 10), REQUESTS, RELOAD
# (1 to run those parts, default 1), SERVER_ARGS (flags for the server, e.g.
# "--precompress off").
# Needs curl, python3; wrk and taskset for the requests.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

SCALE=${SCALE:-tiny}
BIN=${BIN:-target/release/portfolio-replica}
DATA=${DATA:-bench-data/many}
DURATION=${DURATION:-10}
REQUESTS=${REQUESTS:-1}
RELOAD=${RELOAD:-1}
SERVER_ARGS=${SERVER_ARGS:-}
COUNTS=("$@")
[ ${#COUNTS[@]} -gt 0 ] || COUNTS=(500 2000 8000)
[ -x "$BIN" ] || cargo build --release --locked
WORK=$(mktemp -d)
SCRATCH_DIRS+=("$WORK")

# prepare N: the N files, and one file of the same records.
prepare() {
  local n=$1 many=$DATA/$SCALE-$1 one=$DATA/$SCALE-$1-one
  if [ ! -f "$many/keys.tsv" ]; then
    "$BIN" generate --out "$many" --scale "$SCALE" --workspaces "$n" >/dev/null
  fi
  if [ ! -f "$one/one.json" ]; then
    mkdir -p "$one"
    python3 - "$many" "$one/one.json" <<'PY'
import json, os, sys
many, out = sys.argv[1:3]
merged = None
for name in sorted(os.listdir(many)):
    if not name.endswith(".json"):
        continue
    snap = json.load(open(os.path.join(many, name)))
    if merged is None:
        merged = snap
        merged["workspace"] = {"id": "ws-one", "name": "All in one"}
        continue
    for key, value in snap.items():
        if isinstance(value, list) and key != "api_keys":
            merged[key].extend(value)
json.dump(merged, open(out, "w"), separators=(",", ":"))
PY
  fi
}

# start DIR [ARGS...]: serves DIR; sets SERVER_PID, ADDR, ADMIN_ADDR,
# READY_S (exec to /readyz 200, polled every 10 ms) and SCAN_MS.
start() {
  local dir=$1 log=$WORK/server.log t0 i
  shift
  t0=$(date +%s%N)
  "$BIN" --snapshots "$dir" --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 \
    --log-format json "$@" 2>"$log" &
  SERVER_PID=$!
  ADDR=
  for ((i = 0; i < 60000; i++)); do
    [ -n "$ADDR" ] || ADDR=$(server_addr "$log" api)
    if [ -n "$ADDR" ] && curl -fsS -o /dev/null "http://$ADDR/readyz" 2>/dev/null; then
      break
    fi
    kill -0 "$SERVER_PID" 2>/dev/null || { cat "$log" >&2; exit 1; }
    sleep 0.01
  done
  READY_S=$(awk -v a="$t0" -v b="$(date +%s%N)" 'BEGIN { printf "%.3f", (b - a) / 1e9 }')
  ADMIN_ADDR=$(server_addr "$log" admin)
  SCAN_MS=$(sed -n 's/.*"first scan finished".*"elapsed_ms":\([0-9]*\).*/\1/p' "$log" | head -1)
}

rss_kib() { awk '/VmRSS/ { print $2 }' "/proc/$SERVER_PID/status"; }

# wrk_rps LUA: requests per second of one wrk run on CPU 1, the server
# (every thread of it) moved to CPU 0 first.
wrk_rps() {
  taskset -a -p -c 0 "$SERVER_PID" >/dev/null
  taskset -c 1 wrk -t1 -c64 -d"${DURATION}s" -s "$1" "http://$ADDR" 2>/dev/null |
    awk '/^Requests\/sec/ { print $2 }'
}

# lua_pages OUT KEYS_AND_COMPANIES: a wrk script asking a random
# (key, company) pair's task page.
lua_pages() {
  python3 - "$@" <<'PY'
import json, sys
out, pairs = sys.argv[1], json.load(open(sys.argv[2]))
lines = ["local pairs = {"]
lines += ['  {"%s", "/portfolio/%s/tasks?limit=20"},' % (k, c) for k, c in pairs]
lines += ["}", "request = function()",
          "  local p = pairs[math.random(#pairs)]",
          '  return wrk.format("GET", p[2], {["Authorization"] = "Bearer " .. p[1]})',
          "end"]
open(out, "w").write("\n".join(lines) + "\n")
PY
}

printf '%-8s %-6s %9s %9s %10s %10s %8s\n' N set ready_s scan_ms rss_MiB json_MiB rss/json
for n in "${COUNTS[@]}"; do
  prepare "$n"
  many=$DATA/$SCALE-$n one=$DATA/$SCALE-$n-one
  python3 - "$many" "$WORK/pairs-many.json" "$WORK/pairs-one.json" "$one/one.json" <<'PY'
import json, os, sys
many, out_many, out_one, one = sys.argv[1:5]
keys = {}
for line in open(os.path.join(many, "keys.tsv")).read().splitlines()[1:]:
    workspace, name, key = line.split("\t")
    keys[name] = key
pairs = []
for name, key in sorted(keys.items()):
    snap = json.load(open(os.path.join(many, name)))
    pairs += [(key, c["id"]) for c in snap["companies"]]
json.dump(pairs, open(out_many, "w"))
first = sorted(keys.items())[0][1]
merged = json.load(open(one))
json.dump([(first, c["id"]) for c in merged["companies"]], open(out_one, "w"))
PY
  lua_pages "$WORK/many.lua" "$WORK/pairs-many.json"
  lua_pages "$WORK/one.lua" "$WORK/pairs-one.json"
  json_many=$(du -sb --exclude=keys.tsv "$many" | cut -f1)
  json_one=$(stat -c %s "$one/one.json")
  declare -A RPS=()
  for set in one many; do
    if [ "$set" = one ]; then dir=$one json=$json_one; else dir=$many json=$json_many; fi
    # shellcheck disable=SC2086 # SERVER_ARGS is a list of flags
    start "$dir" $SERVER_ARGS
    rss=$(rss_kib)
    printf '%-8s %-6s %9s %9s %10.1f %10.1f %8.3f\n' "$n" "$set" "$READY_S" "$SCAN_MS" \
      "$(echo "$rss / 1024" | bc -l)" "$(echo "$json / 1048576" | bc -l)" "$(echo "$rss * 1024 / $json" | bc -l)"
    eval "RSS_$set=$rss JSON_$set=$json"
    if [ "$REQUESTS" = 1 ]; then
      RPS[$set]=$(wrk_rps "$WORK/$set.lua")
    fi
    if [ "$RELOAD" = 1 ] && [ "$set" = many ]; then
      python3 - "$many" "$ADDR" "$ADMIN_ADDR" <<'PY'
import http.client, json, os, sys, time
many, addr, admin = sys.argv[1:4]
host, port = addr.rsplit(":", 1)
names = sorted(n for n in os.listdir(many) if n.endswith(".json"))
keys = dict(l.split("\t")[1:] for l in open(os.path.join(many, "keys.tsv")).read().splitlines()[1:])
def rewrite(name, version):
    path = os.path.join(many, name)
    snap = json.load(open(path))
    snap["version"] = version
    snap["tasks"][0]["attributes"]["title"] = "changed " + version
    tmp = path + ".tmp"
    json.dump(snap, open(tmp, "w"))
    return tmp, path
def serving(conn, name):
    conn.request("GET", "/portfolio", headers={"Authorization": "Bearer " + keys[name]})
    r = conn.getresponse(); r.read()
    return r.getheader("X-Snapshot-Version")
conn = http.client.HTTPConnection(host, int(port), timeout=10)
stamp = str(time.time_ns())
tmp, path = rewrite(names[0], "one-" + stamp)
t0 = time.monotonic(); os.rename(tmp, path)
while serving(conn, names[0]) != "one-" + stamp:
    time.sleep(0.002)
one = time.monotonic() - t0
burst = names[1:1 + max(1, len(names) // 10)]
staged = [rewrite(name, "burst-" + stamp) for name in burst]
t0 = time.monotonic()
for tmp, path in staged:
    os.rename(tmp, path)
pending = set(burst)
while pending:
    pending = {n for n in pending if serving(conn, n) != "burst-" + stamp}
    time.sleep(0.01)
print(f"         reload: one file served {one:.3f} s after its rename; {len(burst)} files (10%) all served after {time.monotonic() - t0:.3f} s")
PY
    fi
    stop "$SERVER_PID"
    SERVER_PID=
  done
  # shellcheck disable=SC2154 # set by eval above
  per=$(echo "($RSS_many - $RSS_one * $JSON_many / $JSON_one) * 1024 / $n" | bc)
  echo "         bytes a workspace costs beyond one file of the same records: $per"
  if [ "$REQUESTS" = 1 ]; then
    echo "         req/s: random keys of $n workspaces ${RPS[many]}, random companies of one file ${RPS[one]}, ratio $(echo "${RPS[many]} / ${RPS[one]}" | bc -l | cut -c1-5)"
  fi
done
