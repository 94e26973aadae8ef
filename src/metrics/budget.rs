//! The series of a memory budget (`--memory-budget`): what is resident
//! against the budget, lookups that found their workspace resident or not,
//! loads on demand (how many, how long, how many bytes), evictions,
//! evictions undone within seconds (thrashing), versions a restart
//! recalled from `--cache-dir`, and private copies made again. A replica without a budget
//! exposes none of them. Every label is from a fixed list.

use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use super::{OutcomeLabels, registered};

#[derive(Clone, Debug, Hash, PartialEq, Eq, prometheus_client::encoding::EncodeLabelSet)]
struct ResultLabels {
    result: &'static str,
}

pub(super) struct BudgetMetrics {
    resident_bytes: Gauge,
    resident_workspaces: Gauge,
    hits: Counter,
    misses: Counter,
    loads_ok: Counter,
    loads_failed: Counter,
    load_seconds: Histogram,
    load_bytes: Counter,
    evictions: Counter,
    reloaded_soon: Counter,
    recalled: Counter,
    copies_remade: Counter,
}

impl BudgetMetrics {
    pub(super) fn register(registry: &mut Registry, budget: u64) -> BudgetMetrics {
        let budget_gauge: Gauge = registered(
            registry,
            "memory_budget_bytes",
            "The memory budget of resident workspaces (--memory-budget)",
        );
        budget_gauge.set(i64::try_from(budget).unwrap_or(i64::MAX));
        let resident_bytes = registered(
            registry,
            "resident_bytes",
            "Bytes of the resident workspaces as the budget counts them (records, indexes, gzip fragments)",
        );
        let resident_workspaces = registered(
            registry,
            "resident_workspaces",
            "Workspaces whose data is in memory",
        );
        let lookups = Family::<ResultLabels, Counter>::default();
        registry.register(
            "resident_lookups",
            "API requests for a workspace, by whether its data was in memory (hit) or had to be loaded or waited for (miss)",
            lookups.clone(),
        );
        let loads = Family::<OutcomeLabels, Counter>::default();
        registry.register(
            "demand_loads",
            "Loads on demand of a workspace that was not resident, by outcome (ok, failed)",
            loads.clone(),
        );
        // 100 µs to about 100 s: a small workspace loads in a millisecond,
        // a large one in seconds.
        let load_seconds = Histogram::new(exponential_buckets(0.000_1, 2.5, 16));
        registry.register(
            "demand_load_duration_seconds",
            "Time a load on demand took, from the request that started it to the dataset ready",
            load_seconds.clone(),
        );
        BudgetMetrics {
            resident_bytes,
            resident_workspaces,
            hits: lookups.get_or_create_owned(&ResultLabels { result: "hit" }),
            misses: lookups.get_or_create_owned(&ResultLabels { result: "miss" }),
            loads_ok: loads.get_or_create_owned(&OutcomeLabels { outcome: "ok" }),
            loads_failed: loads.get_or_create_owned(&OutcomeLabels { outcome: "failed" }),
            load_seconds,
            load_bytes: registered(
                registry,
                "demand_load_bytes",
                "Bytes of snapshot read by loads on demand",
            ),
            evictions: registered(
                registry,
                "evictions",
                "Workspaces evicted from memory to stay within the budget",
            ),
            reloaded_soon: registered(
                registry,
                "evictions_reloaded_soon",
                "Workspaces loaded on demand again within 10 s of their eviction: thrashing, a budget too small for the traffic",
            ),
            recalled: registered(
                registry,
                "recalled_versions",
                "Versions a restart with --cache-dir served from what it remembered of them, their snapshot files not read again",
            ),
            copies_remade: registered(
                registry,
                "private_copies_remade",
                "Private copies made again from the snapshot file by a load on demand, the copy gone or no longer loading as its version",
            ),
        }
    }

    pub(super) fn lookup(&self, hit: bool) {
        if hit { &self.hits } else { &self.misses }.inc();
    }

    pub(super) fn load(&self, ok: bool, elapsed: Duration, bytes: u64) {
        if ok {
            self.loads_ok.inc();
            self.load_seconds.observe(elapsed.as_secs_f64());
            self.load_bytes.inc_by(bytes);
        } else {
            self.loads_failed.inc();
        }
    }

    pub(super) fn evicted(&self) {
        self.evictions.inc();
    }

    pub(super) fn reloaded_soon(&self) {
        self.reloaded_soon.inc();
    }

    pub(super) fn recalled(&self, versions: u64) {
        self.recalled.inc_by(versions);
    }

    pub(super) fn copy_remade(&self) {
        self.copies_remade.inc();
    }

    pub(super) fn resident(&self, bytes: u64, workspaces: usize) {
        self.resident_bytes
            .set(i64::try_from(bytes).unwrap_or(i64::MAX));
        self.resident_workspaces
            .set(i64::try_from(workspaces).unwrap_or(i64::MAX));
    }
}
