#!/usr/bin/env bash
# Fair sharing (issue 31, BENCHMARKS.md once it lands): one noisy workspace
# (bench-data/medium/medium.json, `/tasks?limit=100&offset=20000`) driven as
# fast as 64 connections go, and 10 quiet workspaces (`generate --scale
# tiny`) sending 20 requests per second each to `/portfolio`; the server on
# core SERVER_CORE (default 1), both generators (examples/fair_load, two
# processes, the quiet one at nice -5) on core LOAD_CORE (default 0).
# Three runs side by side: quiet alone, with the noisy one and no limits,
# and with `--rate-limit RATE` (default 200/s); RUN_SECONDS each (default
# 20), REPEAT times (default 3) in rotating order, with the medians.
#
#   scripts/fair-bench.sh
#
# Then correctness, RUN_SECONDS each: a workspace sending at twice its rate
# (100/s, open loop, against --rate-limit 50/s), and a client that obeys
# Retry-After on one connection (against 200/s). Then the cost: wrk (8
# connections, COST_SECONDS, default 15) on the noisy workspace's page, with limits set that no
# workspace nears and without, 5 alternating runs each.
#
# Prints each run's JSON line (quiet p50/p99/max in ms, statuses, the noisy
# workspace's answered rates) and wrk's requests per second. Needs wrk.
# Loopback only; every process started is stopped by its PID.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh
RATE=${RATE:-200/s}
REPEAT=${REPEAT:-3}
SECONDS_RUN=${RUN_SECONDS:-20}
SERVER_CORE=${SERVER_CORE:-1}
LOAD_CORE=${LOAD_CORE:-0}
MEDIUM=${MEDIUM:-bench-data/medium/medium.json}
BIN=target/release/portfolio-replica
LOAD=target/release/examples/fair_load
cargo build --release --locked --quiet --bin portfolio-replica --example fair_load
[ -f "$MEDIUM" ] || { echo "no $MEDIUM (scripts/load-bench.sh generates bench-data)" >&2; exit 1; }
scratch_dir TMP fair-bench
"$BIN" generate --out "$TMP/data" --scale tiny --workspaces 10 --seed 7 >/dev/null
ln "$MEDIUM" "$TMP/data/medium.json" 2>/dev/null || cp "$MEDIUM" "$TMP/data/medium.json"
mapfile -t KEYS < <(tail -n +2 "$TMP/data/keys.tsv" | cut -f3)
QUIET=$(IFS=,; echo "${KEYS[*]}")
# The key of the generated `medium` snapshot (seed 42).
NOISY=cura_7db43926a2aefe402db161b4255df70e

run() { # run LABEL [server flags...]
  local label=$1 noisy=
  shift
  start "$@"
  if [ "$label" != alone ]; then
    taskset -c "$LOAD_CORE" "$LOAD" --addr "127.0.0.1:$PORT" \
      --noisy-path '/tasks?limit=100&offset=20000' --noisy "$NOISY" \
      --noisy-connections 64 --seconds $((SECONDS_RUN + 1)) >"$TMP/noisy.json" &
    noisy=$!
    PIDS+=("$noisy")
    sleep 0.5
  fi
  echo "== $label: quiet"
  taskset -c "$LOAD_CORE" nice -n -5 "$LOAD" --addr "127.0.0.1:$PORT" --path /portfolio \
    --quiet "$QUIET" --quiet-rate 20 --seconds "$SECONDS_RUN"
  if [ -n "$noisy" ]; then
    wait "$noisy"
    echo "== $label: noisy"
    cat "$TMP/noisy.json"
  fi
  stop "$SERVER"
  PIDS=()
}
start() { # start [server flags...]: a server on SERVER_CORE; sets PORT, SERVER
  PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  taskset -c "$SERVER_CORE" "$BIN" --snapshots "$TMP/data" --listen "127.0.0.1:$PORT" \
    --admin-listen 127.0.0.1:0 --precompress off "$@" 2>"$TMP/server.log" &
  SERVER=$!
  PIDS+=("$SERVER")
  wait_ready "http://127.0.0.1:$PORT/readyz" 60 "$SERVER"
}
echo "# $(date -u +%FT%TZ) $(git rev-parse --short HEAD) $0; RATE=$RATE RUN_SECONDS=$SECONDS_RUN REPEAT=$REPEAT"
for r in $(seq "$REPEAT"); do
  orders=("alone noisy limited" "noisy limited alone" "limited alone noisy")
  for label in ${orders[$(((r - 1) % 3))]}; do
    if [ "$label" = limited ]; then run limited --rate-limit "$RATE"; else run "$label"; fi
  done
done | tee "$TMP/runs"
python3 - "$TMP/runs" <<'PY'
import json, statistics, sys
runs, label, part = {}, None, None
for line in open(sys.argv[1]):
    if line.startswith("== "):
        label, part = line[3:].strip().split(": ")
    elif line.startswith("{") and part == "quiet":
        runs.setdefault(label, []).append(json.loads(line)["quiet_p99_ms"])
    elif line.startswith("{") and part == "noisy":
        runs.setdefault(label + " admitted/s", []).append(json.loads(line)["noisy_200_per_s"])
med = {k: statistics.median(v) for k, v in runs.items()}
for k, v in runs.items():
    print(f"{k}: {', '.join(f'{x:.2f}' for x in v)} (median {med[k]:.2f})")
print(f"quiet p99 limited / noisy: {med['limited'] / med['noisy']:.2f}")
PY

echo "== twice the rate: 100/s, open loop, against --rate-limit 50/s"
start --rate-limit 50/s
taskset -c "$LOAD_CORE" "$LOAD" --addr "127.0.0.1:$PORT" --path /portfolio \
  --quiet "${KEYS[0]}" --quiet-rate 100 --seconds "$SECONDS_RUN"
stop "$SERVER"
PIDS=()
echo "== a client obeying Retry-After, one connection, against --rate-limit 200/s"
start --rate-limit 200/s
taskset -c "$LOAD_CORE" "$LOAD" --addr "127.0.0.1:$PORT" --path /portfolio \
  --noisy "${KEYS[1]}" --noisy-connections 1 --obey-retry-after --seconds "$SECONDS_RUN"
stop "$SERVER"
PIDS=()

echo "== cost: wrk requests per second, limits that no workspace nears (on) and none (off)"
for i in 1 2 3 4 5; do
  order=(off on)
  [ $((i % 2)) -eq 0 ] && order=(on off)
  for kind in "${order[@]}"; do
    if [ "$kind" = on ]; then start --rate-limit 1000000/s --max-in-flight 1000; else start; fi
    rps=$(taskset -c "$LOAD_CORE" wrk -t1 -c8 -d"${COST_SECONDS:-15}"s -H "Authorization: Bearer $NOISY" \
      "http://127.0.0.1:$PORT/tasks?limit=50&offset=1000" | awk '/Requests\/sec/ {print $2}')
    echo "$kind $rps" | tee -a "$TMP/cost"
    stop "$SERVER"
    PIDS=()
  done
done
off=$(awk '$1 == "off" {print $2}' "$TMP/cost" | sort -g | sed -n 3p)
on=$(awk '$1 == "on" {print $2}' "$TMP/cost" | sort -g | sed -n 3p)
echo "median: off $off, on $on, on/off $(awk -v a="$on" -v b="$off" 'BEGIN {printf "%.3f", a / b}')"
