//! The loader: the scan over a snapshot source ([`crate::storage::StorageOrigin`],
//! a directory or a prefix of an object store), and nothing else. It knows
//! which entries are there, what each one loaded (or why it was rejected),
//! resolves conflicts between them and publishes the resulting catalog.
//! How bytes arrive is storage's business; the scan only lists, fetches
//! and loads. A build from a local file and the warm-up threads are
//! `serve::build`'s (loads on demand use them too); under a budget, what
//! the scan publishes is handed to `serve::residency`, which this uses and
//! which never uses this.
//!
//! [`Snapshots::scan`] is one line, each step a function in a file named
//! for it, from values to values:
//!
//! 1. list: `StorageOrigin::list`, the entries and their stamps;
//! 2. what changed (`changed.rs`): entries gone, entries to read. A scan
//!    that finds nothing to publish (nothing added, removed, changed or
//!    newly unreadable, no signature whose verdict changed) stops here: no
//!    conflict is decided again, no catalog is made, nothing is swapped;
//!    expiries and re-signings have been looked at;
//! 3. fetch (`fetch.rs`): each changed entry onto local disk, in order
//!    (under a budget, what a manifest describes is not fetched: its
//!    records make a hollow version);
//! 4. load (`load.rs`): each built through `serve::build::following`
//!    (taking over the unchanged records of the version it replaces), small
//!    files on every core, and judged;
//! 5. settle (`settle.rs`): what a batch gave applied, conflicts decided;
//! 6. warm up (`warm.rs`; under a budget `hollow.rs`): what is about to
//!    serve starts warming on `serve::build::warming`'s threads;
//! 7. publish (`publish.rs`): one new catalog.
//!
//! Steps 3 and 4 cut what changed into batches (`line.rs` says which, and
//! in what order: what left first, a file of 16 MiB or more alone), and
//! steps 5 to 7 run once per batch, in one place (`Snapshots::settle`).
//!
//! It blocks; call it off the async runtime (the reloader thread does).

mod batch;
mod changed;
mod fetch;
mod files;
mod hollow;
mod limit;
mod line;
mod load;
#[cfg(test)]
mod object_store_tests;
mod publish;
#[cfg(test)]
mod seam_tests;
mod settle;
mod verify;
mod warm;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant as Clock, SystemTime};

use crate::metrics::{Fleet, Metrics};
use crate::serve::residency::Resident;
use crate::storage::{ListError, Listing, StorageOrigin};
use changed::Successors;
pub use files::FileStatus;
use files::Files;
use limit::Ledger;
pub use limit::{MemoryLimit, PROCESS_BYTES, SizeError, parse_bytes, resident_bytes};
use line::{Batch, Leaving, Line};
use load::Loading;
use portfolio_domain::store::{Dataset, Store};
use portfolio_wire::status::Residency;
use settle::Settled;

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
}

impl ScanReport {
    /// Adds what a settle decided; returns the files it says to read again.
    fn add(&mut self, settled: Settled) -> Vec<String> {
        self.loaded
            .extend(settled.loaded.into_iter().map(|(name, _)| name));
        self.rejected.extend(settled.rejected);
        self.removed.extend(settled.removed);
        self.reread.extend(settled.reread.iter().cloned());
        settled.reread
    }
}

/// Datasets replaced or unloaded. The reloader frees each one itself once
/// no request uses it any more, so that freeing a gigabyte (and the page
/// table work that comes with it) does not fall to a request thread that
/// happened to hold the last reference; only a request that holds one
/// longer than [`Retired::PATIENCE`] (a slow client's long answer) is left
/// to free it, so that the scan is never stuck behind a client.
struct Retired(Vec<Arc<Dataset>>);

impl Retired {
    /// How long requests may hold a retired dataset before the reloader
    /// stops waiting and leaves the freeing to the last of them.
    const PATIENCE: Duration = Duration::from_secs(10);

    /// Frees each dataset once this is its last reference, then, if any,
    /// hands the memory back to the OS. (What loads freed is handed back
    /// once, at the end of the scan: `malloc_trim` walks the whole heap, so
    /// once per batch would make a first scan of many files quadratic.)
    fn free(self) {
        if self.0.is_empty() {
            return;
        }
        let deadline = Clock::now() + Retired::PATIENCE;
        for dataset in self.0 {
            while Arc::strong_count(&dataset) > 1 && Clock::now() < deadline {
                std::thread::sleep(Duration::from_millis(1));
            }
            drop(dataset);
        }
        portfolio_os::release_free_memory();
    }
}

/// The snapshot source and the state of every entry in it.
pub struct Snapshots {
    origin: Arc<StorageOrigin>,
    store: Arc<Store>,
    metrics: Arc<Metrics>,
    /// Per-file state, by file name. A std mutex: it is held only to read or
    /// change state (and while a scan settles, warms up and publishes what
    /// it read, so that a status never names a version before it serves:
    /// a small change's repack of gzip fragments is a fraction of a second
    /// on `medium`), never while a file is read or parsed, so `/snapshots`
    /// answers even while a large file loads.
    files: Mutex<Files>,
    /// Serializes scans: two scans interleaving could publish out of order.
    scanning: Mutex<()>,
    /// Whether the directory was found without snapshot files (warned once
    /// until some appear).
    empty: AtomicBool,
    /// Files whose load would not fit are refused before they are built.
    memory: MemoryLimit,
    /// What counts against that limit.
    ledger: Ledger,
    /// Whether loaded datasets precompress their records for gzip answers
    /// (`--precompress`).
    precompress: bool,
    /// With a memory budget: the workspaces held in memory; the catalog
    /// then holds hollow datasets (`resident.rs`).
    resident: Option<Arc<Resident>>,
}

impl Snapshots {
    pub fn new(
        origin: Arc<StorageOrigin>,
        store: Arc<Store>,
        metrics: Arc<Metrics>,
        memory: MemoryLimit,
        precompress: bool,
        resident: Option<Arc<Resident>>,
    ) -> Snapshots {
        Snapshots {
            origin,
            store,
            metrics,
            files: Mutex::new(Files::new()),
            scanning: Mutex::new(()),
            empty: AtomicBool::new(false),
            memory,
            // Under a budget, the budget and its loads in flight are
            // reserved against the limit from the start.
            ledger: resident
                .as_ref()
                .map_or_else(Ledger::default, |r| Ledger::budgeted(r.reserved())),
            precompress,
            resident,
        }
    }

    pub fn origin(&self) -> &StorageOrigin {
        &self.origin
    }

    /// The status of every snapshot file seen, by file name.
    pub fn statuses(&self) -> Vec<FileStatus> {
        let now = SystemTime::now();
        let files = self.files();
        // Without a budget, a hollow dataset is a refused version's claims:
        // its keys are known, its records were never built.
        let residency = |dataset: &Dataset| {
            let resident = match &self.resident {
                Some(resident) => resident.is_resident(dataset),
                None => !dataset.is_hollow(),
            };
            if resident {
                Residency::Resident
            } else {
                Residency::NotResident
            }
        };
        files
            .values()
            .map(|e| {
                let mut status = e.status_now(now);
                status.residency = e.dataset().map(|d| &**d).map(residency);
                let failure = self.resident.as_ref().zip(e.dataset().map(|d| &**d));
                if let Some(why) = failure.and_then(|(r, d)| r.failure(d)) {
                    // Its load on demand failed: the version does not serve.
                    status.error.get_or_insert(why);
                }
                status
            })
            .collect()
    }

    /// Every entry counted by state, for `/metrics`.
    pub fn fleet(&self) -> Fleet {
        let now = SystemTime::now();
        let mut files = self.files();
        let mut fleet = files::fleet(&files, now);
        fleet.signatures = verify::expiries(&mut files, now);
        fleet
    }

    /// Logs the serving versions whose signature has expired since the
    /// last look (the reloader looks every minute under `--trust-key`).
    pub fn look_at_expiries(&self) {
        if self.origin.trust().enabled() {
            verify::expiries(&mut self.files(), SystemTime::now());
        }
    }

    /// What `/snapshots` says of `--trust-key`.
    pub fn verification(&self) -> portfolio_wire::status::Verification {
        let trust = self.origin.trust();
        portfolio_wire::status::Verification {
            enabled: trust.enabled(),
            trusted_keys: trust.key_ids(),
            remembered: trust.remembers(),
            ..Default::default()
        }
    }

    /// The object store's state; `None` for a directory.
    pub fn source_status(&self) -> Option<crate::storage::OriginStatus> {
        self.origin.status()
    }

    fn files(&self) -> MutexGuard<'_, Files> {
        files::lock(&self.files)
    }

    /// Loads new and changed files, forgets deleted ones, and publishes the
    /// result. Files whose content did not change are not read again. A
    /// file of `LARGE_SNAPSHOT_FILE_BYTES` (16 MiB) or more loads alone and is
    /// published (one swap, with the small files read before it) as soon
    /// as it is built, so a replaced dataset is freed before the next file
    /// is read and at most one large dataset that does not serve exists at
    /// a time; small files are published in batches, once they add up to
    /// 64 MiB or have waited a moment (`batch.rs`, docs/reload.md,
    /// "Memory"). Blocks while files load: call it off the async runtime.
    pub fn scan(&self) -> std::io::Result<ScanReport> {
        let _scanning = self.scanning.lock().unwrap_or_else(|p| p.into_inner());
        self.metrics.scanned();

        // 1. List.
        let present = match self.origin.list() {
            Ok(present) => present,
            Err(ListError::Io(err)) => return Err(err),
            // Logged by the origin; nothing changes.
            Err(ListError::Source { backs_off }) => {
                self.origin.polled(backs_off);
                return Ok(ScanReport {
                    source_failed: backs_off,
                    ..ScanReport::default()
                });
            }
        };
        self.warn_if_empty(present.entries.is_empty(), present.ignored);
        let mut report = ScanReport {
            listed: true,
            ..ScanReport::default()
        };

        // 2. What changed.
        let mut files = self.files();
        let changes = changed::what_changed(&mut files, &present);
        // Content signed anew: what serves keeps serving, what was refused
        // is read again once its signature is accepted.
        let resigned = verify::resigned(&mut files, &present, self.origin.trust(), &self.metrics);
        drop(files);
        if changes.is_idle() && resigned.reread.is_empty() && !resigned.changed {
            // Nothing to publish: no settle, no conflict decided again, no
            // new catalog. (Expiries were looked at by the reloader, the
            // signatures above.)
            return Ok(self.idle(&present, report));
        }

        // 3. Fetch and 4. load, a batch at a time (`line.rs`); each batch
        // 5. settles, 6. warms up and 7. publishes.
        let loading = Loading {
            origin: &self.origin,
            metrics: &self.metrics,
            memory: self.memory,
            ledger: &self.ledger,
            precompress: self.precompress,
        };
        let mut line = Line::new(
            &present,
            &self.files,
            &loading,
            self.resident.is_some(),
            changes,
            resigned.reread,
            resigned.changed,
        );
        std::thread::scope(|scope| {
            while let Some(batch) = line.next(scope) {
                let started = Clock::now();
                let settled = self.settle(batch, &mut line.successors);
                line.read_again(started.elapsed(), report.add(settled));
            }
        });
        report.settling = line.settling;
        report.source_failed |= line.source_failed;
        if present.fresh {
            files::confirm(&mut self.files(), &present, SystemTime::now());
        }
        if !report.loaded.is_empty() || !report.rejected.is_empty() {
            portfolio_os::release_free_memory();
        }
        self.origin.polled(report.source_failed);
        Ok(report)
    }

    /// The end of a scan that found nothing to publish: an object store's
    /// entries confirmed fresh, the poll counted.
    fn idle(&self, present: &Listing, report: ScanReport) -> ScanReport {
        if present.fresh {
            files::confirm(&mut self.files(), present, SystemTime::now());
        }
        self.origin.polled(report.source_failed);
        report
    }

    /// Steps 5 to 7 for one batch, under the files lock: settles what
    /// leaves with it, what was found unreadable and what it read, warms
    /// what will serve and publishes it. Then, the lock released (freeing
    /// waits for requests still using them), frees the datasets that
    /// stopped serving.
    fn settle(&self, batch: Batch, successors: &mut Successors) -> Settled {
        let Batch {
            leaving,
            unreadable,
            read,
        } = batch;
        for result in &read {
            let dataset = result.result.as_ref().ok().map(|loaded| &loaded.dataset);
            self.ledger.settled(result.need, dataset);
        }
        let mut files = self.files();
        let removed = match leaving {
            Leaving::Gone(removed) => removed,
            Leaving::Succeeded => {
                let loaded = read
                    .iter()
                    .filter_map(|r| r.result.as_ref().ok())
                    .map(|loaded| loaded.dataset.workspace_id.as_str());
                changed::succeeded(&mut files, loaded, successors)
            }
            Leaving::Unsucceeded => changed::unsucceeded(&mut files, successors),
        };
        // 5. Settle: apply, decide conflicts.
        let mut settled = settle::settle(&mut files, removed, unreadable, read);
        // 6. Warm up what won; with a budget, what won goes hollow in the
        // catalog first, and only what stays resident warms up.
        let mut loaded: Vec<&str> = settled.loaded.iter().map(|(n, _)| n.as_str()).collect();
        let mut hollow_out = hollow::Hollowed::default();
        if let Some(resident) = &self.resident {
            hollow_out = hollow::hollow_loaded(
                &mut files,
                &settled,
                resident,
                &self.origin,
                self.precompress,
            );
            loaded.clear();
        }
        let mut repacks = hollow_out.repacks;
        repacks.add(warm::start_warming(
            &mut files,
            loaded,
            &settled.restored,
            self.precompress,
        ));
        // 7. Publish. What will serve on a signature is remembered on disk
        // first, durably: a crash right after the swap must not let a
        // restart accept an older signed version of what served.
        let signed = settled
            .loaded
            .iter()
            .filter_map(|(name, _)| files.get(name)?.signed.as_ref());
        self.origin.trust().published(signed);
        self.origin.trust().persist();
        publish::publish(&files, &settled, &self.store, &self.metrics, &self.origin);
        if let Some(resident) = &self.resident {
            hollow::forget_retired(&files, &settled, resident);
        }
        self.ledger
            .published(files.values().filter_map(|e| e.dataset().map(|d| &**d)));
        // Under a budget, what loaded went hollow here, its build freed:
        // a file refused while those builds waited to settle is read again
        // in this scan, not left refused until something else retires.
        let hollowed = self.resident.is_some() && !settled.loaded.is_empty();
        if !settled.retired.is_empty() || hollowed {
            // Memory freed: what was refused for it may fit now.
            let committed = self.ledger.committed();
            let fit = files::refused_that_fit(&mut files, self.memory.bytes(), committed);
            settled.reread.extend(fit);
        }
        drop(files);
        // What a restart may recall, written off the lock.
        for (copy, memory) in &hollow_out.memories {
            self.origin.remember(copy, memory);
        }
        // Small changes' gzip fragments, now that the new versions serve.
        repacks.run();
        Retired(std::mem::take(&mut settled.retired)).free();
        settled
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
}
