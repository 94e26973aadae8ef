//! [`Packed`]: a collection's records compressed once, at load, into
//! fragments that a page strings together.
//!
//! Every record has a *solo* fragment, which refers to nothing before it.
//! A collection also has one or more *chain orders*, the orders of the
//! lists it is served in most (the main list, a company's list, a filter's
//! list): in each, every record has a *chained* fragment, a comma and the
//! record compressed with its predecessor in that order (and the comma) as
//! the dictionary, so that it may refer back to it. On a page, a record
//! whose neighbour before it is its predecessor in some chain order is
//! written as that chained fragment; any other record (the first on a page,
//! a record whose neighbour is nobody's predecessor) as its solo fragment.
//! A page that follows a chain order is one solo fragment and one run of
//! chained fragments copied in a piece.
//!
//! All fragments of a collection use one Huffman code, made from a sample
//! of its records, so that a page needs one block header per collection
//! it shows, not one per record.

use std::ops::Range;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use crate::crc;
use crate::huffman::Code;
use crate::lz77::Matcher;
use crate::pass::{Join, Pass, Reuse, pieces, reserved};
use crate::placement::Placement;
use crate::train::{Trained, train};

/// Where a record's pieces are, and what it contributes to a page's CRC.
#[derive(Clone, Copy, Default, PartialEq, Debug)]
struct Piece {
    /// First bit of the record's solo fragment (the next record's is its end).
    solo: u64,
    /// CRC-32 of the record's bytes.
    crc: u32,
    /// x^(8·len) modulo the CRC polynomial, for combining.
    shift: u32,
}

/// The chained fragments of one chain order.
pub(crate) struct Chain {
    /// Record index → chain position, or [`NOT_CHAINED`].
    pub(crate) pos: Vec<u32>,
    /// By position, the CRC-32 of the chain's records up to that one,
    /// comma-separated: a run of chained records on a page costs one
    /// CRC multiplication, whatever its length.
    prefix: Vec<u32>,
    /// By position, the length of the same text: a run's length costs two
    /// reads, not one per record.
    ends: Vec<u64>,
    /// The fragments by how many predecessors they may refer to, fewest
    /// first (see [`Packed::build`]).
    pub(crate) rungs: Vec<Rung>,
}

/// Every record of a chain compressed against the `depth` records before
/// it in the chain (fewer at its start).
pub(crate) struct Rung {
    pub(crate) depth: usize,
    /// Bit ranges by chain position, plus one past the last. The fragment
    /// at position 0 is empty: it has no predecessor.
    at: Vec<u64>,
    bits: Vec<u8>,
}

pub(crate) const NOT_CHAINED: u32 = u32::MAX;

/// One collection's precompressed records (see the module docs).
pub struct Packed {
    pub(crate) code: Code,
    /// By record index, plus one past the last.
    pieces: Vec<Piece>,
    solo: Vec<u8>,
    pub(crate) chains: Vec<Chain>,
    /// Bytes cut off each record's end before compressing.
    trim: usize,
    /// Whether each solo fragment ends with its record's last byte as a
    /// literal ([`Packing::openable`]).
    openable: bool,
    /// Fragments compressed to make it; the others were copied from a
    /// previous version's (see [`Packed::rebuild`]).
    compressed: usize,
}

/// A collection's records as [`Packed::build`] reads them: by index, as
/// bytes.
pub trait IndexedRecords {
    /// How many records there are: their indices are `0..count()`.
    fn count(&self) -> usize;
    /// Record `i`'s bytes.
    fn record(&self, i: usize) -> &[u8];
}

/// Records held as one buffer each: what tests, benches and fuzzing pass.
impl<T: AsRef<[u8]>> IndexedRecords for Vec<T> {
    fn count(&self) -> usize {
        self.len()
    }

    fn record(&self, i: usize) -> &[u8] {
        self[i].as_ref()
    }
}

/// What to make of a collection's records: the chain orders and their
/// rungs, and what to cut off each record (see [`Packed::build`]).
pub struct Packing<'a> {
    /// Orders of any subset of the records, each record at most once.
    pub chains: &'a [&'a [u32]],
    /// The rungs of each chain, ascending from 1.
    pub depths: &'a [usize],
    /// Bytes cut off each record's end before compressing.
    pub trim: usize,
    /// Whether to make solo fragments. Without them a record that starts
    /// a run goes on a page as literals (see [`crate::GzipPage`]): they
    /// cost more memory than a chain (about 0.6 of the records' bytes
    /// against 0.4, generated tasks), so they pay only where records are
    /// few or mostly served alone.
    pub solo: bool,
    /// Whether each solo fragment ends with its record's last byte as a
    /// literal, so that a page may write the record without that byte (a
    /// meeting left open for its notes, see [`crate::GzipPage::open_record`])
    /// by copying all of the fragment but that literal: the record whole
    /// and the record open from one fragment, nothing more held per
    /// record. Where the parse covered that byte with a match (a record
    /// ending as something before it does), the match is one byte shorter
    /// and the byte a literal: a few bits more on those records.
    pub openable: bool,
}

impl Packed {
    /// Compresses every record of `records`, solo and chained in each of
    /// `packing.chains`, less `packing.trim` bytes at the end of each
    /// (bytes a page always writes itself, if any: a record that a page
    /// sometimes leaves open is [`Packing::openable`] instead). Gives up
    /// (`None`) as soon as `keep_going` says so; it is asked every few
    /// thousand records.
    ///
    /// `packing.depths` are the rungs of each chain: with `[1, 2, 4]`, the
    /// record `t` places into a run of a chain on a page refers to its
    /// predecessor if `t` is 1, to the two before it if `t` is 2 or 3, to
    /// the four before it from then on. Deeper dictionaries find more, each
    /// rung costs as much memory again; they pay where records share much
    /// with their near neighbours and are few.
    ///
    /// The solo fragments and each rung of each chain are independent
    /// passes over the records; they run on up to `threads` threads (the
    /// calling one included), the caller's share of the machine. Each large
    /// buffer is shown to `placement` when made and when written.
    pub fn build(
        records: &(impl IndexedRecords + Sync),
        packing: &Packing<'_>,
        threads: usize,
        placement: &impl Placement,
        keep_going: &(dyn Fn() -> bool + Sync),
    ) -> Option<Packed> {
        build(records, packing, threads, placement, keep_going, true)
    }
}

/// [`Packed::build`]; the symbols that training finds are written again
/// where they can be if `recorded` (tests compare with a packing that
/// parses everything twice).
pub(crate) fn build(
    records: &(impl IndexedRecords + Sync),
    packing: &Packing<'_>,
    threads: usize,
    placement: &impl Placement,
    keep_going: &(dyn Fn() -> bool + Sync),
    recorded: bool,
) -> Option<Packed> {
    let trim = packing.trim;
    let record = |i: usize| trimmed(records.record(i), trim);
    let n = records.count();
    let trained = train(&record, n, packing.chains, packing.solo, threads, recorded);
    pack(
        records,
        packing,
        trained,
        &(),
        threads,
        placement,
        keep_going,
    )
}

/// [`Packed::build`] with `trained`'s code, writing the symbols it
/// recorded: every fragment that `reuse` has is copied from it, every
/// other one compressed.
pub(crate) fn pack(
    records: &(impl IndexedRecords + Sync),
    packing: &Packing<'_>,
    trained: Trained,
    reuse: &impl Reuse,
    threads: usize,
    placement: &impl Placement,
    keep_going: &(dyn Fn() -> bool + Sync),
) -> Option<Packed> {
    let Packing {
        chains,
        depths,
        trim,
        solo,
        openable,
    } = *packing;
    debug_assert!(depths.first() == Some(&1) && depths.is_sorted());
    let n = records.count();
    let record = |i: usize| trimmed(records.record(i), trim);
    let Trained { code, recorded } = trained;
    let pass = Pass {
        record: &record,
        code: &code,
        reuse,
        recorded: &recorded,
        openable,
        keep_going,
    };
    // The records' bytes, all told: what the streams are sized by.
    let plain: usize = (0..n).map(|i| record(i).len()).sum();

    // The work: the solo fragments (if asked for), then every rung of
    // every chain, each in pieces of about a megabyte of records, so that
    // a collection with one chain still runs on every thread given.
    // Pieces of a stream are joined in order as they come.
    let mut units = Vec::new();
    let solo_join = solo.then(|| {
        let cut = pieces(n, |i| record(i).len());
        units.extend(
            cut.into_iter()
                .enumerate()
                .map(|(piece, range)| Unit::Solo { range, piece }),
        );
        // The starts go into the pieces below.
        Mutex::new(Join::new(
            Vec::with_capacity(n + 1),
            plain * 5 / 8,
            placement,
        ))
    });
    let joins: Vec<Vec<Mutex<Join>>> = chains
        .iter()
        .enumerate()
        .map(|(c, order)| {
            let cut = pieces(order.len(), |k| record(order[k] as usize).len());
            (0..depths.len())
                .map(|r| {
                    units.extend(cut.iter().enumerate().map(|(piece, range)| Unit::Rung {
                        c,
                        r,
                        range: range.clone(),
                        piece,
                    }));
                    let at = reserved(order.len() + 1, placement);
                    Mutex::new(Join::new(at, plain * 7 / 16, placement))
                })
                .collect()
        })
        .collect();
    let compressed = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let next = AtomicUsize::new(0);
    let work = || {
        let mut matcher = Matcher::default();
        loop {
            let u = next.fetch_add(1, Ordering::Relaxed);
            if u >= units.len() || failed.load(Ordering::Relaxed) {
                return;
            }
            let (chunk, join, piece) = match units[u].clone() {
                Unit::Solo { range, piece } => {
                    let join = solo_join.as_ref().expect("solo units have a join");
                    (pass.solo(range, &mut matcher), join, piece)
                }
                Unit::Rung { c, r, range, piece } => {
                    // Without solo fragments, the chain's tables take the
                    // records' CRCs from its first rung's pass.
                    let crcs = !solo && r == 0;
                    let (order, depth) = (chains[c], depths[r]);
                    let chunk = pass.rung(order, (c, r, depth), range, crcs, &mut matcher);
                    (chunk, &joins[c][r], piece)
                }
            };
            match chunk {
                Some(chunk) => {
                    compressed.fetch_add(chunk.compressed, Ordering::Relaxed);
                    lock(join).add(piece, chunk);
                }
                None => failed.store(true, Ordering::Relaxed),
            }
        }
    };
    std::thread::scope(|scope| {
        for _ in 1..threads.min(units.len()) {
            scope.spawn(work);
        }
        work();
    });
    if failed.into_inner() {
        return None;
    }

    let (pieces, solo_bits) = match solo_join {
        Some(join) => {
            let joined = join
                .into_inner()
                .unwrap_or_else(|p| p.into_inner())
                .finish(placement);
            let mut pieces = reserved(n + 1, placement);
            let crcs = joined
                .crcs
                .iter()
                .map(|crc| crc.expect("solo passes give every CRC"));
            pieces.extend(
                joined
                    .at
                    .iter()
                    .zip(crcs)
                    .map(|(&solo, (crc, shift))| Piece { solo, crc, shift }),
            );
            pieces.push(Piece {
                solo: joined.at[n],
                ..Piece::default()
            });
            placement.built(&pieces);
            (pieces, joined.bits)
        }
        None => Default::default(),
    };
    let mut built = Vec::with_capacity(chains.len());
    for (c, (order, joins)) in chains.iter().zip(joins).enumerate() {
        let mut crcs = Vec::new();
        let rungs: Vec<Rung> = depths
            .iter()
            .zip(joins)
            .map(|(&depth, join)| {
                let join = join.into_inner().unwrap_or_else(|p| p.into_inner());
                let joined = join.finish(placement);
                placement.built(&joined.at);
                if crcs.is_empty() {
                    crcs = joined.crcs;
                }
                Rung {
                    depth,
                    at: joined.at,
                    bits: joined.bits,
                }
            })
            .collect();
        let mut pos = reserved(n, placement);
        pos.resize(n, NOT_CHAINED);
        let mut prefix = reserved(order.len(), placement);
        let mut ends = reserved(order.len(), placement);
        let (mut crc, mut len) = (0, 0u64);
        // Where the record before was in the previous version's chain
        // (see `Reuse::was_at`), and how the CRC of the text up to it
        // differs from the old one: while records follow one another as
        // they did, that difference is only shifted (CRCs are linear),
        // and it is nothing before the first change.
        let mut was: Option<(usize, u32)> = None;
        for (k, &i) in order.iter().enumerate() {
            pos[i as usize] = k as u32;
            let bytes = record(i as usize);
            let here = reuse.was_at(c, k);
            let follows = match (was, here) {
                (Some((p, delta)), Some((q, old))) if q == p + 1 => Some((delta, old)),
                _ => None,
            };
            if k > 0 {
                len += 1;
            }
            if let Some((delta, old)) = follows {
                let shifted = match delta {
                    0 => 0,
                    _ => crc::multiply_fast(crc::shift_for(bytes.len() as u64 + 1), delta),
                };
                crc = old ^ shifted;
            } else {
                if k > 0 {
                    crc = crc::update(crc, b",");
                }
                // From the solo pieces, the first rung's pass, the previous
                // version, or (where none has it) the record.
                let known = || {
                    let from_pass = crcs.get(k).copied().flatten();
                    from_pass.or_else(|| reuse.crc(i as usize, bytes.len()))
                };
                let (record_crc, shift) = match pieces.get(i as usize) {
                    Some(p) => (p.crc, p.shift),
                    None => known()
                        .unwrap_or_else(|| (crc::of(bytes), crc::shift_for(bytes.len() as u64))),
                };
                crc = crc::combine(crc, record_crc, shift);
            }
            was = here.map(|(q, old)| (q, crc ^ old));
            len += bytes.len() as u64;
            prefix.push(crc);
            ends.push(len);
        }
        placement.built(&pos);
        placement.built(&prefix);
        placement.built(&ends);
        built.push(Chain {
            pos,
            prefix,
            ends,
            rungs,
        });
    }
    Some(Packed {
        code,
        pieces,
        solo: solo_bits,
        chains: built,
        trim,
        openable: openable && solo,
        compressed: compressed.into_inner(),
    })
}

impl Packed {
    /// How many fragments (solo ones, and chained ones of every rung)
    /// were compressed to make this packing: all of them for
    /// [`Packed::build`], those that changed for [`Packed::rebuild`].
    pub fn compressed(&self) -> usize {
        self.compressed
    }

    /// Bytes held, for the memory report.
    pub fn heap_bytes(&self) -> usize {
        let rung = |r: &Rung| r.at.len() * 8 + r.bits.len();
        let chains: usize = self
            .chains
            .iter()
            .map(|c| {
                (c.pos.len() + c.prefix.len()) * 4
                    + c.ends.len() * 8
                    + c.rungs.iter().map(rung).sum::<usize>()
            })
            .sum();
        self.pieces.len() * size_of::<Piece>() + self.solo.len() + chains + self.code.header.len()
    }

    /// Whether records have solo fragments ([`Packing::solo`]).
    pub fn has_solo(&self) -> bool {
        !self.pieces.is_empty()
    }

    /// How many records of `list` directly follow their predecessor in
    /// some chain order: those a page writes as chained fragments.
    pub fn chained_in(&self, list: &[u32]) -> usize {
        list.windows(2)
            .filter(|w| self.follows(w[0] as usize, w[1] as usize).is_some())
            .count()
    }

    /// Bytes cut off each record's end before compressing.
    pub fn trim(&self) -> usize {
        self.trim
    }

    /// Whether records have solo fragments that end with their last byte
    /// as a literal ([`Packing::openable`]).
    pub fn is_openable(&self) -> bool {
        self.openable
    }

    /// Record `i`'s solo fragment (bit range of a stream), CRC and shift,
    /// if the records have them.
    #[inline]
    pub(crate) fn solo(&self, i: usize) -> Option<(&[u8], u64, u64, u32, u32)> {
        let (p, next) = (*self.pieces.get(i)?, self.pieces.get(i + 1)?.solo);
        Some((&self.solo, p.solo, next, p.crc, p.shift))
    }

    /// A chain in which record `after` directly follows record `before`,
    /// and the position of `after` in it.
    #[inline]
    pub(crate) fn follows(&self, before: usize, after: usize) -> Option<(usize, usize)> {
        self.chains.iter().enumerate().find_map(|(c, chain)| {
            let (b, a) = (chain.pos[before], chain.pos[after]);
            (b != NOT_CHAINED && a == b.wrapping_add(1)).then_some((c, a as usize))
        })
    }

    /// The position of record `i` in chain `c`, if both are there.
    #[inline]
    pub fn position(&self, c: usize, i: usize) -> Option<usize> {
        let k = *self.chains.get(c)?.pos.get(i)?;
        (k != NOT_CHAINED).then_some(k as usize)
    }

    /// The dictionary depth of chain `c`'s rung `r` (rungs go from the
    /// fewest predecessors up), or `None` past the last rung.
    #[inline]
    pub(crate) fn depth(&self, c: usize, r: usize) -> Option<usize> {
        self.chains[c].rungs.get(r).map(|rung| rung.depth)
    }

    /// The chained fragments of chain `c`'s rung `r` at positions
    /// `from..to` (`from` ≥ 1), as one bit range of a stream.
    #[inline]
    pub(crate) fn chained(&self, c: usize, r: usize, from: usize, to: usize) -> (&[u8], u64, u64) {
        let rung = &self.chains[c].rungs[r];
        (&rung.bits, rung.at[from], rung.at[to])
    }

    /// The CRC of chain `c`'s records up to position `k`, comma-separated.
    #[inline]
    pub(crate) fn prefix_crc(&self, c: usize, k: usize) -> u32 {
        self.chains[c].prefix[k]
    }

    /// The length of chain `c`'s records up to position `k`, comma-separated.
    #[inline]
    pub(crate) fn prefix_len(&self, c: usize, k: usize) -> u64 {
        self.chains[c].ends[k]
    }

    /// Where `list`, which the caller says is a stretch of chain `c`,
    /// starts in it, if its first and last records are where that puts
    /// them (a cheap check against a wrong word).
    pub fn stretch(&self, c: usize, list: &[u32]) -> Option<usize> {
        let (&first, &last) = (list.first()?, list.last()?);
        let k = self.position(c, first as usize)?;
        (self.position(c, last as usize)? == k + list.len() - 1).then_some(k)
    }

    /// The plain length of the `n` records of chain `c` from position `k`
    /// on, comma-separated, if the chain has them.
    pub fn run_len(&self, c: usize, k: usize, n: usize) -> Option<u64> {
        let chain = self.chains.get(c)?;
        if n == 0 {
            return Some(0);
        }
        let before = if k == 0 { 0 } else { chain.ends[k - 1] + 1 };
        Some(chain.ends.get(k + n - 1)? - before)
    }
}

#[cfg(test)]
impl Packed {
    /// Whether `other` has the same code, fragments and tables, bit for
    /// bit (what a rebuild is checked against).
    pub(crate) fn identical(&self, other: &Packed) -> bool {
        let code = |p: &Packed| (p.code.literal, p.code.distance, p.code.header.clone());
        let rungs = |c: &Chain| -> Vec<(usize, Vec<u64>, Vec<u8>)> {
            let rung = |r: &Rung| (r.depth, r.at.clone(), r.bits.clone());
            c.rungs.iter().map(rung).collect()
        };
        let chains = |p: &Packed| -> Vec<_> {
            let chain = |c: &Chain| (c.pos.clone(), c.prefix.clone(), c.ends.clone(), rungs(c));
            p.chains.iter().map(chain).collect()
        };
        code(self) == code(other)
            && self.pieces == other.pieces
            && self.solo == other.solo
            && chains(self) == chains(other)
            && self.trim == other.trim
            && self.openable == other.openable
    }
}

/// A piece of [`Packed::build`]'s work: the solo fragments of some
/// records, or some positions of rung `r` of chain `c`; the `piece`th of
/// its stream.
#[derive(Clone)]
enum Unit {
    Solo {
        range: Range<usize>,
        piece: usize,
    },
    Rung {
        c: usize,
        r: usize,
        range: Range<usize>,
        piece: usize,
    },
}

/// `record` less `trim` bytes at its end.
pub(crate) fn trimmed(record: &[u8], trim: usize) -> &[u8] {
    &record[..record.len() - trim.min(record.len())]
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
