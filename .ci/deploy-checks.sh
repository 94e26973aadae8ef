#!/usr/bin/env bash
# Checks of the deployment material: Prometheus rules and their unit tests,
# the Prometheus configuration, the Kubernetes manifests, the systemd unit,
# the Grafana dashboard, and the metric names all of them use.
#
#   bash .ci/deploy-checks.sh        (from anywhere; it runs from the repo root)
#
# Installs what is missing, and only that (so a second run installs nothing
# and takes seconds):
# - promtool: Debian package `prometheus` (bookworm: 2.42). Where systemd runs
#   as PID 1, a temporary policy-rc.d stops the package from starting the
#   Prometheus daemon it ships; the script wants promtool only.
# - systemd-analyze: Debian package `systemd`.
# - kubernetes-validate (pinned, below) from PyPI in a venv, target/deploy-venv.
# apt-get update runs only when an install fails without it. Installing needs
# root, or sudo. Then, for systemd-analyze verify, the unit's ExecStart must
# exist: the check verifies a copy of the unit whose ExecStart is the built
# binary, target/release/portfolio-replica, built (cargo build --release
# --locked) when missing. PORTFOLIO_REPLICA_BIN names another binary instead.
#
# Prints one line per check, the output of a failed one under it, and exits
# non-zero if any failed. CI runs it with CI=true on a fresh clone; it
# behaves the same without. Logs of installs: target/deploy-checks/.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

KUBERNETES_VALIDATE_VERSION=1.37.0
# The oldest Kubernetes the manifests support (the preStop sleep action is
# on by default from 1.30) and the newest schema kubernetes-validate bundles.
KUBERNETES_VERSIONS="1.30.0 1.37.0"
# Highest `systemd-analyze security` exposure accepted for the unit, x10
# (20 = 2.0, "OK"; the unit scores 1.5 today).
SYSTEMD_EXPOSURE_MAX=20

VENV=$ROOT/target/deploy-venv
WORK=$ROOT/target/deploy-checks
BIN=${PORTFOLIO_REPLICA_BIN:-$ROOT/target/release/portfolio-replica}
UNIT=deploy/systemd/portfolio-replica.service
DASHBOARD=deploy/grafana/portfolio-replica.json

# Every metric the server exposes (README "Operating it", plus the object
# storage source; the signature metrics only with --trust-key). Histograms
# also expose _bucket, _sum and _count.
METRICS="portfolio_replica_http_requests_total
portfolio_replica_http_request_duration_seconds
portfolio_replica_http_requests_in_flight
portfolio_replica_snapshot_loads_total
portfolio_replica_snapshot_load_failures_total
portfolio_replica_snapshot_scans_total
portfolio_replica_throttled_requests_total
portfolio_replica_snapshot_last_load_timestamp_seconds
portfolio_replica_snapshot_records
portfolio_replica_workspaces
portfolio_replica_workspaces_by_version_age
portfolio_replica_build_info
portfolio_replica_source_last_success_timestamp_seconds
portfolio_replica_source_errors_total
portfolio_replica_source_bytes_fetched_total
portfolio_replica_memory_budget_bytes
portfolio_replica_resident_bytes
portfolio_replica_resident_workspaces
portfolio_replica_resident_lookups_total
portfolio_replica_demand_loads_total
portfolio_replica_demand_load_duration_seconds
portfolio_replica_demand_load_bytes_total
portfolio_replica_evictions_total
portfolio_replica_evictions_reloaded_soon_total
portfolio_replica_signature_refusals_total
portfolio_replica_signatures_expired
portfolio_replica_signature_earliest_expiry_timestamp_seconds"
HISTOGRAMS="portfolio_replica_http_request_duration_seconds
portfolio_replica_demand_load_duration_seconds"

mkdir -p "$WORK"
started=$(date +%s%N)
failed=0

ms_since() { echo $((($(date +%s%N) - $1) / 1000000)); }
seconds() { awk -v ms="$1" 'BEGIN { printf "%.1f s", ms / 1000 }'; }

# check NAME COMMAND...: runs COMMAND, prints one line, and its output if it
# failed. A command that prints on success is not a failure; use quietly()
# for tools whose warnings must fail.
check() {
  local name=$1 t0 out rc=0
  shift
  t0=$(date +%s%N)
  out=$("$@" 2>&1) || rc=$?
  if [ "$rc" -eq 0 ]; then
    printf 'ok    %-64s %s\n' "$name" "$(seconds "$(ms_since "$t0")")"
  else
    printf 'FAIL  %-64s %s\n' "$name" "$(seconds "$(ms_since "$t0")")"
    printf '%s\n' "$out" | sed 's/^/      | /'
    failed=$((failed + 1))
  fi
}

# quietly COMMAND...: fails when COMMAND fails or prints anything at all
# (systemd-analyze verify and kubernetes-validate report problems as
# warnings with exit status 0).
quietly() {
  local out
  out=$("$@" 2>&1) || {
    printf '%s\n' "$out"
    return 1
  }
  if [ -n "$out" ]; then
    printf '%s\n' "$out"
    return 1
  fi
}

# setup NAME: prints one line for something installed or built.
setup() { printf 'setup %-64s %s\n' "$1" "$2"; }

as_root() {
  if [ "$(id -u)" -eq 0 ]; then
    "$@"
  elif command -v sudo >/dev/null; then
    sudo "$@"
  else
    echo "deploy-checks: need root (or sudo) to run: $*" >&2
    return 1
  fi
}

POLICY_RC_D=
remove_policy_rc_d() {
  if [ -n "$POLICY_RC_D" ]; then
    as_root rm -f "$POLICY_RC_D" || true
  fi
}
# shellcheck disable=SC2317 # called by scripts/lib.sh's EXIT trap
on_exit() { remove_policy_rc_d; }
# shellcheck source=scripts/lib.sh
source scripts/lib.sh

# apt_install PACKAGE...: installs without recommends; runs apt-get update
# and retries only if the first attempt fails (no or stale package lists).
apt_install() {
  local log=$WORK/apt.log t0
  t0=$(date +%s%N)
  if [ -d /run/systemd/system ] && [ ! -e /usr/sbin/policy-rc.d ]; then
    POLICY_RC_D=/usr/sbin/policy-rc.d
    printf '#!/bin/sh\n# deploy-checks.sh: install packages, start no daemon\nexit 101\n' |
      as_root tee "$POLICY_RC_D" >/dev/null
    as_root chmod 0755 "$POLICY_RC_D"
  fi
  if ! as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
    --no-install-recommends "$@" >"$log" 2>&1; then
    if ! { as_root apt-get update -q &&
      as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
        --no-install-recommends "$@"; } >>"$log" 2>&1; then
      echo "deploy-checks: apt-get install $* failed; last lines of $log:" >&2
      tail -n 20 "$log" >&2
      exit 1
    fi
  fi
  remove_policy_rc_d
  POLICY_RC_D=
  local pkg
  for pkg in "$@"; do
    setup "apt-get install $pkg" \
      "$(dpkg-query -W -f='${Version}' "$pkg") ($(seconds "$(ms_since "$t0")"))"
  done
}

# ---------------------------------------------------------------- tools
if ! command -v promtool >/dev/null; then
  apt_install prometheus
fi
if ! command -v systemd-analyze >/dev/null; then
  apt_install systemd
fi
if [ "$("$VENV/bin/kubernetes-validate" --version 2>/dev/null || true)" != "$KUBERNETES_VALIDATE_VERSION" ]; then
  t0=$(date +%s%N)
  rm -rf "$VENV"
  if ! python3 -m venv "$VENV" >"$WORK/venv.log" 2>&1; then
    # Debian's python3 without ensurepip.
    apt_install python3-venv
    rm -rf "$VENV"
    python3 -m venv "$VENV"
  fi
  if ! "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
    "kubernetes-validate==$KUBERNETES_VALIDATE_VERSION" >>"$WORK/venv.log" 2>&1; then
    echo "deploy-checks: pip install kubernetes-validate failed; $WORK/venv.log:" >&2
    tail -n 20 "$WORK/venv.log" >&2
    exit 1
  fi
  setup "pip install kubernetes-validate==$KUBERNETES_VALIDATE_VERSION" \
    "($(seconds "$(ms_since "$t0")"))"
fi
if [ ! -x "$BIN" ]; then
  t0=$(date +%s%N)
  if ! cargo build --release --locked --bin portfolio-replica >"$WORK/cargo.log" 2>&1; then
    echo "deploy-checks: cargo build --release failed; $WORK/cargo.log:" >&2
    tail -n 30 "$WORK/cargo.log" >&2
    exit 1
  fi
  setup "cargo build --release --locked" "($(seconds "$(ms_since "$t0")"))"
fi
echo "tools promtool $(promtool --version 2>&1 | sed -n 's/^promtool, version \([^ ]*\).*/\1/p')," \
  "systemd-analyze $(systemd-analyze --version | sed -n '1s/^systemd \([0-9]*\).*/\1/p')," \
  "kubernetes-validate $("$VENV/bin/kubernetes-validate" --version)," \
  "binary ${BIN#"$ROOT"/}"

# ---------------------------------------------------------------- Prometheus
check "promtool check rules deploy/prometheus/alerts.yml" \
  promtool check rules deploy/prometheus/alerts.yml
check "promtool test rules deploy/prometheus/alerts.test.yml" \
  promtool test rules deploy/prometheus/alerts.test.yml
# Offline: it parses the file and the rule files it names, contacts nothing.
# Debian's promtool is built without Kubernetes service discovery and rejects
# kubernetes_sd_configs as an unknown field; with it, check a copy where that
# discovery is replaced by a static target (its relabeling still checked).
PROM_CONFIG=deploy/prometheus/prometheus.yml
PROM_NOTE=
prom_out=$(promtool check config "$PROM_CONFIG" 2>&1) || true
if [[ $prom_out == *"field kubernetes_sd_configs not found"* ]]; then
  PROM_NOTE=" (kubernetes_sd: static stand-in, Debian promtool lacks it)"
  "$VENV/bin/python" - "$PROM_CONFIG" "$WORK/prometheus.yml" <<'PY'
import os, sys, yaml
src, dst = sys.argv[1], sys.argv[2]
config = yaml.safe_load(open(src))
config["rule_files"] = [os.path.abspath(os.path.join(os.path.dirname(src), f))
                        for f in config.get("rule_files", [])]
for job in config.get("scrape_configs", []):
    if job.pop("kubernetes_sd_configs", None) is not None:
        job["static_configs"] = [{"targets": ["kubernetes-pod.invalid:9090"]}]
yaml.safe_dump(config, open(dst, "w"), sort_keys=False)
PY
  PROM_CONFIG=$WORK/prometheus.yml
fi
check "promtool check config deploy/prometheus/prometheus.yml$PROM_NOTE" \
  promtool check config "$PROM_CONFIG"

# ---------------------------------------------------------------- Kubernetes
# validate MANIFEST: kubernetes-validate against every version, strict
# (unknown fields are errors). An unknown kind or apiVersion is only a
# warning there, with exit status 0: any output at all fails.
validate() {
  local version
  for version in $KUBERNETES_VERSIONS; do
    quietly "$VENV/bin/kubernetes-validate" --strict --quiet -k "$version" "$1" || return 1
  done
}
for manifest in deploy/kubernetes/*.yaml; do
  [ "$(basename "$manifest")" = kustomization.yaml ] && continue
  check "kubernetes-validate --strict ($KUBERNETES_VERSIONS) $manifest" validate "$manifest"
done
# kustomization.yaml is not a Kubernetes object (no schema to validate it
# against): check that it parses and that every resource it lists exists.
check "kustomization.yaml lists existing manifests" \
  "$VENV/bin/python" - deploy/kubernetes/kustomization.yaml <<'PY'
import pathlib, sys, yaml
path = pathlib.Path(sys.argv[1])
doc = yaml.safe_load(path.read_text())
assert doc.get("kind") == "Kustomization", "kind is not Kustomization"
missing = [r for r in doc.get("resources", []) if not (path.parent / r).is_file()]
assert not missing, f"missing resources: {missing}"
assert doc["resources"], "no resources"
PY

# ---------------------------------------------------------------- systemd
# verify needs ExecStart to exist: verify a copy whose ExecStart is the
# built binary (same file name, so the unit name is the same).
rm -rf "$WORK/unit"
mkdir -p "$WORK/unit"
sed "s#^ExecStart=/usr/local/bin/portfolio-replica#ExecStart=$BIN#" "$UNIT" \
  >"$WORK/unit/portfolio-replica.service"
if grep -q "^ExecStart=$BIN " "$WORK/unit/portfolio-replica.service"; then
  check "systemd-analyze verify $UNIT" \
    quietly systemd-analyze verify "$WORK/unit/portfolio-replica.service"
else
  check "systemd-analyze verify $UNIT" \
    sh -c 'echo "ExecStart is not /usr/local/bin/portfolio-replica ...: update this script"; exit 1'
fi
check "systemd-analyze security $UNIT (exposure <= $((SYSTEMD_EXPOSURE_MAX / 10)).$((SYSTEMD_EXPOSURE_MAX % 10)))" \
  systemd-analyze security --offline=yes --threshold="$SYSTEMD_EXPOSURE_MAX" \
  "$WORK/unit/portfolio-replica.service"

# ---------------------------------------------------------------- Grafana
check "python3 -m json.tool $DASHBOARD" \
  python3 -m json.tool "$DASHBOARD" /dev/null
# Structure: a Prometheus datasource variable every panel uses, unique panel
# ids, and every query written out as a recording rule for promtool to parse
# (Grafana's variables replaced by plausible values).
rm -f "$WORK/dashboard-queries.yml"
check "dashboard: datasource variable, panels, queries" \
  python3 - "$DASHBOARD" "$WORK/dashboard-queries.yml" <<'PY'
import json, re, sys
dash = json.load(open(sys.argv[1]))
assert dash.get("schemaVersion", 0) >= 39, "schemaVersion below 39"
variables = dash["templating"]["list"]
ds = [v for v in variables if v.get("type") == "datasource"]
assert ds and ds[0].get("query") == "prometheus", "no Prometheus datasource variable"
ds_name = ds[0]["name"]
ids, exprs = set(), []
def panels(items):
    for p in items:
        yield p
        yield from panels(p.get("panels", []))
for p in panels(dash["panels"]):
    assert p["id"] not in ids, f"duplicate panel id {p['id']}"
    ids.add(p["id"])
    if p.get("type") == "row":
        continue
    assert p.get("datasource", {}).get("uid") == "${%s}" % ds_name, \
        f"panel {p['title']!r} does not use ${{{ds_name}}}"
    assert p.get("targets"), f"panel {p['title']!r} has no query"
    for t in p["targets"]:
        assert t.get("datasource", {}).get("uid") == "${%s}" % ds_name, \
            f"a query of {p['title']!r} does not use ${{{ds_name}}}"
        exprs.append((p["title"], t["expr"]))
def concrete(expr):
    expr = expr.replace("$__rate_interval", "5m").replace("$__interval", "1m")
    expr = expr.replace("$__range", "1h")
    # Variables are used inside regex matchers (=~"$job"): any regex will do.
    return re.sub(r"\$\{?\w+(?::\w+)?\}?", ".+", expr)
with open(sys.argv[2], "w") as out:
    out.write("groups:\n  - name: dashboard\n    rules:\n")
    for i, (title, expr) in enumerate(exprs):
        out.write(f"      - record: dashboard_query_{i}\n")
        out.write(f"        expr: {json.dumps(concrete(expr))}\n")
print(f"{len(ids)} panels, {len(exprs)} queries")
PY
if [ -s "$WORK/dashboard-queries.yml" ]; then
  check "promtool check rules (the dashboard's queries)" \
    promtool check rules "$WORK/dashboard-queries.yml"
fi

# ---------------------------------------------------------------- metric names
check "metric names in alerts, tests, dashboard are the server's" \
  python3 - "$METRICS" "$HISTOGRAMS" deploy/prometheus/alerts.yml \
  deploy/prometheus/alerts.test.yml deploy/prometheus/prometheus.yml "$DASHBOARD" <<'PY'
import re, sys
known = set(sys.argv[1].split())
for h in sys.argv[2].split():
    known |= {h + "_bucket", h + "_sum", h + "_count"}
bad, seen = [], set()
for path in sys.argv[3:]:
    text = open(path).read()
    for m in re.finditer(r"portfolio_replica_[a-zA-Z0-9_]+", text):
        name = m.group(0)
        seen.add(name)
        if name not in known:
            line = text.count("\n", 0, m.start()) + 1
            bad.append(f"{path}:{line}: unknown metric {name}")
assert not bad, "\n".join(bad)
unused = sorted(n for n in known if n not in seen and not n.endswith(("_sum", "_bucket", "_count")))
print(f"{len(seen)} names, all known; never used: {', '.join(unused) or 'none'}")
PY

total=$(ms_since "$started")
if [ "$failed" -ne 0 ]; then
  echo "deploy-checks: $failed check(s) failed ($(seconds "$total"))"
  exit 1
fi
echo "deploy-checks: all passed ($(seconds "$total"))"
