#!/usr/bin/env bash
# gzip against identity, side by side (BENCHMARKS.md, "gzip by default"):
# one server over one snapshot, pinned to CPU 0, wrk on CPU 1:
#
#   start    exec to /readyz 200 (fragments included when precompressing)
#   memory   RSS and VmHWM once ready, against the JSON's bytes
#   sizes    gzip bodies against whole-page `gzip -1` of the plain body, over
#            the first 100 pages of each list (every one checked to decode
#            to the plain body)
#   requests req/s, p50 and p99 (µs) of each list, plain then gzip, and
#            their ratio: RANDOM 50-task pages at random offsets over the
#            whole list, and COMPANY pages (the first two pages of 50 tasks
#            of the first 100 companies)
#
# Usage: scripts/gzip-bench.sh LABEL [server flags...]
#   scripts/gzip-bench.sh default                     # the defaults
#   scripts/gzip-bench.sh off --precompress off       # gzip per request
# Environment: BIN (default target/release/portfolio-replica), DATA (a
# directory holding one snapshot; default bench-data/gzip, where
# `generate --scale medium --seed 42` is written if empty; TEXT=escapes
# generates `--text escapes`), DURATION (s per wrk run, default 8), OUT
# (default $DATA/../gzip-bench-LABEL).
# Needs curl, jq, gzip, wrk, taskset. Run it under `flock /tmp/bench.lock`
# where others measure too; about 90 s a run.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh

LABEL=$1
shift
BIN=${BIN:-target/release/portfolio-replica}
DATA=${DATA:-bench-data/gzip}
DURATION=${DURATION:-8}
OUT=${OUT:-$DATA/../gzip-bench-$LABEL}
PORT=${PORT:-18680}
ADMIN=${ADMIN:-18690}
[ -x "$BIN" ] || cargo build --release --locked
mkdir -p "$DATA" "$OUT"
if [ -z "$(ls "$DATA")" ]; then
  $BIN generate --out "$DATA" --scale medium --seed 42 --text "${TEXT:-plain}" >"$DATA/../gzip-bench-keys.txt"
fi
KEY=${KEY:-$(sed -n 's/.*key \(cura_[0-9a-z_]*\).*/\1/p' "$DATA/../gzip-bench-keys.txt" | head -1)}
[ -n "$KEY" ] || { echo "no API key: set KEY" >&2; exit 1; }
AUTH="Authorization: Bearer $KEY"
API=http://127.0.0.1:$PORT

started=$(date +%s.%N)
taskset -c 0 "$BIN" --snapshots "$DATA" --listen "127.0.0.1:$PORT" --admin-listen "127.0.0.1:$ADMIN" "$@" 2>"$OUT/server.log" &
SERVER=$!
track "$SERVER"
wait_ready "$API/readyz" 600 "$SERVER"
READY=$(awk -v a="$started" -v b="$(date +%s.%N)" 'BEGIN {printf "%.2f", b - a}')
sleep 1
mib() { awk -v k="^$1" '$0 ~ k {printf "%d", $2 / 1024}' /proc/"$SERVER"/status; }
JSON=$(du -cb "$DATA"/*.json* | tail -1 | cut -f1)
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }
echo "== $LABEL ($*): ready ${READY} s; RSS $(mib VmRSS) MiB ($(ratio "$(($(mib VmRSS) << 20))" "$JSON")x the JSON)," \
  "VmHWM $(mib VmHWM) MiB ($(ratio "$(($(mib VmHWM) << 20))" "$JSON")x)"
grep -o 'records precompressed.*' "$OUT/server.log" | sed 's/^/   /' || true

TASKS=$(curl -sf "http://127.0.0.1:$ADMIN/snapshots" | jq '[.files[].records.tasks] | max')
awk -v n="$TASKS" 'BEGIN { srand(42); for (i = 0; i < 400; i++) printf "/tasks?limit=50&offset=%d\n", int(rand() * (n - 50)) }' >"$OUT/random.paths"
curl -sf -H "$AUTH" "$API/portfolio?limit=100" | jq -r '.data[].id' | while read -r company; do
  printf '/portfolio/%s/tasks?limit=50&offset=%d\n' "$company" 0 "$company" 50
done >"$OUT/company.paths"

# sizes LIST: plain, ours and gzip -1 bytes over its first 100 pages.
sizes() {
  local plain=0 ours=0 one=0 path
  while read -r path; do
    curl -sf -H "$AUTH" "$API$path" -o "$OUT/plain.body"
    curl -sf -H "$AUTH" -H 'Accept-Encoding: gzip' "$API$path" -o "$OUT/gzip.body"
    gzip -dc <"$OUT/gzip.body" | cmp -s - "$OUT/plain.body" || { echo "$path: gzip does not decode to plain" >&2; exit 1; }
    plain=$((plain + $(stat -c %s "$OUT/plain.body")))
    ours=$((ours + $(stat -c %s "$OUT/gzip.body")))
    one=$((one + $(gzip -1 -c <"$OUT/plain.body" | wc -c)))
  done < <(head -100 "$1")
  echo "plain $plain, gzip $ours, whole-page gzip -1 $one: $(ratio "$ours" "$one")x gzip -1"
}
cat >"$OUT/list.lua" <<'EOF'
local requests, n = {}, 0
init = function(args)
  local auth = wrk.headers["Authorization"]
  for path in io.lines(os.getenv("LIST")) do
    local h = {["Authorization"] = auth}
    if os.getenv("GZ") == "1" then h["Accept-Encoding"] = "gzip" end
    requests[#requests + 1] = wrk.format("GET", path, h)
  end
end
request = function() n = n % #requests + 1; return requests[n] end
done = function(summary, latency, requests)
  io.write(string.format("SUMMARY %.0f %d %d\n", summary.requests / (summary.duration / 1e6),
    latency:percentile(50), latency:percentile(99)))
end
EOF
# run LIST GZ: "req/s p50 p99" after a 2 s warm-up.
run() {
  LIST=$1 GZ=$2 taskset -c 1 wrk -t1 -c64 -d2s -H "$AUTH" -s "$OUT/list.lua" "$API/" >/dev/null
  LIST=$1 GZ=$2 taskset -c 1 wrk -t1 -c64 -d"${DURATION}s" --latency -H "$AUTH" -s "$OUT/list.lua" "$API/" |
    sed -n 's/^SUMMARY //p'
}
for list in random company; do
  echo "   $list sizes: $(sizes "$OUT/$list.paths")"
done
for list in random company; do
  read -r p_rps p_50 p_99 < <(run "$OUT/$list.paths" 0)
  read -r g_rps g_50 g_99 < <(run "$OUT/$list.paths" 1)
  echo "   $list: plain $p_rps req/s (p50 $p_50 µs, p99 $p_99 µs), gzip $g_rps req/s (p50 $g_50 µs, p99 $g_99 µs): gzip / plain $(ratio "$g_rps" "$p_rps")"
done
echo "   after the runs: RSS $(mib VmRSS) MiB, VmHWM $(mib VmHWM) MiB"
