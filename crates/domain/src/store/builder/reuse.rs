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
//! the ETag, from the new file's content hash
//! ([`Meta::content_hash`](super::Meta::content_hash)).
//! Only what a record alone gives is taken over.
//!
//! Digests are 128 bits (XXH3-128, over the bytes from `{` to `}`): an
//! accidental collision among a workspace's records is not a practical
//! risk, where a 64-bit hash would be. They are matched first at the same
//! position (an edit in place keeps every other position), then through a
//! map of the old digests built once per load, on the first miss.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use rustc_hash::FxHashMap;

use super::{Builder, Key};
use crate::store::Dataset;
use crate::store::collection::Collection;
use crate::store::time::Instant;

/// A 128-bit digest of a record's bytes as the snapshot file has them.
pub type BytesDigest = u128;

/// What a dataset keeps of its records for the next version to take over.
/// Indices are record indices of the dataset's `Rendered` (for metrics,
/// the latest values it kept). Kept compact: it stays as long as the
/// dataset serves, and a workspace of 100 MB has some 160,000 records.
pub(crate) struct Reusable {
    keys: [KeptKeys; Collection::COUNT],
    digests: [Vec<BytesDigest>; Collection::COUNT],
    /// The texts that the values below number ([`NONE`] for none).
    texts: Vec<Box<str>>,
    company_names: Vec<Option<Box<str>>>,
    company_priorities: Vec<u32>,
    task_fields: Vec<[u32; 2]>,
    feed_types: Vec<u32>,
    metric_names: Vec<u32>,
}

/// What [`Reusable::keep`] is given: each collection's keys, digests and
/// the builder's values, by record index.
pub(super) struct KeptForReuse {
    pub keys: [Vec<Key>; Collection::COUNT],
    pub digests: [Vec<BytesDigest>; Collection::COUNT],
    pub texts: Vec<Box<str>>,
    pub company_names: Vec<Option<Box<str>>>,
    pub company_priorities: Vec<Option<u32>>,
    pub task_fields: Vec<(Option<u32>, Option<u32>)>,
    pub feed_types: Vec<Option<u32>>,
    pub metric_names: Vec<Option<u32>>,
}

impl Reusable {
    pub(super) fn keep(kept: KeptForReuse) -> Reusable {
        let numbers = |values: Vec<Option<u32>>| values.into_iter().map(to_number).collect();
        Reusable {
            keys: kept.keys.map(|keys| KeptKeys::keep(&keys)),
            digests: kept.digests,
            texts: kept.texts,
            company_names: kept.company_names,
            company_priorities: numbers(kept.company_priorities),
            task_fields: kept
                .task_fields
                .into_iter()
                .map(|(s, p)| [to_number(s), to_number(p)])
                .collect(),
            feed_types: numbers(kept.feed_types),
            metric_names: numbers(kept.metric_names),
        }
    }
}

/// No text, as [`Reusable`] numbers them: an interner numbers fewer texts
/// than a workspace has records, far below it.
const NONE: u32 = u32::MAX;

fn to_number(text: Option<u32>) -> u32 {
    text.unwrap_or(NONE)
}

fn from_number(text: u32) -> Option<u32> {
    (text != NONE).then_some(text)
}

/// A collection's [`Key`]s in 32 bytes each where a `Key` takes 64 (a
/// `u128` is aligned to 16 bytes and an `Option<u128>` takes 32): the
/// parent as an index into the collection's parents, few and repeated.
#[derive(Default)]
struct KeptKeys {
    keys: Vec<KeptKey>,
    parents: Vec<u128>,
}

#[derive(Clone, Copy)]
struct KeptKey {
    id: [u64; 2],
    secs: i64,
    nanos: u32,
    /// Index into `parents`, or [`NONE`].
    parent: u32,
}

impl KeptKeys {
    fn keep(keys: &[Key]) -> KeptKeys {
        let mut parents = Vec::new();
        let mut numbered: FxHashMap<u128, u32> = FxHashMap::default();
        let keys = keys
            .iter()
            .map(|key| KeptKey {
                id: split(key.id),
                secs: key.at.secs,
                nanos: key.at.nanos,
                parent: key.parent.map_or(NONE, |parent| {
                    *numbered.entry(parent).or_insert_with(|| {
                        parents.push(parent);
                        (parents.len() - 1) as u32
                    })
                }),
            })
            .collect();
        KeptKeys { keys, parents }
    }

    fn get(&self, i: usize) -> Key {
        let kept = self.keys[i];
        Key {
            id: join(kept.id),
            at: Instant {
                secs: kept.secs,
                nanos: kept.nanos,
            },
            parent: (kept.parent != NONE).then(|| self.parents[kept.parent as usize]),
        }
    }
}

fn split(id: u128) -> [u64; 2] {
    [(id >> 64) as u64, id as u64]
}

fn join([hi, lo]: [u64; 2]) -> u128 {
    (u128::from(hi) << 64) | u128::from(lo)
}

/// The version a load replaces, as the load's builders share it.
pub struct Previous {
    dataset: Arc<Dataset>,
    /// Old record index by the low 64 bits of its digest, per collection,
    /// made on the first miss; a hit is checked against the whole digest.
    /// Half the size of a map by the whole digest (16 bytes an entry, not
    /// 32), and built next to both versions at the peak of a reload. Two
    /// old records sharing those bits keep one entry: the other is not
    /// taken over, only built again.
    by_digest: [OnceLock<FxHashMap<u64, u32>>; Collection::COUNT],
    /// New records not found among the old ones, so far.
    missed: AtomicUsize,
    /// Once this many are missed, most of the old records are replaced:
    /// the old version's fragments are let go ([`Previous::missed`]).
    most: usize,
}

impl Previous {
    /// `dataset`'s records, for a load of its workspace's next version;
    /// `None` if it kept nothing to reuse.
    pub fn of(dataset: Arc<Dataset>) -> Option<Arc<Previous>> {
        let kept = dataset.parts.reusable.as_ref()?;
        let most = kept.digests.iter().map(Vec::len).sum::<usize>() / 2 + 1;
        Some(Arc::new(Previous {
            dataset,
            by_digest: Default::default(),
            missed: AtomicUsize::new(0),
            most,
        }))
    }

    /// Counts a new record that is not an old one. Once most of the old
    /// records are replaced, the old version's gzip fragments are let go
    /// while it still serves (its gzip answers compressed per request
    /// until the new version serves): they would otherwise sit next to the
    /// new version's records at the peak of the reload, and copy few
    /// fragments into the new version's. Measured on `medium` with every
    /// record changed: a peak of 3.2 times the JSON with them, 2.7 without
    /// (BENCHMARKS.md, "Small changes"). If the load fails, the loader has
    /// the fragments the old version let go made again
    /// ([`Dataset::warm_again`]).
    fn missed(&self) {
        if self.missed.fetch_add(1, Ordering::Relaxed) + 1 == self.most {
            self.dataset.let_go_of_fragments();
        }
    }

    fn kept(&self) -> &Reusable {
        self.dataset
            .parts
            .reusable
            .as_ref()
            .expect("checked by Previous::of")
    }

    /// Whether a record of `collection` at `index` with bytes of `digest`
    /// will be taken over ([`Builder::reuse`] says the same): the loader's
    /// reading thread asks, so as not to hand such a record's bytes to a
    /// worker.
    pub fn has(&self, collection: Collection, index: usize, digest: BytesDigest) -> bool {
        self.find(collection, index, digest).is_some()
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
            map.extend(
                digests
                    .iter()
                    .enumerate()
                    .map(|(i, &d)| (d as u64, i as u32)),
            );
            map
        });
        let i = *map.get(&(digest as u64))? as usize;
        (digests[i] == digest).then_some(i)
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
            previous.missed();
            return false;
        };
        let kept = previous.kept();
        let c = collection.index();
        let part = &mut self.parts[c];
        part.rendered
            .push_from(previous.dataset.records(collection), i);
        part.keys.push(kept.keys[c].get(i));
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
                let priority = texts.remap(from_number(kept.company_priorities[i]));
                self.company_priorities.push(priority);
            }
            Collection::Tasks => {
                let [status, priority] = kept.task_fields[i].map(from_number);
                let fields = (texts.remap(status), texts.remap(priority));
                self.task_fields.push(fields);
            }
            Collection::Feed => {
                let kind = texts.remap(from_number(kept.feed_types[i]));
                self.feed_types.push(kind);
            }
            Collection::Metrics => {
                let name = texts.remap(from_number(kept.metric_names[i]));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_kept_compact_come_back_whole() {
        let at = |secs, nanos| Instant { secs, nanos };
        let keys = [
            Key {
                id: u128::MAX,
                at: at(-62_135_596_800, 999_999_999),
                parent: Some(7),
            },
            Key {
                id: 0,
                at: at(1_764_000_000, 0),
                parent: None,
            },
            Key {
                id: 1 << 64,
                at: at(0, 1),
                parent: Some(u128::MAX - 1),
            },
            Key {
                id: (1 << 64) - 1,
                at: at(253_402_300_799, 5),
                parent: Some(7),
            },
        ];
        let kept = KeptKeys::keep(&keys);
        assert_eq!(kept.parents, [7, u128::MAX - 1], "each parent once");
        let back: Vec<Key> = (0..keys.len()).map(|i| kept.get(i)).collect();
        assert_eq!(back, keys);
        assert_eq!(size_of::<KeptKey>(), 32);
    }
}
