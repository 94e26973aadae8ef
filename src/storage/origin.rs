//! The wall between the scan and storage: [`StorageOrigin`], the handle the
//! scan (`crate::serve::loader`) holds, over any [`SnapshotSource`] that keeps
//! [`ScanBookkeeping`]. The scan sees every kind of storage alike: a listing of
//! names, each with a stamp of its content, and for each changed name a file on
//! local disk that it loads through the streaming `SnapshotFile`, so a download
//! costs the same memory as a file dropped into a directory. A new kind of
//! storage is a new implementation of the two traits; the scan does not change.
//! The origins `--snapshots` names are made in `open.rs`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::Remembered;
use super::bookkeeping::ScanBookkeeping;
use super::error::ListError;
use super::listing::{EntryStamp, Fetch, FetchedFile, Listing};
use super::signatures::Trust;
use super::source::SnapshotSource;
use portfolio_wire::status::OriginStatus;

/// A source with its bookkeeping, as one object.
trait Storage: SnapshotSource + ScanBookkeeping {}

impl<S: SnapshotSource + ScanBookkeeping> Storage for S {}

/// The source the scan holds, whichever kind it is. Its methods are the
/// two traits' ([`SnapshotSource`], [`ScanBookkeeping`]), forwarded.
pub struct StorageOrigin {
    source: Box<dyn Storage>,
    /// What `--trust-key` verifies, judged by the scan on what the source
    /// gives.
    trust: Arc<Trust>,
}

impl StorageOrigin {
    /// Any source (a library user's own kind of storage); nothing verified.
    pub fn new(source: impl SnapshotSource + ScanBookkeeping + 'static) -> StorageOrigin {
        StorageOrigin {
            source: Box::new(source),
            trust: Arc::default(),
        }
    }

    /// This origin, verifying what it gives with `trust`.
    pub fn trusting(self, trust: Arc<Trust>) -> StorageOrigin {
        StorageOrigin { trust, ..self }
    }

    pub fn trust(&self) -> &Trust {
        &self.trust
    }

    /// [`SnapshotSource::describe`].
    pub fn describe(&self) -> String {
        self.source.describe()
    }

    /// [`SnapshotSource::list`].
    pub fn list(&self) -> Result<Listing, ListError> {
        self.source.list()
    }

    /// [`SnapshotSource::fetch`].
    pub fn fetch(&self, name: &str, stamp: &EntryStamp, plain: Option<&str>) -> Fetch {
        self.source.fetch(name, stamp, plain)
    }

    /// [`SnapshotSource::directory`].
    pub fn directory(&self) -> Option<&Path> {
        self.source.directory()
    }

    /// [`ScanBookkeeping::renamed_into_place`].
    pub fn renamed_into_place(&self, name: &str) {
        self.source.renamed_into_place(name);
    }

    /// [`ScanBookkeeping::unchanged`].
    pub fn unchanged(&self, name: &str, stamp: &EntryStamp) -> bool {
        self.source.unchanged(name, stamp)
    }

    /// [`ScanBookkeeping::loaded`].
    pub fn loaded(&self, name: &str, local: FetchedFile, ok: bool) {
        self.source.loaded(name, local, ok);
    }

    /// [`ScanBookkeeping::polled`].
    pub fn polled(&self, trouble: bool) {
        self.source.polled(trouble);
    }

    /// [`ScanBookkeeping::forgotten`].
    pub fn forgotten(&self, name: &str) {
        self.source.forgotten(name);
    }

    /// [`ScanBookkeeping::kept`].
    pub fn kept(&self, name: &str) -> Option<PathBuf> {
        self.source.kept(name)
    }

    /// [`ScanBookkeeping::remember`].
    pub fn remember(&self, copy: &Path, memory: &Remembered) {
        self.source.remember(copy, memory);
    }

    /// [`ScanBookkeeping::kept_instead`].
    pub fn kept_instead(&self, name: &str, gone: &Path, copy: FetchedFile) -> bool {
        self.source.kept_instead(name, gone, copy)
    }

    /// [`ScanBookkeeping::next_poll`].
    pub fn next_poll(&self, interval: Duration) -> Duration {
        self.source.next_poll(interval)
    }

    /// [`ScanBookkeeping::status`].
    pub fn status(&self) -> Option<OriginStatus> {
        self.source.status()
    }
}
