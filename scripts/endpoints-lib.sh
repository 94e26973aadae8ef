# shellcheck shell=bash
# The data set and the ten URLs that load-bench.sh and request-cost.sh
# measure, defined once so that both measure the same requests. Source it
# after scripts/lib.sh:
#
#   bench_dataset SCALE DATA BIN
#       sets KEY (the API key of `generate --scale SCALE --seed 42`), SNAP
#       (DATA/snap for large, DATA/snap-SCALE otherwise) and SNAP_FILE
#       (SNAP/SCALE.json, generated with BIN if it is missing); large or
#       medium only.
#   bench_endpoints
#       with `get PATH` defined (the body of an authorized GET to a server
#       of that data), sets ENDPOINT_NAMES and ENDPOINT_PATHS (paths sent
#       exactly as written: wrk does not encode them).

bench_dataset() {
  local scale=$1 data=$2 bin=$3
  case $scale in # the keys of `generate --scale SCALE --seed 42`
  large) KEY=cura_da8233ecb283aa0d65f4ec42e00d70b2 SNAP="$data/snap" DEEP=1000000 ;;
  medium) KEY=cura_7db43926a2aefe402db161b4255df70e SNAP="$data/snap-medium" DEEP=100000 ;;
  *) echo "SCALE: large or medium" >&2 && exit 2 ;;
  esac
  SNAP_FILE="$SNAP/$scale.json"
  mkdir -p "$SNAP"
  if [ ! -f "$SNAP_FILE" ]; then
    echo "generating the $scale dataset into $SNAP (a few minutes for large)..."
    "$bin" generate --out "$SNAP" --scale "$scale" --seed 42 >/dev/null
  fi
}

bench_endpoints() {
  local company meeting cursor _
  company=$(get '/portfolio?limit=1' | jq -r '.data[0].id')
  meeting=$(grep -m1 -A1 '^"meetings":\[' "$SNAP_FILE" | sed -n '2s/^{"id":"\([^"]*\)".*/\1/p')
  if [ -z "$company" ] || [ -z "$meeting" ]; then
    echo "cannot find a company or a meeting id" >&2
    exit 1
  fi
  cursor=2025-01-01T00:00:00.000Z # the middle of the feed (2023..2026)
  if [ "$(get "/feed?limit=50&cursor=$cursor" | jq '.data | length')" != 50 ]; then
    # Not the generator we know: follow nextCursor five pages instead.
    cursor=
    for _ in 1 2 3 4 5; do
      cursor=$(get "/feed?limit=50${cursor:+&cursor=$cursor}" | jq -r '.pagination.nextCursor')
    done
  fi
  # A deep offset: past most of the tasks of the data set (DEEP), where
  # a list that walked its records would show it.
  ENDPOINT_NAMES=(tasks-first tasks-deep tasks-todo feed-middle feed-type portfolio company-tasks company-notes meeting-notes roles)
  ENDPOINT_PATHS=(
    "/tasks?limit=50"
    "/tasks?limit=50&offset=$DEEP"
    "/tasks?limit=50&filter%5Bstatus%5D=todo"
    "/feed?limit=50&cursor=$cursor"
    "/feed?limit=50&filter%5Btype%5D=press"
    "/portfolio"
    "/portfolio/$company/tasks"
    "/portfolio/$company/notes"
    "/meetings/$meeting?include=notes"
    "/roles"
  )
}
