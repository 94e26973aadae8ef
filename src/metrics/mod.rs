//! Prometheus metrics (prometheus-client, the Prometheus project's own crate).
//!
//! The request path touches only pre-resolved handles: one counter per
//! (route, status) and one histogram per route, looked up by array index,
//! so recording a request is an atomic add and one short lock, never a label
//! hash. The routes are data: whoever serves requests names them when the
//! metrics are made (the API's route table), and reports a route by its
//! position in that list. Snapshot figures are fleet-wide by default; with
//! `--metrics-per-workspace` each file and workspace has its own series
//! too, removed with it.
//!
//! Two exposition formats ([`Format`]): prometheus-client writes OpenMetrics
//! 1.0 (with `# EOF`), and the classic Prometheus text format 0.0.4 is
//! derived from that text by `classic_from_openmetrics`: the crate has no
//! classic encoder, and the two differ only in family names, types and
//! trailers, which a line-by-line rewrite covers.

use std::hash::Hash;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::{Metric, Registry};

pub use exposition::Format;
use exposition::{classic_from_openmetrics, sorted_series};
use portfolio_domain::store::RecordCounts;

pub use signatures::Expiries;
pub use snapshots::Fleet;
use snapshots::SnapshotMetrics;

mod budget;
mod exposition;
mod signatures;
mod snapshots;

/// The statuses the API answers with; anything else counts as `other`.
const STATUSES: [u16; 10] = [200, 304, 400, 401, 404, 405, 429, 500, 503, 0];

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
struct KindLabels {
    kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestKindLabels {
    request: &'static str,
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
    snapshots: SnapshotMetrics,
    /// Scans of the snapshot source, whatever started them.
    scans: Counter,
    /// Requests answered 429 for a workspace's limits, by which.
    throttled: Family<ReasonLabels, Counter>,
    /// Object storage only ([`Metrics::with_object_store`]): a server
    /// reading a directory exposes none of these.
    source: Option<SourceMetrics>,
    /// A memory budget only ([`Metrics::with_budget`]).
    budget: Option<budget::BudgetMetrics>,
    /// `--trust-key` only ([`Metrics::with_signatures`]).
    signatures: Option<signatures::SignatureMetrics>,
}

/// A `reason` label: why a request was throttled, or why a version was
/// refused (`signatures`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: &'static str,
}

struct SourceMetrics {
    last_success: Gauge<f64, AtomicU64>,
    errors: Family<KindLabels, Counter>,
    bytes: Counter,
    deltas: Family<OutcomeLabels, Counter>,
    requests: Family<RequestKindLabels, Counter>,
}

/// Registers a new metric under `name` with `help` and returns it: a
/// metric's clones share its value, so the one returned is the handle that
/// records.
fn registered<M: Metric + Clone + Default>(registry: &mut Registry, name: &str, help: &str) -> M {
    let metric = M::default();
    registry.register(name, help, metric.clone());
    metric
}

impl Metrics {
    /// Metrics for a server whose requests are labelled by `routes`, with
    /// fleet-level snapshot series only.
    pub fn new(routes: &[&'static str]) -> Metrics {
        Metrics::with_options(routes, false)
    }

    /// ... and, if `per_workspace`, the series of every file and workspace
    /// (`--metrics-per-workspace`).
    pub fn with_options(routes: &[&'static str], per_workspace: bool) -> Metrics {
        let mut registry = Registry::with_prefix("portfolio_replica");
        let request_family = Family::<RequestLabels, Counter>::default();
        let latency_family = Family::<RouteLabels, Histogram>::new_with_constructor(|| {
            // 10 µs to about 3.7 s (15 buckets, each 2.5 times the last): a
            // replica answers in microseconds, and a huge body shows up in
            // the tail. A slow client does not: the time ends when the body
            // is handed to the connection.
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
        let snapshots = SnapshotMetrics::register(&mut registry, per_workspace);
        let scans = registered(
            &mut registry,
            "snapshot_scans",
            "Scans of the snapshots (a listing, and the loads of what changed), whatever started them: file events, polls, SIGHUP",
        );
        let throttled = Family::<ReasonLabels, Counter>::default();
        for reason in ["rate", "in_flight"] {
            let _ = throttled.get_or_create(&ReasonLabels { reason });
        }
        registry.register(
            "throttled_requests",
            "Requests answered 429 because their workspace was over its limits: its rate, or its requests in flight",
            throttled.clone(),
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
            snapshots,
            scans,
            throttled,
            source: None,
            budget: None,
            signatures: None,
        }
    }

    /// Counts a scan of the snapshots.
    pub fn scanned(&self) {
        self.scans.inc();
    }

    /// Counts a request refused for its workspace's limits: `reason` is
    /// `rate` or `in_flight`.
    pub fn throttled(&self, reason: &'static str) {
        self.throttled.get_or_create(&ReasonLabels { reason }).inc();
    }

    /// The same metrics, plus those of a memory budget of `bytes`
    /// (`portfolio_replica_resident_*`, `demand_*`, `evictions*`).
    pub fn with_budget(mut self, bytes: u64) -> Metrics {
        self.budget = Some(budget::BudgetMetrics::register(&mut self.registry, bytes));
        self
    }

    /// A request found its workspace resident (`hit`) or not.
    pub fn resident_lookup(&self, hit: bool) {
        if let Some(budget) = &self.budget {
            budget.lookup(hit);
        }
    }

    /// A load on demand ended: `ok` after `elapsed`, having read `bytes`.
    pub fn demand_load(&self, ok: bool, elapsed: Duration, bytes: u64) {
        if let Some(budget) = &self.budget {
            budget.load(ok, elapsed, bytes);
        }
    }

    /// A workspace was evicted.
    pub fn evicted(&self) {
        if let Some(budget) = &self.budget {
            budget.evicted();
        }
    }

    /// A workspace was loaded on demand moments after its eviction.
    pub fn reloaded_soon(&self) {
        if let Some(budget) = &self.budget {
            budget.reloaded_soon();
        }
    }

    /// Versions a restart recalled from `--cache-dir` (a budget only).
    pub fn recalled(&self, versions: u64) {
        if let Some(budget) = &self.budget {
            budget.recalled(versions);
        }
    }

    /// A private copy made again by a load on demand (a budget only).
    pub fn copy_remade(&self) {
        if let Some(budget) = &self.budget {
            budget.copy_remade();
        }
    }

    /// What is resident now.
    pub fn resident(&self, bytes: u64, workspaces: usize) {
        if let Some(budget) = &self.budget {
            budget.resident(bytes, workspaces);
        }
    }

    /// The same metrics, plus those of an object store source
    /// (`portfolio_replica_source_*`); the last success is 0 until a poll
    /// succeeds.
    pub fn with_object_store(mut self) -> Metrics {
        let registry = &mut self.registry;
        // Registered in the order of the fields, which is the order
        // `/metrics` lists them in.
        let source = SourceMetrics {
            last_success: registered(
                registry,
                "source_last_success_timestamp_seconds",
                "Unix time of the last successful poll of the object store",
            ),
            errors: registered(
                registry,
                "source_errors",
                "Failed object store polls and downloads, by kind",
            ),
            bytes: registered(
                registry,
                "source_bytes_fetched",
                "Bytes downloaded from the object store",
            ),
            deltas: registered(
                registry,
                "source_deltas",
                "New versions rebuilt from a delta (applied), or downloaded whole though the manifest names a delta (no_base: the replica did not serve its base; failed: the delta could not be applied)",
            ),
            requests: registered(
                registry,
                "source_requests",
                "HTTP requests sent to the object store (retries included), by kind",
            ),
        };
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
        self.source_count(|source| &source.errors, &KindLabels { kind });
    }

    /// `bytes` more were downloaded.
    pub fn source_bytes(&self, bytes: u64) {
        if let Some(source) = &self.source {
            source.bytes.inc_by(bytes);
        }
    }

    /// A version that has a delta was rebuilt from it or downloaded whole:
    /// `applied`, `no_base`, `failed`.
    pub fn source_delta(&self, outcome: &'static str) {
        self.source_count(|source| &source.deltas, &OutcomeLabels { outcome });
    }

    /// One HTTP request to the object store (`list`, `get`,
    /// `conditional_get`, `head`, `put`, `delete`, `other`).
    pub fn source_request(&self, request: &'static str) {
        self.source_count(|source| &source.requests, &RequestKindLabels { request });
    }

    /// Counts one in the series `labels` of the source family `family`
    /// picks; nothing for a server reading a directory.
    fn source_count<L: Clone + Hash + Eq>(
        &self,
        family: impl FnOnce(&SourceMetrics) -> &Family<L, Counter>,
        labels: &L,
    ) {
        if let Some(source) = &self.source {
            family(source).get_or_create(labels).inc();
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
        self.snapshots.loaded(file, workspace, counts);
    }

    /// Records a rejected file.
    pub fn rejected(&self, file: &str) {
        self.snapshots.rejected(file);
    }

    /// Forgets the figures of a workspace that no longer serves.
    pub fn unloaded(&self, workspace: &str) {
        self.snapshots.unloaded(workspace);
    }

    /// The state of every workspace now (before a scrape).
    pub fn fleet(&self, fleet: &Fleet) {
        self.snapshots.fleet(fleet);
        if let Some(signatures) = &self.signatures {
            signatures.expiries(&fleet.signatures);
        }
    }

    /// The same metrics, plus those of `--trust-key`, whose refusals are
    /// labelled by `reasons`.
    pub fn with_signatures(mut self, reasons: &[&'static str]) -> Metrics {
        self.signatures = Some(signatures::SignatureMetrics::register(
            &mut self.registry,
            reasons,
        ));
        self
    }

    /// Counts a version refused for its signature.
    pub fn signature_refused(&self, reason: &'static str) {
        if let Some(signatures) = &self.signatures {
            signatures.refused(reason);
        }
    }

    /// The exposition of every metric in `format`.
    pub fn encode(&self, format: Format) -> String {
        let mut openmetrics = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut openmetrics, &self.registry);
        let openmetrics = sorted_series(&openmetrics);
        match format {
            Format::OpenMetrics => openmetrics,
            Format::Classic => classic_from_openmetrics(&openmetrics),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// With the series of every file and workspace (`--metrics-per-workspace`).
    fn busy_metrics() -> Metrics {
        let m = Metrics::with_options(&["/tasks", "other"], true);
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

    #[test]
    fn series_come_in_the_same_order_whatever_the_order_they_were_made_in() {
        // Each Family's hash map has its own random seed: two registries
        // fed the same series in opposite orders list them alike only if
        // the exposition sorts them.
        let series = |reversed: bool| {
            let m = Metrics::with_options(&["/tasks", "/feed", "other"], true);
            let mut events: Vec<(usize, u16, String)> = (0..3)
                .flat_map(|route| [200, 304, 401, 404].map(|status| (route, status, String::new())))
                .chain((0..20).map(|i| (0, 0, format!("w{i:02}"))))
                .collect();
            if reversed {
                events.reverse();
            }
            for (route, status, file) in events {
                if file.is_empty() {
                    m.start();
                    m.finish(route, status, Duration::from_micros(30));
                } else {
                    m.loaded(
                        &format!("{file}.json"),
                        &format!("ws-{file}"),
                        &RecordCounts::default(),
                    );
                    m.rejected(&format!("{file}.bad.json"));
                }
            }
            let text = m.encode(Format::OpenMetrics);
            // The names and labels of the series, not their values (times).
            text.lines()
                .map(|line| line.split(' ').next().unwrap_or_default().to_owned())
                .collect::<Vec<_>>()
        };
        let forwards = series(false);
        assert!(forwards.len() > 200, "{forwards:?}");
        assert_eq!(forwards, series(true));
        let tasks = forwards
            .iter()
            .filter(|s| s.starts_with("portfolio_replica_http_requests_total{"))
            .collect::<Vec<_>>();
        let mut sorted = tasks.clone();
        sorted.sort();
        assert_eq!(tasks, sorted);
    }

    #[test]
    fn by_default_the_snapshot_series_do_not_grow_with_the_workspaces() {
        let series = |workspaces: usize| {
            let m = Metrics::new(&["/tasks", "other"]);
            let counts = RecordCounts {
                tasks: 3,
                ..RecordCounts::default()
            };
            let mut ages = Vec::new();
            for i in 0..workspaces {
                m.loaded(&format!("w{i}.json"), &format!("ws-{i}"), &counts);
                ages.push(Duration::from_secs(i as u64 * 100));
            }
            m.rejected("bad.json");
            let records = RecordCounts {
                tasks: 3 * workspaces,
                ..RecordCounts::default()
            };
            m.fleet(&Fleet {
                serving: workspaces,
                failing: 1,
                stale: 0,
                records,
                ages,
                signatures: Default::default(),
            });
            m.encode(Format::Classic)
        };
        let (few, many) = (series(3), series(300));
        assert_eq!(samples(&few).len(), samples(&many).len(), "{many}");
        for expected in [
            "\nportfolio_replica_workspaces{state=\"serving\"} 300\n",
            "\nportfolio_replica_workspaces{state=\"failing\"} 1\n",
            "\nportfolio_replica_workspaces{state=\"stale\"} 0\n",
            "\nportfolio_replica_snapshot_records{collection=\"tasks\"} 900\n",
            "\nportfolio_replica_snapshot_records{collection=\"notes\"} 0\n",
            "\nportfolio_replica_snapshot_loads_total 300\n",
            "\nportfolio_replica_snapshot_load_failures_total 1\n",
            // Ages 0, 100, ..., 29900 s: 10 within 900 s, all within 86400.
            "\nportfolio_replica_workspaces_by_version_age{max_seconds=\"900\"} 10\n",
            "\nportfolio_replica_workspaces_by_version_age{max_seconds=\"86400\"} 300\n",
            "\nportfolio_replica_workspaces_by_version_age{max_seconds=\"+Inf\"} 300\n",
        ] {
            assert!(many.contains(expected), "missing {expected:?} in\n{many}");
        }
        assert!(!many.contains("workspace=\""), "{many}");
    }

    fn samples(text: &str) -> Vec<&str> {
        text.lines().filter(|l| !l.starts_with('#')).collect()
    }

    #[test]
    fn exposes_requests_latency_and_snapshots() {
        let m = busy_metrics();
        assert_both_formats_hold(
            &m,
            &[
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
            ],
        );
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
        assert_both_formats_hold(
            &m,
            &[
                "\nportfolio_replica_source_last_success_timestamp_seconds 1700000000.0\n",
                "\nportfolio_replica_source_errors_total{kind=\"throttling\"} 1\n",
                "\nportfolio_replica_source_bytes_fetched_total 42\n",
                "\nportfolio_replica_source_requests_total{request=\"conditional_get\"} 1\n",
            ],
        );
    }

    /// Asserts that both exposition formats of `m` hold every text of `expected`.
    fn assert_both_formats_hold(m: &Metrics, expected: &[&str]) {
        for format in [Format::Classic, Format::OpenMetrics] {
            let text = m.encode(format);
            for expected in expected {
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
}
