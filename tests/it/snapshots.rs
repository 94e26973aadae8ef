//! Snapshot files: every rejection reason of docs/snapshot-format.md#validation, seen through
//! `portfolio-replica check` (exit 1, a message naming the file, collection,
//! record id and field) and through the server (the file's workspace is not
//! served at all, and `/snapshots` reports why); what must be accepted
//! (nulls, dangling references as warnings, gzip, odd but valid ids); ignored
//! file names; two files naming one workspace; a rejected replacement keeping
//! the previous version.

use std::time::Duration;

use serde_json::{Value, json};

use crate::util::*;

/// One snapshot file and the words its error message must contain.
struct Case {
    file: String,
    key: String,
    bytes: Vec<u8>,
    mentions: Vec<String>,
}

/// Returns the fixture of the case `name`, changed by `change`, which returns
/// the words the error must mention besides the file name.
fn mutated(name: &str, change: impl FnOnce(&mut Value) -> Vec<String>) -> Case {
    let key = format!("cura_{name}");
    let mut snap = fixture(&format!("ws-{name}"), &[&key], 0);
    let mentions = change(&mut snap);
    Case {
        file: format!("{name}.json"),
        key,
        bytes: serde_json::to_vec_pretty(&snap).expect("serialize"),
        mentions,
    }
}

/// Returns a case whose file holds `bytes` exactly.
fn raw_case(name: &str, file: &str, bytes: Vec<u8>) -> Case {
    Case {
        file: file.to_string(),
        key: format!("cura_{name}"),
        bytes,
        mentions: vec![],
    }
}

/// Returns the attributes of the first record of `collection`.
fn attrs<'a>(snap: &'a mut Value, collection: &str) -> &'a mut serde_json::Map<String, Value> {
    snap[collection][0]["attributes"]
        .as_object_mut()
        .expect("attributes")
}

/// Returns the words naming the first record of `collection` and its `field`.
fn names(snap: &Value, collection: &str, field: &str) -> Vec<String> {
    vec![
        collection.to_string(),
        snap[collection][0]["id"].as_str().expect("id").to_string(),
        field.to_string(),
    ]
}

/// Sets (or, with `None`, removes) `field` of the first record of `collection`.
fn set(snap: &mut Value, collection: &str, field: &str, value: Option<Value>) -> Vec<String> {
    let words = names(snap, collection, field);
    match value {
        Some(v) => attrs(snap, collection).insert(field.to_string(), v),
        None => attrs(snap, collection).remove(field),
    };
    words
}

/// Every snapshot that must be rejected.
fn rejected_cases() -> Vec<Case> {
    let s = |v: &[&str]| v.iter().map(|w| w.to_string()).collect::<Vec<_>>();
    let valid =
        serde_json::to_vec(&fixture("ws-truncated", &["cura_truncated"], 0)).expect("serialize");
    let mut cases = vec![
        raw_case(
            "invalid",
            "invalid.json",
            br#"{"format_version": 1,,}"#.to_vec(),
        ),
        raw_case(
            "truncated",
            "truncated.json",
            valid[..valid.len() / 2].to_vec(),
        ),
        raw_case(
            "truncated_end",
            "truncated_end.json",
            valid[..valid.len() - 1].to_vec(),
        ),
        raw_case("empty", "empty.json", vec![]),
        raw_case("array", "array.json", b"[]".to_vec()),
        raw_case("gz_truncated", "gz_truncated.json.gz", {
            let gz = gzip(&valid);
            gz[..gz.len() / 2].to_vec()
        }),
        mutated("format_missing", |v| {
            v.as_object_mut().expect("object").remove("format_version");
            s(&["format_version"])
        }),
        mutated("format_2", |v| {
            v["format_version"] = json!(2);
            s(&["format_version"])
        }),
        mutated("format_string", |v| {
            v["format_version"] = json!("1");
            s(&["format_version"])
        }),
        mutated("tasks_object", |v| {
            v["tasks"] = json!({});
            s(&["tasks"])
        }),
        mutated("api_keys_string", |v| {
            v["api_keys"] = json!("x");
            s(&["api_keys"])
        }),
        mutated("workspace_id_number", |v| {
            v["workspace"]["id"] = json!(42);
            s(&["workspace"])
        }),
        mutated("company_name_number", |v| {
            set(v, "companies", "name", Some(json!(42)))
        }),
        mutated("company_labels_string", |v| {
            set(v, "companies", "labels", Some(json!("x")))
        }),
        mutated("feed_private_string", |v| {
            set(v, "feed", "private", Some(json!("yes")))
        }),
        mutated("task_title_array", |v| {
            set(v, "tasks", "title", Some(json!([])))
        }),
        mutated("metric_value_string", |v| {
            set(v, "metrics", "value_numeric", Some(json!("12")))
        }),
        mutated("task_attributes_array", |v| {
            let words = names(v, "tasks", "attributes");
            v["tasks"][0]["attributes"] = json!([]);
            words
        }),
        mutated("task_without_id", |v| {
            v["tasks"][0].as_object_mut().expect("object").remove("id");
            s(&["tasks", "id"])
        }),
        mutated("task_id_number", |v| {
            v["tasks"][0]["id"] = json!(5);
            s(&["tasks", "id"])
        }),
        mutated("task_id_not_uuid", |v| {
            v["tasks"][0]["id"] = json!("not-a-uuid");
            s(&["tasks", "not-a-uuid", "id"])
        }),
        mutated("note_id_version_0", |v| {
            v["notes"][0]["id"] = json!("00000000-0000-0000-8000-000000000001");
            s(&["notes", "00000000-0000-0000-8000-000000000001", "id"])
        }),
        mutated("company_id_upper_max", |v| {
            v["companies"][0]["id"] = json!("FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF");
            s(&["companies", "FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF", "id"])
        }),
        mutated("duplicate_task", |v| {
            add(v, "tasks", [task(2, 1, "2026-03-02T10:00:00Z")]);
            s(&["tasks", &uuid(2)])
        }),
        mutated("duplicate_meeting_note", |v| {
            add(
                v,
                "meeting_notes",
                [meeting_note(8, 7, "2026-03-02T10:00:00Z")],
            );
            s(&["meeting_notes", &uuid(8)])
        }),
    ];
    let ordering = [
        ("tasks", "created_at"),
        ("notes", "created_at"),
        ("feed", "published_at"),
        ("metrics", "reported_at"),
        ("roles", "opened_at"),
        ("meetings", "start_time"),
        ("meeting_notes", "created_at"),
    ];
    let bad_timestamps: [(&str, Option<Value>); 7] = [
        ("missing", None),
        ("null", Some(json!(null))),
        ("word", Some(json!("yesterday"))),
        ("no_offset", Some(json!("2026-03-01T10:00:00"))),
        ("bad_date", Some(json!("2026-02-30T10:00:00Z"))),
        ("date_only", Some(json!("2026-03-01"))),
        ("number", Some(json!(1772359200))),
    ];
    for (collection, field) in ordering {
        for (label, value) in &bad_timestamps {
            cases.push(mutated(&format!("{collection}_{field}_{label}"), |v| {
                set(v, collection, field, value.clone())
            }));
        }
    }
    for collection in ["tasks", "roles", "feed", "notes"] {
        cases.push(mutated(&format!("{collection}_company_missing"), |v| {
            set(v, collection, "company_id", None)
        }));
        cases.push(mutated(&format!("{collection}_company_null"), |v| {
            set(v, collection, "company_id", Some(json!(null)))
        }));
    }
    for field in [
        "company_id",
        "title",
        "end_time",
        "attendees",
        "created_at",
        "updated_at",
    ] {
        cases.push(mutated(&format!("meeting_{field}_missing"), |v| {
            set(v, "meetings", field, None)
        }));
    }
    for field in ["company_id", "title", "attendees"] {
        cases.push(mutated(&format!("meeting_{field}_null"), |v| {
            set(v, "meetings", field, Some(json!(null)))
        }));
    }
    let attendee_cases: [(&str, Value, &str); 4] = [
        (
            "attendee_without_email",
            json!([{ "organizer": true }]),
            "email",
        ),
        (
            "attendee_without_organizer",
            json!([{ "email": "a@example.com" }]),
            "organizer",
        ),
        (
            "attendee_organizer_string",
            json!([{ "email": "a@example.com", "organizer": "yes" }]),
            "organizer",
        ),
        ("attendees_string", json!("a@example.com"), "attendees"),
    ];
    for (name, attendees, field) in attendee_cases {
        cases.push(mutated(name, |v| {
            let mut words = names(v, "meetings", field);
            words[2] = field.to_string();
            attrs(v, "meetings").insert("attendees".into(), attendees);
            words
        }));
    }
    for field in [
        "meeting_id",
        "type",
        "notes",
        "transcript",
        "synced_at",
        "updated_at",
    ] {
        cases.push(mutated(&format!("meeting_note_{field}_missing"), |v| {
            set(v, "meeting_notes", field, None)
        }));
    }
    let note_cases: [(&str, &str, Value, &str); 6] = [
        ("meeting_note_type_other", "type", json!("other"), "type"),
        ("meeting_note_type_upper", "type", json!("NOTETOOL"), "type"),
        ("meeting_note_type_null", "type", json!(null), "type"),
        (
            "meeting_note_transcript_without_segments",
            "transcript",
            json!({}),
            "segments",
        ),
        (
            "meeting_note_segment_without_text",
            "transcript",
            json!({ "segments": [ { "speaker": "Ann" } ] }),
            "text",
        ),
        (
            "meeting_note_segments_string",
            "transcript",
            json!({ "segments": "hello" }),
            "segments",
        ),
    ];
    for (name, field, value, mention) in note_cases {
        cases.push(mutated(name, |v| {
            let mut words = set(v, "meeting_notes", field, Some(value));
            words[2] = mention.to_string();
            words
        }));
    }
    cases
}

/// Every snapshot that must be accepted, though it looks odd.
fn accepted_cases() -> Vec<Case> {
    vec![
        mutated("nulls", |v| {
            for (collection, field) in [
                ("companies", "priority"),
                ("companies", "labels"),
                ("tasks", "title"),
                ("tasks", "status"),
                ("roles", "name"),
                ("feed", "private"),
                ("feed", "type"),
                ("feed", "sources"),
                ("notes", "title"),
                ("metrics", "value_numeric"),
            ] {
                set(v, collection, field, Some(json!(null)));
            }
            vec![]
        }),
        mutated("shared_ids", |v| {
            v["notes"][0]["id"] = json!(uuid(2));
            v["meetings"][0]["id"] = json!(uuid(1));
            v["meeting_notes"][0]["attributes"]["meeting_id"] = json!(uuid(1));
            vec![]
        }),
        mutated("odd_ids", |v| {
            add(
                v,
                "companies",
                [json!({ "id": "ABCDEF01-2345-4678-89AB-CDEF01234567", "attributes": {} })],
            );
            add(v, "tasks", [task(0, 1, "2026-03-01T10:00:00Z")]);
            add(
                v,
                "notes",
                [
                    json!({ "id": "ffffffff-ffff-ffff-ffff-ffffffffffff", "attributes": { "company_id": uuid(1), "created_at": "2026-03-01T10:00:00Z" } }),
                ],
            );
            v["tasks"][1]["id"] = json!("00000000-0000-0000-0000-000000000000");
            vec![]
        }),
        mutated("timestamps", |v| {
            set(
                v,
                "tasks",
                "created_at",
                Some(json!("2026-03-01T10:00:00.123456789Z")),
            );
            set(
                v,
                "notes",
                "created_at",
                Some(json!("2026-03-01T10:00:00+05:30")),
            );
            set(
                v,
                "feed",
                "published_at",
                Some(json!("2026-03-01T10:00:00.1-00:30")),
            );
            set(
                v,
                "roles",
                "opened_at",
                Some(json!("2026-03-01T10:00:00.000000Z")),
            );
            vec![]
        }),
        mutated("bare", |v| {
            for collection in COLLECTIONS {
                v.as_object_mut().expect("object").remove(collection);
            }
            vec![]
        }),
        mutated("unversioned", |v| {
            v.as_object_mut().expect("object").remove("version");
            vec![]
        }),
    ]
}

/// Returns a snapshot whose records point at a company or meeting it does not hold.
fn dangling() -> Case {
    mutated("dangling", |v| {
        for collection in ["tasks", "roles", "feed", "notes", "meetings"] {
            set(v, collection, "company_id", Some(json!(uuid(999))));
        }
        v["metrics"][0]["company_id"] = json!(uuid(999));
        set(v, "meeting_notes", "meeting_id", Some(json!(uuid(998))));
        add(
            v,
            "meeting_notes",
            [meeting_note(9, 998, "2026-03-01T10:00:00Z")],
        );
        vec![]
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_rejects_every_invalid_snapshot_naming_file_record_and_field() {
    let dir = tempdir();
    let mut failures = Vec::new();
    let cases = rejected_cases();
    for case in &cases {
        let path = write_bytes(dir.path(), &case.file, &case.bytes);
        let out = cli(&[std::ffi::OsStr::new("check"), path.as_os_str()]).await;
        if out.code != Some(1) {
            failures.push(format!(
                "{}: exit {:?}, stderr {:?}",
                case.file, out.code, out.stderr
            ));
            continue;
        }
        for word in std::iter::once(&case.file).chain(&case.mentions) {
            if !out.stderr.contains(word.as_str()) {
                failures.push(format!(
                    "{}: stderr does not name {word:?}: {:?}",
                    case.file, out.stderr
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_serves_nothing_of_a_rejected_snapshot_and_reports_why() {
    let dir = tempdir();
    let cases = rejected_cases();
    for case in &cases {
        write_bytes(dir.path(), &case.file, &case.bytes);
    }
    write_json(
        dir.path(),
        "good.json",
        &fixture("ws-good", &["cura_good"], 0),
    );
    let server = TestServer::start_in(dir, |_| {}).await;
    let mut failures = Vec::new();
    if server.get("/portfolio", Some("cura_good")).await.status != 200 {
        failures.push("good.json is not served beside the rejected files".to_string());
    }
    for case in &cases {
        let resp = server.get("/portfolio", Some(&case.key)).await;
        if let Some(problem) = resp.error_problem(401) {
            failures.push(format!("{}: its key got {problem}", case.file));
        }
        match server.snapshot_status(&case.file).await {
            None => failures.push(format!("{}: not listed on admin /snapshots", case.file)),
            Some(entry) => match entry["error"].as_str() {
                Some(error) if !error.is_empty() => {
                    for word in &case.mentions {
                        if !error.contains(word.as_str()) {
                            failures.push(format!(
                                "{}: the reported error does not name {word:?}: {error:?}",
                                case.file
                            ));
                        }
                    }
                }
                _ => failures.push(format!(
                    "{}: no error on admin /snapshots: {entry}",
                    case.file
                )),
            },
        }
    }
    assert!(
        failures.is_empty(),
        "{} problems:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn odd_but_valid_snapshots_are_accepted() {
    let dir = tempdir();
    let mut cases = accepted_cases();
    cases.push(dangling());
    let mut failures = Vec::new();
    let mut paths = vec![std::ffi::OsString::from("check")];
    for case in &cases {
        let path = write_bytes(dir.path(), &case.file, &case.bytes);
        let out = cli(&[std::ffi::OsStr::new("check"), path.as_os_str()]).await;
        if out.code != Some(0) {
            failures.push(format!(
                "check {}: exit {:?}, stderr {:?}",
                case.file, out.code, out.stderr
            ));
        }
        paths.push(path.into_os_string());
    }
    let all = cli(&paths).await;
    if all.code != Some(0) {
        failures.push(format!(
            "check of every accepted file at once: exit {:?}, stderr {:?}",
            all.code, all.stderr
        ));
    }
    let server = TestServer::start_in(dir, |_| {}).await;
    for case in &cases {
        let resp = server.get("/portfolio", Some(&case.key)).await;
        if resp.status != 200 {
            failures.push(format!(
                "{}: status {}, body {}",
                case.file,
                resp.status,
                resp.text()
            ));
        }
        match server.snapshot_status(&case.file).await {
            Some(entry) if entry["error"].is_null() => {}
            other => failures.push(format!("{}: admin /snapshots entry {other:?}", case.file)),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dangling_references_are_kept_and_counted_as_warnings() {
    let dir = tempdir();
    let case = dangling();
    write_bytes(dir.path(), &case.file, &case.bytes);
    write_json(
        dir.path(),
        "clean.json",
        &fixture("ws-clean", &["cura_clean"], 0),
    );
    let server = TestServer::start_in(dir, |_| {}).await;
    let ids = Fixture::ids(0);
    let key = case.key.as_str();
    assert_eq!(
        server
            .get(&format!("/tasks/{}", ids.task), Some(key))
            .await
            .status,
        200
    );
    assert_eq!(
        server
            .get(&format!("/notes/{}", ids.note), Some(key))
            .await
            .status,
        200
    );
    assert_eq!(
        server.get("/tasks", Some(key)).await.ids(),
        vec![ids.task.clone()]
    );
    assert_eq!(
        server.get("/roles", Some(key)).await.ids(),
        vec![ids.role.clone()]
    );
    assert_eq!(
        server.get("/feed", Some(key)).await.ids(),
        vec![ids.feed.clone()]
    );
    let meeting = server
        .get_ok(&format!("/meetings/{}?include=notes", ids.meeting), key)
        .await;
    assert_eq!(
        meeting["data"]["notes"],
        json!([]),
        "notes of another meeting are not attached"
    );
    let entry = server
        .snapshot_status(&case.file)
        .await
        .expect("dangling.json is listed");
    assert!(entry["error"].is_null(), "{entry}");
    assert!(
        entry["warnings"].as_array().is_some_and(|w| !w.is_empty()),
        "no warnings: {entry}"
    );
    let clean = server
        .snapshot_status("clean.json")
        .await
        .expect("clean.json is listed");
    assert_eq!(clean["warnings"], json!([]), "{clean}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gzip_snapshots_load() {
    let dir = tempdir();
    let snap = fixture("ws-gz", &[KEY], 0);
    let path = write_bytes(
        dir.path(),
        "gz.json.gz",
        &gzip(&serde_json::to_vec(&snap).expect("serialize")),
    );
    let out = cli(&[std::ffi::OsStr::new("check"), path.as_os_str()]).await;
    assert_eq!(out.code, Some(0), "check gz.json.gz: {}", out.stderr);
    let server = TestServer::start_in(dir, |_| {}).await;
    let body = server
        .get_ok(&format!("/portfolio/{}", Fixture::ids(0).company), KEY)
        .await;
    assert_eq!(
        body["data"]["attributes"]["name"],
        json!("Company of ws-gz")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_with_other_names_are_ignored() {
    let dir = tempdir();
    let ignored = [
        ".hidden.json",
        ".hidden.json.gz",
        "a.json.tmp",
        "a.json.part",
        "a.json.swp",
        "a.txt",
        "a.json.bak",
        "a.json~",
        "a.gz",
        "a.json.gz.tmp",
        "a.jsonx",
        "json",
    ];
    for (i, name) in ignored.iter().enumerate() {
        let snap = fixture(
            &format!("ws-ignored-{i}"),
            &[&format!("cura_ignored_{i}")],
            0,
        );
        let bytes = serde_json::to_vec(&snap).expect("serialize");
        write_bytes(
            dir.path(),
            name,
            &if name.ends_with(".gz") {
                gzip(&bytes)
            } else {
                bytes
            },
        );
    }
    write_json(dir.path(), "good.json", &fixture("ws-good", &[KEY], 0));
    let server = TestServer::start_in(dir, |_| {}).await;
    assert_eq!(server.get("/portfolio", Some(KEY)).await.status, 200);
    let cases: Vec<(Option<String>, u16)> = (0..ignored.len())
        .map(|i| (Some(format!("cura_ignored_{i}")), 401))
        .collect();
    let mut failures = Vec::new();
    for (i, (key, status)) in cases.iter().enumerate() {
        let resp = server.get("/portfolio", key.as_deref()).await;
        if resp.status != *status {
            failures.push(format!("{} was loaded: status {}", ignored[i], resp.status));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Returns a snapshot of the workspace `ws-dup` readable with `key`, whose
/// company is named after `file`.
fn dup(file: &str, key: &str) -> Value {
    let mut snap = fixture("ws-dup", &[key], 0);
    snap["version"] = json!(file);
    snap["companies"][0]["attributes"]["name"] = json!(file);
    snap
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_files_of_one_workspace_at_startup_load_one_and_reject_the_other() {
    let dir = tempdir();
    let a = write_json(dir.path(), "dup_a.json", &dup("dup_a.json", "cura_dup_a"));
    let b = write_json(dir.path(), "dup_b.json", &dup("dup_b.json", "cura_dup_b"));
    let out = cli(&[std::ffi::OsStr::new("check"), a.as_os_str(), b.as_os_str()]).await;
    assert_eq!(
        out.code,
        Some(1),
        "check of two files naming one workspace: {}",
        out.stderr
    );
    assert!(
        out.stderr.contains("dup_a.json") && out.stderr.contains("dup_b.json"),
        "stderr names both files: {}",
        out.stderr
    );
    let server = TestServer::start_in(dir, |_| {}).await;
    let a_status = server.get("/portfolio", Some("cura_dup_a")).await.status;
    let b_status = server.get("/portfolio", Some("cura_dup_b")).await.status;
    let (served, rejected, key) = match (a_status, b_status) {
        (200, 401) => ("dup_a.json", "dup_b.json", "cura_dup_a"),
        (401, 200) => ("dup_b.json", "dup_a.json", "cura_dup_b"),
        other => panic!("exactly one of the two files must be served, got statuses {other:?}"),
    };
    let body = server
        .get_ok(&format!("/portfolio/{}", Fixture::ids(0).company), key)
        .await;
    assert_eq!(
        body["data"]["attributes"]["name"],
        json!(served),
        "the workspace is served from one file only"
    );
    let entry = server
        .snapshot_status(rejected)
        .await
        .expect("the rejected file is listed");
    let error = entry["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("dup_a.json") && error.contains("dup_b.json"),
        "the error names both files: {entry}"
    );
    assert!(
        server
            .snapshot_status(served)
            .await
            .expect("the served file is listed")["error"]
            .is_null()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_later_file_of_a_served_workspace_is_rejected_and_the_first_keeps_serving() {
    let dir = tempdir();
    write_json(dir.path(), "dup_b.json", &dup("dup_b.json", "cura_dup_b"));
    let server =
        TestServer::start_in(dir, |c| c.poll_interval = Some(Duration::from_millis(50))).await;
    replace_json(server.dir(), "dup_a.json", &dup("dup_a.json", "cura_dup_a"));
    let entry = server.wait_error("dup_a.json").await;
    let error = entry["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("dup_a.json") && error.contains("dup_b.json"),
        "the error names both files: {entry}"
    );
    let served = server.get("/portfolio", Some("cura_dup_b")).await;
    assert_eq!(served.status, 200);
    assert_eq!(served.header("x-snapshot-version"), Some("dup_b.json"));
    server
        .get("/portfolio", Some("cura_dup_a"))
        .await
        .assert_error(401, "the rejected file's key");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejected_replacement_keeps_the_previous_version_serving() {
    let dir = tempdir();
    write_json(dir.path(), "acme.json", &fixture("ws-acme", &[KEY], 0));
    let server =
        TestServer::start_in(dir, |c| c.poll_interval = Some(Duration::from_millis(50))).await;
    let mut broken = fixture("ws-acme", &[KEY], 0);
    broken["version"] = json!("broken");
    broken["tasks"][0]["attributes"]["created_at"] = json!("yesterday");
    replace_json(server.dir(), "acme.json", &broken);
    server.wait_error("acme.json").await;
    let resp = server.get("/tasks", Some(KEY)).await;
    assert_eq!(resp.status, 200, "the previous version stops serving");
    assert_eq!(
        resp.header("x-snapshot-version"),
        Some(version_of("ws-acme").as_str())
    );
    assert_eq!(
        resp.json()["data"][0]["attributes"]["created_at"],
        json!("2026-03-01T10:00:00Z")
    );
}
