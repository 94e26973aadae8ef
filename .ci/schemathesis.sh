#!/usr/bin/env bash
# API fuzzing: schemathesis against the server's own OpenAPI document.
#
#   bash .ci/schemathesis.sh
#
# Builds the server (debug profile: `cargo test` in .ci/run has already built
# it, so this is a no-op there), serves a copy of snapshots/ on free loopback
# ports, and runs a pinned schemathesis against GET /openapi.json with the
# demo key of ws-acme. Every check that applies to a read-only API runs:
# server errors, status codes, content types, response headers, response
# bodies against their schemas, schema-violating requests rejected (4xx),
# schema-valid requests accepted, missing required headers, methods the
# document does not list (405 with a matching Allow), and requests without
# or with a bad key (401). The checks about resources a test creates
# (use_after_free, ensure_resource_availability, object_level_authorization)
# have nothing to act on here and are left out.
#
# Real ids of the demo snapshots (and a few of the other workspace, which
# must be 404) are fed to the id parameters half of the time, and real filter
# values to the filters, so the single-record endpoints are answered with
# data and not only with 404s; the coverage phase also repeats known query
# parameters (a 400). Generation is reproducible: a fixed seed, no
# example database carried between runs.
#
# Environment: ST_MAX_EXAMPLES (test cases per operation and phase, default
# 100), ST_SEED (default 20261122), ST_TIME_LIMIT (wall-clock bound of the
# schemathesis run in seconds, default 300; past it the run is killed and
# counts as a failure), ST_WORKERS (default 1: one worker makes the same
# seed send the same requests, and two were no faster on this machine).
#
# The venv lives in target/ci-venv and is reused while it holds the pinned
# version; reports (JUnit XML, and an NDJSON event log with every request)
# and the server log go to target/schemathesis/. Reproduce a failure from
# there with `cd target/schemathesis && ../ci-venv/bin/st replay <ID>` while
# a server runs on the same address, or with the curl line it prints.
# Needs python3 (with venv), curl, and PyPI for the first run. Loopback
# only; the server is killed by PID on exit. Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh

ST_VERSION=4.32.5
MAX_EXAMPLES=${ST_MAX_EXAMPLES:-100}
SEED=${ST_SEED:-20261122}
TIME_LIMIT=${ST_TIME_LIMIT:-300}
WORKERS=${ST_WORKERS:-1}
KEY=cura_demo_acme_key
CHECKS=not_a_server_error,status_code_conformance,content_type_conformance
CHECKS+=,response_headers_conformance,response_schema_conformance
CHECKS+=,negative_data_rejection,positive_data_acceptance
CHECKS+=,missing_required_header,unsupported_method,allow_header_conformance
CHECKS+=,ignored_auth

ROOT=$(pwd)
VENV=$ROOT/target/ci-venv
WORK=$ROOT/target/schemathesis
BIN=$ROOT/target/debug/portfolio-replica
started=$(date +%s)

for tool in python3 curl; do
  command -v "$tool" >/dev/null || {
    echo "schemathesis: missing $tool" >&2
    exit 1
  }
done


echo "== schemathesis $ST_VERSION (venv $VENV)"
if [ "$("$VENV/bin/st" --version 2>/dev/null || true)" != "st, version $ST_VERSION" ]; then
  rm -rf "$VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
    "schemathesis==$ST_VERSION"
fi
"$VENV/bin/st" --version

echo "== cargo build (debug)"
cargo build --locked --quiet --bin portfolio-replica

rm -rf "$WORK"
mkdir -p "$WORK"
SNAP_DIR=$(mktemp -d "${TMPDIR:-/tmp}/schemathesis-snapshots.XXXXXX")
SCRATCH_DIRS+=("$SNAP_DIR")
cp snapshots/*.json "$SNAP_DIR/"

# Port 0: the kernel picks free ports, and the server logs which.
LOG=$WORK/server.log
"$BIN" serve --snapshots "$SNAP_DIR" --listen 127.0.0.1:0 \
  --admin-listen 127.0.0.1:0 --log-format json 2>"$LOG" &
SERVER_PID=$!

wait_for_server schemathesis "$LOG" 30
echo "== server on http://$ADDR (pid $SERVER_PID), snapshots in $SNAP_DIR"

# Config: dictionaries of real ids and filter values from the snapshots.
"$VENV/bin/python" - "$SNAP_DIR" >"$WORK/schemathesis.toml" <<'PY'
import json
import sys
from pathlib import Path

snap = Path(sys.argv[1])
acme = json.loads((snap / "acme.json").read_text())
globex = json.loads((snap / "globex.json").read_text())


def ids(collection):
    # Every id of the key's workspace, and two of the other one (404).
    return [r["id"] for r in acme.get(collection, [])] + [
        r["id"] for r in globex.get(collection, [])[:2]
    ]


def values(collection, field):
    found = {r["attributes"].get(field) for r in acme.get(collection, [])}
    return sorted(v for v in found if isinstance(v, str) and v)


dictionaries = {
    "company_ids": ids("companies"),
    "task_ids": ids("tasks"),
    "note_ids": ids("notes"),
    "meeting_ids": ids("meetings"),
    "task_status": values("tasks", "status"),
    "task_priority": values("tasks", "priority"),
    "company_priority": values("companies", "priority"),
    "feed_type": values("feed", "type"),
}
bindings = [
    ("^/portfolio/\\{id\\}", {"path.id": "company_ids"}),
    ("^/tasks/\\{id\\}$", {"path.id": "task_ids"}),
    ("^/notes/\\{id\\}$", {"path.id": "note_ids"}),
    ("^/meetings/\\{id\\}$", {"path.id": "meeting_ids"}),
    ("^/portfolio$", {"query.filter[priority]": "company_priority"}),
    (
        "^/tasks$",
        {"query.filter[status]": "task_status", "query.filter[priority]": "task_priority"},
    ),
    ("^/feed$", {"query.filter[type]": "feed_type"}),
]
q = json.dumps  # a JSON string of ASCII text is a TOML basic string
print("# Written by .ci/schemathesis.sh from the demo snapshots.")
# A known query parameter given twice is a 400: have the coverage phase try it.
print("[phases.coverage]")
print("generate-duplicate-query-parameters = true")
for name, entries in dictionaries.items():
    if entries:
        print(f"[dictionaries.{name}]")
        print(f"values = [{', '.join(q(v) for v in entries)}]")
for regex, params in bindings:
    params = {k: v for k, v in params.items() if dictionaries[v]}
    if not params:
        continue
    print()
    print("[[operations]]")
    print(f"include-path-regex = {q(regex)}")
    print("[operations.parameters]")
    for param, name in params.items():
        print(f"{q(param)} = {{ dictionary = {q(name)}, probability = 0.5 }}")
PY

echo "== st run: $MAX_EXAMPLES examples per operation and phase, seed $SEED, limit ${TIME_LIMIT}s"
st_started=$(date +%s)
status=0
(
  cd "$WORK"
  exec timeout --kill-after=10 "$TIME_LIMIT" "$VENV/bin/st" \
    --config-file "$WORK/schemathesis.toml" run "http://$ADDR/openapi.json" \
    --header "Authorization: Bearer $KEY" \
    --checks "$CHECKS" \
    --max-examples "$MAX_EXAMPLES" \
    --seed "$SEED" \
    --generation-database none \
    --workers "$WORKERS" \
    --request-timeout 10 \
    --no-color \
    --report junit,ndjson --report-dir "$WORK"
) || status=$?
finished=$(date +%s)

if [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; then
  echo "schemathesis: FAILED: the run passed its ${TIME_LIMIT}s limit" >&2
fi
if ! kill -0 "$SERVER_PID" 2>/dev/null; then
  echo "schemathesis: FAILED: the server died during the run; its log:" >&2
  tail -50 "$LOG" >&2
  status=1
fi
result=passed
[ "$status" -eq 0 ] || result="FAILED (exit $status)"
echo "schemathesis: $result: st run $((finished - st_started))s, step $((finished - started))s; reports in target/schemathesis/"
exit "$status"
