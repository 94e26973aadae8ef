//! What a listing of a snapshot source says: each entry's name and the
//! stamp of its content, and for a changed entry its content on
//! local disk, ready to load.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::SystemTime;

use super::error::StorageError;
use super::signatures::{FileSigned, Listed};
use super::snapshot_file::OpenFile;
use portfolio_wire::status::SourceStatus;

/// What identifies an entry's content without reading it, as the listing
/// gives it: a file's metadata, or an object's version. (A stamp, not a
/// fingerprint: a fingerprint is a hash of a loaded dataset's content,
/// `Dataset::fingerprint`, which the API's ETags are made of.)
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EntryStamp {
    File(FileStamp),
    Object(ObjectVersion),
}

/// What identifies a file's content without reading it: a rename into place
/// changes the inode, a rewrite the size or the change time, a Kubernetes
/// `..data` flip the inode behind the symlink.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileStamp {
    pub len: u64,
    pub modified: Option<SystemTime>,
    pub changed: (i64, i64),
    pub inode: (u64, u64),
    /// Under `--trust-key`, the same of its signature file (`<name>.sig`),
    /// if there is one: a new signature is a new content to judge.
    pub signature: Option<SignatureStamp>,
}

/// What identifies a signature file's content without reading it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SignatureStamp {
    pub len: u64,
    pub changed: (i64, i64),
    pub inode: (u64, u64),
}

/// One immutable version of an object.
#[derive(Clone, Debug)]
pub struct ObjectVersion {
    /// The object's key from the root of the bucket.
    pub key: String,
    /// What changes when the content does: the ETag the listing gave
    /// (prefix mode), or the SHA-256 the manifest names (manifest mode).
    pub tag: String,
    pub size: u64,
    /// When it was written: the listing's last modification (prefix mode),
    /// or the version's `published_at` (manifest mode). Not part of its
    /// identity; it decides conflicts (`portfolio_domain::store::claims`).
    pub written: Option<SystemTime>,
}

/// Versions are the same object when key, tag and size are.
impl PartialEq for ObjectVersion {
    fn eq(&self, other: &ObjectVersion) -> bool {
        (&self.key, &self.tag, self.size) == (&other.key, &other.tag, other.size)
    }
}

impl Eq for ObjectVersion {}

impl EntryStamp {
    /// When the content was written, as far as the source tells;
    /// `UNIX_EPOCH` when it does not.
    pub fn written(&self) -> SystemTime {
        let written = match self {
            EntryStamp::File(file) => file.modified,
            EntryStamp::Object(object) => object.written,
        };
        written.unwrap_or(SystemTime::UNIX_EPOCH)
    }
}

/// The entries of a source by name, each with its stamp or why it
/// cannot be read (a directory's file that cannot be stat'ed; the scan
/// rejects it with this reason).
#[derive(Debug, Default)]
pub struct Listing {
    pub entries: BTreeMap<String, Result<EntryStamp, std::io::Error>>,
    /// Names that are not snapshots (other endings, dot-names).
    pub ignored: usize,
    /// Each name is the id of the workspace it serves (a manifest lists
    /// workspaces; a directory or prefix lists files).
    pub names_are_workspaces: bool,
    /// Object storage: read from storage by this poll, rather than restored
    /// from the cache while storage is unreachable.
    pub fresh: bool,
    /// A manifest: what it records of each entry's current version, where
    /// it records its key hashes (versions published by builds that
    /// recorded them): a catalog under a memory budget is made from these
    /// without downloading a snapshot.
    pub facts: BTreeMap<String, ManifestFacts>,
    /// A budget's copies in `--cache-dir`, at the first scan after a
    /// restart: what was remembered of each entry whose file still holds
    /// what it held then, to serve without reading it
    /// (`directory/remembered.rs`).
    pub recalled: BTreeMap<String, super::Remembered>,
    /// Entries to read again although their stamp did not change: a
    /// budget's copy that failed (a full disk) and is made now.
    pub read_again: Vec<String>,
    /// A manifest: what each entry's current version is, with its
    /// signature if it has one, for the verdict of `--trust-key`
    /// ([`super::signatures`]).
    pub signed: BTreeMap<String, Listed>,
}

/// What a manifest records of a workspace's current version, enough for a
/// catalog without downloading it, as the manifest says it (storage verifies
/// none of it). ("Facts", not "claims": the claims are the domain's, a
/// version's hold on a workspace and its keys in a conflict,
/// `portfolio_domain::store::claims`, and what a snapshot file says of itself,
/// `portfolio_domain::snapshot::claims`, read within the loader's `CLAIMS_MAX_VALUE`.)
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ManifestFacts {
    /// The snapshot's own version (`X-Snapshot-Version`).
    pub version: String,
    /// The SHA-256 of each API key, lower-case hex.
    pub key_hashes: Vec<String>,
    /// The workspace's own limits, where the manifest records them.
    pub limits: Option<portfolio_domain::store::limits::WorkspaceLimits>,
}

impl Listing {
    pub fn contains(&self, name: &str) -> bool {
        self.entries.contains_key(name)
    }
}

/// A snapshot's content on local disk, ready to load.
#[derive(Debug)]
pub struct FetchedFile {
    pub path: PathBuf,
    /// The name load errors give: the file name, or the object's key.
    pub label: String,
    pub len: u64,
    /// Object storage: the object it came from.
    pub source: Option<SourceStatus>,
    /// A fresh download: kept in the cache if it loads, removed otherwise.
    pub download: bool,
    /// When the content was written ([`EntryStamp::written`]).
    pub written: Option<SystemTime>,
    /// Rebuilt from a delta: the object's content uncompressed, its
    /// length and SHA-256 (kept as the next delta's base).
    pub plain: Option<(u64, String)>,
    /// A directory's file under `--trust-key`: its signature file as read.
    pub signed: Option<FileSigned>,
    /// The file opened once where the source opened it (a directory's
    /// file, or its private copy): the load reads this open file, not the
    /// path again. `None`: the scan opens `path` (a private download).
    pub file: Option<Arc<OpenFile>>,
}

/// What fetching a changed entry gave.
#[derive(Debug)]
// One `Fetch` exists per entry fetched, moved once into the loader: its
// size does not matter, and boxing `FetchedFile` would reach into the loader.
#[allow(clippy::large_enum_variant)]
pub enum Fetch {
    Ready(FetchedFile),
    /// Still being written (a file modified a moment ago), or replaced while
    /// it was fetched: looked at again soon, not judged now.
    Settling,
    /// Cannot be fetched now (storage trouble): nothing changes, and the
    /// next poll tries again.
    Failed(StorageError),
}
