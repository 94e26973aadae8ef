#!/usr/bin/env bash
# HTTP load benchmark: our release server against the limit.
#
#   scripts/load-bench.sh [DATA_DIR]     (default: bench-data/ in the repository, git-ignored)
#
# Serves the `large` snapshot (generated into DATA_DIR/snap if missing: ~1 GB,
# ~1.12 M tasks) from the release server, captures one response per endpoint,
# serves those exact bytes from examples/hyper_baseline.rs (a bare hyper 1
# server: the ceiling for any Rust server here), and drives both with wrk,
# one URL at a time, once plain and once with `Accept-Encoding: gzip` (the
# baseline then sends our gzip bytes). Then a mixed-client run: MIXED_PAGES
# random pages of /tasks across the whole list, half of the requests asking
# for gzip (a wrk Lua script), against both servers. Each server is pinned
# to CPU 0 (one tokio worker), wrk to CPU 1. For context, json-server 0.17
# serves the first 10,000 tasks and is driven the same way on its first page.
# Prints Markdown tables: req/s, latency percentiles, server CPU per request
# (utime+stime from /proc), peak RSS (VmHWM), how busy each core was, and how
# much of each went to anything else (the noise indicator: other processes,
# steal, the kernel's own work).
#
# Environment: BIN (the server binary, default the release build), SCALE (the generated dataset, `large` by default; `medium`
# loads in a second), ONLY (the names of the URLs to measure, space-separated,
# default all; MIXED_PAGES=0 skips the mixed run), SERVER_ARGS (our server's flags, default `--precompress on`:
# gzip answers from precompressed records; `--precompress off` measures
# gzip compressed per request), DURATION (s per wrk run, default 10),
# CONNECTIONS (default 64),
# WARMUP (s of unmeasured wrk per server and URL first, default 2),
# MIXED_PAGES (pages in the mixed run, default 400), PORT,
# ADMIN, BASE_PORT, JSON_PORT (loopback ports), SKIP_JSON_SERVER=1,
# NOISE_LIMIT (% of either core used by others above which a run is repeated,
# default 10), RETRIES (how many times at most, default 2; the cleanest
# attempt is kept, and any still above the limit is named at the end).
# Needs wrk (apt-get install wrk), curl, jq, taskset, and node/npm for
# json-server. Loopback only; about ten minutes with the defaults on a quiet
# machine, at most three times that on a busy one (plus our server's start:
# /readyz waits for the records to be precompressed, ~35 s on one core). Every process it starts is
# killed on exit. Raw wrk output, per-run figures (runs.tsv, every attempt)
# and server logs are kept in DATA_DIR/load-bench/.
set -euo pipefail
DATA=bench-data
[ $# -eq 0 ] || DATA=$(realpath -m -- "$1") # relative to where we were called
cd "$(dirname "$0")/.."

DURATION=${DURATION:-10}
CONNECTIONS=${CONNECTIONS:-64}
WARMUP=${WARMUP:-2}
NOISE_LIMIT=${NOISE_LIMIT:-10}
RETRIES=${RETRIES:-2}
MIXED_PAGES=${MIXED_PAGES:-400}
SCALE=${SCALE:-large}
ONLY=${ONLY:-}
BIN=${BIN:-target/release/portfolio-replica} # another build of the server, to compare
SERVER_ARGS=${SERVER_ARGS:---precompress on}
PORT=${PORT:-18580}
ADMIN=${ADMIN:-18590}
BASE_PORT=${BASE_PORT:-18581}
JSON_PORT=${JSON_PORT:-18582}
SERVER_CPU=0
WRK_CPU=1

echo "# load-bench $(date -u '+%Y-%m-%dT%H:%M:%SZ')"
echo "# command: BIN=$BIN SCALE=$SCALE ONLY='$ONLY' SERVER_ARGS='$SERVER_ARGS' DURATION=$DURATION CONNECTIONS=$CONNECTIONS WARMUP=$WARMUP MIXED_PAGES=$MIXED_PAGES NOISE_LIMIT=$NOISE_LIMIT RETRIES=$RETRIES $0 $*"
echo "# commit: $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet HEAD 2>/dev/null || echo ' (dirty tree)')"
echo "# machine: $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')), $(uname -sr)"

missing=()
for tool in wrk curl jq taskset gzip; do
  command -v "$tool" >/dev/null || missing+=("$tool")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "missing: ${missing[*]} (Debian: apt-get install wrk curl jq util-linux)" >&2
  exit 1
fi
echo "# wrk: $(wrk -v 2>&1 | head -1)"

# Every process we start goes in PIDS; all are killed on exit, by PID.
# shellcheck source=scripts/lib.sh
source scripts/lib.sh
# shellcheck source=scripts/endpoints-lib.sh
source scripts/endpoints-lib.sh

cargo build --release --bins --examples --quiet
BASELINE=target/release/examples/hyper_baseline

bench_dataset "$SCALE" "$DATA" "$BIN"
AUTH="Authorization: Bearer $KEY"
OUT="$DATA/load-bench"
CAP="$OUT/captured"
rm -rf "$CAP"
mkdir -p "$OUT" "$CAP"

# Waits until URL answers 200, up to $2 seconds, or fails.
# Worker threads of a tokio runtime (default thread name).
workers_of() { grep -lE '^tokio-(rt-worker|runtime-w)$' /proc/"$1"/task/*/comm 2>/dev/null | wc -l; }
# utime+stime of a process, in clock ticks.
cpu_ticks() { sed 's/.*) //' /proc/"$1"/stat | awk '{print $12 + $13}'; }
# Busy ticks of one CPU (all but idle and iowait), from /proc/stat. Softirq
# time counts too: part of it is charged to the server's stime as well. The
# kernel's loopback work that runs outside the server (ksoftirqd) then reads
# as "others": negligible for small responses, ~25% for /roles' 2.6 GB/s.
cpu_busy() { awk -v c="cpu$1" '$1 == c {print $2 + $3 + $4 + $7 + $8 + $9}' /proc/stat; }
hwm_mib() { awk '/^VmHWM/ {printf "%d", $2 / 1024}' /proc/"$1"/status; }
rss_mib() { awk '/^VmRSS/ {printf "%d", $2 / 1024}' /proc/"$1"/status; }
TICKS=$(getconf CLK_TCK)

echo
echo "== starting our server on CPU $SERVER_CPU ($SNAP)"
loading=$(date +%s.%N)
# shellcheck disable=SC2086 # SERVER_ARGS is a list of flags
taskset -c $SERVER_CPU $BIN --snapshots "$SNAP" --listen "127.0.0.1:$PORT" \
  --admin-listen "127.0.0.1:$ADMIN" $SERVER_ARGS 2>"$OUT/server.log" &
OURS=$!
PIDS+=("$OURS")
wait_ready "http://127.0.0.1:$PORT/readyz" 600
echo "ready after $(awk -v a="$loading" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}') s;" \
  "RSS $(rss_mib $OURS) MiB, VmHWM $(hwm_mib $OURS) MiB, $(workers_of $OURS) tokio worker(s)"

API=http://127.0.0.1:$PORT
get() { curl -sf -H "$AUTH" "$API$1"; }

# The URLs (endpoints-lib.sh). Paths are sent by wrk exactly as written.
bench_endpoints
NAMES=("${ENDPOINT_NAMES[@]}") PATHS=("${ENDPOINT_PATHS[@]}")
if [ -n "$ONLY" ]; then
  only_names=() only_paths=()
  for i in "${!NAMES[@]}"; do
    case " $ONLY " in *" ${NAMES[$i]} "*) only_names+=("${NAMES[$i]}") only_paths+=("${PATHS[$i]}") ;; esac
  done
  [ ${#only_names[@]} -gt 0 ] || { echo "ONLY names none of: ${NAMES[*]}" >&2; exit 2; }
  NAMES=("${only_names[@]}") PATHS=("${only_paths[@]}")
fi
# The mixed run: MIXED_PAGES offsets spread at random over the whole list.
TASKS=$(curl -sf "http://127.0.0.1:$ADMIN/snapshots" | jq '[.files[].records.tasks] | max')
MIXED=$(awk -v n="$TASKS" -v k="$MIXED_PAGES" 'BEGIN {
    srand(42); for (i = 0; i < k; i++) printf "/tasks?limit=50&offset=%d\n", int(rand() * (n - 50)) }')

echo
echo "== capturing responses into $CAP"
: >"$CAP/index.tsv"
# capture NAME PATH [curl args]: one response into CAP and its index line.
capture() {
  local name=$1 path=$2 status headers
  shift 2
  status=$(curl -s -H "$AUTH" "$@" -D "$CAP/$name.headers" -o "$CAP/$name.body" -w '%{http_code}' "$API$path")
  [ "$status" = 200 ] || { echo "$path: HTTP $status" >&2; exit 1; }
  # Every response header but those hyper writes itself (length, date).
  headers=$(awk 'NR > 1 {
      sub(/\r$/, "")
      name = tolower(substr($0, 1, index($0, ":") - 1))
      if (name != "" && name !~ /^(content-length|date|connection|keep-alive|transfer-encoding)$/) printf "\t%s", $0
    }' "$CAP/$name.headers")
  grep -qi '^x-snapshot-version:' "$CAP/$name.headers" || { echo "$path: no X-Snapshot-Version" >&2; exit 1; }
  printf '%s\t%s%s\n' "$path" "$name.body" "$headers" >>"$CAP/index.tsv"
}
for i in "${!NAMES[@]}"; do
  name=${NAMES[$i]} path=${PATHS[$i]}
  capture "$name" "$path"
  capture "$name.gz" "$path" -H "Accept-Encoding: gzip"
  grep -qi '^content-encoding: gzip' "$CAP/$name.gz.headers" || { echo "$path: not gzipped" >&2; exit 1; }
  gzip -dc <"$CAP/$name.gz.body" | cmp -s - "$CAP/$name.body" ||
    { echo "$path: the gzip body does not decode to the plain one" >&2; exit 1; }
  printf '  %-14s %8d bytes, gzip %7d  %s\n' "$name" "$(stat -c %s "$CAP/$name.body")" \
    "$(stat -c %s "$CAP/$name.gz.body")" "$path"
done
: >"$OUT/mixed.paths"
n=0
while read -r path; do
  n=$((n + 1))
  capture "mixed-$n" "$path"
  capture "mixed-$n.gz" "$path" -H "Accept-Encoding: gzip"
  gzip -dc <"$CAP/mixed-$n.gz.body" | cmp -s - "$CAP/mixed-$n.body" ||
    { echo "$path: the gzip body does not decode to the plain one" >&2; exit 1; }
  echo "$path" >>"$OUT/mixed.paths"
done < <([ "$MIXED_PAGES" -eq 0 ] || echo "$MIXED")
[ "$MIXED_PAGES" -eq 0 ] ||
  echo "  mixed: $n pages of /tasks?limit=50 at random offsets below $TASKS;" \
    "$(cat "$CAP"/mixed-*[0-9].body | wc -c) bytes plain, $(cat "$CAP"/mixed-*.gz.body | wc -c) gzip"

echo "== starting hyper_baseline on CPU $SERVER_CPU"
taskset -c $SERVER_CPU $BASELINE "$CAP" --listen "127.0.0.1:$BASE_PORT" --workers 1 2>"$OUT/baseline.log" &
BASE=$!
PIDS+=("$BASE")
BASE_API=http://127.0.0.1:$BASE_PORT
wait_ready "$BASE_API${PATHS[0]}" 30
# The response heads, less the date, sorted: must be the same for both.
head_of() { curl -s -H "$AUTH" "${@:2}" -o /dev/null -D - "$1" | tr -d '\r' | grep -vi '^date:' | sort; }
for i in "${!NAMES[@]}"; do
  for gz in "" ".gz"; do
    ae=()
    [ -z "$gz" ] || ae=(-H "Accept-Encoding: gzip")
    curl -s "${ae[@]}" "$BASE_API${PATHS[$i]}" | cmp -s - "$CAP/${NAMES[$i]}$gz.body" ||
      { echo "baseline body differs for ${PATHS[$i]} ${ae[*]}" >&2; exit 1; }
    [ "$(head_of "$BASE_API${PATHS[$i]}" "${ae[@]}")" = "$(head_of "$API${PATHS[$i]}" "${ae[@]}")" ] ||
      { echo "baseline headers differ for ${PATHS[$i]} ${ae[*]}:" >&2; diff <(head_of "$API${PATHS[$i]}" "${ae[@]}") <(head_of "$BASE_API${PATHS[$i]}" "${ae[@]}") >&2; exit 1; }
  done
done
echo "same status, headers (but Date) and body for all ${#NAMES[@]} URLs, plain and gzip; $(workers_of $BASE) tokio worker(s)"

# wrk's summary as one line: requests duration_us p50 p99 p99.9 (µs) and errors.
LUA="$OUT/summary.lua"
cat >"$LUA" <<'EOF'
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("SUMMARY %d %d %d %d %d %d %d\n", summary.requests, summary.duration,
    latency:percentile(50), latency:percentile(99), latency:percentile(99.9),
    e.connect + e.read + e.write + e.timeout, e.status))
end
EOF
# The mixed clients: every page of MIXED_LIST twice, plain and with
# Accept-Encoding: gzip, in one shuffled order (the same for every run),
# requests formatted once in init so that wrk spends nothing per request.
MIXED_LUA="$OUT/mixed.lua"
{
  cat <<'EOF'
local requests, n = {}, 0
init = function(args)
  local auth = wrk.headers["Authorization"]
  for path in io.lines(os.getenv("MIXED_LIST")) do
    requests[#requests + 1] = wrk.format("GET", path, {["Authorization"] = auth})
    requests[#requests + 1] = wrk.format("GET", path, {["Authorization"] = auth, ["Accept-Encoding"] = "gzip"})
  end
  math.randomseed(42)
  for i = #requests, 2, -1 do
    local j = math.random(i)
    requests[i], requests[j] = requests[j], requests[i]
  end
end
request = function()
  n = n % #requests + 1
  return requests[n]
end
EOF
  cat "$LUA"
} >"$MIXED_LUA"
export MIXED_LIST="$OUT/mixed.paths"

# run_wrk NAME PID URL [wrk args]: one measured wrk run (after a warm-up run
# with the same args: a header, the mixed script). Sets REQS
# RPS P50 P99 P999 (µs) ERRS (socket errors) NON2XX, CPU_US (server CPU per
# request), SRV_PCT and WRK_PCT (how busy the server's and wrk's cores were
# with them, % of one core), OTHER0 and OTHER1 (how busy CPU 0 and CPU 1 were
# with anything else: other processes, steal, kernel threads) and OTHER_PCT,
# the larger of the two: the noise indicator.
run_wrk() {
  local name=$1 pid=$2 url=$3 before after s0 s1 w0 w1 t0 t1 wrk_time line dur
  shift 3
  local args=(-s "$LUA" "$@")
  if [ "$WARMUP" -gt 0 ]; then
    taskset -c $WRK_CPU wrk -t1 -c"$CONNECTIONS" -d"${WARMUP}s" -H "$AUTH" "${args[@]}" "$url" >/dev/null
  fi
  local TIMEFORMAT='%U %S'
  before=$(cpu_ticks "$pid") s0=$(cpu_busy $SERVER_CPU) w0=$(cpu_busy $WRK_CPU) t0=$(date +%s%N)
  wrk_time=$({ time taskset -c $WRK_CPU wrk -t1 -c"$CONNECTIONS" -d"${DURATION}s" --latency \
    -H "$AUTH" "${args[@]}" "$url" >"$OUT/$name.wrk" 2>&1; } 2>&1)
  t1=$(date +%s%N) after=$(cpu_ticks "$pid") s1=$(cpu_busy $SERVER_CPU) w1=$(cpu_busy $WRK_CPU)
  line=$(grep '^SUMMARY ' "$OUT/$name.wrk")
  read -r _ REQS dur P50 P99 P999 ERRS NON2XX <<<"$line"
  read -r RPS CPU_US SRV_PCT WRK_PCT OTHER0 OTHER1 OTHER_PCT < <(awk -v r="$REQS" -v d="$dur" \
    -v t=$((after - before)) -v b0=$((s1 - s0)) -v b1=$((w1 - w0)) -v hz="$TICKS" -v w=$((t1 - t0)) \
    -v wt="$wrk_time" \
    'BEGIN {
      split(wt, u, " "); wall = w / 1e9
      o0 = (b0 - t) / hz / wall * 100; o1 = (b1 / hz - u[1] - u[2]) / wall * 100
      printf "%.0f %.1f %.0f %.0f %.0f %.0f %.0f\n", r / (d / 1e6), t / hz * 1e6 / r, t / hz / wall * 100,
        (u[1] + u[2]) / wall * 100, o0, o1, (o0 > o1 ? o0 : o1)
    }')
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$REQS" "$RPS" "$P50" "$P99" "$P999" \
    "$ERRS" "$NON2XX" "$CPU_US" "$SRV_PCT" "$WRK_PCT" "$OTHER0" "$OTHER1" >>"$OUT/runs.tsv"
}
# measure NAME PID URL [wrk args]: run_wrk, run again (up to RETRIES more times) while
# either core was busy with others for more than NOISE_LIMIT % of the run, and keep
# the cleanest attempt; a run still noisy after that is listed in NOISY.
NOISY=
measure() {
  local name=$1 attempt run best='' best_other=
  for ((attempt = 0; attempt <= RETRIES; attempt++)); do
    run=$name
    [ "$attempt" -eq 0 ] || run="$name.retry$attempt"
    run_wrk "$run" "$2" "$3" "${@:4}"
    if [ -z "$best_other" ] || [ "$OTHER_PCT" -lt "$best_other" ]; then
      best_other=$OTHER_PCT
      best="$REQS $RPS $P50 $P99 $P999 $ERRS $NON2XX $CPU_US $SRV_PCT $WRK_PCT $OTHER0 $OTHER1 $OTHER_PCT"
    fi
    [ "$OTHER_PCT" -gt "$NOISE_LIMIT" ] || break
    echo "  ($run: CPU $SERVER_CPU / CPU $WRK_CPU were $OTHER0% / $OTHER1% busy with others)"
  done
  read -r REQS RPS P50 P99 P999 ERRS NON2XX CPU_US SRV_PCT WRK_PCT OTHER0 OTHER1 OTHER_PCT <<<"$best"
  [ "$OTHER_PCT" -le "$NOISE_LIMIT" ] || NOISY="$NOISY $name (${OTHER_PCT}%)"
}
ms() { awk -v u="$1" 'BEGIN {printf "%.2f", u / 1000}'; }

echo
echo "== wrk -t1 -c$CONNECTIONS -d${DURATION}s on CPU $WRK_CPU, one URL at a time (ours, then baseline; plain, then gzip)"
printf 'run\trequests\treq/s\tp50_us\tp99_us\tp99.9_us\tsocket_errors\tnon2xx\tserver_cpu_us_per_req\tserver_core_pct\twrk_core_pct\tcpu%s_other_pct\tcpu%s_other_pct\n' \
  "$SERVER_CPU" "$WRK_CPU" >"$OUT/runs.tsv"
# pair NAME URL_PATH [wrk args]: ours, then the baseline, on the same
# requests; sets ROW (a Markdown row: req/s and their ratio, latency, CPU
# per request, busy cores, errors), O_RPS and O_CPU (ours), RATIO and LINE
# (for the progress output).
pair() {
  local name=$1 path=$2 o_rps o_lat o_cpu o_err o_srv o_wrk o_other
  shift 2
  measure "ours-$name" "$OURS" "$API$path" "$@"
  o_rps=$RPS o_lat="$(ms "$P50") / $(ms "$P99") / $(ms "$P999")" o_cpu=$CPU_US o_err="$ERRS / $NON2XX"
  o_srv=$SRV_PCT o_wrk=$WRK_PCT o_other="$OTHER0 / $OTHER1"
  measure "baseline-$name" "$BASE" "$BASE_API$path" "$@"
  RATIO=$(awk -v a="$o_rps" -v b="$RPS" 'BEGIN {printf "%.2f", a / b}')
  ROW="$o_rps | $RPS | $RATIO | $o_lat | $(ms "$P50") / $(ms "$P99") / $(ms "$P999") | $o_cpu | $CPU_US | $o_srv / $SRV_PCT | $o_wrk / $WRK_PCT | $o_other; $OTHER0 / $OTHER1 | $o_err | $ERRS / $NON2XX"
  O_RPS=$o_rps O_CPU=$o_cpu
  LINE=$(printf '%-17s ours %7s req/s  baseline %7s req/s  (%s)  CPUs busy with others (%%): ours %s, baseline %s' \
    "$name" "$o_rps" "$RPS" "$RATIO" "$o_other" "$OTHER0 / $OTHER1")
}
ROWS=() GZIP_ROWS=()
declare -A OUR_RPS
for i in "${!NAMES[@]}"; do
  name=${NAMES[$i]} path=${PATHS[$i]}
  pair "$name" "$path"
  plain_rps=$O_RPS plain_cpu=$O_CPU
  OUR_RPS[$name]=$O_RPS
  ROWS+=("| $name | $ROW |")
  echo "  $LINE"
  pair "$name.gz" "$path" -H "Accept-Encoding: gzip"
  GZIP_ROWS+=("| $name | $(stat -c %s "$CAP/$name.gz.body") | $(awk -v a="$O_RPS" -v b="$plain_rps" 'BEGIN {printf "%.2f", a / b}') | $(awk -v a="$O_CPU" -v b="$plain_cpu" 'BEGIN {printf "%+.1f", a - b}') | $ROW |")
  echo "  $LINE"
done
MIXED_ROW=
if [ "$MIXED_PAGES" -gt 0 ]; then
  echo
  echo "== the mixed run: $MIXED_PAGES pages of /tasks at random offsets, half of the requests with Accept-Encoding: gzip"
  pair mixed "/tasks" -s "$MIXED_LUA"
  MIXED_ROW="| $MIXED_PAGES pages of \`/tasks?limit=50\` at random offsets, half gzip | $ROW |"
  echo "  $LINE"
fi

JSON_LINE=
if [ "${SKIP_JSON_SERVER:-0}" != 1 ]; then
  echo
  echo "== json-server 0.17 (first 10,000 tasks) on CPU $SERVER_CPU"
  JS="$DATA/json-server"
  if [ ! -x "$JS/node_modules/.bin/json-server" ]; then
    command -v npm >/dev/null || { echo "npm is needed for json-server (or SKIP_JSON_SERVER=1)" >&2; exit 1; }
    mkdir -p "$JS"
    (cd "$JS" && npm install --no-audit --no-fund --loglevel=error json-server@0.17 >/dev/null)
  fi
  for ((offset = 0; offset < 10000; offset += 100)); do
    get "/tasks?limit=100&offset=$offset"
  done | jq -s '{tasks: [.[].data[]]}' >"$JS/db.json"
  taskset -c $SERVER_CPU "$JS/node_modules/.bin/json-server" --quiet --host 127.0.0.1 \
    --port "$JSON_PORT" "$JS/db.json" >"$OUT/json-server.log" 2>&1 &
  JSON_PID=$!
  PIDS+=("$JSON_PID")
  wait_ready "http://127.0.0.1:$JSON_PORT/tasks?_page=1&_limit=50" 60
  echo "$(jq '.tasks | length' "$JS/db.json") tasks in db.json;" \
    "json-server $("$JS/node_modules/.bin/json-server" --version), node $(node --version)"
  measure json-server "$JSON_PID" "http://127.0.0.1:$JSON_PORT/tasks?_page=1&_limit=50"
  # shellcheck disable=SC2016 # backquotes are Markdown
  JSON_LINE=$(printf '| json-server 0.17.4, `/tasks?_page=1&_limit=50` on 10,000 tasks | %s | %s | %s | %s | %s | %s | %s | %s |' \
    "$RPS" "$(awk -v a="${OUR_RPS[tasks-first]}" -v b="$RPS" 'BEGIN {printf "%.0fx", a / b}')" \
    "$(ms "$P50") / $(ms "$P99") / $(ms "$P999")" "$CPU_US" "$SRV_PCT" "$WRK_PCT" "$OTHER0 / $OTHER1" "$ERRS / $NON2XX")
fi

echo
echo "== results ($(date -u '+%Y-%m-%dT%H:%M:%SZ'); wrk -t1 -c$CONNECTIONS -d${DURATION}s --latency, servers on CPU $SERVER_CPU, wrk on CPU $WRK_CPU)"
echo
COLUMNS="ours req/s | baseline req/s | ours / baseline | ours p50 / p99 / p99.9 ms | baseline p50 / p99 / p99.9 ms | ours CPU µs/req | baseline CPU µs/req | server core busy % (ours / baseline) | wrk core busy % (ours / baseline) | CPU $SERVER_CPU / CPU $WRK_CPU busy with others %, ours; baseline | ours socket errors / non-2xx | baseline socket errors / non-2xx"
ALIGN="---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---:"
echo "Plain (no Accept-Encoding):"
echo
echo "| endpoint | $COLUMNS |"
echo "| --- | $ALIGN |"
printf '%s\n' "${ROWS[@]}"
echo
echo "gzip (Accept-Encoding: gzip; the baseline sends the same gzip bytes):"
echo
echo "| endpoint | gzip bytes | ours gzip / ours plain req/s | ours CPU µs/req, gzip - plain | $COLUMNS |"
echo "| --- | ---: | ---: | ---: | $ALIGN |"
printf '%s\n' "${GZIP_ROWS[@]}"
if [ -n "$MIXED_ROW" ]; then
  echo
  echo "Mixed clients (both servers get the same requests; the baseline answers from the captured bytes):"
  echo
  echo "| run | $COLUMNS |"
  echo "| --- | $ALIGN |"
  echo "$MIXED_ROW"
fi
echo
for i in "${!NAMES[@]}"; do
  # shellcheck disable=SC2016 # backquotes are Markdown
  printf -- '- %s: `%s`, %d bytes, gzip %d\n' "${NAMES[$i]}" "${PATHS[$i]}" "$(stat -c %s "$CAP/${NAMES[$i]}.body")" \
    "$(stat -c %s "$CAP/${NAMES[$i]}.gz.body")"
done
if [ -n "$JSON_LINE" ]; then
  echo
  echo "| context | req/s | ours tasks-first / it | p50 / p99 / p99.9 ms | CPU µs/req | server core busy % | wrk core busy % | CPU $SERVER_CPU / CPU $WRK_CPU busy with others % | socket errors / non-2xx |"
  echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
  echo "$JSON_LINE"
fi
echo
echo "our server: VmHWM $(hwm_mib "$OURS") MiB (the peak), VmRSS $(rss_mib "$OURS") MiB now;" \
  "baseline: VmHWM $(hwm_mib "$BASE") MiB"
echo "our server's log: $(grep -c ' ERROR ' "$OUT/server.log" || true) ERROR and $(grep -c ' WARN ' "$OUT/server.log" || true) WARN lines ($OUT/server.log)"
echo "raw wrk output: $OUT/*.wrk; every run: $OUT/runs.tsv"
if [ -n "$NOISY" ]; then
  echo "WARNING: even after $RETRIES retries, a core was busy with other work for more than" \
    "$NOISE_LIMIT% of these runs:$NOISY; their figures are not clean: rerun on a quiet machine"
fi
