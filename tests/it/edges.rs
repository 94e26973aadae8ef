//! Edge cases found by the OpenAPI conformance test and fixed: each one is a
//! snapshot or a request a real exporter or client can produce.

use serde_json::json;

use crate::util::*;

/// A feed entry published at 9999-12-31T23:30:00-01:00 lies in the year
/// 10000 UTC; the cursor after it must still be accepted back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cursor_past_the_year_9999_pages_on() {
    let mut snap = snapshot("ws-late", &[KEY]);
    add(&mut snap, "companies", [company(1, "Late")]);
    add(
        &mut snap,
        "feed",
        [
            feed_entry(10, 1, "9999-12-31T23:30:00-01:00"),
            feed_entry(11, 1, "9999-12-31T22:00:00Z"),
            feed_entry(12, 1, "0001-01-01T00:30:00+01:00"),
        ],
    );
    let server = TestServer::start(&[("late.json", snap)]).await;
    let mut cursor: Option<String> = None;
    let mut seen = Vec::new();
    for _ in 0..5 {
        let path = match &cursor {
            None => "/feed?limit=1".to_owned(),
            Some(c) => format!("/feed?limit=1&cursor={}", enc(c)),
        };
        let body = server.get_ok(&path, KEY).await;
        seen.extend(
            body["data"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r["id"].as_str().unwrap().to_owned()),
        );
        match body["pagination"]["nextCursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => break,
        }
    }
    assert_eq!(seen, vec![uuid(10), uuid(11), uuid(12)]);
}

/// A number out of the range of a double cannot be served as JSON a client
/// reads back, so the snapshot is rejected, naming record and field.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_of_range_numbers_bad_emails_leap_seconds_and_lower_case_t_z_are_rejected() {
    let mut huge = snapshot("ws-a", &[KEY]);
    add(&mut huge, "companies", [company(1, "A")]);
    let mut m = metric(20, 1, "ARR", "2026-01-01T00:00:00Z");
    m["attributes"]["value_numeric"] = json!(123456.5);
    add(&mut huge, "metrics", [m]);
    let text = serde_json::to_string(&huge)
        .unwrap()
        .replace("123456.5", "1e400");
    assert!(text.contains("1e400"));

    let mut email = snapshot("ws-b", &[OTHER_KEY]);
    let mut meeting_rec = meeting(30, 1, "2026-03-01T10:00:00Z");
    meeting_rec["attributes"]["attendees"] =
        json!([{ "email": "x,y@example.com", "organizer": true }]);
    add(&mut email, "meetings", [meeting_rec]);

    let mut leap = snapshot("ws-c", &["cura_leap_key"]);
    add(&mut leap, "tasks", [task(40, 1, "2026-03-01T10:00:60Z")]);
    let mut good_leap = snapshot("ws-d", &["cura_good_leap_key"]);
    add(
        &mut good_leap,
        "tasks",
        [task(41, 1, "2016-12-31T23:59:60Z")],
    );

    let dir = tempdir();
    write_bytes(dir.path(), "huge.json", text.as_bytes());
    write_json(dir.path(), "email.json", &email);
    write_json(dir.path(), "leap.json", &leap);
    write_json(dir.path(), "goodleap.json", &good_leap);
    let mut lower = snapshot("ws-e", &["cura_lower_key"]);
    add(&mut lower, "tasks", [task(42, 1, "2026-03-01t10:00:00z")]);
    write_json(dir.path(), "lower.json", &lower);
    let server = TestServer::start_in(dir, |_| {}).await;

    for (file, key, must_name) in [
        ("huge.json", KEY, &["metrics", "value_numeric"][..]),
        ("email.json", OTHER_KEY, &["meetings", "email"][..]),
        ("leap.json", "cura_leap_key", &["tasks", "created_at"][..]),
        // A real leap second is valid RFC 3339, but JavaScript's Date and
        // Python's datetime fail on it, and timestamps are served as written.
        (
            "goodleap.json",
            "cura_good_leap_key",
            &["tasks", "created_at", "leap second"][..],
        ),
        (
            "lower.json",
            "cura_lower_key",
            &["tasks", "created_at", "upper case"][..],
        ),
    ] {
        let status = server
            .snapshot_status(file)
            .await
            .expect("the file is listed");
        let error = status["error"]
            .as_str()
            .unwrap_or_else(|| panic!("{file} must be rejected: {status}"));
        for word in must_name {
            assert!(
                error.contains(word),
                "{file}: error {error:?} must name {word}"
            );
        }
        assert_eq!(
            server.get("/tasks", Some(key)).await.status,
            401,
            "{file} must not serve"
        );
    }
}

/// An empty path segment names no route: 404 with a good key, as any
/// unknown path (not a 400 about an empty id).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn empty_path_segments_are_unknown_paths() {
    let server = TestServer::start(&[("a.json", fixture("ws-a", &[KEY], 1))]).await;
    let cases: Vec<(&str, u16)> = vec![
        ("/tasks/", 404),
        ("/portfolio/", 404),
        ("/portfolio//tasks", 404),
        ("/roles/", 404),
        ("/feed/", 404),
        ("//tasks", 404),
        ("/tasks", 200),
    ];
    server.check_statuses(Some(KEY), &cases).await;
}
