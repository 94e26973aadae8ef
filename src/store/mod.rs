//! The in-memory dataset: immutable, pre-sorted, pre-rendered, indexed.
//!
//! A [`Dataset`] is one workspace at one snapshot version. It is built once
//! ([`build`]) and never changed; a reload builds a new one and publishes a new
//! [`Catalog`] through the [`Store`]'s `ArcSwap`. A request does exactly one
//! `load` of the catalog and answers entirely from the dataset it found there,
//! so it can never mix two versions.
//!
//! No IO and no HTTP here: the store turns a validated snapshot into bytes and
//! answers queries with bytes.

mod build;
mod cursor;
pub mod id;
pub mod key;
mod query;
mod rendered;
pub mod time;

use std::collections::HashMap;
use std::sync::Arc;

use arc_swap::ArcSwap;
use bytes::Bytes;
use rustc_hash::FxHashMap;

use id::IdMap;
use time::Instant;

pub use build::Builder;
pub use cursor::{Cursor, CursorError};
pub use query::{FeedQuery, OffsetPage};
use rendered::Rendered;

/// How many records of each kind a dataset holds (served or not).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct RecordCounts {
    pub companies: usize,
    pub tasks: usize,
    pub roles: usize,
    pub feed: usize,
    pub notes: usize,
    pub metrics: usize,
    pub meetings: usize,
    pub meeting_notes: usize,
}

impl RecordCounts {
    /// The snapshot's collection names, in file order.
    pub const COLLECTIONS: [&'static str; 8] = [
        "companies",
        "tasks",
        "roles",
        "feed",
        "notes",
        "metrics",
        "meetings",
        "meeting_notes",
    ];

    /// Each collection's name with its count, in [`RecordCounts::COLLECTIONS`] order.
    pub fn by_collection(&self) -> [(&'static str, usize); 8] {
        let counts = [
            self.companies,
            self.tasks,
            self.roles,
            self.feed,
            self.notes,
            self.metrics,
            self.meetings,
            self.meeting_notes,
        ];
        std::array::from_fn(|i| (Self::COLLECTIONS[i], counts[i]))
    }

    pub fn total(&self) -> usize {
        self.by_collection().iter().map(|(_, n)| n).sum()
    }
}

/// Record indices into a [`Rendered`], in list order.
type Positions = Vec<u32>;

/// Record indices by the exact text of an attribute (a filter value).
/// FxHash: the keys come from the snapshot, and requests only look up.
type TextIndex = FxHashMap<Box<str>, Positions>;

/// One workspace at one snapshot version, ready to serve.
///
/// Records of each kind are rendered once, in file order ([`Rendered`]);
/// every list is an order of record indices over them, sorted at load, and
/// every filter is a pre-built index in the same order.
pub struct Dataset {
    pub workspace_id: String,
    pub workspace_name: Option<String>,
    /// Sent as `X-Snapshot-Version` with every answer from this dataset.
    pub version: String,
    /// A hash of workspace id and version: the same on every replica that
    /// loaded the same snapshot, so ETags made from it agree fleet-wide.
    pub fingerprint: u64,
    pub key_hashes: Vec<[u8; 32]>,
    pub counts: RecordCounts,

    companies: Rendered,
    /// Name ascending (code-point order), then id.
    company_order: Positions,
    company_at: IdMap<u32>,
    companies_by_priority: TextIndex,

    tasks: Rendered,
    /// Newest `created_at` first, then id descending; so is every task index.
    task_order: Positions,
    task_at: IdMap<u32>,
    tasks_by_status: TextIndex,
    tasks_by_priority: TextIndex,
    tasks_by_status_priority: FxHashMap<Box<str>, TextIndex>,
    tasks_by_company: IdMap<Positions>,

    roles: Rendered,
    /// The whole `/roles` body (newest `opened_at` first, then id
    /// descending), built once and shared by every answer.
    roles_body: Bytes,
    roles_by_company: IdMap<Positions>,

    feed: Rendered,
    /// Newest `published_at` first, then id descending.
    feed_order: Positions,
    /// `(published_at, id)` of each entry, by record index: the cursor seeks on it.
    feed_keys: Vec<(Instant, u128)>,
    feed_by_type: TextIndex,

    notes: Rendered,
    note_at: IdMap<u32>,
    /// Newest `created_at` first, then id descending.
    notes_by_company: IdMap<Positions>,

    /// Only the latest value per (company, name), grouped by company and
    /// ordered by name within it, so a company's list is one run.
    metrics: Rendered,
    metrics_by_company: IdMap<(u32, u32)>,

    meetings: Rendered,
    meeting_at: IdMap<u32>,
    meeting_notes: Rendered,
    /// `created_at` then id ascending within each meeting.
    meeting_notes_by_meeting: IdMap<Positions>,
}

/// Every published workspace, and the index from key hash to workspace.
#[derive(Default)]
pub struct Catalog {
    by_key: HashMap<[u8; 32], Arc<Dataset>>,
    by_workspace: HashMap<String, Arc<Dataset>>,
}

impl Catalog {
    /// Builds a catalog from datasets whose workspace ids and key hashes are
    /// already known to be distinct (the loader resolves conflicts).
    pub fn new(datasets: impl IntoIterator<Item = Arc<Dataset>>) -> Catalog {
        let mut catalog = Catalog::default();
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
    pub fn by_key(&self, key_hash: &[u8; 32]) -> Option<&Dataset> {
        self.by_key.get(key_hash).map(Arc::as_ref)
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
}

impl Default for Store {
    fn default() -> Self {
        Store {
            current: ArcSwap::from_pointee(Catalog::default()),
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
    }
}
