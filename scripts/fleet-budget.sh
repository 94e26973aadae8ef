#!/usr/bin/env bash
# A memory budget shared by a fleet (deploy/nginx/portfolio-replica.conf):
# does routing by key make three replicas with a third of the budget each
# hold as many workspaces in memory as one replica with the whole budget?
# On N small workspaces (`generate --scale tiny --workspaces N`, as
# scripts/budget-bench.sh generates them), side by side in one run, one
# setup at a time:
#
#   single      one replica, --memory-budget BUDGET; the sessions sent to it
#               directly
#   hash        three replicas, --memory-budget BUDGET/3 each, behind a real
#               nginx running the shipped config (its upstream: `hash
#               $http_authorization consistent`, max_fails, keepalive,
#               proxy_next_upstream...), rendered for loopback the way
#               .ci/nginx.sh renders it; the same sessions through nginx
#   roundrobin  the same, with the `hash` line taken out of the upstream
#               (nginx's default, round-robin): every replica sees every key
#   kill        the same as hash; replica c is SIGKILLed (by its PID) KILL_AT
#               s into the measured run; its keys move to the next replica
#               on the ring (nginx retries what c could not answer,
#               proxy_next_upstream)
#
# Each setup starts its own replicas (a cold start, the same for all), then
# sends sessions of API clients (scripts/sessions.lua: a key drawn from a
# Zipf law, s = 1.0, over the N keys, then 20 GETs with it): wrk, CONNECTIONS
# connections, THREADS threads, WARMUP s unreported, then DURATION s measured
# with --latency, the same draws (SEED) for every setup. wrk runs on CPU 1;
# the replicas and nginx are not pinned (2 CPUs for 3 replicas, nginx and
# wrk: the fleet's req/s is that of one machine sharing its cores, not of
# three machines). Reported per setup, from the replicas' /metrics (summed
# over the fleet) before and after the measured run:
#
#   req/s, p99      wrk's
#   hit/session     hit ratio per session start: 1 - misses / sessions,
#                   sessions = wrk's requests / 20 (as budget-bench.sh: if
#                   only a session's first request missed)
#   hit overall     hits / (hits + misses)
#   loads/sess      demand loads (ok) / sessions: the sessions whose
#                   workspace was not in memory. The misses count every
#                   request that waited for a load, and wrk spreads a
#                   session's 20 requests over its connections, so they run
#                   at once: under thrashing, hit/session goes below 0, and
#                   both hit ratios drop as req/s rises; loads per session
#                   does not depend on the concurrency, the figure to
#                   compare setups of different req/s by
#   loads, evict    demand loads (ok/failed) and evictions over the run
#   non-2xx, sock   wrk's "Non-2xx or 3xx responses" and socket errors
#
# and for the kill run, the two survivors' hit ratios in the KILL_AT s
# before the kill and in the rest of the run after it (their /metrics
# scraped before the run, just before the kill and at the end), and
# after/before. The "after" figures include the first loads of the keys that
# moved to them (and what those evict): the metrics do not tell moved keys
# from the others, so after/before is a lower bound of what the keys that
# did not move keep. Also how many requests nginx retried on another replica
# (its access log: two upstream addresses on one line).
#
# Usage: scripts/fleet-budget.sh
#   N=300 BUDGET=2MiB DURATION=4 DATA=target/fleet-budget-data scripts/fleet-budget.sh   # a quick try
# Environment: N (workspaces, default 20000), BUDGET (default 256MiB; K, M,
# G, T with or without i/B, all binary; each fleet replica gets a third, in
# bytes), DATA (default bench-data/budget, as budget-bench.sh: generated if
# missing, reused if it holds N), OUT (logs, metrics, raw wrk output, the
# rendered nginx configs; default DATA-fleet), DURATION (s measured per
# setup, default 20), WARMUP (default 3), CONNECTIONS (default 64), THREADS
# (default 2), SEED (default 1), KILL_AT (s into the kill run's measured
# part, default DURATION / 2), BIN (default target/release/portfolio-replica,
# built from this tree if it is that one), SERVER_ARGS (flags for every
# replica), SETS (default "single hash roundrobin kill": any of them, run
# in the order given), START_TIMEOUT (s, default 600).
# Needs curl, python3, wrk, taskset and nginx (Debian's package: installed
# with apt-get like .ci/nginx.sh does if missing, root or sudo). Loopback
# only; every process it starts is stopped by PID on exit (scripts/lib.sh).
# About 4 * (start + WARMUP + DURATION + 5) s, plus the data's generation
# the first time.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh

OUT_SUFFIX=-fleet
KILL_AT=${KILL_AT:-}
# shellcheck source=scripts/sessions-lib.sh
source scripts/sessions-lib.sh
SETS=${SETS:-single hash roundrobin kill}
CONF=deploy/nginx/portfolio-replica.conf
FLEET=(a b c) # the fleet's replicas; the kill run kills the last one
VICTIM=c

KILL_AT=${KILL_AT:-$((DURATION / 2))}
[[ $KILL_AT =~ ^[0-9]+$ ]] || { echo "KILL_AT: a whole number, not '$KILL_AT'" >&2; exit 2; }
for set in $SETS; do
  case $set in single | hash | roundrobin | kill) ;; *) echo "SETS: any of single hash roundrobin kill, not '$set'" >&2 && exit 2 ;; esac
done
[ -n "${SETS// /}" ] || { echo "SETS: any of single hash roundrobin kill" >&2; exit 2; }
case " $SETS " in
*" kill "*)
  if [ "$KILL_AT" -lt 1 ] || [ "$KILL_AT" -ge "$DURATION" ]; then
    echo "KILL_AT: between 1 and DURATION - 1 ($((DURATION - 1))), not $KILL_AT (DURATION >= 2 for the kill run)" >&2
    exit 2
  fi
  ;;
esac

SHARE_BYTES=$((BUDGET_BYTES / ${#FLEET[@]}))
ms() { awk -v u="$1" 'BEGIN { printf "%.2f", u / 1000 }'; }


# nginx: Debian's package, installed if missing (scripts/lib.sh).
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
if [ ! -x "$NGINX" ]; then
  mkdir -p "$OUT"
  echo "== installing nginx (apt-get; log in $OUT/apt.log)"
  apt_packages "$OUT/apt.log" nginx || exit 1
  [ -x "$NGINX" ] || { echo "no nginx at $NGINX after installing" >&2; exit 1; }
fi

build_bin
if ! has_budget; then
  echo "$BIN has no --memory-budget (serve --help)" >&2
  exit 1
fi

COMMAND="N=$N BUDGET=$BUDGET DATA=$DATA OUT=$OUT DURATION=$DURATION WARMUP=$WARMUP CONNECTIONS=$CONNECTIONS THREADS=$THREADS SEED=$SEED KILL_AT=$KILL_AT BIN=$BIN SERVER_ARGS='$SERVER_ARGS' SETS='$SETS' $0 $*"
echo "# fleet-budget $(date -u '+%Y-%m-%dT%H:%M:%SZ')"
echo "# command: $COMMAND"
run_header
echo "# machine: $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')), $(uname -sr);" \
  "load average $(cut -d' ' -f1-3 /proc/loadavg); $(wrk -v 2>&1 | head -1); $("$NGINX" -v 2>&1 | sed 's/^nginx version: //')"

ensure_data
echo "== $N workspaces in $DATA: $(awk -v b="$JSON_BYTES" 'BEGIN { printf "%.1f", b / 1048576 }') MiB of JSON;" \
  "budget $BUDGET ($BUDGET_BYTES bytes), $SHARE_BYTES bytes for each of ${#FLEET[@]} fleet replicas"

ensure_sessions
OUT_ABS=$(realpath "$OUT") # for nginx, which reads paths from its prefix
echo "== sessions over $(wc -l <"$SESSIONS") keys ($SESSIONS)"

# untrack PID...: take stopped PIDs out of lib.sh's list, so that the exit
# trap never signals a PID the system has given to another process since.
untrack() {
  local keep=() pid gone
  for pid in "${PIDS[@]}"; do
    for gone in "$@"; do [ "$pid" = "$gone" ] && continue 2; done
    keep+=("$pid")
  done
  PIDS=("${keep[@]}")
}

# start_replicas SET BUDGET_BYTES NAME...: starts one replica per NAME on
# DATA with SERVER_ARGS and --memory-budget BUDGET_BYTES (all at once, then
# waits for each one's /readyz), logs in OUT/SET.NAME.log; sets R_PID,
# R_ADDR, R_ADMIN (by NAME). PORTFOLIO_MEMORY_BUDGET is taken out of the
# environment: only the flag sets a budget.
declare -A R_PID R_ADDR R_ADMIN
START_CMD=
start_replicas() {
  local set=$1 budget=$2 name
  shift 2
  find "$DATA" -maxdepth 1 -name 'tiny-*.json' -exec cat {} + >/dev/null
  # Bytes with their unit: plain digits under 1 MiB are refused as a unit
  # left out, and a share of a small BUDGET may be under it.
  [[ $budget =~ ^[0-9]+$ ]] && budget=${budget}B
  START_CMD="$BIN serve --snapshots $DATA --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 --log-format json ${SERVER_ARGS:+$SERVER_ARGS }--memory-budget $budget"
  for name in "$@"; do
    # shellcheck disable=SC2086 # SERVER_ARGS is a list of flags
    env -u PORTFOLIO_MEMORY_BUDGET "$BIN" serve --snapshots "$DATA" --listen 127.0.0.1:0 \
      --admin-listen 127.0.0.1:0 --log-format json $SERVER_ARGS --memory-budget "$budget" \
      2>"$OUT/$set.$name.log" &
    R_PID[$name]=$!
    track "${R_PID[$name]}"
  done
  for name in "$@"; do
    wait_for_server "$set: replica $name" "$OUT/$set.$name.log" "$START_TIMEOUT" "${R_PID[$name]}"
    R_ADDR[$name]=$ADDR R_ADMIN[$name]=$ADMIN_ADDR
    echo "   replica $name: pid ${R_PID[$name]}, api $ADDR, admin $ADMIN_ADDR, --memory-budget $budget"
  done
}
stop_replicas() {
  local name pids=()
  for name in "$@"; do
    if kill -0 "${R_PID[$name]}" 2>/dev/null; then pids+=("${R_PID[$name]}"); fi
  done
  if [ ${#pids[@]} -gt 0 ]; then stop "${pids[@]}"; fi
  for name in "$@"; do untrack "${R_PID[$name]}"; done
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# nginx's scratch prefix (pid, temp paths); readable by its workers, which
# drop to nobody when the master runs as root.
scratch_dir NGX fleet-budget-nginx
chmod 0755 "$NGX"
USER_LINE=
if [ "$(id -u)" -eq 0 ]; then USER_LINE="user nobody nogroup;"; fi

# start_nginx SET MODE: renders the shipped config for the fleet's
# replicas (MODE hash: as shipped; roundrobin: without its `hash` line), on
# a free port, its access log in OUT/SET.access.log (buffered), wraps it in
# a main context as .ci/nginx.sh does, checks it with `nginx -t` and runs
# nginx in the foreground; sets NGINX_PID and LB (host:port). The rendered
# files are kept in OUT/SET.nginx.conf and OUT/SET.portfolio-replica.conf.
NGINX_PID=
NGINX_CMD=
start_nginx() {
  local set=$1 mode=$2 name addrs=()
  for name in "${FLEET[@]}"; do addrs+=("${R_ADDR[$name]}"); done
  LB=127.0.0.1:$(free_port)
  mkdir -p "$NGX/$set"
  # The shipped file, its marked lines substituted (as .ci/nginx.sh); fails
  # if the markers moved, or if it has fewer `# @replica` lines than the fleet.
  local rr=
  [ "$mode" = roundrobin ] && rr=--round-robin
  python3 scripts/render-nginx.py "$CONF" "$OUT_ABS/$set.portfolio-replica.conf" "$LB" \
    "$OUT_ABS/$set.access.log" --buffered $rr "${addrs[@]}" ||
    { echo "cannot render $CONF (its '# @replica', '# @listen', access_log and hash lines)" >&2; exit 1; }
  cat >"$OUT_ABS/$set.nginx.conf" <<EOF
# scripts/fleet-budget.sh: the main context around the shipped http-context file.
$USER_LINE
daemon off;
worker_processes 2;
pid $NGX/$set/nginx.pid;
error_log $OUT_ABS/$set.nginx-error.log;
events { worker_connections 4096; }
http {
    client_body_temp_path $NGX/$set/client_body;
    proxy_temp_path $NGX/$set/proxy;
    fastcgi_temp_path $NGX/$set/fastcgi;
    uwsgi_temp_path $NGX/$set/uwsgi;
    scgi_temp_path $NGX/$set/scgi;
    include $OUT_ABS/$set.portfolio-replica.conf;
}
EOF
  local out
  if ! out=$("$NGINX" -t -p "$NGX/$set" -e "$OUT_ABS/$set.nginx-error.log" -c "$OUT_ABS/$set.nginx.conf" 2>&1); then
    printf '%s\n' "$out" | sed 's/^/      | /' >&2
    echo "nginx -t rejects the rendered config ($OUT/$set.nginx.conf)" >&2
    exit 1
  fi
  NGINX_CMD="$NGINX -p $NGX/$set -e $OUT_ABS/$set.nginx-error.log -c $OUT_ABS/$set.nginx.conf"
  "$NGINX" -p "$NGX/$set" -e "$OUT_ABS/$set.nginx-error.log" -c "$OUT_ABS/$set.nginx.conf" 2>"$OUT/$set.nginx.stderr" &
  NGINX_PID=$!
  track "$NGINX_PID"
  if ! wait_ready "http://$LB/healthz" 30 "$NGINX_PID"; then
    cat "$OUT/$set.nginx-error.log" "$OUT/$set.nginx.stderr" >&2 || true
    echo "nginx on $LB does not answer" >&2
    exit 1
  fi
  echo "   nginx ($mode): pid $NGINX_PID on $LB, config $OUT/$set.nginx.conf"
}
stop_nginx() {
  stop "$NGINX_PID"
  untrack "$NGINX_PID"
  NGINX_PID=
}

# scrape ADMIN FILE: a replica's /metrics into FILE.
scrape() { curl -fsS --max-time 10 "http://$1/metrics" >"$2"; }
# scrape_all SET WHEN NAME...: each replica's /metrics into OUT/SET.NAME.WHEN.metrics.
scrape_all() {
  local set=$1 when=$2 name
  shift 2
  for name in "$@"; do scrape "${R_ADMIN[$name]}" "$OUT/$set.$name.$when.metrics"; done
}
# delta SET FROM TO "NAME..." METRIC [LABEL]: the sum over the replicas
# NAME... of METRIC's rise between the scrapes FROM and TO.
delta() {
  local set=$1 from=$2 to=$3 names=$4 name sum=0
  shift 4
  for name in $names; do
    sum=$((sum + $(metric "$OUT/$set.$name.$to.metrics" "$@") - $(metric "$OUT/$set.$name.$from.metrics" "$@")))
  done
  echo "$sum"
}
# ratios HITS MISSES SESSIONS: "hit/session overall" (n/a without lookups).
ratios() {
  awk -v h="$1" -v m="$2" -v s="$3" 'BEGIN {
    if (h + m == 0 || s == 0) { print "n/a n/a"; exit }
    printf "%.4f %.4f\n", 1 - m / s, h / (h + m) }'
}
# per_session LOADS SESSIONS: demand loads per session (n/a without sessions).
per_session() {
  awk -v l="$1" -v s="$2" 'BEGIN { if (s == 0) print "n/a"; else printf "%.4f\n", l / s }'
}
rss_sum() {
  local name kib=0 k
  for name in "$@"; do
    k=$(awk '$1 == "VmRSS:" { print $2 }' "/proc/${R_PID[$name]}/status" 2>/dev/null || true)
    kib=$((kib + ${k:-0}))
  done
  echo "$kib"
}

# wrk_start NAME URL SEED SECONDS: one wrk run of the sessions on CPU
# WRK_CPU in the background, its output in OUT/NAME.wrk; sets WRK_PID.
# wrk_finish NAME: waits for it; sets REQS DUR_US P99 ERRS NON2XX and RPS.
WRK_CMD=
wrk_start() {
  local name=$1 url=$2 seed=$3 seconds=$4
  WRK_CMD="taskset -c $WRK_CPU wrk -t$THREADS -c$CONNECTIONS -d${seconds}s --timeout 10s --latency -s scripts/sessions.lua $url -- $SESSIONS $seed 1.0"
  timeout $((seconds + 60)) taskset -c $WRK_CPU wrk -t"$THREADS" -c"$CONNECTIONS" -d"${seconds}s" --timeout 10s \
    --latency -s scripts/sessions.lua "$url" -- "$SESSIONS" "$seed" 1.0 >"$OUT/$name.wrk" 2>&1 &
  WRK_PID=$!
  track "$WRK_PID"
}
wrk_finish() {
  local name=$1 line rc=0
  wait "$WRK_PID" || rc=$?
  untrack "$WRK_PID"
  [ "$rc" -eq 0 ] || { echo "$name: wrk failed ($rc):" >&2; cat "$OUT/$name.wrk" >&2; exit 1; }
  line=$(grep '^SUMMARY ' "$OUT/$name.wrk") || { echo "$name: no SUMMARY from wrk:" >&2; cat "$OUT/$name.wrk" >&2; exit 1; }
  read -r _ REQS DUR_US _ P99 _ ERRS NON2XX _ <<<"$line"
  RPS=$(awk -v r="$REQS" -v d="$DUR_US" 'BEGIN { printf "%.0f", r / (d / 1e6) }')
}
run_wrk() {
  wrk_start "$@"
  wrk_finish "$1"
}
# socket_errors NAME: wrk's "Socket errors" line, or "none".
socket_errors() {
  sed -n 's/^ *Socket errors: *//p' "$OUT/$1.wrk" | grep . || echo none
}

# record SET "NAME..." BUDGET_EACH: the figures of a measured run (the
# scrapes "before" and "after", wrk's last run) into the S_* arrays.
declare -A S_LPS S_REPLICAS S_BUDGET S_RPS S_P99 S_REQS S_HITS S_MISSES S_HS S_HO S_LOADS S_LOADS_FAILED S_EVICT S_NON2XX S_ERRS S_RSS S_SHARE
record() {
  local set=$1 names=$2 budget=$3 sessions name share=
  S_REPLICAS[$set]=$(wc -w <<<"$names") S_BUDGET[$set]=$budget
  S_RPS[$set]=$RPS S_P99[$set]=$P99 S_REQS[$set]=$REQS S_NON2XX[$set]=$NON2XX S_ERRS[$set]=$ERRS
  S_HITS[$set]=$(delta "$set" before after "$names" portfolio_replica_resident_lookups_total 'result="hit"')
  S_MISSES[$set]=$(delta "$set" before after "$names" portfolio_replica_resident_lookups_total 'result="miss"')
  S_LOADS[$set]=$(delta "$set" before after "$names" portfolio_replica_demand_loads_total 'outcome="ok"')
  S_LOADS_FAILED[$set]=$(delta "$set" before after "$names" portfolio_replica_demand_loads_total 'outcome="failed"')
  S_EVICT[$set]=$(delta "$set" before after "$names" portfolio_replica_evictions_total)
  sessions=$(awk -v r="$REQS" -v s="$SESSION" 'BEGIN { printf "%.1f", r / s }')
  read -r "S_HS[$set]" "S_HO[$set]" <<<"$(ratios "${S_HITS[$set]}" "${S_MISSES[$set]}" "$sessions")"
  S_LPS[$set]=$(per_session "${S_LOADS[$set]}" "$sessions")
  for name in $names; do
    share+="${share:+/}$(delta "$set" before after "$name" portfolio_replica_resident_lookups_total)"
  done
  S_SHARE[$set]=$share
  echo "   $REQS requests in $DURATION s: $RPS req/s, p99 $(ms "$P99") ms; non-2xx $NON2XX, socket errors $ERRS;" \
    "lookups $((S_HITS[$set] + S_MISSES[$set])) (per replica ${S_SHARE[$set]}): hit/session ${S_HS[$set]}, overall ${S_HO[$set]};" \
    "${S_LOADS[$set]} demand loads, ${S_LPS[$set]} per session"
}

declare -A CMDS
# measure_single: one replica with the whole budget, sessions sent to it.
measure_single() {
  echo
  echo "== single: one replica, --memory-budget $BUDGET; sessions sent directly"
  start_replicas single "$BUDGET" s
  if [ "$WARMUP" -gt 0 ]; then run_wrk single.warmup "http://${R_ADDR[s]}" $((SEED + 1000000)) "$WARMUP"; fi
  scrape_all single before s
  run_wrk single "http://${R_ADDR[s]}" "$SEED" "$DURATION"
  scrape_all single after s
  CMDS[single]="$START_CMD
    $WRK_CMD"
  S_RSS[single]=$(rss_sum s)
  record single s "$BUDGET"
  stop_replicas s
}

# measure_fleet SET MODE: three replicas with a third of the budget each,
# behind nginx (MODE hash or roundrobin), sessions through nginx.
measure_fleet() {
  local set=$1 mode=$2
  echo
  echo "== $set: ${#FLEET[@]} replicas, --memory-budget $SHARE_BYTES each, behind nginx ($mode); sessions through nginx"
  start_replicas "$set" "$SHARE_BYTES" "${FLEET[@]}"
  start_nginx "$set" "$mode"
  if [ "$WARMUP" -gt 0 ]; then run_wrk "$set.warmup" "http://$LB" $((SEED + 1000000)) "$WARMUP"; fi
  scrape_all "$set" before "${FLEET[@]}"
  run_wrk "$set" "http://$LB" "$SEED" "$DURATION"
  scrape_all "$set" after "${FLEET[@]}"
  CMDS[$set]="$START_CMD   (x${#FLEET[@]})
    $NGINX_CMD
    $WRK_CMD"
  S_RSS[$set]=$(rss_sum "${FLEET[@]}")
  record "$set" "${FLEET[*]}" "$SHARE_BYTES B"
  stop_nginx
  stop_replicas "${FLEET[@]}"
}

# measure_kill: as hash, with replica VICTIM SIGKILLed KILL_AT s into the
# measured run; the survivors scraped before the run, just before the kill
# and at the end.
SURVIVORS=()
for name in "${FLEET[@]}"; do [ "$name" = "$VICTIM" ] || SURVIVORS+=("$name"); done
K_AT="" K_PID="" K_RETRIED="" K_UPSTREAM_ERR=""
measure_kill() {
  local set=kill t0
  echo
  echo "== kill: as hash; replica $VICTIM SIGKILLed $KILL_AT s into the $DURATION s measured run"
  start_replicas "$set" "$SHARE_BYTES" "${FLEET[@]}"
  start_nginx "$set" hash
  if [ "$WARMUP" -gt 0 ]; then run_wrk "$set.warmup" "http://$LB" $((SEED + 1000000)) "$WARMUP"; fi
  scrape_all "$set" before "${FLEET[@]}"
  t0=$(date +%s%N)
  wrk_start "$set" "http://$LB" "$SEED" "$DURATION"
  sleep "$KILL_AT"
  scrape_all "$set" kill "${FLEET[@]}"
  K_PID=${R_PID[$VICTIM]}
  # Out of the job table: bash does not report it as "Killed".
  disown "$K_PID"
  kill -KILL "$K_PID"
  K_AT=$(awk -v a="$t0" -v b="$(date +%s%N)" 'BEGIN { printf "%.2f", (b - a) / 1e9 }')
  untrack "$K_PID"
  echo "   replica $VICTIM (pid $K_PID) SIGKILLed $K_AT s after wrk started"
  wrk_finish "$set"
  scrape_all "$set" after "${SURVIVORS[@]}"
  # For record(): the victim's "after" is its last scrape, just before the kill.
  cp "$OUT/$set.$VICTIM.kill.metrics" "$OUT/$set.$VICTIM.after.metrics"
  CMDS[$set]="$START_CMD   (x${#FLEET[@]})
    $NGINX_CMD
    $WRK_CMD   (then, after $KILL_AT s: kill -KILL <pid of replica $VICTIM>)"
  S_RSS[$set]=$(rss_sum "${SURVIVORS[@]}")
  record "$set" "${FLEET[*]}" "$SHARE_BYTES B"
  stop_nginx
  stop_replicas "${SURVIVORS[@]}"
  # nginx has flushed its access log: requests tried on two or more replicas
  # (upstream=a, b), and answers nginx gave from no replica's response.
  K_RETRIED=$(grep -c 'upstream=[^ ]*, ' "$OUT/$set.access.log" || true)
  K_UPSTREAM_ERR=$(grep -cE '" (502|503|504) ' "$OUT/$set.access.log" || true)
}

for set in $SETS; do
  case $set in
  single) measure_single ;;
  hash) measure_fleet hash hash ;;
  roundrobin) measure_fleet roundrobin roundrobin ;;
  kill) measure_kill ;;
  esac
done

echo
echo "== results: $N tiny workspaces; budget $BUDGET in all; wrk -t$THREADS -c$CONNECTIONS, ${WARMUP} s warm-up," \
  "${DURATION} s measured, sessions of $SESSION requests (Zipf s = 1.0, seed $SEED), wrk on CPU $WRK_CPU, the rest unpinned"
echo
fmt='%-10s %8s %13s %8s %8s %11s %11s %10s %9s %7s %9s %9s %8s %8s %s\n'
# shellcheck disable=SC2059 # the format is the table's
printf "$fmt" setup replicas budget_each req/s p99_ms hit/session hit_overall loads/sess lookups loads loads_fail evictions non-2xx sock_err RSS_MiB
for set in $SETS; do
  # shellcheck disable=SC2059
  printf "$fmt" "$set" "${S_REPLICAS[$set]}" "${S_BUDGET[$set]}" "${S_RPS[$set]}" "$(ms "${S_P99[$set]}")" \
    "${S_HS[$set]}" "${S_HO[$set]}" "${S_LPS[$set]}" "$((S_HITS[$set] + S_MISSES[$set]))" "${S_LOADS[$set]}" "${S_LOADS_FAILED[$set]}" \
    "${S_EVICT[$set]}" "${S_NON2XX[$set]}" "${S_ERRS[$set]}" "$(mib "${S_RSS[$set]}")"
done
echo "(hit/session: 1 - misses / (wrk's requests / $SESSION); hit_overall: hits / (hits + misses); lookups, loads, evictions:"
echo " the replicas' /metrics summed, over the measured run; RSS: VmRSS summed after it (kill: the survivors');"
echo " hit/session below 0: more misses than sessions: wrk spreads a session's requests over its connections, so they run"
echo " at once and each one counts a miss while the workspace loads (more of them the more req/s); loads/sess: demand loads"
echo " per session (ok ones), the sessions whose workspace was not in memory, whatever the concurrency;"
echo " lookups per replica (a/b/c):$(for set in $SETS; do printf ' %s %s;' "$set" "${S_SHARE[$set]}"; done))"

# ratio_line LABEL A B: A / B of two hit ratios (n/a unless both are above
# 0); then the same for the misses per session, 1 - hit/session, which
# stays meaningful when the budget thrashes (hit/session below 0).
ratio_line() {
  awk -v l="$1" -v a="$2" -v b="$3" 'BEGIN {
    if (a == "n/a" || b == "n/a" || a <= 0 || b <= 0) printf "  %s: n/a (%s / %s)\n", l, a, b
    else printf "  %s: %.3f (%s / %s)\n", l, a / b, a, b }'
}
miss_line() { # miss_line LABEL A B: (1 - A) / (1 - B) of two hit/session ratios
  awk -v l="$1" -v a="$2" -v b="$3" 'BEGIN {
    if (a == "n/a" || b == "n/a" || b >= 1) printf "  %s: n/a\n", l
    else printf "  %s: %.3f (%.4f / %.4f)\n", l, (1 - a) / (1 - b), 1 - a, 1 - b }'
}
load_line() { # load_line LABEL A B: A / B of two demand loads per session
  awk -v l="$1" -v a="$2" -v b="$3" 'BEGIN {
    if (a == "n/a" || b == "n/a" || b <= 0) printf "  %s: n/a (%s / %s)\n", l, a, b
    else printf "  %s: %.3f (%s / %s)\n", l, a / b, a, b }'
}
# compare LABEL A B: A's hit ratios against B's.
compare() {
  if [ -n "${S_HS[$2]:-}" ] && [ -n "${S_HS[$3]:-}" ]; then
    load_line "$1, demand loads per session" "${S_LPS[$2]}" "${S_LPS[$3]}"
    ratio_line "$1, hit/session" "${S_HS[$2]}" "${S_HS[$3]}"
    ratio_line "$1, hit overall" "${S_HO[$2]}" "${S_HO[$3]}"
    miss_line "$1, misses per session" "${S_HS[$2]}" "${S_HS[$3]}"
  fi
}
if [ -n "${S_HS[hash]:-}" ] || [ -n "${S_HS[roundrobin]:-}" ]; then
  echo
  echo "hit ratios compared (A / B):"
  compare "hash fleet / single" hash single
  compare "round-robin fleet / single" roundrobin single
  compare "round-robin fleet / hash fleet" roundrobin hash
fi

if [ -n "${S_RPS[kill]:-}" ]; then
  names="${SURVIVORS[*]}"
  bh=$(delta kill before kill "$names" portfolio_replica_resident_lookups_total 'result="hit"')
  bm=$(delta kill before kill "$names" portfolio_replica_resident_lookups_total 'result="miss"')
  bl=$(delta kill before kill "$names" portfolio_replica_demand_loads_total 'outcome="ok"')
  ah=$(delta kill kill after "$names" portfolio_replica_resident_lookups_total 'result="hit"')
  am=$(delta kill kill after "$names" portfolio_replica_resident_lookups_total 'result="miss"')
  al=$(delta kill kill after "$names" portfolio_replica_demand_loads_total 'outcome="ok"')
  vl=$(delta kill before kill "$VICTIM" portfolio_replica_resident_lookups_total)
  read -r bhs bho <<<"$(ratios "$bh" "$bm" "$(awk -v n=$((bh + bm)) -v s=$SESSION 'BEGIN { print n / s }')")"
  read -r ahs aho <<<"$(ratios "$ah" "$am" "$(awk -v n=$((ah + am)) -v s=$SESSION 'BEGIN { print n / s }')")"
  blps=$(per_session "$bl" "$(awk -v n=$((bh + bm)) -v s=$SESSION 'BEGIN { print n / s }')")
  alps=$(per_session "$al" "$(awk -v n=$((ah + am)) -v s=$SESSION 'BEGIN { print n / s }')")
  after_s=$(awk -v d="$DUR_US" -v k="$K_AT" 'BEGIN { printf "%.2f", d / 1e6 - k }')
  echo
  echo "kill run: replica $VICTIM (pid $K_PID) SIGKILLed $K_AT s into the measured run (of $(awk -v d="$DUR_US" 'BEGIN { printf "%.2f", d / 1e6 }') s);" \
    "before it, $VICTIM had $vl of the fleet's $((bh + bm + vl)) lookups"
  echo "  client: ${S_NON2XX[kill]} non-2xx answers (wrk's \"Non-2xx or 3xx responses\"), ${S_ERRS[kill]} socket errors" \
    "($(socket_errors kill)), of ${S_REQS[kill]} requests"
  echo "  nginx: $K_RETRIED requests tried on two replicas or more (proxy_next_upstream), $K_UPSTREAM_ERR answered 502/503/504 (its access log, warm-up included)"
  echo "  survivors ${SURVIVORS[*]}, hit ratios (sessions = their lookups / $SESSION):"
  printf '    %-30s %8s lookups, %6s demand loads (%s per session); hit/session %s, overall %s\n' \
    "before the kill ($K_AT s):" $((bh + bm)) "$bl" "$blps" "$bhs" "$bho" \
    "after the kill ($after_s s):" $((ah + am)) "$al" "$alps" "$ahs" "$aho"
  echo "    after / before (the moved keys' first loads, and what they evict, included):"
  load_line "demand loads per session" "$alps" "$blps" | sed 's/^/    /'
  ratio_line "hit/session" "$ahs" "$bhs" | sed 's/^/    /'
  ratio_line "hit overall" "$aho" "$bho" | sed 's/^/    /'
  miss_line "misses per session" "$ahs" "$bhs" | sed 's/^/    /'
fi

for set in $SETS; do
  if [ "$((S_ERRS[$set] + S_NON2XX[$set]))" -gt 0 ]; then
    echo "WARNING: $set: ${S_ERRS[$set]} socket errors ($(socket_errors "$set")) and ${S_NON2XX[$set]} non-2xx answers ($OUT/$set.wrk)"
  fi
  if [ "${S_LOADS_FAILED[$set]}" -gt 0 ]; then
    echo "WARNING: $set: ${S_LOADS_FAILED[$set]} demand loads failed (logs: $OUT/$set.*.log)"
  fi
done

echo
echo "to reproduce: $COMMAND"
echo "which runs, for each setup (with scratch paths; warm-up: the same wrk with seed $((SEED + 1000000)) for $WARMUP s):"
for set in $SETS; do
  echo "  $set:"
  echo "    ${CMDS[$set]}"
done
echo "raw wrk output, replica and nginx logs, rendered nginx configs and metrics (before, [kill,] after): $OUT/"
