//! The origins `--snapshots` names, made: a directory (read through
//! private copies under a memory budget) or an object store prefix with
//! the download cache in front; and an object store made elsewhere
//! (tests). The one file that knows every kind of storage.

use std::sync::Arc;

use super::directory::Directory;
use super::directory::copies::Copies;
use super::error::OpenError;
use super::location::{Location, StorageOptions};
use super::objects::ObjectSource;
use super::origin::StorageOrigin;
use crate::metrics::Metrics;

impl StorageOrigin {
    /// The source `location` names. A directory must exist; an object
    /// store is not contacted until the first poll. With `copies` (a
    /// memory budget), a directory's files are loaded from private copies
    /// that outlive them (`directory/copies.rs`); an object store keeps its
    /// last good downloads anyway.
    pub fn open(
        location: &Location,
        options: &StorageOptions,
        metrics: Arc<Metrics>,
        copies: bool,
    ) -> Result<StorageOrigin, OpenError> {
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
                Ok(StorageOrigin::new(copies))
            }
            Location::Directory(dir) => Ok(StorageOrigin::new(
                Directory::open(dir)?.verifying(options.trust.enabled()),
            )),
            Location::Url(url) => Ok(StorageOrigin::new(ObjectSource::open(
                url, options, metrics,
            )?)),
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
    ) -> Result<StorageOrigin, OpenError> {
        let source = ObjectSource::cached(
            store,
            object_store::path::Path::from(prefix),
            url,
            Arc::default(),
            options,
            metrics,
        )?;
        Ok(StorageOrigin::new(source).trusting(Arc::clone(&options.trust)))
    }
}
