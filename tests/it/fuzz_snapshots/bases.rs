//! The valid snapshots every mutation starts from: the generator's small
//! `acme.json` (seed 42) and a small hand-made snapshot holding every
//! attribute of every kind.

use std::sync::OnceLock;

use portfolio_generate::{Scale, generate};
use serde_json::{Value, json};

use crate::util::*;

/// The generator's `acme.json` (small scale, seed 42), generated once.
pub(super) fn generated_base() -> &'static [u8] {
    static BASE: OnceLock<Vec<u8>> = OnceLock::new();
    BASE.get_or_init(|| {
        let dir = tempdir();
        let files = generate(dir.path(), Scale::Small, 42).expect("generate the small snapshots");
        let acme = files
            .iter()
            .find(|f| f.path.file_name().is_some_and(|n| n == "acme.json"))
            .expect("the generator writes acme.json");
        std::fs::read(&acme.path).expect("read acme.json")
    })
}

/// A small snapshot holding every attribute of every kind of record.
pub(super) fn small_base() -> Value {
    let mut snap = fixture("ws-fuzz", &[KEY], 0);
    add(
        &mut snap,
        "companies",
        [record(
            11,
            json!({
                "domain": "acme.example", "name": "Ácme \"Labs\"", "logo_url": "https://acme.example/l.png",
                "headline": "h", "description": "line\nbreak\ttab \\ é", "professional_network": "https://pn/acme",
                "x": "https://x/acme", "careers_url": "https://acme.example/jobs",
                "domain_aliases": ["acme.io", "acme.dev"], "priority": "high", "labels": ["seed", "ai"],
                "value_propositions": [{ "problem": "p", "solution": "s", "icp": "i" }],
                "not_in_the_spec": { "kept": false },
            }),
        )],
    );
    add(
        &mut snap,
        "tasks",
        [with(
            task(12, 11, "2026-03-01T12:00:00.123+02:00"),
            json!({
                "title": "Call", "description": "d", "status": "triage", "priority": "low",
                "source": "manual", "assignee_id": "u-1", "due_date": "2026-04-01",
                "updated_at": "2026-03-02T00:00:00Z",
            }),
        )],
    );
    add(
        &mut snap,
        "roles",
        [with(
            role(17, 11, "2026-03-01T09:00:00-05:30"),
            json!({ "name": "Engineer", "url": "https://acme.example/jobs/1", "description": "d",
                    "domain": "engineering", "level": "ic" }),
        )],
    );
    add(
        &mut snap,
        "feed",
        [with(
            feed_entry(13, 11, "2026-03-01T10:00:00.5Z"),
            json!({
                "title": "Raised", "content": "c", "type": "fundraise-announcement", "private": true,
                "sources": [{ "source": "professional_network", "url": "https://pn/p/1", "title": "t",
                              "published_at": "2026-03-01T10:00:00Z" }],
            }),
        )],
    );
    add(
        &mut snap,
        "notes",
        [with(
            note(18, 11, "2026-03-01T08:00:00Z"),
            json!({ "title": "t", "content": "c", "source": "email", "created_by": "u-2" }),
        )],
    );
    let mut value = metric(14, 11, "Annualized Revenue", "2026-03-01T10:00:00Z");
    value["attributes"]
        .as_object_mut()
        .expect("attributes")
        .extend(
            json!({
                "unit": "number", "value_text": "$1.2M", "value_numeric": 1200000,
                "value_currency": "USD", "period_label": "Q1", "period_start": "2026-01-01",
                "period_end": "2026-03-31",
            })
            .as_object()
            .expect("an object")
            .clone(),
        );
    add(&mut snap, "metrics", [value]);
    let mut meeting_value = meeting(16, 11, "2026-03-01T15:00:00+01:00");
    meeting_value["attributes"]["end_time"] = json!("2026-03-01T16:00:00+01:00");
    meeting_value["attributes"]["attendees"] = json!([
        { "email": "ceo@acme.example", "organizer": true, "name": "Ann" },
        { "email": "vc@fund.example", "organizer": false },
    ]);
    add(&mut snap, "meetings", [meeting_value]);
    let mut note_value = meeting_note(15, 16, "2026-03-01T17:00:00Z");
    note_value["attributes"]["transcript"] = json!({ "segments": [
        { "text": "Hello", "speaker": "Ann", "startTime": 1.5, "endTime": 3 },
        { "text": "Hi" },
    ]});
    note_value["attributes"]["synced_at"] = json!("2026-03-01T17:05:00Z");
    add(&mut snap, "meeting_notes", [note_value]);
    snap
}

pub(super) fn small_base_bytes() -> Vec<u8> {
    serde_json::to_vec_pretty(&small_base()).expect("serialize")
}
