#!/usr/bin/env bash
# /metrics against real parsers: a real Prometheus scrapes the server, and
# the Python prometheus_client parsers and promtool read both formats.
#
#   bash .ci/prometheus.sh
#
# Installs Debian's `prometheus` package if `prometheus` is missing (needs
# root or sudo; apt-get update only if the package is unknown), a venv with a
# pinned prometheus_client in target/prom-venv if missing, and builds the
# release binary (a no-op when it is up to date). Then, all on 127.0.0.1 and
# free ports:
#
# 1. serves a copy of snapshots/ (plus one rejected file, so the failure
#    counter has a series) and sends a few API requests (200s, two 401s, a
#    404) so the counters and the histogram have something to show;
# 2. starts Prometheus with a temporary config (scrape every second) and
#    data directory; it asks for OpenMetrics by default. If this Prometheus
#    knows `scrape_protocols` (2.49 and later; Debian bookworm ships 2.42,
#    which does not: `promtool check config` decides), a second job scrapes
#    the classic text format (`[PrometheusText0.0.4]`); otherwise step 3 is
#    what proves the classic format;
# 3. while Prometheus starts (its first scrape comes about 5 s after
#    start), fetches /metrics as Prometheus asks for it (OpenMetrics), with
#    `Accept: text/plain` and with no Accept (the classic text format
#    0.0.4), checks the content types, parses the first with
#    prometheus_client's OpenMetrics parser and the second with its classic
#    parser (every family and its type, a few values), and lints the classic
#    text with `promtool check metrics`;
# 4. waits (at most PROM_WAIT seconds, default 60) until `up == 1` for each
#    job, then checks through Prometheus's HTTP API that the scrape has no
#    error, which format it negotiated (the metadata of the build info
#    family), and that it stored the request counter, the latency histogram,
#    the snapshot counters and gauges and the build info.
#
# One line per check; exits non-zero if any fails. Everything it starts is
# killed by PID on exit; temporary files are removed. Logs and the scraped
# texts stay in target/prometheus/. Needs python3 (with venv), curl, and
# PyPI for the first run.
set -euo pipefail
cd "$(dirname "$0")/.."

PROM_CLIENT_VERSION=0.26.0
WAIT=${PROM_WAIT:-60}
JOB=portfolio-replica
CLASSIC_JOB=portfolio-replica-classic

ROOT=$(pwd)
VENV=$ROOT/target/prom-venv
WORK=$ROOT/target/prometheus
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
BIN=$TARGET_DIR/release/portfolio-replica
started=$(date +%s)

failures=0
ok() { echo "ok    $*"; }
fail() {
  echo "FAIL  $*"
  failures=$((failures + 1))
}
# python_failed STATUS: a Python step exits with the number of its failed checks.
python_failed() {
  case $1 in
    124 | 137) fail "a Python step passed its time limit" ;;
    *) failures=$((failures + $1)) ;;
  esac
}
die() {
  echo "FAIL  $*" >&2
  exit 1
}

# Stops the server and Prometheus by PID on exit and removes TMP.
# shellcheck source=scripts/lib.sh
source scripts/lib.sh

for tool in python3 curl; do
  command -v "$tool" >/dev/null || die "missing $tool"
done

# --- Tools --------------------------------------------------------------------

if ! command -v prometheus >/dev/null || ! command -v promtool >/dev/null; then
  SUDO=
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || die "prometheus is missing; install it (apt-get install prometheus)"
    SUDO=sudo
  fi
  if ! apt-cache show prometheus >/dev/null 2>&1; then
    timeout 300 $SUDO apt-get update -qq
  fi
  # No recommends: the node exporter is not wanted here.
  timeout 600 $SUDO env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -qq --no-install-recommends prometheus >/dev/null
fi
ok "$(prometheus --version 2>&1 | head -1)"

venv_version() {
  "$VENV/bin/python" -c \
    'import importlib.metadata as m; print(m.version("prometheus_client"))' 2>/dev/null || true
}
if [ "$(venv_version)" != "$PROM_CLIENT_VERSION" ]; then
  rm -rf "$VENV"
  python3 -m venv "$VENV"
  timeout 300 "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
    "prometheus_client==$PROM_CLIENT_VERSION"
fi
[ "$(venv_version)" = "$PROM_CLIENT_VERSION" ] || die "prometheus_client $PROM_CLIENT_VERSION not in $VENV"
ok "python prometheus_client $PROM_CLIENT_VERSION ($VENV)"
PY=$VENV/bin/python

build_release
ok "release build $BIN"

# --- The server ---------------------------------------------------------------

rm -rf "$WORK"
mkdir -p "$WORK"
scratch_dir TMP prometheus-ci
mkdir -p "$TMP/snapshots" "$TMP/data"
cp snapshots/*.json "$TMP/snapshots/"
# A rejected file, so that the failure counter has a series too.
printf '{"format_version": 1, "workspace": ' >"$TMP/snapshots/broken.json"

# Port 0: the kernel picks free ports, and the server logs which.
# With the series of each file and workspace, so that every family shows.
"$BIN" serve --snapshots "$TMP/snapshots" --listen 127.0.0.1:0 \
  --admin-listen 127.0.0.1:0 --metrics-per-workspace --log-format json 2>"$WORK/server.log" &
SERVER_PID=$!

wait_for_server prometheus "$WORK/server.log" 30
API=$ADDR
ADMIN=$ADMIN_ADDR
case "$API $ADMIN" in
  127.0.0.1:*\ 127.0.0.1:*) ok "server ready: API $API, admin $ADMIN (pid $SERVER_PID)" ;;
  *) die "the server listens on ${API:-?} and ${ADMIN:-?}, not loopback" ;;
esac

# status PATH [KEY]: the status of GET PATH on the API.
status() {
  local auth=()
  if [ -n "${2:-}" ]; then
    auth=(-H "Authorization: Bearer $2")
  fi
  curl -sS --max-time 5 -o /dev/null -w '%{http_code}' "${auth[@]}" "http://$API$1"
}
for want_path_key in \
  "200 /portfolio cura_demo_acme_key" \
  "200 /tasks cura_demo_acme_key" \
  "200 /tasks cura_demo_globex_key" \
  "200 /feed cura_demo_globex_key" \
  "401 /tasks" \
  "401 /portfolio cura_demo_wrong_key" \
  "404 /no/such/path cura_demo_acme_key"; do
  read -r want path key <<<"$want_path_key"
  got=$(status "$path" "${key:-}")
  if [ "$got" = "$want" ]; then
    ok "GET $path${key:+ with ${key}}: $got"
  else
    fail "GET $path${key:+ with ${key}}: $got, expected $want"
  fi
done

# --- A real Prometheus, started early: its first scrape comes ~5 s later ------

PROM_PORT=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
PROM=127.0.0.1:$PROM_PORT
write_config() { # write_config [classic]: the config, with the classic job if asked
  cat <<EOF
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: $JOB
    static_configs:
      - targets: ['$ADMIN']
EOF
  if [ "${1:-}" = classic ]; then
    cat <<EOF
  - job_name: $CLASSIC_JOB
    scrape_protocols: [PrometheusText0.0.4]
    static_configs:
      - targets: ['$ADMIN']
EOF
  fi
}
JOBS=("$JOB")
write_config classic >"$TMP/prometheus.yml"
if timeout 30 promtool check config "$TMP/prometheus.yml" >"$WORK/promtool-config.log" 2>&1; then
  JOBS+=("$CLASSIC_JOB")
  ok "this Prometheus knows scrape_protocols: job $CLASSIC_JOB scrapes the classic text"
else
  write_config >"$TMP/prometheus.yml"
  timeout 30 promtool check config "$TMP/prometheus.yml" >"$WORK/promtool-config.log" 2>&1 ||
    die "promtool check config: $(cat "$WORK/promtool-config.log")"
  ok "this Prometheus has no scrape_protocols (added in 2.49): the classic format is proven by the parsers and promtool below"
fi
cp "$TMP/prometheus.yml" "$WORK/prometheus.yml"

prometheus --config.file="$TMP/prometheus.yml" --storage.tsdb.path="$TMP/data" \
  --web.listen-address="$PROM" --log.level=warn 2>"$WORK/prometheus.log" &
PROM_PID=$!
track "$PROM_PID"

# --- Both formats, read by real parsers ---------------------------------------

# What Prometheus 2.x sends by default.
PROM_ACCEPT='application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1'
scrape() { # scrape NAME ACCEPT: body to $WORK/NAME.txt, prints the Content-Type
  curl -sS --max-time 5 -H "Accept: $2" -o "$WORK/$1.txt" -w '%{content_type}' "http://$ADMIN/metrics"
}
ct=$(scrape openmetrics "$PROM_ACCEPT")
if [ "$ct" = "application/openmetrics-text; version=1.0.0; charset=utf-8" ]; then
  ok "Prometheus's Accept gets OpenMetrics: $ct"
else
  fail "Prometheus's Accept gets Content-Type $ct"
fi
ct=$(scrape classic "text/plain")
if [ "$ct" = "text/plain; version=0.0.4; charset=utf-8" ]; then
  ok "Accept: text/plain gets the classic text: $ct"
else
  fail "Accept: text/plain gets Content-Type $ct"
fi
ct=$(curl -sS --max-time 5 -o "$WORK/default.txt" -w '%{content_type}' "http://$ADMIN/metrics")
if [ "$ct" = "text/plain; version=0.0.4; charset=utf-8" ] && cmp -s "$WORK/default.txt" "$WORK/classic.txt"; then
  ok "no Accept gets the classic text"
else
  fail "no Accept gets Content-Type $ct (or another body than Accept: text/plain)"
fi

timeout 60 "$PY" - "$WORK/openmetrics.txt" "$WORK/classic.txt" <<'PY' || python_failed "$?"
import sys

from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_openmetrics
from prometheus_client.parser import text_string_to_metric_families as parse_classic

P = "portfolio_replica_"
# Family name as each parser reports it -> type. The classic parser drops a
# counter's _total from the family name; an info family is a gauge there.
EXPECTED = {
    "openmetrics": {
        P + "http_requests": "counter",
        P + "http_request_duration_seconds": "histogram",
        P + "http_requests_in_flight": "gauge",
        P + "snapshot_loads": "counter",
        P + "snapshot_load_failures": "counter",
        P + "snapshot_scans": "counter",
        P + "throttled_requests": "counter",
        P + "snapshot_last_load_timestamp_seconds": "gauge",
        P + "snapshot_records": "gauge",
        P + "workspaces": "gauge",
        P + "workspaces_by_version_age": "gauge",
        P + "build": "info",
    },
}
EXPECTED["classic"] = dict(EXPECTED["openmetrics"])
del EXPECTED["classic"][P + "build"]
EXPECTED["classic"][P + "build_info"] = "gauge"

failed = 0


def check(good, what):
    global failed
    print(("ok    " if good else "FAIL  ") + what)
    failed += not good


for name, path, parse in [
    ("openmetrics", sys.argv[1], parse_openmetrics),
    ("classic", sys.argv[2], parse_classic),
]:
    text = open(path, encoding="utf-8").read()
    try:
        families = list(parse(text))
    except Exception as e:  # the parsers raise ValueError, and worse on garbage
        check(False, f"{name}: the parser rejects the text: {e!r}")
        continue
    check(True, f"{name}: parsed, {len(families)} families, "
                f"{sum(len(f.samples) for f in families)} samples")
    types = {f.name: f.type for f in families}
    check(types == EXPECTED[name], f"{name}: families and types {types}")
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for f in families for s in f.samples}

    def value(sample, **labels):
        return samples.get((P + sample, tuple(sorted(labels.items()))))

    check((value("http_requests_total", route="/tasks", status="200") or 0) >= 2,
          f"{name}: /tasks 200s counted")
    check(value("http_requests_total", route="/tasks", status="401") == 1,
          f"{name}: /tasks 401 counted")
    check(value("http_requests_total", route="other", status="404") == 1,
          f"{name}: the 404 counted under route other")
    check(value("http_request_duration_seconds_bucket", route="/tasks", le="+Inf")
          == value("http_request_duration_seconds_count", route="/tasks") == 3,
          f"{name}: the /tasks histogram has 3 observations")
    check(value("snapshot_load_failures_total", file="broken.json") == 1,
          f"{name}: the rejected file counted")
    check(all(value("snapshot_records", workspace=w, collection="tasks")
              for w in ("ws-acme", "ws-globex")),
          f"{name}: snapshot_records of both workspaces")
    check(all(value("snapshot_last_load_timestamp_seconds", workspace=w)
              for w in ("ws-acme", "ws-globex")),
          f"{name}: snapshot_last_load_timestamp_seconds of both workspaces")
    build = [s for f in families for s in f.samples if s.name == P + "build_info"]
    check(len(build) == 1 and build[0].value == 1 and "version" in build[0].labels,
          f"{name}: build_info {build}")

sys.exit(min(failed, 99))
PY

if lint=$(timeout 30 promtool check metrics <"$WORK/classic.txt" 2>&1); then
  ok "promtool check metrics: the classic text parses and lints clean"
else
  fail "promtool check metrics: $lint"
fi

# --- What Prometheus stored ---------------------------------------------------

# Waits for `up == 1` of every job, then queries what a scrape stored.
timeout $((WAIT + 30)) "$PY" - "http://$PROM" "$WAIT" "$PROM_PID" "${JOBS[@]}" <<'PY' || python_failed "$?"
import json
import os
import sys
import time
import urllib.parse
import urllib.request

base, wait, pid, jobs = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
P = "portfolio_replica_"
failed = 0


def check(good, what):
    global failed
    print(("ok    " if good else "FAIL  ") + what)
    failed += not good


def api(path, **params):
    url = f"{base}/api/v1/{path}?{urllib.parse.urlencode(params)}"
    with urllib.request.urlopen(url, timeout=5) as r:
        body = json.load(r)
    if body.get("status") != "success":
        raise RuntimeError(f"{url}: {body}")
    return body["data"]


def query(promql):
    return api("query", query=promql)["result"]


started = time.monotonic()
for job in jobs:
    while True:
        try:
            os.kill(pid, 0)
        except OSError:
            check(False, "Prometheus exited; see target/prometheus/prometheus.log")
            sys.exit(min(failed, 99))
        try:
            if query(f'up{{job="{job}"}} == 1'):
                break
        except Exception:
            pass  # not listening yet
        if time.monotonic() - started > wait:
            check(False, f'job {job}: no up == 1 within {wait:.0f} s')
            try:
                targets = api("targets")["activeTargets"]
                print("      targets: " + json.dumps(
                    [(t["labels"]["job"], t["health"], t["lastError"]) for t in targets]))
            except Exception as e:
                print(f"      targets: {e!r}")
            sys.exit(min(failed, 99))
        time.sleep(0.25)
    check(True, f'job {job}: up == 1 after {time.monotonic() - started:.1f} s')

    targets = [t for t in api("targets")["activeTargets"] if t["labels"]["job"] == job]
    check(len(targets) == 1 and targets[0]["health"] == "up" and not targets[0]["lastError"],
          f"job {job}: target healthy, no scrape error")

    # The metadata names the families as the negotiated format does.
    metadata = api("targets/metadata", match_target=f'{{job="{job}"}}')
    types = {m["metric"]: m["type"] for m in metadata}
    if job.endswith("-classic"):
        want = {P + "build_info": "gauge", P + "http_requests_total": "counter"}
        what = "the classic text"
    else:
        want = {P + "build": "info", P + "http_requests": "counter"}
        what = "OpenMetrics"
    check(all(types.get(k) == v for k, v in want.items()),
          f"job {job}: Prometheus negotiated {what} (metadata {want})")

    sel = f'job="{job}"'
    for promql, what in [
        (f'{P}http_requests_total{{{sel},route="/tasks",status="200"}} >= 2',
         "request counter: /tasks 200s"),
        (f'{P}http_requests_total{{{sel},route="/tasks",status="401"}} == 1',
         "request counter: the 401"),
        (f'{P}http_requests_total{{{sel},route="other",status="404"}} == 1',
         "request counter: the 404"),
        (f'{P}http_request_duration_seconds_bucket{{{sel},route="/tasks",le="+Inf"}} == 3',
         "latency histogram: /tasks buckets"),
        (f'{P}http_request_duration_seconds_count{{{sel},route="/tasks"}} == 3',
         "latency histogram: /tasks count"),
        (f'{P}http_requests_in_flight{{{sel}}} == 0', "in-flight gauge"),
        (f'{P}snapshot_loads_total{{{sel},file="acme.json"}} == 1', "snapshot loads"),
        (f'{P}snapshot_load_failures_total{{{sel},file="broken.json"}} == 1',
         "snapshot load failures"),
        (f'{P}snapshot_records{{{sel},workspace="ws-acme",collection="tasks"}} > 0',
         "snapshot records gauge"),
        (f'{P}snapshot_last_load_timestamp_seconds{{{sel},workspace="ws-acme"}} > time() - 3600',
         "last load timestamp gauge"),
        (f'{P}workspaces{{{sel},state="serving"}} == 2', "workspaces serving"),
        (f'{P}workspaces{{{sel},state="failing"}} == 1', "workspaces failing"),
        (f'{P}workspaces_by_version_age{{{sel},max_seconds="3600"}} == 2', "versions' ages"),
        (f'{P}build_info{{{sel}}} == 1', "build info"),
    ]:
        try:
            result = query(promql)
        except Exception as e:
            result = e
        check(isinstance(result, list) and len(result) == 1,
              f"job {job}: {what}: {promql} -> "
              + (f"{len(result)} series" if isinstance(result, list) else repr(result)))
    buckets = query(f'count({P}http_request_duration_seconds_bucket{{{sel},route="/tasks"}})')
    check(bool(buckets) and int(buckets[0]["value"][1]) == 16,
          f"job {job}: latency histogram: 16 buckets of /tasks stored")

sys.exit(min(failed, 99))
PY

finished=$(date +%s)
if [ "$failures" -eq 0 ]; then
  echo "prometheus: passed in $((finished - started))s; logs and scraped texts in target/prometheus/"
else
  echo "prometheus: FAILED ($failures failed checks) in $((finished - started))s; logs in target/prometheus/" >&2
  exit 1
fi
