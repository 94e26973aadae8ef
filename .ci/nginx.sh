#!/usr/bin/env bash
# deploy/nginx/portfolio-replica.conf, run: a real nginx in front of two
# replicas routes each key to one replica, and keeps answering when one dies.
#
#   bash .ci/nginx.sh
#
# Installs Debian's `nginx` and `haproxy` packages if missing (needs root
# or sudo; apt-get update only if the install fails without it; a temporary
# policy-rc.d keeps the packages from starting their daemons), checks
# deploy/haproxy/portfolio-replica.cfg with `haproxy -c` (the HAProxy and
# Envoy examples are not run), and builds the release binary (a no-op when
# it is up to date). Then, all on 127.0.0.1, free ports and a scratch
# directory:
#
# 1. generates 40 workspaces (`generate --scale micro`) and starts two
#    replicas serving that one directory, each with a memory budget of
#    about a fifth of them (`--memory-budget 128KiB`), so that a key's
#    workspace is loaded on demand on the replica it lands on, and on the
#    survivor once the other dies;
# 2. renders the shipped config: the `# @replica` lines become the two
#    replicas, the `# @listen` line a free port, the access log a scratch
#    file; wraps it in a minimal main context (pid, error log and temp
#    paths in the scratch directory, `daemon off`) and runs `nginx -t`,
#    then nginx itself, in the foreground, as a child of this script;
# 3. sends 5 requests for each key (200 in all) through nginx, each key
#    with its own User-Agent, and reads from the access log
#    ($upstream_addr) which replica answered: every key's requests land on
#    one replica, without retries, and both replicas have keys;
# 4. sends 300 more (4 clients over all keys), SIGKILLs one replica after
#    the first 60 have been answered, and checks that every request got a
#    200 with its workspace's body, that a request was retried on the
#    survivor, and that the keys that were on the survivor stayed there
#    (never tried on the dead one);
# 5. checks that no key appears in nginx's access or error log.
#
# One line per check, then `nginx: N passed, N failed`; exits non-zero if
# any failed. Everything it starts is stopped by PID on exit (scripts/lib.sh).
# Logs stay in target/nginx/. Needs python3 and curl.
set -euo pipefail
cd "$(dirname "$0")/.."

ROOT=$(pwd)
CONF=deploy/nginx/portfolio-replica.conf
WORK=$ROOT/target/nginx
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
BIN=$TARGET_DIR/release/portfolio-replica
WORKSPACES=40
started=$(date +%s)

passed=0
failed=0
ok() {
  echo "ok    $*"
  passed=$((passed + 1))
}
fail() {
  echo "FAIL  $*"
  failed=$((failed + 1))
}
die() {
  echo "FAIL  $*" >&2
  echo "nginx: $passed passed, $((failed + 1)) failed"
  exit 1
}

# shellcheck source=scripts/lib.sh
source scripts/lib.sh

for tool in python3 curl; do
  command -v "$tool" >/dev/null || die "missing $tool"
done

# --- Tools --------------------------------------------------------------------

NGINX=$(command -v nginx || echo /usr/sbin/nginx)
HAPROXY=$(command -v haproxy || echo /usr/sbin/haproxy)
MISSING=()
[ -x "$NGINX" ] || MISSING+=(nginx)
[ -x "$HAPROXY" ] || MISSING+=(haproxy)
if [ "${#MISSING[@]}" -gt 0 ]; then
  mkdir -p "$WORK"
  apt_packages "$WORK/apt.log" "${MISSING[@]}" || die "cannot install ${MISSING[*]}"
fi
[ -x "$NGINX" ] || die "no nginx at $NGINX after installing"
ok "$("$NGINX" -v 2>&1)"

# The HAProxy example is not run, only checked.
if out=$("$HAPROXY" -c -f deploy/haproxy/portfolio-replica.cfg 2>&1); then
  ok "haproxy -c accepts deploy/haproxy/portfolio-replica.cfg ($("$HAPROXY" -v | head -1 | cut -d' ' -f1-3))"
else
  fail "haproxy -c rejects deploy/haproxy/portfolio-replica.cfg"
  printf '%s\n' "$out" | sed 's/^/      | /'
fi

build_release
ok "release build $BIN"

# --- Two replicas -------------------------------------------------------------

rm -rf "$WORK"
mkdir -p "$WORK"
scratch_dir TMP nginx-ci
"$BIN" generate --scale micro --workspaces "$WORKSPACES" --out "$TMP/snapshots" >/dev/null

declare -A REPLICA_PID=() REPLICA_ADDR=()
for name in a b; do
  "$BIN" serve --snapshots "$TMP/snapshots" --listen 127.0.0.1:0 \
    --admin-listen 127.0.0.1:0 --log-format json --memory-budget 128KiB \
    2>"$WORK/replica-$name.log" &
  pid=$!
  track "$pid"
  wait_for_server "replica $name" "$WORK/replica-$name.log" 60 "$pid"
  REPLICA_PID[$name]=$pid
  REPLICA_ADDR[$name]=$ADDR
done
# b is SIGKILLed on purpose below: out of the job table, bash does not
# report it as "Killed" (it is still stopped by PID on exit if alive).
disown "${REPLICA_PID[b]}"
ok "replicas ready: a on ${REPLICA_ADDR[a]} (pid ${REPLICA_PID[a]}), b on ${REPLICA_ADDR[b]} (pid ${REPLICA_PID[b]})"

# --- nginx with the shipped config --------------------------------------------

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
LB=127.0.0.1:$(free_port)
NGX=$TMP/nginx
mkdir -p "$NGX/logs"
# The shipped file, with its marked lines substituted. Fails if the markers
# moved, so that this check and the file cannot drift apart unnoticed.
python3 scripts/render-nginx.py "$CONF" "$NGX/portfolio-replica.conf" "$LB" "$NGX/logs/access.log" \
  "${REPLICA_ADDR[a]}" "${REPLICA_ADDR[b]}" || die "cannot render $CONF (its '# @replica' and '# @listen' markers)"
USER_LINE=
if [ "$(id -u)" -eq 0 ]; then
  # Workers of a root master drop to this user; it must reach the scratch
  # directory (the temp paths).
  USER_LINE="user nobody nogroup;"
  chmod 0755 "$TMP"
fi
cat >"$NGX/nginx.conf" <<EOF
# .ci/nginx.sh: the main context around the shipped http-context file.
$USER_LINE
daemon off;
worker_processes 2;
pid $NGX/nginx.pid;
error_log $NGX/logs/error.log info;
events { worker_connections 256; }
http {
    client_body_temp_path $NGX/client_body;
    proxy_temp_path $NGX/proxy;
    fastcgi_temp_path $NGX/fastcgi;
    uwsgi_temp_path $NGX/uwsgi;
    scgi_temp_path $NGX/scgi;
    include $NGX/portfolio-replica.conf;
}
EOF
if out=$("$NGINX" -t -p "$NGX" -e "$NGX/logs/error.log" -c "$NGX/nginx.conf" 2>&1); then
  ok "nginx -t accepts the shipped config, rendered for 127.0.0.1"
else
  printf '%s\n' "$out" | sed 's/^/      | /'
  die "nginx -t rejects the rendered config ($NGX/nginx.conf)"
fi
"$NGINX" -p "$NGX" -e "$NGX/logs/error.log" -c "$NGX/nginx.conf" 2>"$WORK/nginx.stderr" &
NGINX_PID=$!
track "$NGINX_PID"
if wait_ready "http://$LB/healthz" 30 "$NGINX_PID"; then
  ok "nginx (pid $NGINX_PID) on $LB proxies /healthz"
else
  cat "$NGX/logs/error.log" "$WORK/nginx.stderr" >&2 || true
  die "nginx on $LB does not answer"
fi

# --- Routing by key, and a replica killed -------------------------------------

# Prints ok/FAIL lines and exits with the number of failed checks.
set +e
timeout 120 python3 - "$LB" "$TMP/snapshots/keys.tsv" "$NGX/logs/access.log" \
  "${REPLICA_ADDR[a]}" "${REPLICA_ADDR[b]}" "${REPLICA_PID[b]}" <<'PY' | tee "$WORK/checks.txt"
import http.client, os, re, signal, sys, threading, time

lb, keys_tsv, access_log, addr_a, addr_b, pid_b = sys.argv[1:]
pid_b = int(pid_b)
host, port = lb.rsplit(":", 1)
name_of = {addr_a: "a", addr_b: "b"}
rows = [line.split("\t") for line in open(keys_tsv).read().splitlines()[1:]]
keys = [key for _ws, _file, key in rows]
failed = 0


def check(good, what):
    global failed
    print(("ok    " if good else "FAIL  ") + what)
    failed += not good


class Client:
    """One keep-alive connection to nginx."""

    def __init__(self):
        self.conn = http.client.HTTPConnection(host, int(port), timeout=10)

    def get(self, i, path="/portfolio"):
        key = keys[i]
        try:
            self.conn.request("GET", path, headers={
                "Authorization": f"Bearer {key}", "User-Agent": f"nginx-ci/key-{i}"})
            r = self.conn.getresponse()
            body = r.read()
        except (OSError, http.client.HTTPException) as e:
            self.conn.close()
            return f"no answer: {e!r}"
        if r.status != 200:
            return f"{r.status} {body[:200]!r}"
        # The key's own workspace answered, whichever replica it was: the
        # body replica a gives for this key and path, asked directly.
        return None if body == expected[(i, path)] else f"{path}: another body"


LINE = re.compile(r'"GET \S+ HTTP/1\.1" (\d+) .* upstream=(.*) upstream_status=.* "nginx-ci/key-(\d+)"$')


def log_lines(skip, want, seconds=5):
    """The access log's lines after the first `skip`, once there are `want`
    of them: (key index, status, [upstream names tried, in order])."""
    deadline = time.monotonic() + seconds
    while True:
        lines = open(access_log).read().splitlines()[skip:]
        if len(lines) >= want or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    out = []
    for line in lines:
        m = LINE.search(line)
        if not m:
            out.append((None, line, []))
            continue
        tried = [name_of.get(a.strip(), a.strip()) for a in m.group(2).split(",")]
        out.append((int(m.group(3)), int(m.group(1)), tried))
    return out


PATHS = ["/portfolio", "/tasks", "/feed"]
expected = {}
direct = http.client.HTTPConnection(*addr_a.rsplit(":", 1), timeout=10)
for i, key in enumerate(keys):
    for path in PATHS:
        direct.request("GET", path, headers={"Authorization": f"Bearer {key}"})
        r = direct.getresponse()
        expected[(i, path)] = r.read()
        assert r.status == 200, (addr_a, path, r.status)
direct.close()


def logged():
    return len(open(access_log).read().splitlines())


# 1. Stickiness: 5 requests per key, one client after the other.
PER_KEY = 5
skip = logged()
client, errors = Client(), []
for _ in range(PER_KEY):
    for i in range(len(keys)):
        err = client.get(i)
        if err:
            errors.append((i, err))
check(not errors, f"{PER_KEY * len(keys)} requests through nginx, all 200 with the key's workspace"
      + (f"; {len(errors)} not: {errors[:3]}" if errors else ""))
lines = log_lines(skip, PER_KEY * len(keys))
check(len(lines) == PER_KEY * len(keys) and all(k is not None for k, _s, _t in lines),
      f"the access log has one parsable line per request ({len(lines)})")
on = {}
for i, status, tried in lines:
    on.setdefault(i, set()).add(tuple(tried))
sticky = [i for i, t in on.items() if len(t) == 1 and len(next(iter(t))) == 1]
check(len(sticky) == len(keys),
      f"each of {len(keys)} keys: its {PER_KEY} requests all answered by one replica, first try"
      + ("" if len(sticky) == len(keys) else
         f"; not: {[(i, sorted(t)) for i, t in on.items() if i not in sticky][:5]}"))
home = {i: next(iter(t))[0] for i, t in on.items()}
on_a = sorted(i for i, r in home.items() if r == "a")
on_b = sorted(i for i, r in home.items() if r == "b")
check(min(len(on_a), len(on_b)) >= len(keys) // 10,
      f"keys spread over both replicas: {len(on_a)} on a, {len(on_b)} on b")

# 2. Replica b killed mid-run: 4 clients, 300 requests over all keys, b
#    SIGKILLed once 60 have been answered.
TOTAL, KILL_AFTER, CLIENTS = 300, 60, 4
skip = logged()
done, lock, results = 0, threading.Lock(), []
killed = threading.Event()


def run(c):
    global done
    client = Client()
    for n in range(c, TOTAL, CLIENTS):
        i = n % len(keys)
        err = client.get(i, PATHS[n % 3])
        with lock:
            results.append((i, err, killed.is_set()))
            done += 1
            if done == KILL_AFTER and not killed.is_set():
                os.kill(pid_b, signal.SIGKILL)
                killed.set()


threads = [threading.Thread(target=run, args=(c,)) for c in range(CLIENTS)]
for t in threads:
    t.start()
for t in threads:
    t.join()
errors = [(i, e) for i, e, _k in results if e]
after = sum(1 for _i, _e, k in results if k)
check(killed.is_set() and after >= TOTAL - KILL_AFTER - CLIENTS,
      f"replica b (pid {pid_b}) SIGKILLed after {KILL_AFTER} answers; {after} requests after")
check(not errors, f"{TOTAL} requests with b killed mid-run: every one 200 with the key's workspace"
      + (f"; {len(errors)} not: {errors[:3]}" if errors else ""))
lines = log_lines(skip, TOTAL)
retried = [(i, t) for i, _s, t in lines if t == ["b", "a"]]
check(len(retried) >= 1,
      f"nginx retried on a what b could not answer ({len(retried)} requests tried b, then a)")
moved = sorted({i for i, _s, t in lines if i in on_a and t != ["a"]})
check(not moved, f"the {len(on_a)} keys on the survivor stayed there, never tried on b"
      + (f"; moved: {moved}" if moved else ""))
# One client per key (40 keys, 4 clients), so a key's lines are in order.
last = {i: t for i, _s, t in lines}
check(all(last[i][-1] == "a" for i in on_b),
      f"the {len(on_b)} keys of b end on a: {sorted({tuple(last[i]) for i in on_b})}")

# 3. The keys never reach a log.
texts = open(access_log).read() + open(os.path.join(os.path.dirname(access_log), "error.log")).read()
leaked = [k for k in keys if k in texts]
check(not leaked, f"no key in nginx's access or error log ({len(leaked)} found)")
sys.exit(min(failed, 99))
PY
rc=${PIPESTATUS[0]}
set -e
# The Python step printed its own lines: count them.
passed=$((passed + $(grep -c '^ok ' "$WORK/checks.txt" || true)))
python_failed=$(grep -c '^FAIL ' "$WORK/checks.txt" || true)
failed=$((failed + python_failed))
if [ "$rc" -ne 0 ] && [ "$python_failed" -eq 0 ]; then
  fail "the requests' Python step exited $rc (124: past its time limit)"
fi

cp -r "$NGX/logs" "$NGX/nginx.conf" "$NGX/portfolio-replica.conf" "$WORK/" 2>/dev/null || true
echo "nginx: done in $(($(date +%s) - started))s; logs and the rendered config in target/nginx/"
echo "nginx: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
