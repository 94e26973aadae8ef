//! A prefix of an object store as the snapshot source
//! (docs/object-storage.md).
//!
//! - **Prefix mode**: the objects directly under the prefix are the
//!   directory: `*.json` and `*.json.gz` are snapshots, dot-names and other
//!   endings are ignored. One LIST per poll; an object is downloaded only
//!   when its ETag changed.
//! - **Manifest mode**, once `manifest.json` exists under the prefix: one
//!   conditional GET of it per poll (`If-None-Match`, a 304 when nothing
//!   changed), the workspace records when its journal says to
//!   (`follow_manifest.rs`), and the immutable object named per workspace,
//!   checked against its SHA-256.
//!
//! A failed poll changes nothing that serves: it is logged once per change of
//! kind, counted, shown in `/snapshots`, and retried with a capped, jittered
//! backoff (`storage/backoff.rs`). At startup with storage unreachable, the
//! entries of `--cache-dir` serve: that, and keeping each download, is the
//! cache in front of this source (`cached.rs`). All IO runs on a small runtime
//! of its own, driven by the thread that asks (the reloader, or under a memory
//! budget a load on demand's blocking task), never on the request path's async
//! workers.

mod cached;
pub(super) mod client;
mod delta_rebuild;
pub(super) mod download;
mod download_cache;
pub(super) mod follow_manifest;

use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use object_store::path::Path as ObjectPath;
use object_store::{GetOptions, ObjectMeta, ObjectStore};
use url::Url;

use self::cached::Cached;
use self::client::{ClientLog, classify};
use self::download::{DownloadError, Expect, download, read_small};
use self::download_cache::Cache;
use self::follow_manifest::{Followed, WorkspaceEntries};
use crate::metrics::Metrics;
use crate::storage::backoff::PollBackoff;
use crate::storage::bookkeeping::ScanBookkeeping;
use crate::storage::error::{ErrorKind, ListError, OpenError, StorageError};
use crate::storage::listing::{EntryStamp, Fetch, FetchedFile, Listing, ObjectVersion};
use crate::storage::location::{self, StorageOptions};
use crate::storage::snapshot_file::is_snapshot_name;
use crate::storage::source::SnapshotSource;
use portfolio_domain::store::time::{utc_millis, utc_now};
use portfolio_wire::manifest::{self, MANIFEST_NAME, MAX_MANIFEST_BYTES, Manifest, ManifestError};
use portfolio_wire::status::{OriginStatus, SourceStatus};

/// Tags of objects the store lists without an ETag start with this.
const NO_ETAG: &str = "modified:";

/// Objects one LIST request returns (S3's page, which the other stores
/// match or exceed).
const LIST_PAGE: usize = 1000;

/// A prefix of an object store, polled.
pub struct ObjectSource {
    store: Arc<dyn ObjectStore>,
    prefix: ObjectPath,
    url: String,
    log: Arc<ClientLog>,
    /// `Option` so that `Drop` can shut it down without blocking: the last
    /// reference may go on an async thread.
    runtime: Option<tokio::runtime::Runtime>,
    /// Where downloads go and deltas find their base; the cache in front
    /// of this source (`Cached`) keeps and restores entries.
    cache: Arc<Cache>,
    metrics: Arc<Metrics>,
    timeout: Duration,
    /// Never held across IO, so `/snapshots` answers during a slow poll.
    state: Mutex<PollState>,
    /// `--trust-key`: a delta's result is used only if it is the content
    /// the version's signature names.
    verify: bool,
}

#[derive(Default)]
struct PollState {
    manifest: Option<ManifestSeen>,
    /// A poll has read the listing from storage.
    ever_listed: bool,
    last_success: Option<SystemTime>,
    /// Polls that failed in a row, and the problem of the last one.
    failures: u32,
    failing: Option<(StorageError, String)>,
    /// The wait before the next poll, longer while polls have trouble.
    backoff: PollBackoff,
    /// Prefix mode: the LIST requests the last listing took. The interval
    /// is stretched by it, so that a prefix of 10,000 objects costs one
    /// request per poll interval, as one of 100 does.
    list_pages: u32,
}

/// The manifest as last read.
struct ManifestSeen {
    etag: Option<String>,
    /// What it serves, as last followed.
    good: Option<Followed>,
    /// Why the last one read cannot be followed, if it cannot.
    broken: Option<StorageError>,
}

/// What one poll read.
enum Polled {
    Objects(Vec<ObjectMeta>),
    /// The manifest (or why it cannot be read), and the workspace records
    /// if they had to be read.
    Manifest(
        Result<Manifest, ManifestError>,
        Option<String>,
        Option<WorkspaceEntries>,
    ),
    Unmodified(Option<WorkspaceEntries>),
}

impl ObjectSource {
    /// The source `url` names, configured by `options` and the
    /// environment, with the download cache (`--cache-dir`) in front.
    pub fn open(
        url: &Url,
        options: &StorageOptions,
        metrics: Arc<Metrics>,
    ) -> Result<Cached<ObjectSource>, OpenError> {
        let opened = location::open(url, options, Some(Arc::clone(&metrics)))?;
        ObjectSource::cached(
            opened.store,
            opened.prefix,
            opened.display,
            opened.log,
            options,
            metrics,
        )
    }

    /// The source over a store made elsewhere (tests use an in-memory
    /// one), with the download cache in front.
    pub fn cached(
        store: Arc<dyn ObjectStore>,
        prefix: ObjectPath,
        url: String,
        log: Arc<ClientLog>,
        options: &StorageOptions,
        metrics: Arc<Metrics>,
    ) -> Result<Cached<ObjectSource>, OpenError> {
        let cache = Cache::open(options.cache_dir.as_deref()).map_err(|source| {
            let dir = options
                .cache_dir
                .clone()
                .unwrap_or_else(|| "$TMPDIR".into());
            OpenError::CacheDir { dir, source }
        })?;
        let cache = Arc::new(cache);
        let source = ObjectSource::new(
            store,
            prefix,
            url,
            log,
            Arc::clone(&cache),
            options,
            metrics,
        )?;
        Ok(Cached::new(source, cache))
    }

    fn new(
        store: Arc<dyn ObjectStore>,
        prefix: ObjectPath,
        url: String,
        log: Arc<ClientLog>,
        cache: Arc<Cache>,
        options: &StorageOptions,
        metrics: Arc<Metrics>,
    ) -> Result<ObjectSource, OpenError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .thread_name("object-store")
            .build()
            .map_err(OpenError::Runtime)?;
        Ok(ObjectSource {
            store,
            prefix,
            url,
            log,
            runtime: Some(runtime),
            cache,
            metrics,
            timeout: options.timeout,
            state: Mutex::new(PollState::default()),
            verify: options.trust.enabled(),
        })
    }

    fn state(&self) -> MutexGuard<'_, PollState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn block_on<T>(&self, future: impl Future<Output = T>) -> T {
        self.runtime
            .as_ref()
            .expect("the runtime lives as long as the origin")
            .block_on(future)
    }

    /// One poll's requests: a conditional GET of the manifest (unless the
    /// prefix is known to have none), else a LIST of the prefix; a manifest
    /// that appears in the LIST is read in the same poll.
    async fn poll(
        &self,
        in_prefix_mode: bool,
        manifest_etag: Option<String>,
    ) -> Result<Polled, StorageError> {
        let manifest_key = self.prefix.clone().join(MANIFEST_NAME);
        if !in_prefix_mode {
            // No manifest: prefix mode.
            if let Some(polled) = self.get_manifest(&manifest_key, manifest_etag).await? {
                return Ok(polled);
            }
        }
        let prefix = (!self.prefix.is_root()).then_some(&self.prefix);
        let listed = self
            .store
            .list_with_delimiter(prefix)
            .await
            .map_err(|e| self.error(&e, format!("cannot list {}: {e}", self.url)))?;
        if listed
            .objects
            .iter()
            .any(|o| o.location.filename() == Some(MANIFEST_NAME))
            && let Some(polled) = self.get_manifest(&manifest_key, None).await?
        {
            return Ok(polled);
        }
        Ok(Polled::Objects(listed.objects))
    }

    /// A manifest poll, with the workspace records read if following it
    /// needs them (`Followed::needs_records`).
    async fn with_records(&self, polled: Polled) -> Result<Polled, StorageError> {
        let known = {
            let state = self.state();
            let followed = state.manifest.as_ref().and_then(|m| m.good.as_ref());
            let needs = match &polled {
                Polled::Manifest(Ok(Manifest::V2(root)), _, _) => {
                    Followed::needs_records(followed, Some(root))
                }
                Polled::Unmodified(_) => {
                    followed.is_some_and(|f| f.format == manifest::MANIFEST_VERSION)
                        && Followed::needs_records(followed, None)
                }
                _ => false,
            };
            if !needs {
                return Ok(polled);
            }
            followed.map(Followed::known).unwrap_or_default()
        };
        let error = |e: &object_store::Error, message: String| self.error(e, message);
        let (records, cost) = follow_manifest::read_records(
            self.store.as_ref(),
            &self.prefix,
            known,
            self.timeout,
            &error,
        )
        .await?;
        self.metrics.source_bytes(cost.bytes);
        tracing::debug!(
            url = %self.url,
            listed = cost.listed,
            downloaded = cost.downloaded,
            bytes = cost.bytes,
            "read the workspace records"
        );
        Ok(match polled {
            Polled::Manifest(manifest, etag, _) => Polled::Manifest(manifest, etag, Some(records)),
            Polled::Unmodified(_) => Polled::Unmodified(Some(records)),
            objects => objects,
        })
    }

    /// The manifest, unless it is unchanged (`Unmodified`) or absent (`None`).
    async fn get_manifest(
        &self,
        key: &ObjectPath,
        etag: Option<String>,
    ) -> Result<Option<Polled>, StorageError> {
        let options = GetOptions {
            if_none_match: etag,
            ..GetOptions::default()
        };
        let result = match self.store.get_opts(key, options).await {
            Ok(result) => result,
            Err(object_store::Error::NotModified { .. }) => {
                return Ok(Some(Polled::Unmodified(None)));
            }
            Err(object_store::Error::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(self.error(&e, format!("cannot read {key}: {e}"))),
        };
        let (bytes, etag) = read_small(result, key, MAX_MANIFEST_BYTES, "a manifest").await?;
        self.metrics.source_bytes(bytes.len() as u64);
        Ok(Some(Polled::Manifest(Manifest::parse(&bytes), etag, None)))
    }

    fn error(&self, error: &object_store::Error, message: String) -> StorageError {
        StorageError::new(classify(error, &self.log), message)
    }

    /// The listing a poll read, remembering the manifest.
    fn read_poll(&self, state: &mut PollState, polled: Polled) -> Result<Listing, StorageError> {
        match polled {
            Polled::Objects(objects) => {
                state.manifest = None;
                state.list_pages = objects.len().div_ceil(LIST_PAGE).max(1) as u32;
                Ok(self.prefix_listing(objects))
            }
            Polled::Manifest(parsed, etag, records) => {
                let had = state.manifest.take().and_then(|m| m.good);
                // A manifest that cannot be read keeps its ETag (it stays
                // broken until it changes); one that cannot be followed
                // does not, so that the next poll tries again.
                let followed = match parsed {
                    Ok(Manifest::V1(manifest)) => Ok(Followed::from_v1(&manifest, &self.prefix)),
                    Ok(Manifest::V2(root)) => had
                        .clone()
                        .unwrap_or_default()
                        .advance(&root, records, &self.prefix)
                        .map_err(|e| (StorageError::from(e), None)),
                    Err(e) => Err((StorageError::from(e), etag.clone())),
                };
                // The last good manifest stays remembered, not served:
                // nothing changes until a valid one replaces it.
                state.manifest = Some(match followed {
                    Ok(followed) => ManifestSeen {
                        etag,
                        good: Some(followed),
                        broken: None,
                    },
                    Err((broken, etag)) => ManifestSeen {
                        etag,
                        good: had,
                        broken: Some(broken),
                    },
                });
                manifest_listing(state)
            }
            Polled::Unmodified(records) => {
                if let Some(records) = records
                    && let Some(seen) = &mut state.manifest
                    && let Some(followed) = &mut seen.good
                {
                    followed.entries = records;
                    followed.records_read_at = Some(std::time::Instant::now());
                }
                manifest_listing(state)
            }
        }
    }

    fn prefix_listing(&self, objects: Vec<ObjectMeta>) -> Listing {
        let mut listing = Listing {
            fresh: true,
            ..Listing::default()
        };
        for object in objects {
            let Some(name) = object.location.filename() else {
                continue;
            };
            if name == MANIFEST_NAME || !is_snapshot_name(name) {
                listing.ignored += 1;
                continue;
            }
            let tag = object.e_tag.clone().unwrap_or_else(|| {
                format!(
                    "{NO_ETAG}{}:{}",
                    object.last_modified.timestamp_millis(),
                    object.size
                )
            });
            let version = ObjectVersion {
                key: object.location.to_string(),
                tag,
                size: object.size,
                written: Some(object.last_modified.into()),
            };
            listing
                .entries
                .insert(name.to_owned(), Ok(EntryStamp::Object(version)));
        }
        listing
    }

    fn succeeded(&self, state: &mut PollState) {
        let now = SystemTime::now();
        state.ever_listed = true;
        state.last_success = Some(now);
        if let Some((error, since)) = state.failing.take() {
            tracing::info!(
                url = %self.url,
                failed_polls = state.failures,
                since = %since,
                last_error = %error.message,
                "object store readable again"
            );
        }
        state.failures = 0;
        self.metrics.source_success(now);
    }

    fn failed(&self, state: &mut PollState, error: StorageError) {
        state.failures += 1;
        self.metrics.source_error(error.kind.label());
        let changed = state
            .failing
            .as_ref()
            .is_none_or(|(seen, _)| seen.kind != error.kind);
        if changed {
            tracing::error!(
                url = %self.url,
                kind = error.kind.label(),
                error = %error.message,
                "cannot poll the object store; everything loaded keeps serving"
            );
            state.failing = Some((error, utc_now()));
        } else if let Some((seen, _)) = &mut state.failing {
            seen.message = error.message;
        }
    }

    fn download_failed(
        &self,
        version: &ObjectVersion,
        in_manifest: bool,
        error: DownloadError,
    ) -> Fetch {
        let key = &version.key;
        let (kind, message) = match error {
            // Replaced after the listing: the next poll lists the new one.
            DownloadError::Replaced => return Fetch::Settling,
            DownloadError::Request(e) => match classify(&e, &self.log) {
                ErrorKind::NotFound if in_manifest => (
                    ErrorKind::NotFound,
                    format!("the manifest names {key}, which does not exist"),
                ),
                ErrorKind::NotFound => (
                    ErrorKind::NotFound,
                    format!("{key} was deleted between the listing and the download"),
                ),
                kind => (kind, format!("cannot download {key}: {e}")),
            },
            DownloadError::Body(e, got) => {
                let kind = match classify(&e, &self.log) {
                    ErrorKind::Timeout => ErrorKind::Timeout,
                    _ => ErrorKind::Incomplete,
                };
                let size = version.size;
                (
                    kind,
                    format!("the download of {key} broke off after {got} of {size} bytes: {e}"),
                )
            }
            DownloadError::Length { got, expected } => (
                ErrorKind::Incomplete,
                format!("{key}: got {got} bytes where {expected} were expected"),
            ),
            DownloadError::Digest { got, expected } => (
                ErrorKind::Incomplete,
                format!(
                    "{key} is not the object the manifest names: its sha256 is {got}, not {expected}"
                ),
            ),
            DownloadError::Disk(e) => (
                ErrorKind::Disk,
                format!("cannot write the download of {key}: {e}"),
            ),
        };
        self.fetch_failed(kind, message)
    }

    fn fetch_failed(&self, kind: ErrorKind, message: String) -> Fetch {
        self.metrics.source_error(kind.label());
        Fetch::Failed(StorageError::new(kind, message))
    }
}

impl SnapshotSource for ObjectSource {
    fn describe(&self) -> String {
        self.url.clone()
    }

    /// Polls storage: the manifest if there is one, else the prefix.
    fn list(&self) -> Result<Listing, ListError> {
        let (in_prefix_mode, manifest_etag) = {
            let state = self.state();
            let etag = state.manifest.as_ref().and_then(|m| m.etag.clone());
            (state.ever_listed && state.manifest.is_none(), etag)
        };
        self.log.clear();
        // The poll's own requests are bounded together; reading thousands
        // of workspace records is bounded per request (`follow`), as a
        // download is.
        let polled = self.block_on(async {
            let polled =
                tokio::time::timeout(self.timeout, self.poll(in_prefix_mode, manifest_etag))
                    .await
                    .unwrap_or_else(|_| {
                        Err(StorageError::new(
                            ErrorKind::Timeout,
                            format!("no answer from {} within {:?}", self.url, self.timeout),
                        ))
                    })?;
            self.with_records(polled).await
        });
        tracing::debug!(
            url = %self.url,
            outcome = match &polled {
                Ok(Polled::Objects(objects)) => format!("listed {} objects", objects.len()),
                Ok(Polled::Manifest(_, etag, records)) => format!("manifest changed, etag {etag:?}, records read: {}", records.is_some()),
                Ok(Polled::Unmodified(records)) => format!("manifest unmodified, records read: {}", records.is_some()),
                Err(e) => e.to_string(),
            },
            "polled the object store"
        );
        let mut state = self.state();
        let listing = polled.and_then(|polled| self.read_poll(&mut state, polled));
        match listing {
            Ok(listing) => {
                self.succeeded(&mut state);
                Ok(listing)
            }
            Err(error) => {
                let backs_off = error.kind.backs_off();
                self.failed(&mut state, error);
                Err(ListError::Source { backs_off })
            }
        }
    }

    /// The object `version` of `name` on local disk: a fresh download into
    /// the cache directory (the cache in front answers for a version it
    /// holds), or rebuilt from a delta.
    fn fetch(&self, name: &str, stamp: &EntryStamp, plain: Option<&str>) -> Fetch {
        let EntryStamp::Object(version) = stamp else {
            return Fetch::Failed(StorageError::new(
                ErrorKind::Other,
                "a fingerprint of another kind of source",
            ));
        };
        let (revisions, delta) = {
            let state = self.state();
            let followed = state.manifest.as_ref().and_then(|m| m.good.as_ref());
            (
                followed.and_then(|f| f.revisions(name, version)),
                followed.and_then(|f| f.delta(name, version)),
            )
        };
        // Under --trust-key, a delta's result must be the content a
        // verified signature names: without its digest, the whole object is
        // downloaded (and checked against the signed SHA-256).
        let signed_plain = plain.filter(|_| self.verify);
        let delta = delta.filter(|_| !self.verify || signed_plain.is_some());
        if let Some(delta) = delta
            && let Some(rebuilt) = self.try_delta(name, version, &delta, revisions, signed_plain)
        {
            return rebuilt;
        }
        let in_manifest = revisions.is_some();
        let key = match ObjectPath::parse(&version.key) {
            Ok(key) => key,
            Err(e) => return self.fetch_failed(ErrorKind::Other, format!("{}: {e}", version.key)),
        };
        let expect = Expect {
            size: version.size,
            sha256: in_manifest.then_some(version.tag.as_str()),
            if_match: (!in_manifest && !version.tag.starts_with(NO_ETAG))
                .then_some(version.tag.as_str()),
        };
        let path = self.cache.download_path(&version.key);
        let started = std::time::Instant::now();
        self.log.clear();
        let metrics = &self.metrics;
        let result = self.block_on(download(
            self.store.as_ref(),
            &key,
            expect,
            &path,
            &mut |n| metrics.source_bytes(n),
        ));
        let downloaded = match result {
            Ok(downloaded) => downloaded,
            Err(error) => {
                self.cache.discard(&path);
                return self.download_failed(version, in_manifest, error);
            }
        };
        tracing::info!(
            file = %name,
            key = %version.key,
            bytes = downloaded.len,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "object downloaded"
        );
        Fetch::Ready(FetchedFile {
            path,
            label: version.key.clone(),
            len: downloaded.len,
            source: Some(SourceStatus {
                key: version.key.clone(),
                etag: downloaded.etag,
                sha256: in_manifest.then_some(downloaded.sha256),
                size: downloaded.len,
                manifest_revision: revisions.map(|(root, _)| root),
                workspace_revision: revisions.and_then(|(_, record)| record),
                fetched_at: utc_now(),
                from_cache: false,
                from_delta: None,
            }),
            download: true,
            written: version.written,
            plain: None,
            signed: None,
            file: None,
        })
    }
}

impl ScanBookkeeping for ObjectSource {
    /// Records whether the poll that just ended had trouble that calls for
    /// backing off.
    fn polled(&self, trouble: bool) {
        self.state().backoff.polled(trouble);
    }

    /// The wait before the next poll: the interval (in prefix mode, times
    /// the LIST requests a listing takes), backed off while polls have
    /// trouble and jittered ([`PollBackoff`]).
    fn next_poll(&self, interval: Duration) -> Duration {
        let mut state = self.state();
        let interval = match state.manifest {
            None if state.list_pages > 1 => interval * state.list_pages,
            _ => interval,
        };
        state.backoff.next_poll(interval)
    }

    fn status(&self) -> Option<OriginStatus> {
        let state = self.state();
        let now = SystemTime::now();
        let manifest = state.manifest.as_ref();
        let mode = match (state.ever_listed, manifest) {
            (_, Some(_)) => "manifest",
            (true, None) => "prefix",
            (false, None) => "unknown",
        };
        Some(OriginStatus {
            url: self.url.clone(),
            mode: mode.into(),
            manifest_revision: manifest.and_then(|m| m.good.as_ref()).map(|f| f.revision),
            manifest_etag: manifest.and_then(|m| m.etag.clone()),
            last_success_at: state.last_success.map(utc_millis),
            stale_seconds: state
                .last_success
                .map(|at| now.duration_since(at).unwrap_or_default().as_secs_f64()),
            consecutive_failures: state.failures,
            error: state.failing.as_ref().map(|(e, _)| e.message.clone()),
            error_kind: state.failing.as_ref().map(|(e, _)| e.kind.label().into()),
            error_since: state.failing.as_ref().map(|(_, since)| since.clone()),
            // The cache in front (`Cached`) says these.
            serving_from_cache: false,
            cache_dir: None,
        })
    }
}

impl Drop for ObjectSource {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// The listing of the manifest last read, or why it cannot be followed.
fn manifest_listing(state: &PollState) -> Result<Listing, StorageError> {
    let Some(seen) = &state.manifest else {
        return Err(StorageError::new(
            ErrorKind::Manifest,
            "no manifest was read",
        ));
    };
    if let Some(broken) = &seen.broken {
        return Err(broken.clone());
    }
    let followed = seen
        .good
        .as_ref()
        .ok_or_else(|| StorageError::new(ErrorKind::Manifest, "no valid manifest was read"))?;
    Ok(followed.listing())
}
