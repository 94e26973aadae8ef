//! Prometheus metrics (prometheus-client, the Prometheus project's own crate).
//!
//! The request path touches only pre-resolved handles: one counter per
//! (route, status) and one histogram per route, looked up by array index,
//! so recording a request is an atomic add and one short lock, never a label
//! hash. The routes are data: whoever serves requests names them when the
//! metrics are made (the API's route table), and reports a route by its
//! position in that list. Snapshot figures are per workspace and are removed
//! with it.
//!
//! Two exposition formats ([`Format`]): prometheus-client writes OpenMetrics
//! 1.0 (with `# EOF`), and the classic Prometheus text format 0.0.4 is
//! derived from that text by `classic_from_openmetrics`: the crate has no
//! classic encoder, and the two differ only in family names, types and
//! trailers, which a line-by-line rewrite covers.

use std::sync::atomic::AtomicU64;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::Registry;

use crate::store::{Collection, RecordCounts};

/// The statuses the API answers with; anything else counts as `other`.
const STATUSES: [u16; 9] = [200, 304, 400, 401, 404, 405, 500, 503, 0];

fn status_index(status: u16) -> usize {
    STATUSES
        .iter()
        .position(|&s| s == status)
        .unwrap_or(STATUSES.len() - 1)
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    route: &'static str,
    status: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RouteLabels {
    route: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FileLabels {
    file: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WorkspaceLabels {
    workspace: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabels {
    kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestKindLabels {
    request: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RecordLabels {
    workspace: String,
    collection: &'static str,
}

/// All metrics of one server.
pub struct Metrics {
    registry: Registry,
    /// `requests[route][status]`.
    requests: Vec<Vec<Counter>>,
    latency: Vec<Histogram>,
    in_flight: Gauge,
    /// Requests answered since start, all routes: the reloader reads it to
    /// tell whether requests are flowing.
    answered: AtomicU64,
    loads: Family<FileLabels, Counter>,
    failures: Family<FileLabels, Counter>,
    last_load: Family<WorkspaceLabels, Gauge<f64, AtomicU64>>,
    records: Family<RecordLabels, Gauge>,
    /// Object storage only ([`Metrics::with_object_store`]): a server
    /// reading a directory exposes none of these.
    source: Option<SourceMetrics>,
}

struct SourceMetrics {
    last_success: Gauge<f64, AtomicU64>,
    errors: Family<KindLabels, Counter>,
    bytes: Counter,
    requests: Family<RequestKindLabels, Counter>,
}

impl Metrics {
    /// Metrics for a server whose requests are labelled by `routes`.
    pub fn new(routes: &[&'static str]) -> Metrics {
        let mut registry = Registry::with_prefix("portfolio_replica");
        let request_family = Family::<RequestLabels, Counter>::default();
        let latency_family = Family::<RouteLabels, Histogram>::new_with_constructor(|| {
            // 10 µs to ~5 s: a replica answers in microseconds, a slow client
            // or a huge body shows up in the tail.
            Histogram::new(exponential_buckets(0.000_01, 2.5, 15))
        });
        let requests = routes
            .iter()
            .map(|&route| {
                STATUSES
                    .iter()
                    .map(|&status| {
                        let status = if status == 0 {
                            "other".to_owned()
                        } else {
                            status.to_string()
                        };
                        request_family.get_or_create_owned(&RequestLabels { route, status })
                    })
                    .collect()
            })
            .collect();
        let latency = routes
            .iter()
            .map(|&route| latency_family.get_or_create_owned(&RouteLabels { route }))
            .collect();
        let in_flight = Gauge::default();
        let loads = Family::<FileLabels, Counter>::default();
        let failures = Family::<FileLabels, Counter>::default();
        let last_load = Family::<WorkspaceLabels, Gauge<f64, AtomicU64>>::default();
        let records = Family::<RecordLabels, Gauge>::default();

        registry.register(
            "http_requests",
            "API requests answered, by route and status",
            request_family,
        );
        registry.register(
            "http_request_duration_seconds",
            "Time to answer an API request (until the body is handed to the connection)",
            latency_family,
        );
        registry.register(
            "http_requests_in_flight",
            "API requests being answered now",
            in_flight.clone(),
        );
        registry.register(
            "snapshot_loads",
            "Snapshot files loaded successfully, by file",
            loads.clone(),
        );
        registry.register(
            "snapshot_load_failures",
            "Snapshot files rejected, by file",
            failures.clone(),
        );
        registry.register(
            "snapshot_last_load_timestamp_seconds",
            "Unix time of the last successful load, by workspace",
            last_load.clone(),
        );
        registry.register(
            "snapshot_records",
            "Records held, by workspace and collection",
            records.clone(),
        );
        registry.register(
            "build",
            "Build information",
            Info::new(vec![("version", env!("CARGO_PKG_VERSION"))]),
        );
        Metrics {
            registry,
            requests,
            latency,
            in_flight,
            answered: AtomicU64::new(0),
            loads,
            failures,
            last_load,
            records,
            source: None,
        }
    }

    /// The same metrics, plus those of an object store source
    /// (`portfolio_replica_source_*`); the last success is 0 until a poll
    /// succeeds.
    pub fn with_object_store(mut self) -> Metrics {
        let source = SourceMetrics {
            last_success: Gauge::default(),
            errors: Family::default(),
            bytes: Counter::default(),
            requests: Family::default(),
        };
        self.registry.register(
            "source_last_success_timestamp_seconds",
            "Unix time of the last successful poll of the object store",
            source.last_success.clone(),
        );
        self.registry.register(
            "source_errors",
            "Failed object store polls and downloads, by kind",
            source.errors.clone(),
        );
        self.registry.register(
            "source_bytes_fetched",
            "Bytes downloaded from the object store",
            source.bytes.clone(),
        );
        self.registry.register(
            "source_requests",
            "HTTP requests sent to the object store (retries included), by kind",
            source.requests.clone(),
        );
        self.source = Some(source);
        self
    }

    /// A poll of the object store succeeded at `at`.
    pub fn source_success(&self, at: std::time::SystemTime) {
        if let Some(source) = &self.source {
            let seconds = at
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64());
            source.last_success.set(seconds);
        }
    }

    /// A poll or a download failed; `kind` names why (`network`,
    /// `throttling`, ...).
    pub fn source_error(&self, kind: &'static str) {
        if let Some(source) = &self.source {
            source.errors.get_or_create(&KindLabels { kind }).inc();
        }
    }

    /// `bytes` more were downloaded.
    pub fn source_bytes(&self, bytes: u64) {
        if let Some(source) = &self.source {
            source.bytes.inc_by(bytes);
        }
    }

    /// One HTTP request to the object store (`list`, `get`,
    /// `conditional_get`, `head`, `put`, `delete`, `other`).
    pub fn source_request(&self, request: &'static str) {
        if let Some(source) = &self.source {
            source
                .requests
                .get_or_create(&RequestKindLabels { request })
                .inc();
        }
    }

    /// Counts a request that is being answered; call [`Metrics::finish`] after.
    pub fn start(&self) {
        self.in_flight.inc();
    }

    /// Records an answered request of the route at position `route` in
    /// the list the metrics were made with (the last one if out of range).
    pub fn finish(&self, route: usize, status: u16, elapsed: Duration) {
        self.in_flight.dec();
        self.answered
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let r = route.min(self.requests.len().saturating_sub(1));
        if let (Some(counters), Some(latency)) = (self.requests.get(r), self.latency.get(r)) {
            counters[status_index(status)].inc();
            latency.observe(elapsed.as_secs_f64());
        }
    }

    /// Requests answered since start.
    pub fn answered(&self) -> u64 {
        self.answered.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Records a successful load of `file` serving `workspace`.
    pub fn loaded(&self, file: &str, workspace: &str, counts: &RecordCounts) {
        self.loads
            .get_or_create(&FileLabels {
                file: file.to_owned(),
            })
            .inc();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        self.last_load
            .get_or_create(&WorkspaceLabels {
                workspace: workspace.to_owned(),
            })
            .set(now);
        for (collection, n) in counts.by_collection() {
            let labels = RecordLabels {
                workspace: workspace.to_owned(),
                collection: collection.name(),
            };
            self.records.get_or_create(&labels).set(n as i64);
        }
    }

    /// Records a rejected file.
    pub fn rejected(&self, file: &str) {
        self.failures
            .get_or_create(&FileLabels {
                file: file.to_owned(),
            })
            .inc();
    }

    /// Forgets the figures of a workspace that no longer serves.
    pub fn unloaded(&self, workspace: &str) {
        self.last_load.remove(&WorkspaceLabels {
            workspace: workspace.to_owned(),
        });
        for collection in Collection::ALL {
            self.records.remove(&RecordLabels {
                workspace: workspace.to_owned(),
                collection: collection.name(),
            });
        }
    }

    /// The exposition of every metric in `format`.
    pub fn encode(&self, format: Format) -> String {
        let mut openmetrics = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut openmetrics, &self.registry);
        match format {
            Format::OpenMetrics => openmetrics,
            Format::Classic => classic_from_openmetrics(&openmetrics),
        }
    }
}

/// The text formats `/metrics` is served in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// OpenMetrics 1.0.0 text: counters typed under their family name,
    /// `info`, ending with `# EOF`. What Prometheus asks for first.
    OpenMetrics,
    /// The classic Prometheus text format 0.0.4: no `info` type, counters
    /// typed under their `_total` series, no `# EOF`. For everyone else.
    Classic,
}

impl Format {
    /// The `Content-Type` of an exposition in this format.
    pub const fn content_type(self) -> &'static str {
        match self {
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
            Format::Classic => "text/plain; version=0.0.4; charset=utf-8",
        }
    }
}

/// Rewrites an OpenMetrics text, as prometheus-client writes it, into the
/// classic text format 0.0.4, line by line:
///
/// - a counter family `x` is described as `x_total` (its one series), an
///   `info` family `x` as the gauge `x_info`, a `stateset` as a gauge, an
///   `unknown` one as `untyped`; `gauge`, `histogram` and `summary` stay;
/// - `# UNIT` and `# EOF` lines are dropped, and so are `_created` series
///   (classic text has no place for them);
/// - exemplars (` # {...} v`) are cut off the samples; a sample timestamp,
///   in seconds in OpenMetrics, becomes milliseconds.
///
/// Label sets, values and HELP texts are the same in both formats.
/// (prometheus-client writes HELP verbatim, so help texts must not hold a
/// backslash or a line break: ours are plain sentences.)
fn classic_from_openmetrics(openmetrics: &str) -> String {
    let mut out = String::with_capacity(openmetrics.len());
    // The HELP line waiting for its TYPE line: the name it is written under
    // depends on the type, and prometheus-client writes HELP first.
    let mut help: Option<(&str, &str)> = None;
    // The family of the samples that follow: its name and OpenMetrics type.
    let mut family = ("", "unknown");
    for line in openmetrics.lines() {
        if let Some(comment) = line.strip_prefix("# ") {
            let (keyword, rest) = comment.split_once(' ').unwrap_or((comment, ""));
            let (name, text) = rest.split_once(' ').unwrap_or((rest, ""));
            match keyword {
                "HELP" => {
                    flush_help(&mut out, help.take());
                    help = Some((name, text));
                }
                "TYPE" => {
                    family = (name, text);
                    let (classic_name, classic_type) = classic_family(name, text);
                    match help.take() {
                        Some((help_name, help_text)) if help_name == name => {
                            push_line(&mut out, &["# HELP ", &classic_name, " ", help_text]);
                        }
                        other => flush_help(&mut out, other),
                    }
                    push_line(&mut out, &["# TYPE ", &classic_name, " ", classic_type]);
                }
                "UNIT" | "EOF" => {}
                _ => push_line(&mut out, &[line]),
            }
            continue;
        }
        flush_help(&mut out, help.take());
        if line.is_empty() {
            continue;
        }
        classic_sample(&mut out, line, family);
    }
    flush_help(&mut out, help);
    out
}

/// The classic name and type of an OpenMetrics family.
fn classic_family(name: &str, openmetrics_type: &str) -> (String, &'static str) {
    match openmetrics_type {
        "counter" => (format!("{name}_total"), "counter"),
        "info" => (format!("{name}_info"), "gauge"),
        "gauge" | "stateset" => (name.to_owned(), "gauge"),
        "histogram" => (name.to_owned(), "histogram"),
        "summary" => (name.to_owned(), "summary"),
        _ => (name.to_owned(), "untyped"),
    }
}

fn flush_help(out: &mut String, help: Option<(&str, &str)>) {
    if let Some((name, text)) = help {
        push_line(out, &["# HELP ", name, " ", text]);
    }
}

fn push_line(out: &mut String, parts: &[&str]) {
    for part in parts {
        out.push_str(part);
    }
    out.push('\n');
}

/// Writes one sample line of the family `(name, type)` in classic form.
fn classic_sample(out: &mut String, line: &str, (family, family_type): (&str, &str)) {
    let series_end = series_end(line);
    let (series, rest) = line.split_at(series_end);
    let sample_name = &series[..series.find('{').unwrap_or(series.len())];
    if matches!(family_type, "counter" | "histogram" | "summary")
        && sample_name.strip_prefix(family) == Some("_created")
    {
        return;
    }
    // After the label set nothing is quoted: ` value [timestamp] [# exemplar]`.
    let rest = rest.split_once(" # ").map_or(rest, |(before, _)| before);
    let mut fields = rest.split_ascii_whitespace();
    out.push_str(series);
    if let Some(value) = fields.next() {
        out.push(' ');
        out.push_str(value);
    }
    if let Some(timestamp) = fields.next() {
        out.push(' ');
        match timestamp.parse::<f64>() {
            Ok(seconds) if seconds.is_finite() => {
                out.push_str(&((seconds * 1000.0).round() as i64).to_string());
            }
            _ => out.push_str(timestamp),
        }
    }
    out.push('\n');
}

/// Where a sample's name and label set end: the first space outside a
/// quoted label value.
fn series_end(line: &str) -> usize {
    let mut quoted = false;
    let mut escaped = false;
    for (i, b) in line.bytes().enumerate() {
        match b {
            _ if escaped => escaped = false,
            b'\\' if quoted => escaped = true,
            b'"' => quoted = !quoted,
            b' ' if !quoted => return i,
            _ => {}
        }
    }
    line.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn busy_metrics() -> Metrics {
        let m = Metrics::new(&["/tasks", "other"]);
        m.start();
        m.finish(0, 200, Duration::from_micros(30));
        m.start();
        m.finish(1, 401, Duration::from_micros(5));
        m.loaded(
            "acme.json",
            "ws-acme",
            &RecordCounts {
                tasks: 7,
                ..RecordCounts::default()
            },
        );
        m.rejected("bad.json");
        m
    }

    fn samples(text: &str) -> Vec<&str> {
        text.lines().filter(|l| !l.starts_with('#')).collect()
    }

    #[test]
    fn exposes_requests_latency_and_snapshots() {
        let m = busy_metrics();
        for format in [Format::Classic, Format::OpenMetrics] {
            let text = m.encode(format);
            for expected in [
                "\nportfolio_replica_http_requests_total{route=\"/tasks\",status=\"200\"} 1\n",
                "\nportfolio_replica_http_requests_total{route=\"other\",status=\"401\"} 1\n",
                "\nportfolio_replica_http_request_duration_seconds_count{route=\"/tasks\"} 1\n",
                "\nportfolio_replica_http_request_duration_seconds_bucket{le=\"+Inf\",route=\"/tasks\"} 1\n",
                "\nportfolio_replica_http_requests_in_flight 0\n",
                "\nportfolio_replica_snapshot_loads_total{file=\"acme.json\"} 1\n",
                "\nportfolio_replica_snapshot_load_failures_total{file=\"bad.json\"} 1\n",
                "\nportfolio_replica_snapshot_last_load_timestamp_seconds{workspace=\"ws-acme\"} ",
                "\nportfolio_replica_snapshot_records{workspace=\"ws-acme\",collection=\"tasks\"} 7\n",
                concat!(
                    "\nportfolio_replica_build_info{version=\"",
                    env!("CARGO_PKG_VERSION"),
                    "\"} 1\n"
                ),
            ] {
                assert!(
                    text.contains(expected),
                    "{format:?}: missing {expected:?} in\n{text}"
                );
            }
        }
        m.unloaded("ws-acme");
        for format in [Format::Classic, Format::OpenMetrics] {
            assert!(!m.encode(format).contains("workspace=\"ws-acme\""));
        }
    }

    #[test]
    fn source_series_appear_only_for_an_object_store() {
        let m = Metrics::new(&["other"]);
        m.source_error("network");
        assert!(!m.encode(Format::Classic).contains("source_"));
        let m = Metrics::new(&["other"]).with_object_store();
        let text = m.encode(Format::Classic);
        assert!(
            text.contains("\nportfolio_replica_source_last_success_timestamp_seconds 0.0\n"),
            "{text}"
        );
        assert!(
            text.contains("\nportfolio_replica_source_bytes_fetched_total 0\n"),
            "{text}"
        );
        m.source_success(std::time::UNIX_EPOCH + Duration::from_secs(1_700_000_000));
        m.source_error("throttling");
        m.source_bytes(42);
        m.source_request("conditional_get");
        for format in [Format::Classic, Format::OpenMetrics] {
            let text = m.encode(format);
            for expected in [
                "\nportfolio_replica_source_last_success_timestamp_seconds 1700000000.0\n",
                "\nportfolio_replica_source_errors_total{kind=\"throttling\"} 1\n",
                "\nportfolio_replica_source_bytes_fetched_total 42\n",
                "\nportfolio_replica_source_requests_total{request=\"conditional_get\"} 1\n",
            ] {
                assert!(
                    text.contains(expected),
                    "{format:?}: missing {expected:?} in\n{text}"
                );
            }
        }
    }

    #[test]
    fn openmetrics_types_families_and_ends_with_eof() {
        let text = busy_metrics().encode(Format::OpenMetrics);
        assert!(text.ends_with("\n# EOF\n"), "{text}");
        assert_eq!(text.matches("# EOF").count(), 1);
        for expected in [
            "# TYPE portfolio_replica_http_requests counter\n",
            "# TYPE portfolio_replica_http_request_duration_seconds histogram\n",
            "# TYPE portfolio_replica_http_requests_in_flight gauge\n",
            "# TYPE portfolio_replica_snapshot_loads counter\n",
            "# TYPE portfolio_replica_snapshot_load_failures counter\n",
            "# TYPE portfolio_replica_snapshot_last_load_timestamp_seconds gauge\n",
            "# TYPE portfolio_replica_snapshot_records gauge\n",
            "# TYPE portfolio_replica_build info\n",
        ] {
            assert!(text.contains(expected), "missing {expected:?} in\n{text}");
        }
        assert!(!text.lines().any(str::is_empty), "a blank line in\n{text}");
    }

    #[test]
    fn classic_types_series_and_has_no_openmetrics_lines() {
        let m = busy_metrics();
        let text = m.encode(Format::Classic);
        for expected in [
            "# HELP portfolio_replica_http_requests_total API requests answered, by route and status.\n\
             # TYPE portfolio_replica_http_requests_total counter\n",
            "# TYPE portfolio_replica_http_request_duration_seconds histogram\n",
            "# TYPE portfolio_replica_http_requests_in_flight gauge\n",
            "# TYPE portfolio_replica_snapshot_loads_total counter\n",
            "# TYPE portfolio_replica_snapshot_load_failures_total counter\n",
            "# TYPE portfolio_replica_snapshot_last_load_timestamp_seconds gauge\n",
            "# TYPE portfolio_replica_snapshot_records gauge\n",
            "# HELP portfolio_replica_build_info Build information.\n\
             # TYPE portfolio_replica_build_info gauge\n",
        ] {
            assert!(text.contains(expected), "missing {expected:?} in\n{text}");
        }
        for absent in ["# EOF", "# UNIT", " info\n", "_created", " # {"] {
            assert!(!text.contains(absent), "{absent:?} in\n{text}");
        }
        // What a strict classic parser checks: every sample belongs to the
        // family the last TYPE line named, under a name that type allows,
        // and no family is described twice.
        let mut family: Option<(&str, &str)> = None;
        let mut described = std::collections::HashSet::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let (name, typ) = rest.split_once(' ').expect("TYPE name type");
                assert!(described.insert(name), "{name} typed twice");
                family = Some((name, typ));
                continue;
            }
            if let Some(rest) = line.strip_prefix("# HELP ") {
                let name = rest.split(' ').next().unwrap_or_default();
                assert!(!described.contains(name), "HELP after TYPE of {name}");
                continue;
            }
            let (name, typ) = family.unwrap_or_else(|| panic!("{line:?} before any TYPE"));
            let sample = &line[..line.find(['{', ' ']).expect("a value")];
            let allowed = match typ {
                "histogram" => [
                    format!("{name}_bucket"),
                    format!("{name}_sum"),
                    format!("{name}_count"),
                ]
                .contains(&sample.to_owned()),
                "counter" | "gauge" => sample == name,
                other => panic!("type {other} of {name}"),
            };
            assert!(allowed, "{line:?} under # TYPE {name} {typ}");
        }
        // Same samples as the OpenMetrics text, in the same order.
        assert_eq!(samples(&text), samples(&m.encode(Format::OpenMetrics)));
    }

    #[test]
    fn classic_from_openmetrics_rewrites_what_classic_text_cannot_hold() {
        let openmetrics = concat!(
            "# HELP jobs Jobs done.\n",
            "# TYPE jobs counter\n",
            "jobs_total{queue=\"a b # {c}\"} 3 # {trace=\"x\"} 1.0 1700000000.5\n",
            "jobs_created{queue=\"a b # {c}\"} 1700000000.25\n",
            "# HELP wait_seconds Waiting.\n",
            "# TYPE wait_seconds histogram\n",
            "# UNIT wait_seconds seconds\n",
            "wait_seconds_sum 0.5 1700000000.125\n",
            "wait_seconds_count 2\n",
            "wait_seconds_bucket{le=\"1e-5\"} 1 # {trace=\"y\"} 0.000001\n",
            "wait_seconds_bucket{le=\"+Inf\"} 2\n",
            "wait_seconds_created 1700000000\n",
            "# HELP build Build information.\n",
            "# TYPE build info\n",
            "build_info{version=\"1.2\\\"3\\\\\"} 1\n",
            "# TYPE mystery unknown\n",
            "mystery NaN\n",
            "# HELP lonely A HELP without a TYPE.\n",
            "lonely -Inf\n",
            "# EOF\n",
        );
        let classic = concat!(
            "# HELP jobs_total Jobs done.\n",
            "# TYPE jobs_total counter\n",
            "jobs_total{queue=\"a b # {c}\"} 3\n",
            "# HELP wait_seconds Waiting.\n",
            "# TYPE wait_seconds histogram\n",
            "wait_seconds_sum 0.5 1700000000125\n",
            "wait_seconds_count 2\n",
            "wait_seconds_bucket{le=\"1e-5\"} 1\n",
            "wait_seconds_bucket{le=\"+Inf\"} 2\n",
            "# HELP build_info Build information.\n",
            "# TYPE build_info gauge\n",
            "build_info{version=\"1.2\\\"3\\\\\"} 1\n",
            "# TYPE mystery untyped\n",
            "mystery NaN\n",
            "# HELP lonely A HELP without a TYPE.\n",
            "lonely -Inf\n",
        );
        assert_eq!(classic_from_openmetrics(openmetrics), classic);
        assert_eq!(classic_from_openmetrics("# EOF\n"), "");
    }

    #[test]
    fn content_types_name_the_formats() {
        assert_eq!(
            Format::OpenMetrics.content_type(),
            "application/openmetrics-text; version=1.0.0; charset=utf-8"
        );
        assert_eq!(
            Format::Classic.content_type(),
            "text/plain; version=0.0.4; charset=utf-8"
        );
    }
}
