//! The loader: the snapshot directory, the only part of the crate that
//! reads snapshot files. It knows which files are there, what each one
//! loaded (or why it was rejected), resolves conflicts between them and
//! publishes the resulting catalog.
//!
//! [`Snapshots::scan`] reads what changed since the last scan, loads it
//! through [`crate::snapshot::load`], and publishes one new catalog. It
//! blocks; call it off the async runtime (the reloader thread does).

mod dir;
mod files;
pub mod read;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant as Clock};

use crate::metrics::Metrics;
use crate::snapshot;
use crate::store::{Catalog, Store};
use dir::{Fingerprint, file_fingerprint, list_snapshot_files};
pub use files::FileStatus;
use files::{Files, ReadResult};

/// The outcome of one scan, for logs and for the reloader.
#[derive(Debug, Default)]
pub struct ScanReport {
    pub loaded: Vec<String>,
    pub rejected: Vec<String>,
    pub removed: Vec<String>,
    /// Files modified so recently that they may still be being written;
    /// they are left for a later scan.
    pub settling: Vec<String>,
}

/// How long a file must have been left alone before it is read: a writer
/// that rewrites in place is given this long to finish.
const SETTLE: Duration = Duration::from_millis(150);

/// The snapshot directory and the state of every file in it.
pub struct Snapshots {
    dir: PathBuf,
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
}

impl Snapshots {
    pub fn new(dir: PathBuf, store: Arc<Store>, metrics: Arc<Metrics>) -> Snapshots {
        Snapshots {
            dir,
            store,
            metrics,
            files: Mutex::new(Files::new()),
            scanning: Mutex::new(()),
            empty: AtomicBool::new(false),
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The status of every snapshot file seen, by file name.
    pub fn statuses(&self) -> Vec<FileStatus> {
        self.files().values().map(|e| e.status.clone()).collect()
    }

    fn files(&self) -> MutexGuard<'_, Files> {
        self.files.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Loads new and changed files, forgets deleted ones, and publishes the
    /// result with one swap. Files whose content did not change are not read
    /// again. Blocks while files load: call it off the async runtime.
    pub fn scan(&self) -> std::io::Result<ScanReport> {
        let _scanning = self.scanning.lock().unwrap_or_else(|p| p.into_inner());
        let mut report = ScanReport::default();
        let (present, ignored) = list_snapshot_files(&self.dir)?;
        self.warn_if_empty(present.is_empty(), ignored);

        // Under the lock: forget deleted files, decide what to read.
        let (serving_before, to_read) = {
            let mut files = self.files();
            let serving_before = files::serving_workspaces(&files);
            files::forget_removed(&mut files, &present, &mut report);
            let to_read = files::changed_files(&mut files, &present, &mut report);
            (serving_before, to_read)
        };

        // Without the lock: read and build.
        let results = self.read_changed(to_read, &mut report);

        // Under the lock: apply, resolve conflicts, publish.
        let mut files = self.files();
        let loaded_ms = files::apply(&mut files, results, &mut report);
        files::resolve_conflicts(&mut files, &mut report);
        files::log_loaded(&files, &loaded_ms, &report);
        let serving = files.values().filter_map(|e| e.dataset.clone());
        self.store.publish(Catalog::new(serving));

        for name in &report.loaded {
            if let Some(ds) = files.get(name).and_then(|e| e.dataset.as_ref()) {
                self.metrics.loaded(name, &ds.workspace_id, &ds.counts);
            }
        }
        for name in &report.rejected {
            self.metrics.rejected(name);
        }
        let serving_after = files::serving_workspaces(&files);
        for workspace in serving_before.difference(&serving_after) {
            self.metrics.unloaded(workspace);
        }
        drop(files);
        if !report.loaded.is_empty() || !report.removed.is_empty() {
            release_free_memory();
        }
        Ok(report)
    }

    /// A directory with no snapshot files serves no workspace: every key
    /// gets 401. That is usually a wrong `--snapshots` or a failed sync, so
    /// it is said loudly, once until files appear.
    fn warn_if_empty(&self, empty: bool, ignored: usize) {
        let was_empty = self.empty.swap(empty, Ordering::Relaxed);
        if empty && !was_empty {
            tracing::warn!(
                dir = %self.dir.display(),
                ignored_names = ignored,
                "the snapshot directory holds no snapshot files (*.json, *.json.gz): no workspace is served and every key gets 401"
            );
        }
    }

    /// Step 3: reads and loads each changed file. A file modified too
    /// recently, or that changed while it was read, may be half written: it
    /// is left for a later scan rather than judged.
    fn read_changed(
        &self,
        to_read: Vec<(String, Fingerprint)>,
        report: &mut ScanReport,
    ) -> Vec<ReadResult> {
        let mut results = Vec::with_capacity(to_read.len());
        for (name, fingerprint) in to_read {
            if fingerprint
                .modified
                .is_some_and(|m| m.elapsed().is_ok_and(|age| age < SETTLE))
            {
                report.settling.push(name);
                continue;
            }
            let started = Clock::now();
            let path = self.dir.join(&name);
            if fingerprint.len >= LARGE_FILE {
                tracing::info!(file = %name, bytes = fingerprint.len, "loading a large snapshot");
            }
            let result = read::read_file(&path)
                .and_then(|bytes| load_logging_progress(&name, &bytes, started));
            if file_fingerprint(&path).ok() != Some(fingerprint) {
                report.settling.push(name);
                continue;
            }
            results.push(ReadResult {
                name,
                fingerprint,
                result,
                elapsed: started.elapsed(),
            });
        }
        results
    }
}

/// Files at least this large log when their load starts, and how it goes.
const LARGE_FILE: u64 = 100 << 20;

/// How often a large load says how far it has come.
const PROGRESS_INTERVAL: Duration = Duration::from_secs(2);

/// Loads a snapshot; a large one logs its progress every few seconds, so
/// that a long load is never mistaken for a hang.
fn load_logging_progress(
    name: &str,
    bytes: &[u8],
    started: Clock,
) -> Result<snapshot::Loaded, snapshot::SnapshotError> {
    let large = bytes.len() as u64 >= LARGE_FILE;
    let mut last = started;
    snapshot::load_reporting(name, bytes, &mut |collection, records| {
        if large && last.elapsed() >= PROGRESS_INTERVAL {
            last = Clock::now();
            tracing::info!(
                file = %name,
                collection = collection.name(),
                records,
                elapsed_ms = started.elapsed().as_millis() as u64,
                "still loading"
            );
        }
    })
}

/// Hands memory freed by a load (the file's bytes, the parsed document) and
/// by the replaced dataset back to the OS. glibc keeps freed small blocks in
/// its heap otherwise, and RSS would ratchet up with every reload.
fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks the allocator's own free lists.
    unsafe {
        libc::malloc_trim(0);
    }
}
