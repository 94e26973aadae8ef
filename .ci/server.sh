# shellcheck shell=bash
# Sourced by the CI scripts that start the server on port 0 (check-gzip.sh,
# schemathesis.sh, clients.sh). On exit (or INT/TERM) it stops the server
# SERVER_PID, if any, by its PID, and removes the directories listed in
# SCRATCH_DIRS.
#
#   wait_for_server NAME LOG SECONDS
#
# Waits until the server SERVER_PID (started with `--listen 127.0.0.1:0
# --log-format json 2>"$LOG"`) has logged the address it listens on, which
# it sets as ADDR, and its /readyz answers 200. If the server exits first,
# or is not ready within SECONDS, prints NAME, the reason and the log, and
# exits 1.
wait_for_server() {
  local name=$1 log=$2 seconds=$3
  ADDR=
  for _ in $(seq 1 $((seconds * 10))); do
    if ! kill -0 "$SERVER_PID" 2>/dev/null; then
      echo "$name: the server exited at start:" >&2
      cat "$log" >&2
      exit 1
    fi
    if [ -z "$ADDR" ]; then
      ADDR=$(sed -n 's/.*"message":"serving","listen":"\(127\.0\.0\.1:[0-9]*\)".*/\1/p' "$log" | head -1)
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

SERVER_PID=
SCRATCH_DIRS=()
# shellcheck disable=SC2317 # called by the EXIT trap
cleanup() {
  if [ -n "$SERVER_PID" ]; then
    kill "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
  fi
  for dir in "${SCRATCH_DIRS[@]}"; do
    rm -rf "$dir"
  done
}
trap cleanup EXIT
trap 'exit 130' INT TERM
