#!/usr/bin/env bash
# What signed snapshots cost (BENCHMARKS.md, "Signed snapshots"):
#
#   scripts/sign-bench.sh
#
# 1. publish: N workspaces (default 1000, `generate --scale micro
#    --workspaces N`) published to moto (a real S3 protocol server) in one
#    `publish`, without and with --sign-key, RUNS times each (default 3),
#    alternating, each to a fresh prefix; then `publish
#    --refresh-signatures` with another key, which re-signs all N.
# 2. a replica's start in directory mode, process start to the first 200
#    of GET /readyz (start-lib.sh), on one core (CORE) and on all
#    (ALL_CORES), without and with --trust-key over the same signed files,
#    RUNS starts each, alternating:
#    COUNTS workspaces of micro (default 500 2000 8000), and each file of
#    LARGE (default bench-data/medium/medium.json, about 100 MB; skipped
#    if missing).
#
# Environment: N, RUNS, COUNTS, LARGE, DATA (default bench-data/sign), BIN,
# CORE, POLL_CORE, POLL_MS (start-lib.sh). Loopback only; every process
# started is stopped by its PID at exit. Installs the pinned moto into
# target/tmp/moto-venv if missing; needs python3, curl, taskset. Run it
# under `flock /tmp/bench.lock` where others measure too.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh
# shellcheck source=scripts/start-lib.sh
source scripts/start-lib.sh
N=${N:-1000}
RUNS=${RUNS:-3}
read -r -a COUNTS <<<"${COUNTS:-500 2000 8000}"
LARGE=${LARGE:-bench-data/medium/medium.json}
DATA=${DATA:-bench-data/sign}

scratch_dir TMP sign-bench
echo "# $(date -u +%FT%TZ) $(git rev-parse --short HEAD) $0; N=$N RUNS=$RUNS COUNTS=${COUNTS[*]}"
"$BIN" keygen --out "$TMP/publisher" >/dev/null
"$BIN" keygen --out "$TMP/next" >/dev/null

MAX=$(printf '%s\n' "$N" "${COUNTS[@]}" | sort -n | tail -1)
FILES=$DATA/micro-$MAX
if [ ! -f "$FILES/keys.tsv" ]; then
  rm -rf "$FILES"
  "$BIN" generate --out "$FILES" --scale micro --workspaces "$MAX" --seed 42 >/dev/null
fi
# first N: the first N files of the set, hard-linked into a fresh directory.
first() {
  local n=$1 dir=$2
  rm -rf "$dir"
  mkdir -p "$dir"
  find "$FILES" -maxdepth 1 -name '*.json' | sort | awk -v n="$n" 'NR <= n' | xargs -I{} ln {} "$dir/"
}
seconds() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.3f}')" "$@"; }

echo "== 1. publish $N workspaces to moto"
start_moto "$TMP" bench
first "$N" "$TMP/publish"
declare -A TIMES=([plain]="" [signed]="")
for run in $(seq "$RUNS"); do
  order=(plain signed)
  [ $((run % 2)) -eq 0 ] && order=(signed plain)
  for kind in "${order[@]}"; do
    flags=()
    [ "$kind" = signed ] && flags=(--sign-key "$TMP/publisher.key")
    t0=$EPOCHREALTIME
    "$BIN" publish "$TMP"/publish/*.json --to "s3://bench/$kind-$run/" "${flags[@]}" >"$TMP/publish.out" 2>&1 \
      || { cat "$TMP/publish.out" >&2; exit 1; }
    took=$(seconds "$t0" "$EPOCHREALTIME")
    TIMES[$kind]+="$took "
    echo "   run $run, $kind: $took s"
  done
done
plain=$(echo "${TIMES[plain]}" | tr ' ' '\n' | grep . | median)
signed=$(echo "${TIMES[signed]}" | tr ' ' '\n' | grep . | median)
t0=$EPOCHREALTIME
"$BIN" publish --refresh-signatures --to "s3://bench/signed-1/" --sign-key "$TMP/next.key" >"$TMP/refresh.out" 2>&1 \
  || { cat "$TMP/refresh.out" >&2; exit 1; }
refresh=$(seconds "$t0" "$EPOCHREALTIME")
echo "   refresh with another key: $refresh s ($(tail -1 "$TMP/refresh.out"))"
PUBLISH_ROW="| $N | $plain | $signed | $(awk -v a="$signed" -v b="$plain" 'BEGIN {printf "%.2f", a / b}') | $refresh |"
stop "${PIDS[@]}"
PIDS=()

echo "== 2. directory mode: start to ready, without and with --trust-key"
ROWS=()
start_pair() { # start_pair LABEL DIR: RUNS starts each way, alternating
  local label=$1 dir=$2 bytes run kind cpus off on
  "$BIN" sign "$dir" --sign-key "$TMP/publisher.key" >/dev/null
  bytes=$(cat "$dir"/*.json | wc -c)
  for cpus in "$CORE" "$ALL_CORES"; do
    : >"$TMP/off"
    : >"$TMP/on"
    for run in $(seq "$RUNS"); do
      for kind in off on; do
        [ $((run % 2)) -eq 0 ] && kind=$([ "$kind" = off ] && echo on || echo off)
        if [ "$kind" = on ]; then
          start_once "$dir" "$cpus" "$TMP/server.log" --precompress off --trust-key "$TMP/publisher.pub" >>"$TMP/on"
        else
          start_once "$dir" "$cpus" "$TMP/server.log" --precompress off >>"$TMP/off"
        fi
      done
    done
    off=$(awk '{print $1}' "$TMP/off" | median)
    on=$(awk '{print $1}' "$TMP/on" | median)
    echo "   $label ($bytes bytes), cores $cpus: without $(awk '{print $1}' "$TMP/off" | paste -sd' '), with $(awk '{print $1}' "$TMP/on" | paste -sd' ')"
    ROWS+=("| $label | $bytes | $cpus | $off | $on | $(awk -v a="$on" -v b="$off" 'BEGIN {printf "%.2f", a / b}') |")
  done
}
for n in "${COUNTS[@]}"; do
  first "$n" "$TMP/dir"
  start_pair "$n micro workspaces" "$TMP/dir"
done
if [ -f "$LARGE" ]; then
  rm -rf "$TMP/dir"
  mkdir "$TMP/dir"
  cp "$LARGE" "$TMP/dir/"
  start_pair "$(basename "$LARGE")" "$TMP/dir"
fi

echo
echo "Publish (s, median of $RUNS), one command, moto on loopback"
echo
echo "| workspaces | unsigned | --sign-key | signed / unsigned | --refresh-signatures, all re-signed |"
echo "| ---: | ---: | ---: | ---: | ---: |"
echo "$PUBLISH_ROW"
echo
echo "Start to ready (s, median of $RUNS), --precompress off"
echo
echo "| snapshots | bytes | cores | without --trust-key | with --trust-key | with / without |"
echo "| --- | ---: | --- | ---: | ---: | ---: |"
printf '%s\n' "${ROWS[@]}"
