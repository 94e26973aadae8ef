//! Offset pagination: `limit`/`offset` bounds and defaults, `hasMore` on every
//! page of full traversals, filters combined with paging, and the order of
//! every offset list and role list with its tie-break, timestamps compared as
//! instants across UTC offsets (docs/api.md#pagination).

use serde_json::{Value, json};

use crate::util::*;

const WS: &str = "ws-pages";

/// The company that owns the ordered tasks, notes and roles.
const COMPANY: u64 = 1;
/// Offsets of the id ranges of the ordered records of each collection.
const TASKS: u64 = 100;
const NOTES: u64 = 200;
const ROLES: u64 = 300;

/// Companies in file order with names whose code-point order differs from
/// case-insensitive, locale and UTF-16 orders.
const COMPANY_NAMES: &[(u64, &str)] = &[
    (5, "apple"),
    (1, "Zeta"),
    (9, "Ärger"),
    (3, "Beta"),
    (7, "beta"),
    (2, "Same"),
    (8, "Same"),
    (4, "Same"),
    (6, "\u{FF21}"),
    (10, "\u{1D49C}"),
    (11, "Émile"),
    (12, "Zeta "),
    (13, "Zet"),
    (14, ""),
];

/// The ids of `COMPANY_NAMES` by name in code-point order, then id ascending.
const COMPANY_ORDER: &[u64] = &[14, 3, 2, 4, 8, 13, 1, 12, 5, 7, 9, 11, 6, 10];

/// Returns a snapshot with the named companies and the ordered tasks, notes and roles of `COMPANY`.
fn ordered_snapshot() -> Value {
    let mut snap = snapshot(WS, &[KEY]);
    add(
        &mut snap,
        "companies",
        COMPANY_NAMES.iter().map(|(id, name)| company(*id, name)),
    );
    add(
        &mut snap,
        "tasks",
        instant_records(TASKS, |id, ts| task(id, COMPANY, ts)),
    );
    add(
        &mut snap,
        "notes",
        instant_records(NOTES, |id, ts| note(id, COMPANY, ts)),
    );
    add(
        &mut snap,
        "roles",
        instant_records(ROLES, |id, ts| role(id, COMPANY, ts)),
    );
    snap
}

/// Appends `param` to `path` with `?` or `&` as needed.
fn join(path: &str, param: &str) -> String {
    if path.contains('?') {
        format!("{path}&{param}")
    } else {
        format!("{path}?{param}")
    }
}

/// Pages through `path` with every limit from 1 to one past the length of
/// `expected`, and returns every way a page differs from the slice of
/// `expected` it should hold, including a wrong `hasMore` or echo.
async fn traversal_problems(server: &TestServer, path: &str, expected: &[String]) -> Vec<String> {
    let mut problems = Vec::new();
    for limit in 1..=expected.len() + 1 {
        let mut offset = 0;
        loop {
            let page_path = join(path, &format!("limit={limit}&offset={offset}"));
            let resp = server.get(&page_path, Some(KEY)).await;
            if resp.status != 200 {
                problems.push(format!("{page_path}: status {}", resp.status));
                break;
            }
            let body = resp.json();
            let want_ids =
                &expected[offset.min(expected.len())..(offset + limit).min(expected.len())];
            let want_more = offset + limit < expected.len();
            let want_pagination = json!({ "limit": limit, "offset": offset, "hasMore": want_more });
            if resp.ids() != want_ids {
                problems.push(format!(
                    "{page_path}: ids {:?}, expected {want_ids:?}",
                    resp.ids()
                ));
            }
            if body["pagination"] != want_pagination {
                problems.push(format!(
                    "{page_path}: pagination {}, expected {want_pagination}",
                    body["pagination"]
                ));
            }
            // A client pages while hasMore is true; stop on what the server says, bounded.
            if body["pagination"]["hasMore"] != json!(true) || offset > expected.len() {
                break;
            }
            offset += limit;
        }
    }
    problems
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limit_and_offset_bounds() {
    let server = TestServer::start(&[("pages.json", ordered_snapshot())]).await;
    let c = uuid(COMPANY);
    let limits = [
        ("0", 400),
        ("1", 200),
        ("100", 200),
        ("101", 400),
        ("-1", 400),
        ("1.5", 400),
        ("1.0", 400),
        ("abc", 400),
        ("", 400),
        ("+5", 400),
        ("%2B5", 400),
        ("1e2", 400),
        ("0x10", 400),
        ("%205", 400),
        ("5%20", 400),
        ("99999999999999999999999999", 400),
        ("18446744073709551617", 400),
    ];
    let offsets = [
        ("0", 200),
        ("9007199254740991", 200),
        ("9007199254740992", 400),
        ("-1", 400),
        ("1.5", 400),
        ("abc", 400),
        ("", 400),
        ("+5", 400),
        ("%2B5", 400),
        ("1e3", 400),
        ("99999999999999999999999999", 400),
        ("18446744073709551616", 400),
    ];
    let mut cases = Vec::new();
    for list in [
        "/portfolio".to_string(),
        "/tasks".into(),
        format!("/portfolio/{c}/tasks"),
        format!("/portfolio/{c}/notes"),
    ] {
        for (value, status) in limits {
            cases.push((format!("{list}?limit={value}"), status));
        }
        for (value, status) in offsets {
            cases.push((format!("{list}?offset={value}"), status));
        }
        cases.push((format!("{list}?limit"), 400));
        cases.push((format!("{list}?offset"), 400));
    }
    server.check_statuses(Some(KEY), &cases).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edge_pages_echo_their_limit_and_offset() {
    let mut snap = ordered_snapshot();
    add(
        &mut snap,
        "companies",
        (0..120).map(|i| company(10_000 + i, &format!("Filler {i:03}"))),
    );
    let server = TestServer::start(&[("pages.json", snap)]).await;
    let c = uuid(COMPANY);
    let total = COMPANY_NAMES.len() + 120;
    // Each case is a path, the number of records and the pagination it must answer.
    let cases: Vec<(String, usize, Value)> = vec![
        (
            "/portfolio?offset=9007199254740991".into(),
            0,
            json!({ "limit": 50, "offset": 9007199254740991u64, "hasMore": false }),
        ),
        (
            "/portfolio?limit=100&offset=9007199254740991".into(),
            0,
            json!({ "limit": 100, "offset": 9007199254740991u64, "hasMore": false }),
        ),
        (
            "/portfolio?limit=100".into(),
            100,
            json!({ "limit": 100, "offset": 0, "hasMore": true }),
        ),
        (
            "/portfolio?limit=100&offset=100".into(),
            total - 100,
            json!({ "limit": 100, "offset": 100, "hasMore": false }),
        ),
        (
            format!("/portfolio?limit=1&offset={}", total - 1),
            1,
            json!({ "limit": 1, "offset": total - 1, "hasMore": false }),
        ),
        (
            format!("/portfolio?limit=1&offset={}", total - 2),
            1,
            json!({ "limit": 1, "offset": total - 2, "hasMore": true }),
        ),
        (
            format!("/portfolio?offset={total}"),
            0,
            json!({ "limit": 50, "offset": total, "hasMore": false }),
        ),
        (
            "/tasks?offset=9007199254740991".into(),
            0,
            json!({ "limit": 50, "offset": 9007199254740991u64, "hasMore": false }),
        ),
        (
            format!("/portfolio/{c}/tasks?limit=100&offset=9007199254740991"),
            0,
            json!({ "limit": 100, "offset": 9007199254740991u64, "hasMore": false }),
        ),
        (
            format!("/portfolio/{c}/notes?offset=9007199254740991"),
            0,
            json!({ "limit": 50, "offset": 9007199254740991u64, "hasMore": false }),
        ),
        (
            format!("/portfolio/{c}/notes?offset=500"),
            0,
            json!({ "limit": 50, "offset": 500, "hasMore": false }),
        ),
    ];
    let mut failures = Vec::new();
    for (path, count, pagination) in &cases {
        let resp = server.get(path, Some(KEY)).await;
        if resp.status != 200 {
            failures.push(format!("{path}: status {}", resp.status));
            continue;
        }
        let body = resp.json();
        if body["data"].as_array().map(Vec::len) != Some(*count)
            || body["pagination"] != *pagination
        {
            failures.push(format!(
                "{path}: {} records and pagination {}, expected {count} and {pagination}",
                body["data"].as_array().map_or(0, Vec::len),
                body["pagination"]
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn default_limit_is_50_on_every_offset_list() {
    let mut snap = snapshot(WS, &[KEY]);
    add(
        &mut snap,
        "companies",
        (0..60).map(|i| company(1000 + i, &format!("Company {i:02}"))),
    );
    add(
        &mut snap,
        "tasks",
        (0..60).map(|i| task(2000 + i, 1000, "2026-03-01T10:00:00Z")),
    );
    add(
        &mut snap,
        "notes",
        (0..60).map(|i| note(3000 + i, 1000, "2026-03-01T10:00:00Z")),
    );
    let server = TestServer::start(&[("pages.json", snap)]).await;
    let c = uuid(1000);
    for path in [
        "/portfolio".to_string(),
        "/tasks".into(),
        format!("/portfolio/{c}/tasks"),
        format!("/portfolio/{c}/notes"),
    ] {
        let body = server.get_ok(&path, KEY).await;
        assert_eq!(body["data"].as_array().map(Vec::len), Some(50), "{path}");
        assert_eq!(
            body["pagination"],
            json!({ "limit": 50, "offset": 0, "hasMore": true }),
            "{path}"
        );
        let rest = server.get_ok(&join(&path, "offset=50"), KEY).await;
        assert_eq!(
            rest["data"].as_array().map(Vec::len),
            Some(10),
            "{path} from offset 50"
        );
        assert_eq!(
            rest["pagination"],
            json!({ "limit": 50, "offset": 50, "hasMore": false }),
            "{path} from offset 50"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_list_is_in_its_order_with_its_tie_break() {
    let server = TestServer::start(&[("pages.json", ordered_snapshot())]).await;
    let c = uuid(COMPANY);
    let companies: Vec<String> = COMPANY_ORDER.iter().map(|id| uuid(*id)).collect();
    // Each case is a path and the ids it must list, in order.
    let cases: Vec<(String, Vec<String>)> = vec![
        ("/portfolio?limit=100".into(), companies),
        ("/tasks?limit=100".into(), instant_ids_newest_first(TASKS)),
        (
            format!("/portfolio/{c}/tasks?limit=100"),
            instant_ids_newest_first(TASKS),
        ),
        (
            format!("/portfolio/{c}/notes?limit=100"),
            instant_ids_newest_first(NOTES),
        ),
        ("/roles".into(), instant_ids_newest_first(ROLES)),
        (
            format!("/portfolio/{c}/roles"),
            instant_ids_newest_first(ROLES),
        ),
    ];
    let mut failures = Vec::new();
    for (path, want) in &cases {
        let resp = server.get(path, Some(KEY)).await;
        if resp.status != 200 || resp.ids() != *want {
            failures.push(format!(
                "{path}: status {}, ids {:?}\n  expected {want:?}",
                resp.status,
                resp.ids()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_traversals_have_the_right_has_more_on_every_page() {
    let server = TestServer::start(&[("pages.json", ordered_snapshot())]).await;
    let c = uuid(COMPANY);
    let companies: Vec<String> = COMPANY_ORDER.iter().map(|id| uuid(*id)).collect();
    let mut problems = Vec::new();
    problems.extend(traversal_problems(&server, "/portfolio", &companies).await);
    problems.extend(traversal_problems(&server, "/tasks", &instant_ids_newest_first(TASKS)).await);
    problems.extend(
        traversal_problems(
            &server,
            &format!("/portfolio/{c}/tasks"),
            &instant_ids_newest_first(TASKS),
        )
        .await,
    );
    problems.extend(
        traversal_problems(
            &server,
            &format!("/portfolio/{c}/notes"),
            &instant_ids_newest_first(NOTES),
        )
        .await,
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Returns a snapshot whose tasks and companies carry filterable values.
///
/// Task `i` (id `500 + i`) is created `i` hours after midnight, so the newest
/// first order is by descending `i`.
fn filter_snapshot() -> Value {
    let mut snap = snapshot(WS, &[KEY]);
    let statuses = [
        json!("triage"),
        json!("done"),
        json!("Triage"),
        json!(null),
        json!("triage"),
        json!("in progress"),
    ];
    let priorities = [json!("low"), json!("high"), json!("low")];
    let tasks = (0..18u64).map(|i| {
        let mut t = task(500 + i, COMPANY, &format!("2026-03-01T{i:02}:00:00Z"));
        if i != 15 {
            t = with(t, json!({ "status": statuses[i as usize % 6], "priority": priorities[i as usize % 3] }));
        }
        t
    });
    add(&mut snap, "tasks", tasks);
    let companies = (0..9u64).map(|i| {
        with(
            company(600 + i, &format!("C{i}")),
            json!({ "priority": priorities[i as usize % 3] }),
        )
    });
    add(&mut snap, "companies", companies);
    snap
}

/// Returns the ids `500 + i`, newest first, of the tasks of `filter_snapshot` for which `keep(i)` holds.
fn tasks_where(keep: impl Fn(u64) -> bool) -> Vec<String> {
    (0..18u64)
        .rev()
        .filter(|i| keep(*i))
        .map(|i| uuid(500 + i))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filters_combine_with_paging() {
    let server = TestServer::start(&[("pages.json", filter_snapshot())]).await;
    let triage = |i: u64| i != 15 && (i.is_multiple_of(6) || i % 6 == 4);
    let low = |i: u64| i != 15 && i % 3 != 1;
    let high = |i: u64| i != 15 && i % 3 == 1;
    let high_companies: Vec<String> = (0..9u64)
        .filter(|i| i % 3 == 1)
        .map(|i| uuid(600 + i))
        .collect();
    let low_companies: Vec<String> = (0..9u64)
        .filter(|i| i % 3 != 1)
        .map(|i| uuid(600 + i))
        .collect();
    let cases: Vec<(String, Vec<String>)> = vec![
        ("/tasks?filter[status]=triage".into(), tasks_where(triage)),
        (
            "/tasks?filter[status]=Triage".into(),
            tasks_where(|i| i != 15 && i % 6 == 2),
        ),
        (
            "/tasks?filter[status]=in%20progress".into(),
            tasks_where(|i| i != 15 && i % 6 == 5),
        ),
        ("/tasks?filter[priority]=high".into(), tasks_where(high)),
        ("/tasks?filter[priority]=low".into(), tasks_where(low)),
        (
            "/tasks?filter[status]=triage&filter[priority]=low".into(),
            tasks_where(|i| triage(i) && low(i)),
        ),
        (
            "/tasks?filter[priority]=high&filter[status]=done".into(),
            tasks_where(|i| high(i) && i % 6 == 1),
        ),
        ("/portfolio?filter[priority]=high".into(), high_companies),
        ("/portfolio?filter[priority]=low".into(), low_companies),
    ];
    let mut problems = Vec::new();
    for (path, want) in &cases {
        assert!(!want.is_empty(), "{path}: the fixture selects nothing");
        problems.extend(traversal_problems(&server, path, want).await);
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_filter_values_give_an_empty_page_and_empty_values_are_400() {
    let server = TestServer::start(&[("pages.json", filter_snapshot())]).await;
    let empty_pages = [
        "/tasks?filter[status]=nonexistent",
        "/tasks?filter[status]=TRIAGE",
        "/tasks?filter[status]=triag",
        "/tasks?filter[status]=triage%20",
        "/tasks?filter[status]=null",
        "/tasks?filter[priority]=urgent",
        "/tasks?filter[status]=done&filter[priority]=low",
        "/portfolio?filter[priority]=urgent",
        "/portfolio?filter[priority]=High",
        "/tasks?filter[status]=triage&offset=100",
    ];
    let mut failures = Vec::new();
    for path in empty_pages {
        let resp = server.get(path, Some(KEY)).await;
        let ok = resp.status == 200 && {
            let body = resp.json();
            body["data"] == json!([]) && body["pagination"]["hasMore"] == json!(false)
        };
        if !ok {
            failures.push(format!(
                "{path}: status {}, body {}",
                resp.status,
                resp.text()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    server
        .check_statuses(
            Some(KEY),
            &[
                ("/tasks?filter[status]=", 400),
                ("/tasks?filter[status]", 400),
                ("/tasks?filter[priority]=", 400),
                ("/tasks?filter[status]=triage&filter[priority]=", 400),
                ("/portfolio?filter[priority]=", 400),
                ("/portfolio?filter%5Bpriority%5D=", 400),
            ],
        )
        .await;
}
