//! What `/metrics` says of the snapshots. By default the series do not grow
//! with the fleet: workspaces by state, records by collection, the ages of
//! the versions that serve, and loads and failures in all. With
//! `--metrics-per-workspace`, the series of each file and workspace as well
//! (a replica of ten thousand workspaces would give a Prometheus a hundred
//! thousand series of them).

use std::sync::atomic::AtomicU64;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use portfolio_domain::store::{Collection, RecordCounts};

/// The ages that `workspaces_by_version_age` counts up to: seconds, and
/// the `max_seconds` label that says them (not `le`, which Prometheus
/// keeps for histograms).
const AGE_BUCKETS: [(u64, &str); 9] = [
    (60, "60"),
    (300, "300"),
    (900, "900"),
    (3600, "3600"),
    (3 * 3600, "10800"),
    (6 * 3600, "21600"),
    (86_400, "86400"),
    (7 * 86_400, "604800"),
    (u64::MAX, "+Inf"),
];

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

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabels {
    state: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CollectionLabels {
    collection: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AgeLabels {
    max_seconds: &'static str,
}

/// The state of every workspace entry at one moment, as the loader counts
/// it for a scrape.
#[derive(Debug, Default)]
pub struct Fleet {
    /// Entries serving a version.
    pub serving: usize,
    /// Entries whose current content was rejected (serving an older
    /// version, or nothing).
    pub failing: usize,
    /// Object storage: entries serving a version older than the one
    /// storage names, which cannot be downloaded now.
    pub stale: usize,
    /// Records of every serving workspace, by collection.
    pub records: RecordCounts,
    /// How long ago each serving version was loaded.
    pub ages: Vec<Duration>,
    /// Under `--trust-key`: the serving versions' signatures.
    pub signatures: super::Expiries,
}

/// The snapshot families, registered once.
pub(super) struct SnapshotMetrics {
    workspaces: Family<StateLabels, Gauge>,
    by_age: Family<AgeLabels, Gauge>,
    /// `None` with `--metrics-per-workspace`, whose `records` family takes
    /// the name (its sum by collection is the same figure).
    records: Option<Family<CollectionLabels, Gauge>>,
    counts: LoadCounters,
}

/// Loads and failures in all; or loads and failures by file, and the last
/// load and the records by workspace (`--metrics-per-workspace`).
enum LoadCounters {
    Total {
        loads: Counter,
        failures: Counter,
    },
    PerWorkspace {
        loads: Family<FileLabels, Counter>,
        failures: Family<FileLabels, Counter>,
        last_load: Family<WorkspaceLabels, Gauge<f64, AtomicU64>>,
        records: Family<RecordLabels, Gauge>,
    },
}

impl SnapshotMetrics {
    pub(super) fn register(registry: &mut Registry, per_workspace: bool) -> SnapshotMetrics {
        let workspaces = Family::<StateLabels, Gauge>::default();
        let by_age = Family::<AgeLabels, Gauge>::default();
        // Every series exists from the start, in a fixed order.
        for state in ["serving", "failing", "stale"] {
            let _ = workspaces.get_or_create(&StateLabels { state });
        }
        for (_, max_seconds) in AGE_BUCKETS {
            let _ = by_age.get_or_create(&AgeLabels { max_seconds });
        }
        registry.register(
            "workspaces",
            "Workspace entries by state: serving a version, failing (the current content is rejected), stale (storage names a newer version that cannot be downloaded)",
            workspaces.clone(),
        );
        registry.register(
            "workspaces_by_version_age",
            "Serving workspaces whose version was loaded at most max_seconds ago (cumulative)",
            by_age.clone(),
        );
        let (counts, records) = if per_workspace {
            let counts = LoadCounters::PerWorkspace {
                loads: Family::default(),
                failures: Family::default(),
                last_load: Family::default(),
                records: Family::default(),
            };
            if let LoadCounters::PerWorkspace {
                loads,
                failures,
                last_load,
                records,
            } = &counts
            {
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
            }
            (counts, None)
        } else {
            let (loads, failures) = (Counter::default(), Counter::default());
            let records = Family::<CollectionLabels, Gauge>::default();
            for collection in Collection::ALL {
                let _ = records.get_or_create(&CollectionLabels {
                    collection: collection.name(),
                });
            }
            registry.register(
                "snapshot_loads",
                "Snapshot files loaded successfully",
                loads.clone(),
            );
            registry.register(
                "snapshot_load_failures",
                "Snapshot files rejected",
                failures.clone(),
            );
            registry.register(
                "snapshot_records",
                "Records held by every serving workspace, by collection",
                records.clone(),
            );
            (LoadCounters::Total { loads, failures }, Some(records))
        };
        SnapshotMetrics {
            workspaces,
            by_age,
            records,
            counts,
        }
    }

    pub(super) fn loaded(&self, file: &str, workspace: &str, counts: &RecordCounts) {
        match &self.counts {
            LoadCounters::Total { loads, .. } => {
                loads.inc();
            }
            LoadCounters::PerWorkspace {
                loads,
                last_load,
                records,
                ..
            } => {
                loads
                    .get_or_create(&FileLabels {
                        file: file.to_owned(),
                    })
                    .inc();
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0.0, |d| d.as_secs_f64());
                last_load
                    .get_or_create(&WorkspaceLabels {
                        workspace: workspace.to_owned(),
                    })
                    .set(now);
                for (collection, n) in counts.by_collection() {
                    let labels = RecordLabels {
                        workspace: workspace.to_owned(),
                        collection: collection.name(),
                    };
                    records.get_or_create(&labels).set(n as i64);
                }
            }
        }
    }

    pub(super) fn rejected(&self, file: &str) {
        match &self.counts {
            LoadCounters::Total { failures, .. } => {
                failures.inc();
            }
            LoadCounters::PerWorkspace { failures, .. } => {
                failures
                    .get_or_create(&FileLabels {
                        file: file.to_owned(),
                    })
                    .inc();
            }
        }
    }

    pub(super) fn unloaded(&self, workspace: &str) {
        if let LoadCounters::PerWorkspace {
            last_load, records, ..
        } = &self.counts
        {
            last_load.remove(&WorkspaceLabels {
                workspace: workspace.to_owned(),
            });
            for collection in Collection::ALL {
                records.remove(&RecordLabels {
                    workspace: workspace.to_owned(),
                    collection: collection.name(),
                });
            }
        }
    }

    pub(super) fn fleet(&self, fleet: &Fleet) {
        for (state, n) in [
            ("serving", fleet.serving),
            ("failing", fleet.failing),
            ("stale", fleet.stale),
        ] {
            self.workspaces
                .get_or_create(&StateLabels { state })
                .set(n as i64);
        }
        for (bucket, max_seconds) in AGE_BUCKETS {
            let n = fleet
                .ages
                .iter()
                .filter(|age| age.as_secs() <= bucket)
                .count();
            self.by_age
                .get_or_create(&AgeLabels { max_seconds })
                .set(n as i64);
        }
        if let Some(records) = &self.records {
            for (collection, n) in fleet.records.by_collection() {
                records
                    .get_or_create(&CollectionLabels {
                        collection: collection.name(),
                    })
                    .set(n as i64);
            }
        }
    }
}
