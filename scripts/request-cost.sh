#!/usr/bin/env bash
# What one request costs the server, endpoint by endpoint, for several builds
# (or flags) side by side, measured two ways that a busy machine disturbs
# little:
#
#   scripts/request-cost.sh [NAME=BINARY[ FLAG...]]...
#
#   scripts/request-cost.sh \
#     16169e1=../wt-16169e1/target/release/portfolio-replica \
#     main=../wt-base/target/release/portfolio-replica \
#     ours=target/release/portfolio-replica \
#     'limits=target/release/portfolio-replica --rate-limit 1000000 --max-in-flight 1000'
#
# Each argument is a build: a name, `=`, the server binary and any flags of
# its own (added to SERVER_ARGS); `@trust-key@` in them stands for a public
# key the script makes, and a build with `--trust-key` serves a copy of the
# data set signed with it. Default: the release build alone, as `ours`.
#
# 1. Instructions (callgrind). Each build runs under `valgrind
#    --tool=callgrind`, counting only once it is ready; for each endpoint,
#    CG_WARM requests, then exactly CG_REQUESTS over one keep-alive
#    connection (curl), counted between two `callgrind_control --dump`s.
#    User-space instructions per request, to about 0.1% from one run to
#    the next whatever else the machine does; what the kernel does for the
#    request (the same system calls for every build here) is not in them.
# 2. CPU time. Every build runs at once, each pinned to CPU 0 (idle but
#    for the one being driven); in each of ROUNDS rounds, for each
#    endpoint, each build in turn (A B C A B C ...) gets WARMUP s of
#    unmeasured wrk and DURATION s measured (`wrk -t1 -cCONNECTIONS` on CPU
#    1). CPU per request is the server's time on a CPU (the sum of its
#    threads' /proc/PID/task/*/schedstat, nanoseconds: user and kernel)
#    over wrk's completed requests; the table gives the median of the
#    rounds and their spread. Interleaved, so that what others do to the
#    machine in one minute falls on every build alike.
#
# The data set and the endpoints are load-bench.sh's (`generate --seed 42`,
# its ten URLs from scripts/endpoints-lib.sh, plain and with `Accept-Encoding: gzip`), at SCALE `medium`
# by default: ~100 MB, ready in seconds, even under valgrind (`large`, the
# issue's size class, is ~1 GB and takes minutes there). Before measuring,
# every build's answer to every URL is compared with the first build's
# (status, headers but Date, body): a difference is printed.
#
# Environment: SCALE (medium or large), DATA (default bench-data/),
# SERVER_ARGS (every build's flags, default `--precompress on`), ONLY
# (endpoint names, space-separated, as load-bench.sh's; `.gz` ones too),
# CG_REQUESTS (default 300; 0 skips callgrind), CG_WARM (default 50),
# ROUNDS (default 3; 0 skips the CPU time), DURATION (s, default 3),
# WARMUP (s, default 1), CONNECTIONS (default 64), QUIET_WAIT (s a build
# may take, once ready, to go idle: default 600), PORT (the first build's
# port; the others follow, and the admin ports from PORT+100).
# Needs valgrind, wrk, curl, jq, taskset. Every process it starts is
# stopped on exit; raw figures are kept in DATA/request-cost/.
set -euo pipefail
DATA=${DATA:-bench-data}
DATA=$(realpath -m -- "$DATA") # relative to where we were called
cd "$(dirname "$0")/.."

SCALE=${SCALE:-medium}
SERVER_ARGS=${SERVER_ARGS:---precompress on}
ONLY=${ONLY:-}
CG_REQUESTS=${CG_REQUESTS:-300}
CG_WARM=${CG_WARM:-50}
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-3}
WARMUP=${WARMUP:-1}
CONNECTIONS=${CONNECTIONS:-64}
PORT=${PORT:-18780}
QUIET_WAIT=${QUIET_WAIT:-600}
SERVER_CPU=0
CLIENT_CPU=1

missing=()
for tool in valgrind callgrind_control wrk curl jq taskset; do
  command -v "$tool" >/dev/null || missing+=("$tool")
done
[ ${#missing[@]} -eq 0 ] ||
  { echo "missing: ${missing[*]} (Debian: apt-get install valgrind wrk curl jq util-linux)" >&2 && exit 1; }

# shellcheck source=scripts/lib.sh
source scripts/lib.sh
# shellcheck source=scripts/endpoints-lib.sh
source scripts/endpoints-lib.sh

[ $# -gt 0 ] || set -- "ours=target/release/portfolio-replica"
NAMES=() BINS=() ARGS=()
for spec in "$@"; do
  name=${spec%%=*} rest=${spec#*=}
  [ "$name" != "$spec" ] && [ -n "$rest" ] || { echo "a build is NAME=BINARY[ FLAG...]: $spec" >&2 && exit 2; }
  read -r bin flags <<<"$rest"
  [ -x "$bin" ] || { echo "$name: no executable $bin" >&2 && exit 1; }
  NAMES+=("$name") BINS+=("$(realpath "$bin")") ARGS+=("${flags:-}")
done

bench_dataset "$SCALE" "$DATA" "${BINS[0]}"
AUTH="Authorization: Bearer $KEY"
OUT="$DATA/request-cost"
mkdir -p "$OUT"
# A signed copy, for builds with --trust-key: the signature's key is made
# afresh, and the file is linked, not copied.
SIGNED="$OUT/signed"
TRUST_KEY="$OUT/trust.pub"
for i in "${!NAMES[@]}"; do
  [[ " ${ARGS[$i]} " == *" --trust-key "* ]] || continue
  # Made by the first build that trusts keys (older ones cannot sign).
  rm -rf "$SIGNED" "$OUT/trust.key" "$TRUST_KEY"
  mkdir -p "$SIGNED"
  ln "$SNAP_FILE" "$SIGNED/" 2>/dev/null || cp "$SNAP_FILE" "$SIGNED/"
  "${BINS[$i]}" keygen --out "$OUT/trust" >/dev/null
  "${BINS[$i]}" sign --sign-key "$OUT/trust.key" "$SIGNED" >/dev/null
  break
done

echo "# request-cost $(date -u '+%Y-%m-%dT%H:%M:%SZ')"
echo "# command: SCALE=$SCALE SERVER_ARGS='$SERVER_ARGS' ONLY='$ONLY' CG_REQUESTS=$CG_REQUESTS CG_WARM=$CG_WARM ROUNDS=$ROUNDS DURATION=$DURATION WARMUP=$WARMUP CONNECTIONS=$CONNECTIONS $0$(printf " '%s'" "$@")"
echo "# commit: $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet HEAD 2>/dev/null || echo ' (dirty tree)')"
echo "# machine: $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')), $(uname -sr); load average $(cut -d' ' -f1-3 /proc/loadavg)"
for i in "${!NAMES[@]}"; do
  echo "# ${NAMES[$i]}: ${BINS[$i]} $SERVER_ARGS ${ARGS[$i]}"
done

# start I [valgrind args...]: build I on CPU 0, its PID in STARTED.
start() {
  local i=$1 snap=$SNAP flags
  shift
  flags=${ARGS[$i]//@trust-key@/$TRUST_KEY}
  [[ " $flags " != *" --trust-key "* ]] || snap=$SIGNED
  # shellcheck disable=SC2086 # SERVER_ARGS and flags are lists of flags
  taskset -c $SERVER_CPU "$@" "${BINS[$i]}" --snapshots "$snap" --listen "127.0.0.1:$((PORT + i))" \
    --admin-listen "127.0.0.1:$((PORT + 100 + i))" $SERVER_ARGS $flags 2>"$OUT/${NAMES[$i]}.log" &
  STARTED=$!
  PIDS+=("$STARTED")
  wait_ready "http://127.0.0.1:$((PORT + i))/readyz" 900 "$STARTED" ||
    { tail -5 "$OUT/${NAMES[$i]}.log" >&2 && exit 1; }
  # Ready is not idle: with a memory budget, records are precompressed in
  # the background after /readyz says ready. Measured only once the server
  # spends under 2% of a core for a second (at most QUIET_WAIT s).
  local waited before after
  for ((waited = 0; waited < QUIET_WAIT; waited++)); do
    before=$(cpu_ns "$STARTED")
    sleep 1
    after=$(cpu_ns "$STARTED")
    [ $((after - before)) -gt 20000000 ] || return 0
  done
  echo "  ${NAMES[$i]} still busy after ${QUIET_WAIT}s: measured anyway" >&2
}
api() { echo "http://127.0.0.1:$((PORT + $1))"; }
# The time a process has spent on a CPU, all its threads, in nanoseconds.
cpu_ns() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{ns += $1} END {printf "%.0f\n", ns}'; }

# The URLs: load-bench.sh's (endpoints-lib.sh).
start 0
get() { curl -sf -H "$AUTH" "$(api 0)$1"; }
bench_endpoints
stop "$STARTED"
URL_NAMES=() URL_PATHS=() URL_GZIP=()
for i in "${!ENDPOINT_NAMES[@]}"; do
  for gz in "" .gz; do
    name=${ENDPOINT_NAMES[$i]}$gz
    case " ${ONLY:-$name} " in *" $name "*) URL_NAMES+=("$name") URL_PATHS+=("${ENDPOINT_PATHS[$i]}") URL_GZIP+=("$gz") ;; esac
  done
done
[ ${#URL_NAMES[@]} -gt 0 ] || { echo "ONLY names no endpoint" >&2 && exit 2; }
# encoding U: the request headers of URL U beside the key, as curl arguments.
encoding() { [ -z "${URL_GZIP[$1]}" ] || echo "-HAccept-Encoding:gzip"; }

# answer I U: build I's answer to URL U: status line and headers but Date,
# sorted, then the body's checksum.
answer() {
  local head
  # shellcheck disable=SC2046 # encoding is one word or none
  head=$(curl -s -H "$AUTH" $(encoding "$2") -D - -o "$OUT/body.$1" "$(api "$1")${URL_PATHS[$2]}")
  tr -d '\r' <<<"$head" | grep -vi '^date:' | sort
  sha256sum <"$OUT/body.$1"
}

# Instructions: one build at a time under callgrind.
declare -A IR
if [ "$CG_REQUESTS" -gt 0 ]; then
  echo
  echo "== instructions: callgrind, $CG_WARM requests, then $CG_REQUESTS counted, one connection, per endpoint"
  for i in "${!NAMES[@]}"; do
    rm -f "$OUT/callgrind.${NAMES[$i]}".*
    loading=$(date +%s)
    start "$i" valgrind --tool=callgrind --instr-atstart=no \
      --callgrind-out-file="$OUT/callgrind.${NAMES[$i]}.%p"
    pid=$STARTED
    callgrind_control --instr=on "$pid" >/dev/null 2>&1
    for u in "${!URL_NAMES[@]}"; do
      url="$(api "$i")${URL_PATHS[$u]}"
      for n in $CG_WARM $CG_REQUESTS; do
        for ((k = 0; k < n; k++)); do printf 'url = "%s"\noutput = "/dev/null"\n' "$url"; done >"$OUT/urls.cfg"
        # shellcheck disable=SC2046 # encoding is one word or none
        taskset -c $CLIENT_CPU curl -sf -H "$AUTH" $(encoding "$u") -K "$OUT/urls.cfg"
        # The dump: the counts since the last one, in the next numbered file.
        callgrind_control --dump="${URL_NAMES[$u]} $n" "$pid" >/dev/null 2>&1
      done
    done
    # Dumps are numbered in order: the counted ones are the even ones.
    u=0
    for ((d = 2; d <= 2 * ${#URL_NAMES[@]}; d += 2)); do
      total=$(awk '/^totals:/ {print $2}' "$OUT/callgrind.${NAMES[$i]}.$pid.$d")
      IR[$i,$u]=$((total / CG_REQUESTS))
      u=$((u + 1))
    done
    stop "$pid"
    echo "  ${NAMES[$i]}: started under valgrind and measured in $(($(date +%s) - loading)) s;" \
      "kept in $OUT/callgrind.${NAMES[$i]}.$pid.* (callgrind_annotate reads them)"
  done
fi

# CPU time: every build at once, driven in turn.
declare -A CPU
if [ "$ROUNDS" -gt 0 ]; then
  echo
  echo "== CPU time: wrk -t1 -c$CONNECTIONS -d${DURATION}s on CPU $CLIENT_CPU, $ROUNDS rounds, builds in turn"
  SERVERS=()
  for i in "${!NAMES[@]}"; do
    start "$i"
    SERVERS+=("$STARTED")
  done
  for i in "${!NAMES[@]}"; do
    for u in "${!URL_NAMES[@]}"; do
      [ "$(answer "$i" "$u")" = "$(answer 0 "$u")" ] || {
        echo "  ${NAMES[$i]} answers ${URL_NAMES[$u]} (${URL_PATHS[$u]}) unlike ${NAMES[0]}:"
        diff <(answer 0 "$u") <(answer "$i" "$u") | sed 's/^/    /' || true
      }
    done
  done
  echo "  answers compared with ${NAMES[0]}'s: status, headers but Date, body, for ${#URL_NAMES[@]} URLs"
  printf 'round\tbuild\tendpoint\trequests\tcpu_ns\tns_per_request\n' >"$OUT/cpu.tsv"
  for ((r = 1; r <= ROUNDS; r++)); do
    for u in "${!URL_NAMES[@]}"; do
      for i in "${!NAMES[@]}"; do
        pid=${SERVERS[$i]} url="$(api "$i")${URL_PATHS[$u]}"
        wrk_args=(-t1 -c"$CONNECTIONS" -H "$AUTH")
        [ -z "${URL_GZIP[$u]}" ] || wrk_args+=(-H "Accept-Encoding: gzip")
        [ "$WARMUP" -eq 0 ] || taskset -c $CLIENT_CPU wrk "${wrk_args[@]}" -d"${WARMUP}s" "$url" >/dev/null
        before=$(cpu_ns "$pid")
        requests=$(taskset -c $CLIENT_CPU wrk "${wrk_args[@]}" -d"${DURATION}s" "$url" |
          awk '/requests in/ {print $1}')
        after=$(cpu_ns "$pid")
        printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$r" "${NAMES[$i]}" "${URL_NAMES[$u]}" "$requests" \
          $((after - before)) $(((after - before) / requests)) >>"$OUT/cpu.tsv"
        CPU[$i,$u]="${CPU[$i,$u]:-} $(((after - before) / requests))"
      done
    done
    echo "  round $r done ($(date -u +%H:%M:%S); load average $(cut -d' ' -f1-3 /proc/loadavg))"
  done
fi

# The median of a list of numbers, and their spread (max - min) as % of it.
median() { tr ' ' '\n' <<<"$1" | grep . | sort -n | awk '{v[NR] = $1} END {
    m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
    printf "%.2f ±%.1f%%", m / 1000, (v[NR] - v[1]) / m * 50 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.3f", a / b}'; }
first() { awk '{print $1}' <<<"$1"; }

echo
echo "== results"
header="| endpoint |" align="| --- |"
for i in "${!NAMES[@]}"; do
  [ "$CG_REQUESTS" -eq 0 ] || header+=" ${NAMES[$i]} instr/req |" align+=" ---: |"
  [ "$i" -eq 0 ] || [ "$CG_REQUESTS" -eq 0 ] || header+=" / ${NAMES[0]} |" align+=" ---: |"
  [ "$ROUNDS" -eq 0 ] || header+=" ${NAMES[$i]} CPU µs/req |" align+=" ---: |"
  [ "$i" -eq 0 ] || [ "$ROUNDS" -eq 0 ] || header+=" / ${NAMES[0]} |" align+=" ---: |"
done
echo
echo "$header"
echo "$align"
for u in "${!URL_NAMES[@]}"; do
  row="| ${URL_NAMES[$u]} |"
  for i in "${!NAMES[@]}"; do
    if [ "$CG_REQUESTS" -gt 0 ]; then
      row+=" ${IR[$i,$u]} |"
      [ "$i" -eq 0 ] || row+=" $(ratio "${IR[$i,$u]}" "${IR[0,$u]}") |"
    fi
    if [ "$ROUNDS" -gt 0 ]; then
      row+=" $(median "${CPU[$i,$u]}") |"
      [ "$i" -eq 0 ] || row+=" $(ratio "$(first "$(median "${CPU[$i,$u]}")")" "$(first "$(median "${CPU[0,$u]}")")") |"
    fi
  done
  echo "$row"
done
echo
echo "instr/req: user-space instructions per request under callgrind ($CG_REQUESTS requests, one connection);" \
  "CPU µs/req: the median of $ROUNDS interleaved rounds, ± half the spread between rounds;" \
  "every run in $OUT/cpu.tsv"
