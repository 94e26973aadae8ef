//! The admin listener's Prometheus `/metrics`: requests counted by route and
//! status with a latency histogram, an in-flight gauge and the build info,
//! and snapshot loads, load failures, record counts and last-load times
//! that follow the directory (rejected files, replacements, deletions).
//! It is not served on the API listener. (The company metrics of the API
//! are in `metrics`.)

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::json;

use crate::util::*;

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
async fn metrics_per_workspace_follow_loads_failures_records_and_deletions() {
    let started = unix_now();
    let mut globex = fixture("ws-globex", &[OTHER_KEY], 1000);
    globex["version"] = json!("g1");
    let dir = tempdir();
    write_json(dir.path(), "acme.json", &etag_snapshot("ws-acme"));
    write_json(dir.path(), "globex.json", &globex);
    let server = TestServer::start_in(dir, |c| c.metrics_per_workspace = true).await;

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

/// The sample lines of a scrape.
fn series_count(text: &str) -> usize {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn by_default_a_scrape_does_not_grow_with_the_workspaces() {
    let dir = tempdir();
    for i in 0..2 {
        write_json(
            dir.path(),
            &format!("w{i}.json"),
            &fixture(&format!("ws-{i}"), &[&format!("cura_k{i}")], 1000 * i),
        );
    }
    let server = TestServer::start_in(dir, |_| {}).await;
    let (before, m) = scrape(&server).await;
    let before = series_count(&before.text());
    assert_eq!(
        value_of(&m, "portfolio_replica_workspaces", &[("state", "serving")]),
        Some(2.0)
    );

    for i in 2..30 {
        write_json(
            server.dir(),
            &format!("w{i}.json"),
            &fixture(&format!("ws-{i}"), &[&format!("cura_k{i}")], 1000 * i),
        );
    }
    write_bytes(
        server.dir(),
        "bad.json",
        b"{\"format_version\": 1, \"workspace\": ",
    );
    eventually("28 more workspaces and a failure counted", async || {
        let (_, m) = scrape(&server).await;
        let serving = value_of(&m, "portfolio_replica_workspaces", &[("state", "serving")]);
        let failing = value_of(&m, "portfolio_replica_workspaces", &[("state", "failing")]);
        match (serving, failing) {
            (Some(30.0), Some(1.0)) => Ok(()),
            other => Err(format!("serving, failing: {other:?}")),
        }
    })
    .await;
    let (after, m) = scrape(&server).await;
    let text = after.text();
    assert_eq!(series_count(&text), before, "{text}");
    assert!(!text.contains("workspace=\""), "{text}");
    let tasks = value_of(&m, RECORDS, &[("collection", "tasks")]);
    let one = fixture("ws-x", &["cura_x"], 0)["tasks"]
        .as_array()
        .map(Vec::len);
    assert_eq!(tasks, one.map(|n| 30.0 * n as f64), "{text}");
    let young = value_of(
        &m,
        "portfolio_replica_workspaces_by_version_age",
        &[("max_seconds", "3600")],
    );
    assert_eq!(
        young,
        Some(30.0),
        "every version was loaded just now: {text}"
    );
    assert_eq!(value_of(&m, LOADS, &[]), Some(30.0), "{text}");
    assert_eq!(value_of(&m, FAILURES, &[]), Some(1.0), "{text}");
}
