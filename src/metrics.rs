//! Prometheus metrics (prometheus-client, the Prometheus project's own crate).
//!
//! The request path touches only pre-resolved handles: one counter per
//! (route, status) and one histogram per route, looked up by array index,
//! so recording a request is an atomic add and one short lock, never a label
//! hash. The routes are data: whoever serves requests names them when the
//! metrics are made (the API's route table), and reports a route by its
//! position in that list. Snapshot figures are per workspace and are removed
//! with it.

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
    loads: Family<FileLabels, Counter>,
    failures: Family<FileLabels, Counter>,
    last_load: Family<WorkspaceLabels, Gauge<f64, AtomicU64>>,
    records: Family<RecordLabels, Gauge>,
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
            loads,
            failures,
            last_load,
            records,
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
        let r = route.min(self.requests.len().saturating_sub(1));
        if let (Some(counters), Some(latency)) = (self.requests.get(r), self.latency.get(r)) {
            counters[status_index(status)].inc();
            latency.observe(elapsed.as_secs_f64());
        }
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

    /// The Prometheus text exposition.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode_registry(&mut out, &self.registry);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exposes_requests_latency_and_snapshots() {
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
        let text = m.encode();
        for expected in [
            "portfolio_replica_http_requests_total{route=\"/tasks\",status=\"200\"} 1",
            "portfolio_replica_http_requests_total{route=\"other\",status=\"401\"} 1",
            "portfolio_replica_http_request_duration_seconds_count{route=\"/tasks\"} 1",
            "portfolio_replica_http_requests_in_flight 0",
            "portfolio_replica_snapshot_loads_total{file=\"acme.json\"} 1",
            "portfolio_replica_snapshot_load_failures_total{file=\"bad.json\"} 1",
            "portfolio_replica_snapshot_records{workspace=\"ws-acme\",collection=\"tasks\"} 7",
            "portfolio_replica_build_info{version=",
        ] {
            assert!(text.contains(expected), "missing {expected:?} in\n{text}");
        }
        m.unloaded("ws-acme");
        assert!(!m.encode().contains("workspace=\"ws-acme\""));
    }
}
