//! A collection's Huffman code, made from the symbols of a sample of its
//! records: solo ones spread over the record order (if the collection has
//! solo fragments), and chained ones (each with its predecessor as the
//! dictionary) spread over each chain order, as [`crate::Packed::build`]
//! will compress them.

use crate::huffman::{Code, DISTANCES, END, LITERALS, distance_symbol, length_symbol};
use crate::lz77::{Matcher, Symbols};
use crate::pass::with_predecessors;

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
/// there are.
pub(crate) fn train<'r>(
    record: &(impl Fn(usize) -> &'r [u8] + Sync),
    n: usize,
    chains: &[&[u32]],
    solo: bool,
    threads: usize,
) -> Code {
    let bytes = (0..n).map(|i| record(i).len()).sum::<usize>().max(1);
    let records = (SAMPLE_BYTES as u128 * n as u128 / bytes as u128) as usize;
    let records = records.clamp(1, SAMPLE);
    // Each record parsed: its chain order and position there, or none
    // and its index for a solo one.
    // Solo records only where they become fragments (or nothing else
    // would be sampled): a collection without solo fragments has a page's
    // first record written as literals, and a code fitted to its chained
    // fragments alone makes them 1% smaller (medium-like tasks and feed).
    let mut sample: Vec<(Option<&[u32]>, usize)> = match solo || chains.is_empty() {
        true => (0..n)
            .step_by(n.div_ceil(records).max(1))
            .map(|i| (None, i))
            .collect(),
        false => Vec::new(),
    };
    for order in chains {
        let step = order.len().div_ceil(records).max(1);
        sample.extend((1..order.len()).step_by(step).map(|k| (Some(*order), k)));
    }
    let count = |part: &[(Option<&[u32]>, usize)]| {
        let mut counts = Counts::default();
        let (mut matcher, scratch) = (Matcher::default(), &mut Vec::new());
        for &(order, k) in part {
            match order {
                None => {
                    matcher.parse(record(k), 0, &mut counts);
                }
                Some(order) => {
                    let before = std::iter::once(record(order[k - 1] as usize));
                    let start = with_predecessors(scratch, before, record(order[k] as usize));
                    matcher.parse(scratch, start, &mut counts);
                    counts.literal[b',' as usize] += 1;
                }
            }
        }
        counts
    };
    let count = &count;
    let mut parts = sample.chunks(sample.len().div_ceil(threads.max(1)).max(1));
    let first = parts.next().unwrap_or(&[]);
    let mut counts = std::thread::scope(|scope| {
        let others: Vec<_> = parts.map(|part| scope.spawn(move || count(part))).collect();
        let mut counts = count(first);
        for other in others {
            let other = other
                .join()
                .unwrap_or_else(|p| std::panic::resume_unwind(p));
            counts.merge(&other);
        }
        counts
    });
    counts.literal[END] += 1;
    Code::from_counts(&counts.literal, &counts.distance)
}

/// How often each literal/length and distance symbol came up.
struct Counts {
    literal: [u32; LITERALS],
    distance: [u32; DISTANCES],
}

impl Default for Counts {
    fn default() -> Self {
        Counts {
            literal: [0; LITERALS],
            distance: [0; DISTANCES],
        }
    }
}

impl Symbols for &mut Counts {
    fn literal(&mut self, b: u8) {
        self.literal[b as usize] += 1;
    }

    fn matched(&mut self, len: u16, dist: u16) {
        self.literal[length_symbol(u32::from(len)).0] += 1;
        self.distance[distance_symbol(u32::from(dist)).0] += 1;
    }
}

impl Counts {
    fn merge(&mut self, other: &Counts) {
        let pairs = self.literal.iter_mut().zip(&other.literal);
        pairs.for_each(|(a, b)| *a += b);
        let pairs = self.distance.iter_mut().zip(&other.distance);
        pairs.for_each(|(a, b)| *a += b);
    }
}
