#!/usr/bin/env bash
# Hot reload under load, measured: reload time of the `large` snapshot, peak
# RSS during reloads as a multiple of the file size, p99 latency of small
# requests during reloads against without them (same run), and RSS after ten
# replacements against after the first load.
#
#   scripts/reload-bench.sh [DATA_DIR]      (default ./bench-data)
#
# Loopback only, bounded: about three minutes. The server is pinned to CPU 0
# and wrk to CPU 1 (taskset), so reloads compete with serving on one core.
set -euo pipefail
cd "$(dirname "$0")/.."
DATA=${1:-bench-data}
PORT=${PORT:-18480}
ADMIN=${ADMIN:-18490}
REPLACEMENTS=${REPLACEMENTS:-10}
command -v wrk >/dev/null || { echo "wrk is needed: apt-get install wrk" >&2; exit 1; }

cargo build --release --quiet
BIN=target/release/portfolio-replica
mkdir -p "$DATA/reload"
[ -f "$DATA/large.json" ] || $BIN generate --out "$DATA" --scale large --seed 42 >/dev/null
cp snapshots/acme.json "$DATA/reload/acme.json"
cp "$DATA/large.json" "$DATA/reload/large.json"
SIZE=$(stat -c %s "$DATA/reload/large.json")

taskset -c 0 $BIN --snapshots "$DATA/reload" --listen 127.0.0.1:$PORT --admin-listen 127.0.0.1:$ADMIN \
  2>"$DATA/reload-server.log" &
PID=$!
trap 'kill $PID 2>/dev/null || true' EXIT

rss_kb() { awk '/VmRSS/ {print $2}' /proc/$PID/status; }
loaded_at() { curl -s "http://127.0.0.1:$ADMIN/snapshots" | grep -o '"file":"large.json"[^}]*"loaded_at":"[^"]*"' | sed 's/.*"loaded_at":"//;s/"$//'; }

start=$(date +%s.%N)
until curl -sf "http://127.0.0.1:$PORT/readyz" >/dev/null; do sleep 0.1; done
first_load=$(echo "$(date +%s.%N) - $start" | bc)
sleep 2
rss_loaded=$(rss_kb)

# One replacement: copy to a temp name, rename into place, wait for the reload.
replace() {
  local before; before=$(loaded_at)
  cp "$DATA/large.json" "$DATA/reload/large.json.tmp"
  local t0; t0=$(date +%s.%N)
  mv "$DATA/reload/large.json.tmp" "$DATA/reload/large.json"
  while [ "$(loaded_at)" = "$before" ]; do sleep 0.05; done
  echo "$(date +%s.%N) - $t0" | bc
}

KEY='Authorization: Bearer cura_demo_acme_key'
URL="http://127.0.0.1:$PORT/portfolio?limit=5"
wrk_p99() { taskset -c 1 wrk -t1 -c16 -d"$1"s --latency -H "$KEY" "$URL" | awk '/ 99%/ {print $2} /Requests\/sec/ {print $2}' | paste -sd' '; }

echo "== baseline: no reload (10 s)"
base=$(wrk_p99 10)

echo "== during reloads (3 replacements)"
peak=0
( while kill -0 $PID 2>/dev/null; do r=$(rss_kb); [ "$r" -gt "$peak" ] && peak=$r && echo $peak > "$DATA/reload-peak"; sleep 0.05; done ) &
SAMPLER=$!
: > "$DATA/reload-times"
( for _ in 1 2 3; do replace >> "$DATA/reload-times"; done ) &
REPLACER=$!
during=$(wrk_p99 25)
wait $REPLACER
for _ in $(seq 4 "$REPLACEMENTS"); do replace >> "$DATA/reload-times"; done
sleep 3
rss_after=$(rss_kb)
kill $SAMPLER 2>/dev/null || true
peak=$(cat "$DATA/reload-peak" 2>/dev/null || echo 0)

echo
echo "file: $SIZE bytes; first load (to ready): ${first_load}s"
echo "reload times (s): $(paste -sd' ' "$DATA/reload-times")"
echo "RSS after first load: $((rss_loaded/1024)) MiB ($(echo "scale=2; $rss_loaded*1024/$SIZE" | bc)x file)"
echo "peak RSS during reloads: $((peak/1024)) MiB ($(echo "scale=2; $peak*1024/$SIZE" | bc)x file)"
echo "RSS after $REPLACEMENTS replacements: $((rss_after/1024)) MiB ($(echo "scale=2; $rss_after*1024/$SIZE" | bc)x file)"
echo "p99 / req/s without reload: $base"
echo "p99 / req/s during reloads: $during"
