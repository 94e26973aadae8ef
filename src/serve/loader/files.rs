//! The state of every snapshot file, and the steps of a scan that change
//! it. Each step is a plain function of that state (no IO), so each can be
//! tested on its own; [`super::Snapshots::scan`] runs them in order.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use super::ScanReport;
use crate::metrics::Fleet;
use crate::snapshot::{Loaded, SnapshotError};
use crate::storage::{Fingerprint, Listing, SourceStatus, StorageError};
use crate::store::Dataset;
use crate::store::claims::{self, Claim, Conflict, Holders};
use crate::store::key::KeyHash;
use crate::store::time::{Instant, utc_now};
pub use portfolio_wire::status::FileStatus;

/// One snapshot file as the loader knows it.
pub struct FileEntry {
    /// The content last read; `None` to read the file again on the next scan.
    pub fingerprint: Option<Fingerprint>,
    pub status: FileStatus,
    /// The dataset this file serves, if any; kept when a newer content of
    /// the file is rejected, so the previous version keeps serving.
    pub dataset: Option<Arc<Dataset>>,
    /// When the content of `dataset` was written: it decides conflicts
    /// (`crate::store::claims`).
    pub written: SystemTime,
    /// Rejected because another file holds its workspace or a key: read
    /// again when a file goes away.
    pub conflict: bool,
    /// What its current content claims, when that content lost a conflict
    /// and its dataset was dropped: it takes part in every later decision,
    /// so that the rule does not depend on the order files were read.
    pub lost: Option<Lost>,
    /// While a scan applies a newly loaded dataset: the one it replaces,
    /// with the status and age that went with it, restored if the new one
    /// loses a conflict and the old one does not.
    previous: Option<(Arc<Dataset>, FileStatus, SystemTime)>,
    /// Object storage: why the content the listing names could not be
    /// downloaded, and since when; cleared by the next download.
    pub source_error: Option<(StorageError, String)>,
    /// Object storage: when a successful poll last found this entry
    /// serving (or having judged) what storage names.
    pub confirmed: Option<SystemTime>,
}

impl FileEntry {
    pub fn new(name: &str) -> FileEntry {
        FileEntry {
            fingerprint: None,
            status: FileStatus::new(name),
            dataset: None,
            written: SystemTime::UNIX_EPOCH,
            conflict: false,
            lost: None,
            previous: None,
            source_error: None,
            confirmed: None,
        }
    }

    /// The status `/snapshots` shows, with the fields that depend on the
    /// time of asking filled in.
    pub fn status_now(&self, now: SystemTime) -> FileStatus {
        let mut status = self.status.clone();
        status.stale_seconds = self
            .confirmed
            .map(|at| now.duration_since(at).unwrap_or_default().as_secs_f64());
        if let Some((error, since)) = &self.source_error {
            status.source_error = Some(error.message.clone());
            status.source_error_kind = Some(error.kind.label().into());
            status.source_error_since = Some(since.clone());
        }
        status
    }
}

/// A content's claim, kept without its dataset.
pub struct Lost {
    workspace: String,
    keys: Vec<KeyHash>,
    written: SystemTime,
}

/// Every file seen, by name.
pub type Files = BTreeMap<String, FileEntry>;

/// What reading one changed file gave.
pub struct ReadResult {
    pub name: String,
    pub fingerprint: Fingerprint,
    /// The size of what was read.
    pub bytes: u64,
    pub result: Result<Loaded, SnapshotError>,
    pub elapsed: Duration,
    /// Object storage: the object it was read from.
    pub source: Option<SourceStatus>,
}

/// Step 1: forgets files that are gone (`present` says which are not).
/// Files rejected for a conflict are read again, since the file they
/// conflicted with may be the one gone.
pub fn forget_removed(files: &mut Files, present: impl Fn(&str) -> bool, report: &mut ScanReport) {
    let gone: Vec<String> = files
        .keys()
        .filter(|name| !present(name))
        .cloned()
        .collect();
    for name in gone {
        let served = files.remove(&name).and_then(|entry| entry.dataset);
        match served {
            Some(dataset) => {
                tracing::info!(
                    file = %name,
                    workspace = %dataset.workspace_id,
                    version = %dataset.version,
                    "snapshot file removed; its workspace is unloaded"
                );
                report.retire(dataset);
            }
            None => tracing::info!(
                file = %name,
                "snapshot file removed; it served no workspace, so nothing is unloaded"
            ),
        }
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
    for (name, fingerprint) in &present.entries {
        match fingerprint {
            Ok(fp)
                if files
                    .get(name)
                    .is_none_or(|e| e.fingerprint.as_ref() != Some(fp)) =>
            {
                to_read.push((name.clone(), fp.clone()));
            }
            Ok(_) => {}
            Err(reason) => {
                let entry = files
                    .entry(name.clone())
                    .or_insert_with(|| FileEntry::new(name));
                entry.fingerprint = None;
                let message = format!("{name}: cannot read the file: {reason}");
                if entry.status.error.as_deref() != Some(message.as_str()) {
                    log_rejected(name, entry, &message);
                    entry.status.fail(message);
                    report.rejected.push(name.clone());
                }
            }
        }
    }
    to_read
}

/// Step 4: records what each read gave. A loaded file serves its new
/// dataset (logged once conflicts are resolved); a rejected one keeps
/// serving its previous one, if it had one.
pub fn apply(
    files: &mut Files,
    results: Vec<ReadResult>,
    report: &mut ScanReport,
) -> Vec<(String, u64)> {
    let mut loaded_ms = Vec::new();
    for ReadResult {
        name,
        fingerprint,
        bytes: _,
        result,
        elapsed,
        source,
    } in results
    {
        let elapsed_ms = elapsed.as_millis() as u64;
        let entry = files
            .entry(name.clone())
            .or_insert_with(|| FileEntry::new(&name));
        let written = fingerprint.written();
        entry.fingerprint = Some(fingerprint);
        entry.conflict = false;
        entry.lost = None;
        if entry.source_error.take().is_some() {
            tracing::info!(file = %name, "downloaded after earlier failures");
        }
        match result {
            Ok(loaded) => {
                let status = FileStatus {
                    file: name.clone(),
                    workspace: Some(loaded.dataset.workspace_id.clone()),
                    version: Some(loaded.dataset.version.clone()),
                    loaded_at: Some(utc_now()),
                    records: Some(loaded.dataset.counts),
                    records_reused: Some(loaded.dataset.reused_records),
                    warnings: loaded.warnings,
                    error: None,
                    failed_at: None,
                    serving_version: Some(loaded.dataset.version.clone()),
                    source,
                    ..FileStatus::new(&name)
                };
                let replaced = std::mem::replace(&mut entry.status, status);
                let replaced_written = std::mem::replace(&mut entry.written, written);
                entry.previous = entry
                    .dataset
                    .take()
                    .map(|d| (d, replaced, replaced_written));
                entry.dataset = Some(Arc::new(loaded.dataset));
                report.loaded.push(name.clone());
                loaded_ms.push((name, elapsed_ms));
            }
            Err(err) => {
                let message = err.to_string();
                log_rejected(&name, entry, &message);
                entry.status.fail(message);
                report.rejected.push(name);
            }
        }
    }
    loaded_ms
}

/// Step 5: two files must not serve the same workspace, nor the same key
/// for two workspaces ([`claims`]: the older content wins, then the first
/// name). The rule is decided on what the files hold now, never on what
/// this process loaded first, so that every replica agrees:
/// - first every file's current content claims: a loaded one, or one that
///   lost a conflict before (its claim remembered, its dataset dropped).
///   A loaded loser is rejected, naming both files; a remembered one that
///   now wins is read again at once ([`ScanReport::reread`]);
/// - then the older versions that still serve (a file whose newer content
///   was rejected, or lost just now), each only if it asks for nothing a
///   current content holds: one that does is unloaded.
pub fn resolve_conflicts(files: &mut Files, report: &mut ScanReport) {
    let mut held = Holders::default();
    let (lost, reread) = {
        let current: Vec<(Claim, bool)> = files
            .iter()
            .filter_map(|(name, e)| match (&e.dataset, &e.lost) {
                (Some(dataset), _) if e.status.error.is_none() => {
                    Some((claim(name, dataset, e.written), true))
                }
                (_, Some(lost)) => Some((
                    Claim {
                        name,
                        written: lost.written,
                        workspace: &lost.workspace,
                        keys: &lost.keys,
                    },
                    false,
                )),
                _ => None,
            })
            .collect();
        let claims: Vec<Claim> = current.iter().map(|(c, _)| *c).collect();
        let verdicts = claims::resolve(&claims, &mut held);
        let mut lost = Vec::new();
        let mut reread = Vec::new();
        for ((claim, loaded), verdict) in current.iter().zip(verdicts) {
            match (verdict, loaded) {
                (Err(conflict), true) => lost.push((claim.name.to_owned(), conflict)),
                (Ok(()), false) => reread.push(claim.name.to_owned()),
                _ => {}
            }
        }
        (lost, reread)
    };

    // The older versions: those that served before this step, and those of
    // the files that lost just now.
    let mut older: Vec<(String, Arc<Dataset>, SystemTime)> = files
        .iter()
        .filter(|(_, e)| e.status.error.is_some())
        .filter_map(|(n, e)| Some((n.clone(), Arc::clone(e.dataset.as_ref()?), e.written)))
        .collect();
    for (name, _) in &lost {
        if let Some((dataset, _, written)) = &files[name].previous {
            older.push((name.clone(), Arc::clone(dataset), *written));
        }
    }
    let claims: Vec<Claim> = older.iter().map(|(n, d, w)| claim(n, d, *w)).collect();
    let mut kept: HashMap<String, Result<(), Conflict>> = older
        .iter()
        .map(|(name, _, _)| name.clone())
        .zip(claims::resolve(&claims, &mut held))
        .collect();
    drop(claims);

    for (name, conflict) in lost {
        let entry = files.get_mut(&name).expect("a file that claimed");
        let message = format!("{name}: {conflict}");
        let rejected = entry.dataset.take().expect("a file that claimed");
        entry.lost = Some(Lost {
            workspace: rejected.workspace_id.clone(),
            keys: rejected.key_hashes.clone(),
            written: entry.written,
        });
        report.retire(rejected);
        match entry.previous.take() {
            Some((previous, status, written)) if kept.remove(&name).is_some_and(|k| k.is_ok()) => {
                super::warm::again(&previous);
                entry.dataset = Some(previous);
                entry.status = status;
                entry.written = written;
            }
            previous => {
                if let Some((previous, _, _)) = previous {
                    report.retire(previous);
                }
                unserve(entry);
            }
        }
        log_rejected(&name, entry, &message);
        entry.status.fail(message);
        entry.conflict = true;
        report.loaded.retain(|n| n != &name);
        report.rejected.push(name);
    }
    for (name, verdict) in kept {
        let Err(conflict) = verdict else { continue };
        let entry = files.get_mut(&name).expect("a file that claimed");
        let dataset = entry.dataset.take().expect("an older version");
        tracing::error!(
            file = %name,
            workspace = %dataset.workspace_id,
            version = %dataset.version,
            error = %conflict,
            "the older version this file served is unloaded: another file's current content holds what it asks for"
        );
        report.retire(dataset);
        unserve(entry);
        entry.status.fail(format!("{name}: {conflict}"));
        entry.conflict = true;
    }
    for name in reread {
        if let Some(entry) = files.get_mut(&name) {
            entry.fingerprint = None;
            report.reread.push(name);
        }
    }
    for entry in files.values_mut() {
        if let Some((replaced, _, _)) = entry.previous.take() {
            report.retire(replaced);
        }
    }
}

/// What a file's content claims.
fn claim<'a>(name: &'a str, dataset: &'a Dataset, written: SystemTime) -> Claim<'a> {
    Claim {
        name,
        written,
        workspace: &dataset.workspace_id,
        keys: &dataset.key_hashes,
    }
}

/// The entry serves nothing any more.
fn unserve(entry: &mut FileEntry) {
    entry.dataset = None;
    entry.written = SystemTime::UNIX_EPOCH;
    entry.status.version = None;
    entry.status.loaded_at = None;
    entry.status.records = None;
    entry.status.serving_version = None;
    entry.status.source = None;
}

/// Logs a rejection once, saying whether a previous version keeps serving.
fn log_rejected(name: &str, entry: &FileEntry, message: &str) {
    match &entry.dataset {
        Some(serving) => tracing::error!(
            file = %name,
            error = %message,
            workspace = %serving.workspace_id,
            serving_version = %serving.version,
            "snapshot rejected; the previous version keeps serving"
        ),
        None => tracing::error!(
            file = %name,
            error = %message,
            "snapshot rejected; it serves nothing"
        ),
    }
}

/// Logs the files that this scan loaded and that serve (after conflicts).
pub fn log_loaded(files: &Files, loaded_ms: &[(String, u64)], report: &ScanReport) {
    for (name, elapsed_ms) in loaded_ms {
        if !report.loaded.contains(name) {
            continue;
        }
        let Some(entry) = files.get(name) else {
            continue;
        };
        let Some(dataset) = &entry.dataset else {
            continue;
        };
        tracing::info!(
            file = %name,
            workspace = %dataset.workspace_id,
            version = %dataset.version,
            records = dataset.counts.total(),
            warnings = entry.status.warnings.len(),
            elapsed_ms,
            "snapshot loaded"
        );
        for warning in &entry.status.warnings {
            tracing::warn!(file = %name, workspace = %dataset.workspace_id, warning = %warning, "snapshot warning");
        }
    }
}

/// Every entry counted by state (`/metrics`): O(entries), once a scrape.
pub fn fleet(files: &Files, now: SystemTime) -> Fleet {
    let mut fleet = Fleet::default();
    for entry in files.values() {
        if entry.status.error.is_some() {
            fleet.failing += 1;
        }
        if entry.source_error.is_some() {
            fleet.stale += 1;
        }
        let Some(dataset) = &entry.dataset else {
            continue;
        };
        fleet.serving += 1;
        for (collection, n) in dataset.counts.by_collection() {
            fleet.records[collection] += n;
        }
        let loaded = entry
            .status
            .loaded_at
            .as_deref()
            .and_then(Instant::parse_rfc3339);
        if let Some(loaded) = loaded {
            let age = now
                .duration_since(loaded.to_system_time())
                .unwrap_or_default();
            fleet.ages.push(age);
        }
    }
    fleet
}

/// Object storage: entries whose content is what the listing names (read
/// before, loaded or rejected) are confirmed fresh as of `now`.
pub fn confirm(files: &mut Files, present: &Listing, now: SystemTime) {
    for (name, fingerprint) in &present.entries {
        if let (Some(entry), Ok(fp)) = (files.get_mut(name), fingerprint)
            && entry.fingerprint.as_ref() == Some(fp)
        {
            entry.confirmed = Some(now);
        }
    }
}

/// Object storage: records that the content of `name` could not be
/// downloaded. Nothing is unloaded; the entry keeps serving what it served,
/// and the next poll tries again. Logged once per change of the problem.
pub fn fetch_failed(files: &mut Files, name: &str, error: StorageError) {
    let entry = files
        .entry(name.to_owned())
        .or_insert_with(|| FileEntry::new(name));
    // Not read: the next poll tries again.
    entry.fingerprint = None;
    // Logged when the kind of problem changes; the message (which may
    // name attempts and timings) is kept up to date.
    if let Some((seen, _)) = &mut entry.source_error
        && seen.kind == error.kind
    {
        seen.message = error.message;
        return;
    }
    match &entry.dataset {
        Some(serving) => tracing::warn!(
            file = %name,
            kind = error.kind.label(),
            error = %error.message,
            workspace = %serving.workspace_id,
            serving_version = %serving.version,
            "cannot download the new snapshot; the previous version keeps serving"
        ),
        None => tracing::warn!(
            file = %name,
            kind = error.kind.label(),
            error = %error.message,
            "cannot download the snapshot; it serves nothing yet"
        ),
    }
    entry.source_error = Some((error, utc_now()));
}

/// The entries that left the listing but may have a successor in it, by
/// name, with the workspace they serve. They keep serving until the
/// successor's new version is published, in the same swap, so a workspace
/// that moves from one name to another is never unloaded in between: in
/// manifest mode when a listed name is their workspace (a prefix switching
/// to a manifest), in a directory or prefix when a name appeared that has
/// never been read (`acme-1.json` renamed to `acme-2.json`). An entry whose
/// successor does not load leaves at the end of the scan.
pub fn successors(files: &Files, present: &Listing) -> HashMap<String, String> {
    let new_names = present.entries.keys().any(|name| !files.contains_key(name));
    files
        .iter()
        .filter(|(name, _)| !present.contains(name))
        .filter_map(|(name, entry)| {
            let workspace = &entry.dataset.as_ref()?.workspace_id;
            let may_succeed = if present.names_are_workspaces {
                present.contains(workspace)
            } else {
                new_names
            };
            may_succeed.then(|| (name.clone(), workspace.clone()))
        })
        .collect()
}
