#!/usr/bin/env python3
"""Checks a running server's gzip answers with Python's gzip module: every
endpoint, at many offsets and limits, asked for with and without
Accept-Encoding: gzip. Each gzip body must be exactly one gzip member that
decodes to the plain body; bodies under 1 KiB must come plain. List pages of
ten records or more must compress to at most twice the size of whole-page
`gzip -1` (Python's zlib at level 1, byte for byte what GNU gzip -1 writes),
except tasks filtered by status alone or priority alone (mostly records
compressed one by one): at most 2.3 times. Prints the worst ratio of each
kind and the median of the main lists; exits 1 on any failure.

    scripts/check-gzip.py http://127.0.0.1:8080 cura_demo_acme_key snapshots/acme.json

.ci/check-gzip.sh runs it against the debug build on generated snapshots.
"""
import gzip
import json
import statistics
import sys
import urllib.parse
import zlib

from snapshot_client import open_from_argv


def one_member(body):
    """The decoding of `body`, which must be one whole gzip member."""
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    out = d.decompress(body) + d.flush()
    if not d.eof:
        raise ValueError("truncated gzip member")
    if d.unused_data:
        raise ValueError(f"{len(d.unused_data)} bytes after the gzip member")
    return out


def main():
    snap, conn, key = open_from_argv(sys.argv)
    failures, ratios = [], {"chained": [], "one filter": [], "main": []}
    checked = gzipped = 0

    def get(path, accept=None):
        headers = {"Authorization": f"Bearer {key}"}
        if accept:
            headers["Accept-Encoding"] = accept
        conn.request("GET", path, headers=headers)
        resp = conn.getresponse()
        return resp.status, resp.getheader("Content-Encoding"), resp.read()

    def check(path, kind):
        nonlocal checked, gzipped
        checked += 1
        status, enc, plain = get(path)
        gz_status, gz_enc, body = get(path, "gzip")
        if enc is not None or gz_status != status:
            failures.append(f"{path}: plain answer {status} {enc}, gzip answer {gz_status}")
            return plain
        if status != 200 or len(plain) < 1024:
            if gz_enc is not None or body != plain:
                failures.append(f"{path}: a small or error answer came compressed")
            return plain
        if gz_enc != "gzip":
            failures.append(f"{path}: {len(plain)} bytes not gzipped")
            return plain
        gzipped += 1
        try:
            decoded = one_member(body)
        except (ValueError, zlib.error) as e:
            failures.append(f"{path}: not valid gzip: {e}")
            return plain
        if decoded != plain:
            failures.append(f"{path}: the gzip body decodes to other bytes than the plain body")
            return plain
        data = json.loads(plain).get("data")
        if kind and isinstance(data, list) and len(data) >= 10:
            ratio = len(body) / len(gzip.compress(plain, 1))
            ratios["chained" if kind == "main" else kind].append((ratio, path))
            if kind == "main":
                ratios["main"].append((ratio, path))
        return plain

    def ids(collection):
        return [r["id"] for r in snap.get(collection) or []]

    def values(collection, attr):
        return sorted({(r.get("attributes") or {}).get(attr) for r in snap.get(collection) or []} - {None})

    def q(path, **params):
        return path + ("?" + urllib.parse.urlencode(params) if params else "")

    tasks, companies = ids("tasks"), ids("companies")
    for limit in (1, 2, 5, 17, 50, 100):
        for off in sorted({0, 1, 3, len(tasks) // 3, len(tasks) // 2, max(len(tasks) - limit, 0), len(tasks) + 1}):
            check(q("/tasks", limit=limit, offset=off), "main")
        for off in (0, 1, len(companies) // 2):
            check(q("/portfolio", limit=limit, offset=off), "main")
    for s in values("tasks", "status"):
        check(q("/tasks", **{"filter[status]": s, "limit": 50}), "one filter")
        check(q("/tasks", **{"filter[status]": s, "limit": 20, "offset": 7}), "one filter")
        for p in values("tasks", "priority"):
            check(q("/tasks", **{"filter[status]": s, "filter[priority]": p, "limit": 50}), "chained")
    for p in values("tasks", "priority"):
        check(q("/tasks", **{"filter[priority]": p, "limit": 50}), "one filter")
    for p in values("companies", "priority"):
        check(q("/portfolio", **{"filter[priority]": p, "limit": 100}), "chained")
    for c in companies[:300]:
        check(f"/portfolio/{c}", None)
        check(q(f"/portfolio/{c}/tasks", limit=100), "chained")
        check(q(f"/portfolio/{c}/tasks", limit=7, offset=2), "chained")
        check(q(f"/portfolio/{c}/notes", limit=100), "chained")
        check(q(f"/portfolio/{c}/meetings", limit=100), "chained")
        check(q(f"/portfolio/{c}/meetings", limit=3, offset=1), "chained")
        check(f"/portfolio/{c}/roles", "chained")
        check(f"/portfolio/{c}/metrics", "chained")
    for t in tasks[:: max(len(tasks) // 300, 1)]:
        check(f"/tasks/{t}", None)
    for m in ids("meetings")[:500]:
        check(f"/meetings/{m}", None)
        check(f"/meetings/{m}?include=notes", "chained")
    check("/roles", "chained")
    for kind in [None] + values("feed", "type"):
        cursor = None
        for _ in range(100):
            params = {"limit": 50}
            if kind:
                params["filter[type]"] = kind
            if cursor:
                params["cursor"] = cursor
            plain = check(q("/feed", **params), "chained" if kind else "main")
            cursor = json.loads(plain)["pagination"]["nextCursor"]
            if cursor is None:
                break

    print(f"{checked} answers checked, {gzipped} gzipped")
    for kind, found in ratios.items():
        if found:
            worst = max(found)
            print(f"  {kind} lists: {len(found)} pages of 10 records or more, worst "
                  f"{worst[0]:.2f}x gzip -1 ({worst[1]}), median {statistics.median(r for r, _ in found):.2f}x")
    for kind, bound in (("chained", 2.0), ("one filter", 2.3)):
        for ratio, path in ratios[kind]:
            if ratio > bound:
                failures.append(f"{path}: {ratio:.2f}x the size of gzip -1 (bound {bound})")
    for f in failures[:50]:
        print("FAIL", f)
    if failures:
        print(f"{len(failures)} failures")
        sys.exit(1)


if __name__ == "__main__":
    main()
