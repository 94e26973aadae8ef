#!/usr/bin/env bash
# What a change costs in directory mode (BENCHMARKS.md, "Small changes"):
# one record changed against every record changed, side by side on one
# server with the default flags. For each: time from the rename to the new
# version serving, server CPU until then and until its background work
# (precompression) is done, and peak RSS (VmHWM, reset just before the
# rename) against the RSS that served before (and the file). Then RENAMES small changes in
# a row, and the steady RSS they leave against a fresh server's on the
# same file.
#
#   scripts/change-bench.sh [FILE]      (default bench-data/medium/medium.json)
#   BIN=path/to/other/build scripts/change-bench.sh   (another build, side by side)
#   SERVER_ARGS="--precompress off" scripts/change-bench.sh
#
# Each replacement is written a second before it is renamed into place, as
# a deployment does, and flushed to disk first (as a careful writer does
# with fsync): ext4 otherwise starts writing a file back when it is renamed
# over another, and the rename itself took 120-150 ms of the writer's for
# 200 MB, before the server could see anything. "Every record changed" adds a blank inside each
# record's attributes: every record's bytes differ, nothing else does.
# Loopback only, bounded: about four minutes for the medium file.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh
FILE=${1:-bench-data/medium/medium.json}
RENAMES=${RENAMES:-100}

if [ -z "${BIN:-}" ]; then
  cargo build --release --quiet
  BIN=target/release/portfolio-replica
fi
if [ ! -f "$FILE" ]; then
  $BIN generate --out "$(dirname "$FILE")" --scale medium --seed 42 >/dev/null
fi
DIR=$(mktemp -d)
SCRATCH_DIRS+=("$DIR")
NAME=$(basename "$FILE")
SIZE=$(stat -c %s "$FILE")
echo "# $(date -u +%FT%TZ) $(git rev-parse --short HEAD) $0 $FILE ($SIZE bytes)"

# The variants: two one-record changes (a task title in the middle of the
# file) and every record changed.
python3 - "$FILE" "$DIR" <<'EOF'
import sys
src, out = sys.argv[1], sys.argv[2]
data = open(src, 'rb').read()
at = data.find(b'"title":"', len(data) // 2) + len(b'"title":"')
for n in range(2):
    open(f'{out}/.one-{n}', 'wb').write(data[:at] + b'Changed %d: ' % n + data[at:])
open(f'{out}/.all', 'wb').write(data.replace(b'"attributes":{', b'"attributes": {'))
EOF
cp "$FILE" "$DIR/$NAME"

serve() { # serve DIR API ADMIN: starts a server, prints its PID
  # shellcheck disable=SC2086 # SERVER_ARGS is a list of flags
  "$BIN" --snapshots "$1" --listen "127.0.0.1:$2" --admin-listen "127.0.0.1:$3" ${SERVER_ARGS:-} >/dev/null 2>>"$DIR/.server.log" &
  echo $!
}
PORT=18580 ADMIN=18590
PID=$(serve "$DIR" $PORT $ADMIN)
track "$PID"
wait_ready "http://127.0.0.1:$PORT/readyz" 600 "$PID"

kb() { awk -v k="$2:" '$1 == k {print $2}' "/proc/$1/status"; }
cpu() { awk '{printf "%.2f", ($14 + $15) / 100}' "/proc/$PID/stat"; }
loaded_at() { curl -s "http://127.0.0.1:$ADMIN/snapshots" | grep -o '"loaded_at":"[^"]*"' | head -1; }
reused() { curl -s "http://127.0.0.1:$ADMIN/snapshots" | grep -o '"records_reused":[0-9]*' | head -1 | cut -d: -f2; }
# Waits until the process's CPU time stops growing: its background work is done.
idle() {
  local a b
  b=$(cpu)
  while true; do
    sleep 0.5
    a=$b
    b=$(cpu)
    [ "$(echo "$b - $a < 0.03" | bc)" = 1 ] && return
  done
}
# change VARIANT: prints seconds to serve, CPU-s to serve, CPU-s in all,
# peak RSS against the RSS before and against the file, records reused.
change() {
  cp "$DIR/$1" "$DIR/.next"
  sync "$DIR/.next"
  sleep 1
  idle
  local before rss c0 t0 t c1
  before=$(loaded_at)
  rss=$(kb "$PID" VmRSS)
  echo 5 > "/proc/$PID/clear_refs"
  c0=$(cpu)
  t0=$(date +%s.%N)
  mv "$DIR/.next" "$DIR/$NAME"
  while [ "$(loaded_at)" = "$before" ]; do sleep 0.005; done
  t=$(echo "$(date +%s.%N) - $t0" | bc)
  c1=$(cpu)
  idle
  printf '%-28s %6.3f s  %5.2f CPU-s  %5.2f CPU-s  %5.3fx  %5.3fx  %s\n' "$2" "$t" \
    "$(echo "$c1 - $c0" | bc)" "$(echo "$(cpu) - $c0" | bc)" \
    "$(echo "scale=3; $(kb "$PID" VmHWM) / $rss" | bc)" \
    "$(echo "scale=3; $(kb "$PID" VmHWM) * 1024 / $SIZE" | bc)" "$(reused)"
}

echo "change                       served     CPU to serve  CPU in all  peak/RSS  peak/JSON  reused"
change .one-0 "one record"
change .one-1 "one record (again)"
change .all "every record"
change .one-0 "every record (back)"

for ((i = 0; i < RENAMES; i++)); do
  cp "$DIR/.one-$((i % 2))" "$DIR/.next"
  sync "$DIR/.next"
  before=$(loaded_at)
  mv "$DIR/.next" "$DIR/$NAME"
  while [ "$(loaded_at)" = "$before" ]; do sleep 0.005; done
done
idle
sleep 2
after=$(kb "$PID" VmRSS)
FRESH=$(mktemp -d)
SCRATCH_DIRS+=("$FRESH")
cp "$DIR/$NAME" "$FRESH/$NAME"
FRESH_PID=$(serve "$FRESH" 18581 18591)
track "$FRESH_PID"
wait_ready "http://127.0.0.1:18581/readyz" 600 "$FRESH_PID"
PID=$FRESH_PID idle
sleep 2
fresh=$(kb "$FRESH_PID" VmRSS)
echo "steady RSS after $RENAMES one-record renames: $((after / 1024)) MiB; a fresh load of the last: $((fresh / 1024)) MiB ($(echo "scale=3; $after / $fresh" | bc)x)"
