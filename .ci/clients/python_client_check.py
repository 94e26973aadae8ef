"""Reads every record of every workspace with the Python client that
openapi-python-client generated from the server's /openapi.json.

    python python_client_check.py BASE_URL MANIFEST.json
    python python_client_check.py --self-test

For each workspace key of the manifest (written by manifest.py) it pages
through /portfolio, every company (by id, and its tasks, notes, roles and
metrics), /tasks, /roles, the whole /feed by nextCursor (twice: limit 1 and
limit 50, which must agree), every meeting with include=notes, and every task
and note by id. Only the generated client's API functions are used; the raw
body of each answer is kept beside the model to compare the two.

Checks, each a failure when broken:
- every answer is a 200 and parses into the generated model (an exception
  anywhere fails the run);
- every timestamp field the models expose as datetime.datetime holds an
  aware datetime; every timestamp the models keep as str (the document gives
  no `format: date-time`) parses with datetime.datetime.fromisoformat, as
  Python 3.11 reads it, with an offset; date fields (due_date,
  period_start, period_end) parse with datetime.date.fromisoformat;
- model.to_dict() gives back the body: same keys, same values (timestamps
  compared as instants and offsets), so the models represent every answer;
- every served value equals the snapshot's (text with escapes, non-ASCII,
  numbers), and the id is served as written;
- lists are in their documented order (newest first; meeting notes oldest
  first), comparing the parsed datetimes;
- each traversal reaches exactly the number of records the manifest expects,
  and paging (offset and cursor) neither repeats nor skips a record.

Prints one line per workspace and a summary; exits 1 on any failure.
"""

import datetime as dt
import json
import sys
import traceback
from collections import Counter

import attrs

TIMESTAMPS = {
    "created_at", "updated_at", "published_at", "opened_at", "reported_at",
    "start_time", "end_time", "synced_at",
}
DATES = {"due_date", "period_start", "period_end"}
MAX_ERRORS = 30


class Check:
    def __init__(self, quiet=False):
        self.quiet = quiet
        self.errors = []
        self.stats = Counter()
        # (model, field) -> "datetime" or "str"
        self.kinds = {}

    def fail(self, message):
        self.errors.append(message)
        if len(self.errors) <= MAX_ERRORS and not self.quiet:
            print(f"python: FAIL: {message}", file=sys.stderr)

    # --- timestamps -------------------------------------------------------

    def timestamp_text(self, text, where):
        """A timestamp the model left as str: parse it as Python 3.11 does."""
        try:
            value = dt.datetime.fromisoformat(text)
        except ValueError as e:
            self.fail(f"{where}: {text!r} does not parse with datetime.fromisoformat: {e}")
            return None
        if value.tzinfo is None:
            self.fail(f"{where}: {text!r} has no UTC offset")
        self.stats["timestamps_str"] += 1
        return value

    def walk(self, obj, where):
        """Visits every attrs model under obj, checking its timestamp fields."""
        from portfolio_client.types import Unset

        if isinstance(obj, list):
            for i, item in enumerate(obj):
                self.walk(item, f"{where}[{i}]")
            return
        if not attrs.has(type(obj)):
            return
        model = type(obj).__name__
        for field in attrs.fields(type(obj)):
            if field.name == "additional_properties":
                continue
            value = getattr(obj, field.name)
            here = f"{where}.{field.name}"
            # Segment's startTime/endTime are numbers (seconds), not timestamps.
            if model != "Segment" and field.name in TIMESTAMPS:
                if isinstance(value, dt.datetime):
                    self.kinds[(model, field.name)] = "datetime"
                    self.stats["timestamps_datetime"] += 1
                    if value.tzinfo is None:
                        self.fail(f"{here}: the client gave a naive datetime {value!r}")
                elif isinstance(value, str):
                    self.kinds[(model, field.name)] = "str"
                    self.timestamp_text(value, here)
                elif value is not None and not isinstance(value, Unset):
                    self.fail(f"{here}: unexpected {type(value).__name__} {value!r}")
            elif field.name in DATES and isinstance(value, str):
                try:
                    dt.date.fromisoformat(value)
                    self.stats["dates"] += 1
                except ValueError as e:
                    self.fail(f"{here}: {value!r} is not a date: {e}")
            self.walk(value, here)

    # --- model against body -----------------------------------------------

    def same_body(self, raw, back, where):
        """model.to_dict() must give the body back."""
        if isinstance(raw, dict):
            if not isinstance(back, dict):
                self.fail(f"{where}: the model gave {type(back).__name__}, the body an object")
                return
            if set(raw) != set(back):
                self.fail(
                    f"{where}: the model does not represent the body: keys only in the body "
                    f"{sorted(set(raw) - set(back))}, only in the model {sorted(set(back) - set(raw))}"
                )
            for k in raw.keys() & back.keys():
                self.same_body(raw[k], back[k], f"{where}.{k}")
        elif isinstance(raw, list):
            if not isinstance(back, list) or len(raw) != len(back):
                self.fail(f"{where}: the model gave {back!r:.80}, the body {raw!r:.80}")
                return
            for i, (a, b) in enumerate(zip(raw, back)):
                self.same_body(a, b, f"{where}[{i}]")
        elif raw != back or type(raw) is not type(back):
            if isinstance(raw, str) and isinstance(back, str):
                # A datetime written back by isoformat(): the same instant and offset.
                try:
                    a, b = dt.datetime.fromisoformat(raw), dt.datetime.fromisoformat(back)
                    if a == b and a.utcoffset() == b.utcoffset():
                        return
                except ValueError:
                    pass
            if isinstance(raw, (int, float)) and isinstance(back, (int, float)) and raw == back:
                return
            self.fail(f"{where}: the model gave {back!r:.80}, the body {raw!r:.80}")

    # --- body against snapshot --------------------------------------------

    def same_as_snapshot(self, snap, served, where):
        if isinstance(snap, dict):
            if not isinstance(served, dict):
                self.fail(f"{where}: served {served!r:.80}, the snapshot has an object")
                return
            for k, v in snap.items():
                if k not in served:
                    if v is not None:
                        self.fail(f"{where}.{k}: missing; the snapshot has {v!r:.80}")
                    continue
                self.same_as_snapshot(v, served[k], f"{where}.{k}")
        elif isinstance(snap, list):
            if not isinstance(served, list) or len(snap) != len(served):
                self.fail(f"{where}: served {served!r:.80}, the snapshot has {snap!r:.80}")
                return
            for i, (a, b) in enumerate(zip(snap, served)):
                self.same_as_snapshot(a, b, f"{where}[{i}]")
        elif isinstance(snap, bool) or snap is None or isinstance(snap, str):
            if snap != served or type(snap) is not type(served):
                self.fail(f"{where}: served {served!r:.80}, the snapshot has {snap!r:.80}")
        elif isinstance(snap, (int, float)):
            if isinstance(served, bool) or not isinstance(served, (int, float)) or snap != served:
                self.fail(f"{where}: served {served!r:.80}, the snapshot has {snap!r:.80}")


class Workspace:
    """One key: its snapshot (for expected values) and the calls made with it."""

    COLLECTIONS = ("companies", "tasks", "roles", "feed", "notes", "metrics",
                   "meetings", "meeting_notes")

    def __init__(self, check, client, entry):
        self.check = check
        self.client = client
        self.entry = entry
        self.name = entry["workspace"]
        with open(entry["file"], encoding="utf-8") as f:
            snap = json.load(f)
        self.snap = {
            c: {r["id"].lower(): r for r in (snap.get(c) or [])} for c in self.COLLECTIONS
        }
        self.counts = Counter()

    def call(self, fn, where, **kwargs):
        """Calls a generated API function; returns (model, raw body)."""
        self.check.stats["requests"] += 1
        response = fn.sync_detailed(client=self.client, **kwargs)
        if response.status_code != 200:
            raise AssertionError(
                f"{where}: status {int(response.status_code)}: {response.content[:200]!r}"
            )
        raw = json.loads(response.content)
        model = response.parsed
        if model is None or type(model).__name__ == "Error":
            raise AssertionError(f"{where}: the client parsed no model: {response.content[:200]!r}")
        self.check.same_body(raw, model.to_dict(), where)
        self.check.walk(model, where)
        self.check.stats["models"] += 1
        return model, raw

    def record(self, collection, raw, model, where):
        """A record seen: compare it with the snapshot."""
        self.check.stats["records"] += 1
        snap = self.snap[collection].get(raw["id"].lower())
        if snap is None:
            self.check.fail(f"{where}: id {raw['id']} is not in the snapshot's {collection}")
            return
        if raw["id"] != snap["id"]:
            self.check.fail(f"{where}: id served as {raw['id']}, written {snap['id']}")
        if model.id != raw["id"]:
            self.check.fail(f"{where}: the model's id {model.id!r} differs from {raw['id']!r}")
        self.check.same_as_snapshot(snap.get("attributes") or {}, raw["attributes"], f"{where}.attributes")

    def ordered(self, models, attr, where, newest_first=True):
        """The parsed datetimes are in the list's documented order."""
        stamps = [getattr(m.attributes, attr) for m in models]
        for i in range(1, len(stamps)):
            a, b = stamps[i - 1], stamps[i]
            if (a < b) if newest_first else (a > b):
                self.check.fail(
                    f"{where}: {attr} out of order at {i}: {a.isoformat()} then {b.isoformat()}"
                )

    def offset_pages(self, fn, collection, where, limit, **kwargs):
        """Every page of an offset-paginated list; returns (models, raws)."""
        models, raws, offset = [], [], 0
        while True:
            page, raw = self.call(fn, f"{where}?offset={offset}", limit=limit, offset=offset, **kwargs)
            p = page.pagination
            if (p.limit, p.offset) != (limit, offset):
                self.check.fail(f"{where}: pagination echoes {p.limit}/{p.offset}, asked {limit}/{offset}")
            for i, (m, r) in enumerate(zip(page.data, raw["data"])):
                self.record(collection, r, m, f"{where}[{offset + i}]")
            models += page.data
            raws += raw["data"]
            if not p.has_more:
                break
            if len(page.data) != limit:
                self.check.fail(f"{where}: hasMore with a short page of {len(page.data)}")
                break
            offset += limit
        ids = [r["id"] for r in raws]
        if len(set(ids)) != len(ids):
            self.check.fail(f"{where}: paging repeated records")
        return models, raws

    def feed(self, limit):
        from portfolio_client.api.feed import list_feed
        from portfolio_client.types import UNSET

        models, ids, cursor, pages = [], [], UNSET, 0
        while True:
            where = f"{self.name} /feed limit={limit} page {pages}"
            page, raw = self.call(list_feed, where, limit=limit, cursor=cursor)
            pages += 1
            for i, (m, r) in enumerate(zip(page.data, raw["data"])):
                self.record("feed", r, m, f"{where}[{i}]")
            models += page.data
            ids += [r["id"] for r in raw["data"]]
            if page.pagination.next_cursor is None:
                break
            cursor = page.pagination.next_cursor
            self.check.stats["cursors"] += 1
            if pages > 100000:
                raise AssertionError(f"{where}: the feed does not end")
        if len(set(ids)) != len(ids):
            self.check.fail(f"{self.name} /feed limit={limit}: a record came twice")
        self.ordered(models, "published_at", f"{self.name} /feed limit={limit}")
        return ids

    def run(self):
        from portfolio_client.api.feed import list_feed  # noqa: F401
        from portfolio_client.api.meetings import get_meeting
        from portfolio_client.api.notes import get_note
        from portfolio_client.api.portfolio import (
            get_company, list_companies, list_company_metrics, list_company_notes,
            list_company_roles, list_company_tasks,
        )
        from portfolio_client.api.roles import list_roles
        from portfolio_client.api.tasks import get_task, list_tasks
        from portfolio_client.models import GetMeetingInclude

        n = self.name
        companies, _ = self.offset_pages(list_companies, "companies", f"{n} /portfolio", 5)
        self.counts["companies"] = len(companies)
        for c in companies:
            cid = c.id
            one, raw = self.call(get_company, f"{n} /portfolio/{cid}", id=cid)
            self.record("companies", raw["data"], one.data, f"{n} /portfolio/{cid}")
            tasks, _ = self.offset_pages(list_company_tasks, "tasks", f"{n} /portfolio/{cid}/tasks", 7, id=cid)
            self.ordered(tasks, "created_at", f"{n} /portfolio/{cid}/tasks")
            notes, _ = self.offset_pages(list_company_notes, "notes", f"{n} /portfolio/{cid}/notes", 7, id=cid)
            self.ordered(notes, "created_at", f"{n} /portfolio/{cid}/notes")
            roles, raw = self.call(list_company_roles, f"{n} /portfolio/{cid}/roles", id=cid)
            for i, (m, r) in enumerate(zip(roles.data, raw["data"])):
                self.record("roles", r, m, f"{n} /portfolio/{cid}/roles[{i}]")
            self.ordered(roles.data, "opened_at", f"{n} /portfolio/{cid}/roles")
            metrics, raw = self.call(list_company_metrics, f"{n} /portfolio/{cid}/metrics", id=cid)
            for i, (m, r) in enumerate(zip(metrics.data, raw["data"])):
                self.record("metrics", r, m, f"{n} /portfolio/{cid}/metrics[{i}]")
            self.counts["company_tasks"] += len(tasks)
            self.counts["company_notes"] += len(notes)
            self.counts["company_roles"] += len(roles.data)
            self.counts["company_metrics"] += len(metrics.data)

        tasks, _ = self.offset_pages(list_tasks, "tasks", f"{n} /tasks", 100)
        self.ordered(tasks, "created_at", f"{n} /tasks")
        self.counts["tasks"] = len(tasks)
        for t in tasks:
            one, raw = self.call(get_task, f"{n} /tasks/{t.id}", id=t.id)
            self.record("tasks", raw["data"], one.data, f"{n} /tasks/{t.id}")
            if one.data.to_dict() != t.to_dict():
                self.check.fail(f"{n} /tasks/{t.id}: differs from its /tasks entry")

        roles, raw = self.call(list_roles, f"{n} /roles")
        for i, (m, r) in enumerate(zip(roles.data, raw["data"])):
            self.record("roles", r, m, f"{n} /roles[{i}]")
        self.ordered(roles.data, "opened_at", f"{n} /roles")
        self.counts["roles"] = len(roles.data)

        one_by_one = self.feed(1)
        paged = self.feed(50)
        if one_by_one != paged:
            self.check.fail(f"{n} /feed: limit=1 and limit=50 give different sequences")
        self.counts["feed"] = len(paged)

        for note_id in self.entry["note_ids"]:
            one, raw = self.call(get_note, f"{n} /notes/{note_id}", id=note_id)
            self.record("notes", raw["data"], one.data, f"{n} /notes/{note_id}")
            self.counts["notes_by_id"] += 1

        for meeting_id in self.entry["meeting_ids"]:
            where = f"{n} /meetings/{meeting_id}?include=notes"
            one, raw = self.call(get_meeting, where, id=meeting_id, include=GetMeetingInclude.NOTES)
            data = raw["data"]
            self.record("meetings", {"id": data["id"], "attributes": data["attributes"]}, one.data, where)
            notes = one.data.notes
            if not isinstance(notes, list):
                self.check.fail(f"{where}: the model has no notes list")
                continue
            for i, (m, r) in enumerate(zip(notes, data["notes"])):
                self.record("meeting_notes", r, m, f"{where}.notes[{i}]")
            self.ordered(notes, "created_at", f"{where}.notes", newest_first=False)
            self.counts["meetings"] += 1
            self.counts["meeting_notes"] += len(notes)

        for what, expected in self.entry["expect"].items():
            if self.counts[what] != expected:
                self.check.fail(f"{n}: {what}: reached {self.counts[what]}, the snapshot holds {expected}")


def operations(base_url, check):
    """The keyless endpoints through the generated client.

    GET /openapi.json: openapi-python-client 0.29 drops the OpenApiDocument
    schema (array members without `items`), so getOpenApi has no 200 model
    and, with raise_on_unexpected_status, raises UnexpectedStatus on a 200.
    That is reported here, not failed; generation lists it as a known warning.
    """
    from portfolio_client import Client, errors
    from portfolio_client.api.operations import get_health, get_open_api, get_readiness

    with Client(base_url=base_url, raise_on_unexpected_status=True) as client:
        health = get_health.sync(client=client)
        ready = get_readiness.sync(client=client)
        if type(health).__name__ != "Health" or health.status.value != "ok":
            check.fail(f"/healthz: {health!r}")
        if type(ready).__name__ != "Ready" or ready.status.value != "ready":
            check.fail(f"/readyz: {ready!r}")
        check.stats["requests"] += 3
        try:
            response = get_open_api.sync_detailed(client=client)
            how = f"status {int(response.status_code)}, parsed as {type(response.parsed).__name__}"
        except errors.UnexpectedStatus as e:
            how = (f"KNOWN: the client raises UnexpectedStatus on its documented {e.status_code}: "
                   "the generator dropped the OpenApiDocument model")
    print(f"python: /healthz {health.status.value}, /readyz {ready.status.value}; /openapi.json: {how}")


def self_test():
    """The checks must catch what the loader rejects."""
    check = Check(quiet=True)
    for bad in ("2016-12-31T23:59:60Z", "2026-03-01t10:00:00z", "2026-03-01T10:00:00",
                "0000-01-01T00:00:00Z"):
        before = len(check.errors)
        check.timestamp_text(bad, "self-test")
        if len(check.errors) == before:
            print(f"python: self-test FAILED: {bad!r} was not flagged", file=sys.stderr)
            return 1
    print(f"python self-test: {len(check.errors)} bad timestamps flagged as expected")
    return 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    base_url, manifest_path = sys.argv[1], sys.argv[2]
    import httpx
    from portfolio_client import AuthenticatedClient

    with open(manifest_path, encoding="utf-8") as f:
        manifest = json.load(f)
    check = Check()
    try:
        for entry in manifest["workspaces"]:
            with AuthenticatedClient(
                base_url=base_url,
                token=entry["key"],
                timeout=httpx.Timeout(30.0),
                raise_on_unexpected_status=True,
            ) as client:
                ws = Workspace(check, client, entry)
                ws.run()
                counts = ", ".join(f"{k} {v}" for k, v in ws.counts.items())
                print(f"python: {ws.name}: {counts}")
    except Exception:  # any exception of the client is a failure
        traceback.print_exc()
        check.fail("an exception stopped the traversal")

    try:
        operations(base_url, check)
    except Exception:
        traceback.print_exc()
        check.fail("an exception in the service endpoints")

    as_str = sorted(f"{m}.{f}" for (m, f), k in check.kinds.items() if k == "str")
    as_dt = sorted(f"{m}.{f}" for (m, f), k in check.kinds.items() if k == "datetime")
    print(f"python: models give datetime.datetime for: {', '.join(as_dt)}")
    print(f"python: models keep str (no format: date-time), parsed with fromisoformat: {', '.join(as_str)}")
    s = check.stats
    print(
        f"python client: {s['records']} records, {s['models']} responses, {s['requests']} requests, "
        f"{s['cursors']} cursors, {s['timestamps_datetime'] + s['timestamps_str']} timestamps "
        f"({s['timestamps_datetime']} datetime by the client, {s['timestamps_str']} str parsed here), "
        f"{s['dates']} dates, {len(check.errors)} failures"
    )
    return 1 if check.errors else 0


if __name__ == "__main__":
    sys.exit(main())
