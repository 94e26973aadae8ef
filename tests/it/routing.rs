//! Routing and protocol rules: the order of the 401/400/404 checks, 405 with
//! `Allow`, the path id pattern, query-string decoding and repeated or unknown
//! parameters, HEAD, `Content-Type`, `X-Snapshot-Version`, and the operational
//! endpoints (docs/api.md#order-of-checks, docs/api.md#service-endpoints).

use serde_json::json;

use crate::util::*;

const WS: &str = "ws-routing";

/// Starts a server with the one-of-everything fixture plus tasks of known statuses.
async fn server() -> TestServer {
    let mut snap = fixture(WS, &[KEY], 0);
    add(
        &mut snap,
        "tasks",
        [
            with(
                task(100, 1, "2026-03-02T10:00:00Z"),
                json!({ "status": "triage" }),
            ),
            with(
                task(101, 1, "2026-03-03T10:00:00Z"),
                json!({ "status": "in progress" }),
            ),
            with(
                task(102, 1, "2026-03-04T10:00:00Z"),
                json!({ "status": "triage" }),
            ),
        ],
    );
    TestServer::start(&[("routing.json", snap)]).await
}

/// The path templates that take an id, with `{}` where the id goes.
const BY_ID_TEMPLATES: &[&str] = &[
    "/portfolio/{}",
    "/portfolio/{}/tasks",
    "/portfolio/{}/roles",
    "/portfolio/{}/notes",
    "/portfolio/{}/metrics",
    "/portfolio/{}/meetings",
    "/tasks/{}",
    "/notes/{}",
    "/meetings/{}",
];

/// Ids that match the path pattern but name no record.
const WELL_FORMED_UNKNOWN_IDS: &[&str] = &[
    "12345678-1234-1234-8234-123456789abc",
    "12345678-1234-2234-9234-123456789abc",
    "12345678-1234-3234-a234-123456789abc",
    "12345678-1234-4234-b234-123456789abc",
    "12345678-1234-5234-A234-123456789abc",
    "12345678-1234-6234-B234-123456789abc",
    "12345678-1234-7234-8234-123456789abc",
    "12345678-1234-8234-8234-123456789abc",
    "ABCDEF01-2345-4678-89AB-CDEF01234567",
    "abcdef01-2345-4678-89ab-cdef01234567",
    "aBcDeF01-2345-4678-89aB-CdEf01234567",
    "00000000-0000-0000-0000-000000000000",
    "ffffffff-ffff-ffff-ffff-ffffffffffff",
];

/// Ids that do not match the path pattern.
const MALFORMED_IDS: &[&str] = &[
    "not-a-uuid",
    "12345678-1234-0234-8234-123456789abc",
    "12345678-1234-9234-8234-123456789abc",
    "12345678-1234-a234-8234-123456789abc",
    "12345678-1234-f234-8234-123456789abc",
    "12345678-1234-4234-c234-123456789abc",
    "12345678-1234-4234-C234-123456789abc",
    "12345678-1234-4234-7234-123456789abc",
    "12345678-1234-4234-0234-123456789abc",
    "12345678-1234-4234-f234-123456789abc",
    "FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF",
    "ffffffff-ffff-ffff-ffff-fffffffffffF",
    "00000000-0000-0000-0000-000000000001",
    "ffffffff-ffff-ffff-ffff-fffffffffffe",
    "1234567-1234-4234-8234-123456789abc",
    "123456789-1234-4234-8234-123456789abc",
    "12345678-123-4234-8234-123456789abc",
    "12345678-1234-4234-8234-123456789ab",
    "12345678-1234-4234-8234-123456789abcd",
    "12345678123442348234123456789abc",
    "12345678-1234-4234-8234-123456789abg",
    "{12345678-1234-4234-8234-123456789abc}",
    "12345678-1234-4234-8234-123456789abc-",
    "12345678_1234_4234_8234_123456789abc",
    "0",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn path_ids_follow_the_uuid_pattern_on_every_by_id_endpoint() {
    let server = server().await;
    let mut cases = Vec::new();
    for template in BY_ID_TEMPLATES {
        for id in WELL_FORMED_UNKNOWN_IDS {
            cases.push((template.replace("{}", id), 404));
        }
        for id in MALFORMED_IDS {
            cases.push((template.replace("{}", id), 400));
        }
    }
    server.check_statuses(Some(KEY), &cases).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checks_run_in_the_order_auth_then_validation_then_lookup() {
    let server = server().await;
    let ids = Fixture::ids(0);
    let unknown = uuid(999_999);
    let cases: Vec<(String, u16)> = vec![
        // A malformed id is 400 with a good key, whatever else is wrong.
        ("/portfolio/nope/tasks?limit=0".into(), 400),
        ("/meetings/nope?include=notes".into(), 400),
        // An unknown record is 404; any sub-resource of an unknown company too.
        (format!("/portfolio/{unknown}"), 404),
        (format!("/portfolio/{unknown}/tasks"), 404),
        (format!("/portfolio/{unknown}/roles"), 404),
        (format!("/portfolio/{unknown}/notes"), 404),
        (format!("/portfolio/{unknown}/metrics"), 404),
        (format!("/portfolio/{unknown}/meetings"), 404),
        (format!("/tasks/{unknown}"), 404),
        (format!("/notes/{unknown}"), 404),
        (format!("/meetings/{unknown}"), 404),
        (format!("/meetings/{unknown}?include=notes"), 404),
        // A bad query value is 400 even where the record does not exist.
        (format!("/portfolio/{unknown}/tasks?limit=0"), 400),
        (format!("/portfolio/{unknown}/notes?offset=-1"), 400),
        (format!("/portfolio/{unknown}/meetings?limit=101"), 400),
        (format!("/meetings/{unknown}?include=other"), 400),
        // An id of another collection names no record of this one.
        (format!("/portfolio/{}", ids.task), 404),
        (format!("/portfolio/{}/tasks", ids.meeting), 404),
        (format!("/tasks/{}", ids.company), 404),
        (format!("/tasks/{}", ids.note), 404),
        (format!("/notes/{}", ids.task), 404),
        (format!("/notes/{}", ids.meeting_note), 404),
        (format!("/meetings/{}", ids.meeting_note), 404),
        (format!("/meetings/{}", ids.company), 404),
    ];
    server.check_statuses(Some(KEY), &cases).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_paths_are_404_with_a_key_and_401_without() {
    let server = server().await;
    let ids = Fixture::ids(0);
    let paths: Vec<String> = vec![
        "/".into(),
        "/nope".into(),
        "/v1/portfolio".into(),
        "/meetings".into(),
        "/notes".into(),
        "/metrics".into(),
        "/snapshots".into(),
        "/feed/extra".into(),
        format!("/portfolio/{}/unknown", ids.company),
        format!("/portfolio/{}/meetings/{}", ids.company, ids.meeting),
        format!("/portfolio/{}/tasks/{}", ids.company, ids.task),
        format!("/tasks/{}/notes", ids.task),
        format!("/meetings/{}/notes", ids.meeting),
    ];
    let found: Vec<(String, u16)> = paths.iter().map(|p| (p.clone(), 404)).collect();
    server.check_statuses(Some(KEY), &found).await;
    let unauthorized: Vec<(String, u16)> = paths.iter().map(|p| (p.clone(), 401)).collect();
    server.check_statuses(None, &unauthorized).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_methods_are_405_with_allow() {
    let server = server().await;
    let ids = Fixture::ids(0);
    let auth = format!("Bearer {KEY}");
    let mut failures = Vec::new();
    for path in [
        "/portfolio".to_string(),
        format!("/portfolio/{}", ids.company),
        format!("/tasks/{}", ids.task),
        "/feed".into(),
        format!("/meetings/{}", ids.meeting),
    ] {
        for method in ["POST", "PUT", "DELETE", "PATCH", "OPTIONS"] {
            let resp = server
                .request(method, &path, &[("Authorization", &auth)])
                .await;
            if let Some(problem) = resp.error_problem(405) {
                failures.push(format!("{method} {path}: {problem}"));
                continue;
            }
            let mut allow: Vec<String> = resp
                .header("allow")
                .unwrap_or_default()
                .split(',')
                .map(|m| m.trim().to_string())
                .collect();
            allow.sort();
            if allow != ["GET", "HEAD"] {
                failures.push(format!(
                    "{method} {path}: Allow is {:?}, not \"GET, HEAD\"",
                    resp.header("allow")
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn head_answers_with_the_get_headers_and_no_body() {
    let server = server().await;
    let ids = Fixture::ids(0);
    let mut paths = ids.endpoints();
    paths.extend([
        "/nope".to_string(),
        "/tasks/not-a-uuid".to_string(),
        format!("/tasks/{}", uuid(999_999)),
        "/portfolio?limit=0".to_string(),
    ]);
    let auth = format!("Bearer {KEY}");
    let mut failures = Vec::new();
    for key in [Some(auth.as_str()), None] {
        let headers: Vec<(&str, &str)> = key.iter().map(|a| ("Authorization", *a)).collect();
        for path in &paths {
            let get = server.request("GET", path, &headers).await;
            let head = server.request("HEAD", path, &headers).await;
            let context = format!("HEAD {path} (key: {})", key.is_some());
            if head.status != get.status {
                failures.push(format!(
                    "{context}: status {} but GET gave {}",
                    head.status, get.status
                ));
            }
            if !head.body.is_empty() {
                failures.push(format!(
                    "{context}: has a body of {} bytes",
                    head.body.len()
                ));
            }
            for name in ["content-type", "x-snapshot-version", "www-authenticate"] {
                if head.header(name) != get.header(name) {
                    failures.push(format!(
                        "{context}: {name} {:?} but GET gave {:?}",
                        head.header(name),
                        get.header(name)
                    ));
                }
            }
            if let Some(len) = head.header("content-length")
                && len != get.body.len().to_string()
            {
                failures.push(format!(
                    "{context}: content-length {len} but GET sent {} bytes",
                    get.body.len()
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn successes_carry_json_content_type_and_the_snapshot_version() {
    let server = server().await;
    let mut failures = Vec::new();
    for path in Fixture::ids(0).endpoints() {
        let resp = server.get(&path, Some(KEY)).await;
        if resp.status != 200 {
            failures.push(format!("{path}: status {}", resp.status));
        }
        if resp.header("content-type") != Some("application/json") {
            failures.push(format!(
                "{path}: content-type {:?}",
                resp.header("content-type")
            ));
        }
        if resp.header("x-snapshot-version") != Some(version_of(WS).as_str()) {
            failures.push(format!(
                "{path}: x-snapshot-version {:?}",
                resp.header("x-snapshot-version")
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_without_version_gets_a_derived_one() {
    let mut snap = fixture(WS, &[KEY], 0);
    snap.as_object_mut().expect("object").remove("version");
    let server = TestServer::start(&[("routing.json", snap)]).await;
    let first = server.get("/portfolio", Some(KEY)).await;
    let second = server.get("/tasks", Some(KEY)).await;
    let version = first.header("x-snapshot-version").unwrap_or_default();
    assert!(
        !version.is_empty(),
        "no X-Snapshot-Version on a snapshot without version"
    );
    assert_eq!(
        second.header("x-snapshot-version"),
        Some(version),
        "the derived version changes between requests"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_and_readiness_need_no_key() {
    let server = server().await;
    for path in ["/healthz", "/readyz"] {
        assert_eq!(
            server.get(path, None).await.status,
            200,
            "{path} without a key"
        );
        assert_eq!(
            server.get(path, Some("cura_wrong")).await.status,
            200,
            "{path} with a wrong key"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_port_reports_metrics_and_snapshots() {
    let server = server().await;
    let metrics = server.admin_get("/metrics").await;
    assert_eq!(metrics.status, 200, "admin /metrics");
    assert!(
        !metrics
            .header("content-type")
            .unwrap_or_default()
            .contains("json"),
        "admin /metrics is Prometheus text, not JSON"
    );
    let entry = server
        .snapshot_status("routing.json")
        .await
        .expect("routing.json is listed on /snapshots");
    assert_eq!(entry["workspace"], json!(WS), "{entry}");
    assert_eq!(entry["version"], json!(version_of(WS)), "{entry}");
    assert_eq!(entry["error"], json!(null), "{entry}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_known_parameter_given_twice_is_400() {
    let server = server().await;
    let ids = Fixture::ids(0);
    let c = &ids.company;
    let cases: Vec<(String, u16)> = vec![
        ("/portfolio?limit=1&limit=1".into(), 400),
        ("/portfolio?offset=0&offset=1".into(), 400),
        (
            "/portfolio?filter[priority]=high&filter[priority]=low".into(),
            400,
        ),
        ("/tasks?limit=1&limit=2".into(), 400),
        (
            "/tasks?filter[status]=triage&filter[status]=triage".into(),
            400,
        ),
        (
            "/tasks?filter[priority]=low&filter[priority]=low".into(),
            400,
        ),
        (
            "/tasks?filter[status]=triage&filter%5Bstatus%5D=triage".into(),
            400,
        ),
        (format!("/portfolio/{c}/tasks?offset=0&offset=0"), 400),
        (format!("/portfolio/{c}/notes?limit=5&limit=5"), 400),
        ("/feed?limit=5&limit=6".into(), 400),
        (
            "/feed?cursor=2026-03-01T10:00:00.000Z&cursor=2026-03-01T10:00:00.000Z".into(),
            400,
        ),
        ("/feed?filter[type]=a&filter[type]=b".into(), 400),
        (
            format!("/meetings/{}?include=notes&include=notes", ids.meeting),
            400,
        ),
    ];
    server.check_statuses(Some(KEY), &cases).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_parameters_are_ignored() {
    let server = server().await;
    let ids = Fixture::ids(0);
    let (c, m, t) = (&ids.company, &ids.meeting, &ids.task);
    // Each case is a path with parameters the endpoint does not know, and the
    // same path without them; both must answer the same data.
    let cases: Vec<(String, String)> = vec![
        ("/portfolio?foo=bar".into(), "/portfolio".into()),
        ("/portfolio?foo=1&foo=2".into(), "/portfolio".into()),
        ("/portfolio?filter[unknown]=".into(), "/portfolio".into()),
        ("/portfolio?filter[status]=zzz".into(), "/portfolio".into()),
        ("/portfolio?cursor=garbage".into(), "/portfolio".into()),
        ("/portfolio?include=other".into(), "/portfolio".into()),
        ("/tasks?filter[type]=zzz".into(), "/tasks".into()),
        (
            format!("/portfolio/{c}/tasks?filter[status]=zzz&filter[priority]=zzz"),
            format!("/portfolio/{c}/tasks"),
        ),
        (
            format!("/portfolio/{c}/notes?cursor=garbage"),
            format!("/portfolio/{c}/notes"),
        ),
        (
            format!("/portfolio/{c}/roles?limit=abc&offset=-1"),
            format!("/portfolio/{c}/roles"),
        ),
        (
            format!("/portfolio/{c}/metrics?limit=0"),
            format!("/portfolio/{c}/metrics"),
        ),
        (
            "/roles?limit=abc&filter[priority]=zzz".into(),
            "/roles".into(),
        ),
        (
            "/feed?offset=5&filter[status]=zzz&filter[priority]=zzz".into(),
            "/feed".into(),
        ),
        (
            format!("/tasks/{t}?include=other&limit=0"),
            format!("/tasks/{t}"),
        ),
        (format!("/portfolio/{c}?limit=0"), format!("/portfolio/{c}")),
        (
            format!("/meetings/{m}?limit=0&cursor=x"),
            format!("/meetings/{m}"),
        ),
    ];
    let mut failures = Vec::new();
    for (with_params, plain) in &cases {
        let got = server.get(with_params, Some(KEY)).await;
        let want = server.get(plain, Some(KEY)).await;
        if got.status != 200 {
            failures.push(format!(
                "{with_params}: status {}, body {}",
                got.status,
                got.text()
            ));
        } else if got.json()["data"] != want.json()["data"] {
            failures.push(format!(
                "{with_params}: data {} differs from {plain}: {}",
                got.json()["data"],
                want.json()["data"]
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn query_strings_are_url_decoded() {
    let server = server().await;
    let triage = vec![uuid(102), uuid(100)];
    // Each case is a query string and the task ids it must select.
    let cases: Vec<(&str, Vec<String>)> = vec![
        ("filter[status]=triage", triage.clone()),
        ("filter%5Bstatus%5D=triage", triage.clone()),
        ("filter%5bstatus%5d=triage", triage.clone()),
        ("filter[status]=%74riage", triage.clone()),
        ("filter[status]=in%20progress", vec![uuid(101)]),
        ("%6C%69%6D%69%74=1&filter[status]=triage", vec![uuid(102)]),
        ("filter[status]=triage&limit=1&offset=1", vec![uuid(100)]),
    ];
    let mut failures = Vec::new();
    for (query, want) in &cases {
        let resp = server.get(&format!("/tasks?{query}"), Some(KEY)).await;
        if resp.status != 200 {
            failures.push(format!("{query}: status {}", resp.status));
        } else if resp.ids() != *want {
            failures.push(format!("{query}: ids {:?}, expected {want:?}", resp.ids()));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
