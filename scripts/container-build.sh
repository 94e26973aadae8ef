#!/usr/bin/env bash
# Builds the container image from the Dockerfile and, if it builds, runs it
# on loopback ports with the demo snapshots and checks it: the image's own
# `probe` (its HEALTHCHECK) inside the container, /readyz and an API call
# from the host, and a graceful stop (SIGTERM, exit status 0).
#
#   scripts/container-build.sh              use podman, buildah or docker if present
#   INSTALL=1 scripts/container-build.sh    apt-get install podman if none is
#
# Optional in CI: with no engine it says so and exits 0 (REQUIRE=1 makes that
# a failure). Exits 1 when a build or a check fails, after saying why; the
# full build log is in target/container-build/build.log. Building needs the
# base images (docker.io/library/rust, gcr.io/distroless/cc-debian12) and
# crates.io; a machine without access to those registries cannot build, and
# the script says that rather than pretending.
#
# Environment: IMAGE (default localhost/portfolio-replica:dev), BUILD_TIMEOUT
# (seconds, default 1800), READY_TIMEOUT (seconds for /readyz, default 60),
# RUN_OPTS (more options for `run`; inside a container whose cgroups or
# rlimits crun cannot manage, e.g. RUN_OPTS="--runtime runc --ulimit
# nofile=4096:4096 --ulimit nproc=4096:4096"). The container runs as the
# Kubernetes manifests run it: read-only root, no capabilities, no new
# privileges.
# The container is named portfolio-replica-check-<pid>, published on free
# 127.0.0.1 ports only, and removed on exit.
set -euo pipefail
cd "$(dirname "$0")/.."

IMAGE=${IMAGE:-localhost/portfolio-replica:dev}
BUILD_TIMEOUT=${BUILD_TIMEOUT:-1800}
READY_TIMEOUT=${READY_TIMEOUT:-60}
INSTALL=${INSTALL:-0}
REQUIRE=${REQUIRE:-0}
WORK=target/container-build
LOG=$WORK/build.log
NAME=portfolio-replica-check-$$
mkdir -p "$WORK"

say() { echo "container-build: $*"; }
fail() {
  say "FAILED: $*"
  exit 1
}

# ---------------------------------------------------------------- engine
ENGINE=
if command -v podman >/dev/null; then
  ENGINE=podman
elif command -v buildah >/dev/null; then
  ENGINE=buildah
elif command -v docker >/dev/null && docker info >/dev/null 2>&1; then
  ENGINE=docker
elif [ "$INSTALL" = 1 ]; then
  say "no container engine; INSTALL=1: apt-get install podman"
  as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }
  if ! as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q podman >"$WORK/apt.log" 2>&1; then
    as_root apt-get update -q >>"$WORK/apt.log" 2>&1 || true
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q podman >>"$WORK/apt.log" 2>&1 ||
      fail "apt-get install podman failed (see $WORK/apt.log)"
  fi
  say "installed podman $(dpkg-query -W -f='${Version}' podman)"
  ENGINE=podman
fi
if [ -z "$ENGINE" ]; then
  if command -v docker >/dev/null; then
    why="docker is installed but no daemon answers (docker info fails)"
  else
    why="neither podman, buildah nor docker is installed"
  fi
  say "SKIPPED: $why; INSTALL=1 installs podman"
  [ "$REQUIRE" = 1 ] && exit 1
  exit 0
fi
say "engine: $ENGINE ($("$ENGINE" --version 2>&1 | head -n 1))"

# ---------------------------------------------------------------- build
# --format docker: the OCI image format has no HEALTHCHECK, podman and
# buildah would drop it.
case $ENGINE in
  podman) build=(podman build --format docker) ;;
  buildah) build=(buildah bud --format docker) ;;
  docker) build=(docker build) ;;
esac
say "building $IMAGE (bounded to ${BUILD_TIMEOUT}s, log $LOG)"
started=$(date +%s)
rc=0
timeout "$BUILD_TIMEOUT" "${build[@]}" -t "$IMAGE" -f Dockerfile . >"$LOG" 2>&1 || rc=$?
elapsed=$(($(date +%s) - started))
if [ "$rc" -ne 0 ]; then
  say "build failed after ${elapsed}s (exit status $rc); last lines of the log:"
  tail -n 15 "$LOG" | sed 's/^/  | /'
  # Name the cause when it is a known one.
  if [ "$rc" -eq 124 ]; then
    why="the build took longer than BUILD_TIMEOUT=${BUILD_TIMEOUT}s"
  elif grep -qiE 'pinging container registry|initializing source docker://|dial tcp|no such host|i/o timeout|connection refused|network is unreachable|TLS handshake timeout' "$LOG"; then
    why="a base image could not be pulled: no network access to its registry (docker.io / gcr.io)"
  elif grep -qiE 'newuidmap|user namespace|cannot clone|operation not permitted|mount.*permission denied|overlay.*not supported|crun|runc' "$LOG"; then
    why="the engine cannot create containers here (namespaces, mounts or the OCI runtime are not permitted)"
  elif grep -qiE 'failed to (download|get|fetch).*crates|index.crates.io|failed to load source for dependency' "$LOG"; then
    why="cargo could not reach crates.io from inside the build"
  elif grep -qiE 'error(\[E[0-9]+\])?:|could not compile' "$LOG"; then
    why="the Rust build failed"
  else
    why="unrecognised; read $LOG"
  fi
  fail "$why"
fi
say "built $IMAGE in ${elapsed}s"
if [ "$ENGINE" = buildah ]; then
  say "SKIPPED run checks: buildah builds but does not run containers; install podman to run them"
  exit 0
fi

# ---------------------------------------------------------------- run
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
API_PORT=$(free_port)
ADMIN_PORT=$(free_port)
CONTAINER=
# shellcheck disable=SC2317 # called by scripts/lib.sh's EXIT trap
on_exit() {
  if [ -n "$CONTAINER" ]; then
    "$ENGINE" rm -f "$CONTAINER" >/dev/null 2>&1 || true
  fi
}
# shellcheck source=scripts/lib.sh
source scripts/lib.sh

run_log=$WORK/run.log
# shellcheck disable=SC2086 # RUN_OPTS is a list of options
if ! CONTAINER=$("$ENGINE" run -d --name "$NAME" --read-only --cap-drop ALL \
  --security-opt no-new-privileges ${RUN_OPTS:-} \
  -p "127.0.0.1:$API_PORT:8080" -p "127.0.0.1:$ADMIN_PORT:9090" "$IMAGE" 2>"$run_log"); then
  CONTAINER=$NAME
  grep -v 'level=error msg="Removing timer' "$run_log" | sed 's/^/  | /'
  if grep -qE 'OCI runtime|OCI permission denied|cgroups' "$run_log"; then
    fail "the image built but the engine cannot run containers here (OCI runtime: cgroups or rlimits); see RUN_OPTS"
  fi
  fail "the image built but the container did not start"
fi
say "running $NAME: API 127.0.0.1:$API_PORT, admin 127.0.0.1:$ADMIN_PORT"

# The image's HEALTHCHECK command, inside the container (no shell, no curl).
ready=0
for _ in $(seq 1 "$READY_TIMEOUT"); do
  if "$ENGINE" exec "$CONTAINER" /usr/local/bin/portfolio-replica probe >/dev/null 2>&1; then
    ready=1
    break
  fi
  if [ "$("$ENGINE" inspect -f '{{.State.Running}}' "$CONTAINER" 2>/dev/null)" != true ]; then
    "$ENGINE" logs "$CONTAINER" 2>&1 | tail -n 20 | sed 's/^/  | /'
    fail "the container exited before it was ready"
  fi
  sleep 1
done
if [ "$ready" != 1 ]; then
  "$ENGINE" exec "$CONTAINER" /usr/local/bin/portfolio-replica probe 2>&1 | sed 's/^/  probe | /' || true
  "$ENGINE" logs "$CONTAINER" 2>&1 | tail -n 20 | sed 's/^/  | /'
  fail "portfolio-replica probe did not exit 0 within ${READY_TIMEOUT}s (is the probe subcommand in this build?)"
fi
say "ok: portfolio-replica probe (the HEALTHCHECK) exits 0 inside the container"

curl -fsS -o /dev/null "http://127.0.0.1:$API_PORT/readyz" ||
  fail "GET /readyz from the host through the published port"
say "ok: GET /readyz from the host is 200"
body=$(curl -fsS -H 'Authorization: Bearer cura_demo_acme_key' \
  "http://127.0.0.1:$API_PORT/portfolio?limit=1") ||
  fail "GET /portfolio with the demo key"
[[ $body == *'"data"'* ]] || fail "GET /portfolio answered without data: $body"
say "ok: GET /portfolio with the demo key answers data"
curl -fsS "http://127.0.0.1:$ADMIN_PORT/metrics" | grep -q '^portfolio_replica_build_info' ||
  fail "GET /metrics on the admin port has no portfolio_replica_build_info"
say "ok: GET /metrics on the admin port"
if [ "$ENGINE" = podman ]; then
  "$ENGINE" healthcheck run "$CONTAINER" >/dev/null 2>&1 ||
    fail "podman healthcheck run (the image's HEALTHCHECK) failed"
  say "ok: podman healthcheck run"
fi

# Graceful stop: SIGTERM (STOPSIGNAL), exit 0 within the shutdown grace.
"$ENGINE" stop -t 20 "$CONTAINER" >/dev/null
code=$("$ENGINE" inspect -f '{{.State.ExitCode}}' "$CONTAINER")
[ "$code" = 0 ] || fail "after SIGTERM the server exited with status $code, not 0"
say "ok: SIGTERM stops it with exit status 0"
say "WORKED: $IMAGE builds, serves the demo snapshots and stops cleanly"
