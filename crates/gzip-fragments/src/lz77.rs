//! The match finder: a record's bytes as literals and back-references,
//! optionally against a dictionary (the bytes that precede it on a page,
//! laid out before it by [`with_predecessors`]).
//!
//! Hash chains over 4-byte prefixes, a bounded search and one step of lazy
//! evaluation, as zlib's middle levels do it; tuned for records of a few
//! hundred bytes to a few kilobytes, parsed one at a time at load.
//!
//! Every position of a record is hashed, inside matches too, so that
//! after a record is parsed the tables hold what inserting it whole as a
//! dictionary would: the next record of a chain, whose dictionary it is,
//! is parsed on from there ([`Matcher::parse_next`]) instead of hashing
//! its predecessor a second time. What a record comes out as depends only
//! on its bytes and its dictionary's, however it is parsed.

/// How far back a match may reach (deflate's window).
pub const WINDOW: usize = 32 * 1024;
const MIN_MATCH: usize = 4;
const MAX_MATCH: usize = 258;
/// A match this long ends the search.
const NICE: usize = 128;
/// A match shorter than this is given up for a longer one at the next
/// byte (lazy evaluation); a longer one is taken without looking further,
/// as zlib's `max_lazy` does: fragments of medium-like records within
/// 0.1% of always looking, the packing about 5% faster.
const LAZY: usize = 8;
/// Candidates tried per position: records are short, and longer searches
/// found nothing more on the generated datasets.
const CHAIN: usize = 16;
/// A 4-byte match farther than this costs more than four literals.
const FAR: usize = 2048;
const HASH_BITS: u32 = 13;

/// Where a parse's symbols go, as they are found: straight into a
/// fragment's bits, or into a count of them (and, for a small collection,
/// a list that its packing writes instead of parsing again).
pub trait Symbols {
    /// A literal byte.
    fn literal(&mut self, b: u8);
    /// `len` bytes copied from `dist` bytes back.
    fn matched(&mut self, len: u16, dist: u16);
}

/// A literal byte, or `len` bytes copied from `dist` bytes back.
#[cfg(test)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Symbol {
    Literal(u8),
    Match { len: u16, dist: u16 },
}

/// The symbols as a list, for tests.
#[cfg(test)]
impl Symbols for &mut Vec<Symbol> {
    fn literal(&mut self, b: u8) {
        self.push(Symbol::Literal(b));
    }

    fn matched(&mut self, len: u16, dist: u16) {
        self.push(Symbol::Match { len, dist });
    }
}

/// Reusable state of the match finder (its tables are kept between calls,
/// and told apart by position stamps instead of being cleared).
pub struct Matcher {
    /// Hash → stamped position of the newest 4-byte prefix with that hash.
    /// (An array: a hash indexes it without a bounds check.)
    head: Box<[u32; 1 << HASH_BITS]>,
    /// Position → stamped position of the previous one with the same hash.
    prev: Vec<u32>,
    /// Stamped positions of this call are above `base`.
    base: u32,
    /// The length of the last call's buffer.
    end: usize,
}

impl Default for Matcher {
    fn default() -> Self {
        Matcher {
            head: Box::new([0; 1 << HASH_BITS]),
            prev: Vec::new(),
            base: 0,
            end: 0,
        }
    }
}

#[inline]
fn word(buf: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(buf[at..at + 4].try_into().expect("4 bytes"))
}

#[inline]
fn hash(buf: &[u8], at: usize) -> usize {
    (word(buf, at).wrapping_mul(0x9E37_79B1) >> (32 - HASH_BITS)) as usize
}

/// A position as the tables hold it (`parse` checked that it fits).
#[inline]
fn p32(p: usize) -> u32 {
    p as u32
}

/// How many bytes from `a` equal those from `b` (`a` < `b`), at most `max`.
#[inline]
fn common(buf: &[u8], a: usize, b: usize, max: usize) -> usize {
    let mut n = 0;
    while n + 8 <= max {
        let x = u64::from_le_bytes(buf[a + n..a + n + 8].try_into().expect("8 bytes"));
        let y = u64::from_le_bytes(buf[b + n..b + n + 8].try_into().expect("8 bytes"));
        let diff = x ^ y;
        if diff != 0 {
            return n + (diff.trailing_zeros() / 8) as usize;
        }
        n += 8;
    }
    while n < max && buf[a + n] == buf[b + n] {
        n += 1;
    }
    n
}

impl Matcher {
    /// The symbols of `buf[start..]`; matches may reach into `buf[..start]`,
    /// the dictionary (at most [`WINDOW`] bytes back), never before it.
    /// The symbols go to `out`, which is given back.
    pub fn parse<S: Symbols>(&mut self, buf: &[u8], start: usize, out: S) -> S {
        // What earlier calls stamped is at or below the new base.
        let base = u64::from(self.base) + self.end as u64 + 1;
        if base + buf.len() as u64 + 1 >= u64::from(u32::MAX) {
            self.head.fill(0);
            self.base = 0;
        } else {
            self.base = base as u32;
        }
        if self.prev.len() < buf.len() {
            self.prev.resize(buf.len(), 0);
        }
        self.end = buf.len();
        self.insert_range(buf, start.saturating_sub(WINDOW), start);
        self.parse_from(buf, start, out)
    }

    /// [`Matcher::parse`], where the last call's buffer, less its first
    /// `dropped` bytes, is the start of `buf`: those bytes, hashed by
    /// the last call, are not hashed again (a chain's next record, whose
    /// dictionary ends with the record parsed last).
    pub fn parse_next<S: Symbols>(
        &mut self,
        buf: &[u8],
        start: usize,
        dropped: usize,
        out: S,
    ) -> S {
        let kept = self.end.saturating_sub(dropped);
        if dropped > self.end
            || kept > start
            || u64::from(self.base) + (dropped + buf.len()) as u64 + 1 >= u64::from(u32::MAX)
        {
            return self.parse(buf, start, out);
        }
        // The last call's position `dropped + p` is this one's `p`.
        self.base += dropped as u32;
        if self.prev.len() < buf.len() {
            self.prev.resize(buf.len(), 0);
        }
        self.prev.copy_within(dropped..self.end, 0);
        // The last call hashed its positions with four bytes to hash; the
        // last three of them have four now.
        let hashed = self
            .end
            .saturating_sub(MIN_MATCH - 1)
            .saturating_sub(dropped);
        self.end = buf.len();
        self.insert_range(buf, hashed, start);
        self.parse_from(buf, start, out)
    }

    /// Inserts positions `from..to` of `buf` (those with 4 bytes to hash).
    fn insert_range(&mut self, buf: &[u8], from: usize, to: usize) {
        let last = buf.len().saturating_sub(MIN_MATCH - 1);
        for p in from..to.min(last) {
            self.insert(buf, p);
        }
    }

    /// The symbols of `buf[start..]`, `buf[..start]` inserted.
    ///
    /// `out` is taken and given back by value, so that an encoder's state
    /// stays in registers.
    #[inline(always)]
    fn parse_from<S: Symbols>(&mut self, buf: &[u8], start: usize, mut out: S) -> S {
        let end = buf.len();
        // Positions with 4 bytes to hash.
        let last = end.saturating_sub(MIN_MATCH - 1);
        let mut i = start;
        // The best match at `i`, when already looked up (lazy evaluation).
        let mut ahead: Option<(usize, usize)> = None;
        while i < last {
            // Each position's hash once, for its search and its insertion.
            let h = hash(buf, i);
            let (len, dist) = match ahead.take() {
                Some(found) => found,
                None => self.longest(buf, i, h),
            };
            self.insert_hashed(p32(i), h);
            if len < MIN_MATCH {
                out.literal(buf[i]);
                i += 1;
                continue;
            }
            if len < LAZY && i + 1 < last {
                let next = self.longest(buf, i + 1, hash(buf, i + 1));
                if next.0 > len {
                    out.literal(buf[i]);
                    ahead = Some(next);
                    i += 1;
                    continue;
                }
            }
            out.matched(len as u16, dist as u16);
            // Every position, for the record parsed after this one.
            for p in i + 1..(i + len).min(last) {
                self.insert(buf, p);
            }
            i += len;
        }
        // The last few bytes (and any a match ran past `last` into) have
        // no 4 bytes to hash.
        for &b in &buf[i..end] {
            out.literal(b);
        }
        out
    }

    #[inline]
    fn insert(&mut self, buf: &[u8], p: usize) {
        self.insert_hashed(p32(p), hash(buf, p));
    }

    #[inline]
    fn insert_hashed(&mut self, p: u32, h: usize) {
        self.prev[p as usize] = self.head[h];
        self.head[h] = self.base + p + 1;
    }

    /// The longest match for `buf[i..]` (length, distance); length 0 if
    /// none is worth it. Candidates are positions inserted before `i`.
    #[inline(always)]
    fn longest(&self, buf: &[u8], i: usize, h: usize) -> (usize, usize) {
        let max = MAX_MATCH.min(buf.len() - i);
        let floor = i.saturating_sub(WINDOW);
        let (mut best, mut best_dist) = (0, 0);
        let mut stamped = self.head[h];
        let here = word(buf, i);
        for _ in 0..CHAIN {
            if stamped <= self.base {
                break;
            }
            let q = (stamped - self.base - 1) as usize;
            if q < floor || q >= i {
                break;
            }
            // Below MIN_MATCH only a 4-byte match counts (a shorter one
            // is never returned), so the four bytes are compared at once.
            let promising = if best < MIN_MATCH {
                word(buf, q) == here
            } else {
                buf[q + best.min(max - 1)] == buf[i + best.min(max - 1)]
            };
            if promising {
                let len = common(buf, q, i, max);
                if len > best && (len > MIN_MATCH || i - q <= FAR) {
                    best = len;
                    best_dist = i - q;
                    if len >= NICE || len == max {
                        break;
                    }
                }
            }
            stamped = self.prev[q];
        }
        if best < MIN_MATCH {
            (0, 0)
        } else {
            (best, best_dist)
        }
    }
}

/// A record and its dictionary as a parse takes them: the records
/// `before`, then `record`, comma-separated, in `scratch`, as a page has
/// them; returns where `record` starts (the `start` of [`Matcher::parse`]).
pub fn with_predecessors<'r>(
    scratch: &mut Vec<u8>,
    before: impl Iterator<Item = &'r [u8]>,
    record: &[u8],
) -> usize {
    scratch.clear();
    for b in before {
        scratch.extend_from_slice(b);
        scratch.push(b',');
    }
    let start = scratch.len();
    scratch.extend_from_slice(record);
    start
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bytes that `symbols` stand for, after `dict`.
    fn expand(dict: &[u8], symbols: &[Symbol]) -> Vec<u8> {
        let mut out = dict.to_vec();
        for s in symbols {
            match *s {
                Symbol::Literal(b) => out.push(b),
                Symbol::Match { len, dist } => {
                    assert!(dist as usize <= out.len() && (3..=258).contains(&len));
                    for _ in 0..len {
                        out.push(out[out.len() - dist as usize]);
                    }
                }
            }
        }
        out.split_off(dict.len())
    }

    #[test]
    fn symbols_expand_to_the_input_and_use_the_dictionary() {
        let mut m = Matcher::default();
        let mut out = Vec::new();
        let rec = br#"{"id":"a","attributes":{"title":"aaaaaaaaaaaaaaaaaaaa","status":"todo"}}"#;
        m.parse(rec, 0, &mut out);
        assert_eq!(expand(b"", &out), rec);
        assert!(out.len() < rec.len(), "repeats become matches");

        let dict = br#"{"id":"b","attributes":{"title":"other","status":"todo"}},"#;
        let mut buf = dict.to_vec();
        buf.extend_from_slice(rec);
        out.clear();
        m.parse(&buf, dict.len(), &mut out);
        assert_eq!(expand(dict, &out), rec);
        assert!(
            matches!(out[0], Symbol::Match { dist, .. } if dist as usize == dict.len()),
            "the record starts as its predecessor did: {:?}",
            out[0]
        );
        for tiny in [&b""[..], b"a", b"abc", b"abcd", b"aaaaa"] {
            out.clear();
            m.parse(tiny, 0, &mut out);
            assert_eq!(expand(b"", &out), tiny);
        }
    }

    /// A chain of records parsed one after the other with
    /// [`Matcher::parse_next`] gives what [`Matcher::parse`] gives each
    /// of them afresh, with its `depth` predecessors as the dictionary.
    #[test]
    fn a_chain_parsed_on_is_parsed_as_afresh() {
        let mut x = 0x2545_F491u32;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x
        };
        let words = [
            "status", "todo", "done", "{\"id\":", "aaaa", ",", "x", "title",
        ];
        let records: Vec<Vec<u8>> = (0..300)
            .map(|i| match i % 50 {
                // Short records: fewer than four bytes to hash, or none.
                7 => Vec::new(),
                8 => b"ab".to_vec(),
                // A long one: more than a window with its neighbours.
                9 => (0..40_000).map(|_| next() as u8).collect(),
                _ => (0..next() % 60)
                    .flat_map(|_| words[next() as usize % words.len()].bytes())
                    .collect(),
            })
            .collect();
        for depth in [1, 2, 4] {
            let (mut fresh, mut chained) = (Matcher::default(), Matcher::default());
            let (mut expected, mut got, mut scratch) = (Vec::new(), Vec::new(), Vec::new());
            for k in 0..records.len() {
                let from = k.saturating_sub(depth);
                scratch.clear();
                for r in &records[from..k] {
                    scratch.extend_from_slice(r);
                    scratch.push(b',');
                }
                let start = scratch.len();
                scratch.extend_from_slice(&records[k]);
                // A record between two calls: `fresh` must not depend on it.
                fresh.parse(b"{\"id\":\"aaaa\"}", 0, &mut expected);
                expected.clear();
                fresh.parse(&scratch, start, &mut expected);
                let dropped = match k > depth {
                    true => records[k - 1 - depth].len() + 1,
                    false => 0,
                };
                got.clear();
                if k == 0 {
                    chained.parse(&scratch, start, &mut got);
                } else {
                    chained.parse_next(&scratch, start, dropped, &mut got);
                }
                assert_eq!(got, expected, "record {k}, depth {depth}");
                assert_eq!(expand(&scratch[..start], &got), records[k]);
            }
        }
    }
}
