//! Production behaviours: strong ETags and conditional requests, cache
//! headers, gzip, the admin listener's Prometheus `/metrics`, graceful
//! shutdown on SIGTERM/SIGINT, structured logs that never carry a key, and
//! the HTTP hardening limits (head size, header-read timeout, keep-alive idle
//! timeout, connection cap) with their defaults.
//!
//! Most tests run the server in-process (`TestServer`, with `ServeConfig`'s
//! `limits` where a limit is under test); signals, exit codes and logs need
//! the real binary, run as a child on free ports and killed if a test fails.
//! Every wait is a deadline with polling, so each test is bounded in time.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::process::Command;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use tokio::net::TcpStream;

use crate::util::*;

// ---------------------------------------------------------------------------
// ETag, conditional requests and cache headers.
// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_200_of_every_endpoint_has_a_strong_stable_etag_and_answers_304_to_it() {
    let server = TestServer::start(&[("acme.json", etag_snapshot("ws-acme"))]).await;
    let mut tags: BTreeMap<String, String> = BTreeMap::new();
    for path in Fixture::ids(0).endpoints() {
        let first = server.get(&path, Some(KEY)).await;
        first.assert_ok(&format!("GET {path}"));
        let tag = strong_etag(&first, &format!("GET {path}"));
        assert_cache_headers(&first, &format!("GET {path}"));

        let again = server.get(&path, Some(KEY)).await;
        assert_eq!(again.status, 200, "GET {path} again");
        assert_eq!(
            again.header("etag"),
            Some(tag.as_str()),
            "GET {path} twice: the ETag changed"
        );
        assert_eq!(again.body, first.body, "GET {path} twice: the body changed");

        let auth = format!("Bearer {KEY}");
        let head = server
            .request("HEAD", &path, &[("Authorization", &auth)])
            .await;
        assert_eq!(head.status, 200, "HEAD {path}");
        assert_eq!(head.header("etag"), Some(tag.as_str()), "HEAD {path}: ETag");

        let cond = server
            .request(
                "GET",
                &path,
                &[("Authorization", &auth), ("If-None-Match", &tag)],
            )
            .await;
        assert_eq!(
            cond.status,
            304,
            "GET {path} with If-None-Match: {tag}: body {}",
            cond.text()
        );
        assert!(
            cond.body.is_empty(),
            "GET {path}: 304 with a body {:?}",
            cond.text()
        );
        assert_eq!(
            cond.header("etag"),
            Some(tag.as_str()),
            "GET {path}: ETag of the 304"
        );
        assert_cache_headers(&cond, &format!("GET {path} (304)"));
        assert!(
            cond.header("content-length").is_none_or(|l| l == "0"),
            "GET {path}: 304 with content-length {:?}",
            cond.header("content-length")
        );

        if let Some(other) = tags.insert(tag.clone(), path.clone()) {
            panic!("GET {path} and GET {other} share the ETag {tag}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_query_or_page_has_another_etag() {
    let server = TestServer::start(&[("acme.json", etag_snapshot("ws-acme"))]).await;
    let first_feed = server.get_ok("/feed?limit=2", KEY).await;
    let cursor = first_feed["pagination"]["nextCursor"]
        .as_str()
        .expect("a second feed page")
        .to_owned();
    let paths = [
        "/tasks".to_owned(),
        "/tasks?limit=1".to_owned(),
        "/tasks?limit=2".to_owned(),
        "/tasks?limit=1&offset=1".to_owned(),
        "/tasks?limit=1&offset=2".to_owned(),
        "/tasks?filter[status]=triage".to_owned(),
        "/feed".to_owned(),
        "/feed?limit=2".to_owned(),
        format!("/feed?limit=2&cursor={}", enc(&cursor)),
        format!("/meetings/{}", uuid(7)),
        format!("/meetings/{}?include=notes", uuid(7)),
    ];
    let mut seen: BTreeMap<String, &str> = BTreeMap::new();
    let mut bodies = BTreeSet::new();
    for path in &paths {
        let resp = server.get(path, Some(KEY)).await;
        resp.assert_ok(&format!("GET {path}"));
        bodies.insert(resp.body.clone());
        let tag = strong_etag(&resp, &format!("GET {path}"));
        if let Some(other) = seen.insert(tag.clone(), path) {
            panic!("GET {path} and GET {other} share the ETag {tag}");
        }
        // The tag of one page does not validate another page.
        for (other_tag, other_path) in &seen {
            if other_tag != &tag {
                let auth = format!("Bearer {KEY}");
                let resp = server
                    .request(
                        "GET",
                        path,
                        &[("Authorization", &auth), ("If-None-Match", other_tag)],
                    )
                    .await;
                assert_eq!(
                    resp.status, 200,
                    "GET {path} with the ETag of GET {other_path}"
                );
            }
        }
    }
    // The pages really differ (else a shared tag would be no bug).
    assert_eq!(
        bodies.len(),
        paths.len(),
        "the pages' bodies are not all different"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_snapshot_version_changes_the_etag_of_the_same_request() {
    let mut v1 = etag_snapshot("ws-acme");
    v1["version"] = json!("v1");
    let server = TestServer::start(&[("acme.json", v1.clone())]).await;
    let paths = [
        "/tasks".to_owned(),
        "/portfolio".to_owned(),
        format!("/tasks/{}", uuid(2)),
    ];
    let mut old = Vec::new();
    for path in &paths {
        let resp = server.get(path, Some(KEY)).await;
        resp.assert_ok(path);
        old.push(strong_etag(&resp, path));
    }
    // The same records under a new version: the request is the same, the
    // representation is (here) byte-identical, yet a new version is a new tag.
    let mut v2 = v1.clone();
    v2["version"] = json!("v2");
    replace_json(server.dir(), "acme.json", &v2);
    server.wait_version("/tasks", KEY, "v2").await;
    for (path, old_tag) in paths.iter().zip(&old) {
        let resp = server.get(path, Some(KEY)).await;
        let tag = strong_etag(&resp, path);
        assert_ne!(&tag, old_tag, "GET {path}: the ETag survived a new version");
        let auth = format!("Bearer {KEY}");
        let cond = server
            .request(
                "GET",
                path,
                &[("Authorization", &auth), ("If-None-Match", old_tag)],
            )
            .await;
        assert_eq!(cond.status, 200, "GET {path} with the ETag of v1");
        assert_eq!(cond.header("etag"), Some(tag.as_str()));
    }
}

/// A strong ETag must change whenever the representation does (RFC 9110
/// §8.8.1). A file rewritten with other records but the same `version`
/// label is served (the loader reloads it), so its answers must not be
/// validated by the old tags.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changed_records_under_an_unchanged_version_label_change_the_etag() {
    let mut v1 = etag_snapshot("ws-acme");
    v1["version"] = json!("same-label");
    let server = TestServer::start(&[("acme.json", v1.clone())]).await;
    let before = server.get("/tasks", Some(KEY)).await;
    before.assert_ok("GET /tasks");
    let old_tag = strong_etag(&before, "GET /tasks");

    let mut v2 = v1.clone();
    add(&mut v2, "tasks", [task(90, 1, "2026-05-01T10:00:00Z")]);
    replace_json(server.dir(), "acme.json", &v2);
    eventually("the rewritten file is served", async || {
        let resp = server.get("/tasks", Some(KEY)).await;
        if resp.status == 200 && resp.ids().contains(&uuid(90)) {
            Ok(())
        } else {
            Err(format!("status {}, body {}", resp.status, resp.text()))
        }
    })
    .await;
    let after = server.get("/tasks", Some(KEY)).await;
    assert_ne!(after.body, before.body);
    let new_tag = strong_etag(&after, "GET /tasks");
    assert_ne!(
        new_tag, old_tag,
        "GET /tasks: another body under the same strong ETag"
    );
    let auth = format!("Bearer {KEY}");
    let cond = server
        .request(
            "GET",
            "/tasks",
            &[("Authorization", &auth), ("If-None-Match", &old_tag)],
        )
        .await;
    assert_eq!(
        cond.status, 200,
        "a client holding the old body was told 304 Not Modified"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn if_none_match_lists_weak_tags_and_stale_tags() {
    let server = TestServer::start(&[("acme.json", etag_snapshot("ws-acme"))]).await;
    let path = "/tasks?limit=3";
    let resp = server.get(path, Some(KEY)).await;
    resp.assert_ok(path);
    let tag = strong_etag(&resp, path);
    let auth = format!("Bearer {KEY}");
    let cases = [
        (tag.clone(), 304),
        (format!("\"stale-1\", {tag}"), 304),
        (format!("{tag},\"stale-2\""), 304),
        (format!("\"a\",  {tag} , \"b\""), 304),
        (format!("W/{tag}"), 304),
        (format!("\"stale-1\", W/{tag}"), 304),
        ("*".to_owned(), 304),
        ("\"0000000000000000-0000000000000000\"".to_owned(), 200),
        ("\"stale-1\", \"stale-2\"".to_owned(), 200),
        (format!("W/\"{}\"", &tag[2..tag.len() - 1]), 200),
        (tag.trim_matches('"').to_owned(), 200),
    ];
    let mut failures = Vec::new();
    for (value, want) in &cases {
        let resp = server
            .request(
                "GET",
                path,
                &[("Authorization", &auth), ("If-None-Match", value)],
            )
            .await;
        let problem = if resp.status != *want {
            Some(format!("status {}", resp.status))
        } else if *want == 304 && !resp.body.is_empty() {
            Some(format!("304 with body {:?}", resp.text()))
        } else if resp.header("etag") != Some(tag.as_str()) {
            Some(format!("ETag {:?}", resp.header("etag")))
        } else {
            None
        };
        if let Some(problem) = problem {
            failures.push(format!(
                "If-None-Match: {value} (expected {want}): {problem}"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_carry_no_etag_and_are_never_304() {
    let server = TestServer::start(&[("acme.json", etag_snapshot("ws-acme"))]).await;
    let tasks_tag = strong_etag(&server.get("/tasks", Some(KEY)).await, "GET /tasks");
    let good = format!("Bearer {KEY}");
    let good = good.as_str();
    let wrong = "Bearer cura_not_a_known_key";
    // (method, path, authorization, status)
    let cases: Vec<(&str, String, Option<&str>, u16)> = vec![
        ("GET", "/tasks".into(), None, 401),
        ("GET", "/tasks".into(), Some(wrong), 401),
        ("GET", format!("/tasks/{}", uuid(2)), None, 401),
        ("GET", "/tasks?limit=0".into(), Some(good), 400),
        ("GET", "/tasks/not-a-uuid".into(), Some(good), 400),
        ("GET", format!("/tasks/{}", uuid(999)), Some(good), 404),
        (
            "GET",
            format!("/portfolio/{}/tasks", uuid(999)),
            Some(good),
            404,
        ),
        ("GET", "/no/such/path".into(), Some(good), 404),
        ("POST", "/tasks".into(), Some(good), 405),
    ];
    let mut failures = Vec::new();
    for (method, path, auth, want) in &cases {
        for inm in ["*", tasks_tag.as_str(), "W/\"x\""] {
            let mut headers = vec![("If-None-Match", inm)];
            if let Some(a) = auth {
                headers.push(("Authorization", a));
            }
            let resp = server.request(method, path, &headers).await;
            if let Some(problem) = resp.error_problem(*want) {
                failures.push(format!("{method} {path} If-None-Match {inm}: {problem}"));
            } else if let Some(tag) = resp.header("etag") {
                failures.push(format!(
                    "{method} {path} If-None-Match {inm}: a {want} with ETag {tag}"
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_of_the_same_snapshot_give_the_same_etags() {
    let snap = etag_snapshot("ws-acme");
    let a = TestServer::start(&[("acme.json", snap.clone())]).await;
    let b = TestServer::start(&[("acme.json", snap)]).await;
    let auth = format!("Bearer {KEY}");
    let mut paths = Fixture::ids(0).endpoints();
    paths.push("/tasks?limit=2&offset=1".into());
    for path in paths {
        let ra = a.get(&path, Some(KEY)).await;
        let rb = b.get(&path, Some(KEY)).await;
        let ta = strong_etag(&ra, &format!("replica A: GET {path}"));
        let tb = strong_etag(&rb, &format!("replica B: GET {path}"));
        assert_eq!(ra.body, rb.body, "GET {path}: the replicas' bodies differ");
        assert_eq!(ta, tb, "GET {path}: the replicas' ETags differ");
        // A client moved by the balancer to another replica revalidates.
        let cond = b
            .request(
                "GET",
                &path,
                &[("Authorization", &auth), ("If-None-Match", &ta)],
            )
            .await;
        assert_eq!(cond.status, 304, "GET {path} on B with A's ETag");
    }
}

// ---------------------------------------------------------------------------
// Compression.
// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_bodies_are_gzipped_when_asked_and_decompress_to_the_identity_body() {
    let snap = tasks_snapshot("ws-gzip", KEY, "v1", 100, 200);
    let server = TestServer::start(&[("gzip.json", snap)]).await;
    let auth = format!("Bearer {KEY}");
    let path = "/tasks?limit=100";

    let plain = server.get(path, Some(KEY)).await;
    plain.assert_ok("identity");
    assert!(plain.body.len() > 10_000, "the body is large");
    assert_eq!(plain.header("content-encoding"), None, "no Accept-Encoding");
    let plain_tag = strong_etag(&plain, "identity");

    for accept in [
        "gzip",
        "gzip, deflate, br",
        "br;q=1.0, gzip;q=0.5",
        "GZIP",
        "*",
    ] {
        let resp = server
            .request(
                "GET",
                path,
                &[("Authorization", &auth), ("Accept-Encoding", accept)],
            )
            .await;
        assert_eq!(resp.status, 200, "Accept-Encoding: {accept}");
        assert_eq!(
            resp.header("content-encoding"),
            Some("gzip"),
            "Accept-Encoding: {accept}"
        );
        assert!(
            resp.body.len() < plain.body.len() / 2,
            "Accept-Encoding: {accept}: {} compressed bytes of {}",
            resp.body.len(),
            plain.body.len()
        );
        assert_eq!(
            gunzip(&resp.body),
            plain.body,
            "Accept-Encoding: {accept}: the body does not decompress to the identity body"
        );
        assert_eq!(resp.header("content-type"), Some("application/json"));
        assert_eq!(resp.header("x-snapshot-version"), Some("v1"));
        assert_cache_headers(&resp, &format!("Accept-Encoding: {accept}"));
        assert!(
            lists(&resp, "vary", "Accept-Encoding"),
            "a response chosen by Accept-Encoding must say Vary: Accept-Encoding, got {:?}",
            resp.header("vary")
        );
        let gz_tag = strong_etag(&resp, "gzip");
        assert_ne!(
            gz_tag, plain_tag,
            "the gzip representation shares the identity ETag"
        );

        // Revalidating the gzip representation.
        let cond = server
            .request(
                "GET",
                path,
                &[
                    ("Authorization", &auth),
                    ("Accept-Encoding", accept),
                    ("If-None-Match", &gz_tag),
                ],
            )
            .await;
        assert_eq!(cond.status, 304, "If-None-Match with the gzip ETag");
        assert_eq!(cond.header("etag"), Some(gz_tag.as_str()));
    }

    for accept in ["gzip;q=0", "gzip; q=0.0, br", "identity", "br, deflate"] {
        let resp = server
            .request(
                "GET",
                path,
                &[("Authorization", &auth), ("Accept-Encoding", accept)],
            )
            .await;
        assert_eq!(resp.status, 200, "Accept-Encoding: {accept}");
        assert_eq!(
            resp.header("content-encoding"),
            None,
            "Accept-Encoding: {accept} refuses gzip"
        );
        assert_eq!(resp.body, plain.body, "Accept-Encoding: {accept}");
        assert_eq!(resp.header("etag"), Some(plain_tag.as_str()));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn small_bodies_are_not_compressed() {
    let server = TestServer::start(&[("acme.json", etag_snapshot("ws-acme"))]).await;
    let auth = format!("Bearer {KEY}");
    let gz = ("Accept-Encoding", "gzip");
    let record = format!("/tasks/{}", uuid(2));
    let plain = server.get(&record, Some(KEY)).await;
    plain.assert_ok(&record);
    assert!(plain.body.len() < 1024, "a single task is under 1 KiB");

    let resp = server
        .request("GET", &record, &[("Authorization", &auth), gz])
        .await;
    assert_eq!(resp.status, 200);
    assert_eq!(resp.header("content-encoding"), None, "GET {record}");
    assert_eq!(resp.body, plain.body);
    assert_eq!(
        resp.header("etag"),
        plain.header("etag"),
        "an uncompressed answer is the identity representation, with its tag"
    );

    for (path, auth) in [
        ("/healthz", None),
        ("/readyz", None),
        ("/tasks", None),
        ("/tasks/not-a-uuid", Some(auth.as_str())),
    ] {
        let mut headers = vec![gz];
        if let Some(a) = auth {
            headers.push(("Authorization", a));
        }
        let resp = server.request("GET", path, &headers).await;
        assert_eq!(resp.header("content-encoding"), None, "GET {path}");
        assert!(
            serde_json::from_slice::<Value>(&resp.body).is_ok(),
            "GET {path}: not plain JSON"
        );
    }
}

// ---------------------------------------------------------------------------
// /metrics on the admin listener.
// ---------------------------------------------------------------------------

const REQUESTS: &str = "portfolio_replica_http_requests_total";
const DURATION: &str = "portfolio_replica_http_request_duration_seconds";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_requests_by_route_and_status_with_a_latency_histogram() {
    let server = TestServer::start(&[("acme.json", etag_snapshot("ws-acme"))]).await;
    let auth = format!("Bearer {KEY}");
    let wrong = "Bearer cura_wrong_key".to_owned();

    let (resp, _) = scrape(&server).await;
    assert!(
        resp.header("content-type")
            .is_some_and(|ct| ct.starts_with("text/plain")),
        "/metrics Content-Type {:?}",
        resp.header("content-type")
    );

    let mut tag = String::new();
    for _ in 0..3 {
        let r = server.get("/tasks", Some(KEY)).await;
        assert_eq!(r.status, 200);
        tag = strong_etag(&r, "/tasks");
    }
    let head = server
        .request("HEAD", "/tasks", &[("Authorization", &auth)])
        .await;
    assert_eq!(head.status, 200);
    let not_modified = server
        .request(
            "GET",
            "/tasks",
            &[("Authorization", &auth), ("If-None-Match", &tag)],
        )
        .await;
    assert_eq!(not_modified.status, 304);
    for _ in 0..2 {
        assert_eq!(server.get("/tasks", None).await.status, 401);
    }
    let r = server
        .request("GET", "/tasks", &[("Authorization", &wrong)])
        .await;
    assert_eq!(r.status, 401);
    assert_eq!(server.get("/tasks?limit=0", Some(KEY)).await.status, 400);
    let unknown = format!("/tasks/{}", uuid(999));
    assert_eq!(server.get(&unknown, Some(KEY)).await.status, 404);
    assert_eq!(server.get("/portfolio", None).await.status, 401);
    assert_eq!(server.get("/no/such/path", Some(KEY)).await.status, 404);
    // /metrics is for operators only: not on the API listener.
    assert_eq!(server.get("/metrics", Some(KEY)).await.status, 404);

    let (_, m) = scrape(&server).await;
    let counts = [
        ("/tasks", "200", 4.0),
        ("/tasks", "304", 1.0),
        ("/tasks", "401", 3.0),
        ("/tasks", "400", 1.0),
        ("/tasks/{id}", "404", 1.0),
        ("/portfolio", "401", 1.0),
    ];
    let mut failures = Vec::new();
    for (route, status, want) in counts {
        let got = value_of(&m, REQUESTS, &[("route", route), ("status", status)]);
        if got != Some(want) {
            failures.push(format!(
                "{REQUESTS}{{route={route:?},status={status:?}}} is {got:?}, expected {want}"
            ));
        }
    }
    // The unknown path and the /metrics probe: 404s under one catch-all route.
    let unrouted_404: f64 = m
        .iter()
        .filter(|s| {
            s.name == REQUESTS
                && s.labels.get("status").map(String::as_str) == Some("404")
                && !s.labels["route"].starts_with('/')
        })
        .map(|s| s.value)
        .sum();
    if unrouted_404 != 2.0 {
        failures.push(format!(
            "404s of unknown paths counted {unrouted_404}, expected 2"
        ));
    }
    // Nothing else was asked of /tasks.
    let tasks_total: f64 = m
        .iter()
        .filter(|s| {
            s.name == REQUESTS && s.labels.get("route").map(String::as_str) == Some("/tasks")
        })
        .map(|s| s.value)
        .sum();
    if tasks_total != 9.0 {
        failures.push(format!("/tasks requests sum to {tasks_total}, expected 9"));
    }

    // The histogram of /tasks: cumulative buckets ending in +Inf = _count.
    let count = value_of(&m, &format!("{DURATION}_count"), &[("route", "/tasks")]);
    if count != Some(9.0) {
        failures.push(format!(
            "{DURATION}_count{{route=\"/tasks\"}} is {count:?}, expected 9"
        ));
    }
    if value_of(&m, &format!("{DURATION}_sum"), &[("route", "/tasks")]).is_none_or(|s| s < 0.0) {
        failures.push(format!("no {DURATION}_sum{{route=\"/tasks\"}}"));
    }
    let mut buckets: Vec<(f64, f64)> = m
        .iter()
        .filter(|s| {
            s.name == format!("{DURATION}_bucket")
                && s.labels.get("route").map(String::as_str) == Some("/tasks")
        })
        .map(|s| {
            let le = &s.labels["le"];
            let le = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().expect("le")
            };
            (le, s.value)
        })
        .collect();
    buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    if buckets.len() < 5 {
        failures.push(format!("only {} buckets for /tasks", buckets.len()));
    } else {
        if buckets.last() != Some(&(f64::INFINITY, 9.0)) {
            failures.push(format!(
                "the +Inf bucket is {:?}, expected 9",
                buckets.last()
            ));
        }
        if buckets.windows(2).any(|w| w[1].1 < w[0].1) {
            failures.push(format!("buckets are not cumulative: {buckets:?}"));
        }
    }

    let in_flight = value_of(&m, "portfolio_replica_http_requests_in_flight", &[]);
    if in_flight != Some(0.0) {
        failures.push(format!(
            "in-flight gauge at rest is {in_flight:?}, expected 0"
        ));
    }
    let build = value_of(
        &m,
        "portfolio_replica_build_info",
        &[("version", env!("CARGO_PKG_VERSION"))],
    );
    if build != Some(1.0) {
        failures.push(format!(
            "portfolio_replica_build_info{{version=..}} is {build:?}"
        ));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The records of `etag_snapshot`, by collection.
const ETAG_SNAPSHOT_COUNTS: [(&str, f64); 8] = [
    ("companies", 1.0),
    ("tasks", 6.0),
    ("roles", 1.0),
    ("feed", 6.0),
    ("notes", 1.0),
    ("metrics", 1.0),
    ("meetings", 1.0),
    ("meeting_notes", 1.0),
];

const LOADS: &str = "portfolio_replica_snapshot_loads_total";
const FAILURES: &str = "portfolio_replica_snapshot_load_failures_total";
const LAST_LOAD: &str = "portfolio_replica_snapshot_last_load_timestamp_seconds";
const RECORDS: &str = "portfolio_replica_snapshot_records";

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_secs_f64()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_follow_snapshot_loads_failures_records_and_deletions() {
    let started = unix_now();
    let mut globex = fixture("ws-globex", &[OTHER_KEY], 1000);
    globex["version"] = json!("g1");
    let server = TestServer::start(&[
        ("acme.json", etag_snapshot("ws-acme")),
        ("globex.json", globex),
    ])
    .await;

    let (_, m) = scrape(&server).await;
    let mut failures = Vec::new();
    for file in ["acme.json", "globex.json"] {
        let got = value_of(&m, LOADS, &[("file", file)]);
        if got != Some(1.0) {
            failures.push(format!("{LOADS}{{file={file:?}}} is {got:?}, expected 1"));
        }
    }
    let status = server
        .snapshot_status("acme.json")
        .await
        .expect("acme.json listed");
    for (collection, want) in ETAG_SNAPSHOT_COUNTS {
        let got = value_of(
            &m,
            RECORDS,
            &[("workspace", "ws-acme"), ("collection", collection)],
        );
        if got != Some(want) {
            failures.push(format!(
                "{RECORDS}{{workspace=\"ws-acme\",collection={collection:?}}} is {got:?}, expected {want}"
            ));
        }
        if status["records"][collection].as_f64() != Some(want) {
            failures.push(format!(
                "/snapshots says {} {collection}, expected {want}",
                status["records"][collection]
            ));
        }
    }
    let globex_tasks = value_of(
        &m,
        RECORDS,
        &[("workspace", "ws-globex"), ("collection", "tasks")],
    );
    if globex_tasks != Some(1.0) {
        failures.push(format!("ws-globex tasks {globex_tasks:?}, expected 1"));
    }
    let first_load = value_of(&m, LAST_LOAD, &[("workspace", "ws-acme")]);
    match first_load {
        Some(t) if t >= started - 5.0 && t <= unix_now() + 5.0 => {}
        other => failures.push(format!("{LAST_LOAD}{{workspace=\"ws-acme\"}} is {other:?}")),
    }
    assert!(
        failures.is_empty(),
        "after the first scan:\n{}",
        failures.join("\n")
    );

    // A new file that is rejected.
    write_bytes(
        server.dir(),
        "bad.json",
        b"{\"format_version\": 1, \"workspace\": ",
    );
    eventually("bad.json counts as a failure", async || {
        let (_, m) = scrape(&server).await;
        match value_of(&m, FAILURES, &[("file", "bad.json")]) {
            Some(v) if v >= 1.0 => Ok(()),
            other => Err(format!("{FAILURES}{{file=\"bad.json\"}} is {other:?}")),
        }
    })
    .await;

    // A rejected replacement of acme.json: a failure, no load, v1's figures stay.
    let mut broken = etag_snapshot("ws-acme");
    broken["format_version"] = json!(99);
    replace_json(server.dir(), "acme.json", &broken);
    eventually("the rejected acme.json counts as a failure", async || {
        let (_, m) = scrape(&server).await;
        match value_of(&m, FAILURES, &[("file", "acme.json")]) {
            Some(v) if v >= 1.0 => Ok(()),
            other => Err(format!("{FAILURES}{{file=\"acme.json\"}} is {other:?}")),
        }
    })
    .await;
    let (_, m) = scrape(&server).await;
    assert_eq!(value_of(&m, LOADS, &[("file", "acme.json")]), Some(1.0));
    assert_eq!(
        value_of(
            &m,
            RECORDS,
            &[("workspace", "ws-acme"), ("collection", "tasks")]
        ),
        Some(6.0),
        "the previous version keeps serving, and its figures stay"
    );

    // A good replacement with more tasks: a second load, new counts, a newer time.
    let mut v2 = etag_snapshot("ws-acme");
    v2["version"] = json!("v2");
    add(
        &mut v2,
        "tasks",
        (40..44).map(|i| task(i, 1, "2026-05-01T10:00:00Z")),
    );
    replace_json(server.dir(), "acme.json", &v2);
    server.wait_version("/tasks", KEY, "v2").await;
    eventually("acme.json's second load shows", async || {
        let (_, m) = scrape(&server).await;
        let loads = value_of(&m, LOADS, &[("file", "acme.json")]);
        let tasks = value_of(
            &m,
            RECORDS,
            &[("workspace", "ws-acme"), ("collection", "tasks")],
        );
        let last = value_of(&m, LAST_LOAD, &[("workspace", "ws-acme")]);
        if loads == Some(2.0) && tasks == Some(10.0) && last >= first_load {
            Ok(())
        } else {
            Err(format!(
                "loads {loads:?}, tasks {tasks:?}, last load {last:?}"
            ))
        }
    })
    .await;

    // Deleting globex.json removes its workspace's series, and only those.
    std::fs::remove_file(server.dir().join("globex.json")).expect("delete globex.json");
    eventually("ws-globex is unloaded", async || {
        match server.get("/tasks", Some(OTHER_KEY)).await.status {
            401 => Ok(()),
            status => Err(format!("its key still gets {status}")),
        }
    })
    .await;
    eventually("ws-globex's series disappear", async || {
        let (resp, _) = scrape(&server).await;
        let text = resp.text();
        match text.lines().find(|l| l.contains("workspace=\"ws-globex\"")) {
            Some(line) => Err(format!("still there: {line}")),
            None => Ok(()),
        }
    })
    .await;
    let (_, m) = scrape(&server).await;
    assert!(value_of(&m, LAST_LOAD, &[("workspace", "ws-acme")]).is_some());
    assert_eq!(
        value_of(
            &m,
            RECORDS,
            &[("workspace", "ws-acme"), ("collection", "tasks")]
        ),
        Some(10.0)
    );
}

// ---------------------------------------------------------------------------
// Graceful shutdown.
// ---------------------------------------------------------------------------

/// Whether a new connection to `addr` is refused (or at least not served).
async fn refuses(addr: SocketAddr) -> bool {
    match tokio::time::timeout(Duration::from_millis(500), TcpStream::connect(addr)).await {
        Ok(Err(_)) => true,
        Ok(Ok(_)) | Err(_) => false,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_drains_finishes_the_in_flight_response_and_exits_0() {
    let dir = tempdir();
    write_json(
        dir.path(),
        "big.json",
        &tasks_snapshot("ws-big", KEY, "v1", 100, in_flight_title_len()),
    );
    let mut bin = Binary::start(dir.path(), &[], &[]).await;
    let auth = format!("Bearer {KEY}");

    // A keep-alive connection that has been served and sits idle.
    let mut idle = Conn::open(bin.api).await;
    idle.send_get("/healthz", &[]).await;
    assert_eq!(
        idle.response(IO_TIMEOUT)
            .await
            .expect_response("idle")
            .status,
        200
    );
    // A connection that has sent part of its next request head.
    let mut partial = Conn::open(bin.api).await;
    partial
        .send(b"GET /readyz HTTP/1.1\r\nHost: localhost\r\n")
        .await
        .expect("send half a head");
    // The in-flight request: a large answer to a client that reads slowly.
    let mut slow = Conn::open_slow_reader(bin.api).await;
    slow.send_get("/tasks?limit=100", &[("Authorization", &auth)])
        .await;
    // Wait for the first bytes: the request is being answered.
    tokio::time::timeout(IO_TIMEOUT, slow.fill())
        .await
        .expect("the response begins");

    bin.signal("TERM");
    let sigterm = Instant::now();

    // New connections are refused once the signal is handled, on both listeners.
    eventually("new API connections are refused", async || {
        if refuses(bin.api).await {
            Ok(())
        } else {
            Err("a new connection was accepted".into())
        }
    })
    .await;
    assert!(refuses(bin.admin).await, "the admin listener still accepts");
    assert!(
        bin.exited().is_none(),
        "the process exited with a response still in flight:\n{}",
        bin.stderr_text()
    );

    // The already-open connection with half a head is answered: /readyz is
    // 503 while the replica drains.
    partial.send(b"\r\n").await.expect("finish the head");
    let readyz = partial
        .response(IO_TIMEOUT)
        .await
        .expect_response("/readyz on an open connection after SIGTERM");
    assert_eq!(
        readyz.status,
        503,
        "/readyz while draining: {}",
        readyz.text()
    );
    assert!(
        partial
            .closed_within(Duration::from_secs(5))
            .await
            .is_some(),
        "the connection stays open after its answer during shutdown"
    );

    // The idle keep-alive connection is closed (it cannot be asked again);
    // if a request slips in before that, it is told 503, never 200.
    let _ = idle
        .send(b"GET /readyz HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .await;
    match idle.response(Duration::from_secs(5)).await {
        Answer::Closed => {}
        Answer::Response(r) => assert_eq!(r.status, 503, "idle connection after SIGTERM"),
        Answer::TimedOut => {
            panic!("the idle keep-alive connection was neither closed nor answered")
        }
    }

    // The in-flight response completes, whole.
    let resp = slow
        .response(IO_TIMEOUT)
        .await
        .expect_response("the in-flight /tasks?limit=100");
    assert_eq!(resp.status, 200);
    let body = resp.json();
    assert_eq!(
        body["data"].as_array().map(Vec::len),
        Some(100),
        "the in-flight response is complete"
    );

    let status = bin.wait_exit(Duration::from_secs(10)).await;
    assert_eq!(
        status.code(),
        Some(0),
        "exit status after SIGTERM: {status}"
    );
    assert!(
        sigterm.elapsed() < Duration::from_secs(10),
        "the exit took {:?}, beyond the 10 s grace period",
        sigterm.elapsed()
    );
}

/// SIGTERM with a client that never finishes its request head: the process
/// waits out the grace period (here 1 s), then exits 0 anyway.
async fn a_stalled_head_delays_exit_by_at_most_the_grace(signal: &str, grace_by_env: bool) {
    let dir = tempdir();
    write_json(dir.path(), "acme.json", &fixture("ws-acme", &[KEY], 0));
    let (args, env): (&[&str], &[(&str, &str)]) = if grace_by_env {
        (&[], &[("PORTFOLIO_SHUTDOWN_GRACE", "1")])
    } else {
        (&["--shutdown-grace", "1"], &[])
    };
    let mut bin = Binary::start(dir.path(), args, env).await;
    let stalled = Conn::open(bin.api).await;
    stalled
        .send(b"GET /tasks HTTP/1.1\r\nHost: localhost\r\nAuthori")
        .await
        .expect("send half a head");
    // Let the server read those bytes, so the connection is busy, not idle.
    tokio::time::sleep(Duration::from_millis(100)).await;

    bin.signal(signal);
    let sent = Instant::now();
    let status = bin.wait_exit(Duration::from_secs(5)).await;
    let took = sent.elapsed();
    assert_eq!(
        status.code(),
        Some(0),
        "exit status after SIG{signal}: {status}"
    );
    assert!(
        took < Duration::from_secs(3),
        "exit took {took:?} with a 1 s grace period"
    );
    assert!(
        took >= Duration::from_millis(800),
        "exit took only {took:?}: the grace period was not given to the open connection"
    );
    drop(stalled);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_with_a_stalled_request_head_exits_0_after_the_grace_flag() {
    a_stalled_head_delays_exit_by_at_most_the_grace("TERM", false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigint_with_a_stalled_request_head_exits_0_after_the_grace_env_var() {
    a_stalled_head_delays_exit_by_at_most_the_grace("INT", true).await;
}

// ---------------------------------------------------------------------------
// Logging.
// ---------------------------------------------------------------------------

/// Keys made only for the logging tests, each with an unmistakable secret.
const LOG_VALID_KEY: &str = "cura_V4lidS3cretZq81";
const LOG_WRONG_KEY: &str = "cura_Wr0ngS3cretXk27";
const LOG_QUERY_KEY: &str = "cura_Qu3ryS3cretMw55";
const LOG_PATH_KEY: &str = "cura_P4thS3cretJr09";
const LOG_FILE_KEY: &str = "cura_F1leS3cretHb64";

/// Fails if any key text, or the secret part after the prefix, is in `text`.
fn assert_no_key_in(text: &str, keys: &[&str], what: &str) {
    for key in keys {
        let secret = key.strip_prefix("cura_").expect("a cura_ key");
        for needle in [*key, secret] {
            if let Some(line) = text.lines().find(|l| l.contains(needle)) {
                panic!("{what} contains {needle:?}:\n{line}");
            }
        }
    }
}

/// Parses every line of `stderr` as a JSON log event.
fn json_lines(stderr: &str) -> Vec<Value> {
    stderr
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: Value = serde_json::from_str(l)
                .unwrap_or_else(|e| panic!("a log line is not JSON ({e}): {l:?}"));
            assert!(
                v.get("level").is_some_and(Value::is_string)
                    && v.get("fields").is_some_and(Value::is_object),
                "a log line without level or fields: {l}"
            );
            v
        })
        .collect()
}

fn message(event: &Value) -> &str {
    event["fields"]["message"].as_str().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_logs_have_a_line_per_request_and_reload_and_never_a_key() {
    let dir = tempdir();
    let mut v1 = fixture("ws-acme", &[LOG_VALID_KEY], 0);
    v1["version"] = json!("v1");
    write_json(dir.path(), "acme.json", &v1);
    let mut bin = Binary::start(
        dir.path(),
        &["--log-format", "json"],
        &[("RUST_LOG", "debug")],
    )
    .await;
    let (api, admin) = (bin.api, bin.admin);

    // (path, key, expected route label, expected status)
    let requests: Vec<(String, Option<&str>, &str, u16)> = vec![
        ("/tasks".into(), Some(LOG_VALID_KEY), "/tasks", 200),
        ("/tasks".into(), Some(LOG_WRONG_KEY), "/tasks", 401),
        (
            format!("/feed?key={LOG_QUERY_KEY}&api_key={LOG_QUERY_KEY}"),
            None,
            "/feed",
            401,
        ),
        (
            format!("/portfolio?key={LOG_QUERY_KEY}"),
            Some(LOG_VALID_KEY),
            "/portfolio",
            200,
        ),
        (
            format!("/notes/{LOG_PATH_KEY}"),
            Some(LOG_VALID_KEY),
            "/notes/{id}",
            400,
        ),
        ("/tasks?limit=1".into(), Some(LOG_VALID_KEY), "/tasks", 200),
    ];
    for (path, key, _, status) in &requests {
        let resp = get_from(api, path, *key).await.expect("request");
        assert_eq!(resp.status, *status, "GET {path}: {}", resp.text());
    }

    // A reload, then a rejected file whose api_keys entry holds a plain key
    // where its hash belongs (an operator's mistake).
    let mut v2 = v1.clone();
    v2["version"] = json!("v2");
    replace_json(dir.path(), "acme.json", &v2);
    eventually("v2 is served", async || {
        let resp = get_from(api, "/tasks", Some(LOG_VALID_KEY)).await?;
        match resp.header("x-snapshot-version") {
            Some("v2") => Ok(()),
            other => Err(format!("version {other:?}")),
        }
    })
    .await;
    let mut bad = fixture("ws-bad", &[], 500);
    bad["api_keys"] = json!([{ "sha256": LOG_FILE_KEY, "label": "oops" }]);
    replace_json(dir.path(), "bad.json", &bad);
    eventually("bad.json is rejected", async || {
        let resp = get_from(admin, "/snapshots", None).await?;
        let body = resp.json();
        let rejected = body["files"].as_array().is_some_and(|files| {
            files.iter().any(|f| {
                f["file"].as_str().is_some_and(|n| n.ends_with("bad.json"))
                    && f["error"].is_string()
            })
        });
        if rejected {
            Ok(())
        } else {
            Err(format!("{body}"))
        }
    })
    .await;

    bin.signal("TERM");
    let status = bin.wait_exit(Duration::from_secs(10)).await;
    assert_eq!(status.code(), Some(0), "exit after SIGTERM");

    let stderr = bin.stderr_text();
    let stdout = bin.stdout_text();
    let keys = [
        LOG_VALID_KEY,
        LOG_WRONG_KEY,
        LOG_QUERY_KEY,
        LOG_PATH_KEY,
        LOG_FILE_KEY,
    ];
    assert_no_key_in(&stderr, &keys, "stderr");
    assert_no_key_in(&stdout, &keys, "stdout");
    let events = json_lines(&stderr);

    // One debug line per API request, naming route and status only.
    let mut logged: Vec<(String, u64)> = events
        .iter()
        .filter(|e| message(e) == "request")
        .filter(|e| {
            let route = e["fields"]["route"].as_str().unwrap_or_default();
            route != "/readyz" && route != "/healthz"
        })
        .map(|e| {
            assert_eq!(e["level"], "DEBUG", "request line: {e}");
            assert_eq!(e["fields"]["method"], "GET", "request line: {e}");
            assert!(e["fields"]["elapsed_us"].is_u64(), "request line: {e}");
            (
                e["fields"]["route"].as_str().unwrap_or_default().to_owned(),
                e["fields"]["status"].as_u64().unwrap_or_default(),
            )
        })
        .collect();
    // The wait for v2 made more /tasks requests: count only the 401s and the
    // non-/tasks routes exactly, and at least our 200s.
    let tasks_200 = logged
        .iter()
        .filter(|(r, s)| r == "/tasks" && *s == 200)
        .count();
    assert!(
        tasks_200 >= 2,
        "{tasks_200} logged /tasks 200s, expected at least 2"
    );
    logged.retain(|(r, s)| !(r == "/tasks" && *s == 200));
    logged.sort();
    let mut want: Vec<(String, u64)> = requests
        .iter()
        .filter(|(_, _, r, s)| !(*r == "/tasks" && *s == 200))
        .map(|(_, _, r, s)| (r.to_string(), u64::from(*s)))
        .collect();
    want.sort();
    assert_eq!(logged, want, "the request lines besides /tasks 200");

    // One info line for the reload, one error for the rejected file.
    assert!(
        events.iter().any(|e| e["level"] == "INFO"
            && message(e) == "snapshot loaded"
            && e["fields"]["version"] == "v2"
            && e["fields"]["workspace"] == "ws-acme"),
        "no INFO line for the reload of acme.json to v2:\n{stderr}"
    );
    assert!(
        events
            .iter()
            .any(|e| (e["level"] == "ERROR" || e["level"] == "WARN")
                && e["fields"]["file"]
                    .as_str()
                    .is_some_and(|f| f.ends_with("bad.json"))),
        "no error line for the rejected bad.json:\n{stderr}"
    );
}

/// An operator who writes plain keys into `api_keys` (a list of key strings
/// instead of `{sha256}` objects) gets the file rejected; the rejection must
/// not copy the keys into the log or into `/snapshots`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_key_in_a_rejected_snapshot_is_not_logged_or_reported() {
    const AS_STRING_LIST: &str = "cura_L1stS3cretUu30";
    const AS_STRING: &str = "cura_Str1ngS3cretPp72";
    let dir = tempdir();
    write_json(dir.path(), "acme.json", &fixture("ws-acme", &[KEY], 0));
    let mut list = fixture("ws-list", &[], 100);
    list["api_keys"] = json!([AS_STRING_LIST]);
    write_json(dir.path(), "list.json", &list);
    let mut string = fixture("ws-string", &[], 200);
    string["api_keys"] = json!(AS_STRING);
    write_json(dir.path(), "string.json", &string);

    let mut bin = Binary::start(dir.path(), &["--log-format", "json"], &[]).await;
    let snapshots = get_from(bin.admin, "/snapshots", None)
        .await
        .expect("/snapshots");
    let body = snapshots.json();
    for name in ["list.json", "string.json"] {
        let rejected = body["files"].as_array().is_some_and(|files| {
            files.iter().any(|f| {
                f["file"].as_str().is_some_and(|n| n.ends_with(name)) && f["error"].is_string()
            })
        });
        assert!(rejected, "{name} is not reported rejected: {body}");
    }
    bin.signal("TERM");
    bin.wait_exit(Duration::from_secs(10)).await;
    let keys = [AS_STRING_LIST, AS_STRING];
    let stderr = bin.stderr_text();
    json_lines(&stderr);
    assert_no_key_in(&stderr, &keys, "the log");
    assert_no_key_in(&snapshots.text(), &keys, "GET /snapshots");
}

// ---------------------------------------------------------------------------
// Hardening: head size, header-read timeout, keep-alive timeout, connection cap.
// ---------------------------------------------------------------------------

/// Serves the fixture with `limits` changed by `configure`.
async fn hardened(
    configure: impl FnOnce(&mut portfolio_replica::server::HttpLimits),
) -> TestServer {
    let dir = tempdir();
    write_json(dir.path(), "acme.json", &fixture("ws-acme", &[KEY], 0));
    TestServer::start_in(dir, |config| configure(&mut config.limits)).await
}

/// Sends `head` on a fresh connection: its answer, or `Closed`.
async fn send_head(addr: SocketAddr, head: &[u8]) -> Answer {
    let mut conn = Conn::open(addr).await;
    // The server may close before reading everything: that is an answer too.
    let _ = conn.send(head).await;
    conn.response(IO_TIMEOUT).await
}

/// A GET of `path` whose head carries `pad` bytes in one header.
fn padded_head(path: &str, pad: usize) -> Vec<u8> {
    format!(
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {KEY}\r\nX-Pad: {}\r\nConnection: close\r\n\r\n",
        "p".repeat(pad)
    )
    .into_bytes()
}

/// Fails unless `answer` refuses an oversized head: one of `statuses`, or the
/// connection closed without an answer.
fn assert_refused(answer: Answer, statuses: &[u16], context: &str) {
    match answer {
        Answer::Closed => {}
        Answer::Response(r) if statuses.contains(&r.status) => {}
        Answer::Response(r) => panic!("{context}: status {} ({})", r.status, r.text()),
        Answer::TimedOut => panic!("{context}: neither answered nor closed"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_head_over_the_limit_is_431() {
    let server = hardened(|l| l.max_header_bytes = 2048).await;
    let ok = send_head(server.api, &padded_head("/tasks", 1000)).await;
    assert_eq!(ok.expect_response("a 1 KB header").status, 200);

    for pad in [3000, 7000, 20_000, 200_000] {
        let answer = send_head(server.api, &padded_head("/tasks", pad)).await;
        assert_refused(
            answer,
            &[431],
            &format!("a {pad}-byte header with a 2 KiB limit"),
        );
    }
    // Many small headers add up.
    let mut head =
        format!("GET /tasks HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {KEY}\r\n");
    for i in 0..60 {
        head.push_str(&format!("X-Header-{i:02}: {}\r\n", "v".repeat(40)));
    }
    head.push_str("Connection: close\r\n\r\n");
    assert!(head.len() > 2048);
    let answer = send_head(server.api, head.as_bytes()).await;
    assert_refused(answer, &[431], "60 headers of 50 bytes with a 2 KiB limit");

    // The server goes on serving.
    let after = send_head(server.api, &padded_head("/tasks", 10)).await;
    assert_eq!(after.expect_response("after the refusals").status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_line_over_the_limit_is_refused() {
    let server = hardened(|l| l.max_header_bytes = 2048).await;
    // Unknown query parameters are ignored, so a long one is a long URL.
    let url = |n: usize| format!("/tasks?pad={}", "u".repeat(n));
    let ok = send_head(server.api, &padded_head(&url(1000), 0)).await;
    assert_eq!(ok.expect_response("a 1 KB URL").status, 200);
    for n in [3000, 9000, 100_000] {
        let answer = send_head(server.api, &padded_head(&url(n), 0)).await;
        assert_refused(
            answer,
            &[431, 414],
            &format!("a {n}-byte URL with a 2 KiB limit"),
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_head_limit_is_16_kib() {
    let server = hardened(|_| {}).await;
    let ok = send_head(server.api, &padded_head("/tasks", 12_000)).await;
    assert_eq!(ok.expect_response("a 12 KB header").status, 200);
    let answer = send_head(server.api, &padded_head("/tasks", 20_000)).await;
    assert_refused(answer, &[431], "a 20 KB header with the default limit");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_or_trickled_request_head_is_cut_off_after_the_header_read_timeout() {
    let server = hardened(|l| {
        l.header_read_timeout = Duration::from_secs(1);
        l.keep_alive_timeout = Duration::from_secs(30);
    })
    .await;
    let api = server.api;

    let stalled = async {
        let mut conn = Conn::open(api).await;
        conn.send(b"GET /tasks HTTP/1.1\r\nHost: localhost\r\n")
            .await
            .expect("half a head");
        conn.closed_within(Duration::from_secs(5)).await
    };
    // Slowloris proper: a byte every 150 ms keeps the socket busy, yet the
    // head never completes.
    let trickled = async {
        let mut conn = Conn::open(api).await;
        let start = Instant::now();
        let head = b"GET /tasks HTTP/1.1\r\nHost: localhost\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
        for byte in head.iter() {
            if conn.send(&[*byte]).await.is_err() {
                return Some(start.elapsed());
            }
            if conn
                .closed_within(Duration::from_millis(150))
                .await
                .is_some()
            {
                return Some(start.elapsed());
            }
            if start.elapsed() > Duration::from_secs(5) {
                return None;
            }
        }
        None
    };
    // A client that takes its time before starting its head is not cut.
    let late_starter = async {
        let mut conn = Conn::open(api).await;
        tokio::time::sleep(Duration::from_millis(1500)).await;
        conn.send_get("/healthz", &[]).await;
        conn.response(IO_TIMEOUT).await
    };
    let (stalled, trickled, late) = tokio::join!(stalled, trickled, late_starter);
    for (what, took) in [("stalled", stalled), ("trickled", trickled)] {
        let took = took.unwrap_or_else(|| panic!("the {what} head was never cut off"));
        assert!(
            took >= Duration::from_millis(900),
            "the {what} head was cut after {took:?}, before the 1 s timeout"
        );
        assert!(
            took < Duration::from_millis(2500),
            "the {what} head was cut only after {took:?} with a 1 s timeout"
        );
    }
    assert_eq!(
        late.expect_response("a head begun after 1.5 s of idleness")
            .status,
        200
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_keep_alive_connection_is_closed_after_the_keep_alive_timeout() {
    let server = hardened(|l| {
        l.keep_alive_timeout = Duration::from_secs(1);
        l.header_read_timeout = Duration::from_secs(10);
    })
    .await;
    let api = server.api;

    let idle_after_request = async {
        let mut conn = Conn::open(api).await;
        conn.send_get("/healthz", &[]).await;
        let r = conn
            .response(IO_TIMEOUT)
            .await
            .expect_response("first request");
        assert_eq!(r.status, 200);
        conn.closed_within(Duration::from_secs(5)).await
    };
    let never_asked = async {
        let mut conn = Conn::open(api).await;
        conn.closed_within(Duration::from_secs(5)).await
    };
    // A busy connection: a request every 300 ms for 2.4 s, all on one connection.
    let busy = async {
        let mut conn = Conn::open(api).await;
        let start = Instant::now();
        let mut served = 0;
        while start.elapsed() < Duration::from_millis(2400) {
            conn.send_get("/tasks", &[("Authorization", &format!("Bearer {KEY}"))])
                .await;
            let r = conn
                .response(IO_TIMEOUT)
                .await
                .expect_response(&format!("request {served} on the busy connection"));
            assert_eq!(r.status, 200);
            served += 1;
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        (served, conn.closed_within(Duration::from_secs(5)).await)
    };
    let (idle, never, (served, busy_closed)) = tokio::join!(idle_after_request, never_asked, busy);
    for (what, took) in [("idle after a request", idle), ("never asked", never)] {
        let took = took.unwrap_or_else(|| panic!("the {what} connection was never closed"));
        assert!(
            took >= Duration::from_millis(900),
            "the {what} connection was closed after {took:?}, before the 1 s timeout"
        );
        assert!(
            took < Duration::from_millis(2500),
            "the {what} connection was closed only after {took:?} with a 1 s timeout"
        );
    }
    assert!(served >= 6, "only {served} requests on the busy connection");
    let took = busy_closed.expect("the busy connection, once idle, was never closed");
    assert!(
        took < Duration::from_millis(2500),
        "closed {took:?} after going idle"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_beyond_the_cap_wait_until_one_closes() {
    let server = hardened(|l| l.max_connections = 2).await;
    let api = server.api;
    let mut held = Vec::new();
    for i in 0..2 {
        let mut conn = Conn::open(api).await;
        conn.send_get("/healthz", &[]).await;
        let r = conn
            .response(IO_TIMEOUT)
            .await
            .expect_response(&format!("held {i}"));
        assert_eq!(r.status, 200);
        held.push(conn);
    }
    let mut third = Conn::open(api).await;
    third.send_get("/healthz", &[]).await;
    match third.response(Duration::from_millis(700)).await {
        Answer::TimedOut => {}
        other => panic!("a third connection with a cap of 2 got {other:?}"),
    }
    // Operators can still scrape while the API is full.
    let (resp, _) = scrape(&server).await;
    assert_eq!(resp.status, 200);

    drop(held.remove(0));
    let r = third
        .response(Duration::from_secs(5))
        .await
        .expect_response("the third connection once one closed");
    assert_eq!(r.status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn help_lists_every_limit_with_a_safe_default_and_its_env_var() {
    let out = cli(&["--help"]).await;
    assert_eq!(out.code, Some(0), "--help: {}", out.stderr);
    let help = out.stdout;
    // (flag, env var, default, smallest sane, largest sane)
    let flags: [(&str, &str, &str, f64, f64); 5] = [
        (
            "--max-connections",
            "PORTFOLIO_MAX_CONNECTIONS",
            "10000",
            1_000.0,
            1_000_000.0,
        ),
        (
            "--max-header-bytes",
            "PORTFOLIO_MAX_HEADER_BYTES",
            "16384",
            8_192.0,
            65_536.0,
        ),
        (
            "--header-read-timeout",
            "PORTFOLIO_HEADER_READ_TIMEOUT",
            "10",
            1.0,
            30.0,
        ),
        // Above a load balancer's usual 60 s idle timeout.
        (
            "--keep-alive-timeout",
            "PORTFOLIO_KEEP_ALIVE_TIMEOUT",
            "75",
            61.0,
            600.0,
        ),
        (
            "--shutdown-grace",
            "PORTFOLIO_SHUTDOWN_GRACE",
            "10",
            1.0,
            60.0,
        ),
    ];
    let block = |flag: &str| -> String {
        let lines: Vec<&str> = help.lines().collect();
        let start = lines
            .iter()
            .position(|l| l.trim_start().starts_with(flag))
            .unwrap_or_else(|| panic!("--help does not list {flag}:\n{help}"));
        let end = lines[start + 1..]
            .iter()
            .position(|l| l.trim_start().starts_with('-'))
            .map_or(lines.len(), |n| start + 1 + n);
        lines[start..end].join("\n")
    };
    for (flag, env, default, low, high) in flags {
        let text = block(flag);
        assert!(
            text.contains(&format!("[default: {default}]")),
            "{flag}: no [default: {default}] in\n{text}"
        );
        assert!(
            text.contains(&format!("[env: {env}")),
            "{flag}: no [env: {env}] in\n{text}"
        );
        let value: f64 = default.parse().expect("a number");
        assert!(
            (low..=high).contains(&value),
            "{flag}: default {default} is outside {low}..={high}"
        );
    }
    let log = block("--log-format");
    assert!(log.contains("[default: text]"), "--log-format:\n{log}");
    assert!(log.contains("json"), "--log-format lists json:\n{log}");
    assert!(
        log.contains("[env: PORTFOLIO_LOG_FORMAT"),
        "--log-format:\n{log}"
    );
}

/// CPU time (user + system) the process `pid` has used so far.
fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("read /proc/<pid>/stat");
    // Fields after the command name, which is in parentheses: state is the
    // first, utime the 12th and stime the 13th.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .expect("a stat line")
        .1
        .split_whitespace()
        .collect();
    let ticks: u64 =
        fields[11].parse::<u64>().expect("utime") + fields[12].parse::<u64>().expect("stime");
    let hz = Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse::<u64>().ok())
        .unwrap_or(100);
    Duration::from_millis(ticks * 1000 / hz)
}

/// Clients that stop reading a large response hold their connection past
/// the keep-alive timeout (the response is in progress, so it is not idle);
/// waiting on them must cost the server nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_readers_past_the_keep_alive_timeout_cost_no_cpu() {
    let dir = tempdir();
    write_json(
        dir.path(),
        "big.json",
        &tasks_snapshot("ws-big", KEY, "v1", 100, in_flight_title_len()),
    );
    let bin = Binary::start(dir.path(), &["--keep-alive-timeout", "1"], &[]).await;
    let auth = format!("Bearer {KEY}");
    let mut readers = Vec::new();
    for _ in 0..20 {
        let mut conn = Conn::open_slow_reader(bin.api).await;
        conn.send_get("/tasks?limit=100", &[("Authorization", &auth)])
            .await;
        assert!(
            tokio::time::timeout(IO_TIMEOUT, conn.fill())
                .await
                .unwrap_or(false),
            "the response begins"
        );
        readers.push(conn);
    }
    // Past the keep-alive timeout, with every response stalled.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let pid = bin.pid();
    let before = cpu_time(pid);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let used = cpu_time(pid) - before;
    assert!(
        used < Duration::from_millis(150),
        "the server used {used:?} of CPU in 2 s while 20 clients sat on unread responses"
    );
    drop(readers);
}
