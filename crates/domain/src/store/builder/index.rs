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
pub(super) fn sort_by(v: &mut [u32], cmp: impl Fn(&u32, &u32) -> Ordering) {
    if v.len() <= STRIDE {
        v.sort_unstable_by(cmp);
        return;
    }
    for run in v.chunks_mut(STRIDE) {
        run.sort_unstable_by(&cmp);
        std::thread::yield_now();
    }
    let mut src = v.to_vec();
    let mut dst = vec![0; v.len()];
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
fn merge(a: &[u32], b: &[u32], out: &mut [u32], cmp: &impl Fn(&u32, &u32) -> Ordering) {
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
pub(super) fn newest_first(keys: &[Key]) -> Positions {
    let mut order: Positions = (0..keys.len() as u32).collect();
    sort_by(&mut order, |&a, &b| {
        let (a, b) = (&keys[a as usize], &keys[b as usize]);
        (b.at, b.id).cmp(&(a.at, a.id))
    });
    order
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
