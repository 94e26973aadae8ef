//! The work of a packing ([`crate::pack`]): stretches of records
//! compressed into chunks of fragments, on whichever thread is free, and
//! the chunks of a stream joined in order as they come.
//!
//! A stretch is about [`PIECE_BYTES`] of records, so that a collection of
//! a few large records (meeting notes, 17 KB each) is spread over the
//! threads as well as one of many small ones; its first record is parsed
//! afresh and the others on from their predecessor, which gives the same
//! fragments ([`Matcher::parse_next`]).
//!
//! A fragment that [`Reuse`] has (a previous version's, in a rebuild) is
//! copied instead of compressed.
//!
//! Where training parsed a whole stream ([`Recorded`]: the solo fragments,
//! or a chain's first rung, of a small collection), a record's symbols
//! are written as training found them, not parsed again: the same parse
//! of the same bytes, so the same fragment.

use std::collections::BTreeMap;
use std::ops::Range;

use crate::bits::{BitWriter, BurstWriter, PADDING};
use crate::crc;
use crate::huffman::Code;
use crate::lz77::{Matcher, Symbols, with_predecessors};
use crate::placement::Placement;
use crate::train::{Recorded, replay};

/// Records compressed between two questions whether to go on.
const CHECK_EVERY: usize = 4096;

/// About how many bytes of records one piece of work compresses: some
/// milliseconds, and a few dozen pieces for a large collection.
const PIECE_BYTES: usize = 1 << 20;

/// At most this many positions a piece (in tests, few and odd, so that
/// small collections are joined from many pieces).
const PIECE_POSITIONS: usize = if cfg!(test) { 37 } else { 1 << 16 };

/// `0..len` cut into stretches of about [`PIECE_BYTES`], position `k`
/// weighing `bytes(k)`.
pub(crate) fn pieces(len: usize, bytes: impl Fn(usize) -> usize) -> Vec<Range<usize>> {
    let mut pieces = Vec::new();
    let (mut from, mut weight) = (0, 0);
    for k in 0..len {
        weight += bytes(k) + 1;
        if weight >= PIECE_BYTES || k + 1 - from >= PIECE_POSITIONS {
            pieces.push(from..k + 1);
            (from, weight) = (k + 1, 0);
        }
    }
    if from < len || pieces.is_empty() {
        pieces.push(from..len);
    }
    pieces
}

/// The CRC-32 of a record and x^(8·len) (see [`crc::combine`]), where
/// known.
pub(crate) type RecordCrc = Option<(u32, u32)>;

/// Some consecutive positions of a stream (solo fragments by record, or a
/// rung of a chain by position), compressed.
pub(crate) struct Chunk {
    /// Where each position's fragment starts, from the chunk's first bit.
    at: Vec<u64>,
    /// The fragments, padded (see [`BitWriter::copy`]).
    bits: Vec<u8>,
    bit_len: u64,
    /// How many of its fragments were compressed, not copied.
    pub(crate) compressed: usize,
    /// By position, its record's CRC, where the pass was asked for them:
    /// every one for solo fragments; those of the records it compressed
    /// (and so read anyway) for a chain, whose tables need them.
    crcs: Vec<RecordCrc>,
}

/// A stream being put together from its chunks, in order, as they come.
pub(crate) struct Join {
    next: usize,
    waiting: BTreeMap<usize, Chunk>,
    at: Vec<u64>,
    bits: BitWriter,
    crcs: Vec<RecordCrc>,
}

/// A joined stream: where each position's fragment starts (and one past
/// the last; not placed), the fragments (padded and placed), and the CRCs.
pub(crate) struct Joined {
    pub(crate) at: Vec<u64>,
    pub(crate) bits: Vec<u8>,
    pub(crate) crcs: Vec<RecordCrc>,
}

impl Join {
    /// A stream of about `bytes`, its fragments' starts in `at` (room
    /// for one more than the positions).
    pub(crate) fn new(at: Vec<u64>, bytes: usize, placement: &impl Placement) -> Join {
        Join {
            next: 0,
            waiting: BTreeMap::new(),
            at,
            bits: BitWriter::new(reserved(bytes, placement)),
            crcs: Vec::new(),
        }
    }

    /// Chunk number `piece`, joined as soon as those before it are.
    pub(crate) fn add(&mut self, piece: usize, chunk: Chunk) {
        self.waiting.insert(piece, chunk);
        while let Some(chunk) = self.waiting.remove(&self.next) {
            let base = self.bits.bit_len();
            self.at.extend(chunk.at.iter().map(|a| a + base));
            self.bits.copy(&chunk.bits, 0, chunk.bit_len);
            self.crcs.extend_from_slice(&chunk.crcs);
            self.next += 1;
        }
    }

    pub(crate) fn finish(mut self, placement: &impl Placement) -> Joined {
        debug_assert!(self.waiting.is_empty());
        self.at.push(self.bits.bit_len());
        Joined {
            at: self.at,
            bits: padded(self.bits, placement),
            crcs: self.crcs,
        }
    }
}

/// What every pass of one packing shares.
pub(crate) struct Pass<'a, F, R> {
    /// Record `i`, trimmed.
    pub(crate) record: &'a F,
    pub(crate) code: &'a Code,
    pub(crate) reuse: &'a R,
    /// Symbols that training found, to be written instead of parsing
    /// (none when rebuilding).
    pub(crate) recorded: &'a Recorded,
    /// Whether solo fragments end with their record's last byte as a
    /// literal ([`crate::Packing::openable`]).
    pub(crate) openable: bool,
    pub(crate) keep_going: &'a (dyn Fn() -> bool + Sync),
}

/// Fragments that a packing copies instead of compressing them: a
/// previous version's, for the records (and predecessors) that did not
/// change ([`Packed::rebuild`](crate::Packed::rebuild)); none for `()`.
pub(crate) trait Reuse: Sync {
    /// Record `i`'s solo fragment (a bit range of a padded stream), CRC
    /// and shift, to be copied.
    fn solo(&self, i: usize) -> Option<(&[u8], u64, u64, u32, u32)>;

    /// The fragment at position `k` of rung `r` of chain `c` (a bit range
    /// of a padded stream), to be copied.
    fn chained(&self, c: usize, r: usize, k: usize) -> Option<(&[u8], u64, u64)>;

    /// The CRC and shift of record `i`, of `len` bytes, if known without
    /// reading it (for the chain tables where there are no solo pieces).
    fn crc(&self, i: usize, len: usize) -> Option<(u32, u32)>;

    /// Where the record at position `k` of chain `c` was in the previous
    /// version's chain, and the prefix CRC there.
    fn was_at(&self, c: usize, k: usize) -> Option<(usize, u32)>;
}

impl Reuse for () {
    #[inline]
    fn solo(&self, _: usize) -> Option<(&[u8], u64, u64, u32, u32)> {
        None
    }

    #[inline]
    fn chained(&self, _: usize, _: usize, _: usize) -> Option<(&[u8], u64, u64)> {
        None
    }

    #[inline]
    fn crc(&self, _: usize, _: usize) -> Option<(u32, u32)> {
        None
    }

    #[inline]
    fn was_at(&self, _: usize, _: usize) -> Option<(usize, u32)> {
        None
    }
}

impl<'r, F: Fn(usize) -> &'r [u8], R: Reuse> Pass<'_, F, R> {
    /// The solo fragments of records `range`, with their CRCs.
    pub(crate) fn solo(&self, range: Range<usize>, matcher: &mut Matcher) -> Option<Chunk> {
        let mut chunk = Writing::new(range.len());
        for i in range.clone() {
            if (i - range.start) % CHECK_EVERY == 0 && !(self.keep_going)() {
                return None;
            }
            chunk.at.push(chunk.bits.bit_len());
            if let Some((src, from, to, crc, shift)) = self.reuse.solo(i) {
                chunk.crcs.push(Some((crc, shift)));
                chunk.bits.copy(src, from, to);
                continue;
            }
            chunk.compressed += 1;
            let bytes = (self.record)(i);
            chunk.crcs.push(Some(record_crc(bytes)));
            let recorded = self.recorded.solo(i);
            // A literal is at most 15 bits, a match of 4 bytes or more 48
            // (and one cut short to end on a literal, 63 for its 4 bytes).
            chunk.bits.writer().burst((bytes.len() + 1) * 15, |w| {
                let out = Encoder { code: self.code, w };
                match self.openable {
                    true => {
                        solo(matcher, bytes, recorded, EndOnLiteral::new(out))
                            .finish(bytes)
                            .w
                    }
                    false => solo(matcher, bytes, recorded, out).w,
                }
            });
        }
        Some(chunk.finish())
    }

    /// The records at positions `range` of chain `order` (chain `c`,
    /// rung `r`), each compressed against the `depth` records before it
    /// there; with the CRCs of those it reads if `crcs`.
    pub(crate) fn rung(
        &self,
        order: &[u32],
        (c, r, depth): (usize, usize, usize),
        range: Range<usize>,
        crcs: bool,
        matcher: &mut Matcher,
    ) -> Option<Chunk> {
        let mut chunk = Writing::new(range.len());
        let mut scratch = Vec::new();
        // Whether the matcher's last call parsed the position before `k`.
        let mut parsed_before = false;
        for k in range.clone() {
            if (k - range.start) % CHECK_EVERY == 0 && !(self.keep_going)() {
                return None;
            }
            chunk.at.push(chunk.bits.bit_len());
            let parsed = std::mem::take(&mut parsed_before);
            let copied = match k {
                0 => Some(None),
                _ => self.reuse.chained(c, r, k).map(Some),
            };
            if let Some(copied) = copied {
                if let Some((src, from, to)) = copied {
                    chunk.bits.copy(src, from, to);
                }
                if crcs {
                    chunk.crcs.push(None);
                }
                continue;
            }
            chunk.compressed += 1;
            let bytes = (self.record)(order[k] as usize);
            if crcs {
                chunk.crcs.push(Some(record_crc(bytes)));
            }
            // Training's parse of a first-rung position is this one's
            // (with the matcher left as it was: `parsed_before` is false).
            let recorded = match depth {
                1 => self.recorded.chained(c, k),
                _ => None,
            };
            if let Some(symbols) = recorded {
                chunk.bits.writer().burst((bytes.len() + 1) * 15, |mut w| {
                    self.code.put_literal(&mut w, b',');
                    replay(symbols, Encoder { code: self.code, w }).w
                });
                continue;
            }
            let before = order[k.saturating_sub(depth)..k]
                .iter()
                .map(|&b| (self.record)(b as usize));
            let start = with_predecessors(&mut scratch, before, bytes);
            // The last call's buffer was this one's but for the record that
            // leaves the dictionary (none near the chain's start).
            let dropped = match k > depth {
                true => (self.record)(order[k - 1 - depth] as usize).len() + 1,
                false => 0,
            };
            chunk.bits.writer().burst((bytes.len() + 1) * 15, |mut w| {
                self.code.put_literal(&mut w, b',');
                let out = Encoder { code: self.code, w };
                let out = match parsed {
                    true => matcher.parse_next(&scratch, start, dropped, out),
                    false => matcher.parse(&scratch, start, out),
                };
                out.w
            });
            parsed_before = true;
        }
        Some(chunk.finish())
    }
}

/// The symbols of a solo fragment of `bytes`: as training found them if
/// it kept them, else parsed.
fn solo<S: Symbols>(matcher: &mut Matcher, bytes: &[u8], recorded: Option<&[u32]>, out: S) -> S {
    match recorded {
        Some(symbols) => replay(symbols, out),
        None => matcher.parse(bytes, 0, out),
    }
}

/// Symbols passed on one behind, so that the last, if a match, can be cut
/// a byte short and that byte written as a literal
/// ([`crate::Packing::openable`]).
struct EndOnLiteral<S> {
    out: S,
    held: Option<Held>,
}

#[derive(Clone, Copy)]
enum Held {
    Literal(u8),
    Match { len: u16, dist: u16 },
}

impl<S: Symbols> EndOnLiteral<S> {
    fn new(out: S) -> EndOnLiteral<S> {
        EndOnLiteral { out, held: None }
    }

    fn hold(&mut self, next: Held) {
        match self.held.replace(next) {
            Some(Held::Literal(b)) => self.out.literal(b),
            Some(Held::Match { len, dist }) => self.out.matched(len, dist),
            None => {}
        }
    }

    /// The last symbol of a parse of `bytes`, ending on a literal.
    fn finish(mut self, bytes: &[u8]) -> S {
        match self.held {
            Some(Held::Literal(b)) => self.out.literal(b),
            Some(Held::Match { len, dist }) => {
                // The match is of the record's last `len` bytes.
                let (len, end) = (usize::from(len), bytes.len());
                match len > 3 {
                    // Deflate's shortest match is 3.
                    true => self.out.matched(len as u16 - 1, dist),
                    false => bytes[end - len..end - 1]
                        .iter()
                        .for_each(|&b| self.out.literal(b)),
                }
                self.out.literal(bytes[end - 1]);
            }
            None => {}
        }
        self.out
    }
}

impl<S: Symbols> Symbols for EndOnLiteral<S> {
    #[inline(always)]
    fn literal(&mut self, b: u8) {
        self.hold(Held::Literal(b));
    }

    #[inline(always)]
    fn matched(&mut self, len: u16, dist: u16) {
        self.hold(Held::Match { len, dist });
    }
}

/// Symbols written as they are found, with a collection's code.
struct Encoder<'c, 'b> {
    code: &'c Code,
    w: BurstWriter<'b>,
}

impl Symbols for Encoder<'_, '_> {
    #[inline(always)]
    fn literal(&mut self, b: u8) {
        self.code.put_literal(&mut self.w, b);
    }

    #[inline(always)]
    fn matched(&mut self, len: u16, dist: u16) {
        self.code
            .put_match(&mut self.w, u32::from(len), u32::from(dist));
    }
}

/// A record's CRC and shift.
fn record_crc(bytes: &[u8]) -> (u32, u32) {
    (crc::of(bytes), crc::shift_for(bytes.len() as u64))
}

/// A [`Chunk`] being written.
struct Writing<'s> {
    at: Vec<u64>,
    bits: FragmentWriter<'s>,
    compressed: usize,
    crcs: Vec<RecordCrc>,
}

impl<'s> Writing<'s> {
    fn new(positions: usize) -> Writing<'s> {
        Writing {
            at: Vec::with_capacity(positions),
            bits: FragmentWriter::new(BitWriter::default()),
            compressed: 0,
            crcs: Vec::new(),
        }
    }

    fn finish(self) -> Chunk {
        let bits = self.bits.finish();
        let bit_len = bits.bit_len();
        let mut bits = bits.finish();
        bits.extend_from_slice(&[0; PADDING]);
        Chunk {
            at: self.at,
            bits,
            bit_len,
            compressed: self.compressed,
            crcs: self.crcs,
        }
    }
}

/// A stream of fragments being written, in which copied fragments wait
/// to go in one copy while each starts where the one before it ended in
/// the same stream (a previous version's fragments do, between changes).
struct FragmentWriter<'s> {
    bits: BitWriter,
    run: Option<(&'s [u8], u64, u64)>,
}

impl<'s> FragmentWriter<'s> {
    fn new(bits: BitWriter) -> FragmentWriter<'s> {
        FragmentWriter { bits, run: None }
    }

    /// Bits written so far, the waiting run included.
    fn bit_len(&self) -> u64 {
        self.bits.bit_len() + self.run.map_or(0, |(_, from, to)| to - from)
    }

    /// Copies bits `from..to` of `src` (see [`BitWriter::copy`]).
    fn copy(&mut self, src: &'s [u8], from: u64, to: u64) {
        if let Some((run, _, end)) = &mut self.run
            && std::ptr::eq(*run, src)
            && *end == from
        {
            *end = to;
            return;
        }
        self.flush();
        self.run = Some((src, from, to));
    }

    /// The writer, to write symbols after what was copied.
    fn writer(&mut self) -> &mut BitWriter {
        self.flush();
        &mut self.bits
    }

    fn flush(&mut self) {
        if let Some((src, from, to)) = self.run.take() {
            self.bits.copy(src, from, to);
        }
    }

    fn finish(mut self) -> BitWriter {
        self.flush();
        self.bits
    }
}

/// A stream of fragments, written: padded for [`BitWriter::copy`], and
/// placed.
pub(crate) fn padded(w: BitWriter, placement: &impl Placement) -> Vec<u8> {
    let mut bytes = w.finish();
    bytes.extend_from_slice(&[0; PADDING]);
    bytes.shrink_to_fit();
    placement.built(&bytes);
    bytes
}

/// An empty Vec with room for `n` items, shown to `placement`.
pub(crate) fn reserved<T>(n: usize, placement: &impl Placement) -> Vec<T> {
    let v = Vec::with_capacity(n);
    placement.reserved(&v);
    v
}
