"""Writes the snapshots of .ci/clients.sh: one with awkward text and timestamps,
and the negative ones that the loader must reject.

    python3 make_snapshots.py OUT_DIR NEG_DIR

OUT_DIR/clients.json is the workspace `ws-clients` (key `cura_clients_key`):
ordering timestamps with many UTC offsets (-23:59 to +23:59, Z, -00:00),
0 to 9 fraction digits, ties written with different offsets, instants from
year 1 to year 9999 (two of them outside the years 0000-9999 in UTC, so the
feed cursor takes the expanded-year form), strings with every JSON escape,
non-ASCII text, surrogate pairs, U+2028/U+2029, a NUL; ids with every
version digit, both cases, and the nil and max ids; dangling references.
Half of the records are written with \\u escapes, half as raw UTF-8, and URLs
with escaped solidus (\\/).

NEG_DIR gets one file per (collection, bad timestamp): each must be rejected
by `portfolio-replica check`, naming the field. NEG_DIR/cases.tsv lists
them: file, expected field, expected phrase.

Deterministic: the same files on every run.
"""

import datetime as dt
import hashlib
import json
import sys
from pathlib import Path

KEY = "cura_clients_key"
OFFSETS = [
    "Z", "+00:00", "-00:00", "+01:00", "-01:00", "+02:00", "-02:30", "+03:00",
    "-03:30", "+04:00", "+05:30", "+05:45", "-05:00", "+06:30", "-06:00",
    "+08:45", "+09:30", "-09:30", "+10:30", "-10:00", "+12:45", "+13:45",
    "+14:00", "-12:00", "-11:00", "+23:59", "-23:59", "+00:01", "-00:01",
]
TEXTS = [
    'quote " backslash \\ slash / tab \t newline \n return \r bs \b ff \f',
    "Ärger über Öl — naïve café, São Paulo, Kraków, Zürich",
    "日本語のテキスト・株式会社 ｶﾀｶﾅ",
    "emoji 🚀👩‍👩‍👧‍👦 flags 🇩🇪🇯🇵 astral 𝔘𝔫𝔦𝔠𝔬𝔡𝔢",
    "RTL שלום עולם مرحبا بالعالم",
    "combining e\u0301 vs \u00e9, BOM \ufeff, ZWJ a\u200db, NBSP a\u00a0b",
    "line sep \u2028 para sep \u2029 end",
    "controls \u0000 nul \u0001 \u001f unit sep \u007f del",
    "</script><script>alert(1)</script> & <b>html</b> 'single'",
    "Ω≈ç√∫ ∑ ∞ ≠ ≤ ≥ ÷ — “curly” ‘quotes’ «guillemets» …",
    "",
    " leading and trailing spaces ",
    "x" * 300 + "ü",
]


def text(i):
    return TEXTS[i % len(TEXTS)]


def rid(kind, i):
    """A deterministic id with version digit 1-8, variant 8/9/a/b, mixed case."""
    h = hashlib.sha256(f"{kind}/{i}".encode()).hexdigest()
    version = "12345678"[i % 8]
    variant = "89ab"[(i // 8) % 4]
    s = f"{h[:8]}-{h[8:12]}-{version}{h[13:16]}-{variant}{h[17:20]}-{h[20:32]}"
    return s.upper() if i % 5 == 3 else s


def stamp(instant, i, offset=None):
    """`instant` (aware) written in an offset and with i % 10 fraction digits."""
    off = OFFSETS[i % len(OFFSETS)] if offset is None else offset
    if off in ("Z", "+00:00", "-00:00"):
        delta = dt.timedelta(0)
    else:
        sign = 1 if off[0] == "+" else -1
        delta = sign * dt.timedelta(hours=int(off[1:3]), minutes=int(off[4:6]))
    local = (instant + delta).replace(tzinfo=None)
    digits = i % 10
    frac = ""
    if digits:
        nanos = (instant.microsecond * 1000 + (i * 7919) % 1000) % 10**9
        frac = "." + f"{nanos:09d}"[:digits]
    return local.strftime("%Y-%m-%dT%H:%M:%S") + frac + off


BASE = dt.datetime(2026, 3, 1, 10, 0, 0, 123456, tzinfo=dt.timezone.utc)


def moment(i, step_minutes=97):
    return BASE - dt.timedelta(minutes=step_minutes * i, seconds=i * 13)


# Instants written exactly, far apart: year 1, before 1970, leap days, year 9999.
EDGE_STAMPS = [
    "0001-01-01T00:00:00Z",
    "0001-01-01T23:59:59.999999999+23:59",
    "1900-02-28T23:59:59.9-00:01",
    "1969-12-31T23:59:59.999999999Z",
    "1970-01-01T00:00:00Z",
    "2000-02-29T12:00:00.5+14:00",
    "2024-02-29T23:59:59.999999999-23:59",
    "2026-12-31T23:59:59.999999999+00:00",
    "9999-12-31T23:59:59.999999999Z",
    "9999-12-31T00:00:00-00:00",
]
# The same instant five ways: these tie and are ordered by id.
TIE_STAMPS = [
    "2026-03-01T10:00:00Z",
    "2026-03-01T12:00:00.000+02:00",
    "2026-03-01T05:00:00.000000000-05:00",
    "2026-03-02T09:59:00+23:59",
    "2026-02-28T10:01:00.0-23:59",
]
# Outside the years 0000-9999 once in UTC: the cursor after them uses the
# ISO 8601 expanded year (+10000-..., 0000-...).
FEED_EXTREMES = [
    "9999-12-31T23:59:59.999999999-01:00",
    "9999-12-31T23:30:00-23:59",
    "0001-01-01T00:30:00+01:00",
    "0001-01-01T00:00:00.5+23:59",
]


def company_records():
    out = []
    for i in range(7):
        attrs = {
            "domain": f"company-{i}.example",
            "name": None if i == 0 else text(i) + f" #{i}",
            "logo_url": f"https://company-{i}.example/logo.png?q=\u00e4&x=1",
            "headline": text(i + 1),
            "description": text(i + 2),
            "professional_network": f"https://www.linkedin.com/company/c{i}",
            "x": f"https://x.com/c{i}",
            "careers_url": None,
            "domain_aliases": [f"alias-{i}.example", "ümlaut.example"],
            "priority": ["high", "medium", "low", "Ünïcode", ""][i % 5],
            "labels": [text(i + 3)[:20], "seed"],
            "value_propositions": [
                {"problem": text(i + 4), "solution": text(i + 5), "icp": None},
                {"problem": "only a problem"},
            ],
        }
        out.append({"id": rid("company", i), "attributes": attrs})
    return out


def main():
    out_dir, neg_dir = Path(sys.argv[1]), Path(sys.argv[2])
    companies = company_records()
    cids = [c["id"] for c in companies]
    # References in another case than the record id: ids compare as numbers.
    ref = lambda i: cids[i % len(cids)].swapcase() if i % 4 == 1 else cids[i % len(cids)]
    dangling = ["not-a-uuid", rid("company", 999), ""]

    tasks = []
    ordered = [stamp(moment(i), i) for i in range(140)] + EDGE_STAMPS + TIE_STAMPS
    for i, created in enumerate(ordered):
        tid = rid("task", i)
        if i == 0:
            tid = "00000000-0000-0000-0000-000000000000"
        elif i == 1:
            tid = "ffffffff-ffff-ffff-ffff-ffffffffffff"
        tasks.append({"id": tid, "attributes": {
            "title": text(i),
            "description": text(i + 1) if i % 3 else None,
            "status": ["open", "done", "in progress", "blocked"][i % 4],
            "priority": ["high", "low", None][i % 3],
            "source": "manual",
            "company_id": dangling[i % 3] if i % 23 == 7 else ref(i),
            "assignee_id": None,
            "due_date": (BASE.date() + dt.timedelta(days=i)).isoformat() if i % 2 else None,
            "created_at": created,
            "updated_at": stamp(moment(i) + dt.timedelta(hours=5), i + 3) if i % 5 else None,
        }})

    notes = []
    for i in range(60):
        created = stamp(moment(i, 131), i + 1) if i < 55 else TIE_STAMPS[i - 55]
        notes.append({"id": rid("note", i), "attributes": {
            "company_id": dangling[0] if i == 13 else ref(i + 2),
            "title": text(i + 5),
            "content": text(i + 6) * 3,
            "source": None,
            "created_by": "Zoë O’Brien",
            "created_at": created,
        }})

    roles = []
    for i in range(40):
        roles.append({"id": rid("role", i), "attributes": {
            "company_id": dangling[1] if i == 3 else ref(i + 1),
            "name": text(i + 7),
            "url": f"https://jobs.example/{i}?a=1&b=\u00fc",
            "description": text(i),
            "domain": None,
            "level": ["senior", "staff", None][i % 3],
            "opened_at": stamp(moment(i, 1009), i + 2) if i < 36 else EDGE_STAMPS[i - 36],
        }})

    feed = []
    feed_stamps = ([stamp(moment(i, 61), i + 4) for i in range(95)]
                   + TIE_STAMPS + FEED_EXTREMES + EDGE_STAMPS[2:6])
    for i, published in enumerate(feed_stamps):
        sources = []
        for j in range(i % 4):
            sources.append({
                "source": ["news", "x", None][j % 3],
                "url": f"https://news.example/{i}/{j}",
                "title": text(i + j),
                "published_at": stamp(moment(i + j, 61) - dt.timedelta(days=1), i + j + 5),
            })
        if i % 17 == 5:
            sources.append({"title": "only a title"})
        feed.append({"id": rid("feed", i), "attributes": {
            "company_id": dangling[2] if i == 11 else ref(i),
            "type": ["news", "funding", "hiring", "Ünïcode type"][i % 4],
            "title": text(i + 8),
            "content": text(i + 9) if i % 2 else None,
            "published_at": published,
            "private": [True, False, None][i % 3],
            "sources": sources if i % 5 else None,
        }})

    metrics = []
    names = ["ARR", "Headcount", "Burn – monthly", "日本の指標", None, "arr"]
    values = [12, 2.50, 1e3, -0.0, 12345678901234567890, 0.1, -7.25e-3, None]
    n = 0
    for c in range(len(cids)):
        for k, name in enumerate(names):
            for h in range(3):
                metrics.append({
                    "id": rid("metric", n),
                    "company_id": dangling[0] if n == 4 else ref(c),
                    "attributes": {
                        "name": name,
                        "unit": ["EUR", "people", "%", None][k % 4],
                        "value_text": text(n) if n % 3 == 0 else None,
                        "value_numeric": values[n % len(values)],
                        "value_currency": "EUR" if k == 0 else None,
                        "period_label": "Q1 2026",
                        "period_start": "2026-01-01",
                        "period_end": "2026-03-31",
                        "reported_at": stamp(moment(n, 2003), n + 6),
                    },
                })
                n += 1

    meetings = []
    for i in range(12):
        start = moment(i, 5003)
        attendees = [
            {"email": f"person{i}@company-{i}.example", "organizer": True, "name": text(i)},
            {"email": "zoë@exämple.com", "organizer": False},
            {"email": "a+tag@b.example", "organizer": False, "name": None},
        ]
        meetings.append({"id": rid("meeting", i), "attributes": {
            "company_id": dangling[1] if i == 5 else ref(i),
            "title": text(i + 2),
            "start_time": stamp(start, i + 7) if i < 10 else TIE_STAMPS[i - 10],
            "end_time": stamp(start + dt.timedelta(minutes=45), i + 8) if i % 3 else None,
            "attendees": attendees[: 1 + i % 3],
            "created_at": stamp(start - dt.timedelta(days=3), i + 9),
            "updated_at": stamp(start - dt.timedelta(days=1), i + 10),
        }})

    meeting_notes = []
    mids = [m["id"] for m in meetings]
    for i in range(20):
        start = moment(i % 12, 5003)
        transcript = None
        if i % 2:
            transcript = {"segments": [
                {"text": text(i), "speaker": text(i + 1)[:12], "startTime": 0, "endTime": 1.5},
                {"text": text(i + 2)},
                {"text": "", "speaker": None, "startTime": 12345678901234567890, "endTime": 2.50},
            ]}
        meeting_notes.append({"id": rid("meeting_note", i), "attributes": {
            "meeting_id": "dangling" if i == 19 else (mids[i % 12].swapcase() if i % 3 == 2 else mids[i % 12]),
            "type": "notetool",
            "notes": text(i + 3) if i % 4 else None,
            "transcript": transcript,
            "synced_at": stamp(start + dt.timedelta(hours=2), i + 11) if i % 3 else None,
            "created_at": stamp(start + dt.timedelta(minutes=50 + i), i + 12) if i < 17 else TIE_STAMPS[i - 15],
            "updated_at": stamp(start + dt.timedelta(hours=3), i + 13),
        }})

    snapshot = {
        "format_version": 1,
        "version": "clients-check-1",
        "workspace": {"id": "ws-clients \u00e9\u65e5\u672c", "name": "Clients check"},
        "api_keys": [{"sha256": hashlib.sha256(KEY.encode()).hexdigest(), "label": "clients"}],
        "companies": companies,
        "tasks": tasks,
        "roles": roles,
        "feed": feed,
        "notes": notes,
        "metrics": metrics,
        "meetings": meetings,
        "meeting_notes": meeting_notes,
    }
    write_mixed(out_dir / "clients.json", snapshot)
    write_negatives(neg_dir)


def write_mixed(path, snapshot):
    """Records alternately \\u-escaped and raw UTF-8; URLs with \\/."""
    parts = []
    for key, value in snapshot.items():
        if isinstance(value, list) and key != "api_keys":
            rows = [
                json.dumps(r, ensure_ascii=(i % 2 == 0), separators=(",", ":"))
                for i, r in enumerate(value)
            ]
            parts.append(json.dumps(key) + ":[\n" + ",\n".join(rows) + "\n]")
        else:
            parts.append(json.dumps(key) + ":" + json.dumps(value, ensure_ascii=False))
    body = "{\n" + ",\n".join(parts) + "\n}\n"
    body = body.replace("https://", "https:\\/\\/")
    path.write_text(body, encoding="utf-8")


def write_negatives(neg_dir):
    """One file per collection and bad ordering timestamp."""
    cid = "41700876-57cf-41d0-8b77-6127e59682fe"
    mid = "5a6b7c8d-1e2f-4a3b-8c4d-5e6f7a8b9c0d"
    bad = {
        "leap": ("2016-12-31T23:59:60Z", "leap second"),
        "leap-offset": ("2017-01-01T00:59:60.5+01:00", "leap second"),
        "lower": ("2026-03-01t10:00:00z", "lower case"),
        "lower-t": ("2026-03-01t10:00:00Z", "lower case"),
        "lower-z": ("2026-03-01T10:00:00.5z", "lower case"),
    }
    good = "2026-03-01T10:00:00Z"

    def record(collection, at):
        rid_ = "6f1c2d3e-4b5a-4c6d-8e7f-0a1b2c3d4e5f"
        if collection == "metrics":
            return {"id": rid_, "company_id": cid, "attributes": {"reported_at": at}}
        if collection == "meetings":
            return {"id": mid, "attributes": {
                "company_id": cid, "title": "t", "start_time": at, "end_time": None,
                "attendees": [], "created_at": good, "updated_at": good}}
        if collection == "meeting_notes":
            return {"id": rid_, "attributes": {
                "meeting_id": mid, "type": "notetool", "notes": None, "transcript": None,
                "synced_at": None, "created_at": at, "updated_at": good}}
        field = {"roles": "opened_at", "feed": "published_at"}.get(collection, "created_at")
        return {"id": rid_, "attributes": {"company_id": cid, field: at}}

    fields = {"tasks": "created_at", "notes": "created_at", "roles": "opened_at",
              "feed": "published_at", "metrics": "reported_at", "meetings": "start_time",
              "meeting_notes": "created_at"}
    neg_dir.mkdir(parents=True, exist_ok=True)
    rows = []
    for collection, field in fields.items():
        for name, (at, phrase) in bad.items():
            snap = {
                "format_version": 1,
                "workspace": {"id": "ws-negative"},
                "api_keys": [{"sha256": hashlib.sha256(b"cura_negative_key").hexdigest()}],
                "companies": [{"id": cid, "attributes": {"name": "n"}}],
                collection: [record(collection, at)],
            }
            if collection == "meeting_notes":
                snap["meetings"] = [record("meetings", good)]
            f = neg_dir / f"{collection}-{name}.json"
            f.write_text(json.dumps(snap, indent=1) + "\n")
            rows.append(f"{f.name}\t{collection}[0]\tattributes.{field}\t{at}\t{phrase}")
    (neg_dir / "cases.tsv").write_text("\n".join(rows) + "\n")


if __name__ == "__main__":
    main()
