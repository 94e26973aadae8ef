#!/usr/bin/env bash
# Reload cost, measured (BENCHMARKS.md, "Reload cost"): load speed, peak
# memory of a first load, of a replacement and of two replacements in a
# row (VmHWM, reset through /proc/PID/clear_refs before each), steady RSS,
# and what requests see during a replacement: p99 of small requests and
# req/s while a large snapshot is replaced, against the same without, in
# one run, with the reload's time idle and under that load.
#
#   scripts/reload-bench.sh [FILE]      (default bench-data/large/large.json)
#
# Loopback only, bounded: about two minutes for the 1 GB file. The server is
# pinned to CPU 0 and wrk to CPU 1 (taskset), so reloads and requests share
# one core, the hard case.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh
FILE=${1:-bench-data/large/large.json}
PORT=${PORT:-18480}
ADMIN=${ADMIN:-18490}
LOAD_SECONDS=${LOAD_SECONDS:-30}
command -v wrk >/dev/null || { echo "wrk is needed: apt-get install wrk" >&2; exit 1; }

cargo build --release --quiet
BIN=target/release/portfolio-replica
if [ ! -f "$FILE" ]; then
  $BIN generate --out "$(dirname "$FILE")" --scale large --seed 42 >/dev/null
fi
DIR=$(mktemp -d)
NAME=$(basename "$FILE")
cp snapshots/acme.json "$DIR/acme.json"
cp "$FILE" "$DIR/$NAME"
SIZE=$(stat -c %s "$FILE")
echo "# $(date -u +%FT%TZ) $(git rev-parse --short HEAD) $0 $FILE ($SIZE bytes)"

# The copies that replacements link into place (see replace below).
cp "$FILE" "$DIR/.copy-0"
cp "$FILE" "$DIR/.copy-1"
start=$(date +%s.%N)
taskset -c 0 "$BIN" --snapshots "$DIR" --listen "127.0.0.1:$PORT" --admin-listen "127.0.0.1:$ADMIN" \
  2>"$DIR/.server.log" &
PID=$!
track "$PID"
SCRATCH_DIRS+=("$DIR")

kb() { awk -v k="$1:" '$1 == k {print $2}' /proc/$PID/status; }
reset_peak() { echo 5 > /proc/$PID/clear_refs; }
x() { echo "scale=2; $1 * 1024 / $SIZE" | bc; }
loaded_at() { curl -s "http://127.0.0.1:$ADMIN/snapshots" | grep -o "\"file\":\"$NAME\"[^}]*\"loaded_at\":\"[^\"]*\"" | sed 's/.*"loaded_at":"//;s/"$//'; }
wait_reload() { local before=$1; while [ "$(loaded_at)" = "$before" ]; do sleep 0.02; done; }
# Puts a new file into place the way a deployment does (a temporary name,
# renamed into place), from two copies made up front and linked in turn:
# each replacement is a new inode, and no 1 GB copy competes with the
# server and wrk for the cores while they are measured. (Hidden names are
# ignored by the server.)
# (The turn is kept in a file: replacements also run in subshells.)
replace() {
  local turn; turn=$(( ($(cat "$DIR/.turn" 2>/dev/null || echo 0) + 1) % 2 ))
  echo "$turn" > "$DIR/.turn"
  ln -f "$DIR/.copy-$turn" "$DIR/$NAME.tmp"
  mv "$DIR/$NAME.tmp" "$DIR/$NAME"
}
timed_replace() {
  local before; before=$(loaded_at)
  replace
  local t0; t0=$(date +%s.%N)
  wait_reload "$before"
  echo "$(date +%s.%N) - $t0" | bc
}

wait_ready "http://127.0.0.1:$PORT/readyz" 600 "$PID"
first_load=$(echo "$(date +%s.%N) - $start" | bc)
first_peak=$(kb VmHWM)
sleep 1
steady=$(kb VmRSS)

reset_peak
idle_reload=$(timed_replace)
replace_peak=$(kb VmHWM)
sleep 1

# Two replacements in a row: the second lands while the first is built (the
# first build is then dropped as stale, and the second one loads).
reset_peak
before=$(loaded_at)
replace
sleep 1
replace
wait_reload "$before"
sleep 1
twice_peak=$(kb VmHWM)
sleep 1

KEY='Authorization: Bearer cura_demo_acme_key'
URL="http://127.0.0.1:$PORT/portfolio?limit=5"
wrk_run() { taskset -c 1 wrk -t1 -c16 -d"$1"s --latency -H "$KEY" "$URL" | awk '/ 99%/ {p=$2} /Requests\/sec/ {r=$2} END {print p, r}'; }

quiet=$(wrk_run 10)
: > "$DIR/.reloads"
( sleep 2; until [ -e "$DIR/.stop" ]; do timed_replace >> "$DIR/.reloads"; done ) &
REPLACER=$!
during=$(wrk_run "$LOAD_SECONDS")
# The replacer stops after the reload in progress.
touch "$DIR/.stop"
wait $REPLACER
sleep 2
steady_after=$(kb VmRSS)

mb=$(echo "scale=1; $SIZE / 1000000" | bc)
echo "first load, process start to ready: ${first_load}s ($(echo "scale=0; $mb / $first_load" | bc) MB/s)"
echo "peak RSS, first load:             $((first_peak/1024)) MiB ($(x "$first_peak")x the file)"
echo "steady RSS after loading:         $((steady/1024)) MiB ($(x "$steady")x)"
echo "reload, idle:                     ${idle_reload}s"
echo "peak RSS, replacing:              $((replace_peak/1024)) MiB ($(x "$replace_peak")x)"
echo "peak RSS, two replacements:       $((twice_peak/1024)) MiB ($(x "$twice_peak")x)"
echo "reloads under load (s):           $(paste -sd' ' "$DIR/.reloads")"
echo "p99 / req/s, no reload:           $quiet"
echo "p99 / req/s, during reloads:      $during"
echo "steady RSS after all:             $((steady_after/1024)) MiB ($(x "$steady_after")x)"
