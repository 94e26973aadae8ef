#!/usr/bin/env bash
# Checks the sizing formulas of docs/operations.md ("Sizing a fleet")
# against a run (issue 38): a scaled-down fleet of N workspaces of about
# 100 KB (`generate --scale tiny`) and HEAVY of about 5 MB (`generate
# --scale midsize`) in one directory, served by the release binary with
# `--memory-budget BUDGET` and the `--memory-limit` the formulas give,
# every workspace asked once:
#
#   ready    RSS once /readyz is 200 (the catalog, nothing resident) and
#            VmHWM then (the first scan's peak)
#   sessions a session per workspace, in a shuffled order: GET
#            /portfolio?limit=20 and /tasks?limit=50 with its key (gzip
#            accepted), CONCURRENCY at once (one curl, --parallel); then the
#            HEAVY heavy ones at once, while the budget is full, so that
#            their loads meet the bound of loads in flight
#   after    RSS now (SETTLE s after the last answer: evicted memory is
#            handed back at most once a second) and VmHWM (the run's peak);
#            the disk of the private copies (du of the
#            portfolio-replica-copies-* directory under the TMPDIR this
#            script gives the server)
#
# and prints each beside the formulas' prediction and the ratio, measured /
# predicted; exits 1 if a ratio is off by more than TOLERANCE (0.15), or if
# a request was not answered 200.
#
# The formulas (docs/operations.md, "Sizing a fleet"), with the constants
# measured on this machine by `MODE=calibrate` (below):
#
#   catalog   = W * (CATALOG_BYTES + KEY_BYTES * keys a workspace)
#   ready     = BASE + catalog
#   RSS now   = BASE + catalog + RESIDENT_FACTOR * max(budget, heavy)
#               + WORK_MIB, heavy = COUNTED_FACTOR * the largest JSON
#   peak      = RSS now + 2 * in flight (the loads' builds, and what they
#               evict, handed back to the OS within a second),
#               in flight = min(budget / 4, the loads this run has at once
#               * 1.3 * their JSON), here the HEAVY heavy ones at once, and
#               at least 1.3 * the largest JSON (a load bigger than the
#               bound runs alone)
#   disk      = the JSON of every workspace (each file copied at the scan)
#   limit     = (peak + 1.8 * the largest JSON, a reload's build, which this
#               run does not exercise) * (1 + HEADROOM), and at least the
#               ledger's count: 32 MiB + budget * 5/4 + W * (4 KiB + 128)
#               + 1.8 * the largest JSON (its build with its fragments,
#               beside the budget)
#
# MODE=calibrate measures the constants instead, each from a start of its
# own, with SERVER_ARGS (run it again with "--precompress off"): the RSS of
# a replica with a budget and no workspace (the process alone); (RSS at
# ready - that) / W with the fleet and a budget (two values of N give the
# slope, CATALOG_BYTES, and the intercept, BASE_MIB); (RSS after asking
# every workspace - RSS at ready) / JSON with a budget that holds them all
# (a resident dataset) and what the budget counts for them; (RSS at ready
# - the process alone) / JSON without a budget.
#
# Usage: scripts/sizing-check.sh
#   MODE=calibrate scripts/sizing-check.sh
#   RUNS=3 scripts/sizing-check.sh                    # the median of 3 runs
# Environment: N (small workspaces, default 2000), HEAVY (5 MB ones, default
# 4), BUDGET (default 64MiB), CONCURRENCY (requests at once, default 4),
# RUNS (default 1), SETTLE (s, default 3), TOLERANCE (default 0.15),
# HEADROOM (of the limit, default 0.10), DATA (default bench-data/sizing,
# generated if missing), BIN (default target/release/portfolio-replica,
# built if it is that one), OUT (logs and the curl configs, kept; default a
# scratch directory removed at exit), SERVER_ARGS (flags for every server,
# e.g. "--precompress off"), and the constants BASE_MIB, CATALOG_BYTES,
# KEY_BYTES, RESIDENT_FACTOR, WORK_MIB (measured with the default flags:
# with "--precompress off" RSS after the run is 1.16-1.26 times the
# prediction, BENCHMARKS.md, "Sizing"). Needs curl, python3, du. Loopback
# only; every process it starts is stopped on exit, by PID; each request
# is bounded (30 s), each curl run (600 s). About a minute a run, plus generating the data
# the first time (about 30 s).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh

MODE=${MODE:-check}
N=${N:-2000}
HEAVY=${HEAVY:-4}
BUDGET=${BUDGET:-64MiB}
CONCURRENCY=${CONCURRENCY:-4}
RUNS=${RUNS:-1}
SETTLE=${SETTLE:-3}
TOLERANCE=${TOLERANCE:-0.15}
HEADROOM=${HEADROOM:-0.10}
DATA=${DATA:-bench-data/sizing}
DATA=${DATA%/}
BIN=${BIN:-target/release/portfolio-replica}
SERVER_ARGS=${SERVER_ARGS:-}
# Measured on the 2-core machine, 2026-12-02 (BENCHMARKS.md, "Sizing"):
# BASE_MIB and CATALOG_BYTES the intercept and slope of the RSS at ready
# at 2,004 and 8,000 workspaces (MODE=calibrate); RESIDENT_FACTOR and
# WORK_MIB the slope and intercept of the RSS after every workspace less the
# RSS at ready, at budgets of 64 and 128 MiB. KEY_BYTES is the server's own
# count, not measured apart.
BASE_MIB=${BASE_MIB:-13.5}
CATALOG_BYTES=${CATALOG_BYTES:-7168}
KEY_BYTES=${KEY_BYTES:-128}
RESIDENT_FACTOR=${RESIDENT_FACTOR:-1.075}
WORK_MIB=${WORK_MIB:-14}
COUNTED_FACTOR=${COUNTED_FACTOR:-1.46} # what the budget counts a dataset at, per byte of its JSON

for var in N HEAVY CONCURRENCY RUNS SETTLE; do
  [[ ${!var} =~ ^[0-9]+$ ]] || { echo "$var: a whole number, not '${!var}'" >&2; exit 2; }
done
case $MODE in check | calibrate) ;; *) echo "MODE: check or calibrate, not '$MODE'" >&2 && exit 2 ;; esac
[ "$N" -ge 1 ] && [ "$RUNS" -ge 1 ] && [ "$CONCURRENCY" -ge 1 ] || { echo "N, RUNS, CONCURRENCY: at least 1" >&2; exit 2; }
for tool in curl python3 du; do
  command -v "$tool" >/dev/null || { echo "missing: $tool" >&2; exit 1; }
done

# bytes SIZE: a size as the server reads it (K, M, G, T: powers of 1024).
bytes() {
  local text=${1// /} shift
  [[ $text =~ ^([0-9]+)([A-Za-z]*)$ ]] || return 1
  local number=${BASH_REMATCH[1]} unit=${BASH_REMATCH[2]^^}
  unit=${unit%B} unit=${unit%I}
  case $unit in "") shift=0 ;; K) shift=10 ;; M) shift=20 ;; G) shift=30 ;; T) shift=40 ;; *) return 1 ;; esac
  echo $((10#$number << shift))
}
BUDGET_BYTES=$(bytes "$BUDGET") || { echo "BUDGET: a size such as 64MiB, not '$BUDGET'" >&2; exit 2; }

if [ "$BIN" = target/release/portfolio-replica ]; then build_release; fi
[ -x "$BIN" ] || { echo "BIN: $BIN is not an executable" >&2; exit 1; }

kib() { awk -v f="$2:" '$1 == f { print $2 }' "/proc/$1/status"; }
metric() { awk -v n="$2" '$1 == n { s += $2 } END { printf "%.0f\n", s }' "$1"; }

# ensure_data: N tiny and HEAVY midsize workspaces in DATA (seed 42), their
# keys in DATA/keys.tsv; generated again unless DATA holds exactly those.
ensure_data() {
  local want="$N tiny $HEAVY midsize"
  if [ "$(cat "$DATA/.fleet" 2>/dev/null)" != "$want" ]; then
    if [ -e "$DATA" ] && [ ! -f "$DATA/.fleet" ] && [ -n "$(ls -A "$DATA")" ]; then
      echo "DATA: $DATA holds files but no .fleet: not this script's; choose another DATA" >&2
      exit 1
    fi
    echo "== generating $N tiny and $HEAVY midsize workspaces into $DATA"
    rm -rf "$DATA"
    mkdir -p "$DATA/tiny" "$DATA/midsize"
    timeout 1800 "$BIN" generate --scale tiny --workspaces "$N" --out "$DATA/tiny" >/dev/null
    if [ "$HEAVY" -gt 0 ]; then
      timeout 1800 "$BIN" generate --scale midsize --workspaces "$HEAVY" --out "$DATA/midsize" >/dev/null
    else
      printf 'workspace\tfile\tkey\n' >"$DATA/midsize/keys.tsv"
    fi
    mkdir -p "$DATA/fleet"
    find "$DATA/tiny" "$DATA/midsize" -name '*.json' -exec mv -t "$DATA/fleet/" {} +
    { cat "$DATA/tiny/keys.tsv"; tail -n +2 "$DATA/midsize/keys.tsv"; } >"$DATA/keys.tsv"
    rm -rf "$DATA/tiny" "$DATA/midsize"
    echo "$want" >"$DATA/.fleet"
  fi
  FLEET=$DATA/fleet
  W=$((N + HEAVY))
  JSON_BYTES=$(find "$FLEET" -name '*.json' -printf '%s\n' | awk '{ s += $1 } END { print s }')
  LARGEST=$(find "$FLEET" -name '*.json' -printf '%s\n' | sort -n | tail -1)
  HEAVY_BYTES=$(find "$FLEET" -name 'midsize-*.json' -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }')
}

# requests FILE KEYS...: a curl config asking each key's session, in order.
requests() {
  local file=$1 key
  shift
  local sep=""
  : >"$file"
  for key in "$@"; do
    for path in '/portfolio?limit=20' '/tasks?limit=50'; do
      printf '%surl = "http://%s%s"\nheader = "Authorization: Bearer %s"\nheader = "Accept-Encoding: gzip"\noutput = "/dev/null"\nwrite-out = "%%{http_code}\\n"\nmax-time = 30\n' \
        "$sep" "$ADDR" "$path" "$key" >>"$file"
      sep=$'next\n'
    done
  done
}

# ask CONFIG PARALLEL: runs a curl config; appends its status codes to CODES.
ask() { timeout 600 curl -s --no-progress-meter --parallel --parallel-max "$2" -K "$1" >>"$CODES" || true; }

# start NAME DIR [FLAGS...]: the server on loopback with TMPDIR a scratch
# directory of its own; waits for /readyz (300 s). Sets SERVER_PID, ADDR,
# ADMIN_ADDR, SERVER_TMP.
start() {
  local name=$1 dir=$2
  shift 2
  scratch_dir SERVER_TMP "sizing-tmp"
  # shellcheck disable=SC2086 # SERVER_ARGS is a list of flags
  TMPDIR=$SERVER_TMP env -u PORTFOLIO_MEMORY_BUDGET -u PORTFOLIO_MEMORY_LIMIT "$BIN" serve \
    --snapshots "$dir" --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 --log-format json \
    $SERVER_ARGS "$@" 2>"$OUT/$name.log" &
  SERVER_PID=$!
  wait_for_server "$name" "$OUT/$name.log" 300
}
finish() { stop "$SERVER_PID"; SERVER_PID=; }

# ask_all: every workspace's session (shuffled, seed 42), then the heavy
# ones at once.
ask_all() {
  CODES=$OUT/codes.txt
  : >"$CODES"
  mapfile -t keys < <(tail -n +2 "$DATA/keys.tsv" | cut -f3 | python3 -c 'import random, sys; k = sys.stdin.read().split(); random.Random(42).shuffle(k); print("\n".join(k))')
  requests "$OUT/all.curl" "${keys[@]}"
  ask "$OUT/all.curl" "$CONCURRENCY"
  if [ -n "$SERVER_PID" ]; then
    RSS_MID=$(kib "$SERVER_PID" VmRSS)
    HWM_MID=$(kib "$SERVER_PID" VmHWM)
  fi
  mapfile -t heavy < <(grep -P '\tmidsize-' "$DATA/keys.tsv" | cut -f3)
  if [ "${#heavy[@]}" -gt 0 ]; then
    requests "$OUT/heavy.curl" "${heavy[@]}"
    ask "$OUT/heavy.curl" $((2 * ${#heavy[@]}))
  fi
  ASKED=$(wc -l <"$CODES")
  NOT_OK=$(grep -vc '^200$' "$CODES" || true)
  if [ "$NOT_OK" -gt 0 ]; then
    echo "   not 200: $(grep -v '^200$' "$CODES" | sort | uniq -c | tr '\n' ' ')" >&2
  fi
}

precompress_off() { [[ " $SERVER_ARGS " == *" --precompress off "* ]]; }

if [ -n "${OUT:-}" ]; then mkdir -p "$OUT"; else scratch_dir OUT "sizing-out"; fi
ensure_data
echo "# sizing-check $(date -u '+%Y-%m-%dT%H:%M:%SZ'), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet HEAD 2>/dev/null || echo ' (dirty tree)')"
echo "# command: MODE=$MODE N=$N HEAVY=$HEAVY BUDGET=$BUDGET CONCURRENCY=$CONCURRENCY RUNS=$RUNS SERVER_ARGS='$SERVER_ARGS' $0"
echo "# machine: $(nproc) cores, $(uname -sr); load average $(cut -d' ' -f1-3 /proc/loadavg)"
awk -v w="$W" -v j="$JSON_BYTES" -v l="$LARGEST" -v h="$HEAVY_BYTES" -v n="$HEAVY" 'BEGIN {
  printf "== fleet: %d workspaces, %.1f MiB of JSON; the %d heavy ones %.2f MiB each on average, the largest %.2f MiB\n",
    w, j / 1048576, n, (n ? h / n : 0) / 1048576, l / 1048576 }'

if [ "$MODE" = calibrate ]; then
  mkdir -p "$OUT/empty"
  echo "== calibrate (SERVER_ARGS='$SERVER_ARGS'): each a start of its own"
  start base "$OUT/empty" --memory-budget "$BUDGET"
  sleep "$SETTLE"
  base=$(kib "$SERVER_PID" VmRSS)
  finish
  start catalog "$FLEET" --memory-budget "$BUDGET"
  sleep "$SETTLE"
  ready=$(kib "$SERVER_PID" VmRSS)
  finish
  start resident "$FLEET" --memory-budget 4GiB
  sleep "$SETTLE"
  r0=$(kib "$SERVER_PID" VmRSS)
  ask_all
  sleep "$SETTLE"
  r1=$(kib "$SERVER_PID" VmRSS)
  curl -fsS --max-time 10 -o "$OUT/metrics.txt" "http://$ADMIN_ADDR/metrics"
  counted=$(metric "$OUT/metrics.txt" portfolio_replica_resident_bytes)
  finish
  start none "$FLEET"
  sleep "$SETTLE"
  none=$(kib "$SERVER_PID" VmRSS)
  finish
  awk -v b="$base" -v c="$ready" -v r0="$r0" -v r1="$r1" -v n="$none" -v w="$W" -v j="$JSON_BYTES" \
    -v counted="$counted" -v asked="$ASKED" -v bad="$NOT_OK" 'BEGIN {
    printf "base (budget, no workspace)      %8.1f MiB\n", b / 1024
    printf "catalog at ready                 %8.1f MiB: %.0f bytes a workspace\n", (c - b) / 1024, (c - b) * 1024 / w
    printf "resident, every workspace        %8.1f MiB: %.3f times the JSON (counted %.1f MiB, %.3f)\n",
      (r1 - r0) / 1024, (r1 - r0) * 1024 / j, counted / 1048576, counted / j
    printf "no budget, at ready              %8.1f MiB: (RSS - base) / JSON %.3f\n", n / 1024, (n - b) * 1024 / j
    printf "requests                         %d, %d not 200\n", asked, bad }'
  exit 0
fi

# The prediction (MiB), each term from the formulas.
pred() {
  awk -v base="$BASE_MIB" -v cat="$CATALOG_BYTES" -v key="$KEY_BYTES" -v w="$W" -v b="$BUDGET_BYTES" \
    -v j="$JSON_BYTES" -v l="$LARGEST" -v h="$HEAVY_BYTES" -v head="$HEADROOM" -v rf="$RESIDENT_FACTOR" \
    -v work="$WORK_MIB" -v counted="$COUNTED_FACTOR" -v what="$1" 'BEGIN {
    mib = 1048576; catalog = w * (cat + key) / mib; budget = b / mib
    inflight = 1.3 * h / mib; if (inflight > budget / 4) inflight = budget / 4
    if (inflight < 1.3 * l / mib) inflight = 1.3 * l / mib
    resident = budget; heavy = counted * l / mib; if (heavy > resident) resident = heavy
    now = base + catalog + rf * resident + work
    peak = now + 2 * inflight
    ledger = 32 + budget * 1.25 + w * (4096 + 128) / mib + 1.8 * l / mib
    if (what == "catalog") v = catalog
    if (what == "ready") v = base + catalog
    if (what == "now") v = now
    if (what == "inflight") v = inflight
    if (what == "peak") v = peak
    if (what == "disk") v = j / mib
    if (what == "ledger") v = ledger
    if (what == "limit") { v = (peak + 1.8 * l / mib) * (1 + head); if (v < ledger) v = ledger }
    printf "%.1f\n", v }'
}

LIMIT_MIB=$(pred limit)
LIMIT_BYTES=$(awk -v m="$LIMIT_MIB" 'BEGIN { printf "%.0f", m * 1048576 }')
echo "== prediction: catalog $(pred catalog) MiB ($W x ($CATALOG_BYTES + $KEY_BYTES) bytes), base $BASE_MIB MiB," \
  "budget $BUDGET x $RESIDENT_FACTOR + $WORK_MIB MiB, loads in flight $(pred inflight) MiB (twice);" \
  "--memory-limit $LIMIT_MIB MiB (the ledger's count: $(pred ledger) MiB)"

RESULTS=$OUT/results.txt
: >"$RESULTS"
for ((run = 1; run <= RUNS; run++)); do
  start "check-$run" "$FLEET" --memory-budget "$BUDGET" --memory-limit "$LIMIT_BYTES"
  rss_ready=$(kib "$SERVER_PID" VmRSS)
  hwm_ready=$(kib "$SERVER_PID" VmHWM)
  copies=$(find "$SERVER_TMP" -maxdepth 1 -name 'portfolio-replica-copies-*' -type d | head -1)
  [ -n "$copies" ] || { echo "no portfolio-replica-copies-* directory under $SERVER_TMP" >&2; exit 1; }
  t0=$(date +%s%N)
  ask_all
  t1=$(date +%s%N)
  sleep "$SETTLE"
  rss_now=$(kib "$SERVER_PID" VmRSS)
  hwm=$(kib "$SERVER_PID" VmHWM)
  disk=$(du -sk "$copies" | cut -f1)
  curl -fsS --max-time 10 -o "$OUT/metrics.txt" "http://$ADMIN_ADDR/metrics"
  resident=$(metric "$OUT/metrics.txt" portfolio_replica_resident_bytes)
  loads=$(awk '$1 ~ /^portfolio_replica_demand_loads_total/ { s += $2 } END { print s + 0 }' "$OUT/metrics.txt")
  evictions=$(metric "$OUT/metrics.txt" portfolio_replica_evictions_total)
  refused=$(grep -c 'memory limit' "$OUT/check-$run.log" || true)
  finish
  echo "run $run: $ASKED requests in $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", (b - a) / 1e9 }') s, $NOT_OK not 200;" \
    "$loads loads on demand, $evictions evictions, resident $(awk -v r="$resident" 'BEGIN { printf "%.1f", r / 1048576 }') MiB counted;" \
    "$refused log lines naming the memory limit;" \
    "before the heavy ones at once: RSS $((RSS_MID / 1024)) MiB, VmHWM $((HWM_MID / 1024)) MiB"
  echo "$rss_ready $hwm_ready $rss_now $hwm $disk $NOT_OK" >>"$RESULTS"
done

# The median of each column over the runs, in KiB.
median() { awk -v c="$1" '{ print $c }' "$RESULTS" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
bad=$(awk '{ s += $6 } END { print s }' "$RESULTS")
fail=0
echo
echo "| measure | measured | predicted | ratio |"
echo "| --- | ---: | ---: | ---: |"
row() {
  local label=$1 kib=$2 predicted=$3 check=$4 ratio
  ratio=$(awk -v k="$kib" -v p="$predicted" 'BEGIN { printf "%.3f", k / 1024 / p }')
  local mark=""
  if [ "$check" = yes ] && awk -v r="$ratio" -v t="$TOLERANCE" 'BEGIN { exit !(r < 1 - t || r > 1 + t) }'; then
    mark=" (off by more than $TOLERANCE)"
    fail=1
  fi
  printf '| %s | %s MiB | %s MiB | %s%s |\n' "$label" "$(awk -v k="$kib" 'BEGIN { printf "%.1f", k / 1024 }')" "$predicted" "$ratio" "$mark"
}
row "RSS at ready (base + catalog)" "$(median 1)" "$(pred ready)" yes
row "VmHWM at ready (the first scan), beside the limit" "$(median 2)" "$LIMIT_MIB" no
row "RSS after every workspace (base + catalog + budget x factor + work)" "$(median 3)" "$(pred now)" yes
row "VmHWM after (+ 2 x loads in flight)" "$(median 4)" "$(pred peak)" yes
row "disk of the private copies (the JSON)" "$(median 5)" "$(pred disk)" yes
row "VmHWM against the memory limit" "$(median 4)" "$LIMIT_MIB" no
echo
if [ "$bad" -gt 0 ]; then
  echo "FAIL: $bad requests not answered 200" >&2
  fail=1
fi
if [ "$fail" -ne 0 ]; then
  echo "FAIL: a prediction is off by more than $TOLERANCE, or requests failed" >&2
  exit 1
fi
echo "ok: every prediction within $TOLERANCE ($RUNS run(s), medians)"
