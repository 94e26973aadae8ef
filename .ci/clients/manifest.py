"""What the client checks must find: per workspace key, its snapshot file,
the ids that only the snapshot knows (meetings, notes), and the number of
records each traversal must reach.

    python3 manifest.py OUT.json KEY=FILE...

The counts follow docs/api.md: workspace-wide lists hold every record; a
company's lists hold the records whose company_id names one of the
snapshot's companies (ids compared as 128-bit numbers, that is case-blind);
a company's metrics hold one value per metric name; a meeting's notes are
the meeting notes whose meeting_id names it.
"""

import json
import re
import sys

ID = re.compile(
    r"^([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[1-8][0-9a-fA-F]{3}-[89abAB][0-9a-fA-F]{3}-[0-9a-fA-F]{12}"
    r"|00000000-0000-0000-0000-000000000000|ffffffff-ffff-ffff-ffff-ffffffffffff)$"
)


def norm(ref):
    return ref.lower() if isinstance(ref, str) and ID.match(ref) else None


def attrs(record):
    return record.get("attributes") or {}


def workspace(key, path):
    with open(path, encoding="utf-8") as f:
        snap = json.load(f)
    col = lambda name: snap.get(name) or []
    companies = {norm(c["id"]) for c in col("companies")}
    meetings = {norm(m["id"]) for m in col("meetings")}
    owned = lambda name: sum(norm(attrs(r).get("company_id")) in companies for r in col(name))
    metric_groups = {
        (norm(m.get("company_id")), attrs(m).get("name"))
        for m in col("metrics")
        if norm(m.get("company_id")) in companies
    }
    return {
        "key": key,
        "file": path,
        "workspace": snap["workspace"]["id"],
        "meeting_ids": [m["id"] for m in col("meetings")],
        "note_ids": [n["id"] for n in col("notes")],
        "expect": {
            "companies": len(col("companies")),
            "tasks": len(col("tasks")),
            "roles": len(col("roles")),
            "feed": len(col("feed")),
            "company_tasks": owned("tasks"),
            "company_notes": owned("notes"),
            "company_roles": owned("roles"),
            "company_metrics": len(metric_groups),
            "meetings": len(col("meetings")),
            "meeting_notes": sum(
                norm(attrs(n).get("meeting_id")) in meetings for n in col("meeting_notes")
            ),
            "notes_by_id": len(col("notes")),
        },
    }


def main():
    out = sys.argv[1]
    spaces = []
    for arg in sys.argv[2:]:
        key, path = arg.split("=", 1)
        spaces.append(workspace(key, path))
    with open(out, "w", encoding="utf-8") as f:
        json.dump({"workspaces": spaces}, f, indent=1, ensure_ascii=False)


if __name__ == "__main__":
    main()
