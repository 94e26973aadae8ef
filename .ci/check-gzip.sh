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
# shellcheck source=scripts/lib.sh
source scripts/lib.sh

BIN=$(pwd)/target/debug/portfolio-replica

cargo build --locked --quiet --bin portfolio-replica
SNAP_DIR=$(mktemp -d "${TMPDIR:-/tmp}/check-gzip.XXXXXX")
SCRATCH_DIRS+=("$SNAP_DIR")
mkdir "$SNAP_DIR/snap"
"$BIN" generate --out "$SNAP_DIR/snap" --scale small --seed 7 >"$SNAP_DIR/generate.txt"

LOG=$SNAP_DIR/server.log
"$BIN" serve --snapshots "$SNAP_DIR/snap" --listen 127.0.0.1:0 \
  --admin-listen 127.0.0.1:0 --precompress on --log-format json 2>"$LOG" &
SERVER_PID=$!
wait_for_server check-gzip "$LOG" 60

# One line per workspace: "<dir>/<file>: workspace <id>, ..., key <key>".
while read -r line; do
  file=${line%%:*}
  key=${line##* key }
  echo "== $(basename "$file")"
  python3 scripts/check-gzip.py "http://$ADDR" "$key" "$file"
done <"$SNAP_DIR/generate.txt"
