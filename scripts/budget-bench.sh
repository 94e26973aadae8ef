#!/usr/bin/env bash
# A memory budget against none (issue 28): N small workspaces (`generate
# --scale tiny --workspaces N`, about 100 KB each), served once by a replica
# that keeps every workspace resident and once by one started with
# `--memory-budget BUDGET` (it keeps some resident and loads the others on
# demand), side by side in one run, one replica at a time:
#
#   start    time from exec to /readyz 200 (polled every 10 ms; both cores;
#            the files read once first, so that neither start reads the disk)
#   requests sessions of API clients (scripts/sessions.lua): a key drawn from
#            a Zipf law (s = 1.0) over the N keys, in a shuffled order, then
#            20 plain GETs with it (/portfolio, /tasks?limit=50,
#            /feed?limit=20, a company's notes and tasks); wrk, CONNECTIONS
#            connections, THREADS threads each drawing its own sessions,
#            WARMUP s unreported, then DURATION s measured with --latency;
#            the server (every thread of it) on CPU 0, wrk on CPU 1; how
#            busy each CPU was with anything else (the noise, as
#            load-bench.sh counts it)
#   memory   VmRSS and VmHWM after the measured run; for the budget, the
#            target RSS <= 1.15 * budget + 1 KiB * N + 64 MiB
#   resident (the budget replica, from its /metrics, over the measured run)
#            hit ratio per session start = 1 - misses / sessions, sessions =
#            requests / 20 (a session's first request is the only one that
#            should miss); overall hit ratio hits / (hits + misses); demand
#            loads (ok, failed); evictions; resident bytes and workspaces
#
# Then the budget replica against the other: req/s and start time, as ratios.
#
# Usage: scripts/budget-bench.sh
#   N=500 DURATION=5 scripts/budget-bench.sh          # a quick try
#   SETS=none scripts/budget-bench.sh                 # the replica without a budget alone
# Environment: N (workspaces, default 20000), BUDGET (default 256MiB; the
# server's sizes: K, M, G, T with or without i/B, all binary; given as the
# flag: PORTFOLIO_MEMORY_BUDGET is taken out of both replicas' environment),
# DATA (the snapshots, relative to the repository's root, default
# bench-data/budget: generated if missing, reused if it
# holds N; other counts are regenerated there), OUT (logs, metrics, raw wrk
# output, the sessions file; default DATA-out), DURATION (s of the measured
# run, default 20), WARMUP (s of unreported wrk before it, default 3),
# CONNECTIONS (default 64), THREADS (wrk threads, default 2), SEED (of the
# measured run's draws, the same for both replicas; the warm-up draws other
# sessions; default 1), BIN (default target/release/portfolio-replica, built
# from this tree if it is that one), SERVER_ARGS (flags for both replicas,
# e.g. "--precompress off"), SETS (which replicas: "none budget", the
# default, or either alone), START_TIMEOUT (s a replica gets to be ready,
# default 600).
# Needs curl, python3, wrk, taskset (2 CPUs or more). Loopback only; every
# process it starts is stopped on exit, by PID. About 2 * (start + WARMUP +
# DURATION + 10) s, plus the data's generation the first time.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh

OUT_SUFFIX=-out
# shellcheck source=scripts/sessions-lib.sh
source scripts/sessions-lib.sh
SETS=${SETS:-none budget}
SERVER_CPU=0

for set in $SETS; do
  case $set in none | budget) ;; *) echo "SETS: \"none budget\" (the default), none or budget, not '$set'" >&2 && exit 2 ;; esac
done
[ -n "${SETS// /}" ] || { echo "SETS: \"none budget\" (the default), none or budget" >&2; exit 2; }

build_bin
case " $SETS " in
*" budget "*)
  if ! has_budget; then
    echo "$BIN has no --memory-budget (serve --help): this build cannot run the budget replica;" \
      "SETS=none runs the replica without a budget alone" >&2
    exit 1
  fi
  ;;
esac

echo "# budget-bench $(date -u '+%Y-%m-%dT%H:%M:%SZ')"
echo "# command: N=$N BUDGET=$BUDGET DATA=$DATA DURATION=$DURATION WARMUP=$WARMUP CONNECTIONS=$CONNECTIONS THREADS=$THREADS SEED=$SEED BIN=$BIN SERVER_ARGS='$SERVER_ARGS' SETS='$SETS' $0 $*"
run_header
echo "# machine: $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')), $(uname -sr); $(wrk -v 2>&1 | head -1)"

ensure_data
echo "== $N workspaces in $DATA: $(awk -v b="$JSON_BYTES" 'BEGIN { printf "%.1f", b / 1048576 }') MiB of JSON"
ensure_sessions
echo "== sessions over $(wc -l <"$SESSIONS") keys ($SESSIONS);" \
  "$(awk '{ c += NF - 1 } END { print c }' "$SESSIONS") company ids"

# start NAME [FLAGS...]: serves DATA with SERVER_ARGS and FLAGS on loopback
# (the ports the kernel picks), its log in OUT/NAME.log; sets SERVER_PID,
# ADDR, ADMIN_ADDR, READY_S (exec to /readyz 200, polled every 10 ms) and
# RSS_READY (KiB). PORTFOLIO_MEMORY_BUDGET is taken out of the environment:
# only the flag sets a budget.
start() {
  local name=$1 log=$OUT/$1.log t0 deadline
  shift
  find "$DATA" -maxdepth 1 -name 'tiny-*.json' -exec cat {} + >/dev/null
  t0=$(date +%s%N)
  deadline=$((t0 + START_TIMEOUT * 1000000000))
  # shellcheck disable=SC2086 # SERVER_ARGS is a list of flags
  env -u PORTFOLIO_MEMORY_BUDGET "$BIN" serve --snapshots "$DATA" --listen 127.0.0.1:0 \
    --admin-listen 127.0.0.1:0 --log-format json $SERVER_ARGS "$@" 2>"$log" &
  SERVER_PID=$!
  ADDR=
  while :; do
    [ -n "$ADDR" ] || ADDR=$(server_addr "$log" api)
    if [ -n "$ADDR" ] && curl -fsS -o /dev/null --max-time 5 "http://$ADDR/readyz" 2>/dev/null; then
      break
    fi
    if ! kill -0 "$SERVER_PID" 2>/dev/null; then
      echo "$name: the server exited at start:" >&2
      cat "$log" >&2
      exit 1
    fi
    if [ "$(date +%s%N)" -gt "$deadline" ]; then
      echo "$name: not ready after $START_TIMEOUT s; the log's end:" >&2
      tail -20 "$log" >&2
      exit 1
    fi
    sleep 0.01
  done
  READY_S=$(awk -v a="$t0" -v b="$(date +%s%N)" 'BEGIN { printf "%.3f", (b - a) / 1e9 }')
  ADMIN_ADDR=$(server_addr "$log" admin)
  RSS_READY=$(status_kib "$SERVER_PID" VmRSS)
}

# scrape FILE: the server's /metrics into FILE.
scrape() { curl -fsS --max-time 10 "http://$ADMIN_ADDR/metrics" >"$1"; }

# utime+stime of a process, in clock ticks.
cpu_ticks() { sed 's/.*) //' "/proc/$1/stat" | awk '{ print $12 + $13 }'; }
# Busy ticks of one CPU (all but idle and iowait), from /proc/stat.
cpu_busy() { awk -v c="cpu$1" '$1 == c { print $2 + $3 + $4 + $7 + $8 + $9 }' /proc/stat; }
TICKS=$(getconf CLK_TCK)

# run_wrk NAME SEED DURATION: one wrk run of the sessions on CPU WRK_CPU,
# its output in OUT/NAME.wrk; sets REQS DUR_US P50 P99 P999 ERRS NON2XX
# STARTED (sessions sessions.lua began), RPS, and OTHERS: how busy CPU
# SERVER_CPU and CPU WRK_CPU were with anything but the server and wrk (other
# processes, the kernel's own work), % of the run, as load-bench.sh
# counts it: the noise indicator.
run_wrk() {
  local name=$1 seed=$2 seconds=$3 line s0 s1 w0 w1 t0 t1 srv0 srv1 wrk_time
  local TIMEFORMAT='%U %S'
  srv0=$(cpu_ticks "$SERVER_PID") s0=$(cpu_busy $SERVER_CPU) w0=$(cpu_busy $WRK_CPU) t0=$(date +%s%N)
  wrk_time=$({ time timeout $((seconds + 60)) taskset -c $WRK_CPU wrk -t"$THREADS" -c"$CONNECTIONS" \
    -d"${seconds}s" --timeout 10s --latency -s scripts/sessions.lua "http://$ADDR" -- "$SESSIONS" "$seed" 1.0 \
    >"$OUT/$name.wrk" 2>&1; } 2>&1) || { echo "$name: wrk failed:" >&2; cat "$OUT/$name.wrk" >&2; exit 1; }
  t1=$(date +%s%N) srv1=$(cpu_ticks "$SERVER_PID") s1=$(cpu_busy $SERVER_CPU) w1=$(cpu_busy $WRK_CPU)
  line=$(grep '^SUMMARY ' "$OUT/$name.wrk") || { echo "$name: no SUMMARY from wrk:" >&2; cat "$OUT/$name.wrk" >&2; exit 1; }
  read -r _ REQS DUR_US P50 P99 P999 ERRS NON2XX STARTED <<<"$line"
  RPS=$(awk -v r="$REQS" -v d="$DUR_US" 'BEGIN { printf "%.0f", r / (d / 1e6) }')
  OTHERS=$(awk -v t=$((srv1 - srv0)) -v b0=$((s1 - s0)) -v b1=$((w1 - w0)) -v hz="$TICKS" \
    -v wall=$((t1 - t0)) -v wt="$wrk_time" 'BEGIN {
      split(wt, u, " "); wall /= 1e9; o0 = (b0 - t) / hz / wall * 100; o1 = (b1 / hz - u[1] - u[2]) / wall * 100
      printf "%.0f%% / %.0f%%", (o0 > 0 ? o0 : 0), (o1 > 0 ? o1 : 0) }')
}

# measure NAME [FLAGS...]: start a replica, pin it, warm up, measure; the
# figures go into the R_* arrays under NAME.
declare -A R_OTHERS R_READY R_RSS_READY R_RPS R_P50 R_P99 R_P999 R_REQS R_ERRS R_NON2XX R_RSS R_HWM R_STARTED
measure() {
  local name=$1
  shift
  echo
  echo "== $name: serve $SERVER_ARGS $*"
  start "$name" "$@"
  echo "   ready after $READY_S s, VmRSS $(mib "$RSS_READY") MiB (api $ADDR, admin $ADMIN_ADDR)"
  scrape "$OUT/$name.ready.metrics"
  taskset -a -p -c $SERVER_CPU "$SERVER_PID" >/dev/null
  if [ "$WARMUP" -gt 0 ]; then
    run_wrk "$name.warmup" $((SEED + 1000000)) "$WARMUP"
    echo "   warm-up: $REQS requests in $WARMUP s (not reported)"
  fi
  scrape "$OUT/$name.before.metrics"
  run_wrk "$name" "$SEED" "$DURATION"
  scrape "$OUT/$name.after.metrics"
  R_READY[$name]=$READY_S R_RSS_READY[$name]=$RSS_READY R_RPS[$name]=$RPS R_P50[$name]=$P50
  R_P99[$name]=$P99 R_P999[$name]=$P999 R_REQS[$name]=$REQS R_ERRS[$name]=$ERRS
  R_NON2XX[$name]=$NON2XX R_STARTED[$name]=$STARTED R_OTHERS[$name]=$OTHERS
  R_RSS[$name]=$(status_kib "$SERVER_PID" VmRSS) R_HWM[$name]=$(status_kib "$SERVER_PID" VmHWM)
  echo "   $REQS requests in $DURATION s: $RPS req/s, p50 $(ms "$P50") ms, p99 $(ms "$P99") ms;" \
    "socket errors $ERRS, non-2xx $NON2XX; VmRSS $(mib "${R_RSS[$name]}") MiB, VmHWM $(mib "${R_HWM[$name]}") MiB"
  echo "   CPU $SERVER_CPU / CPU $WRK_CPU busy with others: $OTHERS of the run (the noise: a few % is quiet)"
  echo "   log: $(grep -c '"level":"ERROR"' "$OUT/$name.log" || true) ERROR and" \
    "$(grep -c '"level":"WARN"' "$OUT/$name.log" || true) WARN lines ($OUT/$name.log)"
  stop "$SERVER_PID"
  SERVER_PID=
}
ms() { awk -v u="$1" 'BEGIN { printf "%.2f", u / 1000 }'; }

for set in $SETS; do
  case $set in
  none) measure none ;;
  budget) measure budget --memory-budget "$BUDGET" ;;
  esac
done

echo
echo "== results: $N tiny workspaces; wrk -t$THREADS -c$CONNECTIONS -d${DURATION}s, sessions of $SESSION requests" \
  "(Zipf s = 1.0, seed $SEED), server on CPU $SERVER_CPU, wrk on CPU $WRK_CPU"
echo
printf '%-8s %9s %13s %9s %8s %8s %9s %9s %9s %7s %s\n' replica start_s ready_RSS_MiB req/s p50_ms p99_ms p99.9_ms RSS_MiB HWM_MiB errors \
  "CPU${SERVER_CPU}/CPU${WRK_CPU}_busy_with_others"
for set in $SETS; do
  printf '%-8s %9s %13s %9s %8s %8s %9s %9s %9s %7s %s\n' "$set" "${R_READY[$set]}" "$(mib "${R_RSS_READY[$set]}")" \
    "${R_RPS[$set]}" "$(ms "${R_P50[$set]}")" "$(ms "${R_P99[$set]}")" "$(ms "${R_P999[$set]}")" \
    "$(mib "${R_RSS[$set]}")" "$(mib "${R_HWM[$set]}")" "$((R_ERRS[$set] + R_NON2XX[$set]))" "${R_OTHERS[$set]}"
done
echo "(start: exec to /readyz 200; RSS and HWM: VmRSS and VmHWM after the measured run; errors: socket errors and non-2xx)"
for set in $SETS; do
  if [ "$((R_ERRS[$set] + R_NON2XX[$set]))" -gt 0 ]; then
    echo "WARNING: $set: ${R_ERRS[$set]} socket errors (timeouts: 10 s) and ${R_NON2XX[$set]} non-2xx answers ($OUT/$set.wrk)"
  fi
done

if [ -n "${R_RPS[budget]:-}" ]; then
  b=$OUT/budget.before.metrics a=$OUT/budget.after.metrics r=$OUT/budget.ready.metrics
  delta() { echo $(($(metric "$a" "$@") - $(metric "$b" "$@"))); }
  hits=$(delta portfolio_replica_resident_lookups_total 'result="hit"')
  misses=$(delta portfolio_replica_resident_lookups_total 'result="miss"')
  loads_ok=$(delta portfolio_replica_demand_loads_total 'outcome="ok"')
  loads_failed=$(delta portfolio_replica_demand_loads_total 'outcome="failed"')
  evictions=$(delta portfolio_replica_evictions_total)
  sessions=$(awk -v r="${R_REQS[budget]}" -v s="$SESSION" 'BEGIN { printf "%.1f", r / s }')
  echo
  echo "budget replica ($BUDGET = $BUDGET_BYTES bytes), over the measured run (from /metrics):"
  budget_seen=$BUDGET_BYTES
  if ! has_metric "$r" portfolio_replica_memory_budget_bytes; then
    budget_seen=
    echo "WARNING: its /metrics has no portfolio_replica_memory_budget_bytes: no budget was in effect," \
      "so this is no budget measurement (the figures below read 0 or n/a, the RSS target is not judged)"
  elif [ "$(metric "$r" portfolio_replica_memory_budget_bytes)" != "$BUDGET_BYTES" ]; then
    budget_seen=$(metric "$r" portfolio_replica_memory_budget_bytes)
    echo "WARNING: it reports a budget of $budget_seen bytes, not $BUDGET_BYTES: the RSS target below uses its figure"
  fi
  echo "  lookups: $hits hits, $misses misses ($((hits + misses)) against wrk's ${R_REQS[budget]} answered requests)"
  awk -v h="$hits" -v m="$misses" -v s="$sessions" -v started="${R_STARTED[budget]}" 'BEGIN {
    if (s > 0 && h + m > 0) printf "  hit ratio per session start: %.4f (1 - %d misses / %s sessions; sessions.lua began %d)\n", 1 - m / s, m, s, started
    else printf "  hit ratio per session start: n/a (%d lookups, %s sessions)\n", h + m, s
    if (h + m > 0) printf "  overall hit ratio: %.4f (hits / (hits + misses))\n", h / (h + m)
    else print "  overall hit ratio: n/a (no lookups counted)"
  }'
  echo "  demand loads: $loads_ok ok, $loads_failed failed (since start: $(metric "$a" portfolio_replica_demand_loads_total 'outcome="ok"') ok," \
    "$(metric "$a" portfolio_replica_demand_loads_total 'outcome="failed"') failed)"
  echo "  evictions: $evictions (since start: $(metric "$a" portfolio_replica_evictions_total))"
  echo "  resident after the run: $(metric "$a" portfolio_replica_resident_workspaces) workspaces of $N," \
    "$(mib "$(($(metric "$a" portfolio_replica_resident_bytes) / 1024))") MiB" \
    "(once ready: $(metric "$r" portfolio_replica_resident_workspaces), $(mib "$(($(metric "$r" portfolio_replica_resident_bytes) / 1024))") MiB)"
  target_kib=$(awk -v b="${budget_seen:-$BUDGET_BYTES}" -v n="$N" 'BEGIN { printf "%.0f", (1.15 * b + 1024 * n + 64 * 1048576) / 1024 }')
  verdict() {
    if [ -z "$budget_seen" ]; then echo "not judged: no budget in effect"
    elif [ "$1" -le "$target_kib" ]; then echo within
    else echo OVER; fi
  }
  echo "  RSS target (1.15 * budget + 1 KiB * N + 64 MiB): $(mib "$target_kib") MiB;" \
    "VmRSS after the run $(mib "${R_RSS[budget]}") MiB ($(verdict "${R_RSS[budget]}")), VmHWM $(mib "${R_HWM[budget]}") MiB ($(verdict "${R_HWM[budget]}"))"
fi

if [ -n "${R_RPS[budget]:-}" ] && [ -n "${R_RPS[none]:-}" ]; then
  echo
  awk -v rb="${R_RPS[budget]}" -v rn="${R_RPS[none]}" -v sb="${R_READY[budget]}" -v sn="${R_READY[none]}" \
    -v mb="${R_RSS[budget]}" -v mn="${R_RSS[none]}" -v seen="${budget_seen:-}" 'BEGIN {
    printf "budget / no budget: req/s %.3f (%d / %d), start %.3f (%s s / %s s), VmRSS %.3f%s\n", rb / rn, rb, rn, sb / sn, sb, sn, mb / mn,
      (seen == "" ? " (WARNING: the budget replica reported no budget)" : "")
  }'
fi
echo
echo "raw wrk output, logs and metrics (ready, before and after the measured run): $OUT/"
