#!/usr/bin/env bash
# What an idle replica costs: CPU (user + system, from /proc/PID/stat) of
# a server polling a directory of N small workspaces every second, with
# nothing changing, for several builds at once on the same data (so that
# what else the machine does falls on each alike).
#
#   scripts/idle-bench.sh [NAME=BINARY]...
#   N=2000 SECS=60 SCALE=micro scripts/idle-bench.sh \
#     before=../wt-base/target/release/portfolio-replica \
#     after=target/release/portfolio-replica
#
# Default: the release build alone. The data is `generate --scale SCALE
# --workspaces N` under target/idle-bench/, made once. Each server binds
# 127.0.0.1:0; measuring starts 5 s after its /readyz answers 200.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-2000}
SECS=${SECS:-60}
SCALE=${SCALE:-micro}
[ $# -gt 0 ] || set -- "ours=target/release/portfolio-replica"
for build in "$@"; do
  [ -x "${build#*=}" ] || { echo "not an executable: ${build#*=}" >&2; exit 2; }
done
DATA=target/idle-bench/$SCALE-$N
if [ ! -d "$DATA" ]; then
  "${1#*=}" generate --scale "$SCALE" --workspaces "$N" --out "$DATA.tmp" >/dev/null
  mv "$DATA.tmp" "$DATA"
fi
LOGS=$(mktemp -d)
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$LOGS"' EXIT
for build in "$@"; do
  name=${build%%=*}
  "${build#*=}" serve --snapshots "$DATA" --poll-interval 1s --log-format json \
    --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 >"$LOGS/$name" 2>&1 &
  PIDS+=($!)
done
addr() { grep -o '"message":"serving","listen":"[0-9.:]*"' "$1" | head -1 | sed 's/.*"listen":"//;s/"$//'; }
for build in "$@"; do
  name=${build%%=*}
  for _ in $(seq 600); do
    a=$(addr "$LOGS/$name" || true)
    [ -n "$a" ] && curl -sf "http://$a/readyz" >/dev/null && break
    sleep 0.2
  done
done
sleep 5
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
declare -A t0
for p in "${PIDS[@]}"; do t0[$p]=$(ticks "$p"); done
sleep "$SECS"
HZ=$(getconf CLK_TCK)
echo "| build | CPU over ${SECS} s, $N $SCALE workspaces polled every 1 s | share of a core |"
echo "| --- | ---: | ---: |"
i=0
for build in "$@"; do
  p=${PIDS[$i]}
  used=$(($(ticks "$p") - t0[$p]))
  echo "| ${build%%=*} | $used ticks | $(awk -v u="$used" -v hz="$HZ" -v s="$SECS" 'BEGIN { printf "%.2f%%", 100 * u / hz / s }') |"
  i=$((i + 1))
done
