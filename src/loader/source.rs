//! Where snapshots come from: a directory on disk, or a prefix of an object
//! store (`objects.rs`). The scan (`mod.rs`) sees both alike: a listing of
//! names, each with a fingerprint of its content, and for each changed name
//! a file on local disk that it loads through the streaming `SnapshotFile`,
//! so a download costs the same memory as a file dropped into a directory.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::dir::{self, FileFingerprint};
use super::location::{Location, StorageOptions};
use super::objects::ObjectOrigin;
use crate::metrics::Metrics;

/// What identifies an entry's content without reading it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fingerprint {
    File(FileFingerprint),
    Object(ObjectVersion),
}

/// One immutable version of an object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectVersion {
    /// The object's key from the root of the bucket.
    pub key: String,
    /// What changes when the content does: the ETag the listing gave
    /// (prefix mode), or the SHA-256 the manifest names (manifest mode).
    pub tag: String,
    pub size: u64,
}

/// The entries of a source by name, each with its fingerprint or the reason
/// it cannot be read.
#[derive(Debug, Default)]
pub struct Listing {
    pub entries: BTreeMap<String, Result<Fingerprint, String>>,
    /// Names that are not snapshots (other endings, dot-names).
    pub ignored: usize,
    /// Each name is the id of the workspace it serves (a manifest lists
    /// workspaces; a directory or prefix lists files).
    pub names_are_workspaces: bool,
    /// Object storage: read from storage by this poll, rather than restored
    /// from the cache while storage is unreachable.
    pub fresh: bool,
}

impl Listing {
    pub fn contains(&self, name: &str) -> bool {
        self.entries.contains_key(name)
    }
}

/// A snapshot's content on local disk, ready to load.
#[derive(Debug)]
pub struct Local {
    pub path: PathBuf,
    /// The name load errors give: the file name, or the object's key.
    pub label: String,
    pub len: u64,
    /// Object storage: the object it came from.
    pub source: Option<SourceStatus>,
    /// A fresh download: kept in the cache if it loads, removed otherwise.
    pub download: bool,
}

/// What fetching a changed entry gave.
#[derive(Debug)]
pub enum Fetch {
    Ready(Local),
    /// Still being written (a file modified a moment ago), or replaced while
    /// it was fetched: looked at again soon, not judged now.
    Settling,
    /// Cannot be fetched now (storage trouble): nothing changes, and the
    /// next poll tries again.
    Failed(SourceError),
}

/// Why the listing failed.
#[derive(Debug)]
pub enum ListError {
    /// The directory cannot be listed.
    Io(std::io::Error),
    /// The object store cannot be listed now; the origin has logged and
    /// counted it already. `backs_off`: the trouble calls for polling less
    /// often ([`ErrorKind::backs_off`]).
    Source { backs_off: bool },
}

/// Kinds of storage trouble, as `portfolio_replica_source_errors_total`
/// labels them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// No connection: refused, reset, DNS.
    Network,
    Timeout,
    /// 503 SlowDown, 429.
    Throttling,
    /// Any other 5xx.
    ServerError,
    /// 401, 403: credentials or policy.
    Auth,
    /// An object gone between the listing and the download, or named by the
    /// manifest but missing.
    NotFound,
    /// A body shorter than its Content-Length, or not what the manifest says
    /// (size, SHA-256).
    Incomplete,
    /// The manifest is not valid JSON, or not a manifest this build reads.
    Manifest,
    /// The cache directory or the temporary file cannot be written.
    Disk,
    Other,
}

impl ErrorKind {
    pub const fn label(self) -> &'static str {
        match self {
            ErrorKind::Network => "network",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Throttling => "throttling",
            ErrorKind::ServerError => "server_error",
            ErrorKind::Auth => "auth",
            ErrorKind::NotFound => "not_found",
            ErrorKind::Incomplete => "incomplete",
            ErrorKind::Manifest => "manifest",
            ErrorKind::Disk => "disk",
            ErrorKind::Other => "other",
        }
    }

    /// Whether polling should slow down: storage is failing or throttling.
    /// A missing object, a bad manifest or a full disk are not storage
    /// failing, and polling on finds their fix soonest.
    pub const fn backs_off(self) -> bool {
        !matches!(
            self,
            ErrorKind::NotFound | ErrorKind::Manifest | ErrorKind::Disk
        )
    }
}

/// One failure to read the object store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceError {
    pub kind: ErrorKind,
    pub message: String,
}

impl SourceError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> SourceError {
        SourceError {
            kind,
            message: message.into(),
        }
    }
}

impl std::fmt::Display for SourceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.message, self.kind.label())
    }
}

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
    /// The revision of the manifest that named it; `null` in prefix mode.
    pub manifest_revision: Option<u64>,
    /// When it was downloaded (RFC 3339, UTC); for a copy restored from
    /// `--cache-dir`, when that copy was downloaded.
    pub fetched_at: String,
    /// Restored from `--cache-dir` rather than downloaded by this process.
    pub from_cache: bool,
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

/// Where the snapshots come from.
pub enum Origin {
    Directory(PathBuf),
    Objects(Box<ObjectOrigin>),
}

impl Origin {
    /// The source `location` names. A directory must exist; an object
    /// store is not contacted until the first poll.
    pub fn open(
        location: &Location,
        options: &StorageOptions,
        metrics: Arc<Metrics>,
    ) -> Result<Origin, String> {
        match location {
            Location::Directory(dir) => {
                let meta = std::fs::metadata(dir).map_err(|e| {
                    format!("snapshot directory {} cannot be read: {e}", dir.display())
                })?;
                if !meta.is_dir() {
                    return Err(format!("{} is not a directory", dir.display()));
                }
                Ok(Origin::Directory(dir.clone()))
            }
            Location::Url(url) => Ok(Origin::Objects(Box::new(ObjectOrigin::open(
                url, options, metrics,
            )?))),
        }
    }

    /// What logs call the source: the directory or the URL.
    pub fn describe(&self) -> String {
        match self {
            Origin::Directory(dir) => dir.display().to_string(),
            Origin::Objects(objects) => objects.url().to_owned(),
        }
    }

    /// The directory, for the file watcher; `None` for an object store.
    pub fn directory(&self) -> Option<&Path> {
        match self {
            Origin::Directory(dir) => Some(dir),
            Origin::Objects(_) => None,
        }
    }

    /// The entries and their fingerprints.
    pub fn list(&self) -> Result<Listing, ListError> {
        match self {
            Origin::Directory(dir) => dir::list_snapshot_files(dir).map_err(ListError::Io),
            Origin::Objects(objects) => objects.list(),
        }
    }

    /// The content of `name` at `fingerprint` on local disk.
    pub fn fetch(&self, name: &str, fingerprint: &Fingerprint) -> Fetch {
        match (self, fingerprint) {
            (Origin::Directory(dir), Fingerprint::File(fp)) => dir::fetch(dir, name, fp),
            (Origin::Objects(objects), Fingerprint::Object(version)) => {
                objects.fetch(name, version)
            }
            _ => Fetch::Failed(SourceError::new(
                ErrorKind::Other,
                "a fingerprint of another kind of source",
            )),
        }
    }

    /// Whether `name` still has the content at `fingerprint` after it was
    /// loaded: a file rewritten during the read must be read again.
    pub fn unchanged(&self, name: &str, fingerprint: &Fingerprint) -> bool {
        match (self, fingerprint) {
            (Origin::Directory(dir), Fingerprint::File(fp)) => {
                dir::file_fingerprint(&dir.join(name)).ok().as_ref() == Some(fp)
            }
            // A download is a copy of one immutable version.
            _ => true,
        }
    }

    /// Called once `local` has been loaded (`ok`) or rejected.
    pub fn loaded(&self, name: &str, local: Local, ok: bool) {
        if let Origin::Objects(objects) = self {
            objects.loaded(name, local, ok);
        }
    }

    /// Object storage: records whether the poll that just ended had
    /// trouble that calls for backing off.
    pub fn polled(&self, trouble: bool) {
        if let Origin::Objects(objects) = self {
            objects.polled(trouble);
        }
    }

    /// Called when `name` has left the listing.
    pub fn forgotten(&self, name: &str) {
        if let Origin::Objects(objects) = self {
            objects.forgotten(name);
        }
    }

    /// How long to wait before the next poll, for a poll interval of
    /// `interval`: exactly that for a directory; for an object store,
    /// jittered by up to ±20% so that a fleet does not poll in step, and
    /// backing off while storage fails.
    pub fn next_poll(&self, interval: Duration) -> Duration {
        match self {
            Origin::Directory(_) => interval,
            Origin::Objects(objects) => objects.next_poll(interval),
        }
    }

    /// The object store's state; `None` for a directory.
    pub fn status(&self) -> Option<OriginStatus> {
        match self {
            Origin::Directory(_) => None,
            Origin::Objects(objects) => Some(objects.status()),
        }
    }
}
