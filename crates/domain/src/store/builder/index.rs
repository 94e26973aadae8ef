//! The building blocks of indexes: interned values, list orders, groups.
//! Each is a pure function of keys and values, tested on its own.
//!
//! Their loops step aside every few thousand elements ([`breathe`]): on a
//! single core a reload shares the core with the requests, and these are
//! the long stretches of a load that the loader's own pacing cannot reach.

use std::cmp::Ordering;

use rustc_hash::FxHashMap;

use super::Key;
use crate::store::id::IdMap;
use crate::store::time::Instant;
use crate::store::{Positions, TextIndex};

/// Short texts (filter values, metric names) as small numbers while loading.
#[derive(Default)]
pub(super) struct Interner {
    ids: FxHashMap<Box<str>, u32>,
    texts: Vec<Box<str>>,
}

impl Interner {
    pub fn intern(&mut self, text: Option<&str>) -> Option<u32> {
        let text = text?;
        if let Some(&id) = self.ids.get(text) {
            return Some(id);
        }
        let id = self.texts.len() as u32;
        self.texts.push(text.into());
        self.ids.insert(text.into(), id);
        Some(id)
    }

    pub fn text(&self, id: u32) -> &str {
        &self.texts[id as usize]
    }

    /// The texts, by their numbers.
    pub fn into_texts(self) -> Vec<Box<str>> {
        self.texts
    }
}

/// Elements a loop handles between two chances for other threads to run.
const STRIDE: usize = 8192;

/// Lets another thread that is waiting for this core run, once every
/// [`STRIDE`] calls (`i` counts them): a request that arrives during a
/// reload on a single core then waits about a tenth of a millisecond, not a
/// scheduler slice of several. Costs a system call per stride, nothing
/// when no thread is waiting.
#[inline]
pub(super) fn breathe(i: usize) {
    if i % STRIDE == STRIDE - 1 {
        std::thread::yield_now();
    }
}

/// Sorts `v` by `cmp`, a total order (so the result is the one any sort
/// gives), in stretches that [`breathe`]: runs of [`STRIDE`] sorted on
/// their own, then merged pairwise.
pub(super) fn sort_by<T: Copy + Default>(v: &mut [T], cmp: impl Fn(&T, &T) -> Ordering) {
    if v.len() <= STRIDE {
        v.sort_unstable_by(cmp);
        return;
    }
    for run in v.chunks_mut(STRIDE) {
        run.sort_unstable_by(&cmp);
        std::thread::yield_now();
    }
    let mut src = v.to_vec();
    let mut dst = vec![T::default(); v.len()];
    let mut width = STRIDE;
    while width < v.len() {
        for (pair, out) in src.chunks(2 * width).zip(dst.chunks_mut(2 * width)) {
            let (a, b) = pair.split_at(width.min(pair.len()));
            merge(a, b, out, &cmp);
        }
        std::mem::swap(&mut src, &mut dst);
        width *= 2;
    }
    v.copy_from_slice(&src);
}

/// `a` and `b`, each sorted by `cmp`, merged into `out`.
fn merge<T: Copy>(a: &[T], b: &[T], out: &mut [T], cmp: &impl Fn(&T, &T) -> Ordering) {
    let (mut i, mut j) = (0, 0);
    for (k, slot) in out.iter_mut().enumerate() {
        let from_a = j == b.len() || (i < a.len() && cmp(&a[i], &b[j]) != Ordering::Greater);
        if from_a {
            *slot = a[i];
            i += 1;
        } else {
            *slot = b[j];
            j += 1;
        }
        breathe(k);
    }
}

/// Id → record index; `Err((index, first))` names the first repeat.
pub(super) fn index_ids(keys: &[Key]) -> Result<IdMap<u32>, (usize, usize)> {
    let mut map = IdMap::with_capacity_and_hasher(keys.len(), Default::default());
    for (i, key) in keys.iter().enumerate() {
        breathe(i);
        if let Some(first) = map.insert(key.id, i as u32) {
            return Err((i, first as usize));
        }
    }
    Ok(map)
}

/// Indices ordered newest first by the key's instant, ties by id descending.
/// Each index is sorted beside its instant to the millisecond, not looked
/// up through it: the keys of a large list are megabytes apart, and those
/// lookups made this sort a seventh of a reload that changed one record in
/// 200 MB. Only instants within the same millisecond look the keys up.
pub(super) fn newest_first(keys: &[Key]) -> Positions {
    let mut sorted: Vec<(u64, u32)> = keys
        .iter()
        .enumerate()
        .map(|(i, key)| (millis(key.at), i as u32))
        .collect();
    sort_by(&mut sorted, |&(ma, a), &(mb, b)| {
        mb.cmp(&ma).then_with(|| {
            let (a, b) = (&keys[a as usize], &keys[b as usize]);
            (b.at, b.id).cmp(&(a.at, a.id))
        })
    });
    sorted.into_iter().map(|(_, i)| i).collect()
}

/// `at` to the millisecond, as a number that orders as the instants do
/// (never the other way round: instants in the same millisecond, or
/// beyond the years 0 to 9999 that RFC 3339 writes, may share one).
fn millis(at: Instant) -> u64 {
    // Seconds from the start of year 0 (0000-01-01T00:00:00Z is
    // -62,167,219,200 s from 1970).
    const YEAR_0: i64 = 62_167_219_200;
    // Before year 0, all one (not with their milliseconds added: that
    // would put some after year 0's first).
    let Ok(secs) = u64::try_from(at.secs.saturating_add(YEAR_0)) else {
        return 0;
    };
    secs.saturating_mul(1000)
        .saturating_add(u64::from(at.nanos / 1_000_000))
}

/// Record indices grouped by an interned text value (records where it is
/// `null` are in no group), each group in list order.
pub(super) fn group_by(
    order: &[u32],
    interner: &Interner,
    value: impl Fn(usize) -> Option<u32>,
) -> TextIndex {
    let mut groups: FxHashMap<u32, Positions> = FxHashMap::default();
    for (n, &i) in order.iter().enumerate() {
        breathe(n);
        if let Some(v) = value(i as usize) {
            groups.entry(v).or_default().push(i);
        }
    }
    groups
        .into_iter()
        .map(|(v, mut group)| {
            group.shrink_to_fit();
            (interner.text(v).into(), group)
        })
        .collect()
}

/// Record indices grouped by two values at once (status, then priority).
pub(super) fn group_by_pair(
    order: &[u32],
    interner: &Interner,
    values: impl Fn(usize) -> (Option<u32>, Option<u32>),
) -> FxHashMap<Box<str>, TextIndex> {
    let mut groups: FxHashMap<u32, FxHashMap<u32, Positions>> = FxHashMap::default();
    for (n, &i) in order.iter().enumerate() {
        breathe(n);
        if let (Some(a), Some(b)) = values(i as usize) {
            groups.entry(a).or_default().entry(b).or_default().push(i);
        }
    }
    groups
        .into_iter()
        .map(|(a, inner)| {
            let inner = inner
                .into_iter()
                .map(|(b, group)| (interner.text(b).into(), group))
                .collect();
            (interner.text(a).into(), inner)
        })
        .collect()
}

/// Record indices grouped by the record they point at, in list order.
pub(super) fn group_by_parent(order: &[u32], keys: &[Key]) -> IdMap<Positions> {
    let mut groups: IdMap<Positions> = IdMap::default();
    for (n, &i) in order.iter().enumerate() {
        breathe(n);
        if let Some(parent) = keys[i as usize].parent {
            groups.entry(parent).or_default().push(i);
        }
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::time::Instant;

    fn key(id: u128, secs: i64, parent: Option<u128>) -> Key {
        Key {
            id,
            at: Instant { secs, nanos: 0 },
            parent,
        }
    }

    #[test]
    fn sort_by_sorts_in_runs_and_merges_like_any_sort() {
        // Lengths around the stride and its multiples, in a scrambled order.
        for len in [
            0,
            1,
            5,
            STRIDE - 1,
            STRIDE,
            STRIDE + 1,
            3 * STRIDE + 17,
            8 * STRIDE,
        ] {
            let mut v: Vec<u32> = (0..len as u32)
                .map(|i| i.wrapping_mul(2_654_435_761) % 1000)
                .collect();
            let mut expected = v.clone();
            expected.sort_unstable();
            sort_by(&mut v, |a, b| a.cmp(b));
            assert_eq!(v, expected, "length {len}");
        }
    }

    #[test]
    fn newest_first_breaks_ties_by_id_descending() {
        let keys = [key(1, 10, None), key(2, 20, None), key(3, 10, None)];
        assert_eq!(newest_first(&keys), vec![1, 2, 0]);
    }

    #[test]
    fn newest_first_is_a_sort_by_instant_and_id_whatever_the_millisecond() {
        // Instants the same to the nanosecond, within one millisecond,
        // before year 0 and past year 9999 (which share millisecond keys),
        // over more than a stride of records.
        let secs = [
            -70_000_000_000,
            -62_167_219_200,
            0,
            1_700_000_000,
            253_402_300_799,
            i64::MAX,
        ];
        let nanos = [0, 1, 999_999, 1_000_000, 999_999_999];
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = |n: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % n as u64) as usize
        };
        let keys: Vec<Key> = (0..3 * STRIDE + 17)
            .map(|_| Key {
                id: next(500) as u128,
                at: Instant {
                    secs: secs[next(secs.len())],
                    nanos: nanos[next(nanos.len())],
                },
                parent: None,
            })
            .collect();
        let mut expected: Vec<u32> = (0..keys.len() as u32).collect();
        expected.sort_by(|&a, &b| {
            let (a, b) = (&keys[a as usize], &keys[b as usize]);
            (b.at, b.id, a as *const Key).cmp(&(a.at, a.id, b as *const Key))
        });
        let got = newest_first(&keys);
        let by_key = |order: &[u32]| -> Vec<(Instant, u128)> {
            order
                .iter()
                .map(|&i| (keys[i as usize].at, keys[i as usize].id))
                .collect()
        };
        let (got, expected) = (by_key(&got), by_key(&expected));
        let first = got.iter().zip(&expected).position(|(g, e)| g != e);
        assert_eq!(
            first,
            None,
            "{:?}",
            first.map(|k| (&got[k..k + 3], &expected[k..k + 3]))
        );
        assert_eq!(got.len(), expected.len());
    }

    #[test]
    fn a_repeated_id_names_both_positions() {
        let keys = [key(1, 0, None), key(2, 0, None), key(1, 0, None)];
        assert_eq!(index_ids(&keys), Err((2, 0)));
        assert_eq!(index_ids(&keys[..2]).map(|m| m[&2]), Ok(1));
    }

    #[test]
    fn groups_keep_list_order_and_skip_nulls() {
        let mut interner = Interner::default();
        let values = [
            interner.intern(Some("a")),
            interner.intern(None),
            interner.intern(Some("b")),
            interner.intern(Some("a")),
        ];
        let groups = group_by(&[3, 2, 1, 0], &interner, |i| values[i]);
        assert_eq!(groups["a"], vec![3, 0]);
        assert_eq!(groups["b"], vec![2]);
        assert_eq!(groups.len(), 2);
        let keys = [key(1, 0, Some(9)), key(2, 0, None), key(3, 0, Some(9))];
        assert_eq!(group_by_parent(&[2, 1, 0], &keys)[&9], vec![2, 0]);
    }
}
