#!/usr/bin/env bash
# Soak test: minutes of mixed load while a 100 MB snapshot is hot-reloaded
# over and over; fails on any unexpected answer or socket error, or if the
# server's memory grows.
#
#   MINUTES=10 scripts/soak.sh [DATA_DIR]     (default target/soak, git-ignored)
#
# What it does, all on loopback:
# - builds the release server and generates the `medium` snapshot (~100 MB,
#   ~164 k records) twice: seed 42 (version A) and seed 43 (version B). B is
#   given A's API key and A's records that the load asks for by id (one
#   company, one of its tasks, notes and meetings with their notes, roles and
#   metrics), so every request of the load is answered 200 by both versions
#   while everything else in the workspace (and the version) changes;
# - serves A plus the demo snapshots (snapshots/) from DATA_DIR/serve;
# - drives it with wrk and one Lua script (generated into DATA_DIR/soak.lua)
#   in two roles: `good`, CONNECTIONS connections rotating over all 12
#   endpoints of the three workspaces, with filters, paging, both cursor
#   forms, include=notes, gzip and If-None-Match (304); and `bad`, one
#   connection at ~100 requests/s sending deliberately wrong requests (bad
#   or missing key: 401; unknown id, another workspace's id, unknown path:
#   404), each checked against the status it must get;
# - every RELOAD_EVERY seconds replaces medium.json with the other version
#   (copy to medium.json.tmp, rename into place);
# - samples the server's RSS every SAMPLE_EVERY seconds; the baseline is the
#   first sample once the snapshots are loaded and the load has run WARMUP
#   seconds, before the first reload. At the end the reloads stop, version A
#   is put back once more, and three end samples are taken once it is loaded.
#
# Memory is judged on the floor of the last quarter of the run (the lowest
# sample from 3/4 of the run on, end samples included) against the baseline,
# not on one end sample: under load, what glibc keeps after a reload depends
# on which requests still held the old version when it was freed, and one
# sample taken at a steady state swings between +0% and +45% of the baseline
# from one reload to the next without any trend (measured over 30 reloads).
# A leak lifts the floor; that noise does not.
#
# Prints total requests, answers by status (the deliberate 401/404 counted
# apart from unexpected ones), socket errors (connect/read/write/timeout),
# latency, reloads written and loaded, RSS at baseline/end/floor/max. Exits 1 if
# any answer was unexpected (a non-2xx/3xx to a good request, or a bad
# request answered with another status than its own), any socket error
# happened, the server counted a 5xx, a reload failed, or the RSS floor of
# the last quarter is more than RSS_LIMIT_PCT above the baseline.
#
# Environment: MINUTES (default 10), CONNECTIONS (default 32), THREADS (wrk
# threads of the good role, default 2), RELOAD_EVERY (s, default 5),
# SAMPLE_EVERY (s, default 3), WARMUP (s, default 5), RSS_LIMIT_PCT (default
# 20), TIMEOUT (wrk's per-request timeout, default 5s). Needs wrk
# (apt-get install wrk), curl and python3. Takes MINUTES plus about half a
# minute; every process it starts is stopped on exit, by PID. Server log,
# wrk output, reload log and RSS samples stay in DATA_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."

MINUTES=${MINUTES:-10}
CONNECTIONS=${CONNECTIONS:-32}
THREADS=${THREADS:-2}
RELOAD_EVERY=${RELOAD_EVERY:-5}
SAMPLE_EVERY=${SAMPLE_EVERY:-3}
WARMUP=${WARMUP:-5}
RSS_LIMIT_PCT=${RSS_LIMIT_PCT:-20}
TIMEOUT=${TIMEOUT:-5s}
DATA=${1:-target/soak}

for n in MINUTES CONNECTIONS THREADS RELOAD_EVERY SAMPLE_EVERY WARMUP RSS_LIMIT_PCT; do
  if ! [[ ${!n} =~ ^[1-9][0-9]*$ ]]; then
    echo "soak: $n must be a positive integer (got '${!n}')" >&2
    exit 2
  fi
done
if [ "$MINUTES" -gt 1440 ]; then
  echo "soak: MINUTES is at most 1440" >&2
  exit 2
fi
missing=()
for tool in wrk curl python3; do
  command -v "$tool" >/dev/null || missing+=("$tool")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "soak: missing ${missing[*]} (Debian: apt-get install wrk curl python3)" >&2
  exit 2
fi

echo "# soak $(date -u '+%Y-%m-%dT%H:%M:%SZ'): MINUTES=$MINUTES CONNECTIONS=$CONNECTIONS THREADS=$THREADS RELOAD_EVERY=$RELOAD_EVERY SAMPLE_EVERY=$SAMPLE_EVERY"
echo "# commit: $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet HEAD 2>/dev/null || echo ' (dirty tree)')"

# Every process started here is recorded and stopped on exit, by PID; the
# samplers are told to stop first.
STOP=
# shellcheck disable=SC2317 # called by scripts/lib.sh's EXIT trap
on_exit() {
  if [ -n "$STOP" ]; then
    touch "$STOP"
  fi
}
# shellcheck source=scripts/lib.sh
source scripts/lib.sh

cargo build --release --locked --quiet --bin portfolio-replica
BIN=target/release/portfolio-replica

mkdir -p "$DATA"
DATA=$(cd "$DATA" && pwd)
SNAP=$DATA/serve
VERSIONS=$DATA/versions
STOP=$DATA/stop
rm -rf "$SNAP" "$VERSIONS" "$DATA/gen42" "$DATA/gen43" "$STOP"
mkdir -p "$SNAP" "$VERSIONS"

echo "== generating medium snapshots (seeds 42 and 43)"
KEY_LINE=$("$BIN" generate --out "$DATA/gen42" --scale medium --seed 42)
"$BIN" generate --out "$DATA/gen43" --scale medium --seed 43 >/dev/null
MEDIUM_KEY=$(sed -n 's/.*, key \(cura_[0-9A-Za-z_]*\).*/\1/p' <<<"$KEY_LINE")
if [ -z "$MEDIUM_KEY" ]; then
  echo "soak: no key in the generator's output: $KEY_LINE" >&2
  exit 1
fi
mv "$DATA/gen42/medium.json" "$VERSIONS/a.json"

# Version B: seed 43 with A's key line and A's records the load names by id.
# Prints those ids.
read -r M_COMPANY M_TASK M_NOTE M_MEETING < <(
  python3 - "$VERSIONS/a.json" "$DATA/gen43/medium.json" "$VERSIONS/b.json" <<'PY'
import json
import sys

a_path, b_path, out_path = sys.argv[1:4]


def sections(path):
    """Yields (collection or None, line) for a generated snapshot, one record a line."""
    current = None
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith('"') and line.rstrip().endswith(":["):
                current = line[1 : line.index('"', 1)]
                yield None, line
                continue
            yield current, line


def record(line):
    # The record, whatever closes the collection after it on the line.
    return json.JSONDecoder().raw_decode(line)[0]


def records(path):
    for coll, line in sections(path):
        if coll is not None:
            try:
                yield coll, record(line)
            except ValueError:
                pass


# The company: that of the first meeting with meeting notes.
meeting_company = {}
company = noted = None
for coll, rec in records(a_path):
    if coll == "meetings":
        meeting_company[rec["id"]] = rec["attributes"]["company_id"]
    elif coll == "meeting_notes" and rec["attributes"]["meeting_id"] in meeting_company:
        noted = rec["attributes"]["meeting_id"]
        company = meeting_company[noted]
        break

api_keys = None
keep = {}
meeting_ids = set()
for coll, line in sections(a_path):
    if coll is None:
        if line.startswith('"api_keys"'):
            api_keys = line
        continue
    try:
        rec = record(line)
    except ValueError:
        continue
    attrs = rec.get("attributes", {})
    if coll == "companies" and rec["id"] == company:
        keep.setdefault(coll, []).append(rec)
    elif coll in ("tasks", "notes", "roles", "meetings") and attrs.get("company_id") == company:
        if len(keep.get(coll, [])) < 3 or rec["id"] == noted:
            keep.setdefault(coll, []).append(rec)
            if coll == "meetings":
                meeting_ids.add(rec["id"])
    elif coll == "metrics" and rec.get("company_id") == company:
        keep.setdefault(coll, []).append(rec)
    elif coll == "meeting_notes" and attrs.get("meeting_id") in meeting_ids:
        keep.setdefault(coll, []).append(rec)

for coll in ("companies", "tasks", "notes", "meetings"):
    if not keep.get(coll):
        sys.exit(f"soak: version A has no {coll} of company {company}")

with open(out_path, "w", encoding="utf-8") as out:
    for coll, line in sections(b_path):
        if coll is None and line.startswith('"api_keys"'):
            line = api_keys
        out.write(line)
        if coll is None and line.rstrip().endswith(":["):
            name = line[1 : line.index('"', 1)]
            for rec in keep.get(name, []):
                out.write(json.dumps(rec, ensure_ascii=False, separators=(",", ":")) + ",\n")

print(company, keep["tasks"][0]["id"], keep["notes"][0]["id"], noted)
PY
)
if [ -z "${M_MEETING:-}" ]; then
  echo "soak: could not build version B" >&2
  exit 1
fi
rm -rf "$DATA/gen42" "$DATA/gen43"
"$BIN" check "$VERSIONS/b.json" >/dev/null || {
  echo "soak: version B does not pass check:" >&2
  "$BIN" check "$VERSIONS/b.json" >&2 || true
  exit 1
}
VERSION_A=$(sed -n '3s/^"version":"\(.*\)",$/\1/p' "$VERSIONS/a.json")
VERSION_B=$(sed -n '3s/^"version":"\(.*\)",$/\1/p' "$VERSIONS/b.json")
echo "   A: $VERSION_A, B: $VERSION_B, key $MEDIUM_KEY"

cp snapshots/*.json "$SNAP/"
cp "$VERSIONS/a.json" "$SNAP/medium.json"

echo "== starting the release server"
LOG=$DATA/server.log
"$BIN" serve --snapshots "$SNAP" --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 \
  --log-format json 2>"$LOG" &
SERVER=$!
PIDS+=("$SERVER")
wait_for_server soak "$LOG" 60 "$SERVER"
API=$ADDR
ADMIN=$ADMIN_ADDR
echo "   api http://$API, admin http://$ADMIN, pid $SERVER"

rss_kb() {
  awk '/^VmRSS:/ {print $2}' "/proc/$SERVER/status"
}
# The medium workspace's load count and failure count, from /metrics.
medium_metric() {
  curl -fsS "http://$ADMIN/metrics" |
    awk -v name="$1" '$1 == name "{file=\"medium.json\"}" {print $2; found=1} END {if (!found) print 0}'
}
medium_version() {
  curl -fsS "http://$ADMIN/snapshots" | python3 -c '
import json, sys
files = json.load(sys.stdin)["files"]
print(next((f["version"] for f in files if f["file"] == "medium.json"), ""))'
}

# The Lua script: the request lists (built from the snapshots' ids, each
# request checked once against the server first, so a broken list fails
# fast), then the wrk callbacks.
LUA=$DATA/soak.lua
echo "== building and checking the request lists"
API=$API MEDIUM_KEY=$MEDIUM_KEY M_IDS="$M_COMPANY $M_TASK $M_NOTE $M_MEETING" \
  python3 - >"$LUA" <<'PY'
import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request

api, medium = os.environ["API"], "Bearer " + os.environ["MEDIUM_KEY"]
m_company, m_task, m_note, m_meeting = os.environ["M_IDS"].split()
acme_data = json.load(open("snapshots/acme.json", encoding="utf-8"))
globex_data = json.load(open("snapshots/globex.json", encoding="utf-8"))
acme, globex = "Bearer cura_demo_acme_key", "Bearer cura_demo_globex_key"
company = acme_data["companies"][0]["id"]


def first(collection):
    return next(r["id"] for r in acme_data[collection] if r["attributes"]["company_id"] == company)


task, note, meeting = first("tasks"), first("notes"), first("meetings")
g_company = globex_data["companies"][0]["id"]
unknown = "00000000-0000-4000-8000-000000000000"


def get(path, key, headers=None):
    request = urllib.request.Request("http://" + api + path, headers=dict(headers or {}))
    if key:
        request.add_header("Authorization", key)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


def feed(key, limit):
    status, body = get(f"/feed?limit={limit}", key)
    assert status == 200, (status, body)
    return json.loads(body)


def quote(cursor):
    return urllib.parse.quote(cursor, safe=":~")


# Cursors: the server's own nextCursor, and the `<timestamp>~<id>` form
# built from an entry (the page after that entry).
a_cursor, m_cursor = (quote(feed(k, n)["pagination"]["nextCursor"]) for k, n in ((acme, 7), (medium, 50)))
entry = feed(acme, 5)["data"][4]
a_tie = quote(entry["attributes"]["published_at"] + "~" + entry["id"])
GZ = {"Accept-Encoding": "gzip"}
P = "filter%5Bpriority%5D"
S = "filter%5Bstatus%5D"
T = "filter%5Btype%5D"
# (path, key, extra headers, expected status)
good = [
    (f"/portfolio?limit=5", acme, None, 200),
    (f"/portfolio?{P}=high&limit=3&offset=1", acme, None, 200),
    (f"/portfolio/{company}", acme, None, 200),
    (f"/portfolio/{company}/tasks?limit=10&offset=2", acme, None, 200),
    (f"/portfolio/{company}/roles", acme, None, 200),
    (f"/portfolio/{company}/notes?limit=5", acme, None, 200),
    (f"/portfolio/{company}/metrics", acme, GZ, 200),
    (f"/tasks?{S}=triage&{P}=low&limit=20", acme, None, 200),
    (f"/tasks?limit=50", acme, {"If-None-Match": "*"}, 304),
    (f"/tasks/{task}", acme, None, 200),
    (f"/roles", acme, GZ, 200),
    (f"/notes/{note}", acme, None, 200),
    (f"/feed?limit=10", acme, None, 200),
    (f"/feed?limit=10&cursor={a_cursor}", acme, None, 200),
    (f"/feed?limit=10&cursor={a_tie}", acme, None, 200),
    (f"/feed?limit=5&cursor=2026-05-01T00:00:00.000Z&{T}=product-update", acme, None, 200),
    (f"/meetings/{meeting}?include=notes", acme, GZ, 200),
    (f"/meetings/{meeting}", acme, None, 200),
    (f"/portfolio?limit=5", globex, None, 200),
    (f"/portfolio/{g_company}/tasks", globex, GZ, 200),
    (f"/portfolio?limit=100", medium, GZ, 200),
    (f"/portfolio?{P}=high&limit=20&offset=40", medium, None, 200),
    (f"/portfolio/{m_company}", medium, None, 200),
    (f"/portfolio/{m_company}/tasks?limit=20", medium, None, 200),
    (f"/portfolio/{m_company}/roles", medium, None, 200),
    (f"/portfolio/{m_company}/notes?limit=10", medium, None, 200),
    (f"/portfolio/{m_company}/metrics", medium, None, 200),
    (f"/tasks?limit=100&offset=50000", medium, None, 200),
    (f"/tasks?{S}=triage&limit=50&offset=200", medium, GZ, 200),
    (f"/tasks/{m_task}", medium, None, 200),
    (f"/roles", medium, None, 200),
    (f"/notes/{m_note}", medium, None, 200),
    (f"/feed?limit=50", medium, GZ, 200),
    (f"/feed?limit=20&cursor={m_cursor}", medium, None, 200),
    (f"/feed?limit=20&cursor=2025-06-01T12:00:00%2B02:00&{T}=product-update", medium, None, 200),
    (f"/meetings/{m_meeting}?include=notes", medium, None, 200),
]
bad = [
    ("/portfolio", "Bearer cura_not_a_key", None, 401),
    (f"/tasks/{task}", None, None, 401),
    (f"/meetings/{m_meeting}", "Bearer other_" + acme.split()[1], None, 401),
    (f"/tasks/{unknown}", acme, None, 404),
    (f"/meetings/{unknown}?include=notes", medium, None, 404),
    (f"/portfolio/{g_company}", acme, None, 404),
    ("/no/such/path", medium, None, 404),
]

failed = False
for role, requests in (("good", good), ("bad", bad)):
    for path, key, headers, want in requests:
        status, _ = get(path, key, headers)
        if status != want:
            print(f"soak: {role} request {path} answered {status}, not {want}", file=sys.stderr)
            failed = True
if failed:
    sys.exit(1)

lua = json.dumps  # a JSON string of this ASCII text is a valid Lua string
print("-- Written by scripts/soak.sh; run as: wrk ... -s soak.lua -- good|bad")
print("local lists = {")
for role, requests in (("good", good), ("bad", bad)):
    print(f"  {role} = {{  -- {{ path, headers, expected status (bad role only) }}")
    for path, key, headers, want in requests:
        h = dict(headers or {})
        if key:
            h["Authorization"] = key
        fields = ", ".join(f"[{lua(k)}] = {lua(v)}" for k, v in h.items())
        expect = str(want) if role == "bad" else "nil"
        print(f"    {{ {lua(path)}, {{ {fields} }}, {expect} }},")
    print("  },")
print("}")
PY
cat >>"$LUA" <<'LUA'

local threads = {}

function setup(thread)
  thread:set("tid", #threads)
  table.insert(threads, thread)
end

local mode, list, idx, last
counts = {}      -- status -> answers (read by done)
expected = 0     -- bad role: answered with the status it must get
unexpected = 0   -- bad role: answered with another one

function init(args)
  mode = args[1] or "good"
  list = {}
  for _, r in ipairs(lists[mode]) do
    table.insert(list, { raw = wrk.format("GET", r[1], r[2]), expect = r[3] })
  end
  -- Threads start at different places in the rotation.
  idx = (tid or 0) * 7 % #list
  if mode == "bad" then
    -- One connection, so each answer belongs to the request sent just
    -- before it; about 100 requests a second.
    delay = function() return 10 end
  end
end

function request()
  idx = idx % #list + 1
  last = list[idx]
  return last.raw
end

function response(status, headers, body)
  counts[status] = (counts[status] or 0) + 1
  if last.expect then
    if status == last.expect then
      expected = expected + 1
    else
      unexpected = unexpected + 1
    end
  end
end

function done(summary, latency, requests)
  local total = {}
  local exp, unexp = 0, 0
  for _, t in ipairs(threads) do
    for status, n in pairs(t:get("counts")) do
      total[status] = (total[status] or 0) + n
    end
    exp = exp + t:get("expected")
    unexp = unexp + t:get("unexpected")
  end
  local e = summary.errors
  io.write(string.format("SOAK requests %d\n", summary.requests))
  io.write(string.format("SOAK socket_errors %d connect=%d read=%d write=%d timeout=%d\n",
    e.connect + e.read + e.write + e.timeout, e.connect, e.read, e.write, e.timeout))
  for status, n in pairs(total) do
    io.write(string.format("SOAK status %d %d\n", status, n))
  end
  io.write(string.format("SOAK expected %d\nSOAK unexpected %d\n", exp, unexp))
  io.write(string.format("SOAK latency_ms p50=%.2f p99=%.2f max=%.2f\n",
    latency:percentile(50) / 1000, latency:percentile(99) / 1000, latency.max / 1000))
end
LUA

echo "== load: $MINUTES min, $CONNECTIONS connections (+1 for the bad requests), reloads every ${RELOAD_EVERY}s"
SECONDS_TOTAL=$((MINUTES * 60))
LOAD_START=$(date +%s)
RSS_LOG=$DATA/rss.tsv
RELOAD_LOG=$DATA/reloads.log
: >"$RSS_LOG"
: >"$RELOAD_LOG"

timeout --kill-after=10 $((SECONDS_TOTAL + 60)) \
  wrk -t "$THREADS" -c "$CONNECTIONS" -d "${SECONDS_TOTAL}s" --timeout "$TIMEOUT" \
  --latency -s "$LUA" "http://$API" -- good >"$DATA/wrk-good.txt" 2>&1 &
WRK_GOOD=$!
PIDS+=("$WRK_GOOD")
timeout --kill-after=10 $((SECONDS_TOTAL + 60)) \
  wrk -t 1 -c 1 -d "${SECONDS_TOTAL}s" --timeout "$TIMEOUT" \
  -s "$LUA" "http://$API" -- bad >"$DATA/wrk-bad.txt" 2>&1 &
WRK_BAD=$!
PIDS+=("$WRK_BAD")

sleep "$WARMUP"
RSS_BASE=$(rss_kb)
printf '%s\t%s\tbaseline\n' "$(date +%s)" "$RSS_BASE" >>"$RSS_LOG"

# RSS sampler and reloader; both stop at the next turn once $STOP exists.
(
  while [ ! -e "$STOP" ]; do
    printf '%s\t%s\n' "$(date +%s)" "$(rss_kb)" >>"$RSS_LOG"
    sleep "$SAMPLE_EVERY"
  done
) &
PIDS+=("$!")
SAMPLER=$!
(
  next=b
  while [ ! -e "$STOP" ]; do
    sleep "$RELOAD_EVERY"
    [ -e "$STOP" ] && break
    cp "$VERSIONS/$next.json" "$SNAP/medium.json.tmp"
    mv -f "$SNAP/medium.json.tmp" "$SNAP/medium.json"
    printf '%s\t%s\n' "$(date +%s)" "$next" >>"$RELOAD_LOG"
    if [ "$next" = b ]; then next=a; else next=b; fi
  done
) &
PIDS+=("$!")
RELOADER=$!

status_good=0
status_bad=0
wait "$WRK_GOOD" || status_good=$?
wait "$WRK_BAD" || status_bad=$?
touch "$STOP"
wait "$RELOADER" 2>/dev/null || true
wait "$SAMPLER" 2>/dev/null || true

# Put version A back and let it load, so that the last sample compares like
# with like.
loads_before=$(medium_metric portfolio_replica_snapshot_loads_total)
cp "$VERSIONS/a.json" "$SNAP/medium.json.tmp"
mv -f "$SNAP/medium.json.tmp" "$SNAP/medium.json"
settled=no
for _ in $(seq 1 300); do
  if [ "$(medium_metric portfolio_replica_snapshot_loads_total)" -gt "$loads_before" ] &&
    [ "$(medium_version)" = "$VERSION_A" ]; then
    settled=yes
    break
  fi
  sleep 0.1
done
for _ in 1 2 3; do
  sleep 1
  RSS_END=$(rss_kb)
  printf '%s\t%s\tend\n' "$(date +%s)" "$RSS_END" >>"$RSS_LOG"
done
RSS_MAX=$(awk -F'\t' '$2 > m {m = $2} END {print m}' "$RSS_LOG")
# The floor of the last quarter: the lowest sample from 3/4 of the run on,
# the end sample included.
RSS_FLOOR=$(awk -F'\t' -v from=$((LOAD_START + SECONDS_TOTAL * 3 / 4)) \
  '$1 >= from && (m == "" || $2 < m) {m = $2} END {print m}' "$RSS_LOG")
HWM=$(awk '/^VmHWM:/ {print $2}' "/proc/$SERVER/status")
LOADS=$(medium_metric portfolio_replica_snapshot_loads_total)
LOAD_FAILURES=$(medium_metric portfolio_replica_snapshot_load_failures_total)
SWAPS=$(wc -l <"$RELOAD_LOG")
# 5xx the server counted (but /readyz's 503s while this script waited for it).
SERVER_5XX=$(curl -fsS "http://$ADMIN/metrics" |
  awk '/^portfolio_replica_http_requests_total\{/ && /status="5/ && !/route="\/readyz"/ {n += $2} END {print n + 0}')

field() { # field FILE KEY: the value after "SOAK KEY"
  awk -v k="$2" '$1 == "SOAK" && $2 == k {print $3; exit}' "$1"
}
for f in "$DATA/wrk-good.txt" "$DATA/wrk-bad.txt"; do
  if ! grep -q '^SOAK requests' "$f"; then
    echo "soak: wrk did not finish normally ($f):" >&2
    cat "$f" >&2
    exit 1
  fi
done
GOOD_REQ=$(field "$DATA/wrk-good.txt" requests)
BAD_REQ=$(field "$DATA/wrk-bad.txt" requests)
GOOD_SOCK=$(field "$DATA/wrk-good.txt" socket_errors)
BAD_SOCK=$(field "$DATA/wrk-bad.txt" socket_errors)
BAD_EXPECTED=$(field "$DATA/wrk-bad.txt" expected)
BAD_UNEXPECTED=$(field "$DATA/wrk-bad.txt" unexpected)
# Good requests: anything but 2xx/3xx is unexpected.
GOOD_UNEXPECTED=$(awk '$1 == "SOAK" && $2 == "status" && ($3 < 200 || $3 >= 400) {n += $4} END {print n + 0}' "$DATA/wrk-good.txt")
statuses() {
  awk '$1 == "SOAK" && $2 == "status" {printf "%s%s: %s", sep, $3, $4; sep = ", "}' "$1"
}
UNEXPECTED=$((GOOD_UNEXPECTED + BAD_UNEXPECTED))
SOCKET_ERRORS=$((GOOD_SOCK + BAD_SOCK))
pct() { awk -v b="$RSS_BASE" -v e="$1" 'BEGIN {printf "%+.1f", (e - b) * 100 / b}'; }
GROWTH_PCT=$(pct "$RSS_FLOOR")
mb() { awk -v k="$1" 'BEGIN {printf "%.1f MiB", k / 1024}'; }

echo
echo "== soak results ($MINUTES min)"
echo "requests:        $((GOOD_REQ + BAD_REQ)) total ($GOOD_REQ good at $((GOOD_REQ / SECONDS_TOTAL))/s, $BAD_REQ deliberately bad)"
echo "good answers:    $(statuses "$DATA/wrk-good.txt")"
echo "                 $(grep '^SOAK latency_ms' "$DATA/wrk-good.txt" | cut -d' ' -f2-)"
echo "bad answers:     $(statuses "$DATA/wrk-bad.txt"); as intended: $BAD_EXPECTED"
echo "unexpected:      $UNEXPECTED ($GOOD_UNEXPECTED good requests not 2xx/3xx, $BAD_UNEXPECTED bad requests not answered as intended); server-side 5xx: $SERVER_5XX"
echo "socket errors:   $SOCKET_ERRORS (good: $(grep '^SOAK socket_errors' "$DATA/wrk-good.txt" | cut -d' ' -f4-); bad: $(grep '^SOAK socket_errors' "$DATA/wrk-bad.txt" | cut -d' ' -f4-))"
echo "reloads:         $SWAPS swaps written, $((LOADS - 1)) loads of medium.json after the first ($LOAD_FAILURES failed), final version A loaded: $settled"
echo "RSS:             baseline $(mb "$RSS_BASE"), end $(mb "$RSS_END") ($(pct "$RSS_END")%), floor of the last quarter $(mb "$RSS_FLOOR") (${GROWTH_PCT}%, judged against ${RSS_LIMIT_PCT}%)"
echo "                 max sampled $(mb "$RSS_MAX"), peak (VmHWM) $(mb "$HWM"); $(wc -l <"$RSS_LOG") samples in $RSS_LOG"

failed=()
[ "$status_good" -eq 0 ] || failed+=("wrk (good) exited $status_good")
[ "$status_bad" -eq 0 ] || failed+=("wrk (bad) exited $status_bad")
[ "$UNEXPECTED" -eq 0 ] || failed+=("$UNEXPECTED unexpected answers")
[ "$SOCKET_ERRORS" -eq 0 ] || failed+=("$SOCKET_ERRORS socket errors")
[ "$SERVER_5XX" -eq 0 ] || failed+=("$SERVER_5XX server-side 5xx")
[ "$LOAD_FAILURES" -eq 0 ] || failed+=("$LOAD_FAILURES failed reloads")
[ "$settled" = yes ] || failed+=("version A did not load again at the end")
if awk -v g="$GROWTH_PCT" -v l="$RSS_LIMIT_PCT" 'BEGIN {exit !(g > l)}'; then
  failed+=("the RSS floor grew ${GROWTH_PCT}% (limit ${RSS_LIMIT_PCT}%)")
fi
if [ ${#failed[@]} -gt 0 ]; then
  echo "soak: FAILED: $(IFS=';'; echo "${failed[*]}")"
  exit 1
fi
echo "soak: passed"
