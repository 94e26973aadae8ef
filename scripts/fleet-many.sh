#!/usr/bin/env bash
# Many workspaces on object storage (BENCHMARKS.md, "Many workspaces"):
#
#   scripts/fleet-many.sh
#
# Publishes N workspaces (default 10000) of SCALE (default micro, ~13 KB of
# JSON each; `generate --workspaces N`) to moto (a real S3 protocol server)
# in one `publish`, starts REPLICAS replicas (default 5) on it with
# --poll-interval 1s, and measures:
#
# 1. start: from exec until every replica is ready (each reads every
#    workspace record and object);
# 2. idle: each replica's storage requests per poll (its
#    portfolio_replica_source_requests_total over IDLE seconds, default 10);
# 3. one workspace published, ROUNDS times (default 5): the bytes of shared
#    manifest state the publish writes (manifest.json; the workspace's own
#    record and object not counted), the bytes each replica downloads
#    (portfolio_replica_source_bytes_fetched_total; the object counted), and
#    the time from `publish` returning until every replica serves it;
# 4. 10 publishers of different workspaces at once: each must succeed and
#    every replica must serve all ten (no update lost);
# 5. prefix mode: the same N objects directly under another prefix, one
#    replica: LIST requests per poll, bytes of a listing, the poll interval.
#
# Environment: N, SCALE, REPLICAS, ROUNDS, IDLE, DATA (default
# bench-data/many). Everything binds 127.0.0.1; every process started here
# is stopped by PID on exit. Builds the release binary if missing; installs
# the pinned moto into target/tmp/moto-venv if missing; needs python3, curl.
# Work files and logs: target/fleet-many/. Exits non-zero if a replica does
# not converge within 60 s.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh

N=${N:-10000}
SCALE=${SCALE:-micro}
REPLICAS=${REPLICAS:-5}
ROUNDS=${ROUNDS:-5}
IDLE=${IDLE:-10}
DATA=${DATA:-bench-data/many}
BIN=target/release/portfolio-replica
WORK=target/fleet-many
BUCKET=bench
URL="s3://$BUCKET/fleet/"

[ -x "$BIN" ] || cargo build --release --locked --quiet --bin portfolio-replica
rm -rf "$WORK"
mkdir -p "$WORK/files"
FILES=$DATA/$SCALE-$N
if [ ! -f "$FILES/keys.tsv" ]; then
  "$BIN" generate --out "$FILES" --scale "$SCALE" --workspaces "$N" >/dev/null
fi
say() { echo "== $*"; }
now() { date +%s.%N; }
since() { python3 -c "print(f'{$(now) - $1:.3f}')"; }
metric() { # metric ADMIN NAME [LABEL_MATCH]: the sum of a family's samples
  curl -fsS "http://$1/metrics" | awk -v n="$2" -v m="${3:-}" \
    '$1 ~ "^"n"({|$)" && index($1, m) { s += $2 } END { printf "%.0f\n", s }'
}
# s3 PATH: GET from moto, signed as the AWS_* variables say.
s3() {
  curl -fsS --aws-sigv4 "aws:amz:$AWS_REGION:s3" --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" \
    "http://$MOTO/$BUCKET$1"
}
# version ADDR KEY: the X-Snapshot-Version a key reads.
version() {
  curl -fsS -o /dev/null -D - -H "Authorization: Bearer $2" "http://$1/portfolio" 2>/dev/null |
    tr -d '\r' | sed -n 's/^x-snapshot-version: //Ip'
}

say "moto"
start_moto "$WORK" "$BUCKET"

say "publish $N workspaces of $SCALE ($(du -sh "$FILES" | cut -f1)) in one call"
t=$(now)
"$BIN" publish "$FILES"/*.json --to "$URL" >"$WORK/publish-all.out"
echo "publish took $(since "$t") s; $(tail -1 "$WORK/publish-all.out")"

say "start $REPLICAS replicas (--poll-interval 1s)"
ADMINS=()
APIS=()
t=$(now)
for i in $(seq 1 "$REPLICAS"); do
  "$BIN" --snapshots "$URL" --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 \
    --poll-interval 1s --log-format json 2>"$WORK/replica-$i.log" &
  PIDS+=($!)
  REPLICA_PIDS[i]=$!
done
for i in $(seq 1 "$REPLICAS"); do
  wait_for_server "replica $i" "$WORK/replica-$i.log" 600 "${REPLICA_PIDS[i]}"
  APIS+=("$ADDR")
  ADMINS+=("$ADMIN_ADDR")
done
echo "every replica ready after $(since "$t") s (all $REPLICAS started at once on 2 cores)"

say "idle: requests per replica over $IDLE s"
before=$(metric "${ADMINS[0]}" portfolio_replica_source_requests_total)
sleep "$IDLE"
after=$(metric "${ADMINS[0]}" portfolio_replica_source_requests_total)
echo "replica 1: $((after - before)) requests in $IDLE s (polls every 1 s +-20%)"

# converge KEY VERSION: seconds until every replica serves VERSION to KEY.
converge() {
  local t0=$1 key=$2 want=$3 a
  for a in "${APIS[@]}"; do
    for ((i = 0; i < 600; i++)); do
      [ "$(version "$a" "$key")" = "$want" ] && break
      sleep 0.01
    done
    [ "$(version "$a" "$key")" = "$want" ] || { echo "replica $a never served $want" >&2; exit 1; }
  done
  since "$t0"
}

say "one workspace published, $ROUNDS rounds"
LATENCIES=()
for r in $(seq 1 "$ROUNDS"); do
  n=$(( (r * 997) % N ))
  line=$(sed -n "$((n + 2))p" "$FILES/keys.tsv")
  ws=$(cut -f1 <<<"$line"); file=$(cut -f2 <<<"$line"); key=$(cut -f3 <<<"$line")
  v="round-$r-$ws"
  sed "0,/\"version\": *\"[^\"]*\"/s//\"version\": \"$v\"/" "$FILES/$file" >"$WORK/files/$file"
  fetched=$(metric "${ADMINS[0]}" portfolio_replica_source_bytes_fetched_total)
  "$BIN" publish "$WORK/files/$file" --to "$URL" >"$WORK/publish-$r.out"
  t=$(now)
  took=$(converge "$t" "$key" "$v")
  LATENCIES+=("$took")
  sleep 1.5 # the next poll, so that the replica's count is complete
  got=$(( $(metric "${ADMINS[0]}" portfolio_replica_source_bytes_fetched_total) - fetched ))
  root=$(s3 /fleet/manifest.json | wc -c)
  object=$(sed -n 's/^uploaded: .* (\([0-9]*\) bytes)$/\1/p' "$WORK/publish-$r.out")
  echo "round $r: $ws: all $REPLICAS replicas serve it $took s after publish returned; manifest.json $root bytes; replica 1 fetched $got bytes ($object of them the object)"
done
printf '%s\n' "${LATENCIES[@]}" | sort -n | awk '{a[NR]=$1} END {print "median " a[int((NR+1)/2)] " s, max " a[NR] " s"}'

say "10 publishers of different workspaces at once"
PUBS=()
t=$(now)
for p in $(seq 1 10); do
  n=$(( (p * 131 + 7) % N ))
  line=$(sed -n "$((n + 2))p" "$FILES/keys.tsv")
  file=$(cut -f2 <<<"$line")
  ws=$(cut -f1 <<<"$line")
  sed "0,/\"version\": *\"[^\"]*\"/s//\"version\": \"burst-$ws\"/" "$FILES/$file" >"$WORK/files/burst-$file"
  "$BIN" publish "$WORK/files/burst-$file" --to "$URL" >"$WORK/burst-$p.out" 2>&1 &
  PUBS+=($!)
done
ok=0
for pid in "${PUBS[@]}"; do wait "$pid" && ok=$((ok + 1)); done
echo "$ok of 10 publishes succeeded in $(since "$t") s; retries: $(grep -ho 'after [0-9]* concurrent' "$WORK"/burst-*.out | awk '{s += $2} END {print s + 0}')"
for p in $(seq 1 10); do
  n=$(( (p * 131 + 7) % N ))
  line=$(sed -n "$((n + 2))p" "$FILES/keys.tsv")
  converge "$(now)" "$(cut -f3 <<<"$line")" "burst-$(cut -f1 <<<"$line")" >/dev/null
done
echo "every replica serves all 10 burst versions"
[ "$ok" = 10 ] || exit 1

say "prefix mode: $N objects directly under s3://$BUCKET/plain/"
"target/tmp/moto-venv/bin/python" - "$FILES" "$MOTO" "$BUCKET" <<'PY'
import concurrent.futures, os, sys, boto3
files, moto, bucket = sys.argv[1:4]
s3 = boto3.client("s3", endpoint_url=f"http://{moto}", region_name="us-east-1",
                  aws_access_key_id="bench", aws_secret_access_key="bench-secret")
names = [n for n in os.listdir(files) if n.endswith(".json")]
def put(name):
    with open(os.path.join(files, name), "rb") as f:
        s3.put_object(Bucket=bucket, Key=f"plain/{name}", Body=f.read())
with concurrent.futures.ThreadPoolExecutor(8) as pool:
    list(pool.map(put, names))
PY
page=$(s3 "?list-type=2&prefix=plain/&delimiter=/" | wc -c)
"$BIN" --snapshots "s3://$BUCKET/plain/" --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 \
  --poll-interval 1s --log-format json 2>"$WORK/prefix.log" &
PIDS+=($!)
wait_for_server "prefix replica" "$WORK/prefix.log" 600 "$!"
before=$(metric "$ADMIN_ADDR" portfolio_replica_source_requests_total 'request="list"')
sleep 30
after=$(metric "$ADMIN_ADDR" portfolio_replica_source_requests_total 'request="list"')
echo "prefix mode: a listing is $(( (N + 999) / 1000 )) LIST requests of up to $page bytes (a page of 1,000 objects); $((after - before)) LIST requests in 30 s at --poll-interval 1s (a replica lists every $(( (N + 999) / 1000 )) intervals, or slower if a listing takes longer)"
