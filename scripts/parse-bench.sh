#!/usr/bin/env bash
# Our load speed beside general-purpose JSON parsers building a DOM of the
# same file, on one core and on both, for plain and escape-heavy data:
#
#   ours      process start to the first 200 of GET /readyz on the API port
#             (exec, reading the file, parsing, building the store, the
#             first scan's end), `--precompress off`, the file alone in a
#             scratch directory and in the page cache (read to /dev/null
#             before each run); median of RUNS runs pinned to one core
#             (taskset -c CORE) and of RUNS on all cores (ALL_CORES); beside
#             it the server's own `first scan finished` elapsed_ms (median)
#   baseline  examples/dom_baseline on the same core: sonic-rs building a
#             sonic_rs::Value, serde_json a serde_json::Value, and
#             serde_json into IgnoredAny (no DOM: validation only), the file
#             already in memory, building only (median of REPS)
#
# and a table of MB/s (10^6 bytes per second) with ours / sonic-rs (one
# core) and ours on all cores / ours on one core.
#
# Usage: scripts/parse-bench.sh [FILE...]
#   default: bench-data/medium/medium.json and bench-data/medium-esc/medium.json,
#   generated if missing (`generate --scale medium --seed 42`, the second
#   with `--text escapes`)
# Environment: BIN (default target/release/portfolio-replica, built if
# missing), RUNS (server starts per file and core set, default 5), REPS
# (dom_baseline repetitions, default 5), CORE (default 1), ALL_CORES
# (default 0-(cores-1)), POLL_CORE (the readiness poller's core, default 0),
# POLL_MS (its interval, default 20), SONIC_RUSTFLAGS (default
# `-C target-cpu=native`: sonic-rs picks its SIMD at compile time and runs a
# portable fallback without AVX2 and PCLMULQDQ enabled, so the baseline is
# built with them into target/native, a build of its own; set it empty to
# build with the project's flags into target/release; dom_baseline's
# `simd=` says which ran). Our server is the release binary as shipped.
# Needs python3, taskset. Loopback only; every process started is stopped
# by its PID at exit. Run it under `flock /tmp/bench.lock` where others
# measure too. The first run builds the whole dependency tree again into
# target/native (many minutes on two cores); later runs reuse it.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh
# shellcheck source=scripts/start-lib.sh
source scripts/start-lib.sh
RUNS=${RUNS:-5}
REPS=${REPS:-5}
SONIC_RUSTFLAGS=${SONIC_RUSTFLAGS--C target-cpu=native}

if [ -n "$SONIC_RUSTFLAGS" ]; then
  RUSTFLAGS="$SONIC_RUSTFLAGS" timeout 1800 cargo build --release --locked --quiet \
    --example dom_baseline --target-dir target/native
  DOM=target/native/release/examples/dom_baseline
else
  timeout 1800 cargo build --release --locked --quiet --example dom_baseline
  DOM=target/release/examples/dom_baseline
fi

if [ "$#" -gt 0 ]; then
  FILES=("$@")
else
  FILES=(bench-data/medium/medium.json bench-data/medium-esc/medium.json)
  [ -f "${FILES[0]}" ] || "$BIN" generate --out bench-data/medium --scale medium --seed 42 >/dev/null
  [ -f "${FILES[1]}" ] ||
    "$BIN" generate --out bench-data/medium-esc --scale medium --seed 42 --text escapes >/dev/null
fi
for file in "${FILES[@]}"; do
  [ -f "$file" ] || { echo "no such file: $file" >&2; exit 1; }
done

scratch_dir TMP parse-bench
echo "# $(date -u +%FT%TZ) $(git rev-parse --short HEAD) $0 ${FILES[*]}"
echo "# one core: $CORE; all cores: $ALL_CORES; $RUNS server starts, $REPS parses each; baseline $DOM"

whole() { awk -v x="$1" 'BEGIN {printf "%.0f", x}'; }
mbps() { awk -v b="$1" -v s="$2" 'BEGIN {printf "%.3f", b / 1e6 / s}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }
# field PARSER KEY: KEY's value on dom_baseline's line of PARSER.
field() {
  awk -v p="parser=$1" -v k="$2=" \
    '$1 == p {for (i = 2; i <= NF; i++) if (index($i, k) == 1) print substr($i, length(k) + 1)}' "$TMP/dom"
}

ROWS=()
for file in "${FILES[@]}"; do
  bytes=$(stat -c %s "$file")
  dir=$TMP/snapshots
  rm -rf "$dir"
  mkdir "$dir"
  cp "$file" "$dir/$(basename "$file")"
  # The server leaves a file modified in the last 150 ms for a later scan
  # (it may still be being written): a fresh copy would wait 200 ms more.
  touch -m -d '1 minute ago' "$dir/$(basename "$file")"
  # Written back now, not by a kworker during the runs.
  sync "$dir/$(basename "$file")"
  echo "== $file ($bytes bytes)"
  declare -A READY=() SCAN=()
  for cores in one all; do
    cpus=$CORE
    [ "$cores" = all ] && cpus=$ALL_CORES
    : >"$TMP/runs"
    for _ in $(seq "$RUNS"); do
      start_once "$dir" "$cpus" "$TMP/server.log" --precompress off >>"$TMP/runs"
    done
    READY[$cores]=$(awk '{print $1}' "$TMP/runs" | median)
    SCAN[$cores]=$(awk '{print $2}' "$TMP/runs" | median)
    echo "   ours, cores $cpus: ready (s) $(awk '{print $1}' "$TMP/runs" | paste -sd' '), first scan (ms) $(awk '{print $2}' "$TMP/runs" | paste -sd' ')"
  done
  cat "$dir"/*.json >/dev/null
  taskset -c "$CORE" "$DOM" "$dir/$(basename "$file")" --reps "$REPS" | tee "$TMP/dom" | sed 's/^/   /'
  ours_one=$(mbps "$bytes" "${READY[one]}")
  ours_all=$(mbps "$bytes" "${READY[all]}")
  sonic=$(field sonic-rs-dom mb_per_s)
  ROWS+=("| $file | $bytes | $(whole "$ours_one") | $(whole "$ours_all") | ${SCAN[one]} / ${SCAN[all]} | $(whole "$sonic") ($(field sonic-rs-dom simd)) | $(whole "$(field serde_json-dom mb_per_s)") | $(whole "$(field serde_json-ignored mb_per_s)") | $(ratio "$ours_one" "$sonic") | $(ratio "$ours_all" "$ours_one") |")
  rm -rf "$dir"
done

echo
echo "MB/s (10^6 bytes/s); ours: process start to ready, median of $RUNS; baselines: building only, median of $REPS, on core $CORE"
echo
echo "| file | bytes | ours, 1 core | ours, all cores | first scan ms (1 / all) | sonic-rs DOM | serde_json DOM | serde_json IgnoredAny | ours / sonic-rs (1 core) | ours all / ours 1 core |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
printf '%s\n' "${ROWS[@]}"
