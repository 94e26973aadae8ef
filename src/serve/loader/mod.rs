//! The loader: the scan over a snapshot source ([`crate::storage::Origin`],
//! a directory or a prefix of an object store). It knows which entries are
//! there, what each one loaded (or why it was rejected), resolves conflicts
//! between them and publishes the resulting catalog. How bytes arrive is
//! storage's business; the scan only lists, fetches and loads.
//!
//! [`Snapshots::scan`] reads what changed since the last scan, loads it
//! through [`crate::snapshot::load`], and publishes one new catalog. It
//! blocks; call it off the async runtime (the reloader thread does).

mod files;
mod limit;
#[cfg(test)]
mod object_store_tests;
mod read;
pub mod warm;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant as Clock, SystemTime};

use crate::metrics::{Fleet, Metrics};
use crate::snapshot;
use crate::storage::{Fingerprint, ListError, Listing, Origin, SnapshotFile};
use crate::store::{Catalog, Dataset, Previous, Store};
pub use files::FileStatus;
use files::{Files, ReadResult};
pub use limit::{MemoryLimit, parse_bytes, resident_bytes};
use read::Read;

/// The outcome of one scan, for logs and for the reloader.
#[derive(Debug, Default)]
pub struct ScanReport {
    pub loaded: Vec<String>,
    pub rejected: Vec<String>,
    pub removed: Vec<String>,
    /// Files modified so recently that they may still be being written;
    /// they are left for a later scan.
    pub settling: Vec<String>,
    /// Files whose content lost a conflict before and now wins it: read
    /// again in the same scan.
    pub reread: Vec<String>,
    /// Object storage: the listing was read (from storage, or from the
    /// cache at startup); false when the poll failed.
    pub listed: bool,
    /// Object storage: the poll, or a download, failed in a way that calls
    /// for backing off.
    pub source_failed: bool,
    /// Datasets that no longer serve, to be freed by the reloader.
    retired: Retired,
}

/// Datasets replaced or unloaded. The reloader frees each one itself once
/// no request uses it any more, so that freeing a gigabyte (and the page
/// table work that comes with it) never falls to a request thread that
/// happened to hold the last reference.
#[derive(Default)]
struct Retired(Vec<Arc<crate::store::Dataset>>);

impl std::fmt::Debug for Retired {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} dataset(s)", self.0.len())
    }
}

impl ScanReport {
    /// Hands a dataset that no longer serves to the reloader to free.
    fn retire(&mut self, dataset: Arc<crate::store::Dataset>) {
        self.retired.0.push(dataset);
    }
}

impl Retired {
    /// How long requests may hold a retired dataset before the reloader
    /// stops waiting and leaves the freeing to the last of them.
    const PATIENCE: Duration = Duration::from_secs(10);

    /// Frees each dataset once this is its last reference.
    fn free(self) {
        let deadline = Clock::now() + Retired::PATIENCE;
        for dataset in self.0 {
            while Arc::strong_count(&dataset) > 1 && Clock::now() < deadline {
                std::thread::sleep(Duration::from_millis(1));
            }
            drop(dataset);
        }
    }
}

/// The snapshot source and the state of every entry in it.
pub struct Snapshots {
    origin: Origin,
    store: Arc<Store>,
    metrics: Arc<Metrics>,
    /// Per-file state, by file name. A std mutex: it is held only to read or
    /// apply state, never while a file is read or parsed, so `/snapshots`
    /// answers at once even while a large file loads.
    files: Mutex<Files>,
    /// Serializes scans: two scans interleaving could publish out of order.
    scanning: Mutex<()>,
    /// Whether the directory was found without snapshot files (warned once
    /// until some appear).
    empty: AtomicBool,
    /// Files whose load would not fit are refused before they are built.
    memory: MemoryLimit,
    /// Whether loaded datasets precompress their records for gzip answers
    /// (`--precompress`).
    precompress: bool,
}

impl Snapshots {
    pub fn new(
        origin: Origin,
        store: Arc<Store>,
        metrics: Arc<Metrics>,
        memory: MemoryLimit,
        precompress: bool,
    ) -> Snapshots {
        Snapshots {
            origin,
            store,
            metrics,
            files: Mutex::new(Files::new()),
            scanning: Mutex::new(()),
            empty: AtomicBool::new(false),
            memory,
            precompress,
        }
    }

    pub fn origin(&self) -> &Origin {
        &self.origin
    }

    /// The status of every snapshot file seen, by file name.
    pub fn statuses(&self) -> Vec<FileStatus> {
        let now = SystemTime::now();
        self.files().values().map(|e| e.status_now(now)).collect()
    }

    /// Every entry counted by state, for `/metrics`.
    pub fn fleet(&self) -> Fleet {
        files::fleet(&self.files(), SystemTime::now())
    }

    /// The object store's state; `None` for a directory.
    pub fn source_status(&self) -> Option<crate::storage::OriginStatus> {
        self.origin.status()
    }

    fn files(&self) -> MutexGuard<'_, Files> {
        self.files.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Loads new and changed files, forgets deleted ones, and publishes the
    /// result. Files whose content did not change are not read again. A
    /// large file is published (one swap) as soon as it is built, so a
    /// replaced dataset is freed before the next file is read; small files
    /// are published in batches of at most [`BATCH_BYTES`] (docs/reload.md,
    /// "Memory"). Blocks while files load: call it off the async runtime.
    pub fn scan(&self) -> std::io::Result<ScanReport> {
        let _scanning = self.scanning.lock().unwrap_or_else(|p| p.into_inner());
        let mut report = ScanReport::default();
        let present = match self.origin.list() {
            Ok(present) => present,
            Err(ListError::Io(err)) => return Err(err),
            // Logged by the origin; nothing changes.
            Err(ListError::Source { backs_off }) => {
                report.source_failed = backs_off;
                self.origin.polled(backs_off);
                return Ok(report);
            }
        };
        report.listed = true;
        self.warn_if_empty(present.entries.is_empty(), present.ignored);

        // Under the lock: forget deleted files, decide what to read.
        let (mut to_read, mut successors) = {
            let mut files = self.files();
            let mut step = ScanReport::default();
            let successors = files::successors(&files, &present);
            files::forget_removed(
                &mut files,
                |name| present.contains(name) || successors.contains_key(name),
                &mut step,
            );
            let mut to_read = files::changed_files(&mut files, &present, &mut step);
            let reread = self.settle(&mut files, Vec::new(), step, &mut report);
            to_read.extend(listed(&present, reread));
            (to_read, successors)
        };
        self.free_retired(&mut report);

        // Each file: fetched and loaded without the lock (small ones on
        // every core); what was read settles in batches (one conflict check
        // and one catalog swap for many small files), at once when a batch
        // grows large or old, and at the end. Files that a settle says to
        // read again make the next round.
        let mut batch = Batch::default();
        // What settling cost last time: it grows with the workspaces
        // serving, and a batch waits at least a few times as long, so that
        // settling stays a small share of a scan however many there are.
        let mut settled_in = Duration::ZERO;
        while !to_read.is_empty() {
            let round = std::mem::take(&mut to_read);
            self.read_all(round, &mut |read| match read {
                Read::Done(result) => {
                    batch.add(*result);
                    if batch.is_full(SETTLE_SHARE * settled_in) {
                        let results = std::mem::take(&mut batch).results;
                        let started = Clock::now();
                        let reread = self.settle_read(results, &mut successors, &mut report);
                        settled_in = started.elapsed();
                        to_read.extend(listed(&present, reread));
                    }
                }
                Read::Settling(name) => report.settling.push(name),
                Read::Failed(name, error) => {
                    report.source_failed |= error.kind.backs_off();
                    files::fetch_failed(&mut self.files(), &name, error);
                }
            });
            let results = std::mem::take(&mut batch).results;
            if !results.is_empty() {
                let reread = self.settle_read(results, &mut successors, &mut report);
                to_read.extend(listed(&present, reread));
            }
        }

        // Entries whose successor did not load leave now, unless a file that
        // may succeed them is still being written: they go on serving until
        // a later scan has read it.
        if !successors.is_empty() && report.settling.is_empty() {
            let mut files = self.files();
            let mut step = ScanReport::default();
            files::forget_removed(&mut files, |name| !successors.contains_key(name), &mut step);
            // What this frees is read by the next scan.
            let _ = self.settle(&mut files, Vec::new(), step, &mut report);
        }
        if present.fresh {
            files::confirm(&mut self.files(), &present, SystemTime::now());
        }
        if !report.loaded.is_empty() || !report.rejected.is_empty() {
            crate::os::release_free_memory();
        }
        self.origin.polled(report.source_failed);
        Ok(report)
    }

    /// Frees the datasets that stopped serving (outside the files lock:
    /// it waits for requests still using them), then, if any, hands the
    /// memory back to the OS. (What loads freed is handed back once, at the
    /// end of the scan: `malloc_trim` walks the whole heap, so once per
    /// batch would make a first scan of many files quadratic.)
    fn free_retired(&self, report: &mut ScanReport) {
        let retired = std::mem::take(&mut report.retired);
        let any = !retired.0.is_empty();
        retired.free();
        if any {
            crate::os::release_free_memory();
        }
    }

    /// Applies what a step read, resolves conflicts, publishes the catalog
    /// and records the step's metrics; adds the step to the scan's report.
    /// Returns the files to read again now ([`ScanReport::reread`]).
    fn settle(
        &self,
        files: &mut Files,
        results: Vec<ReadResult>,
        mut step: ScanReport,
        report: &mut ScanReport,
    ) -> Vec<String> {
        let loaded_ms = files::apply(files, results, &mut step);
        files::resolve_conflicts(files, &mut step);
        files::log_loaded(files, &loaded_ms, &step);
        let catalog = Catalog::new(files.values().filter_map(|e| e.dataset.clone()));
        // A workspace that no longer serves was served by a dataset retired
        // now (a replaced one's workspace serves on).
        for retired in &step.retired.0 {
            if catalog.workspace(&retired.workspace_id).is_none() {
                self.metrics.unloaded(&retired.workspace_id);
            }
        }
        self.store.publish(catalog);

        for name in &step.loaded {
            if let Some(ds) = files.get(name).and_then(|e| e.dataset.as_ref()) {
                self.metrics.loaded(name, &ds.workspace_id, &ds.counts);
            }
        }
        for name in &step.rejected {
            self.metrics.rejected(name);
        }
        for name in &step.removed {
            self.origin.forgotten(name);
        }
        report.retired.0.append(&mut step.retired.0);
        report.loaded.append(&mut step.loaded);
        report.rejected.append(&mut step.rejected);
        report.removed.append(&mut step.removed);
        report.reread.extend(step.reread.iter().cloned());
        step.reread
    }

    /// A directory with no snapshot files serves no workspace: every key
    /// gets 401. That is usually a wrong `--snapshots` or a failed sync, so
    /// it is said loudly, once until files appear.
    fn warn_if_empty(&self, empty: bool, ignored: usize) {
        let was_empty = self.empty.swap(empty, Ordering::Relaxed);
        if empty && !was_empty {
            tracing::warn!(
                dir = %self.origin.describe(),
                ignored_names = ignored,
                "the snapshot directory holds no snapshot files (*.json, *.json.gz): no workspace is served and every key gets 401"
            );
        }
    }

    /// Settles files read: the entries they succeed leave in the same
    /// swap. Returns the files to read again now.
    fn settle_read(
        &self,
        results: Vec<ReadResult>,
        successors: &mut HashMap<String, String>,
        report: &mut ScanReport,
    ) -> Vec<String> {
        let mut files = self.files();
        let mut step = ScanReport::default();
        for loaded in results.iter().filter_map(|r| r.result.as_ref().ok()) {
            let workspace = &loaded.dataset.workspace_id;
            successors.retain(|old, successor| {
                let replaced = successor == workspace;
                if replaced {
                    files::forget_removed(&mut files, |name| name != old, &mut step);
                }
                !replaced
            });
        }
        let reread = self.settle(&mut files, results, step, report);
        drop(files);
        self.free_retired(report);
        reread
    }
}

/// A batch settles once its files add up to this many bytes: what is read
/// but not yet serving stays bounded (docs/reload.md#memory).
const BATCH_BYTES: u64 = 64 << 20;

/// ... or once its first file has waited this long, so that a burst of
/// changes is not held back by the files after it ...
const BATCH_WAIT: Duration = Duration::from_millis(50);

/// ... or this many times as long as the last settle took, if longer.
const SETTLE_SHARE: u32 = 4;

/// Files read and not yet settled.
#[derive(Default)]
struct Batch {
    results: Vec<ReadResult>,
    bytes: u64,
    since: Option<Clock>,
}

impl Batch {
    fn add(&mut self, result: ReadResult) {
        self.bytes += result.bytes;
        self.since.get_or_insert_with(Clock::now);
        self.results.push(result);
    }

    fn is_full(&self, wait: Duration) -> bool {
        let wait = wait.max(BATCH_WAIT);
        self.bytes >= BATCH_BYTES || self.since.is_some_and(|at| at.elapsed() >= wait)
    }
}

/// The names of `names` that the listing holds, with their fingerprints.
/// (A file read again wins the claim it won before, so this ends.)
fn listed(present: &Listing, names: Vec<String>) -> Vec<(String, Fingerprint)> {
    names
        .into_iter()
        .filter_map(|name| match present.entries.get(&name) {
            Some(Ok(fingerprint)) => Some((name, fingerprint.clone())),
            _ => None,
        })
        .collect()
}

/// How often a long load says how far it has come.
const PROGRESS_INTERVAL: Duration = Duration::from_secs(2);

/// Loads a snapshot; a load that takes long logs its progress every few
/// seconds, so that it is never mistaken for a hang. On a single core the
/// load is paced so that requests do not notice it ([`Pacer`]).
fn load_logging_progress(
    name: &str,
    file: &SnapshotFile,
    previous: Option<Arc<Dataset>>,
    started: Clock,
    metrics: &Metrics,
) -> Result<snapshot::Loaded, snapshot::SnapshotError> {
    let mut last = started;
    let mut pacer = Pacer::on_a_single_core(metrics);
    let previous = previous.and_then(Previous::of);
    snapshot::load_following(
        name,
        file,
        previous,
        &crate::threads::Cores,
        &mut |collection, records| {
            if let Some(pacer) = &mut pacer {
                pacer.pace();
            }
            if last.elapsed() >= PROGRESS_INTERVAL {
                last = Clock::now();
                tracing::info!(
                    file = %name,
                    collection = collection.name(),
                    records,
                    elapsed_ms = started.elapsed().as_millis() as u64,
                    "still loading"
                );
            }
        },
    )
}

/// How long the reloader works before it looks whether requests came.
const PACE_RUN: Duration = Duration::from_micros(250);

/// How long it then steps aside if they did.
const PACE_PAUSE: Duration = Duration::from_micros(500);

/// How long after the last answered request the reloader still steps
/// aside: a slice in which the worker could answer nothing (because the
/// reloader held the core) does not mean that no request is waiting.
const PACE_BUSY: Duration = Duration::from_millis(2);

/// Keeps a load from delaying requests when the reloader and the request
/// worker share one core (a replica given one CPU). The reloader works in
/// slices of [`PACE_RUN`]; after each slice, while requests were answered
/// in the last [`PACE_BUSY`], it sleeps [`PACE_PAUSE`], so a request waits
/// at most one slice, and under
/// full load the reload still gets a third of the core (it takes at most
/// about three times as long). With no requests it never pauses. With more
/// cores the scheduler runs both at once and nothing is paced.
struct Pacer<'m> {
    metrics: &'m Metrics,
    slice: Clock,
    seen: u64,
    /// When `seen` last changed.
    busy_at: Option<Clock>,
}

impl<'m> Pacer<'m> {
    fn on_a_single_core(metrics: &'m Metrics) -> Option<Pacer<'m>> {
        let cores = crate::os::cores();
        (cores == 1).then(|| Pacer {
            metrics,
            slice: Clock::now(),
            seen: metrics.answered(),
            busy_at: None,
        })
    }

    fn pace(&mut self) {
        if self.slice.elapsed() < PACE_RUN {
            return;
        }
        let answered = self.metrics.answered();
        if answered != self.seen {
            self.seen = answered;
            self.busy_at = Some(Clock::now());
        }
        if self.busy_at.is_some_and(|at| at.elapsed() < PACE_BUSY) {
            std::thread::sleep(PACE_PAUSE);
        }
        self.slice = Clock::now();
    }
}
