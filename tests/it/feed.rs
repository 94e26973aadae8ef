//! The feed: newest first with ties by id descending, cursor paging that
//! neither skips nor repeats across tied instants on page boundaries, the
//! exactly-full last page, the timestamp-form cursor ("strictly older than"),
//! malformed cursors, limits, and `filter[type]` with cursors (docs/api.md#feed-cursor).

use std::time::Duration;

use serde_json::{Value, json};

use crate::util::*;

const WS: &str = "ws-feed";
const COMPANY: u64 = 1;

/// Feed entries in file order: id, timestamp as written, rank of its instant
/// (greater is newer) and type. Six entries share one instant written six ways.
const ENTRIES: &[(u64, &str, u32, &str)] = &[
    (4, "2026-03-01T10:00:00Z", 5, "product-update"),
    (1, "2026-03-01T12:00:00Z", 9, "fundraise-announcement"),
    (7, "2026-03-01T12:00:00+02:00", 5, "fundraise-announcement"),
    (12, "2026-03-01T10:00:00.000000001Z", 6, "product-update"),
    (2, "2026-03-01T10:00:00.000Z", 5, "product-update"),
    (9, "2026-03-01T09:59:59.999Z", 3, "product-update"),
    (6, "2026-03-01T05:00:00-05:00", 5, "product-update"),
    (
        8,
        "2026-03-01T10:00:00.001+00:00",
        7,
        "fundraise-announcement",
    ),
    (
        3,
        "2026-03-01T10:00:00.000000Z",
        5,
        "fundraise-announcement",
    ),
    (10, "2026-02-28T10:00:00Z", 1, "product-update"),
    (5, "2026-03-01T11:00:00+01:00", 5, "product-update"),
    (11, "2026-02-28T10:00:00.000+00:00", 1, "product-update"),
    (13, "2026-03-01T11:00:00+02:00", 2, "fundraise-announcement"),
];

fn feed_snapshot() -> Value {
    let mut snap = snapshot(WS, &[KEY]);
    add(&mut snap, "companies", [company(COMPANY, "Acme")]);
    add(
        &mut snap,
        "feed",
        ENTRIES.iter().map(|(id, ts, _, kind)| {
            with(
                feed_entry(*id, COMPANY, ts),
                json!({ "type": kind, "private": id % 2 == 0 }),
            )
        }),
    );
    snap
}

/// Returns the ids of `ENTRIES` that `keep` selects, newest first, ties by id descending.
fn expected(keep: impl Fn(&(u64, &str, u32, &str)) -> bool) -> Vec<String> {
    let mut ranked: Vec<(u32, u64)> = ENTRIES
        .iter()
        .filter(|e| keep(e))
        .map(|(id, _, rank, _)| (*rank, *id))
        .collect();
    ranked.sort_by(|a, b| b.cmp(a));
    ranked.into_iter().map(|(_, id)| uuid(id)).collect()
}

/// Follows `nextCursor` from `path` with `limit` (`None`: the default of 20),
/// starting at the cursor `start` if one is given, and returns every way the traversal
/// differs from listing `want`: wrong records, a repeat or a skip, a page short
/// before the end, a non-null cursor after the last entry, a wrong echo.
async fn traversal_problems(
    server: &TestServer,
    path: &str,
    limit: Option<usize>,
    start: Option<&str>,
    want: &[String],
) -> Vec<String> {
    let mut problems = Vec::new();
    let page_size = limit.unwrap_or(20);
    let expected_pages = want.len().div_ceil(page_size).max(1);
    let mut cursor: Option<String> = start.map(str::to_string);
    let mut got = Vec::new();
    let context = format!("{path} limit {limit:?} from cursor {start:?}");
    for page in 1.. {
        let mut params = Vec::new();
        if let Some(limit) = limit {
            params.push(format!("limit={limit}"));
        }
        if let Some(cursor) = &cursor {
            params.push(format!("cursor={}", enc(cursor)));
        }
        let page_path = if params.is_empty() {
            path.to_string()
        } else if path.contains('?') {
            format!("{path}&{}", params.join("&"))
        } else {
            format!("{path}?{}", params.join("&"))
        };
        let resp = server.get(&page_path, Some(KEY)).await;
        if resp.status != 200 {
            problems.push(format!(
                "{context}: page {page} ({page_path}) status {}, body {}",
                resp.status,
                resp.text()
            ));
            return problems;
        }
        let body = resp.json();
        let ids = resp.ids();
        if body["pagination"]["limit"] != json!(page_size) {
            problems.push(format!(
                "{context}: page {page} pagination {}",
                body["pagination"]
            ));
        }
        got.extend(ids.iter().cloned());
        match &body["pagination"]["nextCursor"] {
            Value::Null => {
                if page != expected_pages {
                    problems.push(format!(
                        "{context}: nextCursor null on page {page}, expected {expected_pages} pages"
                    ));
                }
                break;
            }
            Value::String(next) => {
                if ids.len() != page_size {
                    problems.push(format!(
                        "{context}: page {page} has {} entries and a nextCursor",
                        ids.len()
                    ));
                }
                if page >= expected_pages {
                    problems.push(format!(
                        "{context}: page {page} has nextCursor {next:?} but no older entry exists"
                    ));
                    if page > expected_pages + 1 {
                        break;
                    }
                }
                cursor = Some(next.clone());
            }
            other => {
                problems.push(format!(
                    "{context}: nextCursor is {other}, neither null nor a string"
                ));
                break;
            }
        }
    }
    if got != want {
        problems.push(format!("{context}: listed {got:?}\n  expected {want:?}"));
    }
    problems
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cursor_paging_never_skips_nor_repeats_across_ties() {
    let server = TestServer::start(&[("feed.json", feed_snapshot())]).await;
    let all = expected(|_| true);
    let mut problems = traversal_problems(&server, "/feed", None, None, &all).await;
    for limit in 1..=ENTRIES.len() + 1 {
        problems.extend(traversal_problems(&server, "/feed", Some(limit), None, &all).await);
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filter_type_pages_with_cursors() {
    let server = TestServer::start(&[("feed.json", feed_snapshot())]).await;
    let mut problems = Vec::new();
    for kind in ["product-update", "fundraise-announcement"] {
        let want = expected(|e| e.3 == kind);
        for limit in 1..=want.len() + 1 {
            problems.extend(
                traversal_problems(
                    &server,
                    &format!("/feed?filter[type]={kind}"),
                    Some(limit),
                    None,
                    &want,
                )
                .await,
            );
        }
        problems.extend(
            traversal_problems(
                &server,
                &format!("/feed?filter%5Btype%5D={kind}"),
                Some(2),
                None,
                &want,
            )
            .await,
        );
    }
    problems
        .extend(traversal_problems(&server, "/feed?filter[type]=other", Some(3), None, &[]).await);
    problems.extend(
        traversal_problems(
            &server,
            "/feed?filter[type]=Product-Update",
            Some(3),
            None,
            &[],
        )
        .await,
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    server
        .check_statuses(
            Some(KEY),
            &[
                ("/feed?filter[type]=", 400),
                ("/feed?filter[type]=product-update&cursor=", 400),
            ],
        )
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timestamp_cursor_means_strictly_older_than_that_instant() {
    let server = TestServer::start(&[("feed.json", feed_snapshot())]).await;
    // Each case is a timestamp cursor, as a client writes it, and the rank
    // below which entries must be listed.
    let cases: &[(&str, u32)] = &[
        ("2026-03-01T10:00:00.000Z", 5),
        ("2026-03-01T10:00:00Z", 5),
        ("2026-03-01T12:00:00.000+02:00", 5),
        ("2026-03-01T05:00:00-05:00", 5),
        ("2026-03-01T10:00:00.001Z", 7),
        ("2026-03-01T10:00:00.000000001Z", 6),
        ("2026-03-01T10:00:00.0005Z", 7),
        ("2026-03-01T12:00:00.000Z", 9),
        ("2026-03-01T12:00:00.001Z", 10),
        ("2030-01-01T00:00:00.000Z", 10),
        ("2026-02-28T10:00:00.000Z", 1),
        ("2000-01-01T00:00:00.000Z", 0),
    ];
    let mut problems = Vec::new();
    for (cursor, below) in cases {
        let want = expected(|e| e.2 < *below);
        problems.extend(traversal_problems(&server, "/feed", Some(50), Some(cursor), &want).await);
        problems.extend(traversal_problems(&server, "/feed", Some(2), Some(cursor), &want).await);
    }
    let want = expected(|e| e.2 < 5 && e.3 == "product-update");
    problems.extend(
        traversal_problems(
            &server,
            "/feed?filter[type]=product-update",
            Some(1),
            Some("2026-03-01T10:00:00.000Z"),
            &want,
        )
        .await,
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_cursors_are_400() {
    let server = TestServer::start(&[("feed.json", feed_snapshot())]).await;
    let cursors = [
        "",
        "garbage",
        "not-a-cursor!",
        "2026-13-01T00:00:00Z",
        "2026-03-01T25:00:00Z",
        "2026-02-30T10:00:00Z",
        "2026-03-01T10:00:00.000Zjunk",
        "%FF%FE",
        "%F0%9F%99%82",
        "%00",
        "null",
    ];
    let mut cases = Vec::new();
    for cursor in cursors {
        cases.push((format!("/feed?cursor={cursor}"), 400));
        cases.push((
            format!("/feed?limit=5&filter[type]=product-update&cursor={cursor}"),
            400,
        ));
    }
    server.check_statuses(Some(KEY), &cases).await;
    // Its message starts as every other bad query's does.
    for cursor in ["garbage", ""] {
        let resp = server
            .get(&format!("/feed?cursor={cursor}"), Some(KEY))
            .await;
        assert_eq!(
            resp.json(),
            json!({"error": "Invalid query: cursor is not valid: pass the nextCursor of a previous page, or an ISO 8601 timestamp like 2026-05-01T00:00:00.000Z"}),
            "cursor={cursor:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_and_the_default_of_20() {
    let mut snap = snapshot(WS, &[KEY]);
    add(&mut snap, "companies", [company(COMPANY, "Acme")]);
    add(
        &mut snap,
        "feed",
        (0..60u64).map(|i| feed_entry(1000 + i, COMPANY, &format!("2026-03-01T10:{i:02}:00Z"))),
    );
    let server = TestServer::start(&[("feed.json", snap)]).await;
    let all: Vec<String> = (0..60u64).rev().map(|i| uuid(1000 + i)).collect();
    let mut problems = traversal_problems(&server, "/feed", None, None, &all).await;
    problems.extend(traversal_problems(&server, "/feed", Some(50), None, &all).await);
    problems.extend(traversal_problems(&server, "/feed", Some(30), None, &all).await);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    let first = server.get_ok("/feed", KEY).await;
    assert_eq!(first["data"].as_array().map(Vec::len), Some(20));
    assert_eq!(first["pagination"]["limit"], json!(20));
    let cases: Vec<(String, u16)> = [
        ("1", 200),
        ("50", 200),
        ("51", 400),
        ("100", 400),
        ("0", 400),
        ("-1", 400),
        ("1.5", 400),
        ("abc", 400),
        ("", 400),
        ("+5", 400),
        ("%2B5", 400),
        ("1e1", 400),
        ("99999999999999999999999999", 400),
    ]
    .into_iter()
    .map(|(v, s)| (format!("/feed?limit={v}"), s))
    .collect();
    server.check_statuses(Some(KEY), &cases).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn next_cursor_is_the_plain_timestamp_where_it_alone_is_exact() {
    let mut snap = snapshot(WS, &[KEY]);
    add(&mut snap, "companies", [company(COMPANY, "Acme")]);
    // Distinct instants with millisecond precision, written with offsets.
    add(
        &mut snap,
        "feed",
        [
            feed_entry(1, COMPANY, "2026-03-01T12:30:00.250+02:00"),
            feed_entry(2, COMPANY, "2026-03-01T10:00:00Z"),
            feed_entry(3, COMPANY, "2026-02-28T23:00:00.5-03:00"),
        ],
    );
    let server = TestServer::start(&[("feed.json", snap)]).await;
    let first = server.get_ok("/feed?limit=1", KEY).await;
    assert_eq!(
        first["pagination"]["nextCursor"],
        json!("2026-03-01T10:30:00.250Z"),
        "{first}"
    );
    let second = server
        .get_ok("/feed?limit=1&cursor=2026-03-01T10:30:00.250Z", KEY)
        .await;
    assert_eq!(
        second["pagination"]["nextCursor"],
        json!("2026-03-01T10:00:00.000Z"),
        "{second}"
    );
    let third = server
        .get_ok("/feed?limit=1&cursor=2026-03-01T10:00:00.000Z", KEY)
        .await;
    assert_eq!(third["data"][0]["id"], json!(uuid(3)), "{third}");
    assert_eq!(third["pagination"]["nextCursor"], json!(null), "{third}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_feed_holds_public_and_private_entries() {
    let server = TestServer::start(&[("feed.json", feed_snapshot())]).await;
    let body = server.get_ok("/feed?limit=50", KEY).await;
    let data = body["data"].as_array().expect("data");
    assert_eq!(data.len(), ENTRIES.len());
    for entry in data {
        let id = entry["id"].as_str().expect("id");
        let n = ENTRIES
            .iter()
            .find(|e| uuid(e.0) == id)
            .expect("a known entry")
            .0;
        assert_eq!(entry["attributes"]["private"], json!(n % 2 == 0), "{entry}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paging_forward_ignores_entries_that_arrive_meanwhile() {
    let old: Vec<(u64, &str)> = vec![
        (1, "2026-03-01T10:00:00Z"),
        (2, "2026-03-01T09:00:00Z"),
        (3, "2026-03-01T11:00:00+02:00"),
        (4, "2026-03-01T08:00:00Z"),
        (5, "2026-03-01T07:00:00Z"),
        (6, "2026-03-01T06:00:00Z"),
    ];
    let build = |version: &str, extra: &[(u64, &str)]| {
        let mut snap = snapshot(WS, &[KEY]);
        snap["version"] = json!(version);
        add(&mut snap, "companies", [company(COMPANY, "Acme")]);
        add(
            &mut snap,
            "feed",
            old.iter()
                .chain(extra)
                .map(|(id, ts)| feed_entry(*id, COMPANY, ts)),
        );
        snap
    };
    let dir = tempdir();
    write_json(dir.path(), "feed.json", &build("v1", &[]));
    let server =
        TestServer::start_in(dir, |c| c.poll_interval = Some(Duration::from_millis(50))).await;
    // Entries 2 and 3 share an instant and fall on both sides of the first page's end.
    let first = server.get_ok("/feed?limit=2", KEY).await;
    assert_eq!(
        first["data"]
            .as_array()
            .map(|d| d.iter().map(|r| r["id"].clone()).collect::<Vec<_>>()),
        Some(vec![json!(uuid(1)), json!(uuid(3))])
    );
    let cursor = first["pagination"]["nextCursor"]
        .as_str()
        .expect("a cursor after the first page")
        .to_string();
    let newer = [
        (7, "2026-03-02T10:00:00Z"),
        (8, "2026-03-01T10:30:00Z"),
        (9, "2026-03-01T12:00:00.001+02:00"),
    ];
    replace_json(server.dir(), "feed.json", &build("v2", &newer));
    server.wait_version("/feed", KEY, "v2").await;
    let rest = traversal_problems(
        &server,
        "/feed",
        Some(2),
        Some(&cursor),
        &[uuid(2), uuid(4), uuid(5), uuid(6)],
    )
    .await;
    assert!(rest.is_empty(), "{}", rest.join("\n"));
}
