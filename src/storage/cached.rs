//! [`Cached`]: a [`Source`] wrapped in the download cache (`--cache-dir`,
//! `cache.rs`), as quickwit-storage wraps a storage in a cache. The wrapper
//! answers what the cache can answer and leaves the rest to the source
//! inside:
//!
//! - a fetch of a version the cache holds is the cached file, with no
//!   request;
//! - a download that loaded becomes the entry's cached copy, one that was
//!   rejected is deleted, and a name that left the listing is forgotten;
//! - at startup with storage unreachable, the listing is what the cache
//!   holds, so that a replica restarted during an outage serves what it
//!   served before.
//!
//! The source inside still downloads into the cache's directory and takes
//! a delta's base from it (`Cache::download_path`, `Cache::base`): where a
//! download lands is the cache's to say.

use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use super::cache::Cache;
use super::error::ListError;
use super::listing::{Fetch, Fingerprint, Listing, Local};
use super::origin::Source;
use portfolio_wire::status::OriginStatus;

/// `S` with the download cache in front.
pub struct Cached<S> {
    inner: S,
    cache: Arc<Cache>,
    /// Never held across IO, so `/snapshots` answers during a slow poll.
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// A poll has read the listing from storage: the cache no longer
    /// stands in for it.
    ever_listed: bool,
    /// The listing is the cache's, storage being unreachable since startup.
    restored: bool,
}

impl<S: Source> Cached<S> {
    pub(super) fn new(inner: S, cache: Arc<Cache>) -> Cached<S> {
        Cached {
            inner,
            cache,
            state: Mutex::default(),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// At startup, with storage unreachable: the entries the cache holds.
    fn restore(&self) -> Option<Listing> {
        let mut state = self.state();
        if state.ever_listed || state.restored {
            return None;
        }
        let listing = self.cache.listing()?;
        state.restored = true;
        tracing::warn!(
            url = %self.inner.describe(),
            cache_dir = %self.cache.kept_dir().map(|d| d.display().to_string()).unwrap_or_default(),
            entries = listing.entries.len(),
            "object store unreachable at startup; serving the last good objects from the cache until it answers"
        );
        Some(listing)
    }
}

impl<S: Source> Source for Cached<S> {
    fn describe(&self) -> String {
        self.inner.describe()
    }

    /// The source's listing; when it cannot be read (the source has logged
    /// and counted why), the cache's, once, at startup.
    fn list(&self) -> Result<Listing, ListError> {
        match self.inner.list() {
            Ok(listing) => {
                let mut state = self.state();
                state.ever_listed = true;
                state.restored = false;
                Ok(listing)
            }
            Err(ListError::Source { backs_off }) => {
                self.restore().ok_or(ListError::Source { backs_off })
            }
            Err(error) => Err(error),
        }
    }

    fn fetch(&self, name: &str, fingerprint: &Fingerprint) -> Fetch {
        if let Fingerprint::Object(version) = fingerprint
            && let Some(local) = self.cache.local(name, version)
        {
            return Fetch::Ready(local);
        }
        self.inner.fetch(name, fingerprint)
    }

    fn directory(&self) -> Option<&Path> {
        self.inner.directory()
    }

    fn unchanged(&self, name: &str, fingerprint: &Fingerprint) -> bool {
        self.inner.unchanged(name, fingerprint)
    }

    /// A download is the cache's to keep or delete; anything else, the
    /// source's.
    fn loaded(&self, name: &str, local: Local, ok: bool) {
        if local.download {
            self.cache.settle(name, local, ok);
        } else {
            self.inner.loaded(name, local, ok);
        }
    }

    fn polled(&self, trouble: bool) {
        self.inner.polled(trouble);
    }

    fn forgotten(&self, name: &str) {
        self.cache.forget(name);
        self.inner.forgotten(name);
    }

    fn next_poll(&self, interval: Duration) -> Duration {
        self.inner.next_poll(interval)
    }

    /// The source's status, with what the cache adds: whether it serves
    /// the cache's listing, and where the cache is.
    fn status(&self) -> Option<OriginStatus> {
        let mut status = self.inner.status()?;
        status.serving_from_cache = self.state().restored;
        status.cache_dir = self.cache.kept_dir().map(|d| d.display().to_string());
        Some(status)
    }
}
