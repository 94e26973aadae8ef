//! Step 3 of a scan, fetch: each changed entry's content onto local disk,
//! in order, on the reloader thread (a stat for a directory, a download
//! for an object store: storage IO stays sequential). Each comes back
//! ready to load, with the dataset it would replace, or with what stands
//! in the way.

use std::sync::{Arc, Mutex};
use std::time::Instant as Clock;

use super::files::{self, Files};
use crate::storage::{Fetch, Fingerprint, Local, Origin, StorageError};
use crate::store::Dataset;

/// An entry fetched to local disk, to be loaded.
pub struct Fetched {
    pub name: String,
    pub fingerprint: Fingerprint,
    pub local: Local,
    /// When its fetch started: a load's time counts from here.
    pub started: Clock,
    /// The dataset the entry serves now: the load takes over its
    /// unchanged records.
    pub previous: Option<Arc<Dataset>>,
}

/// Why an entry was not fetched.
pub enum Unfetched {
    /// Still being written: left for a later scan rather than judged.
    Settling(String),
    /// Cannot be fetched now (storage trouble): left for the next poll.
    Failed(String, StorageError),
}

/// Fetches each of `entries` as the iterator is advanced: the loads ask
/// for the next entry when they can take it, so a download does not wait
/// on disk long before its load.
pub fn each<'a>(
    origin: &'a Origin,
    files: &'a Mutex<Files>,
    entries: Vec<(String, Fingerprint)>,
) -> impl ExactSizeIterator<Item = Result<Fetched, Unfetched>> + 'a {
    entries
        .into_iter()
        .map(move |(name, fingerprint)| fetch(origin, files, name, fingerprint))
}

/// Fetches one entry: ready to load, or what stands in the way.
fn fetch(
    origin: &Origin,
    files: &Mutex<Files>,
    name: String,
    fingerprint: Fingerprint,
) -> Result<Fetched, Unfetched> {
    let started = Clock::now();
    match origin.fetch(&name, &fingerprint) {
        Fetch::Ready(local) => Ok(Fetched {
            previous: files::lock(files)
                .get(&name)
                .and_then(|e| e.dataset.clone()),
            name,
            fingerprint,
            local,
            started,
        }),
        Fetch::Settling => Err(Unfetched::Settling(name)),
        Fetch::Failed(error) => Err(Unfetched::Failed(name, error)),
    }
}
