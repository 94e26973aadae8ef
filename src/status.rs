//! The body of the admin listener's `GET /snapshots`: `ops` writes it, and
//! `versions --replica` (`publish::fleet`) reads it back, so it is one type
//! for both ends, below both (it needs only the loader's status types).

use serde::{Deserialize, Serialize};

use crate::loader::{FileStatus, OriginStatus};

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SnapshotsStatus {
    pub files: Vec<FileStatus>,
    /// Object storage only: the state of the polls.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<OriginStatus>,
}
