# What scripts/budget-bench.sh and scripts/fleet-budget.sh share, sourced
# after scripts/lib.sh: their settings (from the environment, with the same
# defaults and checks), the data (N workspaces of `generate --scale tiny`,
# reused when DATA holds N), the sessions file scripts/sessions.lua reads,
# and reading /proc and /metrics. The caller sets OUT's default first.
# shellcheck shell=bash disable=SC2034 # the settings are the caller's

N=${N:-20000}
BUDGET=${BUDGET:-256MiB}
DATA=${DATA:-bench-data/budget}
DATA=${DATA%/}
OUT=${OUT:-$DATA$OUT_SUFFIX}
DURATION=${DURATION:-20}
WARMUP=${WARMUP:-3}
CONNECTIONS=${CONNECTIONS:-64}
# One connection a thread: wrk hands a thread's requests to whichever of its
# connections is free, so a session spread over several connections would
# be sent at once, not paged through one request after another as a client
# does (and its first miss would make every one of them wait).
THREADS=${THREADS:-$CONNECTIONS}
SEED=${SEED:-1}
BIN=${BIN:-target/release/portfolio-replica}
SERVER_ARGS=${SERVER_ARGS:-}
START_TIMEOUT=${START_TIMEOUT:-600}
SESSION=20 # requests a session (scripts/sessions.lua)
WRK_CPU=1

for var in N DURATION WARMUP CONNECTIONS THREADS SEED START_TIMEOUT; do
  [[ ${!var} =~ ^[0-9]+$ ]] || { echo "$var: a whole number, not '${!var}'" >&2; exit 2; }
done
if [ "$N" -eq 0 ] || [ "$DURATION" -eq 0 ]; then
  echo "N and DURATION: at least 1" >&2
  exit 2
fi

# size_bytes SIZE: the bytes of a size as the server reads it (a whole
# number, then K, M, G or T, with or without i and B: all powers of 1024).
size_bytes() {
  local text=${1// /} number unit shift
  [[ $text =~ ^([0-9]+)([A-Za-z]*)$ ]] || return 1
  number=${BASH_REMATCH[1]} unit=${BASH_REMATCH[2]^^}
  unit=${unit%B} unit=${unit%I}
  case $unit in
  "") shift=0 ;;
  K) shift=10 ;;
  M) shift=20 ;;
  G) shift=30 ;;
  T) shift=40 ;;
  *) return 1 ;;
  esac
  echo $((10#$number << shift))
}
BUDGET_BYTES=$(size_bytes "$BUDGET") || { echo "BUDGET: a size such as 256MiB, not '$BUDGET'" >&2; exit 2; }

missing=()
for tool in curl python3 wrk taskset; do
  command -v "$tool" >/dev/null || missing+=("$tool")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "missing: ${missing[*]} (Debian: apt-get install curl python3 wrk util-linux)" >&2
  exit 1
fi
[ "$(nproc)" -ge 2 ] || { echo "needs 2 CPUs: wrk on CPU $WRK_CPU, the rest on the other" >&2; exit 1; }

# build_bin: the release build if BIN is the default, else BIN as it is.
build_bin() {
  if [ "$BIN" = target/release/portfolio-replica ]; then
    build_release
  fi
  [ -x "$BIN" ] || { echo "BIN: $BIN is not an executable" >&2; exit 1; }
}

# has_budget: whether BIN has --memory-budget (serve --help).
has_budget() { "$BIN" serve --help | grep -q -- '--memory-budget'; }

# ensure_data: N workspaces of generate's tiny scale (seed 42) in DATA,
# generated unless it holds N of them (keys.tsv and the files); sets
# JSON_BYTES.
json_count() { find "$DATA" -maxdepth 1 -name 'tiny-*.json' | wc -l; }
keys_count() {
  if [ -f "$DATA/keys.tsv" ]; then echo $(($(wc -l <"$DATA/keys.tsv") - 1)); else echo 0; fi
}
ensure_data() {
  if [ "$(keys_count)" != "$N" ] || [ "$(json_count)" != "$N" ]; then
    if [ -d "$DATA" ] && [ -n "$(ls -A "$DATA")" ]; then
      if [ ! -f "$DATA/keys.tsv" ]; then
        echo "DATA: $DATA holds files but no keys.tsv: not generate's; choose another DATA" >&2
        exit 1
      fi
      echo "== $DATA holds $(keys_count) workspaces, not $N: generating again"
      find "$DATA" -maxdepth 1 \( -name 'tiny-*.json' -o -name keys.tsv \) -delete
    fi
    echo "== generating $N tiny workspaces into $DATA"
    local t0
    t0=$(date +%s%N)
    timeout 3600 "$BIN" generate --scale tiny --workspaces "$N" --out "$DATA" >/dev/null
    echo "   $(awk -v a="$t0" -v b="$(date +%s%N)" 'BEGIN { printf "%.1f", (b - a) / 1e9 }') s"
    if [ "$(keys_count)" != "$N" ] || [ "$(json_count)" != "$N" ]; then
      echo "generate wrote $(keys_count) keys and $(json_count) files, not $N" >&2
      exit 1
    fi
  fi
  JSON_BYTES=$(find "$DATA" -maxdepth 1 -name 'tiny-*.json' -printf '%s\n' | awk '{ s += $1 } END { print s }')
}

# ensure_sessions: OUT/sessions.txt, a line per workspace, its key and up to
# 3 company ids, in a shuffled order (seed 42) that sessions.lua reads as
# the popularity ranks; sets SESSIONS. The keys are keys.tsv's (the files
# keep only their hashes); only a file's "companies" list is parsed.
# Rewritten when keys.tsv is newer.
ensure_sessions() {
  mkdir -p "$OUT"
  SESSIONS=$OUT/sessions.txt
  if [ -f "$SESSIONS" ] && [ ! "$DATA/keys.tsv" -nt "$SESSIONS" ] && [ "$(wc -l <"$SESSIONS")" = "$N" ]; then
    return
  fi
  timeout 1800 python3 - "$DATA" "$SESSIONS" <<'PY'
import json, os, random, re, sys
data, out = sys.argv[1:3]
decoder = json.JSONDecoder()
rows = []
for line in open(os.path.join(data, "keys.tsv")).read().splitlines()[1:]:
    workspace, name, key = line.split("\t")
    if not re.fullmatch(r"cura_[0-9a-f]+", key):
        sys.exit(f"keys.tsv: {name}: not a key: {key!r}")
    text = open(os.path.join(data, name), encoding="utf-8").read()
    at = re.search(r'"companies"\s*:\s*', text)
    companies = decoder.raw_decode(text, at.end())[0] if at else json.loads(text)["companies"]
    rows.append(" ".join([key] + [c["id"] for c in companies[:3]]))
random.Random(42).shuffle(rows)
with open(out + ".tmp", "w") as f:
    f.write("\n".join(rows) + "\n")
os.replace(out + ".tmp", out)
PY
}

# A header line of the machine and commit, for the report.
run_header() {
  echo "# commit: $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet HEAD 2>/dev/null || echo ' (dirty tree)')"
}

status_kib() { awk -v f="$2:" '$1 == f { print $2 }' "/proc/$1/status"; }
mib() { awk -v k="$1" 'BEGIN { printf "%.1f", k / 1024 }'; }

# metric FILE NAME [LABEL]: the sum of the series NAME (those with LABEL,
# e.g. 'result="hit"', if given) in a scrape; 0 when there is none.
metric() {
  awk -v name="$2" -v label="${3:-}" '
    ($1 == name || index($1, name "{") == 1) && (label == "" || index($1, label) > 0) { s += $2 }
    END { printf "%.0f\n", s }' "$1"
}
has_metric() { grep -q "^$2[{ ]" "$1"; }
