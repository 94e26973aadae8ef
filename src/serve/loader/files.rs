//! The state of every snapshot file as the loader knows it: what it read,
//! what serves, why a file was rejected, and what `/snapshots` and
//! `/metrics` show of it. The scan's steps change it (`changed`, `settle`,
//! `warm`); the functions here read it for `/metrics`, and record what a
//! scan learns besides (a download that failed, a listing that confirms).
//!
//! The states a file can be in, and what says so (still fields of one
//! [`FileEntry`]; an enum with the data of each state is yet to come):
//!
//! | state | what holds it |
//! | --- | --- |
//! | to read | `fingerprint` is `None` (new, refused content that may fit, a failed download, a conflict's loser after a removal) |
//! | serving | `dataset` (not refused), no `status.error` |
//! | rejected, the previous version serving | `dataset` (not refused) and `status.error` |
//! | rejected, serving nothing | no `dataset`, `status.error` |
//! | lost a conflict | `conflict`, `lost` (its content's claim); `dataset` the version restored, if any |
//! | refused for memory | `refused` (the bytes it needs); `dataset` its claims (refused, hollow) unless a version serves |
//! | settling (within one settle only) | `previous`: the [`Replaced`] version, restored or retired before the settle ends |
//!
//! The transitions a settle makes are methods here: [`FileEntry::read`]
//! (a content read: what an earlier one claimed or was refused for no
//! longer counts), [`FileEntry::serve_loaded`] (into settling),
//! [`FileEntry::lose`] (lost a conflict), [`FileEntry::restore`] (the
//! replaced version serves again), [`FileEntry::unserve`]; also
//! [`refused_that_fit`] (refused for memory → to read) and
//! [`fetch_failed`] (→ to read, the download's error shown). An entry
//! gone from the listing is forgotten (`changed.rs`).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::SystemTime;

use crate::metrics::Fleet;
use crate::storage::signatures::Signed;
use crate::storage::{EntryStamp, Listing, StorageError};
use crate::store::Dataset;
use crate::store::key::KeyHash;
use crate::store::time::{Instant, utc_now};
pub use portfolio_wire::status::FileStatus;

/// One snapshot file as the loader knows it.
pub struct FileEntry {
    /// The content last read; `None` to read the file again on the next scan.
    pub fingerprint: Option<EntryStamp>,
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
    /// While a scan settles a newly loaded dataset: the one it replaces,
    /// with what went with it, restored if the new one loses a conflict
    /// and the old one does not.
    /// (Boxed: a first scan of thousands of files holds an entry each,
    /// and this is needed only while one settles.)
    pub previous: Option<Box<Replaced>>,
    /// Object storage: why the content the listing names could not be
    /// downloaded, and since when; cleared by the next download.
    pub source_error: Option<(StorageError, String)>,
    /// Object storage: when a successful poll last found this entry
    /// serving (or having judged) what storage names.
    pub confirmed: Option<SystemTime>,
    /// Its content was refused for memory, needing this many bytes: read
    /// again once that much is free. Its claims serve meanwhile (hollow,
    /// answered 503) if no earlier version does.
    pub refused: Option<u64>,
    /// Under `--trust-key`: the signature the serving version was accepted
    /// with, and whether its expiry has been logged.
    pub signed: Option<Signed>,
    pub expiry_logged: bool,
}

/// The version a newly loaded dataset replaces, while a scan settles: all
/// that goes back if it is restored.
pub struct Replaced {
    pub dataset: Arc<Dataset>,
    pub status: FileStatus,
    pub written: SystemTime,
    pub signed: Option<Signed>,
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
            refused: None,
            signed: None,
            expiry_logged: false,
        }
    }

    /// Transition: a content was read (loaded or rejected). What an
    /// earlier content claimed or was refused for no longer counts.
    pub fn read(&mut self, fingerprint: EntryStamp) {
        self.fingerprint = Some(fingerprint);
        self.conflict = false;
        self.lost = None;
        self.refused = None;
    }

    /// Transition: a new dataset loaded and serves (until conflicts are
    /// decided), with `status`, written at `written`, accepted on
    /// `signed`; the version it replaces is kept aside ([`Replaced`]).
    pub fn serve_loaded(
        &mut self,
        dataset: Dataset,
        status: FileStatus,
        written: SystemTime,
        signed: Option<Signed>,
    ) {
        let status = std::mem::replace(&mut self.status, status);
        let written = std::mem::replace(&mut self.written, written);
        let signed = std::mem::replace(&mut self.signed, signed);
        self.expiry_logged = false;
        self.previous = self.dataset.replace(Arc::new(dataset)).map(|dataset| {
            Box::new(Replaced {
                dataset,
                status,
                written,
                signed,
            })
        });
    }

    /// Transition: the newly loaded content lost a conflict. Its claim is
    /// remembered ([`Lost`]) and its dataset returned, to retire; the
    /// version it replaced is kept aside still.
    pub fn lose(&mut self) -> Arc<Dataset> {
        let rejected = self.dataset.take().expect("a file that claimed");
        self.lost = Some(Lost {
            workspace: rejected.workspace_id.clone(),
            keys: rejected.key_hashes.clone(),
            written: self.written,
        });
        self.conflict = true;
        rejected
    }

    /// Transition: the version kept aside serves again, as it was.
    pub fn restore(&mut self, replaced: Replaced) {
        self.dataset = Some(replaced.dataset);
        self.status = replaced.status;
        self.written = replaced.written;
        self.signed = replaced.signed;
    }

    /// Transition: the entry serves nothing any more.
    pub fn unserve(&mut self) {
        self.dataset = None;
        self.written = SystemTime::UNIX_EPOCH;
        self.status.version = None;
        self.status.loaded_at = None;
        self.status.records = None;
        self.status.serving_version = None;
        self.status.source = None;
    }

    /// The status `/snapshots` shows, with the fields that depend on the
    /// time of asking filled in.
    pub fn status_now(&self, now: SystemTime) -> FileStatus {
        let mut status = self.status.clone();
        status.stale_seconds = self
            .confirmed
            .map(|at| now.duration_since(at).unwrap_or_default().as_secs_f64());
        if let (Some(signed), Some(signature)) = (&self.signed, &mut status.signature) {
            signature.expired = signed.statement().expired(now);
        }
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
    pub workspace: String,
    pub keys: Vec<KeyHash>,
    pub written: SystemTime,
}

/// Every file seen, by name.
pub type Files = BTreeMap<String, FileEntry>;

/// The files' state, to read or change it. A lock poisoned by a panic is
/// taken over, so that one failed scan does not stop every later scan and
/// `/snapshots`.
pub fn lock(files: &Mutex<Files>) -> MutexGuard<'_, Files> {
    files.lock().unwrap_or_else(|p| p.into_inner())
}

/// Logs a rejection once, saying whether a previous version keeps serving.
pub fn log_rejected(name: &str, entry: &FileEntry, message: &str) {
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
        // A refused version's claims (its keys answered 503) serve nothing.
        let Some(dataset) = entry.dataset.as_ref().filter(|d| !d.is_refused()) else {
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

/// Entries refused for memory that fit now, next to `committed` bytes
/// under `limit`: to be read again (in name order, each counted as it is
/// admitted, so that they are admitted as at a start).
pub fn refused_that_fit(files: &mut Files, limit: Option<u64>, committed: u64) -> Vec<String> {
    let Some(limit) = limit else {
        return Vec::new();
    };
    let mut free = limit.saturating_sub(committed);
    let mut again = Vec::new();
    for (name, entry) in files.iter_mut() {
        if let Some(need) = entry.refused
            && need <= free
        {
            free -= need;
            entry.refused = None;
            entry.fingerprint = None;
            again.push(name.clone());
        }
    }
    again
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
