//! Huffman codes for deflate's dynamic blocks (RFC 1951, 3.2.2 and 3.2.7):
//! length-limited code lengths from symbol counts, canonical codes, the
//! length and distance symbols, and the block header that describes a code.
//!
//! A collection's records share one [`Code`]: it is made once at load from
//! the symbols of a sample of its records, and every symbol gets a length,
//! so that any record (and any byte of a page's own text) can be written
//! with it.

use crate::bits::{BitSink, BitWriter};

/// Literal/length symbols: 256 bytes, end of block, 29 lengths.
pub const LITERALS: usize = 286;
/// Distance symbols.
pub const DISTANCES: usize = 30;
/// End of block.
pub const END: usize = 256;
const MAX_BITS: u8 = 15;

/// One symbol's code, bit-reversed (deflate sends codes most significant
/// bit first into a least-significant-first stream), and its length.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Bits {
    pub code: u16,
    pub len: u8,
}

/// A literal/length code and a distance code, with the dynamic block
/// header (`BTYPE` and the code description, not `BFINAL`) that tells a
/// decoder about them.
#[derive(Clone)]
pub struct Code {
    pub literal: [Bits; LITERALS],
    pub distance: [Bits; DISTANCES],
    /// By match length (3..=258), its length symbol's code and extra bits
    /// as one run of bits, and how many: a match's length costs a load,
    /// not [`length_symbol`]'s arithmetic (0..3 are unused).
    lengths: [(u32, u32); 259],
    /// The header as a bit stream, and its length in bits.
    pub header: Vec<u8>,
    pub header_bits: u64,
}

impl Code {
    /// The code that suits symbol counts `literal` and `distance`; every
    /// symbol gets a code, the unseen ones a long one.
    pub fn from_counts(literal: &[u32; LITERALS], distance: &[u32; DISTANCES]) -> Code {
        let smooth = |counts: &[u32]| counts.iter().map(|&c| c.saturating_add(1)).collect();
        let literal_lens: Vec<u32> = smooth(literal);
        let distance_lens: Vec<u32> = smooth(distance);
        let literal_lens = lengths(&literal_lens, MAX_BITS);
        let distance_lens = lengths(&distance_lens, MAX_BITS);
        let mut code = Code {
            literal: [Bits::default(); LITERALS],
            distance: [Bits::default(); DISTANCES],
            lengths: [(0, 0); 259],
            header: Vec::new(),
            header_bits: 0,
        };
        code.literal.copy_from_slice(&canonical(&literal_lens));
        code.distance.copy_from_slice(&canonical(&distance_lens));
        for len in 3..=258 {
            let (sym, extra, value) = length_symbol(len);
            let c = code.literal[sym];
            code.lengths[len as usize] = (
                u32::from(c.code) | (value << c.len),
                u32::from(c.len) + extra,
            );
        }
        let mut header = BitWriter::default();
        write_header(&mut header, &literal_lens, &distance_lens);
        code.header_bits = header.bit_len();
        code.header = header.finish();
        code.header.extend_from_slice(&[0; crate::bits::PADDING]);
        code
    }

    /// Writes literal byte `b`.
    #[inline]
    pub fn put_literal(&self, out: &mut impl BitSink, b: u8) {
        let c = self.literal[b as usize];
        out.put(u32::from(c.code), u32::from(c.len));
    }

    /// Writes a match: `len` (3..=258) bytes from `dist` (1..=32768) back.
    #[inline]
    pub fn put_match(&self, out: &mut impl BitSink, len: u32, dist: u32) {
        let (bits, n) = self.lengths[len as usize];
        out.put(bits, n);
        let (sym, extra, value) = distance_symbol(dist);
        let c = self.distance[sym];
        out.put(
            u32::from(c.code) | (value << c.len),
            u32::from(c.len) + extra,
        );
    }

    /// Writes the end-of-block symbol.
    pub fn put_end(&self, out: &mut BitWriter) {
        let c = self.literal[END];
        out.put(u32::from(c.code), u32::from(c.len));
    }
}

/// The length symbol of a match length (3..=258), its extra bits and their value.
#[inline]
pub fn length_symbol(len: u32) -> (usize, u32, u32) {
    debug_assert!((3..=258).contains(&len));
    if len <= 10 {
        return (254 + len as usize, 0, 0);
    }
    if len == 258 {
        return (285, 0, 0);
    }
    let l = len - 3;
    let top = 31 - l.leading_zeros(); // 3..=7
    let extra = top - 2;
    let sym = 257 + 4 * (top - 1) + ((l >> extra) & 3);
    (sym as usize, extra, l & ((1 << extra) - 1))
}

/// The distance symbol of a distance (1..=32768), its extra bits and their value.
#[inline]
pub fn distance_symbol(dist: u32) -> (usize, u32, u32) {
    debug_assert!((1..=32768).contains(&dist));
    if dist <= 4 {
        return (dist as usize - 1, 0, 0);
    }
    let d = dist - 1;
    let top = 31 - d.leading_zeros(); // 2..=14
    let extra = top - 1;
    let sym = 2 * top + ((d >> extra) & 1);
    (sym as usize, extra, d & ((1 << extra) - 1))
}

/// Code lengths (at most `max` bits) for symbols counted `counts` times;
/// 0 for symbols never seen. Huffman's construction, then lengths over
/// `max` are folded in as zlib's and miniz's encoders do it.
pub fn lengths(counts: &[u32], max: u8) -> Vec<u8> {
    let mut lens = vec![0u8; counts.len()];
    let mut symbols: Vec<(u32, usize)> = counts
        .iter()
        .enumerate()
        .filter(|&(_, &c)| c > 0)
        .map(|(s, &c)| (c, s))
        .collect();
    match symbols.len() {
        0 => return lens,
        1 => {
            lens[symbols[0].1] = 1;
            return lens;
        }
        _ => {}
    }
    symbols.sort_unstable();
    let n = symbols.len();
    // Leaves are 0..n in ascending weight; inner nodes n.. are made in
    // ascending weight too, so the two lightest are always at a queue head.
    let mut weight: Vec<u64> = symbols.iter().map(|&(c, _)| u64::from(c)).collect();
    let mut parent = vec![0usize; 2 * n - 1];
    let (mut leaf, mut inner) = (0, n);
    for node in n..2 * n - 1 {
        let mut lightest = || {
            if leaf < n && (inner >= node || weight[leaf] <= weight[inner]) {
                leaf += 1;
                leaf - 1
            } else {
                inner += 1;
                inner - 1
            }
        };
        let (a, b) = (lightest(), lightest());
        weight.push(weight[a] + weight[b]);
        parent[a] = node;
        parent[b] = node;
    }
    let mut depth = vec![0u32; 2 * n - 1];
    for i in (0..2 * n - 2).rev() {
        depth[i] = depth[parent[i]] + 1;
    }
    let max = max as usize;
    let mut per_len = vec![0u32; max + 1];
    for &d in &depth[..n] {
        per_len[(d as usize).min(max)] += 1;
    }
    // Kraft: the lengths fit when Σ 2^(max - len) is 2^max. Clamping made
    // it larger; each step takes one code off `max` and splits a shorter
    // one, which lowers the sum by one.
    let mut total: u64 = (1..=max).map(|l| u64::from(per_len[l]) << (max - l)).sum();
    while total > 1 << max {
        per_len[max] -= 1;
        if let Some(l) = (1..max).rev().find(|&l| per_len[l] > 0) {
            per_len[l] -= 1;
            per_len[l + 1] += 2;
        }
        total -= 1;
    }
    // The longest codes go to the rarest symbols.
    let mut rarest = symbols.iter();
    for len in (1..=max).rev() {
        for _ in 0..per_len[len] {
            if let Some(&(_, s)) = rarest.next() {
                lens[s] = len as u8;
            }
        }
    }
    lens
}

/// Canonical codes for `lens` (RFC 1951, 3.2.2), bit-reversed for sending.
pub fn canonical(lens: &[u8]) -> Vec<Bits> {
    let mut count = [0u16; 16];
    for &l in lens {
        count[l as usize] += 1;
    }
    count[0] = 0;
    let mut next = [0u16; 16];
    let mut code = 0u16;
    for bits in 1..16 {
        code = (code + count[bits - 1]) << 1;
        next[bits] = code;
    }
    lens.iter()
        .map(|&len| {
            if len == 0 {
                return Bits::default();
            }
            let c = next[len as usize];
            next[len as usize] += 1;
            Bits {
                code: c.reverse_bits() >> (16 - len),
                len,
            }
        })
        .collect()
}

/// The order in which a header lists the code-length code's lengths.
const CODE_LENGTH_ORDER: [usize; 19] = [
    16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15,
];

/// `BTYPE` = 2 (dynamic) and the description of the two codes.
fn write_header(out: &mut BitWriter, literal: &[u8], distance: &[u8]) {
    out.put(2, 2);
    let hlit = literal
        .iter()
        .rposition(|&l| l > 0)
        .map_or(257, |i| i + 1)
        .max(257);
    let hdist = distance.iter().rposition(|&l| l > 0).map_or(1, |i| i + 1);
    let mut all = literal[..hlit].to_vec();
    all.extend_from_slice(&distance[..hdist]);
    // Run-length code of the lengths: (symbol, extra bits, extra value).
    let mut runs: Vec<(usize, u32, u32)> = Vec::new();
    let mut i = 0;
    while i < all.len() {
        let len = all[i];
        let mut run = all[i..].iter().take_while(|&&l| l == len).count();
        i += run;
        if len == 0 {
            while run >= 11 {
                let r = run.min(138);
                runs.push((18, 7, (r - 11) as u32));
                run -= r;
            }
            if run >= 3 {
                runs.push((17, 3, (run - 3) as u32));
                run = 0;
            }
        } else {
            runs.push((len as usize, 0, 0));
            run -= 1;
            while run >= 3 {
                let r = run.min(6);
                runs.push((16, 2, (r - 3) as u32));
                run -= r;
            }
        }
        runs.extend(std::iter::repeat_n((len as usize, 0, 0), run));
    }
    let mut counts = [0u32; 19];
    for &(s, _, _) in &runs {
        counts[s] += 1;
    }
    // A code-length code with one symbol would be incomplete, which zlib
    // refuses; give it a second.
    if counts.iter().filter(|&&c| c > 0).count() < 2 {
        let other = if counts[0] == 0 { 0 } else { 1 };
        counts[other] += 1;
    }
    let cl_lens = lengths(&counts, 7);
    let cl_codes = canonical(&cl_lens);
    let hclen = CODE_LENGTH_ORDER
        .iter()
        .rposition(|&s| cl_lens[s] > 0)
        .map_or(4, |i| i + 1)
        .max(4);
    out.put((hlit - 257) as u32, 5);
    out.put((hdist - 1) as u32, 5);
    out.put((hclen - 4) as u32, 4);
    for &s in &CODE_LENGTH_ORDER[..hclen] {
        out.put(u32::from(cl_lens[s]), 3);
    }
    for (s, extra, value) in runs {
        let c = cl_codes[s];
        out.put(u32::from(c.code), u32::from(c.len));
        out.put(value, extra);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symbols_of_lengths_and_distances_match_the_rfc_tables() {
        for (len, expected) in [
            (3, (257, 0, 0)),
            (10, (264, 0, 0)),
            (11, (265, 1, 0)),
            (12, (265, 1, 1)),
            (13, (266, 1, 0)),
            (19, (269, 2, 0)),
            (34, (272, 2, 3)),
            (35, (273, 3, 0)),
            (227, (284, 5, 0)),
            (257, (284, 5, 30)),
            (258, (285, 0, 0)),
        ] {
            assert_eq!(length_symbol(len), expected, "length {len}");
        }
        for (dist, expected) in [
            (1, (0, 0, 0)),
            (4, (3, 0, 0)),
            (5, (4, 1, 0)),
            (6, (4, 1, 1)),
            (7, (5, 1, 0)),
            (9, (6, 2, 0)),
            (24577, (29, 13, 0)),
            (32768, (29, 13, 8191)),
        ] {
            assert_eq!(distance_symbol(dist), expected, "distance {dist}");
        }
    }

    #[test]
    fn lengths_are_limited_and_complete() {
        // Fibonacci counts make the deepest unrestricted tree.
        let mut counts = vec![1u32, 1];
        while counts.len() < 40 {
            let n = counts.len();
            counts.push(counts[n - 1] + counts[n - 2]);
        }
        let lens = lengths(&counts, 15);
        assert!(lens.iter().all(|&l| (1..=15).contains(&l)));
        let kraft: u64 = lens.iter().map(|&l| 1u64 << (15 - l)).sum();
        assert_eq!(kraft, 1 << 15, "{lens:?}");
        // The frequent get codes no longer than the rare.
        assert!(lens[39] <= lens[0]);
        assert_eq!(lengths(&[0, 5, 0], 7), vec![0, 1, 0]);
    }
}
