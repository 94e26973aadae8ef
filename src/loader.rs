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
use std::time::{Instant as Clock, SystemTime};

use chrono::{DateTime, SecondsFormat, Utc};
use serde::Serialize;
use sha2::{Digest, Sha256};

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
    let validated = snapshot::validate(file, bytes)?;
    let version = validated
        .version
        .clone()
        .unwrap_or_else(|| derive_version(bytes));
    let dataset = store::build(&validated, version);
    Ok(Loaded {
        dataset,
        warnings: validated.warnings,
    })
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
/// changes the inode, a rewrite changes size or modification time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Fingerprint {
    len: u64,
    modified: Option<SystemTime>,
    inode: u64,
}

struct FileEntry {
    fingerprint: Option<Fingerprint>,
    status: FileStatus,
    /// The dataset this file serves, if any; kept when a newer content of
    /// the file is rejected, so the previous version keeps serving.
    dataset: Option<Arc<Dataset>>,
}

/// The outcome of one scan, for logs.
#[derive(Debug, Default)]
pub struct ScanReport {
    pub loaded: Vec<String>,
    pub rejected: Vec<String>,
    pub removed: Vec<String>,
}

/// The snapshot directory and the state of every file in it.
pub struct Snapshots {
    dir: PathBuf,
    store: Arc<Store>,
    /// A std mutex: scans run on blocking threads and never await while holding it.
    files: Mutex<BTreeMap<String, FileEntry>>,
}

impl Snapshots {
    pub fn new(dir: PathBuf, store: Arc<Store>) -> Snapshots {
        Snapshots {
            dir,
            store,
            files: Mutex::new(BTreeMap::new()),
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
    /// result. Files whose content did not change are not read again.
    pub fn scan(&self) -> std::io::Result<ScanReport> {
        let mut report = ScanReport::default();
        let present = list_snapshot_files(&self.dir)?;
        let mut files = self.files.lock().unwrap_or_else(|p| p.into_inner());

        let gone: Vec<String> = files
            .keys()
            .filter(|name| !present.contains_key(*name))
            .cloned()
            .collect();
        for name in gone {
            files.remove(&name);
            report.removed.push(name);
        }
        for (name, fingerprint) in &present {
            let unchanged = files
                .get(name)
                .is_some_and(|e| e.fingerprint == Some(*fingerprint));
            if unchanged {
                continue;
            }
            let started = Clock::now();
            let result = snapshot::read_file(&self.dir.join(name))
                .and_then(|bytes| load_snapshot(name, &bytes));
            let elapsed_ms = started.elapsed().as_millis() as u64;
            let entry = files.entry(name.clone()).or_insert_with(|| FileEntry {
                fingerprint: None,
                status: empty_status(name),
                dataset: None,
            });
            entry.fingerprint = Some(*fingerprint);
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
                        tracing::warn!(file = %name, workspace = %loaded.dataset.workspace_id, "{warning}");
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
                    report.loaded.push(name.clone());
                }
                Err(err) => {
                    tracing::error!(file = %name, error = %err, elapsed_ms, "snapshot rejected");
                    entry.status.error = Some(err.to_string());
                    report.rejected.push(name.clone());
                }
            }
        }
        resolve_conflicts(&mut files, &mut report);
        let serving = files.values().filter_map(|e| e.dataset.clone());
        self.store.publish(Catalog::new(serving));
        Ok(report)
    }
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
                // Retry when something changes: forgetting the fingerprint
                // makes the next scan read this file again.
                entry.fingerprint = None;
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

/// The snapshot files in `dir` with their fingerprints, by name.
fn list_snapshot_files(dir: &Path) -> std::io::Result<BTreeMap<String, Fingerprint>> {
    use std::os::unix::fs::MetadataExt;
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
            continue;
        };
        if !snapshot::is_snapshot_name(&name) {
            continue;
        }
        // Follow symlinks: a Kubernetes volume is links into `..data/`.
        let Ok(meta) = std::fs::metadata(entry.path()) else {
            continue;
        };
        if !meta.is_file() {
            continue;
        }
        out.insert(
            name,
            Fingerprint {
                len: meta.len(),
                modified: meta.modified().ok(),
                inode: meta.ino(),
            },
        );
    }
    Ok(out)
}

fn now_rfc3339() -> String {
    let now: DateTime<Utc> = Utc::now();
    now.to_rfc3339_opts(SecondsFormat::Millis, true)
}
