# shellcheck shell=bash
# The one shell library of scripts/ and .ci/: processes stopped by PID and
# scratch directories removed on exit, and waiting for a server to be ready.
# Source it after `cd` to the repository root:
#
#   source scripts/lib.sh
#
# On exit (and on INT/TERM, which exit 130) it runs `on_exit` if the script
# defines one (for what only that script knows: a container, a stop file),
# stops every process in PIDS and SERVER_PID by PID (all are signalled
# before any is waited for, so a slow one does not hold up the rest), and
# removes every directory in SCRATCH_DIRS.
#
#   track PID...                         stop PID on exit
#   stop PID...                          stop PID now (kill, then wait)
#   wait_ready URL SECONDS [PID]         wait for a 200 from URL; 1 if PID exits or time runs out
#   server_addr LOG [api|admin]          the address a `--log-format json` server logged
#   wait_for_server NAME LOG SECONDS [PID]
#       waits until the server PID (default SERVER_PID), started with
#       `--listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 --log-format json
#       2>"$LOG"`, has logged its addresses (set as ADDR and ADMIN_ADDR) and
#       its /readyz answers 200; if it exits first or is not ready within
#       SECONDS, prints NAME, the reason and the log, and exits 1.

PIDS=()
SERVER_PID=
SCRATCH_DIRS=()

track() { PIDS+=("$@"); }

# scratch_dir VAR NAME: a new directory NAME.XXXXXX under TMPDIR, removed
# at exit, its path put in the variable VAR (not echoed: a $(...) would
# lose the registration in its subshell).
scratch_dir() {
  local dir
  dir=$(mktemp -d "${TMPDIR:-/tmp}/$2.XXXXXX")
  SCRATCH_DIRS+=("$dir")
  printf -v "$1" '%s' "$dir"
}

# build_release: the release binary, quietly, within 30 minutes.
build_release() { timeout 1800 cargo build --release --locked --quiet --bin portfolio-replica; }

stop() {
  local pid
  for pid in "$@"; do kill "$pid" 2>/dev/null || true; done
  for pid in "$@"; do wait "$pid" 2>/dev/null || true; done
}

wait_ready() {
  local url=$1 seconds=$2 pid=${3:-} i
  for ((i = 0; i < seconds * 10; i++)); do
    if [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null; then
      echo "no 200 from $url: process $pid exited" >&2
      return 1
    fi
    curl -fsS -o /dev/null --max-time 5 "$url" 2>/dev/null && return 0
    sleep 0.1
  done
  echo "no 200 from $url after ${seconds}s" >&2
  return 1
}

server_addr() {
  local log=$1 which=${2:-api}
  local n=1
  if [ "$which" = admin ]; then n=2; fi
  # The log may not exist yet: the server's shell creates it after the
  # script has moved on.
  if [ -f "$log" ]; then
    sed -n "s/.*\"message\":\"serving\",\"listen\":\"\([0-9.:]*\)\",\"admin_listen\":\"\([0-9.:]*\)\".*/\\$n/p" "$log" | head -1
  fi
}

# shellcheck disable=SC2034 # ADMIN_ADDR is for the script that sources this
wait_for_server() {
  local name=$1 log=$2 seconds=$3 pid=${4:-$SERVER_PID} i
  ADDR=
  ADMIN_ADDR=
  for ((i = 0; i < seconds * 10; i++)); do
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "$name: the server exited at start:" >&2
      cat "$log" >&2
      exit 1
    fi
    if [ -z "$ADDR" ]; then
      ADDR=$(server_addr "$log" api)
      ADMIN_ADDR=$(server_addr "$log" admin)
    fi
    if [ -n "$ADDR" ] && curl -fsS -o /dev/null --max-time 5 "http://$ADDR/readyz" 2>/dev/null; then
      return 0
    fi
    sleep 0.1
  done
  echo "$name: the server was not ready after $seconds s:" >&2
  cat "$log" >&2
  exit 1
}

# start_moto WORK BUCKET: installs the moto the tests pin into
# target/tmp/moto-venv if missing (from PyPI), starts it on 127.0.0.1 (its
# logs in WORK), creates BUCKET, and exports the AWS_* variables that point
# portfolio-replica at it. Sets MOTO (host:port).
MOTO_VERSION=5.2.5
start_moto() {
  local work=$1 bucket=$2 venv=target/tmp/moto-venv i
  if [ ! -f "$venv/.installed-moto-$MOTO_VERSION" ]; then
    echo "== install moto $MOTO_VERSION into $venv"
    rm -rf "$venv"
    mkdir -p "$(dirname "$venv")"
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "moto[server]==$MOTO_VERSION"
    echo "$MOTO_VERSION" >"$venv/.installed-moto-$MOTO_VERSION"
  fi
  "$venv/bin/moto_server" -H 127.0.0.1 -p 0 >"$work/moto.out" 2>"$work/moto.log" &
  PIDS+=($!)
  MOTO=
  for ((i = 0; i < 300; i++)); do
    MOTO=$(sed -n 's|.*Running on http://\(127\.0\.0\.1:[0-9]*\).*|\1|p' "$work/moto.log" | head -1)
    [ -n "$MOTO" ] && curl -fsS -o /dev/null "http://$MOTO/" 2>/dev/null && break
    sleep 0.1
  done
  if [ -z "$MOTO" ]; then
    echo "moto did not start:" >&2
    cat "$work/moto.log" >&2
    exit 1
  fi
  curl -fsS -o /dev/null -X PUT "http://$MOTO/$bucket"
  export AWS_ENDPOINT_URL="http://$MOTO" AWS_ALLOW_HTTP=true AWS_REGION=us-east-1
  export AWS_ACCESS_KEY_ID=bench AWS_SECRET_ACCESS_KEY=bench-secret
}

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

# apt_packages LOG PACKAGE...: installs Debian's packages (apt-get update
# only if the install fails without it), its output in LOG, starting none
# of their daemons (a temporary policy-rc.d: nginx's would take port 80).
# Needs root or sudo; fails, saying so, otherwise.
POLICY_RC_D=
apt_packages() {
  local log=$1
  shift
  if [ "$(id -u)" -ne 0 ] && ! command -v sudo >/dev/null; then
    echo "$* missing; install it (apt-get install $*)" >&2
    return 1
  fi
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    POLICY_RC_D=/usr/sbin/policy-rc.d
    printf '#!/bin/sh\n# scripts/lib.sh: install packages, start no daemon\nexit 101\n' |
      as_root tee "$POLICY_RC_D" >/dev/null
    as_root chmod 0755 "$POLICY_RC_D"
  fi
  local install=(as_root env DEBIAN_FRONTEND=noninteractive timeout 600
    apt-get install -y -q --no-install-recommends "$@")
  local ok=0
  if ! "${install[@]}" >"$log" 2>&1; then
    { as_root timeout 300 apt-get update -q && "${install[@]}"; } >>"$log" 2>&1 || ok=1
  fi
  if [ -n "$POLICY_RC_D" ]; then as_root rm -f "$POLICY_RC_D"; fi
  POLICY_RC_D=
  [ "$ok" -eq 0 ] || echo "apt-get install $* failed; see $log" >&2
  return "$ok"
}

# shellcheck disable=SC2317 # called by the EXIT trap
lib_cleanup() {
  if declare -F on_exit >/dev/null; then
    on_exit || true
  fi
  if [ -n "$POLICY_RC_D" ]; then as_root rm -f "$POLICY_RC_D"; fi
  local all=("${PIDS[@]}")
  if [ -n "$SERVER_PID" ]; then all+=("$SERVER_PID"); fi
  if [ "${#all[@]}" -gt 0 ]; then stop "${all[@]}"; fi
  local dir
  for dir in "${SCRATCH_DIRS[@]}"; do
    rm -rf "$dir"
  done
}
trap lib_cleanup EXIT
trap 'exit 130' INT TERM
