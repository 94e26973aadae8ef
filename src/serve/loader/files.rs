//! The state of every snapshot file as the loader knows it: what it read,
//! what serves, why a file was rejected, and what `/snapshots` and
//! `/metrics` show of it. The scan's steps change it (`changed`, `settle`,
//! `warm`); the functions here read it for `/metrics`, and record what a
//! scan learns besides (a download that failed, a listing that confirms).
//!
//! Every entry has a name, a [`FileStatus`], when the content it holds
//! was written, a download's error and when storage last confirmed it
//! (object storage), the signature its status shows; and one
//! [`EntryState`], each with exactly the data of that state:
//!
//! | state | data | serves |
//! | --- | --- | --- |
//! | `Empty` | — | nothing: new, rejected with nothing to serve, unloaded |
//! | `Serving` | `dataset` | its content (no `status.error`); or, rejected (`status.error`), the previous version, or a content's claims refused for its signature (hollow, 503) |
//! | `Settling` (within one settle only) | `dataset`, `previous: Option<Replaced>` | the new content, until conflicts are decided |
//! | `LostConflict` | `lost: Option<Lost>` (its content's claim), `restored` | the older version restored, if any |
//! | `RefusedForMemory` | `needs` (bytes), `serving` | the previous version, else the refused content's claims (hollow, 503), if any |
//! | `RefusedUnloaded` | `needs` | nothing: refused, and the older version unloaded for a conflict |
//!
//! "To read" is not a state but a mark on any of them: no fingerprint
//! ([`FileEntry::read_again`]: new, a failed download, refused content
//! that may fit, a conflict's loser after a removal, a loser that now
//! wins, a signature's verdict that turned); what it holds serves
//! meanwhile.
//!
//! The transitions, all methods here:
//!
//! ```text
//!  any but Settling ──read──▶ Empty | Serving      (what it holds stays; Settling stays)
//!  Empty | Serving ──reject(needs)──▶ RefusedForMemory          (needs)
//!                  ──reject(no needs)──▶ Empty | Serving        (claims if nothing serves)
//!  any ──serve_loaded──▶ Settling { previous: what it held }
//!  Settling ──settled──▶ Serving                   (the previous returned, to retire)
//!  Settling ──lose──▶ LostConflict { lost }        (the new dataset and previous returned)
//!  LostConflict ──restore──▶ LostConflict { restored: previous }
//!  Serving ──unload_for_conflict──▶ LostConflict { lost: None }
//!  LostConflict { restored } ──unload_for_conflict──▶ LostConflict { restored: None }
//!  RefusedForMemory { serving } ──unload_for_conflict──▶ RefusedUnloaded
//!  RefusedForMemory ──refused_that_fit──▶ Empty | Serving   (to read)
//!  RefusedUnloaded ──refused_that_fit──▶ LostConflict { lost: None }   (to read)
//! ```
//!
//! [`fetch_failed`] changes no state (to read, the download's error
//! shown); [`FileEntry::unserve`] clears what the status shows of a
//! version serving. An entry gone from the listing is forgotten
//! (`changed.rs`), giving up what it held ([`FileEntry::into_dataset`]).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::SystemTime;

use crate::metrics::Fleet;
use crate::storage::signatures::Signed;
use crate::storage::{EntryStamp, Listing, StorageError};
use portfolio_domain::store::Dataset;
use portfolio_domain::store::key::KeyHash;
use portfolio_domain::store::time::{Instant, utc_now};
pub use portfolio_wire::status::FileStatus;

/// One snapshot file as the loader knows it: what every file has, and the
/// state it is in ([`EntryState`]), read through the accessors below.
pub struct FileEntry {
    /// The content last read; `None` to read the file again on the next
    /// scan (in any state: see the module doc).
    fingerprint: Option<EntryStamp>,
    pub status: FileStatus,
    /// When the content of the dataset it holds was written: it decides
    /// conflicts (`portfolio_domain::store::claims`).
    pub written: SystemTime,
    /// Object storage: why the content the listing names could not be
    /// downloaded, and since when; cleared by the next download.
    pub source_error: Option<(StorageError, String)>,
    /// Object storage: when a successful poll last found this entry
    /// serving (or having judged) what storage names.
    pub confirmed: Option<SystemTime>,
    /// Under `--trust-key`: the signature `status.signature` shows (the
    /// serving version was accepted with it), and whether its expiry has
    /// been logged.
    pub signed: Option<Signed>,
    pub expiry_logged: bool,
    state: EntryState,
}

/// The state a file is in, each with the data it has (module doc).
pub enum EntryState {
    /// Holds nothing: new, rejected with nothing to serve, or unloaded.
    Empty,
    /// Holds `dataset`: its content serving (no `status.error`), the
    /// previous version serving while a newer content is rejected, or a
    /// content refused for its signature's claims (hollow, answered 503).
    Serving { dataset: Arc<Dataset> },
    /// Within one settle only: `dataset` newly loaded, serving until
    /// conflicts are decided; `previous` the version it replaces, restored
    /// or retired before the settle ends. (Boxed: a first scan of
    /// thousands of files holds an entry each.)
    Settling {
        dataset: Arc<Dataset>,
        previous: Option<Box<Replaced>>,
    },
    /// Lost a conflict: read again when a file goes away. `lost` is what
    /// its current content claims, when that content lost and its dataset
    /// was dropped: it takes part in every later decision, so that the
    /// rule does not depend on the order files were read (`None`: an older
    /// version unloaded for another file's current content). `restored`:
    /// the older version that serves again.
    LostConflict {
        lost: Option<Lost>,
        restored: Option<Arc<Dataset>>,
    },
    /// Its content was refused for memory, needing `needs` bytes: read
    /// again once that much is free. `serving`: the previous version, or
    /// else the refused content's claims (hollow, answered 503), if any.
    RefusedForMemory {
        needs: u64,
        serving: Option<Arc<Dataset>>,
    },
    /// Refused for memory, and what it served since unloaded for another
    /// file's current content: read again when `needs` bytes are free or
    /// a file goes away.
    RefusedUnloaded { needs: u64 },
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
            written: SystemTime::UNIX_EPOCH,
            source_error: None,
            confirmed: None,
            signed: None,
            expiry_logged: false,
            state: EntryState::Empty,
        }
    }

    /// The content last read, if it is not to be read again.
    pub fn fingerprint(&self) -> Option<&EntryStamp> {
        self.fingerprint.as_ref()
    }

    /// To be read again on the next scan (whatever it holds meanwhile).
    pub fn read_again(&mut self) {
        self.fingerprint = None;
    }

    /// The dataset it holds, if any: serving, an older version serving,
    /// or refused claims (hollow, answered 503).
    pub fn dataset(&self) -> Option<&Arc<Dataset>> {
        match &self.state {
            EntryState::Serving { dataset } | EntryState::Settling { dataset, .. } => Some(dataset),
            EntryState::LostConflict { restored, .. } => restored.as_ref(),
            EntryState::RefusedForMemory { serving, .. } => serving.as_ref(),
            EntryState::Empty | EntryState::RefusedUnloaded { .. } => None,
        }
    }

    /// The dataset it holds, to warm it or swap it for its hollow copy.
    pub fn dataset_mut(&mut self) -> Option<&mut Arc<Dataset>> {
        match &mut self.state {
            EntryState::Serving { dataset } | EntryState::Settling { dataset, .. } => Some(dataset),
            EntryState::LostConflict { restored, .. } => restored.as_mut(),
            EntryState::RefusedForMemory { serving, .. } => serving.as_mut(),
            EntryState::Empty | EntryState::RefusedUnloaded { .. } => None,
        }
    }

    /// The entry forgotten: the dataset it held, if any.
    pub fn into_dataset(self) -> Option<Arc<Dataset>> {
        Self::into_held(self.state)
    }

    /// What its current content claims, when it lost a conflict.
    pub fn lost(&self) -> Option<&Lost> {
        match &self.state {
            EntryState::LostConflict { lost, .. } => lost.as_ref(),
            _ => None,
        }
    }

    /// Rejected for a conflict: to be read again when a file goes away.
    pub fn conflict(&self) -> bool {
        matches!(
            self.state,
            EntryState::LostConflict { .. } | EntryState::RefusedUnloaded { .. }
        )
    }

    /// While a settle decides: the version a newly loaded one replaces.
    pub fn previous(&self) -> Option<&Replaced> {
        match &self.state {
            EntryState::Settling { previous, .. } => previous.as_deref(),
            _ => None,
        }
    }

    /// Transition: a content was read (loaded or rejected). What an
    /// earlier content claimed or was refused for no longer counts: only
    /// the dataset held stays (serving, or nothing). A file read twice in
    /// one batch (listed as changed, and read again for a conflict it now
    /// wins) stays settling.
    pub fn read(&mut self, fingerprint: EntryStamp) {
        self.fingerprint = Some(fingerprint);
        let state = std::mem::replace(&mut self.state, EntryState::Empty);
        self.state = match state {
            settling @ EntryState::Settling { .. } => settling,
            state => Self::holding(Self::into_held(state)),
        };
    }

    /// Transition: the content just read is rejected. Refused for memory
    /// (`needs`), or not; a version that serves keeps serving, else the
    /// content's `claims` (refused: its keys answered 503), if any, stand
    /// in for it, written at `written`.
    pub fn reject(&mut self, needs: Option<u64>, claims: Option<Dataset>, written: SystemTime) {
        if let EntryState::Settling { .. } = self.state {
            // Read twice in one batch: the content loaded first serves.
            return;
        }
        let state = std::mem::replace(&mut self.state, EntryState::Empty);
        let held = Self::into_held(state);
        // The claims of an earlier refused content give way to these, or
        // to none: they were that content's, not this one's.
        let serving = match held {
            Some(dataset) if !dataset.is_refused() => Some(dataset),
            _ => {
                if let Some(claims) = &claims {
                    self.status.workspace = Some(claims.workspace_id.clone());
                    self.written = written;
                }
                claims.map(Arc::new)
            }
        };
        self.state = match needs {
            Some(needs) => EntryState::RefusedForMemory { needs, serving },
            None => Self::holding(serving),
        };
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
        let state = std::mem::replace(&mut self.state, EntryState::Empty);
        let previous = Self::into_held(state).map(|dataset| {
            Box::new(Replaced {
                dataset,
                status,
                written,
                signed,
            })
        });
        self.state = EntryState::Settling {
            dataset: Arc::new(dataset),
            previous,
        };
    }

    /// Transition: the newly loaded content lost a conflict. Its claim is
    /// remembered ([`Lost`]); its dataset is returned, to retire, with the
    /// version it replaced, to restore or retire.
    pub fn lose(&mut self) -> (Arc<Dataset>, Option<Replaced>) {
        let state = std::mem::replace(&mut self.state, EntryState::Empty);
        let EntryState::Settling { dataset, previous } = state else {
            unreachable!("only a newly loaded content loses")
        };
        self.state = EntryState::LostConflict {
            lost: Some(Lost {
                workspace: dataset.workspace_id.clone(),
                keys: dataset.key_hashes.clone(),
                written: self.written,
            }),
            restored: None,
        };
        (dataset, previous.map(|p| *p))
    }

    /// Transition: the version kept aside serves again, as it was.
    pub fn restore(&mut self, replaced: Replaced) {
        if let EntryState::LostConflict { restored, .. } = &mut self.state {
            *restored = Some(replaced.dataset);
        }
        self.status = replaced.status;
        self.written = replaced.written;
        self.signed = replaced.signed;
    }

    /// Transition: the older version it served is unloaded, for another
    /// file's current content: a conflict lost. Returns that version.
    pub fn unload_for_conflict(&mut self) -> Arc<Dataset> {
        let state = std::mem::replace(&mut self.state, EntryState::Empty);
        let (dataset, state) = match state {
            EntryState::Serving { dataset } => (
                dataset,
                EntryState::LostConflict {
                    lost: None,
                    restored: None,
                },
            ),
            EntryState::LostConflict {
                lost,
                restored: Some(dataset),
            } => (
                dataset,
                EntryState::LostConflict {
                    lost,
                    restored: None,
                },
            ),
            EntryState::RefusedForMemory {
                needs,
                serving: Some(dataset),
            } => (dataset, EntryState::RefusedUnloaded { needs }),
            _ => unreachable!("an older version"),
        };
        self.state = state;
        self.unserve();
        dataset
    }

    /// Transition, at the end of a settle: a newly loaded dataset that
    /// won serves; the version it replaced is returned, to retire.
    pub fn settled(&mut self) -> Option<Replaced> {
        let state = std::mem::replace(&mut self.state, EntryState::Empty);
        match state {
            EntryState::Settling { dataset, previous } => {
                self.state = EntryState::Serving { dataset };
                previous.map(|p| *p)
            }
            state => {
                self.state = state;
                None
            }
        }
    }

    /// Transition (part of the others): the status shows nothing serving.
    pub fn unserve(&mut self) {
        self.written = SystemTime::UNIX_EPOCH;
        self.status.version = None;
        self.status.loaded_at = None;
        self.status.records = None;
        self.status.serving_version = None;
        self.status.source = None;
    }

    /// The dataset a state holds, if any.
    fn into_held(state: EntryState) -> Option<Arc<Dataset>> {
        match state {
            EntryState::Serving { dataset } | EntryState::Settling { dataset, .. } => Some(dataset),
            EntryState::LostConflict { restored, .. } => restored,
            EntryState::RefusedForMemory { serving, .. } => serving,
            EntryState::Empty | EntryState::RefusedUnloaded { .. } => None,
        }
    }

    /// The state of an entry holding `dataset`, or nothing.
    fn holding(dataset: Option<Arc<Dataset>>) -> EntryState {
        dataset.map_or(EntryState::Empty, |dataset| EntryState::Serving { dataset })
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
    match entry.dataset() {
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
        let Some(dataset) = entry.dataset().filter(|d| !d.is_refused()) else {
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
        let need = match entry.state {
            EntryState::RefusedForMemory { needs, .. } | EntryState::RefusedUnloaded { needs } => {
                needs
            }
            _ => continue,
        };
        if need <= free {
            free -= need;
            let state = std::mem::replace(&mut entry.state, EntryState::Empty);
            entry.state = match state {
                EntryState::RefusedForMemory { serving, .. } => FileEntry::holding(serving),
                // Still unloaded for a conflict.
                _ => EntryState::LostConflict {
                    lost: None,
                    restored: None,
                },
            };
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
    match entry.dataset() {
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
