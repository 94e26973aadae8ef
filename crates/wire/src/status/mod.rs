//! The body of the admin listener's `GET /snapshots`: the loader keeps each
//! file's [`FileStatus`], `ops` writes the body, and `versions --replica`
//! (`publish::fleet`) reads it back, so it is one type for both ends, below
//! all three.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use crate::store::time::utc_now;

mod source;

use crate::store::RecordCounts;
pub use source::{OriginStatus, SourceStatus};

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SnapshotsStatus {
    /// Every entry, in all, whatever the filter.
    #[serde(default)]
    pub summary: Summary,
    /// The entries the filter keeps (all of them without one), by name.
    pub files: Vec<FileStatus>,
    /// Object storage only: the state of the polls.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<OriginStatus>,
    /// What `--trust-key` verifies: `enabled: false` says that nothing is.
    #[serde(default)]
    pub signatures: Verification,
}

/// Whether versions are verified before they load, and with which keys.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verification {
    /// False: no `--trust-key`, nothing is verified.
    pub enabled: bool,
    /// The ids of the keys trusted.
    pub trusted_keys: Vec<String>,
    /// Whether what was accepted is remembered across restarts
    /// (`--cache-dir`).
    pub remembered: bool,
    /// Serving versions whose signature has expired (they keep serving).
    pub expired: usize,
    /// Entries whose newest content was refused for its signature.
    pub refused: usize,
}

/// The accepted signature of the version a file serves.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignatureStatus {
    pub key_id: String,
    pub revision: u64,
    pub signed_at: String,
    pub expires_at: String,
    /// Past `expires_at`: it keeps serving, but would not be accepted anew.
    pub expired: bool,
}

/// Entries counted by state; an entry may be in more than one (a rejected
/// replacement of a serving workspace is `serving` and `error`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    pub files: usize,
    pub serving: usize,
    pub error: usize,
    pub stale: usize,
    /// Entries whose workspace's data is in memory now
    /// ([`Residency::Resident`]): every serving one without a budget.
    #[serde(default)]
    pub resident: usize,
}

/// Where a workspace's data is, as `/snapshots` shows each entry's. One
/// field rather than a flag, so that a later way of holding data (mapped
/// from disk) is one more value, not one more field.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Residency {
    /// Its records are in memory: answered at once.
    Resident,
    /// Its records are not in memory: under a budget, a request loads
    /// them; without one, a version refused (for memory or its
    /// signature) whose keys are known.
    NotResident,
}

/// The states `?state=` selects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileState {
    /// Serving a version.
    Serving,
    /// The current content was rejected (the previous version may serve).
    Error,
    /// Object storage: a newer version cannot be downloaded now.
    Stale,
}

impl FileState {
    const ALL: [(&str, FileState); 3] = [
        ("serving", FileState::Serving),
        ("error", FileState::Error),
        ("stale", FileState::Stale),
    ];

    pub fn of(self, file: &FileStatus) -> bool {
        match self {
            FileState::Serving => file.serving_version.is_some(),
            FileState::Error => file.error.is_some(),
            FileState::Stale => file.source_error.is_some(),
        }
    }
}

/// `GET /snapshots?workspace=ID&state=serving|error|stale&resident=true|false`:
/// which entries to list. Any of them may be given; each may be left out.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StatusFilter {
    pub workspace: Option<String>,
    pub state: Option<FileState>,
    /// `true`: the entries whose data is in memory; `false`: those with a
    /// workspace whose data is not (an entry that serves nothing is
    /// neither).
    pub resident: Option<bool>,
}

/// A `/snapshots` query that is refused (400), naming what is accepted.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum FilterError {
    #[error("state {0:?} is not one of serving, error, stale")]
    UnknownState(String),
    #[error("resident {0:?} is not one of true, false")]
    UnknownResident(String),
    #[error("unknown parameter {0:?}: /snapshots takes workspace, state and resident")]
    UnknownParameter(String),
}

impl StatusFilter {
    /// Reads a query string; an unknown parameter or state is refused,
    /// naming what is accepted.
    pub fn parse(query: &str) -> Result<StatusFilter, FilterError> {
        let mut filter = StatusFilter::default();
        for (name, value) in form_urlencoded::parse(query.as_bytes()) {
            match name.as_ref() {
                "workspace" => filter.workspace = Some(value.into_owned()),
                "state" => {
                    let state = FileState::ALL
                        .iter()
                        .find(|(n, _)| *n == value)
                        .map(|(_, s)| *s);
                    filter.state =
                        Some(state.ok_or_else(|| FilterError::UnknownState(value.into_owned()))?);
                }
                "resident" => {
                    filter.resident = Some(match value.as_ref() {
                        "true" => true,
                        "false" => false,
                        _ => return Err(FilterError::UnknownResident(value.into_owned())),
                    });
                }
                other => return Err(FilterError::UnknownParameter(other.to_owned())),
            }
        }
        Ok(filter)
    }

    pub fn keeps(&self, file: &FileStatus) -> bool {
        self.workspace
            .as_ref()
            .is_none_or(|w| file.workspace.as_ref() == Some(w))
            && self.state.is_none_or(|s| s.of(file))
            && self.resident.is_none_or(|resident| {
                let wanted = if resident {
                    Residency::Resident
                } else {
                    Residency::NotResident
                };
                file.residency == Some(wanted)
            })
    }
}

impl SnapshotsStatus {
    /// The body for `files` (every entry) under `filter`.
    pub fn new(
        files: Vec<FileStatus>,
        source: Option<OriginStatus>,
        mut signatures: Verification,
        filter: &StatusFilter,
    ) -> SnapshotsStatus {
        signatures.expired = files
            .iter()
            .filter(|f| f.signature.as_ref().is_some_and(|s| s.expired))
            .count();
        signatures.refused = files.iter().filter(|f| f.refused.is_some()).count();
        let count = |state: FileState| files.iter().filter(|f| state.of(f)).count();
        let summary = Summary {
            files: files.len(),
            serving: count(FileState::Serving),
            error: count(FileState::Error),
            stale: count(FileState::Stale),
            resident: files
                .iter()
                .filter(|f| f.residency == Some(Residency::Resident))
                .count(),
        };
        SnapshotsStatus {
            summary,
            files: files.into_iter().filter(|f| filter.keeps(f)).collect(),
            source,
            signatures,
        }
    }
}

/// What `GET /snapshots` shows for one file (read back by `versions --replica`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct FileStatus {
    pub file: String,
    pub workspace: Option<String>,
    /// The version serving from this file: always `serving_version`'s
    /// value. It was the field's first name; clients read it, so it stays.
    pub version: Option<String>,
    /// When the version now serving was loaded (RFC 3339, UTC).
    pub loaded_at: Option<String>,
    pub records: Option<RecordCounts>,
    /// Records of the serving version taken over from the version before
    /// it, unchanged, without parsing them again; 0 for a first load.
    pub records_reused: Option<usize>,
    pub warnings: Vec<String>,
    /// Why the file's current content was rejected; `null` when it serves.
    pub error: Option<String>,
    /// When the current content was rejected (RFC 3339, UTC); `null` when
    /// it serves.
    pub failed_at: Option<String>,
    /// The version this file serves now, whatever happened to its newer
    /// content: after a rejected replacement, the previous version; `null`
    /// when the file serves nothing. The same as `version`, under a name
    /// that cannot be read as the version of the rejected content.
    pub serving_version: Option<String>,
    /// Object storage: the object the serving version came from (key, ETag
    /// or SHA-256, manifest revision, when it was fetched); `null` for a
    /// directory, or when nothing serves.
    pub source: Option<SourceStatus>,
    /// Object storage: seconds since a successful poll last found this
    /// entry serving what storage names; `null` for a directory.
    pub stale_seconds: Option<f64>,
    /// Object storage: why newer content could not be downloaded (the
    /// serving version keeps serving); `null` when nothing is wrong.
    pub source_error: Option<String>,
    /// Its kind, as `portfolio_replica_source_errors_total` labels it.
    pub source_error_kind: Option<Cow<'static, str>>,
    /// Since when that problem has lasted (RFC 3339, UTC).
    pub source_error_since: Option<String>,
    /// Whether the workspace's data is in memory now: always `resident`
    /// for a version that serves without a memory budget; with one,
    /// `not_resident` until a request loads it and again once it is
    /// evicted; `not_resident` too for a refused version whose keys are
    /// known (answered 503). `null` when the entry holds no workspace.
    #[serde(default)]
    pub residency: Option<Residency>,
    /// Under `--trust-key`: the signature the serving version was accepted
    /// with; `null` when nothing is verified or nothing serves.
    #[serde(default)]
    pub signature: Option<SignatureStatus>,
    /// Why the newest content was refused for its signature (`unsigned`,
    /// `malformed`, `untrusted`, `invalid`, `mismatch`, `replayed`,
    /// `expired`); `error` says it in words. `null` otherwise.
    #[serde(default)]
    pub refused: Option<Cow<'static, str>>,
}

impl FileStatus {
    /// A file the loader has just met: nothing known of it yet.
    pub fn new(name: &str) -> FileStatus {
        FileStatus {
            file: name.to_owned(),
            workspace: None,
            version: None,
            loaded_at: None,
            records: None,
            records_reused: None,
            warnings: Vec::new(),
            error: None,
            failed_at: None,
            serving_version: None,
            source: None,
            stale_seconds: None,
            source_error: None,
            source_error_kind: None,
            source_error_since: None,
            residency: None,
            signature: None,
            refused: None,
        }
    }

    /// Records that the file's current content was rejected; what it
    /// served before (if anything) keeps serving.
    pub fn fail(&mut self, message: String) {
        self.error = Some(message);
        self.failed_at = Some(utc_now());
        self.refused = None;
    }
}
