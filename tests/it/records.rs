//! Record shapes: every served record is exactly `{ id, attributes }`, with
//! every listed attribute present (null when the snapshot omits it), no
//! unlisted attribute, timestamps exactly as written, the same record in every
//! view, and lists scoped to their company (docs/snapshot-format.md#collections).

use serde_json::{Value, json};

use crate::util::*;

const COMPANY_ATTRS: &[&str] = &[
    "domain",
    "name",
    "logo_url",
    "headline",
    "description",
    "professional_network",
    "x",
    "careers_url",
    "domain_aliases",
    "priority",
    "labels",
    "value_propositions",
];
const TASK_ATTRS: &[&str] = &[
    "title",
    "description",
    "status",
    "priority",
    "source",
    "company_id",
    "assignee_id",
    "due_date",
    "created_at",
    "updated_at",
];
const ROLE_ATTRS: &[&str] = &[
    "company_id",
    "name",
    "url",
    "description",
    "domain",
    "level",
    "opened_at",
];
const FEED_ATTRS: &[&str] = &[
    "company_id",
    "type",
    "title",
    "content",
    "published_at",
    "private",
    "sources",
];
const NOTE_ATTRS: &[&str] = &[
    "company_id",
    "title",
    "content",
    "source",
    "created_by",
    "created_at",
];
const METRIC_ATTRS: &[&str] = &[
    "name",
    "unit",
    "value_text",
    "value_numeric",
    "value_currency",
    "period_label",
    "period_start",
    "period_end",
    "reported_at",
];

/// The company every record of these tests belongs to.
const COMPANY: u64 = 1;
/// The meeting the meeting note belongs to.
const MEETING: u64 = 70;

/// Returns the snapshot collections and records with every attribute set,
/// timestamps written with offsets and fractions.
fn full_records() -> Vec<(&'static str, Value)> {
    let c = uuid(COMPANY);
    vec![
        (
            "companies",
            record(
                COMPANY,
                json!({
                    "domain": "acme.example",
                    "name": "Acme",
                    "logo_url": "https://acme.example/logo.png",
                    "headline": "Rockets for everyone",
                    "description": "Builds rockets.",
                    "professional_network": "https://network.example/company/acme",
                    "x": "https://posts.example/acme",
                    "careers_url": "https://acme.example/careers",
                    "domain_aliases": ["acme.test", "acme.invalid"],
                    "priority": "high",
                    "labels": ["space", "b2b"],
                    "value_propositions": [ { "problem": "Slow launches", "solution": "Fast rockets", "icp": "Satellite makers" } ],
                }),
            ),
        ),
        (
            "tasks",
            record(
                20,
                json!({
                    "title": "Follow up",
                    "description": "Ask for the deck",
                    "status": "triage",
                    "priority": "low",
                    "source": "manual",
                    "company_id": c,
                    "assignee_id": "user-7",
                    "due_date": "2026-04-01",
                    "created_at": "2026-03-01T12:00:00.123+02:00",
                    "updated_at": "2026-03-02T00:00:00-05:30",
                }),
            ),
        ),
        (
            "roles",
            record(
                30,
                json!({
                    "company_id": c,
                    "name": "Staff Engineer",
                    "url": "https://acme.example/careers/staff",
                    "description": "Own the engine",
                    "domain": "engineering",
                    "level": "ic",
                    "opened_at": "2026-03-01T10:00:00.123456Z",
                }),
            ),
        ),
        (
            "feed",
            record(
                40,
                json!({
                    "company_id": c,
                    "type": "fundraise-announcement",
                    "title": "Series A",
                    "content": "Acme raised.",
                    "published_at": "2026-03-01T12:00:00+02:00",
                    "private": true,
                    "sources": [ {
                        "source": "professional_network",
                        "url": "https://network.example/post/1",
                        "title": "We raised",
                        "published_at": "2026-02-28T09:00:00.000+01:00",
                    } ],
                }),
            ),
        ),
        (
            "notes",
            record(
                50,
                json!({
                    "company_id": c,
                    "title": "Call",
                    "content": "Good call.",
                    "source": "manual",
                    "created_by": "user-1",
                    "created_at": "2026-03-01T10:00:00.5-01:00",
                }),
            ),
        ),
        (
            "metrics",
            json!({
                "id": uuid(60),
                "company_id": c,
                "attributes": {
                    "name": "Annualized Revenue",
                    "unit": "number",
                    "value_text": "$1.25M",
                    "value_numeric": 1250000.5,
                    "value_currency": "USD",
                    "period_label": "Q1 2026",
                    "period_start": "2026-01-01",
                    "period_end": "2026-03-31",
                    "reported_at": "2026-04-01T09:00:00.000+09:00",
                },
            }),
        ),
        (
            "meetings",
            record(
                MEETING,
                json!({
                    "company_id": c,
                    "title": "Board meeting",
                    "start_time": "2026-03-01T10:00:00+01:00",
                    "end_time": "2026-03-01T11:30:00.000+01:00",
                    "attendees": [
                        { "email": "ann@example.com", "organizer": true, "name": "Ann" },
                        { "email": "bob@example.com", "organizer": false },
                    ],
                    "created_at": "2026-02-20T08:00:00Z",
                    "updated_at": "2026-02-21T08:00:00.000000Z",
                }),
            ),
        ),
        (
            "meeting_notes",
            record(
                80,
                json!({
                    "meeting_id": uuid(MEETING),
                    "type": "notetool",
                    "notes": "Discussed the plan.",
                    "transcript": { "segments": [
                        { "text": "Hello", "speaker": "Ann", "startTime": 0.5, "endTime": 2.25 },
                        { "text": "Hi" },
                    ] },
                    "synced_at": "2026-03-01T12:00:00.000Z",
                    "created_at": "2026-03-01T11:45:00+01:00",
                    "updated_at": "2026-03-01T11:46:00+01:00",
                }),
            ),
        ),
    ]
}

/// Fetches the record `id` of the snapshot collection `collection` through
/// its own endpoint, or finds it in the list that serves it.
async fn served(server: &TestServer, collection: &str, id: &str) -> Value {
    let c = uuid(COMPANY);
    let find = |list: Value, context: String| -> Value {
        list.as_array()
            .unwrap_or_else(|| panic!("{context}: not an array: {list}"))
            .iter()
            .find(|r| r["id"] == json!(id))
            .unwrap_or_else(|| panic!("{context}: no record {id} in {list}"))
            .clone()
    };
    match collection {
        "companies" => server.get_ok(&format!("/portfolio/{id}"), KEY).await["data"].clone(),
        "tasks" => server.get_ok(&format!("/tasks/{id}"), KEY).await["data"].clone(),
        "notes" => server.get_ok(&format!("/notes/{id}"), KEY).await["data"].clone(),
        "roles" => find(
            server.get_ok("/roles", KEY).await["data"].clone(),
            "/roles".into(),
        ),
        "feed" => find(
            server.get_ok("/feed?limit=50", KEY).await["data"].clone(),
            "/feed".into(),
        ),
        "metrics" => find(
            server.get_ok(&format!("/portfolio/{c}/metrics"), KEY).await["data"].clone(),
            "metrics".into(),
        ),
        "meetings" => server.get_ok(&format!("/meetings/{id}"), KEY).await["data"].clone(),
        "meeting_notes" => find(
            server
                .get_ok(&format!("/meetings/{}?include=notes", uuid(MEETING)), KEY)
                .await["data"]["notes"]
                .clone(),
            "meeting notes".into(),
        ),
        other => panic!("unknown collection {other}"),
    }
}

/// Serves `records` and fails listing every record not served as `expected`.
async fn check(records: Vec<(&'static str, Value, Value)>) {
    let mut snap = snapshot("ws-records", &[KEY]);
    for (collection, rec, _) in &records {
        add(&mut snap, collection, [rec.clone()]);
    }
    let server = TestServer::start(&[("records.json", snap)]).await;
    let mut failures = Vec::new();
    for (collection, rec, expected) in &records {
        let id = rec["id"].as_str().expect("id");
        let got = served(&server, collection, id).await;
        if got != *expected {
            failures.push(format!(
                "{collection} {id}:\n  served   {got}\n  expected {expected}"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Returns `{ id, attributes }` with every one of `listed` set to null except those in `given`.
fn nulls_except(id: u64, listed: &[&str], given: Value) -> Value {
    let mut attributes = serde_json::Map::new();
    for name in listed {
        attributes.insert(
            name.to_string(),
            given.get(*name).cloned().unwrap_or(Value::Null),
        );
    }
    json!({ "id": uuid(id), "attributes": attributes })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_records_are_served_exactly_as_written() {
    let cases = full_records()
        .into_iter()
        .map(|(collection, rec)| {
            let mut expected = rec.clone();
            // The metric's company_id is not served.
            expected
                .as_object_mut()
                .expect("object")
                .remove("company_id");
            (collection, rec, expected)
        })
        .collect();
    check(cases).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn omitted_attributes_are_served_as_null() {
    let c = uuid(COMPANY);
    let mut cases = vec![
        (
            "companies",
            record(COMPANY, json!({ "x": "https://posts.example/acme" })),
            nulls_except(
                COMPANY,
                COMPANY_ATTRS,
                json!({ "x": "https://posts.example/acme" }),
            ),
        ),
        (
            "tasks",
            task(20, COMPANY, "2026-03-01T10:00:00Z"),
            nulls_except(
                20,
                TASK_ATTRS,
                json!({ "company_id": c, "created_at": "2026-03-01T10:00:00Z" }),
            ),
        ),
        (
            "roles",
            role(30, COMPANY, "2026-03-01T10:00:00Z"),
            nulls_except(
                30,
                ROLE_ATTRS,
                json!({ "company_id": c, "opened_at": "2026-03-01T10:00:00Z" }),
            ),
        ),
        (
            "feed",
            record(
                40,
                json!({ "company_id": c, "published_at": "2026-03-01T10:00:00Z" }),
            ),
            nulls_except(
                40,
                FEED_ATTRS,
                json!({ "company_id": c, "published_at": "2026-03-01T10:00:00Z" }),
            ),
        ),
        (
            "notes",
            note(50, COMPANY, "2026-03-01T10:00:00Z"),
            nulls_except(
                50,
                NOTE_ATTRS,
                json!({ "company_id": c, "created_at": "2026-03-01T10:00:00Z" }),
            ),
        ),
        (
            "metrics",
            json!({ "id": uuid(60), "company_id": c, "attributes": { "reported_at": "2026-03-01T10:00:00Z" } }),
            nulls_except(
                60,
                METRIC_ATTRS,
                json!({ "reported_at": "2026-03-01T10:00:00Z" }),
            ),
        ),
    ];
    // Explicit nulls are accepted on non-meeting records and served as null.
    cases.push((
        "tasks",
        with(
            task(21, COMPANY, "2026-03-01T10:00:00Z"),
            json!({ "title": null, "status": null }),
        ),
        nulls_except(
            21,
            TASK_ATTRS,
            json!({ "company_id": c, "created_at": "2026-03-01T10:00:00Z" }),
        ),
    ));
    check(cases).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unlisted_attributes_are_not_served() {
    let c = uuid(COMPANY);
    let extra = json!({ "internal_score": 5, "secret": "do not serve", "id": "attr-id" });
    let cases = vec![
        (
            "companies",
            with(
                with(record(COMPANY, json!({ "name": "Acme" })), extra.clone()),
                json!({ "company_id": c, "workspace_id": "ws" }),
            ),
            nulls_except(COMPANY, COMPANY_ATTRS, json!({ "name": "Acme" })),
        ),
        (
            "tasks",
            with(task(20, COMPANY, "2026-03-01T10:00:00Z"), extra.clone()),
            nulls_except(
                20,
                TASK_ATTRS,
                json!({ "company_id": c, "created_at": "2026-03-01T10:00:00Z" }),
            ),
        ),
        (
            "roles",
            with(role(30, COMPANY, "2026-03-01T10:00:00Z"), extra.clone()),
            nulls_except(
                30,
                ROLE_ATTRS,
                json!({ "company_id": c, "opened_at": "2026-03-01T10:00:00Z" }),
            ),
        ),
        (
            "feed",
            with(
                feed_entry(40, COMPANY, "2026-03-01T10:00:00Z"),
                extra.clone(),
            ),
            nulls_except(
                40,
                FEED_ATTRS,
                json!({ "company_id": c, "published_at": "2026-03-01T10:00:00Z", "type": "product-update", "private": false }),
            ),
        ),
        (
            "notes",
            with(note(50, COMPANY, "2026-03-01T10:00:00Z"), extra.clone()),
            nulls_except(
                50,
                NOTE_ATTRS,
                json!({ "company_id": c, "created_at": "2026-03-01T10:00:00Z" }),
            ),
        ),
        (
            "metrics",
            with(
                with(
                    metric(60, COMPANY, "Burn", "2026-03-01T10:00:00Z"),
                    extra.clone(),
                ),
                json!({ "company_id": c }),
            ),
            nulls_except(
                60,
                METRIC_ATTRS,
                json!({ "name": "Burn", "reported_at": "2026-03-01T10:00:00Z" }),
            ),
        ),
    ];
    check(cases).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn envelopes_have_exactly_their_keys() {
    let ids = Fixture::ids(0);
    let server = TestServer::start(&[("records.json", fixture("ws-records", &[KEY], 0))]).await;
    let c = &ids.company;
    let offset_lists = [
        "/portfolio".to_string(),
        "/tasks".into(),
        format!("/portfolio/{c}/tasks"),
        format!("/portfolio/{c}/notes"),
    ];
    let plain_lists = [
        "/roles".to_string(),
        format!("/portfolio/{c}/roles"),
        format!("/portfolio/{c}/metrics"),
    ];
    let singles = [
        format!("/portfolio/{c}"),
        format!("/tasks/{}", ids.task),
        format!("/notes/{}", ids.note),
        format!("/meetings/{}", ids.meeting),
    ];
    for path in &offset_lists {
        let body = server.get_ok(path, KEY).await;
        assert_keys(&body, &["data", "pagination"], path);
        assert_keys(&body["pagination"], &["limit", "offset", "hasMore"], path);
        assert_eq!(
            body["data"].as_array().map(Vec::len),
            Some(1),
            "{path}: {body}"
        );
        assert_keys(&body["data"][0], &["id", "attributes"], path);
    }
    for path in &plain_lists {
        let body = server.get_ok(path, KEY).await;
        assert_keys(&body, &["data"], path);
        assert_eq!(
            body["data"].as_array().map(Vec::len),
            Some(1),
            "{path}: {body}"
        );
        assert_keys(&body["data"][0], &["id", "attributes"], path);
    }
    for path in &singles {
        let body = server.get_ok(path, KEY).await;
        assert_keys(&body, &["data"], path);
        assert_keys(&body["data"], &["id", "attributes"], path);
    }
    let feed = server.get_ok("/feed", KEY).await;
    assert_keys(&feed, &["data", "pagination"], "/feed");
    assert_keys(&feed["pagination"], &["limit", "nextCursor"], "/feed");
    assert_keys(&feed["data"][0], &["id", "attributes"], "/feed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_is_the_same_in_every_view() {
    let mut snap = snapshot("ws-records", &[KEY]);
    for (collection, rec) in full_records() {
        add(&mut snap, collection, [rec]);
    }
    let server = TestServer::start(&[("records.json", snap)]).await;
    let c = uuid(COMPANY);
    // Each case is a list path and the single-record path of the record it holds.
    let cases = [
        ("/portfolio".to_string(), format!("/portfolio/{c}")),
        ("/tasks".to_string(), format!("/tasks/{}", uuid(20))),
        (
            format!("/portfolio/{c}/tasks"),
            format!("/tasks/{}", uuid(20)),
        ),
        (
            format!("/portfolio/{c}/notes"),
            format!("/notes/{}", uuid(50)),
        ),
    ];
    for (list, single) in &cases {
        let listed = server.get_ok(list, KEY).await["data"][0].clone();
        let alone = server.get_ok(single, KEY).await["data"].clone();
        assert_eq!(listed, alone, "{list} and {single} serve different records");
    }
    let all_roles = server.get_ok("/roles", KEY).await["data"].clone();
    let company_roles = server.get_ok(&format!("/portfolio/{c}/roles"), KEY).await["data"].clone();
    assert_eq!(
        all_roles, company_roles,
        "/roles and the company's roles differ"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn company_lists_hold_only_that_companys_records() {
    let mut snap = snapshot("ws-records", &[KEY]);
    add(
        &mut snap,
        "companies",
        [company(1, "A"), company(2, "B"), company(3, "Empty")],
    );
    add(
        &mut snap,
        "tasks",
        [
            task(10, 1, "2026-03-01T10:00:00Z"),
            task(11, 2, "2026-03-01T11:00:00Z"),
            task(12, 999, "2026-03-01T12:00:00Z"),
        ],
    );
    add(
        &mut snap,
        "notes",
        [
            note(20, 2, "2026-03-01T10:00:00Z"),
            note(21, 1, "2026-03-01T11:00:00Z"),
        ],
    );
    add(
        &mut snap,
        "roles",
        [
            role(30, 1, "2026-03-01T10:00:00Z"),
            role(31, 2, "2026-03-01T11:00:00Z"),
            role(32, 999, "2026-03-01T12:00:00Z"),
        ],
    );
    add(
        &mut snap,
        "metrics",
        [
            metric(40, 1, "Burn", "2026-03-01T10:00:00Z"),
            metric(41, 2, "Burn", "2026-03-01T11:00:00Z"),
        ],
    );
    let server = TestServer::start(&[("records.json", snap)]).await;
    let (a, b, empty) = (uuid(1), uuid(2), uuid(3));
    let cases: Vec<(String, Vec<String>)> = vec![
        (format!("/portfolio/{a}/tasks"), vec![uuid(10)]),
        (format!("/portfolio/{b}/tasks"), vec![uuid(11)]),
        (format!("/portfolio/{a}/notes"), vec![uuid(21)]),
        (format!("/portfolio/{b}/notes"), vec![uuid(20)]),
        (format!("/portfolio/{a}/roles"), vec![uuid(30)]),
        (format!("/portfolio/{b}/roles"), vec![uuid(31)]),
        (format!("/portfolio/{a}/metrics"), vec![uuid(40)]),
        (format!("/portfolio/{b}/metrics"), vec![uuid(41)]),
        (format!("/portfolio/{empty}/tasks"), vec![]),
        (format!("/portfolio/{empty}/notes"), vec![]),
        (format!("/portfolio/{empty}/roles"), vec![]),
        (format!("/portfolio/{empty}/metrics"), vec![]),
        // The workspace-wide lists hold every record, those of unknown companies too.
        ("/tasks".to_string(), vec![uuid(12), uuid(11), uuid(10)]),
        ("/roles".to_string(), vec![uuid(32), uuid(31), uuid(30)]),
    ];
    let mut failures = Vec::new();
    for (path, want) in &cases {
        let resp = server.get(path, Some(KEY)).await;
        if resp.status != 200 || resp.ids() != *want {
            failures.push(format!(
                "{path}: status {}, body {}, expected ids {want:?}",
                resp.status,
                resp.text()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    let empty_page = server
        .get_ok(&format!("/portfolio/{empty}/tasks"), KEY)
        .await;
    assert_eq!(
        empty_page["pagination"],
        json!({ "limit": 50, "offset": 0, "hasMore": false })
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unpaginated_lists_hold_every_record() {
    let mut snap = snapshot("ws-records", &[KEY]);
    add(&mut snap, "companies", [company(1, "A")]);
    add(
        &mut snap,
        "roles",
        (0..130).map(|i| role(1000 + i, 1, "2026-03-01T10:00:00Z")),
    );
    add(
        &mut snap,
        "metrics",
        (0..130).map(|i| {
            metric(
                2000 + i,
                1,
                &format!("Metric {i:03}"),
                "2026-03-01T10:00:00Z",
            )
        }),
    );
    let server = TestServer::start(&[("records.json", snap)]).await;
    let c = uuid(1);
    for (path, count) in [
        ("/roles".to_string(), 130),
        (format!("/portfolio/{c}/roles"), 130),
        (format!("/portfolio/{c}/metrics"), 130),
    ] {
        let body = server.get_ok(&path, KEY).await;
        assert_eq!(body["data"].as_array().map(Vec::len), Some(count), "{path}");
        assert!(
            body.get("pagination").is_none(),
            "{path} has a pagination object"
        );
    }
}
