//! The store: the domain layer, and the foundation of the crate.
//!
//! It owns the domain values (record ids, instants, API key hashes, feed
//! cursors, the list of collections) and the [`Dataset`]: one workspace at
//! one version, immutable, pre-sorted, pre-rendered and indexed. A dataset
//! is made by the [`Builder`] from plain values and closures that write each
//! record's JSON, so the store knows nothing of where records come from.
//! A reload builds a new dataset and publishes a new [`Catalog`] through the
//! [`Store`]'s `ArcSwap`. A request does exactly one `load` of the catalog
//! and answers entirely from the dataset it found there, so it can never mix
//! two versions.
//!
//! No IO, no HTTP and no file format here: the store imports nothing from
//! the file format beside it in this crate (`snapshot` drives the builder,
//! not the other way round), and nothing of the crates above it, which
//! Cargo refuses; `tests/it/layers.rs` checks that the crate does no IO and
//! starts no thread.

mod builder;
pub mod claims;
pub mod collection;
mod cursor;
pub mod id;
pub mod key;
pub mod limits;
mod query;
mod rendered;
pub mod threads;
pub mod time;
pub mod warm;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use arc_swap::ArcSwap;
use bytes::Bytes;
use rustc_hash::FxHashMap;

use id::IdMap;
use key::KeyHash;
use time::Instant;

pub use builder::{Builder, Built, BytesDigest, Indexed, Key, Meta, Previous, RepeatedId};
pub use collection::{Collection, RecordCounts};
pub use cursor::{Cursor, CursorError};
pub use query::{Body, FeedQuery, OffsetPage};
pub use rendered::Rendered;
pub use threads::{OneThread, Threads};

/// Record indices into a [`Rendered`], in list order.
type Positions = Vec<u32>;

/// Record indices by the exact text of an attribute (a filter value).
/// FxHash: the keys come from the snapshot, and requests only look up.
type TextIndex = FxHashMap<Box<str>, Positions>;

/// One workspace at one snapshot version, ready to serve.
///
/// Records of each kind are rendered once, in the order they were given
/// ([`Rendered`]); every list is an order of record indices over them,
/// sorted at load, and every filter is a pre-built index in the same order.
pub struct Dataset {
    pub workspace_id: String,
    pub workspace_name: Option<String>,
    /// Sent as `X-Snapshot-Version` with every answer from this dataset.
    pub version: String,
    /// The same text as shared bytes: an answer carries it without a copy.
    pub version_bytes: Bytes,
    /// A hash of workspace id, version and content: the same on every
    /// replica that loaded the same snapshot, so ETags made from it agree
    /// fleet-wide.
    pub fingerprint: u64,
    pub key_hashes: Vec<KeyHash>,
    /// The workspace's own limits, if its snapshot sets them.
    pub limits: Option<limits::WorkspaceLimits>,
    pub counts: RecordCounts,
    /// Records taken over from the version this one replaced, not parsed
    /// again (`builder::reuse`); 0 for a first load.
    pub reused_records: usize,
    /// Its records, lists and indexes, behind one pointer: every hollow
    /// dataset shares one empty set of them ([`Dataset::hollow`]), so that
    /// a catalog under a memory budget costs a few hundred bytes a
    /// workspace.
    parts: Arc<Parts>,
    /// Its warming ([`warm`]): the gzip fragments of its records, made by
    /// whoever drives it.
    warming: warm::Warming,
    /// Whether [`Dataset::let_go_of_fragments`] let some go.
    fragments_let_go: AtomicBool,
    /// What [`Dataset::hollow`] made: the workspace's identity and counts
    /// without its records, which are held elsewhere (a memory budget).
    hollow: bool,
    /// What [`Dataset::refused`] made: the claims of a version its
    /// replica refused, whose records it will not load.
    refused: bool,
}

/// A dataset's records, lists and indexes.
struct Parts {
    companies: Companies,
    tasks: Tasks,
    roles: Roles,
    feed: Feed,
    notes: NewestByCompany,
    metrics: LatestMetrics,
    meetings: NewestByCompany,
    meeting_notes: MeetingNotes,
    /// What the next version may take over of its records (`builder::reuse`).
    reusable: Option<builder::Reusable>,
}

struct Companies {
    records: Arc<Rendered>,
    /// Name ascending (code-point order), then id.
    order: Positions,
    at: IdMap<u32>,
    by_priority: TextIndex,
}

struct Tasks {
    records: Arc<Rendered>,
    /// Newest `created_at` first, then id descending; so is every index.
    order: Positions,
    at: IdMap<u32>,
    by_status: TextIndex,
    by_priority: TextIndex,
    by_status_priority: FxHashMap<Box<str>, TextIndex>,
    by_company: IdMap<Positions>,
}

struct Roles {
    records: Arc<Rendered>,
    /// The whole `/roles` body (newest `opened_at` first, then id
    /// descending), built once and shared by every answer.
    body: Bytes,
    /// Its gzip form, once precompressed.
    gzip: Arc<OnceLock<Bytes>>,
    by_company: IdMap<Positions>,
}

struct Feed {
    records: Arc<Rendered>,
    /// Newest `published_at` first, then id descending.
    order: Positions,
    /// `(published_at, id)` of each entry, by record index: the cursor seeks on it.
    keys: Vec<(Instant, u128)>,
    by_type: TextIndex,
}

/// Notes and meetings: by id, and newest first per company (notes by
/// `created_at`, meetings by `start_time`: the extension
/// `/portfolio/{id}/meetings`), then id descending.
struct NewestByCompany {
    records: Arc<Rendered>,
    at: IdMap<u32>,
    by_company: IdMap<Positions>,
}

/// Only the latest value per (company, name), grouped by company and
/// ordered by name within it, so a company's list is one run.
struct LatestMetrics {
    records: Arc<Rendered>,
    /// Every record index in order: a company's list is a slice of it.
    all: Positions,
    by_company: IdMap<(u32, u32)>,
}

struct MeetingNotes {
    records: Arc<Rendered>,
    /// `created_at` then id ascending within each meeting.
    by_meeting: IdMap<Positions>,
}

/// Every published workspace, and the index from key hash to workspace.
#[derive(Default)]
pub struct Catalog {
    /// FxHash: the keys are SHA-256 digests, and requests only look up.
    by_key: FxHashMap<KeyHash, Arc<Dataset>>,
    /// FxHash too: ids come from the operator's snapshots, and a scan
    /// rebuilds this map for every batch it publishes.
    by_workspace: FxHashMap<String, Arc<Dataset>>,
}

impl Dataset {
    /// This workspace at this version without its records: what a catalog
    /// under a memory budget keeps of a workspace, whether or not it is
    /// resident. Ids, version, fingerprint, keys and counts are this
    /// dataset's; every list is empty, so that an endpoint run on it
    /// still checks the path and the query (the contract's 400s come
    /// before a load on demand). A few hundred bytes besides the keys.
    pub fn hollow(&self) -> Dataset {
        let mut hollow = Dataset::hollow_of(Meta {
            workspace_id: self.workspace_id.clone(),
            workspace_name: self.workspace_name.clone(),
            version: self.version.clone(),
            key_hashes: self.key_hashes.clone(),
            limits: self.limits,
            content_hash: 0,
        });
        hollow.fingerprint = self.fingerprint;
        hollow.counts = self.counts;
        hollow
    }

    /// A hollow dataset of what `meta` names, its records never read
    /// (counted as none).
    pub fn hollow_of(meta: Meta) -> Dataset {
        // The empty parts every hollow dataset shares.
        static EMPTY: OnceLock<Arc<Parts>> = OnceLock::new();
        let empty = EMPTY.get_or_init(|| {
            let none = Meta {
                workspace_id: String::new(),
                workspace_name: None,
                version: String::new(),
                key_hashes: Vec::new(),
                limits: None,
                content_hash: 0,
            };
            let empty = Builder::default().finish(none, &OneThread);
            empty.expect("no records, no repeated id").dataset.parts
        });
        let fingerprint =
            builder::fingerprint(&meta.workspace_id, &meta.version, meta.content_hash);
        Dataset {
            fingerprint,
            version_bytes: Bytes::copy_from_slice(meta.version.as_bytes()),
            workspace_id: meta.workspace_id,
            workspace_name: meta.workspace_name,
            version: meta.version,
            key_hashes: meta.key_hashes,
            limits: meta.limits,
            counts: RecordCounts::default(),
            reused_records: 0,
            parts: Arc::clone(empty),
            warming: warm::Warming::off(),
            fragments_let_go: AtomicBool::new(false),
            hollow: true,
            refused: false,
        }
    }

    /// Whether this is a [`Dataset::hollow`]: its records are elsewhere.
    pub fn is_hollow(&self) -> bool {
        self.hollow
    }

    /// This hollow dataset as the claims of a version that was refused
    /// (for memory, or for its signature) while its keys are known: they
    /// find it, so that a client is told the data is unavailable rather
    /// than that its key is wrong, and it takes part in conflicts; its
    /// records are never loaded from it.
    pub fn refused(mut self) -> Dataset {
        debug_assert!(self.hollow, "only claims are refused");
        self.refused = true;
        self
    }

    /// Whether this is a refused version's claims ([`Dataset::refused`]).
    pub fn is_refused(&self) -> bool {
        self.refused
    }

    /// Bytes held by the records' gzip fragments (0 without precompression).
    pub fn precompressed_bytes(&self) -> usize {
        let packed: usize = Collection::ALL
            .iter()
            .filter_map(|&c| self.records(c).packed().as_deref().map(|p| p.heap_bytes()))
            .sum();
        packed + self.parts.roles.gzip.get().map_or(0, Bytes::len)
    }

    /// A collection's rendered records: the one place that maps the list
    /// of collections to the dataset's parts.
    fn records(&self, collection: Collection) -> &Arc<Rendered> {
        match collection {
            Collection::Companies => &self.parts.companies.records,
            Collection::Tasks => &self.parts.tasks.records,
            Collection::Roles => &self.parts.roles.records,
            Collection::Feed => &self.parts.feed.records,
            Collection::Notes => &self.parts.notes.records,
            Collection::Metrics => &self.parts.metrics.records,
            Collection::Meetings => &self.parts.meetings.records,
            Collection::MeetingNotes => &self.parts.meeting_notes.records,
        }
    }

    /// Lets the records' gzip fragments go while this version serves
    /// (`builder::reuse`: a load replacing most of its records is under
    /// way); its gzip answers are compressed per request from then on.
    fn let_go_of_fragments(&self) {
        let bytes: usize = Collection::ALL
            .iter()
            .map(|&c| self.records(c).let_go_of_packed())
            .sum();
        if bytes > 0 {
            self.fragments_let_go.store(true, Ordering::Relaxed);
            tracing::info!(
                workspace = %self.workspace_id,
                bytes,
                "most records are replaced: the serving version's gzip fragments are let go while the new one loads"
            );
        }
    }
}

impl Catalog {
    /// Builds a catalog from datasets whose workspace ids and key hashes are
    /// already known to be distinct (the loader resolves conflicts).
    pub fn new(datasets: impl IntoIterator<Item = Arc<Dataset>>) -> Catalog {
        let datasets = datasets.into_iter();
        let mut catalog = Catalog::default();
        catalog
            .by_workspace
            .reserve(datasets.size_hint().1.unwrap_or(0));
        catalog.by_key.reserve(datasets.size_hint().1.unwrap_or(0));
        for dataset in datasets {
            for hash in &dataset.key_hashes {
                catalog.by_key.insert(*hash, Arc::clone(&dataset));
            }
            catalog
                .by_workspace
                .insert(dataset.workspace_id.clone(), dataset);
        }
        catalog
    }

    /// The workspace that `key_hash` (the SHA-256 of a whole API key) opens.
    pub fn by_key(&self, key_hash: &KeyHash) -> Option<&Arc<Dataset>> {
        self.by_key.get(key_hash)
    }

    /// How many workspaces serve.
    pub fn len(&self) -> usize {
        self.by_workspace.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_workspace.is_empty()
    }

    pub fn workspace(&self, id: &str) -> Option<&Arc<Dataset>> {
        self.by_workspace.get(id)
    }

    pub fn workspaces(&self) -> impl Iterator<Item = &Arc<Dataset>> {
        self.by_workspace.values()
    }
}

/// The published catalog. Readers `load` it once per request; the loader
/// `publish`es a new one with a single atomic swap.
pub struct Store {
    current: ArcSwap<Catalog>,
    /// Catalogs published since start: what a scan costs is one swap per
    /// batch it settles, and none when nothing changed.
    published: AtomicU64,
}

impl Default for Store {
    fn default() -> Self {
        Store {
            current: ArcSwap::from_pointee(Catalog::default()),
            published: AtomicU64::new(0),
        }
    }
}

impl Store {
    /// The catalog as of now. Keep the guard on the stack for one request,
    /// never across an `.await`.
    pub fn load(&self) -> arc_swap::Guard<Arc<Catalog>> {
        self.current.load()
    }

    /// Replaces the catalog. Requests that already loaded the old one finish
    /// on it; its datasets are freed when the last of them is done.
    pub fn publish(&self, catalog: Catalog) {
        self.current.store(Arc::new(catalog));
        self.published.fetch_add(1, Ordering::Relaxed);
    }

    /// How many catalogs were published since start.
    pub fn published(&self) -> u64 {
        self.published.load(Ordering::Relaxed)
    }
}
