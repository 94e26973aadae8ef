//! A collection's Huffman code, made from the symbols of a sample of its
//! records: solo ones spread over the record order (if the collection has
//! solo fragments), and chained ones (each with its predecessor as the
//! dictionary) spread over each chain order, as [`crate::Packed::build`]
//! will compress them.
//!
//! Where the sample is a whole stream (every record of a small collection
//! solo, or every position of a chain against its predecessor), its parse
//! is the one the packing would make again (solo fragments, a chain's
//! first rung): the symbols are kept ([`Recorded`]) and the packing
//! writes them instead of parsing the same bytes twice.

use crate::huffman::{Code, DISTANCES, END, LITERALS, distance_symbol, length_symbol};
use crate::lz77::{Matcher, Symbols, with_predecessors};

/// At most this many records of each kind (solo, and each chain) ...
const SAMPLE: usize = 4096;
/// ... and about this many of their bytes: a code from a megabyte of
/// records is as good as one from all of them (fragments of the `medium`
/// dataset's tasks and feed within 0.01%), and records of 1-17 KB (notes,
/// meeting notes) were otherwise parsed once for the code and once again
/// for their fragments.
const SAMPLE_BYTES: usize = 1 << 20;

/// The code for the records `record(0..n)`, chained in `chains`, with
/// solo fragments if `solo`. The sample is parsed on up to `threads`
/// threads and its counts summed, so the code is the same however many
/// there are. With the code, if `record_symbols`, the symbols of each
/// stream whose sample is the whole stream (see [`Recorded`]).
pub(crate) fn train<'r>(
    record: &(impl Fn(usize) -> &'r [u8] + Sync),
    n: usize,
    chains: &[&[u32]],
    solo: bool,
    threads: usize,
    record_symbols: bool,
) -> Trained {
    let plain = (0..n).map(|i| record(i).len()).sum::<usize>();
    let bytes = plain.max(1);
    let records = (SAMPLE_BYTES as u128 * n as u128 / bytes as u128) as usize;
    let records = records.clamp(1, SAMPLE);
    // A stream's symbols are kept when every record of it is sampled
    // (step 1), and its bytes are at most SAMPLE_BYTES: the clamp above
    // samples one record of any size, and a chain may hold a collection's
    // largest records, but what is kept is at most a word (4 bytes) per
    // byte of that much a stream.
    let whole = |step: usize| record_symbols && step == 1;
    // Each record parsed: its chain order and position there, or none
    // and its index for a solo one; and whether its symbols are kept.
    // The sample is in stream order: the solo records, then each chain's
    // positions from 1 on.
    // Solo records only where they become fragments (or nothing else
    // would be sampled): a collection without solo fragments has a page's
    // first record written as literals, and a code fitted to its chained
    // fragments alone makes them 1% smaller (medium-like tasks and feed).
    let mut sample: Vec<(Option<&[u32]>, usize, bool)> = Vec::new();
    let mut kept = Recorded {
        chains: vec![None; chains.len()],
        ..Recorded::default()
    };
    if solo || chains.is_empty() {
        let step = n.div_ceil(records).max(1);
        // Only where solo fragments are made of them.
        let keep = solo && whole(step) && plain <= SAMPLE_BYTES;
        if keep {
            kept.solo = Some(sample.len());
        }
        sample.extend((0..n).step_by(step).map(|i| (None, i, keep)));
    }
    for (c, order) in chains.iter().enumerate() {
        let step = order.len().div_ceil(records).max(1);
        let chained = || order.iter().skip(1).map(|&i| record(i as usize).len());
        let keep = whole(step) && chained().sum::<usize>() <= SAMPLE_BYTES;
        if keep {
            kept.chains[c] = Some(sample.len());
        }
        sample.extend(
            (1..order.len())
                .step_by(step)
                .map(|k| (Some(*order), k, keep)),
        );
    }
    let count = |part: &[(Option<&[u32]>, usize, bool)]| {
        let mut counts = SymbolCounts::default();
        let mut mine = PartSymbols {
            symbols: Vec::new(),
            ends: Vec::with_capacity(part.len()),
        };
        let (mut matcher, scratch) = (Matcher::default(), &mut Vec::new());
        for &(order, k, keep) in part {
            let (buf, start) = match order {
                None => (record(k), 0),
                Some(order) => {
                    let before = std::iter::once(record(order[k - 1] as usize));
                    let start = with_predecessors(scratch, before, record(order[k] as usize));
                    counts.literal[b',' as usize] += 1;
                    (&scratch[..], start)
                }
            };
            match keep {
                true => {
                    let out = Recording {
                        counts: &mut counts,
                        symbols: &mut mine.symbols,
                    };
                    matcher.parse(buf, start, out);
                }
                false => {
                    matcher.parse(buf, start, &mut counts);
                }
            }
            mine.ends.push(mine.symbols.len() as u32);
        }
        (counts, mine)
    };
    let count = &count;
    kept.per_part = sample.len().div_ceil(threads.max(1)).max(1);
    let mut parts = sample.chunks(kept.per_part);
    let first = parts.next().unwrap_or(&[]);
    let mut counts = std::thread::scope(|scope| {
        let others: Vec<_> = parts.map(|part| scope.spawn(move || count(part))).collect();
        let (mut counts, part) = count(first);
        // The parts' symbols in the sample's order, as its entries are.
        kept.parts.push(part);
        for other in others {
            let (other, part) = other
                .join()
                .unwrap_or_else(|p| std::panic::resume_unwind(p));
            counts.merge(&other);
            kept.parts.push(part);
        }
        counts
    });
    if kept.solo.is_none() && kept.chains.iter().all(Option::is_none) {
        kept = Recorded::default();
    }
    counts.literal[END] += 1;
    Trained {
        code: Code::from_counts(&counts.literal, &counts.distance),
        recorded: kept,
    }
}

/// A collection's code, and the symbols found making it.
pub(crate) struct Trained {
    pub(crate) code: Code,
    pub(crate) recorded: Recorded,
}

/// The symbols that [`train`] found in the streams it parsed whole: by
/// record for the solo fragments, by position (from 1) for a chain's
/// first rung. A symbol is a word: a literal byte as itself, a match as
/// `dist << 9 | len` (`dist` ≥ 1, so above any byte; `len` ≤ 258).
#[derive(Default)]
pub(crate) struct Recorded {
    /// The sample's parts, in its order, as the threads parsed them.
    parts: Vec<PartSymbols>,
    /// Entries of the sample a part (the last may have fewer).
    per_part: usize,
    /// The sample entry of record 0, if the solo stream is kept.
    solo: Option<usize>,
    /// By chain, the sample entry of position 1, if the chain is kept.
    chains: Vec<Option<usize>>,
}

/// The symbols kept from one part of the sample (one thread's), and where
/// each entry's end among them.
#[derive(Default)]
struct PartSymbols {
    symbols: Vec<u32>,
    ends: Vec<u32>,
}

impl Recorded {
    /// Record `i`'s symbols, if kept.
    pub(crate) fn solo(&self, i: usize) -> Option<&[u32]> {
        self.entry(self.solo? + i)
    }

    /// The symbols of chain `c` at position `k` (≥ 1), after the comma,
    /// its predecessor the dictionary, if kept.
    pub(crate) fn chained(&self, c: usize, k: usize) -> Option<&[u32]> {
        let first = (*self.chains.get(c)?)?;
        self.entry(first + k.checked_sub(1)?)
    }

    fn entry(&self, e: usize) -> Option<&[u32]> {
        let part = self.parts.get(e / self.per_part)?;
        let j = e % self.per_part;
        let from = match j {
            0 => 0,
            _ => *part.ends.get(j - 1)? as usize,
        };
        Some(&part.symbols[from..*part.ends.get(j)? as usize])
    }

    /// Words held, for tests of the memory it takes.
    #[cfg(test)]
    pub(crate) fn words(&self) -> usize {
        let part = |p: &PartSymbols| p.symbols.capacity() + p.ends.capacity();
        self.parts.iter().map(part).sum()
    }
}

/// Gives the symbols `symbols` to `out`, as a parse would.
#[inline(always)]
pub(crate) fn replay<S: Symbols>(symbols: &[u32], mut out: S) -> S {
    for &s in symbols {
        match s >> 9 {
            0 => out.literal(s as u8),
            dist => out.matched((s & 0x1ff) as u16, dist as u16),
        }
    }
    out
}

/// Symbols counted and kept.
struct Recording<'a> {
    counts: &'a mut SymbolCounts,
    symbols: &'a mut Vec<u32>,
}

impl Symbols for Recording<'_> {
    #[inline(always)]
    fn literal(&mut self, b: u8) {
        self.counts.literal[b as usize] += 1;
        self.symbols.push(u32::from(b));
    }

    #[inline(always)]
    fn matched(&mut self, len: u16, dist: u16) {
        (&mut *self.counts).matched(len, dist);
        self.symbols.push(u32::from(dist) << 9 | u32::from(len));
    }
}

/// How often each literal/length and distance symbol came up.
struct SymbolCounts {
    literal: [u32; LITERALS],
    distance: [u32; DISTANCES],
}

impl Default for SymbolCounts {
    fn default() -> Self {
        SymbolCounts {
            literal: [0; LITERALS],
            distance: [0; DISTANCES],
        }
    }
}

impl Symbols for &mut SymbolCounts {
    fn literal(&mut self, b: u8) {
        self.literal[b as usize] += 1;
    }

    fn matched(&mut self, len: u16, dist: u16) {
        self.literal[length_symbol(u32::from(len)).0] += 1;
        self.distance[distance_symbol(u32::from(dist)).0] += 1;
    }
}

impl SymbolCounts {
    fn merge(&mut self, other: &SymbolCounts) {
        let pairs = self.literal.iter_mut().zip(&other.literal);
        pairs.for_each(|(a, b)| *a += b);
        let pairs = self.distance.iter_mut().zip(&other.distance);
        pairs.for_each(|(a, b)| *a += b);
    }
}

#[cfg(test)]
mod tests;
