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
}

impl Snapshots {
    pub fn new(dir: PathBuf, store: Arc<Store>, metrics: Arc<Metrics>) -> Snapshots {
        Snapshots {
            dir,
            store,
            metrics,
            files: Mutex::new(Files::new()),
            scanning: Mutex::new(()),
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
        let present = list_snapshot_files(&self.dir)?;

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
        files::apply(&mut files, results, &mut report);
        files::resolve_conflicts(&mut files, &mut report);
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
            let result = read::read_file(&path).and_then(|bytes| snapshot::load(&name, &bytes));
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
