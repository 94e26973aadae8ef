//! Workspaces held in memory under a budget (`--memory-budget`), and loads
//! on demand of the others.
//!
//! With a budget, the catalog holds every workspace as a hollow dataset
//! (`Dataset::hollow`: its ids, version, keys and counts, no records), and
//! [`Resident`] holds the full datasets of those in use, keyed by their
//! fingerprint (workspace, version and content), in a `quick_cache` cache
//! weighted by bytes: it keeps the hot ones and evicts the others (its
//! policy, CLOCK-PRO-like with ghosts, keeps a workspace used once from
//! pushing out one used often: `examples/cache_policy.rs`). A request for
//! a workspace that is not resident loads it from the bytes its version
//! was validated from ([`crate::storage::Source::kept`]); concurrent
//! requests for it share that one load (the cache's placeholder: one
//! loader per key, the others wait for its value). What the scan loads
//! of a resident workspace replaces it here at once, as without a budget.
//!
//! A workspace heavier than the whole budget is held alone beyond it, one
//! at a time (the last one loaded), and said once in the log with the
//! budget it would need. A load that fails answers 503 (the caller's), is
//! counted and logged, and for a second any request for that version is
//! answered the same way without another attempt.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant as Clock};

use quick_cache::sync::Cache;
use quick_cache::{Lifecycle, OptionsBuilder, Weighter};
use rustc_hash::{FxBuildHasher, FxHashMap};

use super::demand::{self, Demanded};
pub use super::demand::{Kept, Unavailable};
use crate::metrics::Metrics;
use crate::storage::Origin;
use crate::store::Dataset;

/// Bytes a dataset holds per byte of its rendered records: the records
/// themselves, their keys, id maps and list orders ...
const HELD_FACTOR: (u64, u64) = (125, 100);

/// ... and its gzip fragments besides, with `--precompress on`: 1.6 in
/// all, against 1.52 times its JSON that a replica holding 20,000
/// workspaces of 100 KB measured, and 1.25 with `--precompress off`
/// (BENCHMARKS.md, "Memory budget"); with less, a budget's RSS passed it.
const FRAGMENT_FACTOR: (u64, u64) = (35, 100);

/// The share of the budget for workspaces used more than once (quick_cache's
/// hot section); the rest holds the ones just loaded until they prove
/// themselves. Its default (0.97) leaves the newcomers about 50 workspaces
/// of 100 KB at 256 MiB, which 64 clients starting sessions at once turn
/// over within one session: a workspace was evicted while its client still
/// paged through it. Measured with scripts/budget-bench.sh (20,000
/// workspaces, 256 MiB, sessions after a 20 s warm-up), session starts that
/// hit: 0.48 at 0.97, 0.62 at 0.8, 0.72 at 0.5, 0.69 at 0.3, 0.66 at 0.1.
const HOT_SHARE: f64 = 0.5;

/// A version evicted and loaded again within this long counts as
/// thrashing.
const THRASH_WINDOW: Duration = Duration::from_secs(10);

/// For this long after a load failed, requests for that version get the
/// same 503 without another attempt.
const FAILED_FOR: Duration = Duration::from_secs(1);

/// Requests for a resident workspace closer together than this are one
/// use to the eviction policy ([`Resident::get`]).
const SESSION_GAP_MS: u64 = 1000;

/// A load on demand taking longer than this is logged.
const SLOW_LOAD: Duration = Duration::from_millis(100);

/// The weight of a resident dataset: what [`Resident`] counts it at.
#[derive(Clone, Copy)]
struct Weigh {
    precompress: bool,
}

impl Weighter<u64, Arc<Held>> for Weigh {
    fn weight(&self, _: &u64, held: &Arc<Held>) -> u64 {
        held_bytes(&held.dataset, self.precompress).max(1)
    }
}

/// A resident dataset, and when a request last told the cache it was used.
struct Held {
    dataset: Arc<Dataset>,
    /// Milliseconds since [`Resident::started`].
    marked_ms: AtomicU64,
}

/// What a dataset holds in memory, as the budget counts it.
fn held_bytes(dataset: &Dataset, precompress: bool) -> u64 {
    let records: u64 = dataset
        .records_largest_first()
        .iter()
        .map(|r| r.bytes() as u64)
        .sum();
    let mut bytes = records * HELD_FACTOR.0 / HELD_FACTOR.1;
    if precompress {
        bytes += records * FRAGMENT_FACTOR.0 / FRAGMENT_FACTOR.1;
    }
    bytes
}

/// Collects what an insert evicted, to be counted and freed off the
/// request's thread.
#[derive(Clone, Copy, Default)]
struct Evictions;

impl Lifecycle<u64, Arc<Held>> for Evictions {
    type RequestState = Vec<(u64, Arc<Dataset>)>;

    fn on_evict(&self, evicted: &mut Self::RequestState, key: u64, held: Arc<Held>) {
        evicted.push((key, Arc::clone(&held.dataset)));
    }
}

type Datasets = Cache<u64, Arc<Held>, Weigh, FxBuildHasher, Evictions>;

/// The resident workspaces under a budget, and how to load the others.
pub struct Resident {
    datasets: Datasets,
    budget: u64,
    precompress: bool,
    metrics: Arc<Metrics>,
    /// Where listed versions are fetched from on their first load.
    origin: Arc<Origin>,
    /// Where each version that serves lies, by fingerprint; the scan
    /// keeps it current ([`Resident::kept_at`], [`Resident::forget`]).
    kept: Mutex<FxHashMap<u64, Kept>>,
    /// A workspace heavier than the whole budget, held alone beyond it.
    oversized: Mutex<Option<Arc<Dataset>>>,
    /// When versions were evicted, to tell thrashing.
    evicted_at: Mutex<FxHashMap<u64, Clock>>,
    /// Loads that failed a moment ago, with why.
    failed: Mutex<FxHashMap<u64, (Clock, String)>>,
    /// When freed memory was last handed back to the OS (ms since `started`).
    trimmed_ms: AtomicU64,
    started: Clock,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

impl Resident {
    /// Resident workspaces of at most `budget` bytes, as [`held_bytes`]
    /// counts them (their gzip fragments too if `precompress`).
    pub fn new(
        budget: u64,
        precompress: bool,
        metrics: Arc<Metrics>,
        origin: Arc<Origin>,
    ) -> Resident {
        // One shard: quick_cache splits the capacity between its shards,
        // and a workspace heavier than one shard's share would never stay.
        let options = OptionsBuilder::new()
            .shards(1)
            .hot_allocation(HOT_SHARE)
            .estimated_items_capacity((budget / (128 << 10)).clamp(16, 1 << 20) as usize)
            .weight_capacity(budget)
            .build()
            .expect("valid cache options");
        let datasets =
            Cache::with_options(options, Weigh { precompress }, FxBuildHasher, Evictions);
        Resident {
            datasets,
            budget,
            precompress,
            metrics,
            origin,
            kept: Mutex::default(),
            oversized: Mutex::default(),
            evicted_at: Mutex::default(),
            failed: Mutex::default(),
            trimmed_ms: AtomicU64::new(0),
            started: Clock::now(),
        }
    }

    /// The full dataset of `hollow`'s version if it is resident (counted
    /// as a hit or a miss).
    ///
    /// The cache is told of a use once per burst of requests
    /// ([`SESSION_GAP_MS`]): a client pages through a workspace in a burst,
    /// and twenty uses in a burst would make every workspace look as
    /// popular as the most popular one (each reaches the policy's highest
    /// count within its first burst). Told once, the policy keeps the
    /// workspaces that come back: 75% of session starts hit instead of 68%
    /// in `examples/cache_policy.rs` (Zipf 1.0, 20,000 workspaces, 256 MiB).
    pub fn get(&self, hollow: &Dataset) -> Option<Arc<Dataset>> {
        let fingerprint = hollow.fingerprint;
        let found = match self.datasets.peek(&fingerprint) {
            Some(held) => {
                let now = self.now_ms();
                if now.saturating_sub(held.marked_ms.load(Ordering::Relaxed)) >= SESSION_GAP_MS {
                    held.marked_ms.store(now, Ordering::Relaxed);
                    // Marks it used.
                    let _ = self.datasets.get(&fingerprint);
                }
                Some(Arc::clone(&held.dataset))
            }
            None => self.oversized(fingerprint),
        };
        self.metrics.resident_lookup(found.is_some());
        found
    }

    fn now_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    fn held(&self, dataset: &Arc<Dataset>) -> Arc<Held> {
        Arc::new(Held {
            dataset: Arc::clone(dataset),
            marked_ms: AtomicU64::new(self.now_ms()),
        })
    }

    /// Why the last load on demand of `dataset`'s version failed, if it
    /// did and none has succeeded since.
    pub fn failure(&self, dataset: &Dataset) -> Option<String> {
        lock(&self.failed)
            .get(&dataset.fingerprint)
            .map(|(_, why)| why.clone())
    }

    /// Whether `dataset` (hollow or not) has its records in memory.
    pub fn is_resident(&self, dataset: &Dataset) -> bool {
        !dataset.is_hollow()
            || self.datasets.contains_key(&dataset.fingerprint)
            || self.oversized(dataset.fingerprint).is_some()
    }

    fn oversized(&self, fingerprint: u64) -> Option<Arc<Dataset>> {
        lock(&self.oversized)
            .as_ref()
            .filter(|d| d.fingerprint == fingerprint)
            .cloned()
    }

    /// Loads `hollow`'s version from its kept bytes, unless another
    /// request is loading it already: then waits for that load.
    pub async fn load(&self, hollow: &Arc<Dataset>) -> Result<Arc<Dataset>, Unavailable> {
        let fingerprint = hollow.fingerprint;
        let guard = match self.datasets.get_value_or_guard_async(&fingerprint).await {
            Ok(held) => return Ok(Arc::clone(&held.dataset)),
            Err(guard) => guard,
        };
        // A loader before this one may have held it alone, or failed.
        if let Some(dataset) = self.oversized(fingerprint) {
            return Ok(dataset);
        }
        self.failed_lately(fingerprint)?;
        let kept = lock(&self.kept).get(&fingerprint).cloned().ok_or_else(|| {
            Unavailable(format!(
                "the data of workspace {} at version {} is no longer kept (a newer version replaced it); try again",
                hollow.workspace_id, hollow.version
            ))
        })?;
        let started = Clock::now();
        let (precompress, metrics) = (self.precompress, Arc::clone(&self.metrics));
        let (origin, for_load) = (Arc::clone(&self.origin), Arc::clone(hollow));
        let loading = tokio::task::spawn_blocking(move || {
            demand::load(&kept, &for_load, &origin, precompress, &metrics)
        });
        let loaded = match loading.await {
            Ok(Ok(Demanded { dataset, kept })) => {
                if let Some(kept) = kept {
                    lock(&self.kept).insert(fingerprint, kept);
                }
                Ok(dataset)
            }
            Ok(Err(unavailable)) => Err(unavailable),
            Err(panic) => Err(Unavailable(format!("the load stopped: {panic}"))),
        };
        let bytes = match &loaded {
            Ok(dataset) => held_bytes(dataset, false),
            Err(_) => 0,
        };
        self.metrics
            .demand_load(loaded.is_ok(), started.elapsed(), bytes);
        let dataset = match loaded {
            Ok(dataset) => dataset,
            Err(unavailable) => {
                tracing::error!(
                    workspace = %hollow.workspace_id,
                    version = %hollow.version,
                    error = %unavailable,
                    "load on demand failed; requests for this workspace get 503 until one succeeds"
                );
                lock(&self.failed).insert(fingerprint, (Clock::now(), unavailable.0.clone()));
                return Err(unavailable);
            }
        };
        let elapsed = started.elapsed();
        if elapsed >= SLOW_LOAD {
            tracing::info!(
                workspace = %dataset.workspace_id,
                bytes,
                elapsed_ms = elapsed.as_millis() as u64,
                "slow load on demand"
            );
        }
        if lock(&self.evicted_at)
            .remove(&fingerprint)
            .is_some_and(|at| at.elapsed() < THRASH_WINDOW)
        {
            self.metrics.reloaded_soon();
        }
        self.hold_oversized(&dataset);
        let mut evicted = Vec::new();
        // Its waiters get the dataset even if the cache does not keep it.
        let _ = guard.insert_with_lifecycle(self.held(&dataset), &mut evicted);
        self.evicted(evicted).await;
        Ok(dataset)
    }

    /// Why a load of `fingerprint` that failed a moment ago is not tried
    /// again yet.
    fn failed_lately(&self, fingerprint: u64) -> Result<(), Unavailable> {
        let mut failed = lock(&self.failed);
        match failed.get(&fingerprint) {
            Some((at, why)) if at.elapsed() < FAILED_FOR => Err(Unavailable(why.clone())),
            Some(_) => {
                failed.remove(&fingerprint);
                Ok(())
            }
            None => Ok(()),
        }
    }

    /// Holds `dataset` alone beyond the budget if it is heavier than all
    /// of it (the cache would not keep it).
    fn hold_oversized(&self, dataset: &Arc<Dataset>) {
        let weight = held_bytes(dataset, self.precompress);
        if weight <= self.budget {
            return;
        }
        let mut oversized = lock(&self.oversized);
        if oversized
            .as_ref()
            .is_none_or(|d| d.fingerprint != dataset.fingerprint)
        {
            tracing::warn!(
                workspace = %dataset.workspace_id,
                needs_bytes = weight,
                budget_bytes = self.budget,
                "a workspace heavier than the whole memory budget is held alone beyond it; raise --memory-budget to at least this to keep it with the others"
            );
        }
        let replaced = oversized.replace(Arc::clone(dataset));
        drop(oversized);
        drop(replaced);
    }

    /// Counts what an insert evicted, and frees it off the async runtime.
    async fn evicted(&self, evicted: Vec<(u64, Arc<Dataset>)>) {
        self.note_evicted(&evicted);
        if !evicted.is_empty() {
            let trim = self.trim_due();
            let _ = tokio::task::spawn_blocking(move || {
                drop(evicted);
                if trim {
                    crate::os::release_free_memory();
                }
            })
            .await;
        }
    }

    fn note_evicted(&self, evicted: &[(u64, Arc<Dataset>)]) {
        let now = Clock::now();
        let heavy = |d: &Dataset| held_bytes(d, self.precompress) > self.budget;
        {
            let mut at = lock(&self.evicted_at);
            for (key, dataset) in evicted {
                // What the cache refused as too heavy was never resident.
                if !heavy(dataset) {
                    self.metrics.evicted();
                    at.insert(*key, now);
                }
            }
            if at.len() > 100_000 {
                at.retain(|_, when| when.elapsed() < THRASH_WINDOW);
            }
        }
        let oversized = lock(&self.oversized)
            .as_ref()
            .map_or(0, |d| held_bytes(d, self.precompress));
        let held = usize::from(oversized > 0);
        self.metrics.resident(
            self.datasets.weight() + oversized,
            self.datasets.len() + held,
        );
    }

    /// Whether to hand freed memory back to the OS now: at most once a
    /// second, since `malloc_trim` walks the whole heap.
    fn trim_due(&self) -> bool {
        let now = self.started.elapsed().as_millis() as u64;
        let last = self.trimmed_ms.load(Ordering::Relaxed);
        now >= last + 1000
            && self
                .trimmed_ms
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
    }

    /// The scan: `dataset` (a version just loaded, with its bytes kept at
    /// `kept`) serves from now on, resident if it `stays`.
    pub fn loaded(&self, dataset: &Arc<Dataset>, kept: Kept, stays: bool) {
        lock(&self.kept).insert(dataset.fingerprint, kept);
        lock(&self.failed).remove(&dataset.fingerprint);
        if stays {
            let mut evicted = Vec::new();
            self.datasets.insert_with_lifecycle(
                dataset.fingerprint,
                self.held(dataset),
                &mut evicted,
            );
            self.hold_oversized(dataset);
            self.note_evicted(&evicted);
        }
    }

    /// The scan: `hollow`'s version serves from now on, listed and not
    /// read: its first load fetches it from `kept`.
    pub fn listed(&self, hollow: &Dataset, kept: Kept) {
        lock(&self.kept).insert(hollow.fingerprint, kept);
        lock(&self.failed).remove(&hollow.fingerprint);
    }

    /// The scan: `dataset`'s version no longer serves.
    pub fn forget(&self, dataset: &Dataset) {
        lock(&self.kept).remove(&dataset.fingerprint);
        lock(&self.failed).remove(&dataset.fingerprint);
        let removed = self.datasets.remove(&dataset.fingerprint);
        let mut oversized = lock(&self.oversized);
        let alone = oversized.take_if(|d| d.fingerprint == dataset.fingerprint);
        drop(oversized);
        if removed.is_some() || alone.is_some() {
            self.note_evicted(&[]);
        }
    }
}
