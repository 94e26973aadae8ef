//! Object storage as `/snapshots` shows it: where each entry's serving
//! version came from, and the state of the source as a whole.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

/// Object storage: where an entry's serving version came from, as
/// `/snapshots` shows it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SourceStatus {
    /// The object's key from the root of the bucket.
    pub key: String,
    /// Its ETag (prefix mode); `null` in manifest mode.
    pub etag: Option<String>,
    /// Its SHA-256 as the manifest names it; `null` in prefix mode.
    pub sha256: Option<String>,
    pub size: u64,
    /// The revision of `manifest.json` when this replica downloaded it
    /// (`null` in prefix mode). Other workspaces' publishes raise the
    /// manifest's revision too, so a lower number here does not mean this
    /// workspace is behind: compare `workspace_revision`, or the serving
    /// version, with `portfolio-replica versions`.
    pub manifest_revision: Option<u64>,
    /// The revision of the workspace's own record that named it: raised
    /// only by this workspace's publishes and rollbacks (format 2; `null`
    /// in prefix mode and for a format-1 manifest).
    #[serde(default)]
    pub workspace_revision: Option<u64>,
    /// When it was downloaded (RFC 3339, UTC); for a copy restored from
    /// `--cache-dir`, when that copy was downloaded.
    pub fetched_at: String,
    /// Restored from `--cache-dir` rather than downloaded by this process.
    pub from_cache: bool,
    /// Rebuilt from the version it replaced and a delta rather than
    /// downloaded whole: the SHA-256 of that version's object. Absent
    /// otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_delta: Option<String>,
}

/// Object storage: the state of the source as a whole, for `/snapshots`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct OriginStatus {
    /// The URL given to `--snapshots` (it holds no credentials).
    pub url: String,
    /// `prefix`, `manifest`, or `unknown` before the first successful poll.
    pub mode: Cow<'static, str>,
    /// The manifest's revision and ETag, in manifest mode.
    pub manifest_revision: Option<u64>,
    pub manifest_etag: Option<String>,
    /// When a poll last succeeded (RFC 3339, UTC), and how long ago.
    pub last_success_at: Option<String>,
    pub stale_seconds: Option<f64>,
    /// Polls that failed in a row, and why the last one did.
    pub consecutive_failures: u32,
    pub error: Option<String>,
    pub error_kind: Option<Cow<'static, str>>,
    pub error_since: Option<String>,
    /// The storage was unreachable at startup and the workspaces were
    /// restored from `--cache-dir`; false once a poll has succeeded.
    pub serving_from_cache: bool,
    /// Where downloads are kept, if `--cache-dir` was given.
    pub cache_dir: Option<String>,
}
