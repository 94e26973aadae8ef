//! `/portfolio/{id}/meetings`, the extension (docs/api.md#extension-company-meetings):
//! the company's meetings newest `start_time` first as instants (mixed UTC
//! offsets, ties by id descending), offset pages with `hasMore`, each record
//! exactly as `/meetings/{id}` serves it (no `notes`), the checks and errors
//! of `/portfolio/{id}/notes`, `HEAD`, ETag and 304, gzip, and its own route
//! label in the metrics.

use serde_json::{Value, json};

use crate::util::*;

const WS: &str = "ws-company-meetings";
const COMPANY: u64 = 1;
const QUIET_COMPANY: u64 = 2;
/// The ids of the meetings on `INSTANTS` (`instant_records`) start here.
const MEETINGS: u64 = 100;
/// A meeting of a company the snapshot does not hold.
const LOST_MEETING: u64 = 500;
const LOST_COMPANY: u64 = 999;
/// Another company's meeting, newer than all of `COMPANY`'s.
const OTHER_MEETING: u64 = 600;

fn snapshot_of_meetings() -> Value {
    let mut snap = snapshot(WS, &[KEY]);
    add(
        &mut snap,
        "companies",
        [
            company(COMPANY, "Acme"),
            company(QUIET_COMPANY, "Quiet"),
            company(3, "Other"),
        ],
    );
    let mut meetings = instant_records(MEETINGS, |id, ts| meeting(id, COMPANY, ts));
    // Long titles: the page is over 1 KiB, so gzip is asked for and given.
    for m in &mut meetings {
        m["attributes"]["title"] = json!(format!("Board meeting {}", "x".repeat(200)));
    }
    meetings.insert(
        4,
        meeting(LOST_MEETING, LOST_COMPANY, "2026-03-01T10:00:00Z"),
    );
    meetings.push(meeting(OTHER_MEETING, 3, "2027-01-01T00:00:00Z"));
    add(&mut snap, "meetings", meetings);
    add(
        &mut snap,
        "meeting_notes",
        [meeting_note(700, MEETINGS + 3, "2026-03-01T10:00:00Z")],
    );
    snap
}

fn path(company: u64, query: &str) -> String {
    format!("/portfolio/{}/meetings{query}", uuid(company))
}

async fn start() -> TestServer {
    TestServer::start(&[("meetings.json", snapshot_of_meetings())]).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_companys_meetings_are_newest_first_as_instants_ties_by_id_descending() {
    let server = start().await;
    let page = server.get_ok(&path(COMPANY, ""), KEY).await;
    assert_eq!(
        ids_of(&page),
        instant_ids_newest_first(MEETINGS),
        "start_time compared as instants across UTC offsets and fractions, ties by id descending"
    );
    assert_eq!(
        page["pagination"],
        json!({"limit": 50, "offset": 0, "hasMore": false}),
        "the default limit is 50"
    );
    let quiet = server.get_ok(&path(QUIET_COMPANY, ""), KEY).await;
    assert_eq!(
        quiet,
        json!({"data": [], "pagination": {"limit": 50, "offset": 0, "hasMore": false}})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_meeting_is_exactly_what_meetings_by_id_serves_without_notes() {
    let server = start().await;
    let page = server.get_ok(&path(COMPANY, "?limit=100"), KEY).await;
    let listed = page["data"].as_array().expect("data is an array");
    assert_eq!(listed.len(), instant_ids_newest_first(MEETINGS).len());
    for record in listed {
        let id = record["id"].as_str().expect("an id");
        assert_keys(record, &["id", "attributes"], "a listed meeting");
        let alone = server.get_ok(&format!("/meetings/{id}"), KEY).await;
        assert_eq!(record, &alone["data"], "meeting {id}");
    }
    // The meeting with a note is listed without it too.
    let with_note = listed
        .iter()
        .find(|m| m["id"] == json!(uuid(MEETINGS + 3)))
        .expect("the meeting with a note is listed");
    assert_eq!(with_note.get("notes"), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_follow_limit_and_offset_and_has_more_looks_one_ahead() {
    let server = start().await;
    let all = instant_ids_newest_first(MEETINGS);
    let n = all.len() as u64;
    for limit in [1, 2, 3, 5, n - 1, n, 100] {
        let mut seen = Vec::new();
        let mut offset = 0;
        loop {
            let page = server
                .get_ok(
                    &path(COMPANY, &format!("?limit={limit}&offset={offset}")),
                    KEY,
                )
                .await;
            let ids = ids_of(&page);
            let has_more = offset + limit < n;
            assert_eq!(
                page["pagination"],
                json!({"limit": limit, "offset": offset, "hasMore": has_more}),
                "limit {limit} offset {offset}"
            );
            seen.extend(ids);
            if !has_more {
                break;
            }
            offset += limit;
        }
        assert_eq!(seen, all, "limit {limit}: every meeting once, in order");
    }
    let past = server
        .get_ok(&path(COMPANY, "?offset=9007199254740991"), KEY)
        .await;
    assert_eq!(
        past,
        json!({"data": [], "pagination": {"limit": 50, "offset": 9007199254740991u64, "hasMore": false}})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checks_and_errors_are_those_of_a_companys_notes() {
    let server = start().await;
    let unknown = server.get(&path(LOST_COMPANY, ""), Some(KEY)).await;
    assert_eq!(unknown.status, 404, "{}", unknown.text());
    assert_eq!(unknown.json(), json!({"error": "Company not found"}));
    let bad_limit = server.get(&path(COMPANY, "?limit=0"), Some(KEY)).await;
    assert_eq!(
        bad_limit.json(),
        json!({"error": "Invalid query: limit must be an integer from 1 to 100"})
    );
    let mut cases: Vec<(String, u16)> = Vec::new();
    for (query, status) in [
        ("?limit=100", 200),
        ("?limit=101", 400),
        ("?limit=0", 400),
        ("?limit=", 400),
        ("?limit=1.5", 400),
        ("?offset=-1", 400),
        ("?offset=9007199254740992", 400),
        ("?limit=1&limit=1", 400),
        ("?include=notes", 200),
    ] {
        cases.push((path(COMPANY, query), status));
        // The 400 comes before the lookup: also for an unknown company.
        let unknown = if status == 400 { 400 } else { 404 };
        cases.push((path(LOST_COMPANY, query), unknown));
    }
    cases.push(("/portfolio/not-a-uuid/meetings".to_owned(), 400));
    cases.push(("/portfolio/not-a-uuid/meetings?limit=0".to_owned(), 400));
    server.check_statuses(Some(KEY), &cases).await;
    let malformed = server
        .get("/portfolio/not-a-uuid/meetings", Some(KEY))
        .await;
    assert_eq!(
        malformed.json(),
        json!({"error": "Invalid company id: must be a UUID"})
    );
    // 401 before 400 and 404, whatever the path.
    for p in [
        path(COMPANY, ""),
        path(COMPANY, "?limit=0"),
        path(LOST_COMPANY, ""),
    ] {
        let resp = server.get(&p, Some("cura_nobody")).await;
        assert_eq!(resp.status, 401, "GET {p}");
        assert_eq!(resp.text(), UNAUTHORIZED_BODY);
        assert_eq!(server.get(&p, None).await.status, 401, "GET {p}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_a_memory_budget_a_bad_query_is_a_400_before_any_load() {
    let dir = tempdir();
    write_json(dir.path(), "meetings.json", &snapshot_of_meetings());
    // Nothing fits: every answer with data needs a load on demand.
    let server = TestServer::start_in(dir, |c| c.memory_budget = Some(1)).await;
    let loads = || async {
        let metrics = server.admin_get("/metrics").await.text();
        metrics
            .lines()
            .find_map(|l| l.strip_prefix("portfolio_replica_demand_loads_total{outcome=\"ok\"} "))
            .map_or(0.0, |v| v.parse::<f64>().expect("a number"))
    };
    let before = loads().await;
    for p in [path(COMPANY, "?limit=0"), path(LOST_COMPANY, "?offset=x")] {
        let resp = server.get(&p, Some(KEY)).await;
        assert_eq!(resp.status, 400, "GET {p}: {}", resp.text());
    }
    assert_eq!(loads().await, before, "no load for a 400");
    let page = server.get_ok(&path(COMPANY, ""), KEY).await;
    assert_eq!(ids_of(&page), instant_ids_newest_first(MEETINGS));
    assert!(loads().await > before, "the 200 needed a load");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_meeting_of_a_company_the_snapshot_does_not_list_is_reachable_only_by_id() {
    let server = start().await;
    for company in [COMPANY, QUIET_COMPANY, 3] {
        let page = server.get_ok(&path(company, "?limit=100"), KEY).await;
        assert!(
            !ids_of(&page).contains(&uuid(LOST_MEETING)),
            "company {company}"
        );
    }
    let other = server.get_ok(&path(3, ""), KEY).await;
    assert_eq!(ids_of(&other), vec![uuid(OTHER_MEETING)]);
    server
        .get_ok(&format!("/meetings/{}", uuid(LOST_MEETING)), KEY)
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn head_etag_304_and_gzip_are_those_of_every_list() {
    let server = start().await;
    let p = path(COMPANY, "?limit=20");
    let auth = format!("Bearer {KEY}");
    let get = server.request("GET", &p, &[("Authorization", &auth)]).await;
    assert_eq!(get.status, 200);
    assert_cache_headers(&get, &format!("GET {p}"));
    assert_eq!(
        get.header("x-snapshot-version"),
        Some(version_of(WS).as_str())
    );
    let etag = strong_etag(&get, &format!("GET {p}"));

    let head = server
        .request("HEAD", &p, &[("Authorization", &auth)])
        .await;
    assert_eq!(head.status, 200);
    assert!(head.body.is_empty(), "HEAD has no body");
    assert_eq!(head.header("etag"), Some(etag.as_str()));
    assert_eq!(
        head.header("content-length"),
        Some(get.body.len().to_string().as_str()),
        "HEAD says the length GET sends"
    );

    let not_modified = server
        .request(
            "GET",
            &p,
            &[("Authorization", &auth), ("If-None-Match", &etag)],
        )
        .await;
    assert_eq!(not_modified.status, 304);
    assert!(not_modified.body.is_empty());
    let other_page = server
        .request(
            "GET",
            &path(COMPANY, "?limit=20&offset=1"),
            &[("Authorization", &auth), ("If-None-Match", &etag)],
        )
        .await;
    assert_eq!(other_page.status, 200, "another page's tag does not match");

    assert!(get.body.len() >= 1024, "the page is large enough for gzip");
    let (plain, gz) = plain_and_gzip(server.api, &p, KEY).await;
    assert_eq!(
        gunzip(&gz.body),
        plain.body,
        "gzip decodes to the plain body"
    );
    assert_ne!(gz.header("etag"), plain.header("etag"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_route_has_its_own_label_in_the_metrics() {
    let server = start().await;
    server.get_ok(&path(COMPANY, ""), KEY).await;
    server.get_ok(&path(COMPANY, "?limit=1"), KEY).await;
    assert_eq!(
        server.get(&path(LOST_COMPANY, ""), Some(KEY)).await.status,
        404
    );
    let metrics = server.admin_get("/metrics").await.text();
    for (status, count) in [("200", 2), ("404", 1)] {
        let line = format!(
            "portfolio_replica_http_requests_total{{route=\"/portfolio/{{id}}/meetings\",status=\"{status}\"}} {count}\n"
        );
        assert!(metrics.contains(&line), "{line:?} in:\n{metrics}");
    }
}

fn ids_of(page: &Value) -> Vec<String> {
    page["data"]
        .as_array()
        .expect("data is an array")
        .iter()
        .map(|r| r["id"].as_str().expect("a string id").to_owned())
        .collect()
}
