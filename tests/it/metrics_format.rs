//! `/metrics` speaks both Prometheus text formats: OpenMetrics 1.0 to
//! scrapers whose `Accept` prefers it (Prometheus does by default), the
//! classic text format 0.0.4 to everyone else (docs/operations.md#get-metrics).
//! Both carry the same samples; each is checked for what its parsers
//! reject. `.ci/prometheus.sh` has a real Prometheus scrape them.

use std::collections::{BTreeMap, HashSet};

use serde_json::json;

use crate::util::*;

const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
const CLASSIC: &str = "text/plain; version=0.0.4; charset=utf-8";

/// What Prometheus 2.x sends when scraping (its default scrape protocols).
const PROMETHEUS_ACCEPT: &str = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";

/// Sends `method /metrics` to the admin port with these extra header lines.
async fn metrics(server: &TestServer, method: &str, headers: &[&str]) -> Response {
    let mut request = format!(
        "{method} /metrics HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n",
        server.admin
    );
    for header in headers {
        request.push_str(header);
        request.push_str("\r\n");
    }
    request.push_str("\r\n");
    let what = format!("{method} /metrics with {headers:?}");
    tokio::time::timeout(
        IO_TIMEOUT,
        exchange(server.admin, method, request.into_bytes()),
    )
    .await
    .unwrap_or_else(|_| Err(format!("no answer within {IO_TIMEOUT:?}")))
    .unwrap_or_else(|e| panic!("{what}: {e}"))
}

/// The sample lines of an exposition, in order.
fn samples(text: &str) -> Vec<&str> {
    text.lines().filter(|l| !l.starts_with('#')).collect()
}

/// The sample's name: up to its label set or value.
fn sample_name(line: &str) -> &str {
    &line[..line.find(['{', ' ']).unwrap_or(line.len())]
}

fn labels_without_le(line: &str) -> String {
    let Some(open) = line.find('{') else {
        return String::new();
    };
    let close = line.rfind('}').expect("a closed label set");
    line[open + 1..close]
        .split(',')
        .filter(|l| !l.starts_with("le="))
        .collect::<Vec<_>>()
        .join(",")
}

fn value(line: &str) -> f64 {
    let after = &line[line.rfind('}').map_or(0, |i| i + 1)..];
    let text = after
        .split_whitespace()
        .nth(usize::from(!line.contains('}')));
    match text.expect("a value") {
        "+Inf" => f64::INFINITY,
        t => t.parse().unwrap_or_else(|_| panic!("value of {line:?}")),
    }
}

/// Checks the family structure both parsers insist on: each family
/// described once, HELP and TYPE before its samples, every sample under a
/// name its type allows, histograms cumulative with `+Inf` equal to
/// `_count`. `openmetrics` picks the format's names for counters and info.
fn check_structure(text: &str, openmetrics: bool) -> Vec<String> {
    let mut problems = Vec::new();
    let mut described = HashSet::new();
    let mut family: Option<(String, String)> = None;
    let mut buckets: BTreeMap<String, Vec<(String, f64)>> = BTreeMap::new();
    let mut counts: BTreeMap<String, f64> = BTreeMap::new();
    for line in text.lines() {
        if line.is_empty() {
            problems.push("a blank line".to_owned());
            continue;
        }
        if let Some(rest) = line.strip_prefix("# ") {
            let mut words = rest.splitn(3, ' ');
            let (keyword, name, what) = (
                words.next().unwrap_or_default(),
                words.next().unwrap_or_default(),
                words.next().unwrap_or_default(),
            );
            match keyword {
                "EOF" => {}
                "HELP" if what.is_empty() => problems.push(format!("empty HELP: {line:?}")),
                "HELP" => {}
                "TYPE" => {
                    let known: &[&str] = if openmetrics {
                        &["counter", "gauge", "histogram", "info"]
                    } else {
                        &["counter", "gauge", "histogram"]
                    };
                    if !known.contains(&what) {
                        problems.push(format!("type {what:?}: {line:?}"));
                    }
                    if !described.insert(name.to_owned()) {
                        problems.push(format!("{name} typed twice"));
                    }
                    family = Some((name.to_owned(), what.to_owned()));
                }
                _ => problems.push(format!("unexpected comment {line:?}")),
            }
            continue;
        }
        let Some((name, typ)) = &family else {
            problems.push(format!("sample before any TYPE: {line:?}"));
            continue;
        };
        let sample = sample_name(line);
        let allowed: Vec<String> = match (typ.as_str(), openmetrics) {
            ("counter", true) => vec![format!("{name}_total")],
            ("info", true) => vec![format!("{name}_info")],
            ("histogram", _) => ["_bucket", "_sum", "_count"]
                .iter()
                .map(|s| format!("{name}{s}"))
                .collect(),
            _ => vec![name.clone()],
        };
        if !allowed.iter().any(|a| a == sample) {
            problems.push(format!("{line:?} under # TYPE {name} {typ}"));
        }
        if typ == "info" && value(line) != 1.0 {
            problems.push(format!("info value is not 1: {line:?}"));
        }
        if sample.ends_with("_bucket") {
            let le = line
                .split("le=\"")
                .nth(1)
                .and_then(|r| r.split('"').next())
                .unwrap_or_default()
                .to_owned();
            buckets
                .entry(labels_without_le(line))
                .or_default()
                .push((le, value(line)));
        } else if typ == "histogram" && sample.ends_with("_count") {
            counts.insert(labels_without_le(line), value(line));
        }
    }
    for (series, bs) in &buckets {
        if bs.windows(2).any(|w| w[1].1 < w[0].1) {
            problems.push(format!("{{{series}}} buckets not cumulative: {bs:?}"));
        }
        let count = counts.get(series).copied().unwrap_or(f64::NAN);
        if bs.last().map(|(le, v)| (le.as_str(), *v)) != Some(("+Inf", count)) {
            problems.push(format!("{{{series}}} +Inf bucket is not _count: {bs:?}"));
        }
    }
    problems
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_are_openmetrics_for_prometheus_and_classic_text_otherwise() {
    // A rejected file, so that every family has a series; the series of
    // each file and workspace too.
    let dir = tempdir();
    write_json(dir.path(), "acme.json", &fixture("ws-acme", &[KEY], 100));
    write_json(dir.path(), "bad.json", &json!({"format_version": 99}));
    let server = TestServer::start_in(dir, |c| c.metrics_per_workspace = true).await;
    assert_eq!(server.get("/tasks", Some(KEY)).await.status, 200);
    assert_eq!(server.get("/tasks", None).await.status, 401);
    assert_eq!(server.get("/no/such/path", Some(KEY)).await.status, 404);

    let classic = metrics(&server, "GET", &[]).await;
    let openmetrics = metrics(&server, "GET", &[&format!("Accept: {PROMETHEUS_ACCEPT}")]).await;
    let mut failures = Vec::new();
    for (resp, want_type, is_openmetrics) in [
        (&classic, CLASSIC, false),
        (&openmetrics, OPENMETRICS, true),
    ] {
        assert_eq!(resp.status, 200, "{}", resp.text());
        if resp.header("content-type") != Some(want_type) {
            failures.push(format!(
                "Content-Type {:?}, expected {want_type:?}",
                resp.header("content-type")
            ));
        }
        if resp.header("vary") != Some("Accept") {
            failures.push(format!("Vary {:?}", resp.header("vary")));
        }
        let text = resp.text();
        for problem in check_structure(&text, is_openmetrics) {
            failures.push(format!("{want_type}: {problem}"));
        }
        for name in [
            "portfolio_replica_http_requests_total{route=\"/tasks\",status=\"200\"} 1",
            "portfolio_replica_http_requests_total{route=\"/tasks\",status=\"401\"} 1",
            "portfolio_replica_http_request_duration_seconds_bucket{le=\"+Inf\",route=\"/tasks\"} 2",
            "portfolio_replica_http_requests_in_flight 0",
            "portfolio_replica_snapshot_loads_total{file=\"acme.json\"} 1",
            "portfolio_replica_snapshot_load_failures_total{file=\"bad.json\"} 1",
            "portfolio_replica_snapshot_last_load_timestamp_seconds{workspace=\"ws-acme\"} ",
            "portfolio_replica_snapshot_records{workspace=\"ws-acme\",collection=\"tasks\"} 1",
            concat!(
                "portfolio_replica_build_info{version=\"",
                env!("CARGO_PKG_VERSION"),
                "\"} 1"
            ),
        ] {
            if !samples(&text).iter().any(|s| s.starts_with(name)) {
                failures.push(format!("{want_type}: no sample {name:?}"));
            }
        }
    }
    let (classic, openmetrics) = (classic.text(), openmetrics.text());
    if !openmetrics.ends_with("\n# EOF\n") {
        failures.push("the OpenMetrics text does not end with # EOF".to_owned());
    }
    for line in [
        "# TYPE portfolio_replica_http_requests counter",
        "# TYPE portfolio_replica_snapshot_loads counter",
        "# TYPE portfolio_replica_snapshot_load_failures counter",
        "# TYPE portfolio_replica_build info",
    ] {
        if !openmetrics.lines().any(|l| l == line) {
            failures.push(format!("OpenMetrics: no {line:?}"));
        }
    }
    for line in [
        "# TYPE portfolio_replica_http_requests_total counter",
        "# TYPE portfolio_replica_http_request_duration_seconds histogram",
        "# TYPE portfolio_replica_http_requests_in_flight gauge",
        "# TYPE portfolio_replica_snapshot_loads_total counter",
        "# TYPE portfolio_replica_snapshot_load_failures_total counter",
        "# TYPE portfolio_replica_snapshot_last_load_timestamp_seconds gauge",
        "# TYPE portfolio_replica_snapshot_records gauge",
        "# TYPE portfolio_replica_build_info gauge",
    ] {
        if !classic.lines().any(|l| l == line) {
            failures.push(format!("classic: no {line:?}"));
        }
    }
    for absent in ["# EOF", "# UNIT", "_created", " # {"] {
        if classic.contains(absent) {
            failures.push(format!("classic: {absent:?}"));
        }
    }
    // Admin requests are not counted, so nothing moved between the scrapes.
    if samples(&classic) != samples(&openmetrics) {
        failures.push(format!(
            "the formats carry different samples:\n{classic}\n---\n{openmetrics}"
        ));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_negotiate_on_accept_with_qualities() {
    let server = TestServer::start(&[("acme.json", fixture("ws-acme", &[KEY], 100))]).await;
    let cases: &[(&[&str], &str)] = &[
        (&[], CLASSIC),
        (&["Accept: */*"], CLASSIC),
        (&["Accept: text/plain"], CLASSIC),
        (&["Accept: application/json"], CLASSIC),
        (&["Accept: application/openmetrics-text"], OPENMETRICS),
        (
            &["Accept: application/openmetrics-text;version=1.0.0"],
            OPENMETRICS,
        ),
        (
            &["Accept: application/openmetrics-text;version=2.0.0"],
            CLASSIC,
        ),
        (&["Accept: application/openmetrics-text;q=0"], CLASSIC),
        // Prometheus with scrape_protocols: [PrometheusText0.0.4].
        (&["Accept: text/plain;version=0.0.4;q=1,*/*;q=0.1"], CLASSIC),
        (
            &["Accept: application/openmetrics-text;q=0.3, text/plain;q=0.6"],
            CLASSIC,
        ),
        (
            &["Accept: text/plain;q=0.3, application/openmetrics-text;q=0.6"],
            OPENMETRICS,
        ),
        (&["Accept: text/plain;q=0, */*"], OPENMETRICS),
        // Two Accept fields are one list.
        (
            &[
                "Accept: text/plain;q=0.2",
                "Accept: application/openmetrics-text",
            ],
            OPENMETRICS,
        ),
    ];
    let mut failures = Vec::new();
    for (headers, want) in cases {
        for method in ["GET", "HEAD"] {
            let resp = metrics(&server, method, headers).await;
            let got = resp.header("content-type").unwrap_or_default().to_owned();
            if resp.status != 200 || got != *want {
                failures.push(format!(
                    "{method} with {headers:?}: {} {got:?}, expected {want:?}",
                    resp.status
                ));
            }
            let eof = resp.text().ends_with("# EOF\n");
            if method == "GET" && eof != (*want == OPENMETRICS) {
                failures.push(format!("GET with {headers:?}: ends with # EOF: {eof}"));
            }
            if method == "HEAD" && !resp.body.is_empty() {
                failures.push(format!("HEAD with {headers:?}: a body"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
