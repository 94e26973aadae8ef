//! The state of every snapshot file, and the steps of a scan that change
//! it. Each step is a plain function of that state (no IO), so each can be
//! tested on its own; [`super::Snapshots::scan`] runs them in order.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use serde::Serialize;

use super::ScanReport;
use super::dir::{Fingerprint, Listing};
use crate::snapshot::{Loaded, SnapshotError};
use crate::store::{Dataset, RecordCounts};

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

impl FileStatus {
    fn new(name: &str) -> FileStatus {
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
}

/// One snapshot file as the loader knows it.
pub struct FileEntry {
    /// The content last read; `None` to read the file again on the next scan.
    pub fingerprint: Option<Fingerprint>,
    pub status: FileStatus,
    /// The dataset this file serves, if any; kept when a newer content of
    /// the file is rejected, so the previous version keeps serving.
    pub dataset: Option<Arc<Dataset>>,
    /// Rejected because another file holds its workspace or a key: read
    /// again when a file goes away.
    pub conflict: bool,
}

impl FileEntry {
    pub fn new(name: &str) -> FileEntry {
        FileEntry {
            fingerprint: None,
            status: FileStatus::new(name),
            dataset: None,
            conflict: false,
        }
    }
}

/// Every file seen, by name.
pub type Files = BTreeMap<String, FileEntry>;

/// What reading one changed file gave.
pub struct ReadResult {
    pub name: String,
    pub fingerprint: Fingerprint,
    pub result: Result<Loaded, SnapshotError>,
    pub elapsed: Duration,
}

/// Step 1: forgets files that are gone. Files rejected for a conflict are
/// read again, since the file they conflicted with may be the one gone.
pub fn forget_removed(files: &mut Files, present: &Listing, report: &mut ScanReport) {
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
}

/// Step 2: the files whose content changed since they were last read. A
/// name that looks like a snapshot but cannot be read (a dangling symlink,
/// a directory, no permission) is rejected here; the previous version, if
/// any, keeps serving.
pub fn changed_files(
    files: &mut Files,
    present: &Listing,
    report: &mut ScanReport,
) -> Vec<(String, Fingerprint)> {
    let mut to_read = Vec::new();
    for (name, fingerprint) in present {
        match fingerprint {
            Ok(fp) if files.get(name).is_none_or(|e| e.fingerprint != Some(*fp)) => {
                to_read.push((name.clone(), *fp));
            }
            Ok(_) => {}
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
    to_read
}

/// Step 4: records what each read gave. A loaded file serves its new
/// dataset; a rejected one keeps serving its previous one, if it had one.
pub fn apply(files: &mut Files, results: Vec<ReadResult>, report: &mut ScanReport) {
    for ReadResult {
        name,
        fingerprint,
        result,
        elapsed,
    } in results
    {
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
}

/// Step 5: two files must not serve the same workspace, nor the same key
/// for two workspaces. The file that already served keeps serving; between
/// two new ones the first by name wins. The loser is rejected, naming both
/// files.
pub fn resolve_conflicts(files: &mut Files, report: &mut ScanReport) {
    let mut workspace_owner: HashMap<String, String> = HashMap::new();
    let mut key_owner: HashMap<[u8; 32], String> = HashMap::new();
    // Files that were serving before this scan claim first: a newcomer never
    // displaces a workspace that is already up.
    let mut order: Vec<String> = files.keys().cloned().collect();
    order.sort_by_key(|name| report.loaded.contains(name));
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

/// The workspaces that some file serves.
pub fn serving_workspaces(files: &Files) -> HashSet<String> {
    files
        .values()
        .filter_map(|e| e.dataset.as_ref())
        .map(|d| d.workspace_id.clone())
        .collect()
}

fn now_rfc3339() -> String {
    let now: DateTime<Utc> = Utc::now();
    now.to_rfc3339_opts(SecondsFormat::Millis, true)
}
