#!/usr/bin/env bash
# A fleet on object storage, measured (docs/object-storage.md, BENCHMARKS.md):
#
#   scripts/fleet-bench.sh
#
# Starts moto (a real S3 protocol server) and REPLICAS replicas (default 10)
# on loopback, all reading s3://bench/fleet/ with --poll-interval POLL
# (default 1s) and a cache directory each. Publishes a SCALE snapshot
# (default medium, ~100 MB of JSON) with `portfolio-replica publish`, then:
#
# 1. idle cost: each replica's storage requests per minute over IDLE_SECONDS
#    (default 60), from its portfolio_replica_source_requests_total;
# 2. a new version (the same records, another version string, so a delta
#    of a few hundred bytes; each replica inflates its gzip base once to
#    apply it): time from `publish` returning until each replica answers
#    with the new X-Snapshot-Version (p50, max), each replica's peak RSS
#    during the fetch and swap (VmHWM, reset just before) and its RSS after;
# 3. one record changed (a task's title in the middle of the file, by
#    bytes), twice in a row: the same times, from plain bases;
# 4. a rollback to the first version (no delta: each replica downloads the
#    object): the same times, after `portfolio-replica rollback` returns;
# 5. directory mode, for comparison: one replica reading a directory, the
#    same file replaced by rename; its peak RSS during the swap.
#
# For 2 to 4, also the bytes each replica downloaded meanwhile
# (portfolio_replica_source_bytes_fetched_total, polls included) and
# whether it rebuilt the version from a delta (portfolio_replica_source_
# deltas_total{outcome="applied"} rose: "(delta)") or not ("(object)").
#
# Environment: REPLICAS, POLL, IDLE_SECONDS, SCALE, DEADLINE (seconds a
# replica may take to converge before the run fails, default 60).
# Everything binds 127.0.0.1; every process this script starts is killed by
# PID on exit. Builds target/release/portfolio-replica (cargo build
# --release --locked) and installs the pinned moto into target/tmp/moto-venv
# (the venv the tests use) if missing; needs python3 and curl. Work files
# and logs: target/fleet-bench/. Prints the figures and writes them to
# target/fleet-bench/report.txt. Exits non-zero if a replica does not
# converge within DEADLINE.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

REPLICAS=${REPLICAS:-10}
POLL=${POLL:-1s}
IDLE_SECONDS=${IDLE_SECONDS:-60}
SCALE=${SCALE:-medium}
DEADLINE=${DEADLINE:-60}
BUCKET=bench
PREFIX=fleet
URL="s3://$BUCKET/$PREFIX/"

BIN=$ROOT/target/release/portfolio-replica
WORK=$ROOT/target/fleet-bench
DATA=$WORK/data

for tool in python3 curl; do
  command -v "$tool" >/dev/null || { echo "fleet-bench: missing $tool" >&2; exit 1; }
done

# Every process started here is stopped on exit, by PID.
# shellcheck source=scripts/lib.sh
source scripts/lib.sh

say() { echo "== $*"; }
now() { date +%s.%N; }

say "build (release)"
cargo build --release --locked --quiet --bin portfolio-replica

rm -rf "$WORK/cache-"* "$WORK/dir" "$WORK"/*.log
mkdir -p "$DATA"
if [ ! -f "$DATA/$SCALE.json" ] || [ ! -f "$DATA/key" ]; then
  say "generate --scale $SCALE"
  "$BIN" generate --scale "$SCALE" --out "$DATA" | tee "$DATA/generate.out"
  sed -n 's/.*, key \(.*\)$/\1/p' "$DATA/generate.out" | head -1 >"$DATA/key"
fi
KEY=$(cat "$DATA/key")
V1=$(head -c 4096 "$DATA/$SCALE.json" | sed -n 's/.*"version": *"\([^"]*\)".*/\1/p' | head -1)
V2="$V1-v2"
mkdir -p "$DATA/v2"
if [ ! -f "$DATA/v2/$SCALE.json" ]; then
  # The same data under another version: a new object, the same load cost.
  sed "0,/\"$V1\"/s//\"$V2\"/" "$DATA/$SCALE.json" >"$DATA/v2/$SCALE.json"
fi
# Versions 3 and 4: version 2 with one task's title changed, in the
# middle of the file (the version string changes too, in the header).
for n in 3 4; do
  mkdir -p "$DATA/v$n"
  if [ ! -f "$DATA/v$n/$SCALE.json" ]; then
    python3 - "$DATA/v2/$SCALE.json" "$DATA/v$n/$SCALE.json" "$V2" "$V1-v$n" <<'PY'
import sys
src, dst, old, new = sys.argv[1:]
data = open(src, "rb").read()
head = data.find(f'"version":"{old}"'.encode())
assert 0 <= head < 4096, "the version is in the header"
at = data.find(b'"title":"', max(len(data) // 2, data.find(b'"tasks":[')))
assert at > 0, "a task title after the middle"
start = at + len(b'"title":"')
end = data.index(b'"', start)
title = f"Changed in {new}".encode()
out = (data[:head] + f'"version":"{new}"'.encode() + data[head + len(f'"version":"{old}"'):start]
       + title + data[end:])
open(dst, "wb").write(out)
PY
  fi
done
SIZE=$(stat -c %s "$DATA/$SCALE.json")
say "snapshot: $SCALE.json, $SIZE bytes, versions $V1 and $V2"

say "moto"
start_moto "$WORK" "$BUCKET"

say "publish $V1"
t=$(now)
"$BIN" publish "$DATA/$SCALE.json" --to "$URL" | tail -2
echo "publish took $(python3 -c "print(f'{$(now) - $t:.2f}')") s"

say "start $REPLICAS replicas (--poll-interval $POLL)"
API=()
ADMIN=()
RPID=()
for i in $(seq 1 "$REPLICAS"); do
  "$BIN" --snapshots "$URL" --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 \
    --poll-interval "$POLL" --cache-dir "$WORK/cache-$i" --log-format json \
    2>"$WORK/replica-$i.log" &
  PIDS+=($!)
  RPID+=($!)
done
for i in $(seq 1 "$REPLICAS"); do
  wait_for_server "fleet-bench: replica $i" "$WORK/replica-$i.log" 120 "${RPID[$((i - 1))]}"
  API+=("$ADDR")
  ADMIN+=("$ADMIN_ADDR")
done
for i in $(seq 0 $((REPLICAS - 1))); do
  v=$(curl -fsS -o /dev/null -D - -H "Authorization: Bearer $KEY" "http://${API[$i]}/portfolio?limit=1" | tr -d '\r' | sed -n 's/^x-snapshot-version: //Ip')
  [ "$v" = "$V1" ] || { echo "fleet-bench: replica $((i + 1)) serves $v, not $V1" >&2; exit 1; }
done

rss() { awk '/^VmRSS:/ {print int($2 / 1024)}' "/proc/$1/status"; }
hwm() { awk '/^VmHWM:/ {print int($2 / 1024)}' "/proc/$1/status"; }
reset_hwm() { for pid in "$@"; do echo 5 >"/proc/$pid/clear_refs"; done; }
requests() {
  curl -fsS "http://$1/metrics" | sed -n 's/^portfolio_replica_source_requests_total{request="\([a-z_]*\)"} \([0-9]*\).*/\1 \2/p'
}

say "idle: $IDLE_SECONDS s"
for i in $(seq 0 $((REPLICAS - 1))); do requests "${ADMIN[$i]}" >"$WORK/requests-before-$i"; done
sleep "$IDLE_SECONDS"
for i in $(seq 0 $((REPLICAS - 1))); do requests "${ADMIN[$i]}" >"$WORK/requests-after-$i"; done
IDLE_REPORT=$(python3 - "$WORK" "$REPLICAS" "$IDLE_SECONDS" <<'PY'
import sys
work, n, secs = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
def read(path):
    out = {}
    for line in open(path):
        kind, value = line.split()
        out[kind] = int(value)
    return out
rows, totals = [], []
for i in range(n):
    before, after = read(f"{work}/requests-before-{i}"), read(f"{work}/requests-after-{i}")
    delta = {k: after.get(k, 0) - before.get(k, 0) for k in set(before) | set(after)}
    per_min = {k: v * 60 / secs for k, v in delta.items() if v}
    totals.append(sum(per_min.values()))
    rows.append(f"  replica {i + 1}: " + ", ".join(f"{k} {v:.1f}" for k, v in sorted(per_min.items())) + f" (total {sum(per_min.values()):.1f}/min)")
print("\n".join(rows))
print(f"  mean {sum(totals) / n:.1f} requests per replica per minute")
PY
)
echo "$IDLE_REPORT"
IDLE_RSS=$(for pid in "${RPID[@]}"; do rss "$pid"; done | tr '\n' ' ')

# Times, per replica, from `t0` (written to a file once the command has
# returned) until its answers carry `version`; the poller starts before
# the command so that no switch is missed. Sets POLLER to its PID.
POLLER=
converge() {
  local version=$1 t0file=$2 out=$3
  rm -f "$t0file"
  python3 - "$version" "$KEY" "$t0file" "$DEADLINE" "${API[@]}" >"$out" <<'PY' &
import http.client, json, os, sys, threading, time
version, key, t0file, deadline = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
apis = sys.argv[5:]
seen = [None] * len(apis)
start = time.time()
def watch(i, addr):
    host, port = addr.rsplit(":", 1)
    conn = None
    while time.time() - start < deadline + 30:
        try:
            if conn is None:
                conn = http.client.HTTPConnection(host, int(port), timeout=5)
            conn.request("GET", "/portfolio?limit=1", headers={"Authorization": f"Bearer {key}"})
            resp = conn.getresponse()
            resp.read()
            if resp.getheader("X-Snapshot-Version") == version:
                seen[i] = time.time()
                return
        except Exception:
            conn = None
        time.sleep(0.02)
threads = [threading.Thread(target=watch, args=(i, a)) for i, a in enumerate(apis)]
for t in threads:
    t.start()
for t in threads:
    t.join()
while not os.path.exists(t0file):
    time.sleep(0.01)
t0 = float(open(t0file).read())
print(json.dumps([None if s is None else max(0.0, s - t0) for s in seen]))
PY
  POLLER=$!
  PIDS+=("$POLLER")
}

summary() {
  python3 - "$1" "$DEADLINE" <<'PY'
import json, sys
times = json.load(open(sys.argv[1]))
late = [i + 1 for i, t in enumerate(times) if t is None or t > float(sys.argv[2])]
done = sorted(t for t in times if t is not None)
p50 = done[(len(done) - 1) // 2] if done else float("nan")
print("  per replica (s): " + " ".join("-" if t is None else f"{t:.2f}" for t in times))
print(f"  p50 {p50:.2f} s, max {max(done) if done else float('nan'):.2f} s" + (f"; NOT CONVERGED: replicas {late}" if late else ""))
sys.exit(1 if late else 0)
PY
}

fetched() {
  curl -fsS "http://$1/metrics" | sed -n 's/^portfolio_replica_source_bytes_fetched_total \([0-9]*\).*/\1/p'
}
# The series appears at the first delta applied.
applied() {
  curl -fsS "http://$1/metrics" | sed -n 's/^portfolio_replica_source_deltas_total{outcome="applied"} \([0-9]*\).*/\1/p' | grep . || echo 0
}
# Each replica's bytes downloaded and deltas applied, noted before a change;
# then, after it, what each downloaded since, marked if not from a delta.
mark() {
  for i in $(seq 0 $((REPLICAS - 1))); do
    echo "$(fetched "${ADMIN[$i]}") $(applied "${ADMIN[$i]}")" >"$WORK/bytes-before-$i"
  done
}
since_mark() {
  for i in $(seq 0 $((REPLICAS - 1))); do
    read -r b0 a0 <"$WORK/bytes-before-$i"
    echo "$(($(fetched "${ADMIN[$i]}") - b0)) bytes$([ "$(applied "${ADMIN[$i]}")" -gt "$a0" ] && echo " (delta)" || echo " (object)")"
  done | paste -sd, | sed 's/,/, /g'
}

say "publish $V2 (new version)"
mark
reset_hwm "${RPID[@]}"
converge "$V2" "$WORK/t0-publish" "$WORK/converge-publish.json"
t=$(now)
"$BIN" publish "$DATA/v2/$SCALE.json" --to "$URL" | tail -1
now >"$WORK/t0-publish"
echo "publish took $(python3 -c "print(f'{$(cat "$WORK/t0-publish") - $t:.2f}')") s"
wait "$POLLER"
PUBLISH_REPORT=$(summary "$WORK/converge-publish.json") || { echo "$PUBLISH_REPORT"; exit 1; }
PUBLISH_REPORT+=$'\n'"  downloaded per replica: $(since_mark)"
echo "$PUBLISH_REPORT"
SWAP_HWM=$(for pid in "${RPID[@]}"; do hwm "$pid"; done | tr '\n' ' ')
sleep 1
AFTER_RSS=$(for pid in "${RPID[@]}"; do rss "$pid"; done | tr '\n' ' ')

ONE_REPORT=
for n in 3 4; do
  version="$V1-v$n"
  say "publish $version (one record changed)"
  mark
  converge "$version" "$WORK/t0-one-$n" "$WORK/converge-one-$n.json"
  t=$(now)
  "$BIN" publish "$DATA/v$n/$SCALE.json" --to "$URL" | grep -E '^(uploaded|delta|no delta|published):' | tee "$WORK/publish-one-$n.out"
  now >"$WORK/t0-one-$n"
  took=$(python3 -c "print(f'{$(cat "$WORK/t0-one-$n") - $t:.2f}')")
  echo "publish took $took s"
  wait "$POLLER"
  report=$(summary "$WORK/converge-one-$n.json") || { echo "$report"; exit 1; }
  # Polls go on meanwhile: 304s, which carry no bytes.
  bytes=$(since_mark)
  ONE_REPORT+="  $version: publish took $took s; $(sed -n 's/^delta: [^ ]* (\([0-9]*\) bytes.*/delta \1 bytes/p' "$WORK/publish-one-$n.out")"$'\n'
  ONE_REPORT+="$report"$'\n'
  ONE_REPORT+="  downloaded per replica: $bytes"$'\n'
  echo "$report"
  echo "  downloaded per replica: $bytes"
done
ONE_REPORT=${ONE_REPORT%$'\n'}

say "rollback to $V1"
mark
converge "$V1" "$WORK/t0-rollback" "$WORK/converge-rollback.json"
t=$(now)
"$BIN" rollback "$(sed -n 's/.*workspace \([^,]*\),.*/\1/p' "$DATA/generate.out" | head -1)" --to "$URL" --version "$V1"
now >"$WORK/t0-rollback"
echo "rollback took $(python3 -c "print(f'{$(cat "$WORK/t0-rollback") - $t:.2f}')") s"
wait "$POLLER"
ROLLBACK_REPORT=$(summary "$WORK/converge-rollback.json") || { echo "$ROLLBACK_REPORT"; exit 1; }
ROLLBACK_REPORT+=$'\n'"  downloaded per replica: $(since_mark)"
echo "$ROLLBACK_REPORT"

say "stop the fleet; directory mode for comparison"
stop "${RPID[@]}"
mkdir -p "$WORK/dir"
cp "$DATA/$SCALE.json" "$WORK/dir/$SCALE.json"
"$BIN" --snapshots "$WORK/dir" --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 \
  --log-format json 2>"$WORK/dir-replica.log" &
DPID=$!
PIDS+=("$DPID")
wait_for_server "fleet-bench: directory replica" "$WORK/dir-replica.log" 120 "$DPID"
DIR_API=$ADDR
DIR_IDLE=$(rss "$DPID")
reset_hwm "$DPID"
cp "$DATA/v2/$SCALE.json" "$WORK/dir/.$SCALE.json.tmp"
mv "$WORK/dir/.$SCALE.json.tmp" "$WORK/dir/$SCALE.json"
for _ in $(seq 1 600); do
  v=$(curl -fsS -o /dev/null -D - -H "Authorization: Bearer $KEY" "http://$DIR_API/portfolio?limit=1" | tr -d '\r' | sed -n 's/^x-snapshot-version: //Ip')
  [ "$v" = "$V2" ] && break
  sleep 0.05
done
DIR_HWM=$(hwm "$DPID")
sleep 1
DIR_AFTER=$(rss "$DPID")

{
  echo "fleet-bench: $REPLICAS replicas, --poll-interval $POLL, $SCALE ($SIZE bytes), $(date -u +%FT%TZ), commit $(git rev-parse --short HEAD)"
  echo "idle storage requests per replica per minute ($IDLE_SECONDS s):"
  echo "$IDLE_REPORT"
  echo "new version (same records, a delta), from publish returning until each replica answers with it:"
  echo "$PUBLISH_REPORT"
  echo "one record changed, from publish returning until each replica answers with it:"
  echo "$ONE_REPORT"
  echo "rollback, from rollback returning:"
  echo "$ROLLBACK_REPORT"
  echo "RSS MiB per replica, idle on $V1:      $IDLE_RSS"
  echo "peak RSS MiB during fetch and swap:   $SWAP_HWM"
  echo "RSS MiB after the swap:               $AFTER_RSS"
  echo "directory mode, one replica: idle $DIR_IDLE MiB, peak during the swap $DIR_HWM MiB, after $DIR_AFTER MiB"
} | tee "$WORK/report.txt"
