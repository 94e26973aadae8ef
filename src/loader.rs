//! The snapshot directory: which files are there, what each one loaded (or
//! why it was rejected), and publishing the resulting catalog.
//!
//! [`load_snapshot`] is the pure step (bytes to dataset). [`Snapshots::scan`]
//! is the effectful one: it reads what changed since the last scan, loads it,
//! resolves conflicts between files, and publishes one new catalog. It blocks;
//! call it off the async runtime. The hot-reload watcher calls it too.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant as Clock, SystemTime};

use chrono::{DateTime, SecondsFormat, Utc};
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::ops::metrics::Metrics;
use crate::snapshot::{self, SnapshotError};
use crate::store::{self, Catalog, Dataset, RecordCounts, Store};

/// A dataset built from one snapshot, with what the load noticed.
pub struct Loaded {
    pub dataset: Dataset,
    pub warnings: Vec<String>,
}

/// Parses, validates, indexes and renders one snapshot. Pure: no IO.
/// `file` only names the file in errors.
pub fn load_snapshot(file: &str, bytes: &[u8]) -> Result<Loaded, SnapshotError> {
    let mut builder = store::Builder::default();
    let header = snapshot::parse(file, bytes, &mut builder)?;
    let version = header
        .version
        .clone()
        .unwrap_or_else(|| derive_version(bytes));
    let (dataset, warnings) = builder.finish(file, header, version, content_hash(bytes))?;
    Ok(Loaded { dataset, warnings })
}

/// A fast hash of the snapshot's bytes, for ETags: a strong ETag must change
/// whenever a body does, even if an exporter reuses a `version` label.
/// FxHash has no per-process seed, so replicas agree.
fn content_hash(bytes: &[u8]) -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = rustc_hash::FxBuildHasher.build_hasher();
    hasher.write(bytes);
    hasher.finish()
}

/// The version of a snapshot that names none: its content's SHA-256.
fn derive_version(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// What `GET /snapshots` shows for one file.
#[derive(Clone, Debug, Serialize)]
pub struct FileStatus {
    pub file: String,
    pub workspace: Option<String>,
    pub version: Option<String>,
    /// When the version now serving was loaded (RFC 3339, UTC).
    pub loaded_at: Option<String>,
    pub records: Option<RecordCounts>,
    pub warnings: Vec<String>,
    /// Why the file's current content was rejected; `null` when it serves.
    pub error: Option<String>,
}

/// What identifies a file's content without reading it: a rename into place
/// changes the inode, a rewrite the size or the change time, a Kubernetes
/// `..data` flip the inode behind the symlink.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Fingerprint {
    len: u64,
    modified: Option<SystemTime>,
    changed: (i64, i64),
    inode: (u64, u64),
}

struct FileEntry {
    /// The content last read; `None` to read the file again on the next scan.
    fingerprint: Option<Fingerprint>,
    status: FileStatus,
    /// The dataset this file serves, if any; kept when a newer content of
    /// the file is rejected, so the previous version keeps serving.
    dataset: Option<Arc<Dataset>>,
    /// Rejected because another file holds its workspace or a key: read
    /// again when a file goes away.
    conflict: bool,
}

impl FileEntry {
    fn new(name: &str) -> FileEntry {
        FileEntry {
            fingerprint: None,
            status: empty_status(name),
            dataset: None,
            conflict: false,
        }
    }
}

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
    files: Mutex<BTreeMap<String, FileEntry>>,
    /// Serializes scans: two scans interleaving could publish out of order.
    scanning: Mutex<()>,
}

impl Snapshots {
    pub fn new(dir: PathBuf, store: Arc<Store>, metrics: Arc<Metrics>) -> Snapshots {
        Snapshots {
            dir,
            store,
            metrics,
            files: Mutex::new(BTreeMap::new()),
            scanning: Mutex::new(()),
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The status of every snapshot file seen, by file name.
    pub fn statuses(&self) -> Vec<FileStatus> {
        let files = self.files.lock().unwrap_or_else(|p| p.into_inner());
        files.values().map(|e| e.status.clone()).collect()
    }

    /// Loads new and changed files, forgets deleted ones, and publishes the
    /// result with one swap. Files whose content did not change are not read
    /// again. Blocks while files load: call it off the async runtime.
    pub fn scan(&self) -> std::io::Result<ScanReport> {
        let _scanning = self.scanning.lock().unwrap_or_else(|p| p.into_inner());
        let mut report = ScanReport::default();
        let present = list_snapshot_files(&self.dir)?;

        // 1. Under the lock: forget deleted files, decide what to read.
        let (serving_before, to_read) = {
            let mut files = self.files.lock().unwrap_or_else(|p| p.into_inner());
            let serving_before = serving_workspaces(&files);
            let gone: Vec<String> = files
                .keys()
                .filter(|name| !present.contains_key(*name))
                .cloned()
                .collect();
            for name in gone {
                files.remove(&name);
                tracing::info!(file = %name, "snapshot file removed; its workspace is unloaded");
                report.removed.push(name);
            }
            if !report.removed.is_empty() {
                for entry in files.values_mut().filter(|e| e.conflict) {
                    entry.fingerprint = None;
                }
            }
            let mut to_read = Vec::new();
            for (name, fingerprint) in &present {
                match fingerprint {
                    Ok(fp) if files.get(name).is_none_or(|e| e.fingerprint != Some(*fp)) => {
                        to_read.push((name.clone(), *fp));
                    }
                    Ok(_) => {}
                    // A name that looks like a snapshot but cannot be read
                    // (a dangling symlink, a directory, no permission): the
                    // previous version, if any, keeps serving.
                    Err(reason) => {
                        let entry = files
                            .entry(name.clone())
                            .or_insert_with(|| FileEntry::new(name));
                        entry.fingerprint = None;
                        let message = format!("{name}: cannot read the file: {reason}");
                        if entry.status.error.as_deref() != Some(message.as_str()) {
                            tracing::error!(
                                file = %name,
                                error = %message,
                                serving_previous = entry.dataset.is_some(),
                                "snapshot rejected"
                            );
                            entry.status.error = Some(message);
                            report.rejected.push(name.clone());
                        }
                    }
                }
            }
            (serving_before, to_read)
        };

        // 2. Without the lock: read and build.
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
            let result = snapshot::read_file(&path).and_then(|bytes| load_snapshot(&name, &bytes));
            // A file that changed while it was read may be half written:
            // leave it for the next scan rather than judge it.
            if file_fingerprint(&path).ok() != Some(fingerprint) {
                report.settling.push(name);
                continue;
            }
            results.push((name, fingerprint, result, started.elapsed()));
        }

        // 3. Under the lock: apply, resolve conflicts, publish.
        let mut files = self.files.lock().unwrap_or_else(|p| p.into_inner());
        for (name, fingerprint, result, elapsed) in results {
            let elapsed_ms = elapsed.as_millis() as u64;
            let entry = files
                .entry(name.clone())
                .or_insert_with(|| FileEntry::new(&name));
            entry.fingerprint = Some(fingerprint);
            entry.conflict = false;
            match result {
                Ok(loaded) => {
                    tracing::info!(
                        file = %name,
                        workspace = %loaded.dataset.workspace_id,
                        version = %loaded.dataset.version,
                        records = loaded.dataset.counts.total(),
                        warnings = loaded.warnings.len(),
                        elapsed_ms,
                        "snapshot loaded"
                    );
                    for warning in &loaded.warnings {
                        tracing::warn!(file = %name, workspace = %loaded.dataset.workspace_id, warning = %warning, "snapshot warning");
                    }
                    entry.status = FileStatus {
                        file: name.clone(),
                        workspace: Some(loaded.dataset.workspace_id.clone()),
                        version: Some(loaded.dataset.version.clone()),
                        loaded_at: Some(now_rfc3339()),
                        records: Some(loaded.dataset.counts),
                        warnings: loaded.warnings,
                        error: None,
                    };
                    entry.dataset = Some(Arc::new(loaded.dataset));
                    report.loaded.push(name);
                }
                Err(err) => {
                    tracing::error!(
                        file = %name,
                        workspace = entry.status.workspace.as_deref().unwrap_or(""),
                        error = %err,
                        elapsed_ms,
                        serving_previous = entry.dataset.is_some(),
                        "snapshot rejected"
                    );
                    entry.status.error = Some(err.to_string());
                    report.rejected.push(name);
                }
            }
        }
        resolve_conflicts(&mut files, &mut report);
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
        let serving_after = serving_workspaces(&files);
        for workspace in serving_before.difference(&serving_after) {
            self.metrics.unloaded(workspace);
        }
        drop(files);
        if !report.loaded.is_empty() || !report.removed.is_empty() {
            release_free_memory();
        }
        Ok(report)
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

fn serving_workspaces(files: &BTreeMap<String, FileEntry>) -> std::collections::HashSet<String> {
    files
        .values()
        .filter_map(|e| e.dataset.as_ref())
        .map(|d| d.workspace_id.clone())
        .collect()
}

fn empty_status(name: &str) -> FileStatus {
    FileStatus {
        file: name.to_owned(),
        workspace: None,
        version: None,
        loaded_at: None,
        records: None,
        warnings: Vec::new(),
        error: None,
    }
}

/// Two files must not serve the same workspace, nor the same key for two
/// workspaces. The file that already served keeps serving; between two new
/// ones the first by name wins. The loser is rejected, naming both files.
fn resolve_conflicts(files: &mut BTreeMap<String, FileEntry>, report: &mut ScanReport) {
    let mut workspace_owner: HashMap<String, String> = HashMap::new();
    let mut key_owner: HashMap<[u8; 32], String> = HashMap::new();
    // Files that were serving before this scan claim first: a newcomer never
    // displaces a workspace that is already up.
    let mut order: Vec<String> = files.keys().cloned().collect();
    order.sort_by_key(|name| !report_was_serving(report, name));
    for name in order {
        let Some(entry) = files.get_mut(&name) else {
            continue;
        };
        let Some(dataset) = entry.dataset.clone() else {
            continue;
        };
        let conflict = if let Some(owner) = workspace_owner.get(&dataset.workspace_id) {
            Some(format!(
                "workspace {:?} is already served from {owner}; {name} names it too and is rejected",
                dataset.workspace_id
            ))
        } else {
            dataset.key_hashes.iter().find_map(|hash| key_owner.get(hash)).map(|owner| {
                format!("an api_keys entry of {name} is already a key of the workspace served from {owner}")
            })
        };
        match conflict {
            Some(message) => {
                tracing::error!(file = %name, error = %message, "snapshot rejected");
                entry.dataset = None;
                entry.status.error = Some(format!("{name}: {message}"));
                entry.status.version = None;
                entry.status.loaded_at = None;
                entry.status.records = None;
                entry.conflict = true;
                report.loaded.retain(|n| n != &name);
                report.rejected.push(name.clone());
            }
            None => {
                workspace_owner.insert(dataset.workspace_id.clone(), name.clone());
                for hash in &dataset.key_hashes {
                    key_owner.insert(*hash, name.clone());
                }
            }
        }
    }
}

/// Whether `name` served before this scan (it was not just loaded).
fn report_was_serving(report: &ScanReport, name: &str) -> bool {
    !report.loaded.iter().any(|n| n == name)
}

/// The snapshot files in `dir` by name, each with its fingerprint or the
/// reason it cannot be read.
fn list_snapshot_files(
    dir: &Path,
) -> std::io::Result<BTreeMap<String, Result<Fingerprint, String>>> {
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
            continue;
        };
        if !snapshot::is_snapshot_name(&name) {
            continue;
        }
        let fingerprint = match file_fingerprint(&entry.path()) {
            // Deleted between the listing and the stat: it is simply gone.
            // (A symlink to nothing, though, is a broken snapshot.)
            Err(e)
                if e.kind() == std::io::ErrorKind::NotFound
                    && !entry.file_type().is_ok_and(|t| t.is_symlink()) =>
            {
                continue;
            }
            result => result.map_err(|e| e.to_string()),
        };
        out.insert(name, fingerprint);
    }
    Ok(out)
}

/// The fingerprint of a regular file, following symlinks (a Kubernetes
/// volume is symlinks into `..data/`).
fn file_fingerprint(path: &Path) -> std::io::Result<Fingerprint> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path)?;
    if !meta.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    Ok(Fingerprint {
        len: meta.len(),
        modified: meta.modified().ok(),
        changed: (meta.ctime(), meta.ctime_nsec()),
        inode: (meta.dev(), meta.ino()),
    })
}

fn now_rfc3339() -> String {
    let now: DateTime<Utc> = Utc::now();
    now.to_rfc3339_opts(SecondsFormat::Millis, true)
}
