//! The builder: how a dataset is made from plain values.
//!
//! A snapshot reader (or a test, or any other source) hands the builder
//! records one by one, in the order it reads them: each with its [`Key`],
//! the few attribute values the store indexes, and a closure that writes
//! the record's JSON as the API serves it. The builder renders the record
//! right away and keeps only the key and the interned values, so a load
//! holds its input and the rendered records, never a parsed document.
//! [`Builder::finish`] then checks ids, sorts, indexes and assembles the
//! [`Dataset`]. Pure and synchronous: run it off the async runtime.

mod finish;
pub(in crate::store) use finish::fingerprint;
mod index;
mod reuse;

use std::borrow::Cow;

use super::Dataset;
use super::collection::Collection;
use super::key::KeyHash;
use super::rendered::Renderer;
use super::time::Instant;
use index::Interner;
pub(crate) use reuse::Reusable;
pub use reuse::{BytesDigest, Previous};

/// What the store knows about a record besides its JSON: its id, the
/// instant that orders its list (the default for companies, which are
/// ordered by name), and the record it points at (a company, or a meeting
/// for a meeting note), if the reference is a valid id.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Key {
    pub id: u128,
    pub at: Instant,
    pub parent: Option<u128>,
}

/// What a reader that renders a record itself hands the builder with it
/// ([`Builder::walked`]): its key, the texts the store indexes, by
/// collection (a company's name and priority, a task's status and
/// priority, a feed entry's type, a metric's name; the others have none),
/// and the digest of its bytes if [`Builder::digest_next`] was not told.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Indexed<'t> {
    pub key: Key,
    pub texts: [Option<Cow<'t, str>>; 2],
    pub digest: Option<BytesDigest>,
}

impl Indexed<'_> {
    /// The key of a record whose collection indexes no text.
    pub fn of(key: Key) -> Indexed<'static> {
        Indexed {
            key,
            texts: [None, None],
            digest: None,
        }
    }
}

/// Everything of a dataset that is not a record.
#[derive(Clone, Debug)]
pub struct Meta {
    pub workspace_id: String,
    pub workspace_name: Option<String>,
    /// Sent as `X-Snapshot-Version` with every answer.
    pub version: String,
    pub key_hashes: Vec<KeyHash>,
    /// The workspace's own limits, if its snapshot sets them.
    pub limits: Option<crate::store::limits::WorkspaceLimits>,
    /// A hash of the content, for the strong ETag, which must change
    /// whenever a body does, even if an exporter reuses a version label.
    /// FxHash (no per-process seed, so replicas agree); what it covers
    /// depends on the path that loaded the file:
    /// - the streaming parse (`snapshot::stream`, every load that it
    ///   accepts): each top-level member's value and each record, their
    ///   bytes as written, each followed by a 0 byte, in file order; not
    ///   the member names, nor the blanks, commas and brackets between
    ///   values, so re-indenting the file between values keeps the hash;
    /// - the whole-buffer parse (`snapshot::load_buffer`, run only when the
    ///   streaming pass gave up and the full parse then accepted the file):
    ///   every byte of the file in one write.
    ///
    /// The two do not agree: the same file hashes differently on each path.
    /// Both are stable for the same bytes on the same path, which is all an
    /// ETag needs.
    pub content_hash: u64,
}

/// A record id given twice within one collection.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("id repeats within {}: {}[{first}] has it too", .collection.name(), .collection.name())]
pub struct RepeatedId {
    pub collection: Collection,
    /// Position of the repeat in its collection.
    pub index: usize,
    /// Position of the first record with the id.
    pub first: usize,
    pub id: u128,
}

/// A dataset and what its build noticed: records pointing at a company or
/// meeting that the dataset does not hold, a workspace no key can read.
pub struct Built {
    pub dataset: Dataset,
    pub warnings: Vec<String>,
}

/// One collection while it loads: rendered records and their keys, by index.
#[derive(Default)]
struct LoadingCollection {
    rendered: Renderer,
    keys: Vec<Key>,
    /// Each record's [`BytesDigest`], if every record came with one.
    digests: Vec<BytesDigest>,
}

/// Receives the records of one dataset and turns them into a [`Dataset`].
#[derive(Default)]
pub struct Builder {
    parts: [LoadingCollection; Collection::COUNT],
    interner: Interner,
    /// Name of each company (it orders `/portfolio`).
    company_names: Vec<Option<Box<str>>>,
    company_priorities: Vec<Option<u32>>,
    /// Status and priority of each task.
    task_fields: Vec<(Option<u32>, Option<u32>)>,
    feed_types: Vec<Option<u32>>,
    metric_names: Vec<Option<u32>>,
    /// The version this load replaces, whose records it may take over.
    previous: Option<std::sync::Arc<Previous>>,
    /// The previous version's interned texts numbered in `interner`.
    remap: Vec<u32>,
    /// The digest of the record about to be given ([`Builder::digest_next`]).
    next_digest: Option<BytesDigest>,
    /// Records taken over from `previous`.
    reused: usize,
}

impl Builder {
    /// Renders a record of `collection` with `json` and keeps its key.
    fn push(&mut self, collection: Collection, key: Key, json: impl FnOnce(&mut Vec<u8>)) {
        self.parts[collection.index()].rendered.push_with(json);
        self.keep(collection, key);
    }

    /// Keeps the key of the record of `collection` just rendered.
    fn keep(&mut self, collection: Collection, key: Key) {
        let part = &mut self.parts[collection.index()];
        part.keys.push(key);
        if let Some(digest) = self.next_digest.take() {
            part.digests.push(digest);
        }
    }

    /// A record of any collection that `walk` writes, as the API serves it,
    /// while it reads it: what it gives back is kept with it. When `walk`
    /// fails, what it wrote is dropped and the builder is as it was.
    pub fn walked<'t, E>(
        &mut self,
        collection: Collection,
        walk: impl FnOnce(&mut Vec<u8>) -> Result<Indexed<'t>, E>,
    ) -> Result<(), E> {
        let part = &mut self.parts[collection.index()];
        let Indexed { key, texts, digest } = part.rendered.try_push_with(walk)?;
        if digest.is_some() {
            self.next_digest = digest;
        }
        self.keep(collection, key);
        let [a, b] = texts;
        let (a, b) = (a.as_deref(), b.as_deref());
        match collection {
            Collection::Companies => {
                self.company_names.push(a.map(Into::into));
                let priority = self.interner.intern(b);
                self.company_priorities.push(priority);
            }
            Collection::Tasks => {
                let fields = (self.interner.intern(a), self.interner.intern(b));
                self.task_fields.push(fields);
            }
            Collection::Feed => {
                let kind = self.interner.intern(a);
                self.feed_types.push(kind);
            }
            Collection::Metrics => {
                let name = self.interner.intern(a);
                self.metric_names.push(name);
            }
            Collection::Roles
            | Collection::Notes
            | Collection::Meetings
            | Collection::MeetingNotes => {}
        }
        Ok(())
    }

    /// A company, with the name that orders `/portfolio` and the priority
    /// it is filtered by.
    pub fn company(
        &mut self,
        key: Key,
        name: Option<&str>,
        priority: Option<&str>,
        json: impl FnOnce(&mut Vec<u8>),
    ) {
        self.push(Collection::Companies, key, json);
        self.company_names.push(name.map(Into::into));
        let priority = self.interner.intern(priority);
        self.company_priorities.push(priority);
    }

    /// A task, with the status and priority it is filtered by.
    pub fn task(
        &mut self,
        key: Key,
        status: Option<&str>,
        priority: Option<&str>,
        json: impl FnOnce(&mut Vec<u8>),
    ) {
        self.push(Collection::Tasks, key, json);
        let fields = (self.interner.intern(status), self.interner.intern(priority));
        self.task_fields.push(fields);
    }

    pub fn role(&mut self, key: Key, json: impl FnOnce(&mut Vec<u8>)) {
        self.push(Collection::Roles, key, json);
    }

    /// A feed entry, with the type it is filtered by.
    pub fn feed_entry(&mut self, key: Key, kind: Option<&str>, json: impl FnOnce(&mut Vec<u8>)) {
        self.push(Collection::Feed, key, json);
        let kind = self.interner.intern(kind);
        self.feed_types.push(kind);
    }

    pub fn note(&mut self, key: Key, json: impl FnOnce(&mut Vec<u8>)) {
        self.push(Collection::Notes, key, json);
    }

    /// A reported metric value, with its metric's name: only the latest
    /// value per (company, name) is served.
    pub fn metric(&mut self, key: Key, name: Option<&str>, json: impl FnOnce(&mut Vec<u8>)) {
        self.push(Collection::Metrics, key, json);
        let name = self.interner.intern(name);
        self.metric_names.push(name);
    }

    pub fn meeting(&mut self, key: Key, json: impl FnOnce(&mut Vec<u8>)) {
        self.push(Collection::Meetings, key, json);
    }

    pub fn meeting_note(&mut self, key: Key, json: impl FnOnce(&mut Vec<u8>)) {
        self.push(Collection::MeetingNotes, key, json);
    }

    /// Appends the records `other` received, as if they had been given to
    /// this builder after its own: records can be built in batches on
    /// several threads and joined in order.
    pub fn append(&mut self, other: Builder) {
        // Every field named, here and in `Builder::finish`, on purpose: the
        // compiler then makes both take in a field added to `Builder`.
        let Builder {
            parts,
            interner,
            company_names,
            company_priorities,
            task_fields,
            feed_types,
            metric_names,
            previous: _,
            remap: _,
            next_digest: _,
            reused,
        } = other;
        self.reused += reused;
        for (mine, theirs) in self.parts.iter_mut().zip(parts) {
            mine.rendered.append(theirs.rendered);
            mine.keys.extend(theirs.keys);
            mine.digests.extend(theirs.digests);
        }
        let mut remap = |id: Option<u32>| self.interner.intern(id.map(|i| interner.text(i)));
        let priorities: Vec<_> = company_priorities.into_iter().map(&mut remap).collect();
        let tasks: Vec<_> = task_fields
            .into_iter()
            .map(|(status, priority)| (remap(status), remap(priority)))
            .collect();
        let types: Vec<_> = feed_types.into_iter().map(&mut remap).collect();
        let names: Vec<_> = metric_names.into_iter().map(&mut remap).collect();
        self.company_priorities.extend(priorities);
        self.task_fields.extend(tasks);
        self.feed_types.extend(types);
        self.metric_names.extend(names);
        self.company_names.extend(company_names);
    }
}

#[cfg(test)]
impl Builder {
    /// Everything the builder holds of its records, in words: each
    /// collection's served bytes, keys and digests, and the indexed texts
    /// (as texts, not their numbers): for tests that compare two ways of
    /// giving it the same records.
    pub(crate) fn describe(self) -> String {
        use std::fmt::Write;
        let mut out = String::new();
        let text = |id: Option<u32>| id.map(|i| self.interner.text(i).to_owned());
        for (c, part) in Collection::ALL.iter().zip(self.parts) {
            let rendered = part.rendered.finish();
            for i in 0..part.keys.len() {
                let record = String::from_utf8_lossy(rendered.record(i)).into_owned();
                let _ = writeln!(out, "{} {record} {:?}", c.name(), part.keys[i]);
            }
            let _ = writeln!(out, "{} digests {:?}", c.name(), part.digests);
        }
        let _ = writeln!(out, "names {:?}", self.company_names);
        let priorities: Vec<_> = self.company_priorities.iter().map(|&p| text(p)).collect();
        let tasks: Vec<_> = self
            .task_fields
            .iter()
            .map(|&(s, p)| (text(s), text(p)))
            .collect();
        let types: Vec<_> = self.feed_types.iter().map(|&t| text(t)).collect();
        let metrics: Vec<_> = self.metric_names.iter().map(|&n| text(n)).collect();
        let _ = writeln!(out, "{priorities:?} {tasks:?} {types:?} {metrics:?}");
        out
    }
}
