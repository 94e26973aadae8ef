//! [`Packed::rebuild`]: a new version of a collection packed from the
//! previous version's packing, compressing only what changed.
//!
//! A fragment depends only on the code, its record's bytes and, for a
//! chained one, the bytes of the `depth` records before it in its chain
//! (its dictionary). So with the old code kept (every symbol has a code in
//! it, so any record can still be written), a record whose bytes did not
//! change keeps its solo fragment, and a chain position keeps its fragment
//! when its record and its dictionary are the old ones, in the same order:
//! each is copied as a bit range, and only the rest is compressed. A
//! record inserted into a chain costs its own fragments and those of the
//! `depth` positions after it in each rung. What is rebuilt in full is
//! what is indexed by position (the chain tables and the bit offsets):
//! a pass over the records without compressing.

use crate::crc;
use crate::pack::{IndexedRecords, NOT_CHAINED, Packed, Packing, pack};
use crate::pass::Reuse;
use crate::placement::Placement;
use crate::train::{Recorded, Trained};

impl Packed {
    /// The `previous` entry of a record that is new or whose bytes
    /// changed (see [`Packed::rebuild`]).
    pub const CHANGED: u32 = u32::MAX;

    /// The packing of `records` that [`Packed::build`] would make, but
    /// with `old`'s Huffman code, copying from `old` every fragment that
    /// would come out the same and compressing only the others.
    ///
    /// `previous[i]` is the index in `old` of new record `i` when its
    /// bytes are unchanged (the caller vouches for them: a fragment is
    /// copied on its word), or [`Packed::CHANGED`] when it is new or changed. The
    /// solo fragment of every kept record is copied; in each rung of each
    /// chain, the fragment at a position is copied when its record and the
    /// `depth` records before it (fewer at the chain's start) are kept
    /// records that were, in the same order, the records before it in
    /// `old`'s chain. Everything else is compressed with `old`'s code, on
    /// up to `threads` threads, and the per-position tables (positions,
    /// prefix CRCs and lengths, bit offsets) are made again in one pass
    /// that compresses nothing. [`Packed::compressed`] says how many
    /// fragments were compressed.
    ///
    /// Falls back to [`Packed::build`] (a new code, trained on the new
    /// records, and everything compressed) when `packing` is not the shape
    /// `old` was made with (another number of chains, other depths, trim,
    /// solo fragments or how they end, [`Packing::openable`]), when
    /// `previous` does not have one entry per record, or when over half
    /// the records changed: then a code that fits the new records pays
    /// for compressing them all, and a code is not kept for ever through a
    /// series of large changes.
    ///
    /// Like [`Packed::build`], it gives up (`None`) as soon as `keep_going`
    /// says so, and shows its large buffers to `placement`.
    pub fn rebuild(
        old: &Packed,
        records: &(impl IndexedRecords + Sync),
        previous: &[u32],
        packing: &Packing<'_>,
        threads: usize,
        placement: &impl Placement,
        keep_going: &(dyn Fn() -> bool + Sync),
    ) -> Option<Packed> {
        let n = records.count();
        let changed = previous.iter().filter(|&&o| o == Packed::CHANGED).count();
        if !old.same_shape(packing) || previous.len() != n || changed * 2 > n {
            return Packed::build(records, packing, threads, placement, keep_going);
        }
        #[cfg(debug_assertions)]
        old.check_kept(records, previous);
        let reuse = FromOld::new(old, previous, packing.chains);
        // Nothing recorded: the old code is not trained on these records.
        let trained = Trained {
            code: old.code.clone(),
            recorded: Recorded::default(),
        };
        pack(
            records, packing, trained, &reuse, threads, placement, keep_going,
        )
    }

    /// Whether `packing` asks for what this packing was made with.
    fn same_shape(&self, packing: &Packing<'_>) -> bool {
        self.trim() == packing.trim
            && self.has_solo() == packing.solo
            && self.is_openable() == (packing.openable && packing.solo)
            && self.chains.len() == packing.chains.len()
            && self.chains.iter().all(|chain| {
                let depths = chain.rungs.iter().map(|rung| rung.depth);
                depths.eq(packing.depths.iter().copied())
            })
    }

    /// Where the old CRCs are at hand (solo fragments), that the records
    /// `previous` keeps are what they were: a test of the caller's word,
    /// in debug builds.
    #[cfg(debug_assertions)]
    fn check_kept(&self, records: &impl IndexedRecords, previous: &[u32]) {
        for (i, &o) in previous.iter().enumerate() {
            let Some((.., crc, _)) = self.solo(o as usize) else {
                continue;
            };
            let bytes = crate::pack::trimmed(records.record(i), self.trim());
            debug_assert_eq!(crc::of(bytes), crc, "record {i} is not old record {o}");
        }
    }
}

/// The fragments of a previous version that a rebuild copies.
struct FromOld<'a> {
    old: &'a Packed,
    previous: &'a [u32],
    /// By chain, by new position: the old position of the record there,
    /// if it is kept and was in the old chain, or [`NOT_CHAINED`].
    was_at: Vec<Vec<u32>>,
}

impl<'a> FromOld<'a> {
    fn new(old: &'a Packed, previous: &'a [u32], chains: &[&[u32]]) -> FromOld<'a> {
        let was_at = chains
            .iter()
            .zip(&old.chains)
            .map(|(order, chain)| {
                let old_position = |i: u32| {
                    let o = *previous.get(i as usize)?;
                    chain.pos.get(o as usize).copied()
                };
                let at = |&i: &u32| old_position(i).unwrap_or(NOT_CHAINED);
                order.iter().map(at).collect()
            })
            .collect();
        FromOld {
            old,
            previous,
            was_at,
        }
    }
}

impl Reuse for FromOld<'_> {
    fn solo(&self, i: usize) -> Option<(&[u8], u64, u64, u32, u32)> {
        match self.previous[i] {
            Packed::CHANGED => None,
            o => self.old.solo(o as usize),
        }
    }

    fn chained(&self, c: usize, r: usize, k: usize) -> Option<(&[u8], u64, u64)> {
        let was_at = &self.was_at[c];
        let p = was_at[k];
        if p == NOT_CHAINED {
            return None;
        }
        let p = p as usize;
        let depth = self.old.chains[c].rungs[r].depth;
        // The same number of predecessors (only the chain's first few have
        // fewer than `depth`), each where it was.
        let before = depth.min(k);
        let same = depth.min(p) == before && (1..=before).all(|j| was_at[k - j] as usize == p - j);
        same.then(|| self.old.chained(c, r, p, p + 1))
    }

    fn was_at(&self, c: usize, k: usize) -> Option<(usize, u32)> {
        let p = self.was_at[c][k];
        (p != NOT_CHAINED).then(|| (p as usize, self.old.prefix_crc(c, p as usize)))
    }

    /// From the old solo piece, or from the old prefix CRCs of a chain the
    /// record was in: the chain's text up to it is the text up to the one
    /// before it, a comma and the record, so (CRCs being linear)
    /// `prefix[p] = prefix[p-1]·x^8(len+1) + crc(",")·x^8len + crc`.
    fn crc(&self, i: usize, len: usize) -> Option<(u32, u32)> {
        let o = match self.previous[i] {
            Packed::CHANGED => return None,
            o => o as usize,
        };
        if let Some((.., crc, shift)) = self.old.solo(o) {
            return Some((crc, shift));
        }
        let (c, p) = self.old.chains.iter().enumerate().find_map(|(c, chain)| {
            let p = *chain.pos.get(o)?;
            (p != NOT_CHAINED).then_some((c, p as usize))
        })?;
        let shift = crc::shift_for(len as u64);
        let mut record = self.old.prefix_crc(c, p);
        if p > 0 {
            let before = self.old.prefix_crc(c, p - 1);
            record ^= crc::multiply_fast(crc::shift_for(len as u64 + 1), before);
            record ^= crc::multiply_fast(shift, crc::update(0, b","));
        }
        Some((record, shift))
    }
}

#[cfg(test)]
mod tests;
