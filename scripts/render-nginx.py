#!/usr/bin/env python3
"""Renders deploy/nginx/portfolio-replica.conf for a run on loopback (what
.ci/nginx.sh and scripts/fleet-budget.sh run): its lines ending with the
replica marker (REPLICA below) become the replicas given (the shipped
file's extra examples dropped), its line ending with the listen marker the
address given, its access log a scratch file. Fails, naming the line, if
the markers the file promises have moved or appear on any other line (a
script substituting them would break that line), so that the test and the
file cannot drift apart unnoticed.

    render-nginx.py SRC OUT LISTEN ACCESS_LOG [--buffered] [--round-robin] REPLICA...

--buffered buffers the access log (a load test's); --round-robin takes the
shipped `hash` line out (to compare with the hash)."""
import re
import sys

args = sys.argv[1:]
flags = {a for a in args if a.startswith("--")}
src, out, listen, access, *replicas = [a for a in args if not a.startswith("--")]
buffer = " buffer=256k flush=1s" if "--buffered" in flags else ""
# The markers, as the shipped file ends its marked lines with them.
REPLICA, LISTEN = "# @replica", "# @listen"
lines, listens, logs, hashes = [], 0, 0, 0
for line in open(src).read().splitlines():
    for marker in (REPLICA, LISTEN):
        assert marker not in line or line.rstrip().endswith(marker), ("a marker not at the end", line)
    if line.rstrip().endswith(REPLICA):
        if not replicas:
            continue  # more example replicas in the shipped file than here
        line, n = re.subn(r"server \S+", f"server {replicas.pop(0)}", line)
        assert n == 1, line
    elif line.rstrip().endswith(LISTEN):
        line, n = re.subn(r"listen \S+;", f"listen {listen};", line)
        assert n == 1, line
        listens += 1
    elif line.strip().startswith("access_log "):
        line, n = re.subn(r"access_log \S+ (\S+);", rf"access_log {access} \1{buffer};", line)
        assert n == 1, line
        logs += 1
    elif line.strip().startswith("hash "):
        hashes += 1
        if "--round-robin" in flags:
            line = "    # round-robin: the shipped `hash` line taken out: " + line.strip()
    lines.append(line)
assert not replicas and listens == 1 and logs == 1 and hashes == 1, (replicas, listens, logs, hashes)
open(out, "w").write("\n".join(lines) + "\n")
