# shellcheck shell=bash
# Shared by the benchmarks that time a server's start (parse-bench.sh,
# warmup-bench.sh): `start_once` starts one server pinned to some cores and
# gives the time from exec to its first 200 of GET /readyz, measured by a
# poller started before it; their common settings, each from the
# environment if set: BIN (the server, built if missing), CORE (the one
# core, default 1), ALL_CORES (default all of them), POLL_CORE (the
# poller's, default 0), POLL_MS (its interval, default 20). Needs lib.sh
# sourced first, and TMP set before `start_once`.

export LC_ALL=C
BIN=${BIN:-target/release/portfolio-replica}
CORE=${CORE:-1}
ALL_CORES=${ALL_CORES:-0-$(($(nproc --all) - 1))}
POLL_CORE=${POLL_CORE:-0}
POLL_MS=${POLL_MS:-20}
[ -x "$BIN" ] || build_release

# The readiness poller, started (and armed) before the server so that its
# own start costs the server nothing: it finds the API address in the
# server's JSON log, then asks GET /readyz every POLL_MS until a 200, and
# prints that moment (Unix time, s). One process with no forks, on
# POLL_CORE: curl in a loop (wait_ready) costs a process per try and
# polls every 100 ms, too coarse for loads of a few hundred ms. Not much
# finer either: each try is a new connection that the server's runtime
# wakes up for, on the server's cores; every 5 ms, they made a one-core
# load of the medium file 40% slower (424-502 ms against 294-300 every
# 50 ms). Every 20 ms by default: a tenth of the medium file's load.
# shellcheck disable=SC2016 # Python, not shell
POLL='
import http.client, os, re, sys, time
log, armed, interval, deadline = sys.argv[1], sys.argv[2], float(sys.argv[3]) / 1000, time.monotonic() + 600
serving = re.compile(r"\"message\":\"serving\",\"listen\":\"([0-9.]+):([0-9]+)\"")
open(armed, "w").close()
addr = None
while time.monotonic() < deadline:
    if addr is None:
        try:
            with open(log) as f:
                m = serving.search(f.read())
            addr = m and (m.group(1), int(m.group(2)))
        except FileNotFoundError:
            pass
    if addr is not None:
        try:
            conn = http.client.HTTPConnection(*addr, timeout=5)
            conn.request("GET", "/readyz")
            status = conn.getresponse().status
            conn.close()
            if status == 200:
                print(f"{time.time():.6f}")
                sys.exit(0)
        except OSError:
            pass
    time.sleep(interval if addr else 0.001)
sys.exit("no 200 from /readyz within 600 s")
'

# median: of the numbers on stdin.
median() {
  sort -g | awk '{v[NR] = $1} END {if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2}'
}
# start_once DIR CPUS LOG [FLAG...]: one server start over DIR pinned to
# CPUS, with FLAGs; prints "seconds-to-ready first-scan-ms". It must have
# loaded at least one snapshot.
start_once() {
  local dir=$1 cpus=$2 log=$3 out=$TMP/poll.out armed=$TMP/armed t0 ready which scan
  shift 3
  rm -f "$log" "$armed"
  cat "$dir"/*.json >/dev/null
  taskset -c "$POLL_CORE" python3 -c "$POLL" "$log" "$armed" "$POLL_MS" >"$out" &
  local poller=$!
  track "$poller"
  while [ ! -e "$armed" ]; do
    kill -0 "$poller" 2>/dev/null || { echo "the readiness poller did not start" >&2; exit 1; }
    sleep 0.01
  done
  t0=$EPOCHREALTIME
  taskset -c "$cpus" "$BIN" --snapshots "$dir" --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 \
    --log-format json "$@" 2>"$log" &
  SERVER_PID=$!
  if ! wait -n -p which "$poller" "$SERVER_PID" || [ "$which" != "$poller" ]; then
    echo "the server over $dir (cores $cpus) was not ready:" >&2
    cat "$log" >&2
    exit 1
  fi
  ready=$(cat "$out")
  # Ready also means a scan that rejected the files: it must have loaded.
  if ! grep -q '"message":"snapshot loaded"' "$log"; then
    echo "the server over $dir ready without loading a file:" >&2
    cat "$log" >&2
    exit 1
  fi
  scan=$(sed -n 's/.*"message":"first scan finished".*"elapsed_ms":\([0-9]*\).*/\1/p' "$log" | head -1)
  stop "$SERVER_PID"
  SERVER_PID=
  # Both are reaped: nothing left for lib.sh to stop.
  # shellcheck disable=SC2034 # lib.sh's list
  PIDS=()
  awk -v a="$t0" -v b="$ready" -v s="$scan" 'BEGIN {printf "%.4f %s\n", b - a, s}'
}

