//! The body of the admin listener's `GET /snapshots`: the loader keeps each
//! file's [`FileStatus`], `ops` writes the body, and `versions --replica`
//! (`publish::fleet`) reads it back, so it is one type for both ends, below
//! all three.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use crate::storage::{OriginStatus, SourceStatus};
use crate::store::RecordCounts;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SnapshotsStatus {
    pub files: Vec<FileStatus>,
    /// Object storage only: the state of the polls.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<OriginStatus>,
}

/// What `GET /snapshots` shows for one file (read back by `versions --replica`).
#[derive(Clone, Debug, Serialize, Deserialize)]
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
    /// When the current content was rejected (RFC 3339, UTC); `null` when
    /// it serves.
    pub failed_at: Option<String>,
    /// The version this file serves now, whatever happened to its newer
    /// content: after a rejected replacement, the previous version; `null`
    /// when the file serves nothing.
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
}
