//! Where snapshots come from: a directory on disk, or a prefix of an object
//! store (`objects.rs`). The scan (`crate::serve::loader`) sees both alike: a
//! listing of names, each with a fingerprint of its content, and for each
//! changed name a file on local disk that it loads through the streaming
//! `SnapshotFile`, so a download costs the same memory as a file dropped
//! into a directory.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::dir;
use super::error::{ErrorKind, ListError, StorageError};
use super::listing::{Fetch, Fingerprint, Listing, Local};
use super::location::{Location, StorageOptions};
use super::objects::ObjectOrigin;
use crate::metrics::Metrics;
use portfolio_wire::status::OriginStatus;

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
                    // A first start without snapshots is the likely case:
                    // say where they go and how to get some.
                    let hint = if e.kind() == std::io::ErrorKind::NotFound {
                        format!(
                            "; give the directory of snapshot files (or an object store URL) \
                             with --snapshots (PORTFOLIO_SNAPSHOTS), or write the demo \
                             snapshots there with `portfolio-replica generate --out {}`",
                            dir.display()
                        )
                    } else {
                        String::new()
                    };
                    format!(
                        "snapshot directory {} cannot be read: {e}{hint}",
                        dir.display()
                    )
                })?;
                if !meta.is_dir() {
                    return Err(format!(
                        "{} is not a directory: --snapshots names the directory that holds \
                         the snapshot files (one per workspace), not a file",
                        dir.display()
                    ));
                }
                Ok(Origin::Directory(dir.clone()))
            }
            Location::Url(url) => Ok(Origin::Objects(Box::new(ObjectOrigin::open(
                url, options, metrics,
            )?))),
        }
    }

    /// An object store made elsewhere, under `prefix`, that logs and
    /// `/snapshots` call `url` (tests use object_store's in-memory store).
    pub fn over_store(
        store: Arc<dyn object_store::ObjectStore>,
        prefix: &str,
        url: String,
        options: &StorageOptions,
        metrics: Arc<Metrics>,
    ) -> Result<Origin, String> {
        let origin = ObjectOrigin::new(
            store,
            object_store::path::Path::from(prefix),
            url,
            Arc::default(),
            options,
            metrics,
        )?;
        Ok(Origin::Objects(Box::new(origin)))
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
            _ => Fetch::Failed(StorageError::new(
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
