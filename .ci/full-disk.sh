#!/usr/bin/env bash
# A full disk under a memory budget's private copies, with the real binary
# on a real file system: a tmpfs too small for the copies, mounted as
# `--cache-dir` (needs root or sudo, as a mount does).
#
#   bash .ci/full-disk.sh
#
# 1. 10 small workspaces (`generate --scale micro`, about 13 KB each), a
#    cache of 40 KiB: most copies fail. Every key still answers 200 (the
#    file loads from itself and stays in memory), and the log says once
#    per file that its copy could not be kept.
# 2. The tmpfs grown to 10 MiB (`mount -o remount`): within 30 s every
#    file has its copy and its memory in `copies/` (the retry), and every
#    key answers 200 again, now loaded on demand under the budget (64 KiB,
#    a few of them).
# One line per check, then `full-disk: N passed, N failed`; exits non-zero
# if any failed. The server is stopped by PID and the tmpfs unmounted on
# exit. Needs curl; builds the release binary (a no-op when up to date).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh

passed=0
failed=0
check() {
  local what=$1
  shift
  if "$@"; then
    echo "ok    $what"
    passed=$((passed + 1))
  else
    echo "FAIL  $what"
    failed=$((failed + 1))
  fi
}

build_release
BIN=${CARGO_TARGET_DIR:-target}/release/portfolio-replica
scratch_dir WORK full-disk
SNAPSHOTS=$WORK/snapshots
CACHE=$WORK/cache
LOG=$WORK/server.log
mkdir -p "$SNAPSHOTS" "$CACHE"
as_root mount -t tmpfs -o size=40k tmpfs "$CACHE"
# shellcheck disable=SC2317 # called by lib.sh's EXIT trap
on_exit() {
  if [ -n "$SERVER_PID" ]; then stop "$SERVER_PID"; fi
  SERVER_PID=
  as_root umount "$CACHE" || as_root umount -l "$CACHE"
}

"$BIN" generate --out "$SNAPSHOTS" --scale micro --workspaces 10 >/dev/null
mapfile -t KEYS < <(tail -n +2 "$SNAPSHOTS/keys.tsv" | cut -f3)

"$BIN" --snapshots "$SNAPSHOTS" --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 \
  --log-format json --memory-budget 64KiB --cache-dir "$CACHE" --poll-interval 1s \
  2>"$LOG" >"$LOG.out" &
SERVER_PID=$!
wait_for_server full-disk "$LOG" 30

all_answer() {
  local key code
  for key in "${KEYS[@]}"; do
    code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $key" "http://$ADDR/portfolio")
    [ "$code" = 200 ] || { echo "      $key: $code" >&2; return 1; }
  done
}
uncopied() { grep -c 'cannot keep a private copy of a snapshot' "$LOG.out" "$LOG" | awk -F: '{n += $2} END {print n}'; }
copies() { find "$CACHE/copies" -name '*.json' | wc -l; }
memories() { find "$CACHE/copies" -name '*.json.facts' | wc -l; }

check "a full cache: every key still answers 200" all_answer
n=$(uncopied)
check "the log says which copies failed ($n of 10, once each)" test "$n" -ge 5 -a "$n" -le 10
check "a file whose copy failed serves from memory: $(copies) copies" test "$(copies)" -lt 10

as_root mount -o remount,size=10m "$CACHE"
for _ in $(seq 1 300); do
  if [ "$(copies)" -eq 10 ] && [ "$(memories)" -eq 10 ]; then break; fi
  sleep 0.1
done
check "room again: every file has its copy ($(copies)) and memory ($(memories)) within 30 s" \
  test "$(copies)" -eq 10 -a "$(memories)" -eq 10
check "every key answers 200, loaded on demand" all_answer
loads=$(curl -s "http://$ADMIN_ADDR/metrics" | sed -n 's/^portfolio_replica_demand_loads_total{outcome="ok"} //p')
check "loads on demand from the copies: $loads" test "${loads:-0}" -ge 1
check "the failures were said once each, not at every retry" test "$(uncopied)" -eq "$n"

echo "full-disk: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
