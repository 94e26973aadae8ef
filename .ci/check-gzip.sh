#!/usr/bin/env bash
# gzip answers against an independent decoder: scripts/check-gzip.py (Python's
# gzip and zlib modules) on the two `small` workspaces of the generator.
#
#   bash .ci/check-gzip.sh
#
# Builds the server (debug profile: `cargo test` in .ci/run has already built
# it), generates the snapshots into a temporary directory, serves them on
# loopback ports the kernel picks (/readyz waits until the records are
# precompressed), and checks every endpoint of both workspaces at many
# offsets and limits. Needs python3 and curl. The server is killed by PID on
# exit. Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=$(pwd)/target/debug/portfolio-replica
SERVER_PID=
SNAP_DIR=
# shellcheck disable=SC2317 # called by the EXIT trap
cleanup() {
  if [ -n "$SERVER_PID" ]; then
    kill "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
  fi
  if [ -n "$SNAP_DIR" ]; then
    rm -rf "$SNAP_DIR"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

cargo build --locked --quiet --bin portfolio-replica
SNAP_DIR=$(mktemp -d "${TMPDIR:-/tmp}/check-gzip.XXXXXX")
mkdir "$SNAP_DIR/snap"
"$BIN" generate --out "$SNAP_DIR/snap" --scale small --seed 7 >"$SNAP_DIR/generate.txt"

LOG=$SNAP_DIR/server.log
"$BIN" serve --snapshots "$SNAP_DIR/snap" --listen 127.0.0.1:0 \
  --admin-listen 127.0.0.1:0 --precompress on --log-format json 2>"$LOG" &
SERVER_PID=$!
ADDR=
for _ in $(seq 1 600); do
  if ! kill -0 "$SERVER_PID" 2>/dev/null; then
    echo "check-gzip: the server exited at start:" >&2
    cat "$LOG" >&2
    exit 1
  fi
  if [ -z "$ADDR" ]; then
    ADDR=$(sed -n 's/.*"message":"serving","listen":"\(127\.0\.0\.1:[0-9]*\)".*/\1/p' "$LOG" | head -1)
  fi
  if [ -n "$ADDR" ] && curl -fsS -o /dev/null "http://$ADDR/readyz" 2>/dev/null; then
    break
  fi
  sleep 0.1
done
if [ -z "$ADDR" ] || ! curl -fsS -o /dev/null "http://$ADDR/readyz"; then
  echo "check-gzip: the server was not ready after 60 s:" >&2
  cat "$LOG" >&2
  exit 1
fi

# One line per workspace: "<dir>/<file>: workspace <id>, ..., key <key>".
while read -r line; do
  file=${line%%:*}
  key=${line##* key }
  echo "== $(basename "$file")"
  python3 scripts/check-gzip.py "http://$ADDR" "$key" "$file"
done <"$SNAP_DIR/generate.txt"
