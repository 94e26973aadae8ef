#!/usr/bin/env bash
# What the gzip warm-up adds to a start (BENCHMARKS.md, "Warm-up"): for each
# count N of workspaces of about 100 KB (default 2000 8000 20000), process
# start to the first 200 of GET /readyz with the default flags (ready once
# the first scan's records are precompressed) against the same start with
# `--precompress off`, side by side, pinned to one core (taskset -c CORE)
# and on all cores (ALL_CORES); median of RUNS starts each, and the ratio.
#
# Usage: scripts/warmup-bench.sh [N...]
# Environment: BIN (default target/release/portfolio-replica, built if
# missing), DATA (default bench-data/warmup: `generate --scale tiny
# --workspaces MAX`, generated if missing; each N is its first N files,
# hard-linked into a scratch directory), RUNS (default 3), CORE (default
# 1), ALL_CORES (default 0-(cores-1)), POLL_CORE (the readiness poller's
# core, default 0), POLL_MS (default 20), EXTRA (files added to every
# start, e.g. large workspaces: "bench-data/cold/mb10.json ...").
# Needs python3, taskset. Loopback only; every process started is stopped
# by its PID at exit. Run it under `flock /tmp/bench.lock` where others
# measure too.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh
# shellcheck source=scripts/start-lib.sh
source scripts/start-lib.sh
DATA=${DATA:-bench-data/warmup}
RUNS=${RUNS:-3}
read -r -a EXTRA_FILES <<<"${EXTRA:-}"
COUNTS=("$@")
[ "${#COUNTS[@]}" -gt 0 ] || COUNTS=(2000 8000 20000)

MAX=$(printf '%s\n' "${COUNTS[@]}" | sort -n | tail -1)
have=$(find "$DATA" -maxdepth 1 -name '*.json' 2>/dev/null | wc -l)
if [ "$have" -lt "$MAX" ]; then
  rm -rf "$DATA"
  "$BIN" generate --out "$DATA" --scale tiny --workspaces "$MAX" --seed 42 >/dev/null
fi

scratch_dir TMP warmup-bench
echo "# $(date -u +%FT%TZ) $(git rev-parse --short HEAD) $0 ${COUNTS[*]} ${EXTRA:-}"
echo "# one core: $CORE; all cores: $ALL_CORES; median of $RUNS starts; $BIN"

ROWS=()
for n in "${COUNTS[@]}"; do
  dir=$TMP/snapshots
  rm -rf "$dir"
  mkdir "$dir"
  # awk reads to the end: head would leave sort a broken pipe.
  find "$DATA" -maxdepth 1 -name '*.json' | sort | awk -v n="$n" 'NR <= n' | xargs -I{} ln {} "$dir/"
  for extra in "${EXTRA_FILES[@]}"; do ln "$extra" "$dir/"; done
  bytes=$(cat "$dir"/*.json | wc -c)
  echo "== $n workspaces${EXTRA:+ and $EXTRA} ($bytes bytes)"
  for cores in one all; do
    cpus=$CORE
    [ "$cores" = all ] && cpus=$ALL_CORES
    declare -A READY=()
    for flags in off default; do
      : >"$TMP/runs"
      for _ in $(seq "$RUNS"); do
        if [ "$flags" = off ]; then
          start_once "$dir" "$cpus" "$TMP/server.log" --precompress off >>"$TMP/runs"
        else
          start_once "$dir" "$cpus" "$TMP/server.log" >>"$TMP/runs"
        fi
      done
      READY[$flags]=$(awk '{print $1}' "$TMP/runs" | median)
      echo "   cores $cpus, $flags: ready (s) $(awk '{print $1}' "$TMP/runs" | paste -sd' '), first scan (ms) $(awk '{print $2}' "$TMP/runs" | paste -sd' ')"
    done
    ROWS+=("| $n${EXTRA:+ + extra} | $cpus | ${READY[off]} | ${READY[default]} | $(awk -v a="${READY[default]}" -v b="${READY[off]}" 'BEGIN {printf "%.2f", a / b}') |")
  done
  rm -rf "$dir"
done

echo
echo "Start to ready (s), median of $RUNS"
echo
echo "| workspaces | cores | --precompress off | default flags | default / off |"
echo "| ---: | --- | ---: | ---: | ---: |"
printf '%s\n' "${ROWS[@]}"
