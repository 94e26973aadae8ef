#!/usr/bin/env bash
# How long a replica takes to be ready with and without a memory budget,
# in directory mode and in object-store mode (issue 28, "a cold start costs
# what is used"), side by side in one run:
#
#   directory     --snapshots DIR: without a budget every file is loaded
#                 and precompressed before /readyz says ready; with one,
#                 every file is still validated (its keys may come anywhere
#                 in it) and copied aside, but none is kept in memory
#   object store  --snapshots file://PREFIX/ after `publish` (manifest
#                 mode): without a budget every object is downloaded and
#                 loaded; with one, the catalog is made from the manifest's
#                 records and no snapshot is downloaded
#
# Each start: exec to /readyz 200 (polled every 10 ms), VmRSS then, and for
# object storage the bytes the replica fetched (records and objects).
#
# Usage: scripts/budget-start.sh
# Environment: N (workspaces, default 20000), DATA (default
# bench-data/budget, as scripts/budget-bench.sh makes it: generated here if
# missing), STORE (the published prefix, default DATA-store: published once,
# reused), BUDGET (default 256MiB), BIN (default
# target/release/portfolio-replica, built if missing), SERVER_ARGS.
# Needs curl, python3. Loopback and local files only; every process started
# is stopped by its PID at exit.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh

N=${N:-20000}
DATA=${DATA:-bench-data/budget}
STORE=${STORE:-$DATA-store}
BUDGET=${BUDGET:-256MiB}
BIN=${BIN:-target/release/portfolio-replica}
SERVER_ARGS=${SERVER_ARGS:-}
[ -x "$BIN" ] || build_release
WORK=$(mktemp -d)
SCRATCH_DIRS+=("$WORK")

if [ ! -f "$DATA/keys.tsv" ] || [ "$(($(wc -l <"$DATA/keys.tsv") - 1))" -ne "$N" ]; then
  echo "== generating $N tiny workspaces into $DATA"
  rm -rf "$DATA"
  "$BIN" generate --scale tiny --workspaces "$N" --out "$DATA" >/dev/null
fi
STORE_ABS=$(realpath -m "$STORE")
if [ ! -f "$STORE_ABS/manifest.json" ]; then
  echo "== publishing $N workspaces to file://$STORE_ABS/"
  mkdir -p "$STORE_ABS"
  started=$(date +%s.%N)
  find "$DATA" -name '*.json' -print0 | sort -z \
    | xargs -0 "$BIN" publish --to "file://$STORE_ABS/" >"$WORK/publish.log" 2>&1 \
    || { tail -5 "$WORK/publish.log"; exit 1; }
  echo "   $(python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$started" "$(date +%s.%N)") s"
fi
# Read once, so that no start reads the disk.
cat "$DATA"/*.json "$STORE_ABS"/objects/*/* >/dev/null 2>&1 || true

# One start: prints start seconds, RSS MiB, fetched bytes.
start_once() {
  local snapshots=$1 log=$WORK/server.log
  shift
  local started ready rss fetched
  started=$(date +%s.%N)
  # shellcheck disable=SC2086
  "$BIN" --snapshots "$snapshots" --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 \
    --log-format json "$@" $SERVER_ARGS >"$log" 2>&1 &
  local pid=$!
  track "$pid"
  until [ -n "$(server_addr "$log" api)" ]; do sleep 0.01; done
  local api admin
  api=$(server_addr "$log" api)
  admin=$(server_addr "$log" admin)
  until curl -fs -o /dev/null "http://$api/readyz"; do
    kill -0 "$pid" 2>/dev/null || { cat "$log" >&2; exit 1; }
    sleep 0.01
  done
  ready=$(date +%s.%N)
  rss=$(awk '/^VmRSS:/ { printf "%.1f", $2 / 1024 }' "/proc/$pid/status")
  fetched=$(curl -s "http://$admin/metrics" | awk '$1 == "portfolio_replica_source_bytes_fetched_total" { print $2 }')
  stop "$pid"
  python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.3f}')" "$started" "$ready"
  echo "$rss"
  echo "${fetched:-}"
}

row() { # name, snapshots, flags...
  local name=$1
  shift
  local out
  mapfile -t out < <(start_once "$@")
  printf '%-28s %10s %12s %16s\n' "$name" "${out[0]}" "${out[1]}" "${out[2]:--}"
  eval "START_${name//[^a-z]/_}=${out[0]}"
}

echo "== $N workspaces, $(du -sm "$DATA" | cut -f1) MB of JSON; budget $BUDGET"
printf '%-28s %10s %12s %16s\n' replica start_s RSS_MiB fetched_bytes
row directory "$DATA"
row directory_budget "$DATA" --memory-budget "$BUDGET"
row objects "file://$STORE_ABS/"
row objects_budget "file://$STORE_ABS/" --memory-budget "$BUDGET"
# shellcheck disable=SC2154 # set by row through eval
python3 - "$START_directory" "$START_directory_budget" "$START_objects" "$START_objects_budget" <<'PY'
import sys
d, db, o, ob = map(float, sys.argv[1:])
print(f"budget / none: directory {db / d:.3f} ({db:.2f} s / {d:.2f} s; target <= 0.3), "
      f"object store {ob / o:.3f} ({ob:.2f} s / {o:.2f} s; target <= 0.1)")
PY
