//! The wall between the scan and storage: the [`Source`] trait, which a
//! directory (`dir.rs`) and an object store prefix (`objects.rs`)
//! implement, and [`Origin`], the handle the scan (`crate::serve::loader`)
//! holds. The scan sees every kind of storage alike: a listing of names,
//! each with a fingerprint of its content, and for each changed name a file
//! on local disk that it loads through the streaming `SnapshotFile`, so a
//! download costs the same memory as a file dropped into a directory. A new
//! kind of storage is a new `Source`; the scan does not change.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::copies::Copies;
use super::dir::Directory;
use super::error::{ListError, OpenError};
use super::listing::{Fetch, Fingerprint, Listing, Local};
use super::location::{Location, StorageOptions};
use super::objects::ObjectSource;
use super::trust::Trust;
use crate::metrics::Metrics;
use portfolio_wire::status::OriginStatus;

/// A place snapshots come from, as the scan uses it. The scan's calls come
/// from one thread at a time (the reloader), but `status` is asked by the
/// admin listener meanwhile, hence `Sync`.
///
/// What some kinds of storage do not need has a default that does nothing:
/// a directory keeps no download to settle, no poll state and no status.
pub trait Source: Send + Sync {
    /// What logs call the source: the directory or the URL.
    fn describe(&self) -> String;

    /// The entries and their fingerprints.
    fn list(&self) -> Result<Listing, ListError>;

    /// The content of `name` at `fingerprint` on local disk. `plain` is,
    /// under `--trust-key`, the SHA-256 of the uncompressed content as an
    /// accepted signature names it: the only content a delta may be applied
    /// to rebuild (without it, the whole object is fetched). Never taken
    /// from what storage claims unverified.
    fn fetch(&self, name: &str, fingerprint: &Fingerprint, plain: Option<&str>) -> Fetch;

    /// The directory, for the file watcher; `None` for a source that is
    /// polled.
    fn directory(&self) -> Option<&Path> {
        None
    }

    /// Called when the file watcher saw `name` arrive by a rename, which is
    /// atomic: the content there now is whole, and need not be given time
    /// to settle as a file written in place is.
    fn renamed_into_place(&self, _name: &str) {}

    /// Whether `name` still has the content at `fingerprint` after it was
    /// loaded: a file rewritten during the read must be read again. By
    /// default it has: a download is a copy of one immutable version.
    fn unchanged(&self, _name: &str, _fingerprint: &Fingerprint) -> bool {
        true
    }

    /// Called once `local` has been loaded (`ok`) or rejected: a source
    /// that downloaded it keeps or deletes it.
    fn loaded(&self, _name: &str, _local: Local, _ok: bool) {}

    /// Records whether the poll that just ended had trouble that calls for
    /// backing off.
    fn polled(&self, _trouble: bool) {}

    /// Called when `name` has left the listing.
    fn forgotten(&self, _name: &str) {}

    /// Where the bytes of `name`'s last good content lie, for a load on
    /// demand (`--memory-budget`): called once it has loaded. `None` where
    /// nothing is kept (a directory read in place).
    fn kept(&self, _name: &str) -> Option<PathBuf> {
        None
    }

    /// Under a budget, once the kept bytes at `gone` were found deleted
    /// under the server and `copy` was fetched afresh from the entry and
    /// loaded as the same version: `copy` is kept in their place. False
    /// (and `copy` not kept) where nothing is kept, or where `gone` no
    /// longer stands for `name`'s content (a newer version took its
    /// place meanwhile: `copy` would then be taken for it).
    fn kept_instead(&self, _name: &str, _gone: &Path, _copy: Local) -> bool {
        false
    }

    /// How long to wait before the next poll, for a poll interval of
    /// `interval`: by default exactly that.
    fn next_poll(&self, interval: Duration) -> Duration {
        interval
    }

    /// The state `/snapshots` shows of the source; `None` for a directory,
    /// whose files' own statuses say it all.
    fn status(&self) -> Option<OriginStatus> {
        None
    }
}

/// The source the scan holds, whichever kind it is. Its methods are the
/// [`Source`] trait's (through `Deref`).
pub struct Origin {
    source: Box<dyn Source>,
    /// What `--trust-key` verifies, judged by the scan on what the source
    /// gives.
    trust: Arc<Trust>,
}

impl Origin {
    /// The source `location` names. A directory must exist; an object
    /// store is not contacted until the first poll. With `copies` (a
    /// memory budget), a directory's files are loaded from private copies
    /// that outlive them ([`Copies`]); an object store keeps its last good
    /// downloads anyway.
    pub fn open(
        location: &Location,
        options: &StorageOptions,
        metrics: Arc<Metrics>,
        copies: bool,
    ) -> Result<Origin, OpenError> {
        match location {
            Location::Directory(dir) if copies => {
                let directory = Directory::open(dir)?.verifying(options.trust.enabled());
                let copies =
                    Copies::new(directory, options.cache_dir.as_deref()).map_err(|source| {
                        OpenError::CopiesUnwritable {
                            dir: options.cache_dir.clone(),
                            source,
                        }
                    })?;
                Ok(Origin::new(copies))
            }
            Location::Directory(dir) => Ok(Origin::new(
                Directory::open(dir)?.verifying(options.trust.enabled()),
            )),
            Location::Url(url) => Ok(Origin::new(ObjectSource::open(url, options, metrics)?)),
        }
        .map(|origin| origin.trusting(Arc::clone(&options.trust)))
    }

    /// An object store made elsewhere, under `prefix`, that logs and
    /// `/snapshots` call `url` (tests use object_store's in-memory store).
    pub fn over_store(
        store: Arc<dyn object_store::ObjectStore>,
        prefix: &str,
        url: String,
        options: &StorageOptions,
        metrics: Arc<Metrics>,
    ) -> Result<Origin, OpenError> {
        let source = ObjectSource::cached(
            store,
            object_store::path::Path::from(prefix),
            url,
            Arc::default(),
            options,
            metrics,
        )?;
        Ok(Origin::new(source).trusting(Arc::clone(&options.trust)))
    }

    /// Any source (a library user's own kind of storage); nothing verified.
    pub fn new(source: impl Source + 'static) -> Origin {
        Origin {
            source: Box::new(source),
            trust: Arc::default(),
        }
    }

    /// This origin, verifying what it gives with `trust`.
    pub fn trusting(self, trust: Arc<Trust>) -> Origin {
        Origin { trust, ..self }
    }

    pub fn trust(&self) -> &Trust {
        &self.trust
    }
}

impl std::ops::Deref for Origin {
    type Target = dyn Source;

    fn deref(&self) -> &(dyn Source + 'static) {
        self.source.as_ref()
    }
}
