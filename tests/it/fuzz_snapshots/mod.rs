//! Snapshot fuzzing: random mutations of valid snapshots (docs/snapshot-format.md).
//!
//! Every mutated file must be rejected with an error that names the file
//! (and, for a problem inside a record, the collection and the record's
//! position), or be loaded whole and correct: the counts are the lengths of
//! the document's arrays and every record is served with the attributes the
//! document gives it. `load_snapshot` never panics. Over HTTP, a mutated
//! replacement of a serving file never stops the previous version from
//! serving and no response ever mixes two versions.
//!
//! The mutations start from the generator's small `acme.json` (seed 42) and
//! from a small hand-made snapshot holding every attribute of every kind:
//!
//! - truncation at every byte of the small snapshot, and at sampled
//!   positions of each kind (inside a key, after a key, after a colon, inside
//!   a string, inside an escape, inside a number or literal, between
//!   records...) of the generated one;
//! - a value of another JSON type at a random path, judged against the
//!   schema of docs/snapshot-format.md (null is accepted exactly where it may be);
//! - 10,000 levels of nesting where the format ignores it and where it does not;
//! - 50 MB strings;
//! - invalid UTF-8 inside served strings, ignored strings and between tokens;
//! - duplicate keys in records, attributes, nested objects and at the top level;
//! - numbers out of range (`1e400`, `-1e400`) and a large but finite
//!   `123456789012345678901234567890`, which is served exactly as written.
//!
//! A deterministic generator drives every choice, so a failure reproduces.
//!
//! Layout: `bases` (the valid snapshots to start from), `judge` (judging a
//! load, raw edits and the runner of mutations), `complete` (a loaded
//! dataset against its document), `schema` (paths into a document and the
//! schema of docs/snapshot-format.md); then one module per kind of mutation:
//! `truncation`, `edits` (type swaps and random edits), `structure` (deep
//! nesting and huge strings), `encoding` (invalid UTF-8, duplicate keys,
//! numbers out of range), `http` (replacements of a serving file).

mod bases;
mod complete;
mod edits;
mod encoding;
mod http;
mod judge;
mod schema;
mod structure;
mod truncation;

/// The name mutated snapshots are loaded under; every error must name it.
const FILE: &str = "fuzz.json";

/// The longest error message still read as "clear" (a line an operator
/// can read in a log or in `/snapshots`).
const MAX_MESSAGE: usize = 16 * 1024;

/// SplitMix64: tiny, seeded, the same sequence everywhere.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}
