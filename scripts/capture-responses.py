#!/usr/bin/env python3
"""Captures the answers of a running server to every endpoint, for
byte-for-byte comparisons of two builds (a refactor must not change a byte).

Reads one snapshot file to learn its ids and filter values, then asks the
server for every list at many offsets and limits, every filter value, every
company's sub-resources, a sample of records by id, every meeting with and
without notes, and the whole feed by following nextCursor. Prints one line
per request: path, status, X-Snapshot-Version, ETag, SHA-256 of the body.
Diff two outputs to compare builds.

    scripts/capture-responses.py http://127.0.0.1:8080 cura_demo_acme_key snapshots/acme.json > before.txt

With `--heads` after those three, each line also holds every response
header but Date, in the order sent, and every request is made a second time
with `Accept-Encoding: gzip` (the line then starts with `gzip `).
"""
import hashlib
import json
import random
import sys
import urllib.parse

from snapshot_client import open_from_argv


def main():
    snap, conn, key = open_from_argv(sys.argv)
    rng = random.Random(42)

    heads = "--heads" in sys.argv[4:]

    def fetch(path, extra):
        conn.request("GET", path, headers={"Authorization": f"Bearer {key}", **extra})
        resp = conn.getresponse()
        body = resp.read()
        digest = hashlib.sha256(body).hexdigest()
        line = (f"{path}\t{resp.status}\t{resp.getheader('X-Snapshot-Version')}\t"
                f"{resp.getheader('ETag')}\t{digest}")
        if heads:
            line += "".join(f"\t{k}: {v}" for k, v in resp.getheaders() if k.lower() != "date")
        return line, body

    def get(path):
        line, body = fetch(path, {})
        print(line)
        if heads:
            print("gzip " + fetch(path, {"Accept-Encoding": "gzip"})[0])
        return body

    def ids(collection):
        return [r["id"] for r in snap.get(collection) or []]

    def values(collection, attr):
        out = set()
        for r in snap.get(collection) or []:
            v = (r.get("attributes") or {}).get(attr)
            if isinstance(v, str):
                out.add(v)
        return sorted(out)

    def offsets(n):
        picks = {0, 1, 49, 50, 99, n // 2, max(n - 1, 0), n, n + 1, 9007199254740991}
        picks.update(rng.randrange(0, n + 1) for _ in range(10))
        return sorted(picks)

    def q(path, **params):
        return path + ("?" + urllib.parse.urlencode(params) if params else "")

    companies, tasks, notes, meetings = ids("companies"), ids("tasks"), ids("notes"), ids("meetings")
    for limit in (1, 7, 50, 100):
        for off in offsets(len(companies)):
            get(q("/portfolio", limit=limit, offset=off))
        for off in offsets(len(tasks)):
            get(q("/tasks", limit=limit, offset=off))
    for p in values("companies", "priority") + ["no-such-value"]:
        get(q("/portfolio", **{"filter[priority]": p, "limit": 100}))
    statuses = values("tasks", "status") + ["no-such-value"]
    priorities = values("tasks", "priority") + ["no-such-value"]
    for s in statuses:
        get(q("/tasks", **{"filter[status]": s, "limit": 100, "offset": 3}))
        for p in priorities:
            get(q("/tasks", **{"filter[status]": s, "filter[priority]": p, "limit": 50}))
    for p in priorities:
        get(q("/tasks", **{"filter[priority]": p, "limit": 20, "offset": 17}))
    sample = companies if len(companies) <= 600 else rng.sample(companies, 600)
    for c in sample:
        get(f"/portfolio/{c}")
        get(q(f"/portfolio/{c}/tasks", limit=100))
        get(q(f"/portfolio/{c}/tasks", limit=5, offset=5))
        get(f"/portfolio/{c}/roles")
        get(q(f"/portfolio/{c}/notes", limit=100))
        get(f"/portfolio/{c}/metrics")
    for t in rng.sample(tasks, min(len(tasks), 1500)):
        get(f"/tasks/{t}")
    for n in rng.sample(notes, min(len(notes), 1500)):
        get(f"/notes/{n}")
    for m in meetings[:1500]:
        get(f"/meetings/{m}")
        get(f"/meetings/{m}?include=notes")
    get("/roles")
    for kind in [None] + values("feed", "type"):
        cursor, pages = None, 0
        while pages < 400:
            params = {"limit": 50}
            if kind:
                params["filter[type]"] = kind
            if cursor:
                params["cursor"] = cursor
            body = get(q("/feed", **params))
            cursor = json.loads(body)["pagination"]["nextCursor"]
            pages += 1
            if cursor is None:
                break
    for bad in ["/tasks?limit=0", "/feed?cursor=", "/portfolio/not-a-uuid", "/nope",
                "/tasks/00000000-0000-4000-8000-000000000000"]:
        get(bad)


if __name__ == "__main__":
    main()
