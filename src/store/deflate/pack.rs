//! [`Packed`]: a collection's records compressed once, at load, into
//! fragments that a page strings together.
//!
//! Every record has a *solo* fragment, which refers to nothing before it,
//! and, when the collection has a chain order (the order of its main
//! list), a *chained* fragment in that order: a comma and the record,
//! compressed with its predecessor in the chain (and the comma) as the
//! dictionary. A page whose records follow the chain order is one solo
//! fragment and one run of chained fragments copied in a piece; any other
//! page (filtered, per company) uses solo fragments, and chained ones
//! wherever two neighbours on the page are neighbours in the chain.
//!
//! All fragments of a collection use one Huffman code, made from a sample
//! of its records, so that a page needs one block header per collection
//! it shows, not one per record.

use super::bits::{BitWriter, PADDING};
use super::crc;
use super::huffman::{Code, DISTANCES, END, LITERALS, distance_symbol, length_symbol};
use super::lz77::{Matcher, Symbol};

/// Records whose symbols make a collection's code.
const SAMPLE: usize = 4096;
/// Records compressed between two questions whether to go on.
const CHECK_EVERY: usize = 4096;

/// Where a record's pieces are, and what it contributes to a page's CRC.
#[derive(Clone, Copy, Default)]
struct Piece {
    /// First bit of the record's solo fragment (the next record's is its end).
    solo: u64,
    /// CRC-32 of the record's bytes.
    crc: u32,
    /// x^(8·len) modulo the CRC polynomial, for combining.
    shift: u32,
}

/// One collection's precompressed records (see the module docs).
pub struct Packed {
    pub(super) code: Code,
    /// By record index, plus one past the last.
    pieces: Vec<Piece>,
    solo: Vec<u8>,
    /// Bit ranges of chained fragments by chain position, plus one past the
    /// last. The fragment at position 0 is empty (it has no predecessor).
    chain_at: Vec<u64>,
    chain: Vec<u8>,
    /// Record index → chain position, or [`NOT_CHAINED`].
    chain_pos: Vec<u32>,
    /// Bytes cut off each record's end before compressing.
    trim: usize,
}

const NOT_CHAINED: u32 = u32::MAX;

/// A record's bytes, as [`Packed::build`] gets them.
pub trait Source {
    fn count(&self) -> usize;
    fn record(&self, i: usize) -> &[u8];
}

impl Packed {
    /// Compresses every record of `records`, chained in `chain` order (any
    /// subset of the records, each at most once), less `trim` bytes at the
    /// end of each (a meeting's closing brace, where `notes` goes in).
    /// Gives up (`None`) as soon as `keep_going` says so; it is asked every
    /// few thousand records.
    pub fn build(
        records: &impl Source,
        chain: &[u32],
        trim: usize,
        keep_going: &dyn Fn() -> bool,
    ) -> Option<Packed> {
        let n = records.count();
        let record = |i: usize| {
            let r = records.record(i);
            &r[..r.len() - trim.min(r.len())]
        };
        let mut matcher = Matcher::default();
        let mut symbols = Vec::new();
        let mut scratch = Vec::new();
        let code = train(&record, n, chain, &mut matcher, &mut symbols, &mut scratch);
        if std::env::var_os("PACK_DEBUG").is_some() {
            eprintln!("code header {} bytes, {} records", code.header_bits / 8, n);
        }

        let plain: usize = (0..n).map(|i| record(i).len()).sum();
        let mut pieces = Vec::with_capacity(n + 1);
        let mut solo = BitWriter::new(Vec::with_capacity(plain / 2));
        for i in 0..n {
            if i % CHECK_EVERY == 0 && !keep_going() {
                return None;
            }
            let bytes = record(i);
            let mut crc = flate2::Crc::new();
            crc.update(bytes);
            pieces.push(Piece {
                solo: solo.bit_len(),
                crc: crc.sum(),
                shift: crc::shift_for(bytes.len() as u64),
            });
            matcher.parse(bytes, 0, &mut symbols);
            encode(&code, &symbols, &mut solo);
        }
        pieces.push(Piece {
            solo: solo.bit_len(),
            ..Piece::default()
        });

        let mut chain_pos = vec![NOT_CHAINED; n];
        let mut chain_at = Vec::with_capacity(chain.len() + 1);
        let mut chained = BitWriter::new(Vec::with_capacity(plain / 3));
        for (k, &i) in chain.iter().enumerate() {
            if k % CHECK_EVERY == 0 && !keep_going() {
                return None;
            }
            chain_pos[i as usize] = k as u32;
            chain_at.push(chained.bit_len());
            if k == 0 {
                continue;
            }
            let start = with_predecessor(
                &mut scratch,
                record(chain[k - 1] as usize),
                record(i as usize),
            );
            matcher.parse(&scratch, start, &mut symbols);
            code.put_literal(&mut chained, b',');
            encode(&code, &symbols, &mut chained);
        }
        chain_at.push(chained.bit_len());

        let finish = |w: BitWriter| {
            let mut bytes = w.finish();
            bytes.extend_from_slice(&[0; PADDING]);
            bytes.shrink_to_fit();
            bytes
        };
        Some(Packed {
            code,
            pieces,
            solo: finish(solo),
            chain_at,
            chain: finish(chained),
            chain_pos,
            trim,
        })
    }

    /// Bytes held, for the memory report.
    pub fn heap_bytes(&self) -> usize {
        self.pieces.len() * size_of::<Piece>()
            + self.solo.len()
            + self.chain_at.len() * 8
            + self.chain.len()
            + self.chain_pos.len() * 4
            + self.code.header.len()
    }

    /// Bytes cut off each record's end before compressing.
    pub fn trim(&self) -> usize {
        self.trim
    }

    /// Record `i`'s solo fragment (bit range of `solo`), CRC and shift.
    #[inline]
    pub(super) fn solo(&self, i: usize) -> (&[u8], u64, u64, u32, u32) {
        let (p, next) = (self.pieces[i], self.pieces[i + 1].solo);
        (&self.solo, p.solo, next, p.crc, p.shift)
    }

    /// The chain position of record `i`, if it is chained.
    #[inline]
    pub(super) fn chain_pos(&self, i: usize) -> Option<usize> {
        let k = self.chain_pos[i];
        (k != NOT_CHAINED).then_some(k as usize)
    }

    /// The chained fragments of positions `from..to` (`from` ≥ 1), as one
    /// bit range.
    #[inline]
    pub(super) fn chained(&self, from: usize, to: usize) -> (&[u8], u64, u64) {
        (&self.chain, self.chain_at[from], self.chain_at[to])
    }

    /// Record `i`'s CRC and shift.
    #[inline]
    pub(super) fn crc(&self, i: usize) -> (u32, u32) {
        let p = self.pieces[i];
        (p.crc, p.shift)
    }
}

/// `dict ++ "," ++ record` in `scratch`; returns where the record starts.
fn with_predecessor(scratch: &mut Vec<u8>, dict: &[u8], record: &[u8]) -> usize {
    scratch.clear();
    scratch.extend_from_slice(dict);
    scratch.push(b',');
    scratch.extend_from_slice(record);
    dict.len() + 1
}

/// A code from the symbols of up to [`SAMPLE`] records spread over the
/// chain order (or the record order), solo and chained.
fn train<'r>(
    record: &impl Fn(usize) -> &'r [u8],
    n: usize,
    chain: &[u32],
    matcher: &mut Matcher,
    symbols: &mut Vec<Symbol>,
    scratch: &mut Vec<u8>,
) -> Code {
    let mut literal = [0u32; LITERALS];
    let mut distance = [0u32; DISTANCES];
    let mut count = |symbols: &[Symbol], comma: bool| {
        literal[b',' as usize] += u32::from(comma);
        for s in symbols {
            match *s {
                Symbol::Literal(b) => literal[b as usize] += 1,
                Symbol::Match { len, dist } => {
                    literal[length_symbol(u32::from(len)).0] += 1;
                    distance[distance_symbol(u32::from(dist)).0] += 1;
                }
            }
        }
    };
    // The sample: records spread over the chain order, or the record order.
    let (len, at) = if chain.is_empty() {
        (n, None)
    } else {
        (chain.len(), Some(chain))
    };
    let index = |k: usize| at.map_or(k, |chain| chain[k] as usize);
    let step = len.div_ceil(SAMPLE).max(1);
    for k in (0..len).step_by(step) {
        let i = index(k);
        matcher.parse(record(i), 0, symbols);
        count(symbols, false);
        if at.is_some() && k > 0 {
            let start = with_predecessor(scratch, record(index(k - 1)), record(i));
            matcher.parse(scratch, start, symbols);
            count(symbols, true);
        }
    }
    literal[END] += 1;
    Code::from_counts(&literal, &distance)
}

fn encode(code: &Code, symbols: &[Symbol], out: &mut BitWriter) {
    for s in symbols {
        match *s {
            Symbol::Literal(b) => code.put_literal(out, b),
            Symbol::Match { len, dist } => code.put_match(out, u32::from(len), u32::from(dist)),
        }
    }
}
