#!/usr/bin/env bash
# What a restart costs with a memory budget and a cache directory, against
# a first start, for several fleet sizes (BENCHMARKS.md, "Restarts with a
# cache directory"). For each N, `generate --scale SCALE --workspaces N`
# (made once under target/restart-bench/), side by side in one run:
#
#   resident   no budget, no cache: every file read and held
#   first      --memory-budget BUDGET --cache-dir (empty): every file read,
#              copied and remembered
#   restart    the same again, the cache as the first left it: what was
#              remembered is recalled, nothing read
#
# Each is started RUNS times (the restart's cache is the one the first
# start of its run left); the table has the median time from exec to the
# first 200 of GET /readyz on the API port, the median of the server's own
# `first scan finished` elapsed_ms, and the median peak RSS (VmHWM) once
# ready. Then each restarted replica's answer to /tasks?limit=3 for every
# tenth key is compared with the resident one's (a difference fails).
#
#   scripts/restart-bench.sh              # N="500 2000 8000"
#   N=2000 RUNS=5 scripts/restart-bench.sh
#   TRUST=1 scripts/restart-bench.sh      # every file signed, all three
#                                         # replicas with --trust-key
#
# Environment: N (fleet sizes), SCALE (default micro), RUNS (default 3),
# BUDGET (default 256MiB), BIN (default target/release/portfolio-replica,
# built if missing). Loopback only; every server started is stopped by its
# PID. Run it under `flock /tmp/bench.lock` where others measure too.
set -euo pipefail
cd "$(dirname "$0")/.."
SIZES=${N:-500 2000 8000}
SCALE=${SCALE:-micro}
RUNS=${RUNS:-3}
BUDGET=${BUDGET:-256MiB}
BIN=${BIN:-target/release/portfolio-replica}
TRUST=${TRUST:-}
[ -x "$BIN" ] || cargo build --release --locked --quiet
WORK=$(mktemp -d)
PID=
trap '[ -n "$PID" ] && kill "$PID" 2>/dev/null; rm -rf "$WORK"' EXIT
TRUSTED=()
if [ -n "$TRUST" ]; then
  "$BIN" keygen --out "$WORK/publisher" >/dev/null
  TRUSTED=(--trust-key "$WORK/publisher.pub")
fi

ms() { echo $(($(date +%s%N) / 1000000)); }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# start DATA LOG FLAG...: starts a server, waits for /readyz; prints
# "ready_ms scan_ms hwm_kib"; leaves it running as $PID, its port in $PORT.
start() {
  local data=$1 log=$2 t0
  shift 2
  t0=$(ms)
  "$BIN" serve --snapshots "$data" --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 \
    --log-format json "${TRUSTED[@]}" "$@" >"$log" 2>&1 &
  PID=$!
  PORT=
  for _ in $(seq 1 6000); do
    [ -z "$PORT" ] && PORT=$( (grep -o '"message":"serving","listen":"[0-9.:]*"' "$log" || true) | head -1 | sed 's/.*:\([0-9]*\)"$/\1/')
    if [ -n "$PORT" ] && curl -sf -o /dev/null "http://127.0.0.1:$PORT/readyz"; then
      local ready=$(($(ms) - t0))
      local scan
      scan=$( (grep -o '"first scan finished"[^}]*"elapsed_ms":[0-9]*' "$log" || true) | grep -o '[0-9]*$' | head -1)
      echo "$ready ${scan:-?} $(awk '/VmHWM/ {print $2}' /proc/$PID/status)"
      return
    fi
    kill -0 "$PID" 2>/dev/null || { cat "$log" >&2; exit 1; }
    sleep 0.01
  done
  echo "not ready: $log" >&2
  exit 1
}
stop() { kill "$PID"; wait "$PID" 2>/dev/null || true; PID=; }

# answers DATA: /tasks?limit=3 of every tenth key, headers but Date.
answers() {
  tail -n +2 "$1/keys.tsv" | awk 'NR % 10 == 1' | while IFS=$'\t' read -r _ _ key; do
    curl -s -D - -H "Authorization: Bearer $key" "http://127.0.0.1:$PORT/tasks?limit=3" | grep -iv '^date:'
  done
}

echo "# $(date -u +%FT%TZ) $(git rev-parse --short HEAD) $0 SCALE=$SCALE RUNS=$RUNS BUDGET=$BUDGET TRUST=$TRUST"
echo
echo "| workspaces | JSON | replica | ready (median) | first scan | peak RSS | ready / resident |"
echo "| ---: | ---: | --- | ---: | ---: | ---: | ---: |"
for n in $SIZES; do
  data=target/restart-bench/$SCALE-$n
  if [ ! -d "$data" ]; then
    "$BIN" generate --scale "$SCALE" --workspaces "$n" --out "$data.tmp" >/dev/null
    mv "$data.tmp" "$data"
  fi
  if [ -n "$TRUST" ]; then
    # A copy signed with this run's key (signing is not what is measured).
    rm -rf "$WORK/signed"
    cp -r "$data" "$WORK/signed"
    data=$WORK/signed
    "$BIN" sign --sign-key "$WORK/publisher.key" "$data" >/dev/null
  fi
  size=$(du -sm --exclude=keys.tsv "$data" | cut -f1)
  for kind in resident first restart; do : >"$WORK/$kind"; done
  for run in $(seq 1 "$RUNS"); do
    cache=$WORK/cache-$run
    start "$data" "$WORK/log" >>"$WORK/resident"
    [ "$run" = 1 ] && answers "$data" >"$WORK/resident.answers"
    stop
    start "$data" "$WORK/log" --memory-budget "$BUDGET" --cache-dir "$cache" >>"$WORK/first"
    stop
    start "$data" "$WORK/log" --memory-budget "$BUDGET" --cache-dir "$cache" >>"$WORK/restart"
    grep -q '"message":"recalled from --cache-dir' "$WORK/log" || { echo "the restart recalled nothing" >&2; exit 1; }
    if [ "$run" = 1 ]; then
      answers "$data" >"$WORK/restart.answers"
      cmp -s "$WORK/resident.answers" "$WORK/restart.answers" || { echo "answers differ after the restart (N=$n)" >&2; exit 1; }
    fi
    stop
    rm -rf "$cache"
  done
  resident=$(cut -d' ' -f1 "$WORK/resident" | median)
  for kind in resident first restart; do
    ready=$(cut -d' ' -f1 "$WORK/$kind" | median)
    scan=$(cut -d' ' -f2 "$WORK/$kind" | median)
    hwm=$(cut -d' ' -f3 "$WORK/$kind" | median)
    ratio=$(awk -v a="$ready" -v b="$resident" 'BEGIN {printf "%.3f", a / b}')
    echo "| $n | ${size} MB | $kind | $ready ms | $scan ms | $((hwm / 1024)) MiB | ${ratio}× |"
  done
done
