//! [`Cached`]: a [`SnapshotSource`] (and its [`ScanBookkeeping`]) wrapped in
//! the download cache (`--cache-dir`, `download_cache.rs`), as quickwit-storage
//! wraps a storage in a cache. The wrapper answers what the cache can answer
//! and leaves the rest to the source inside:
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

use super::download_cache::Cache;
use crate::storage::bookkeeping::ScanBookkeeping;
use crate::storage::error::ListError;
use crate::storage::listing::{EntryStamp, Fetch, FetchedFile, Listing};
use crate::storage::source::SnapshotSource;
use portfolio_wire::status::OriginStatus;

/// `S` with the download cache in front.
pub struct Cached<S> {
    inner: S,
    cache: Arc<Cache>,
    /// Never held across IO, so `/snapshots` answers during a slow poll.
    state: Mutex<StandIn>,
}

#[derive(Default)]
struct StandIn {
    /// A poll has read the listing from storage: the cache no longer
    /// stands in for it.
    ever_listed: bool,
    /// The listing is the cache's, storage being unreachable since startup.
    restored: bool,
}

impl<S: SnapshotSource> Cached<S> {
    pub(super) fn new(inner: S, cache: Arc<Cache>) -> Cached<S> {
        Cached {
            inner,
            cache,
            state: Mutex::default(),
        }
    }

    fn state(&self) -> MutexGuard<'_, StandIn> {
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

impl<S: SnapshotSource + ScanBookkeeping> SnapshotSource for Cached<S> {
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

    fn fetch(&self, name: &str, stamp: &EntryStamp, plain: Option<&str>) -> Fetch {
        if let EntryStamp::Object(version) = stamp
            && let Some(local) = self.cache.local(name, version)
        {
            return Fetch::Ready(local);
        }
        self.inner.fetch(name, stamp, plain)
    }

    fn directory(&self) -> Option<&Path> {
        self.inner.directory()
    }
}

impl<S: SnapshotSource + ScanBookkeeping> ScanBookkeeping for Cached<S> {
    fn unchanged(&self, name: &str, stamp: &EntryStamp) -> bool {
        self.inner.unchanged(name, stamp)
    }

    /// A download is the cache's to keep or delete; anything else, the
    /// source's.
    fn loaded(&self, name: &str, local: FetchedFile, ok: bool) {
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

    fn kept(&self, name: &str) -> Option<std::path::PathBuf> {
        self.cache.kept(name)
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

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;
    use portfolio_wire::status::SourceStatus;

    /// A source whose listing fails while `down`, and which never has a
    /// file to give: whatever is fetched comes from the cache.
    struct Flaky {
        down: AtomicBool,
    }

    impl SnapshotSource for Flaky {
        fn describe(&self) -> String {
            "memory:///flaky/".to_owned()
        }

        fn list(&self) -> Result<Listing, ListError> {
            if self.down.load(Ordering::Relaxed) {
                Err(ListError::Source { backs_off: true })
            } else {
                Ok(Listing::default())
            }
        }

        fn fetch(&self, _name: &str, _stamp: &EntryStamp, _plain: Option<&str>) -> Fetch {
            Fetch::Settling
        }
    }

    impl ScanBookkeeping for Flaky {
        fn status(&self) -> Option<OriginStatus> {
            Some(OriginStatus {
                url: self.describe(),
                mode: "prefix".into(),
                manifest_revision: None,
                manifest_etag: None,
                last_success_at: None,
                stale_seconds: None,
                consecutive_failures: 0,
                error: None,
                error_kind: None,
                error_since: None,
                serving_from_cache: false,
                cache_dir: None,
            })
        }
    }

    #[test]
    fn the_cache_stands_in_once_at_startup_and_answers_for_what_it_holds() {
        let dir = std::env::temp_dir().join(format!("cached-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let cache = Arc::new(Cache::open(Some(&dir)).unwrap());
        // A download of an earlier process, kept once it loaded.
        let download = cache.download_path("fleet/a.json");
        std::fs::write(&download, b"12345").unwrap();
        let source = SourceStatus {
            key: "fleet/a.json".to_owned(),
            etag: Some("e1".to_owned()),
            sha256: None,
            size: 5,
            manifest_revision: None,
            workspace_revision: None,
            fetched_at: "2026-11-23T10:00:00.000Z".to_owned(),
            from_cache: false,
            from_delta: None,
        };
        let local = FetchedFile {
            path: download,
            label: "fleet/a.json".to_owned(),
            len: 5,
            source: Some(source),
            download: true,
            written: None,
            plain: None,
            signed: None,
            file: None,
        };
        let inner = Flaky {
            down: AtomicBool::new(true),
        };
        let cached = Cached::new(inner, Arc::clone(&cache));
        cached.loaded("a.json", local, true);

        // Storage down at startup: the cache's listing, once.
        let listing = cached.list().expect("the cache's listing");
        let Some(Ok(stamp)) = listing.entries.get("a.json") else {
            panic!("{listing:?}");
        };
        let status = cached.status().unwrap();
        assert!(status.serving_from_cache && status.cache_dir.is_some());
        assert!(matches!(
            cached.list(),
            Err(ListError::Source { backs_off: true })
        ));
        // The version it holds is fetched from it, not from the source.
        let Fetch::Ready(local) = cached.fetch("a.json", stamp, None) else {
            panic!("not from the cache");
        };
        assert!(local.source.is_some_and(|s| s.from_cache));
        assert_eq!(std::fs::read(&local.path).unwrap(), b"12345");

        // Storage back: its listing, and the cache no longer stands in.
        cached.inner.down.store(false, Ordering::Relaxed);
        assert!(cached.list().unwrap().entries.is_empty());
        assert!(!cached.status().unwrap().serving_from_cache);
        cached.forgotten("a.json");
        assert!(cache.records().is_empty());
        drop(cached);
        drop(cache);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
