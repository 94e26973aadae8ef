//! The building blocks of indexes: interned values, list orders, groups.
//! Each is a pure function of keys and values, tested on its own.

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
}

/// Id → record index; `Err((index, first))` names the first repeat.
pub(super) fn index_ids(keys: &[Key]) -> Result<IdMap<u32>, (usize, usize)> {
    let mut map = IdMap::with_capacity_and_hasher(keys.len(), Default::default());
    for (i, key) in keys.iter().enumerate() {
        if let Some(first) = map.insert(key.id, i as u32) {
            return Err((i, first as usize));
        }
    }
    Ok(map)
}

/// Indices ordered newest first by the key's instant, ties by id descending.
pub(super) fn newest_first(keys: &[Key]) -> Positions {
    let mut order: Positions = (0..keys.len() as u32).collect();
    order.sort_unstable_by(|&a, &b| {
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
    for &i in order {
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
    for &i in order {
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
    for &i in order {
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
