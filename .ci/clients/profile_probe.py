"""Edge timestamps: whatever the loader accepts as an ordering timestamp must
parse with Python's datetime.fromisoformat (with an offset) and JavaScript's
Date, to the same instant (milliseconds).

    python profile_probe.py BINARY WORK_DIR

Writes one snapshot per timestamp (a task's created_at), runs
`BINARY check` on all of them at once, and parses every accepted timestamp
with this Python and with `node`. Rejected ones need nothing more.

KNOWN_GAPS lists timestamps the loader accepts although a client fails on
them: they are reported, not failed, until the loader rejects them; then the
entry must go (a gap that is no longer one fails the run, so the list stays
true).
"""

import datetime as dt
import hashlib
import json
import subprocess
import sys
from pathlib import Path

PROBES = [
    # Accepted by the profile, and every client must read them.
    "2026-03-01T10:00:00Z",
    "2026-03-01T10:00:00.1Z",
    "2026-03-01T10:00:00.123456789+05:45",
    "2026-03-01T10:00:00.1234567890123Z",
    "2026-03-01T10:00:00-00:00",
    "2026-03-01T23:59:59.999999999+23:59",
    "2026-03-01T00:00:00-23:59",
    "2024-02-29T12:00:00Z",
    "1969-12-31T23:59:59.999999999Z",
    "0001-01-01T00:00:00Z",
    "0001-01-01T00:00:00+23:59",
    "9999-12-31T23:59:59.999999999Z",
    "9999-12-31T23:59:59.999999999-23:59",
    # Year 0000: RFC 3339 allows it, Python's datetime stops at year 1.
    "0000-01-01T00:00:00Z",
    "0000-12-31T23:59:59.999-23:59",
    # Rejected by the loader.
    "2016-12-31T23:59:60Z",
    "2017-01-01T00:59:60+01:00",
    "2026-03-01t10:00:00z",
    "2026-03-01T10:00:00z",
    "2026-03-01t10:00:00Z",
    "2026-02-29T00:00:00Z",
    "2026-03-01T24:00:00Z",
    "2026-03-01T10:00:00+24:00",
    "2026-03-01T10:00Z",
    "2026-03-01T10:00:00,5Z",
    "2026-03-01T10:00:00.Z",
    "2026-03-01T10:00:00",
    "2026-03-01 10:00:00Z",
    "2026-03-01",
    "+002026-03-01T10:00:00Z",
    " 2026-03-01T10:00:00Z",
    "2026-03-01T10:00:00+0200",
    "\uff12\uff10\uff12\uff16-03-01T10:00:00Z",
]

# timestamp -> why a client fails on it although the loader accepts it.
KNOWN_GAPS = {}

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
NODE = r"""
const out = JSON.parse(process.argv[1]).map((ts) => {
  const t = new Date(ts).getTime();
  return Number.isNaN(t) ? null : t;
});
console.log(JSON.stringify(out));
"""


def python_ms(ts):
    try:
        value = dt.datetime.fromisoformat(ts)
    except ValueError as e:
        return None, str(e)
    if value.tzinfo is None:
        return None, "no offset"
    return (value - EPOCH) // dt.timedelta(milliseconds=1), None


def main():
    binary, work = sys.argv[1], Path(sys.argv[2])
    work.mkdir(parents=True, exist_ok=True)
    for old in work.glob("probe-*.json"):
        old.unlink()
    files = []
    for i, ts in enumerate(PROBES):
        f = work / f"probe-{i:02d}.json"
        f.write_text(json.dumps({
            "format_version": 1,
            "workspace": {"id": f"probe-{i}"},
            "api_keys": [{"sha256": hashlib.sha256(f"cura_probe_{i}".encode()).hexdigest()}],
            "tasks": [{"id": "6f1c2d3e-4b5a-4c6d-8e7f-0a1b2c3d4e5f",
                       "attributes": {"company_id": "c", "created_at": ts}}],
        }))
        files.append(str(f))
    run = subprocess.run([binary, "check", *files], capture_output=True, text=True, timeout=60)
    accepted = {line.split(": ")[1] for line in run.stdout.splitlines() if line.startswith("ok: ")}
    rejected = {line.split(": ")[1] for line in run.stderr.splitlines() if line.startswith("error: ")}
    node = subprocess.run(["node", "-e", NODE, json.dumps(PROBES)],
                          capture_output=True, text=True, timeout=60, check=True)
    js = json.loads(node.stdout)

    failures, gaps, n_ok = [], [], 0
    for ts, f, js_ms in zip(PROBES, files, js):
        if f in rejected:
            continue
        if f not in accepted:
            failures.append(f"{ts!r}: `check` said nothing about {f}")
            continue
        py_ms, py_err = python_ms(ts)
        problems = []
        if py_err:
            problems.append(f"Python fromisoformat: {py_err}")
        if js_ms is None:
            problems.append("JavaScript: Invalid Date")
        if py_ms is not None and js_ms is not None and py_ms != js_ms:
            problems.append(f"Python reads {py_ms} ms, JavaScript {js_ms} ms")
        if problems and ts in KNOWN_GAPS:
            gaps.append(f"{ts!r} ({'; '.join(problems)})")
        elif problems:
            failures.append(f"{ts!r} is accepted by the loader but {'; '.join(problems)}")
        elif ts in KNOWN_GAPS:
            failures.append(f"{ts!r} is in KNOWN_GAPS but clients read it now: remove it")
        else:
            n_ok += 1
    for ts in KNOWN_GAPS:
        if files[PROBES.index(ts)] in rejected:
            failures.append(f"{ts!r} is in KNOWN_GAPS but the loader rejects it now: remove it")

    for g in gaps:
        print(f"profile: KNOWN GAP (loader accepts, a client fails): {g}")
    for f in failures:
        print(f"profile: FAIL: {f}", file=sys.stderr)
    print(f"profile probe: {len(PROBES)} timestamps, {len(accepted)} accepted "
          f"({n_ok} read alike by Python and JavaScript, {len(gaps)} known gaps), "
          f"{len(rejected)} rejected, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
