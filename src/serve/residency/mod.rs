//! The residency room: workspaces held in memory under a budget
//! (`--memory-budget`), and loads on demand of the others. It serves
//! requests (`serve::api` asks it for a workspace's records); the scan
//! (`serve::loader`) tells it what serves. It uses `serve::build` (a build
//! from a local file, the warm-up threads), storage and metrics, never the
//! loader.
//!
//! With a budget, the catalog holds every workspace as a hollow dataset
//! (`Dataset::hollow`: its ids, version, keys and counts, no records), and
//! [`Resident`] holds the full datasets of those in use, keyed by their
//! fingerprint (workspace, version and content), in a `quick_cache` cache
//! weighted by bytes: it keeps the hot ones and evicts the others (its
//! policy, CLOCK-PRO-like with ghosts, keeps a workspace used once from
//! pushing out one used often: `examples/cache_policy.rs`). A request for
//! a workspace that is not resident loads it from the bytes its version
//! was validated from ([`crate::storage::ScanBookkeeping::kept`]); concurrent
//! requests for it share that one load (the cache's placeholder: one
//! loader per key, the others wait for its value). What the scan loads
//! of a resident workspace replaces it here at once, as without a budget.
//!
//! A load, once started, runs in a task of its own that holds the
//! placeholder and keeps what it built, whatever happens to the requests
//! waiting on it (a client that hangs up drops only its own wait); loads
//! in flight are bounded by bytes (`bound.rs`).
//!
//! The heavy one: quick_cache refuses an item heavier than its hot share
//! of the budget (`HOT_SHARE`), so a workspace heavier than that is held
//! as "the heavy one", one at a time (the last one loaded): pinned in the
//! cache, which evicts the others to make room, so that what is resident
//! stays within max(budget, the heavy one's weight) and the resident-bytes
//! metric is the cache's weight, all of it. Idle for `HEAVY_IDLE_MS`, it
//! is let go, evicted like any other when room is needed. One heavier than the whole
//! budget is said once in the log with the budget it would need. A load
//! that fails answers 503 (the caller's), is counted and logged, and for a
//! second any request for that version is answered the same way without
//! another attempt.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant as Clock};

use quick_cache::sync::Cache;
use quick_cache::{Lifecycle, OptionsBuilder, Weighter};
use rustc_hash::{FxBuildHasher, FxHashMap};

mod bound;
mod demand;

use crate::metrics::Metrics;
use crate::storage::StorageOrigin;
use bound::LoadBound;
use demand::Demanded;
pub use demand::{KeptCopy, Unavailable};
use portfolio_domain::store::Dataset;

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

/// The heavy one is let go (unpinned, evicted like any other from then
/// on) once no request has asked for it for this long and another
/// workspace needs room: one asked for once must not keep the others out
/// for good. A guess, not a measure: longer than the pauses of a client
/// paging through a workspace.
const HEAVY_IDLE_MS: u64 = 30_000;

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
    /// Milliseconds since the resident set was made (`Resident::started`).
    marked_ms: AtomicU64,
    /// Whether it is the heavy one: pinned, so that the cache keeps it
    /// although it is heavier than its hot share, and evicts the others
    /// around it instead.
    heavy: AtomicBool,
}

/// The heavy one, as [`Resident`] remembers it: weak, so that it is
/// freed as soon as the cache lets it go.
struct Heavy {
    fingerprint: u64,
    weight: u64,
    held: Weak<Held>,
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

    fn is_pinned(&self, _: &u64, held: &Arc<Held>) -> bool {
        held.heavy.load(Ordering::Relaxed)
    }

    fn on_evict(&self, evicted: &mut Self::RequestState, key: u64, held: Arc<Held>) {
        evicted.push((key, Arc::clone(&held.dataset)));
    }
}

type Datasets = Cache<u64, Arc<Held>, Weigh, FxBuildHasher, Evictions>;

/// The resident workspaces under a budget, and how to load the others.
pub struct Resident {
    datasets: Datasets,
    budget: u64,
    /// The heaviest dataset the cache keeps by itself (its hot share).
    keeps: u64,
    precompress: bool,
    metrics: Arc<Metrics>,
    /// Where listed versions are fetched from on their first load.
    origin: Arc<StorageOrigin>,
    /// Where each version that serves lies, by fingerprint; the scan
    /// keeps it current ([`Resident::loaded`], [`Resident::listed`],
    /// [`Resident::forget`]).
    kept: Mutex<FxHashMap<u64, KeptCopy>>,
    /// The heavy one, pinned in `datasets`.
    heavy: Mutex<Option<Heavy>>,
    /// Loads on demand in flight, by bytes.
    bound: LoadBound,
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
    /// Resident workspaces of at most `budget` bytes, as `held_bytes`
    /// counts them (their gzip fragments too if `precompress`).
    pub fn new(
        budget: u64,
        precompress: bool,
        metrics: Arc<Metrics>,
        origin: Arc<StorageOrigin>,
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
            // As quick_cache computes its hot section's target.
            keeps: (budget as f64 * HOT_SHARE) as u64,
            precompress,
            metrics,
            origin,
            kept: Mutex::default(),
            heavy: Mutex::default(),
            bound: LoadBound::of_budget(budget),
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
    /// (`SESSION_GAP_MS`): a client pages through a workspace in a burst,
    /// and twenty uses in a burst would make every workspace look as
    /// popular as the most popular one (each reaches the policy's highest
    /// count within its first burst). Told once, the policy keeps the
    /// workspaces that come back: 75% of session starts hit instead of 68%
    /// in `examples/cache_policy.rs` (Zipf 1.0, 20,000 workspaces, 256 MiB).
    pub fn get(&self, hollow: &Dataset) -> Option<Arc<Dataset>> {
        let fingerprint = hollow.fingerprint;
        let found = match self.datasets.peek(&fingerprint) {
            // The fingerprint is a hash: what it finds must be this
            // workspace's version, or it is not this dataset's records.
            Some(held)
                if held.dataset.workspace_id == hollow.workspace_id
                    && held.dataset.version == hollow.version =>
            {
                let now = self.now_ms();
                if now.saturating_sub(held.marked_ms.load(Ordering::Relaxed)) >= SESSION_GAP_MS {
                    held.marked_ms.store(now, Ordering::Relaxed);
                    // Marks it used.
                    let _ = self.datasets.get(&fingerprint);
                }
                Some(Arc::clone(&held.dataset))
            }
            _ => None,
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
            heavy: AtomicBool::new(false),
        })
    }

    /// What the budget and its loads in flight take, for the memory
    /// limit's ledger to reserve.
    pub fn reserved(&self) -> u64 {
        self.budget + in_flight_bound(self.budget)
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
        !dataset.is_hollow() || self.datasets.contains_key(&dataset.fingerprint)
    }

    /// Loads `hollow`'s version from its kept bytes, unless another
    /// request is loading it already: then waits for that load.
    ///
    /// The waiting and the load run in a task of their own: a client that
    /// hangs up drops this future, not the load, which then finishes and
    /// is kept (or counted as failed) for the requests after.
    pub async fn load(
        self: &Arc<Self>,
        hollow: &Arc<Dataset>,
    ) -> Result<Arc<Dataset>, Unavailable> {
        let (resident, hollow) = (Arc::clone(self), Arc::clone(hollow));
        match tokio::spawn(async move { resident.load_or_wait(&hollow).await }).await {
            Ok(loaded) => loaded,
            Err(stopped) => Err(Unavailable(format!("the load stopped: {stopped}"))),
        }
    }

    /// [`Resident::load`], in its own task.
    async fn load_or_wait(&self, hollow: &Arc<Dataset>) -> Result<Arc<Dataset>, Unavailable> {
        let fingerprint = hollow.fingerprint;
        let guard = match self.datasets.get_value_or_guard_async(&fingerprint).await {
            Ok(held) => return Ok(Arc::clone(&held.dataset)),
            Err(guard) => guard,
        };
        // A loader before this one may have failed.
        self.failed_lately(fingerprint)?;
        let kept = lock(&self.kept).get(&fingerprint).cloned().ok_or_else(|| {
            Unavailable(format!(
                "the data of workspace {} at version {} is no longer kept (a newer version replaced it); try again",
                hollow.workspace_id, hollow.version
            ))
        })?;
        let started = Clock::now();
        // Counted against the bound until its dataset is built.
        let in_flight = self.bound.admit(bound::estimate(&kept)).await;
        let (precompress, metrics) = (self.precompress, Arc::clone(&self.metrics));
        let (origin, for_load) = (Arc::clone(&self.origin), Arc::clone(hollow));
        let loading = tokio::task::spawn_blocking(move || {
            demand::load(&kept, &for_load, &origin, precompress, &metrics)
        });
        let loaded = match loading.await {
            Ok(Ok(Demanded { dataset, kept })) => {
                if let Some(kept) = kept {
                    // Only while the version serves: one forgotten
                    // meanwhile must not leave an entry behind.
                    if let Some(was) = lock(&self.kept).get_mut(&fingerprint) {
                        *was = kept;
                    }
                }
                Ok(dataset)
            }
            Ok(Err(unavailable)) => Err(unavailable),
            Err(panic) => Err(Unavailable(format!("the load stopped: {panic}"))),
        };
        drop(in_flight);
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
                let kept = lock(&self.kept);
                if kept.contains_key(&fingerprint) {
                    lock(&self.failed).insert(fingerprint, (Clock::now(), unavailable.0.clone()));
                }
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
        let held = self.held(&dataset);
        self.hold_heavy(&held);
        let mut evicted = Vec::new();
        // Its waiters get the dataset even if the cache does not keep it.
        let _ = guard.insert_with_lifecycle(held, &mut evicted);
        self.after_insert(fingerprint, &mut evicted);
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

    /// Makes `held` the heavy one if the cache would not keep it by
    /// itself: pinned, the one before it unpinned (the cache evicts it
    /// like any other from now on). Before it is inserted, so that the
    /// cache admits it and evicts the others to make room.
    fn hold_heavy(&self, held: &Arc<Held>) {
        let weight = held_bytes(&held.dataset, self.precompress);
        if weight <= self.keeps {
            self.release_idle_heavy();
            return;
        }
        let dataset = &held.dataset;
        let mut heavy = lock(&self.heavy);
        if let Some(before) = heavy.take().and_then(|h| h.held.upgrade()) {
            before.heavy.store(false, Ordering::Relaxed);
        }
        held.heavy.store(true, Ordering::Relaxed);
        *heavy = Some(Heavy {
            fingerprint: dataset.fingerprint,
            weight,
            held: Arc::downgrade(held),
        });
        drop(heavy);
        if weight > self.budget {
            tracing::warn!(
                workspace = %dataset.workspace_id,
                needs_bytes = weight,
                budget_bytes = self.budget,
                "a workspace heavier than the whole memory budget is held alone, every other workspace evicted while it is; raise --memory-budget to at least this to keep it with the others"
            );
        } else {
            tracing::info!(
                workspace = %dataset.workspace_id,
                weight_bytes = weight,
                budget_bytes = self.budget,
                "a workspace heavier than half the memory budget is held as the heavy one, the others sharing the rest"
            );
        }
    }

    /// Lets the heavy one go if no request has asked for it for
    /// [`HEAVY_IDLE_MS`]: the cache then evicts it as it needs room.
    fn release_idle_heavy(&self) {
        let now = self.now_ms();
        let mut heavy = lock(&self.heavy);
        let idle = heavy
            .as_ref()
            .and_then(|h| h.held.upgrade())
            .is_none_or(|held| {
                now.saturating_sub(held.marked_ms.load(Ordering::Relaxed)) >= HEAVY_IDLE_MS
            });
        if idle && let Some(held) = heavy.take().and_then(|h| h.held.upgrade()) {
            held.heavy.store(false, Ordering::Relaxed);
        }
    }

    /// Most bytes resident at once: the budget, or the heavy one alone
    /// when it is heavier.
    fn ceiling(&self) -> u64 {
        let heavy = lock(&self.heavy).as_ref().map_or(0, |h| h.weight);
        self.budget.max(heavy)
    }

    /// After `fingerprint` was inserted: gone again if its version was
    /// forgotten meanwhile (a load that ended after its version stopped
    /// serving keeps nothing), or if it does not fit beside a heavy one
    /// heavier than the budget (an insert evicts before it adds, so it
    /// could pass the ceiling by itself).
    fn after_insert(&self, fingerprint: u64, evicted: &mut Vec<(u64, Arc<Dataset>)>) {
        let serving = lock(&self.kept).contains_key(&fingerprint);
        if !serving {
            self.unhold(fingerprint);
            self.datasets.remove(&fingerprint);
            return;
        }
        let heavy = lock(&self.heavy)
            .as_ref()
            .is_some_and(|h| h.fingerprint == fingerprint);
        if !heavy
            && self.datasets.weight() > self.ceiling()
            && let Some((key, held)) = self.datasets.remove(&fingerprint)
        {
            evicted.push((key, Arc::clone(&held.dataset)));
        }
    }

    /// `fingerprint` is no longer the heavy one, if it was.
    fn unhold(&self, fingerprint: u64) {
        let mut heavy = lock(&self.heavy);
        if let Some(was) = heavy.take_if(|h| h.fingerprint == fingerprint)
            && let Some(held) = was.held.upgrade()
        {
            held.heavy.store(false, Ordering::Relaxed);
        }
    }

    /// Counts what an insert evicted, and frees it off the async runtime.
    async fn evicted(&self, evicted: Vec<(u64, Arc<Dataset>)>) {
        self.note_evicted(&evicted);
        if !evicted.is_empty() {
            let trim = self.trim_due();
            let _ = tokio::task::spawn_blocking(move || {
                drop(evicted);
                if trim {
                    portfolio_os::release_free_memory();
                }
            })
            .await;
        }
    }

    fn note_evicted(&self, evicted: &[(u64, Arc<Dataset>)]) {
        let now = Clock::now();
        {
            let mut at = lock(&self.evicted_at);
            for (key, _) in evicted {
                self.metrics.evicted();
                at.insert(*key, now);
            }
            if at.len() > 100_000 {
                at.retain(|_, when| when.elapsed() < THRASH_WINDOW);
            }
        }
        // The heavy one is in the cache: its weight is all there is.
        self.metrics
            .resident(self.datasets.weight(), self.datasets.len());
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
    pub fn loaded(&self, dataset: &Arc<Dataset>, kept: KeptCopy, stays: bool) {
        lock(&self.kept).insert(dataset.fingerprint, kept);
        lock(&self.failed).remove(&dataset.fingerprint);
        if stays {
            let mut evicted = Vec::new();
            let held = self.held(dataset);
            self.hold_heavy(&held);
            self.datasets
                .insert_with_lifecycle(dataset.fingerprint, held, &mut evicted);
            self.after_insert(dataset.fingerprint, &mut evicted);
            self.note_evicted(&evicted);
        }
    }

    /// The scan: `hollow`'s version serves from now on, listed and not
    /// read: its first load fetches it from `kept`.
    pub fn listed(&self, hollow: &Dataset, kept: KeptCopy) {
        lock(&self.kept).insert(hollow.fingerprint, kept);
        lock(&self.failed).remove(&hollow.fingerprint);
    }

    /// The scan: `dataset`'s version no longer serves.
    ///
    /// Its entries go in this order, the kept bytes first, so that a load
    /// on demand ending meanwhile sees it gone and keeps nothing
    /// (`Resident::after_insert`).
    pub fn forget(&self, dataset: &Dataset) {
        let fingerprint = dataset.fingerprint;
        {
            let mut kept = lock(&self.kept);
            kept.remove(&fingerprint);
            lock(&self.failed).remove(&fingerprint);
        }
        self.unhold(fingerprint);
        if self.datasets.remove(&fingerprint).is_some() {
            self.note_evicted(&[]);
        }
    }
}

/// The bytes loads on demand in flight may take under `budget`, which the
/// memory limit must hold beside it.
pub fn in_flight_bound(budget: u64) -> u64 {
    bound::share(budget)
}

#[cfg(test)]
mod tests;
