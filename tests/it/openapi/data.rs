//! The data the requests run over: the generated snapshots and a workspace
//! of edge cases.

use serde_json::{Value, json};

use super::*;
use crate::util::*;

pub(super) fn read_snapshot(path: &std::path::Path) -> Value {
    let bytes = std::fs::read(path).expect("read a generated snapshot");
    serde_json::from_slice(&bytes).expect("a generated snapshot is JSON")
}

/// A workspace of edge cases: omitted and `null` attributes, a record without
/// attributes, records of unknown companies, tied instants, meetings with and
/// without notes, attendees without names, segments without optional fields.
pub(super) fn edge_snapshot() -> Value {
    let mut snap = snapshot(WS, &[KEY]);
    let full = uuid(FULL_COMPANY);
    add(
        &mut snap,
        "companies",
        [
            company(BARE_COMPANY, "Bare"),
            record(
                FULL_COMPANY,
                json!({
                    "domain": "zeta.example",
                    "name": "Zeta \"Full\" Ltd",
                    "logo_url": "https://zeta.example/logo.png",
                    "headline": "Everything set",
                    "description": "Line one\nline two \u{2014} \u{e9}t\u{e9}",
                    "professional_network": "https://network.example/zeta",
                    "x": null,
                    "careers_url": "https://zeta.example/careers",
                    "domain_aliases": ["zeta.io", "zeta.dev"],
                    "priority": "high",
                    "labels": ["fintech", "seed"],
                    "value_propositions": [
                        { "problem": "Slow closes", "solution": null, "icp": "CFOs" },
                        {},
                    ],
                    "not_in_the_spec": "dropped",
                }),
            ),
            json!({ "id": uuid(EMPTY_COMPANY) }),
            record(
                NULL_COMPANY,
                json!({
                    "domain": null, "name": null, "logo_url": null, "headline": null,
                    "description": null, "professional_network": null, "x": null,
                    "careers_url": null, "domain_aliases": [], "priority": "low",
                    "labels": null, "value_propositions": [],
                }),
            ),
        ],
    );

    let mut tasks = vec![
        task(TASK, FULL_COMPANY, "2026-03-01T10:00:00Z"),
        record(
            TASK + 1,
            json!({
                "title": "Prepare the board deck",
                "description": "With \"quotes\", a \\ and a\ttab",
                "status": "triage",
                "priority": "low",
                "source": "manual",
                "company_id": full,
                "assignee_id": uuid(500),
                "due_date": "2026-04-01",
                "created_at": "2026-03-01T12:00:00+02:00",
                "updated_at": "2026-03-02T00:00:00.123456Z",
            }),
        ),
        with(
            task(TASK + 2, FULL_COMPANY, "2026-03-01T10:00:00.5Z"),
            json!({ "title": null, "status": null, "priority": null, "updated_at": null }),
        ),
        task(TASK + 3, LOST, "2026-02-01T00:00:00Z"),
    ];
    tasks.extend((4..14).map(|i| {
        with(
            task(
                TASK + i,
                FULL_COMPANY,
                &format!("2026-01-{i:02}T08:00:00-05:00"),
            ),
            json!({
                "status": if i % 2 == 0 { "done" } else { "triage" },
                "priority": if i % 3 == 0 { "high" } else { "low" },
            }),
        )
    }));
    add(&mut snap, "tasks", tasks);

    add(
        &mut snap,
        "roles",
        [
            role(ROLE, FULL_COMPANY, "2026-03-01T10:00:00Z"),
            record(
                ROLE + 1,
                json!({
                    "company_id": full, "name": "Staff Engineer",
                    "url": "https://zeta.example/careers/staff", "description": "Build it",
                    "domain": "engineering", "level": "ic",
                    "opened_at": "2026-03-01T12:00:00+02:00",
                }),
            ),
            role(ROLE + 2, LOST, "2026-01-01T00:00:00.000001Z"),
        ],
    );

    let mut feed = vec![
        record(
            FEED,
            json!({ "company_id": full, "published_at": "2026-04-01T00:00:00Z" }),
        ),
        record(
            FEED + 1,
            json!({
                "company_id": full,
                "type": "fundraise-announcement",
                "title": "Zeta raises a Series A",
                "content": "Details",
                "published_at": "2026-04-02T00:00:00.000+00:00",
                "private": true,
                "sources": [
                    {
                        "source": "professional_network",
                        "url": "https://network.example/post/1",
                        "title": "The announcement",
                        "published_at": "2026-04-02T00:00:00Z",
                    },
                    { "source": null, "url": null, "title": null, "published_at": null },
                    {},
                ],
            }),
        ),
        with(
            feed_entry(FEED + 2, LOST, "2026-04-03T00:00:00Z"),
            json!({ "sources": [], "private": null, "type": null }),
        ),
    ];
    feed.extend(instant_records(FEED + 10, |id, ts| {
        feed_entry(id, FULL_COMPANY, ts)
    }));
    add(&mut snap, "feed", feed);

    add(
        &mut snap,
        "notes",
        [
            note(NOTE, FULL_COMPANY, "2026-03-01T10:00:00Z"),
            record(
                NOTE + 1,
                json!({
                    "company_id": full, "title": "Call notes", "content": "Went well",
                    "source": "manual", "created_by": uuid(500),
                    "created_at": "2026-03-02T10:00:00-01:00",
                }),
            ),
            with(
                note(NOTE + 2, FULL_COMPANY, "2026-03-01T10:00:00Z"),
                json!({ "title": null, "content": null }),
            ),
            note(NOTE + 3, LOST, "2026-03-01T10:00:00Z"),
        ],
    );

    add(
        &mut snap,
        "metrics",
        [
            metric(
                METRIC,
                FULL_COMPANY,
                "Annualized Revenue",
                "2026-01-01T00:00:00Z",
            ),
            json!({
                "id": uuid(METRIC + 1),
                "company_id": full,
                "attributes": {
                    "name": "Annualized Revenue", "unit": "currency", "value_text": "$1.25M",
                    "value_numeric": 1_250_000.5, "value_currency": "USD",
                    "period_label": "Q1 2026", "period_start": "2026-01-01",
                    "period_end": "2026-03-31", "reported_at": "2026-04-05T16:02:54.063182-05:00",
                },
            }),
            with(
                metric(
                    METRIC + 2,
                    FULL_COMPANY,
                    "Custom KPI",
                    "2026-02-01T00:00:00Z",
                ),
                json!({ "unit": "number", "value_numeric": -12, "value_currency": null }),
            ),
            json!({
                "id": uuid(METRIC + 3),
                "company_id": full,
                "attributes": { "reported_at": "2026-02-01T00:00:00Z" },
            }),
            metric(METRIC + 4, LOST, "Headcount", "2026-02-01T00:00:00Z"),
        ],
    );

    let mut upper = meeting(UPPER_MEETING, LOST, "2026-03-03T10:00:00Z");
    upper["id"] = json!(uuid(UPPER_MEETING).to_uppercase());
    add(
        &mut snap,
        "meetings",
        [
            with(
                meeting(MEETING, FULL_COMPANY, "2026-03-01T10:00:00+01:00"),
                json!({
                    "end_time": "2026-03-01T11:00:00.000+01:00",
                    "attendees": [
                        { "email": "ann@example.com", "organizer": true, "name": "Ann" },
                        { "email": "bob+vc@example.co.uk", "organizer": false },
                        { "email": "carl@example.com", "organizer": false, "name": null },
                    ],
                }),
            ),
            with(
                meeting(QUIET_MEETING, FULL_COMPANY, "2026-03-02T10:00:00Z"),
                json!({ "attendees": [] }),
            ),
            upper,
        ],
    );
    add(
        &mut snap,
        "meeting_notes",
        [
            meeting_note(MEETING_NOTE, MEETING, "2026-03-01T10:00:00Z"),
            with(
                meeting_note(MEETING_NOTE + 1, MEETING, "2026-03-01T11:00:00+01:00"),
                json!({
                    "notes": null,
                    "synced_at": "2026-03-01T12:00:00.5+02:00",
                    "transcript": { "segments": [
                        { "text": "Hello", "speaker": "Ann", "startTime": 0.5, "endTime": 2.25 },
                        { "text": "Only text" },
                        { "text": "Some", "startTime": 3 },
                        { "text": "Who", "speaker": "Bob", "endTime": 4.75 },
                        { "text": "Nulls", "speaker": null, "startTime": null, "endTime": null },
                    ] },
                }),
            ),
            with(
                meeting_note(MEETING_NOTE + 2, MEETING, "2026-03-01T12:00:00Z"),
                json!({ "transcript": { "segments": [] } }),
            ),
            meeting_note(MEETING_NOTE + 3, LOST, "2026-03-01T10:00:00Z"),
            meeting_note(MEETING_NOTE + 4, UPPER_MEETING, "2026-03-01T10:00:00Z"),
        ],
    );
    snap
}
