#!/usr/bin/env bash
# The README's examples, run as written, so that they stay true:
#
#   bash .ci/readme.sh
#
# 1. "Two commands": `cargo run --release` serves the demo workspaces of
#    ./snapshots (given free loopback ports: other servers may hold 8080 on
#    a shared machine); both must serve. `cargo test` is .ci/run's own step.
# 2. Every other ```sh block of README.md, in order, each in its own
#    `bash -euo pipefail`, in a scratch copy of snapshots/ and examples/,
#    with the release binary first on PATH, against a server on that copy:
#    127.0.0.1:8080 and 127.0.0.1:9090 in a block become the addresses the
#    kernel gave it, and curl fails on an HTTP error (-f), so every request
#    of the tour must answer 2xx. A block after a line starting with
#    `<!-- readme.sh: not run` is skipped (it needs a bucket, or is step 1).
#
# tests/it/readme.rs checks what a shell cannot see: the first workspace's
# key hash, its `check` line, and the JSON of every page. Needs python3 and
# curl. Servers are stopped by PID on exit. Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh

ROOT=$(pwd)
SCRATCH=$(mktemp -d "${TMPDIR:-/tmp}/readme.XXXXXX")
SCRATCH_DIRS+=("$SCRATCH")

echo "-- cargo run --release (the demo)"
cargo build --release --locked --quiet --bin portfolio-replica
cargo run --release --locked --quiet -- --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 \
  --log-format json 2>"$SCRATCH/demo.log" &
SERVER_PID=$!
wait_for_server "cargo run --release" "$SCRATCH/demo.log" 120
serving=$(curl -fsS "http://$ADMIN_ADDR/snapshots" |
  python3 -c 'import json, sys; print(json.load(sys.stdin)["summary"]["serving"])')
if [ "$serving" != 2 ]; then
  echo "cargo run --release serves $serving workspaces, not the demo's 2" >&2
  exit 1
fi
stop "$SERVER_PID"
SERVER_PID=

# The blocks, one file each: block-01.sh, block-02.sh, ...
python3 - "$ROOT/README.md" "$SCRATCH" <<'PY'
import re, sys
readme, out = open(sys.argv[1]).read(), sys.argv[2]
n = 0
for m in re.finditer(r"(?m)^```sh\n(.*?)^```", readme, re.S):
    before = readme[: m.start()].rstrip("\n").rsplit("\n", 1)[-1]
    if before.startswith("<!-- readme.sh: not run"):
        continue
    n += 1
    with open(f"{out}/block-{n:02}.sh", "w") as f:
        f.write(m.group(1))
print(f"{n} blocks to run")
PY

mkdir "$SCRATCH/work"
cp -r snapshots examples "$SCRATCH/work/"
PATH="$ROOT/target/release:$PATH"
cd "$SCRATCH/work"
portfolio-replica --snapshots snapshots --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 \
  --log-format json 2>"$SCRATCH/server.log" &
SERVER_PID=$!
wait_for_server "the README's server" "$SCRATCH/server.log" 60

for block in "$SCRATCH"/block-*.sh; do
  echo "-- $(basename "$block"): $(head -1 "$block")"
  script=$(sed -e "s/127\.0\.0\.1:8080/$ADDR/g" -e "s/127\.0\.0\.1:9090/$ADMIN_ADDR/g" "$block")
  if ! bash -euo pipefail -c "curl() { command curl -f \"\$@\"; }; $script" >"$SCRATCH/out.txt" 2>&1; then
    echo "README block $(basename "$block") failed:" >&2
    cat "$block" >&2
    echo "-- its output:" >&2
    cat "$SCRATCH/out.txt" >&2
    exit 1
  fi
done
echo "readme: every block ran"
