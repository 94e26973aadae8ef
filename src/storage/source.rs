//! [`SnapshotSource`]: what a kind of storage does with snapshot data:
//! say what it is, list its entries, fetch one to local disk, and name the
//! directory the file watcher watches. A directory (`directory/`) and an
//! object store prefix (`objects/`) implement it; what the scan tells a
//! source and asks of it besides is [`super::ScanBookkeeping`].

use std::path::Path;

use super::error::ListError;
use super::listing::{EntryStamp, Fetch, Listing};

/// A place snapshots come from: its data operations. The scan calls from
/// one thread at a time (the reloader), but under a memory budget a
/// request's load on demand fetches meanwhile, hence `Sync`.
pub trait SnapshotSource: Send + Sync {
    /// What logs call the source: the directory or the URL.
    fn describe(&self) -> String;

    /// The entries and their stamps.
    fn list(&self) -> Result<Listing, ListError>;

    /// The content of `name` at `stamp` on local disk. `plain` is,
    /// under `--trust-key`, the SHA-256 of the uncompressed content as an
    /// accepted signature names it: the only content a delta may be applied
    /// to rebuild (without it, the whole object is fetched). Never taken
    /// from what storage claims unverified.
    fn fetch(&self, name: &str, stamp: &EntryStamp, plain: Option<&str>) -> Fetch;

    /// The directory, for the file watcher; `None` for a source that is
    /// polled.
    fn directory(&self) -> Option<&Path> {
        None
    }
}
