//! Meetings: exact attributes, `include=notes` with the meeting's notes oldest
//! first (ties by id ascending), no `notes` key without it, the only allowed
//! `include` value, and the optional attendee and segment fields left out when
//! absent (docs/api.md#meeting).

use serde_json::{Value, json};

use crate::util::*;

const WS: &str = "ws-meetings";
const COMPANY: u64 = 1;
const MEETING: u64 = 10;
const OTHER_MEETING: u64 = 11;
const LONELY_MEETING: u64 = 12;
const NOTES: u64 = 100;

const MEETING_ATTRS: &[&str] = &[
    "company_id",
    "title",
    "start_time",
    "end_time",
    "attendees",
    "created_at",
    "updated_at",
];
const NOTE_ATTRS: &[&str] = &[
    "meeting_id",
    "type",
    "notes",
    "transcript",
    "synced_at",
    "created_at",
    "updated_at",
];

fn meetings_snapshot() -> Value {
    let mut snap = snapshot(WS, &[KEY]);
    add(&mut snap, "companies", [company(COMPANY, "Acme")]);
    add(
        &mut snap,
        "meetings",
        [
            with(
                meeting(MEETING, COMPANY, "2026-03-01T10:00:00+01:00"),
                json!({
                    "end_time": "2026-03-01T11:00:00.000+01:00",
                    "attendees": [
                        { "email": "ann@example.com", "organizer": true, "name": "Ann" },
                        { "email": "bob@example.com", "organizer": false },
                    ],
                }),
            ),
            meeting(OTHER_MEETING, COMPANY, "2026-03-02T10:00:00Z"),
            meeting(LONELY_MEETING, 999, "2026-03-03T10:00:00Z"),
        ],
    );
    let mut notes = instant_records(NOTES, |id, ts| meeting_note(id, MEETING, ts));
    notes.insert(3, meeting_note(50, OTHER_MEETING, "2026-03-01T10:00:00Z"));
    notes.push(meeting_note(60, 999, "2026-03-01T10:00:00Z"));
    notes.push(with(
        meeting_note(70, OTHER_MEETING, "2026-03-01T11:00:00Z"),
        json!({
            "notes": null,
            "synced_at": "2026-03-01T12:00:00.5+02:00",
            "transcript": { "segments": [
                { "text": "Hello", "speaker": "Ann", "startTime": 0.5, "endTime": 2.25 },
                { "text": "Only text" },
                { "text": "Some", "startTime": 3.5 },
            ] },
        }),
    ));
    add(&mut snap, "meeting_notes", notes);
    snap
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn include_notes_attaches_the_meetings_notes_oldest_first() {
    let server = TestServer::start(&[("meetings.json", meetings_snapshot())]).await;
    let body = server
        .get_ok(&format!("/meetings/{}?include=notes", uuid(MEETING)), KEY)
        .await;
    assert_keys(&body, &["data"], "include=notes");
    assert_keys(
        &body["data"],
        &["id", "attributes", "notes"],
        "include=notes",
    );
    let notes = body["data"]["notes"].as_array().expect("notes is an array");
    let ids: Vec<&str> = notes
        .iter()
        .map(|n| n["id"].as_str().expect("a string id"))
        .collect();
    assert_eq!(
        ids,
        instant_ids_oldest_first(NOTES),
        "notes of the meeting, oldest first, ties by id ascending"
    );
    for n in notes {
        assert_keys(n, &["id", "attributes"], "a meeting note");
        assert_keys(&n["attributes"], NOTE_ATTRS, "a meeting note's attributes");
        assert_eq!(n["attributes"]["meeting_id"], json!(uuid(MEETING)));
    }
    let other = server
        .get_ok(
            &format!("/meetings/{}?include=notes", uuid(OTHER_MEETING)),
            KEY,
        )
        .await;
    let other_ids: Vec<Value> = other["data"]["notes"]
        .as_array()
        .expect("notes")
        .iter()
        .map(|n| n["id"].clone())
        .collect();
    assert_eq!(other_ids, vec![json!(uuid(50)), json!(uuid(70))]);
    let lonely = server
        .get_ok(
            &format!("/meetings/{}?include=notes", uuid(LONELY_MEETING)),
            KEY,
        )
        .await;
    assert_eq!(
        lonely["data"]["notes"],
        json!([]),
        "a meeting without notes has an empty notes array"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_include_there_is_no_notes_key() {
    let server = TestServer::start(&[("meetings.json", meetings_snapshot())]).await;
    for id in [MEETING, OTHER_MEETING, LONELY_MEETING] {
        let body = server.get_ok(&format!("/meetings/{}", uuid(id)), KEY).await;
        assert_keys(&body, &["data"], "a meeting");
        assert_keys(
            &body["data"],
            &["id", "attributes"],
            "a meeting without include",
        );
        assert_keys(
            &body["data"]["attributes"],
            MEETING_ATTRS,
            "a meeting's attributes",
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn include_accepts_only_notes() {
    let server = TestServer::start(&[("meetings.json", meetings_snapshot())]).await;
    let m = uuid(MEETING);
    let cases: Vec<(String, u16)> = [
        ("notes", 200),
        ("%6Eotes", 200),
        ("other", 400),
        ("", 400),
        ("Notes", 400),
        ("NOTES", 400),
        ("notes,other", 400),
        ("notes%20", 400),
        ("attendees", 400),
    ]
    .into_iter()
    .map(|(v, s)| (format!("/meetings/{m}?include={v}"), s))
    .collect();
    server.check_statuses(Some(KEY), &cases).await;
    server
        .check_statuses(Some(KEY), &[(format!("/meetings/{m}?include"), 400)])
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn meetings_and_notes_are_served_as_written_with_optional_fields_left_out() {
    let server = TestServer::start(&[("meetings.json", meetings_snapshot())]).await;
    let meeting = server
        .get_ok(&format!("/meetings/{}", uuid(MEETING)), KEY)
        .await["data"]
        .clone();
    assert_eq!(
        meeting,
        json!({
            "id": uuid(MEETING),
            "attributes": {
                "company_id": uuid(COMPANY),
                "title": format!("Meeting {MEETING}"),
                "start_time": "2026-03-01T10:00:00+01:00",
                "end_time": "2026-03-01T11:00:00.000+01:00",
                "attendees": [
                    { "email": "ann@example.com", "organizer": true, "name": "Ann" },
                    { "email": "bob@example.com", "organizer": false },
                ],
                "created_at": "2026-01-01T00:00:00Z",
                "updated_at": "2026-01-02T00:00:00Z",
            },
        })
    );
    let other = server
        .get_ok(
            &format!("/meetings/{}?include=notes", uuid(OTHER_MEETING)),
            KEY,
        )
        .await["data"]
        .clone();
    assert_eq!(
        other["attributes"]["end_time"],
        json!(null),
        "a null end_time is served as null"
    );
    assert_eq!(
        other["notes"][1],
        json!({
            "id": uuid(70),
            "attributes": {
                "meeting_id": uuid(OTHER_MEETING),
                "type": "notetool",
                "notes": null,
                "transcript": { "segments": [
                    { "text": "Hello", "speaker": "Ann", "startTime": 0.5, "endTime": 2.25 },
                    { "text": "Only text" },
                    { "text": "Some", "startTime": 3.5 },
                ] },
                "synced_at": "2026-03-01T12:00:00.5+02:00",
                "created_at": "2026-03-01T11:00:00Z",
                "updated_at": "2026-01-02T00:00:00Z",
            },
        })
    );
    assert_eq!(other["notes"][0]["attributes"]["transcript"], json!(null));
    assert_eq!(other["notes"][0]["attributes"]["synced_at"], json!(null));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_meeting_of_an_unknown_company_is_still_served() {
    let server = TestServer::start(&[("meetings.json", meetings_snapshot())]).await;
    let body = server
        .get_ok(&format!("/meetings/{}", uuid(LONELY_MEETING)), KEY)
        .await;
    assert_eq!(body["data"]["attributes"]["company_id"], json!(uuid(999)));
}
