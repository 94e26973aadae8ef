//! Records taken over from the version a load replaces.
//!
//! A dataset keeps, next to its rendered records, what its build was told
//! of each record besides its JSON: its key, its indexed values and a
//! 128-bit digest of its bytes as the snapshot had them ([`Reusable`]).
//! When the next version of the workspace loads, the reader hashes each
//! record's bytes and asks the builder to take over the old record with
//! that digest ([`Builder::reuse`]): its rendered bytes stay where they are
//! (the new version shares their chunk, `rendered.rs`), its key and values
//! are copied, and it is neither parsed, checked nor rendered again. It
//! passed the same checks when its bytes were first loaded, and rendering
//! depends on a record's bytes alone.
//!
//! Everything derived across records (ids repeated, dangling references,
//! orders, indexes, the latest metric per name) is derived again by
//! [`Builder::finish`] from the keys, exactly as for a fresh load; so is
//! the ETag, from the new file's bytes. Only what a record alone gives is
//! taken over.
//!
//! Digests are 128 bits (XXH3-128, over the bytes from `{` to `}`): an
//! accidental collision among a workspace's records is not a practical
//! risk, where a 64-bit hash would be. They are matched first at the same
//! position (an edit in place keeps every other position), then through a
//! map of the old digests built once per load, on the first miss.

use std::sync::{Arc, OnceLock};

use rustc_hash::FxHashMap;

use super::{Builder, Key};
use crate::store::Dataset;
use crate::store::collection::Collection;

/// A 128-bit digest of a record's bytes as the snapshot file has them.
pub type BytesDigest = u128;

/// What a dataset keeps of its records for the next version to take over.
/// Indices are record indices of the dataset's `Rendered` (for metrics,
/// the latest values it kept).
pub(crate) struct Reusable {
    pub(super) keys: [Vec<Key>; Collection::COUNT],
    pub(super) digests: [Vec<BytesDigest>; Collection::COUNT],
    /// The texts that the values below number.
    pub(super) texts: Vec<Box<str>>,
    pub(super) company_names: Vec<Option<Box<str>>>,
    pub(super) company_priorities: Vec<Option<u32>>,
    pub(super) task_fields: Vec<(Option<u32>, Option<u32>)>,
    pub(super) feed_types: Vec<Option<u32>>,
    pub(super) metric_names: Vec<Option<u32>>,
}

/// The version a load replaces, as the load's builders share it.
pub struct Previous {
    dataset: Arc<Dataset>,
    /// Old record index by digest, per collection, made on the first miss.
    by_digest: [OnceLock<FxHashMap<BytesDigest, u32>>; Collection::COUNT],
}

impl Previous {
    /// `dataset`'s records, for a load of its workspace's next version;
    /// `None` if it kept nothing to reuse.
    pub fn of(dataset: Arc<Dataset>) -> Option<Arc<Previous>> {
        dataset.reusable.as_ref()?;
        Some(Arc::new(Previous {
            dataset,
            by_digest: Default::default(),
        }))
    }

    fn kept(&self) -> &Reusable {
        self.dataset
            .reusable
            .as_ref()
            .expect("checked by Previous::of")
    }

    /// The old record of `collection` whose bytes have `digest`; `index`
    /// is the new record's position, tried first.
    fn find(&self, collection: Collection, index: usize, digest: BytesDigest) -> Option<usize> {
        let digests = &self.kept().digests[collection.index()];
        if digests.get(index) == Some(&digest) {
            return Some(index);
        }
        let map = self.by_digest[collection.index()].get_or_init(|| {
            let mut map = FxHashMap::with_capacity_and_hasher(digests.len(), Default::default());
            map.extend(digests.iter().enumerate().map(|(i, &d)| (d, i as u32)));
            map
        });
        map.get(&digest).map(|&i| i as usize)
    }
}

impl Builder {
    /// A builder for the next version of `previous`'s workspace: it may
    /// take over its records ([`Builder::reuse`]).
    pub fn following(previous: Option<Arc<Previous>>) -> Builder {
        Builder {
            previous,
            ..Builder::default()
        }
    }

    /// The version this builder may take records over from, for the
    /// builders of the same load's batches ([`Builder::append`]).
    pub fn previous(&self) -> Option<Arc<Previous>> {
        self.previous.clone()
    }

    /// The digest of the next record's bytes, which the call that gives
    /// the record keeps with it. A record given without one leaves the
    /// dataset with nothing to reuse.
    pub fn digest_next(&mut self, digest: BytesDigest) {
        self.next_digest = Some(digest);
    }

    /// Takes over, as the next record of `collection` (its `index`-th),
    /// the previous version's record whose bytes have `digest`; false if
    /// it has none, and the record must be built.
    pub fn reuse(&mut self, collection: Collection, index: usize, digest: BytesDigest) -> bool {
        let Some(previous) = self.previous.as_deref() else {
            return false;
        };
        let Some(i) = previous.find(collection, index, digest) else {
            return false;
        };
        let kept = previous.kept();
        let c = collection.index();
        let part = &mut self.parts[c];
        part.rendered
            .push_from(previous.dataset.records(collection), i);
        part.keys.push(kept.keys[c][i]);
        part.digests.push(digest);
        self.reused += 1;
        let texts = &mut Texts {
            from: &kept.texts,
            seen: &mut self.remap,
            into: &mut self.interner,
        };
        match collection {
            Collection::Companies => {
                self.company_names.push(kept.company_names[i].clone());
                let priority = texts.remap(kept.company_priorities[i]);
                self.company_priorities.push(priority);
            }
            Collection::Tasks => {
                let (status, priority) = kept.task_fields[i];
                let fields = (texts.remap(status), texts.remap(priority));
                self.task_fields.push(fields);
            }
            Collection::Feed => {
                let kind = texts.remap(kept.feed_types[i]);
                self.feed_types.push(kind);
            }
            Collection::Metrics => {
                let name = texts.remap(kept.metric_names[i]);
                self.metric_names.push(name);
            }
            Collection::Roles
            | Collection::Notes
            | Collection::Meetings
            | Collection::MeetingNotes => {}
        }
        true
    }
}

/// The previous version's numbered texts, numbered anew by this builder
/// (each looked up once).
struct Texts<'a> {
    from: &'a [Box<str>],
    seen: &'a mut Vec<u32>,
    into: &'a mut super::Interner,
}

impl Texts<'_> {
    fn remap(&mut self, old: Option<u32>) -> Option<u32> {
        let old = old? as usize;
        if self.seen.len() <= old {
            self.seen.resize(self.from.len().max(old + 1), u32::MAX);
        }
        if self.seen[old] == u32::MAX {
            self.seen[old] = self.into.intern(Some(&self.from[old]))?;
        }
        Some(self.seen[old])
    }
}
