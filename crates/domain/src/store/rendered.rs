//! Records rendered to JSON once, at load, and (when precompression is
//! on) compressed once for gzip answers.
//!
//! A collection's records live in chunks of a few megabytes, shared by
//! reference count: a new version of a workspace points at the chunks of
//! the version it replaces for every record whose bytes did not change
//! (see `builder::reuse`), and writes only the changed records into chunks
//! of its own. A chunk mostly dead (its version's records replaced) is not
//! kept for a few survivors: those are copied out ([`COMPACT_BELOW`]).

use std::sync::{Arc, Mutex};

use arc_swap::ArcSwapOption;
use bytes::Bytes;
use gzip_fragments::{IndexedRecords, Packed};
use rustc_hash::FxHashMap;

use crate::os;

/// How many records ahead of its copy a record is prefetched.
/// Measured on random 50-task pages of the large dataset (then on huge
/// pages): 6.1-6.5 us a page without, 5.8-6.1 us with 8 (4 and 16 are no
/// better).
/// Such a page is some 450 cache lines from DRAM: the misses are what it
/// costs, and prefetching only overlaps a few more of them.
const PREFETCH_AHEAD: usize = 8;

/// A chunk is closed once it holds this many bytes. Small enough that a
/// change to a few records leaves most chunks whole and shared, large
/// enough to hold a few huge pages (2 MB) and to keep the chunks of a
/// large collection few.
const CHUNK_BYTES: usize = 8 << 20;

/// A chunk of an earlier version whose records still in use fill less
/// than this share of it is compacted: its survivors are copied into the
/// new version's own chunk, so that a few of them do not keep the rest
/// alive. With 4/5, the chunks a version shares hold at most a quarter
/// more than its records.
const COMPACT_BELOW: (usize, usize) = (4, 5);

/// Where one record's bytes are: a chunk and a range in it.
#[derive(Clone, Copy, Debug)]
struct Span {
    chunk: u32,
    start: u32,
    end: u32,
}

/// The chunk being filled, while a [`Renderer`] runs.
const OPEN: u32 = u32::MAX;

/// Records of one kind, each rendered as `{"id":...,"attributes":{...}}`,
/// in the order the snapshot listed them. Lists are orders of record
/// indices over them: a page copies its records out of here, one `memcpy`
/// each.
pub struct Rendered {
    chunks: Vec<Bytes>,
    /// Where record `i` is.
    spans: Vec<Span>,
    /// Bytes of all the records.
    bytes: usize,
    /// The same records as deflate fragments, for gzip answers, once the
    /// dataset's precompression has made them, until they are let go
    /// ([`Rendered::let_go_of_packed`]). Behind a pointer: a `Packed` holds
    /// its code tables inline (about 1.4 KB), which eight collections of
    /// every workspace would pay for whether or not they are ever packed.
    packed: ArcSwapOption<Packed>,
    /// The version these records were taken over from, until the
    /// precompression has used its fragments ([`Rendered::take_origin`]).
    origin: Mutex<Option<Origin>>,
}

/// Where a version's records came from: the collection's records in the
/// version before, and the index there of each record taken over
/// ([`Packed::CHANGED`] for one rendered anew).
pub struct Origin {
    pub records: Arc<Rendered>,
    pub of: Vec<u32>,
}

impl Origin {
    /// The fragments of the version before, if it has them.
    pub fn packed(&self) -> Option<Arc<Packed>> {
        self.records.packed.load_full()
    }
}

/// A collection's fragments as a request sees them: they cannot be let go
/// while it holds them.
pub type PackedGuard = arc_swap::Guard<Option<Arc<Packed>>>;

impl IndexedRecords for Rendered {
    fn count(&self) -> usize {
        self.spans.len()
    }

    fn record(&self, i: usize) -> &[u8] {
        Rendered::record(self, i)
    }
}

impl Rendered {
    /// The JSON of record `i`.
    #[inline]
    pub fn record(&self, i: usize) -> &[u8] {
        let s = self.spans[i];
        &self.chunks[s.chunk as usize][s.start as usize..s.end as usize]
    }

    /// Bytes of all the records.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The length of record `i`.
    #[inline]
    pub fn len_of(&self, i: usize) -> usize {
        let s = self.spans[i];
        (s.end - s.start) as usize
    }

    /// Whether record `i` is record `j` of `other`, the same bytes in the
    /// same chunk (taken over, not copied).
    #[cfg(test)]
    pub fn shares_chunk_with(&self, other: &Rendered, i: usize, j: usize) -> bool {
        let (a, b) = (self.spans[i], other.spans[j]);
        self.chunks[a.chunk as usize].as_ptr() == other.chunks[b.chunk as usize].as_ptr()
            && a.start == b.start
    }

    /// Moves the records onto huge pages (see [`os`]), while
    /// `keep_going` says so.
    pub fn collapse_to_huge_pages(&self, keep_going: &dyn Fn() -> bool) {
        for chunk in &self.chunks {
            os::collapse_to_huge_pages_while(&chunk[..], keep_going);
        }
        os::collapse_to_huge_pages_while(&self.spans, keep_going);
    }

    /// Keeps the records' deflate fragments.
    pub fn set_packed(&self, packed: Packed) {
        self.packed.store(Some(Arc::new(packed)));
    }

    /// The records' deflate fragments, if precompressed (`as_deref` of the
    /// guard).
    #[inline]
    pub fn packed(&self) -> PackedGuard {
        self.packed.load()
    }

    /// Lets the fragments go (gzip answers are then compressed per
    /// request); their memory is freed once no answer holds them. Gives the
    /// bytes they held.
    pub fn let_go_of_packed(&self) -> usize {
        self.packed.swap(None).map_or(0, |p| p.heap_bytes())
    }

    /// Where the records came from, once: the precompression takes it to
    /// copy the fragments of records taken over, and letting it go lets
    /// the version before go (its chunks stay while records use them).
    pub fn take_origin(&self) -> Option<Origin> {
        self.origin.lock().unwrap_or_else(|p| p.into_inner()).take()
    }

    /// Appends the records at `indices` to `out`, comma-separated. A page's
    /// records are scattered over memory: each is asked into the cache a
    /// few records ahead of its copy, so that their misses overlap.
    pub fn write(&self, indices: &[u32], out: &mut Vec<u8>) {
        for (n, &i) in indices.iter().enumerate() {
            if let Some(&ahead) = indices.get(n + PREFETCH_AHEAD) {
                os::prefetch(self.record(ahead as usize));
            }
            if n > 0 {
                out.push(b',');
            }
            out.extend_from_slice(self.record(i as usize));
        }
    }

    /// Bytes that [`Rendered::write`] appends for `indices`, which the
    /// caller may vouch are a stretch of the chain order `chain`: then, if
    /// the records are packed, the length is read off the chain.
    pub fn size_in(&self, indices: &[u32], chain: Option<usize>) -> usize {
        if let Some(c) = chain
            && let Some(packed) = self.packed().as_deref()
            && let Some(k) = packed.stretch(c, indices)
            && let Some(len) = packed.run_len(c, k, indices.len())
        {
            return len as usize;
        }
        self.size(indices)
    }

    /// Bytes that [`Rendered::write`] appends for `indices`.
    pub fn size(&self, indices: &[u32]) -> usize {
        let records: usize = indices.iter().map(|&i| self.len_of(i as usize)).sum();
        records + indices.len().saturating_sub(1)
    }

    /// A copy holding only the records at `indices`, in that order.
    pub fn select(&self, indices: &[u32]) -> Rendered {
        let mut out = Renderer::default();
        for &i in indices {
            out.push_raw(self.record(i as usize));
        }
        let origin = self.take_origin().map(|o| Origin {
            of: indices.iter().map(|&i| o.of[i as usize]).collect(),
            records: o.records,
        });
        Rendered {
            origin: Mutex::new(origin),
            ..out.finish()
        }
    }
}

/// Renders records one by one into a [`Rendered`], or takes them over
/// from an earlier version's.
#[derive(Default)]
pub struct Renderer {
    /// Closed chunks: this load's own, and earlier versions' that records
    /// are reused from.
    chunks: Vec<Bytes>,
    /// The index in `chunks` of each earlier version's chunk, by address.
    shared: FxHashMap<usize, u32>,
    /// The chunk being filled; its records' spans say [`OPEN`].
    open: Vec<u8>,
    /// The first span that may say [`OPEN`].
    open_from: usize,
    spans: Vec<Span>,
    /// The records of the version before, once one is taken over, and
    /// the index there of each record ([`Packed::CHANGED`] if none).
    from: Option<Arc<Rendered>>,
    of: Vec<u32>,
}

impl Renderer {
    /// Appends the record that `json` writes. A record is a JSON object:
    /// `/meetings/{id}?include=notes` inserts `notes` before its final `}`.
    pub fn push_with(&mut self, json: impl FnOnce(&mut Vec<u8>)) {
        let start = self.open.len();
        json(&mut self.open);
        debug_assert!(
            self.open.get(start) == Some(&b'{') && self.open.last() == Some(&b'}'),
            "a record is a JSON object"
        );
        self.opened(start);
    }

    /// [`Renderer::push_with`] for a writer that may fail: on an error,
    /// what it wrote is dropped and nothing is pushed.
    pub fn try_push_with<T, E>(
        &mut self,
        json: impl FnOnce(&mut Vec<u8>) -> Result<T, E>,
    ) -> Result<T, E> {
        let start = self.open.len();
        match json(&mut self.open) {
            Ok(done) => {
                debug_assert!(
                    self.open.get(start) == Some(&b'{') && self.open.last() == Some(&b'}'),
                    "a record is a JSON object"
                );
                self.opened(start);
                Ok(done)
            }
            Err(err) => {
                self.open.truncate(start);
                Err(err)
            }
        }
    }

    fn push_raw(&mut self, record: &[u8]) {
        let start = self.open.len();
        self.open.extend_from_slice(record);
        self.opened(start);
    }

    /// Records the span of the record just written into the open chunk
    /// from `start`, and closes the chunk once it is full.
    fn opened(&mut self, start: usize) {
        self.of.push(Packed::CHANGED);
        self.spans.push(Span {
            chunk: OPEN,
            start: offset(start),
            end: offset(self.open.len()),
        });
        if self.open.len() >= CHUNK_BYTES {
            self.close();
        }
    }

    /// Bytes of the records given so far.
    pub fn bytes(&self) -> usize {
        self.spans.iter().map(|s| (s.end - s.start) as usize).sum()
    }

    /// Takes over record `i` of `from` (the version before, the same for
    /// every record of a renderer) without copying it: the new version
    /// shares its chunk, and its fragments once precompressed.
    pub fn push_from(&mut self, from: &Arc<Rendered>, i: usize) {
        let s = from.spans[i];
        let chunk = self.share(&from.chunks[s.chunk as usize]);
        self.spans.push(Span { chunk, ..s });
        self.of.push(i as u32);
        if self.from.is_none() {
            self.from = Some(Arc::clone(from));
        }
    }

    /// The index of `chunk` among this renderer's chunks, added if new.
    fn share(&mut self, chunk: &Bytes) -> u32 {
        let chunks = &mut self.chunks;
        *self
            .shared
            .entry(chunk.as_ptr() as usize)
            .or_insert_with(|| {
                chunks.push(chunk.clone());
                offset(chunks.len() - 1)
            })
    }

    /// Closes the open chunk: its records' spans get its index.
    fn close(&mut self) {
        if self.open.is_empty() {
            return;
        }
        let index = offset(self.chunks.len());
        for span in &mut self.spans[self.open_from..] {
            if span.chunk == OPEN {
                span.chunk = index;
            }
        }
        self.open_from = self.spans.len();
        let mut open = std::mem::take(&mut self.open);
        open.shrink_to_fit();
        self.chunks.push(Bytes::from(open));
    }

    /// Appends every record of `other` after this one's: records built in
    /// batches on several threads are joined in order. The open chunk's
    /// records are copied (a batch is small); closed chunks are taken over.
    pub fn append(&mut self, mut other: Renderer) {
        let base = self.open.len();
        let chunks: Vec<u32> = std::mem::take(&mut other.chunks)
            .iter()
            .map(|chunk| self.share(chunk))
            .collect();
        self.open.extend_from_slice(&other.open);
        self.of.extend_from_slice(&other.of);
        if self.from.is_none() {
            self.from = other.from.take();
        }
        self.spans.extend(other.spans.iter().map(|s| match s.chunk {
            OPEN => Span {
                chunk: OPEN,
                start: offset(base + s.start as usize),
                end: offset(base + s.end as usize),
            },
            c => Span {
                chunk: chunks[c as usize],
                ..*s
            },
        }));
        if self.open.len() >= CHUNK_BYTES {
            self.close();
        }
    }

    /// The records, after copying out the survivors of chunks that are
    /// mostly dead ([`COMPACT_BELOW`]).
    pub fn finish(mut self) -> Rendered {
        let mut live = vec![0usize; self.chunks.len()];
        for s in &self.spans {
            if s.chunk != OPEN {
                live[s.chunk as usize] += (s.end - s.start) as usize;
            }
        }
        let (num, den) = COMPACT_BELOW;
        let compact: Vec<bool> = self
            .chunks
            .iter()
            .zip(&live)
            .map(|(chunk, &live)| live * den < chunk.len() * num)
            .collect();
        if compact.contains(&true) {
            for k in 0..self.spans.len() {
                let s = self.spans[k];
                if s.chunk != OPEN && compact[s.chunk as usize] {
                    let start = self.open.len();
                    let bytes = &self.chunks[s.chunk as usize][s.start as usize..s.end as usize];
                    self.open.extend_from_slice(bytes);
                    self.spans[k] = Span {
                        chunk: OPEN,
                        start: offset(start),
                        end: offset(self.open.len()),
                    };
                }
            }
            // Spans before `open_from` may now say OPEN too.
            self.open_from = 0;
        }
        self.close();
        // Chunks no span points at any more are let go; the rest renumbered.
        let mut used = vec![u32::MAX; self.chunks.len()];
        let mut chunks = Vec::new();
        for s in &mut self.spans {
            let c = s.chunk as usize;
            if used[c] == u32::MAX {
                used[c] = offset(chunks.len());
                chunks.push(self.chunks[c].clone());
            }
            s.chunk = used[c];
        }
        self.spans.shrink_to_fit();
        let bytes = self.spans.iter().map(|s| (s.end - s.start) as usize).sum();
        let origin = self.from.map(|records| Origin {
            records,
            of: self.of,
        });
        Rendered {
            chunks,
            spans: self.spans,
            bytes,
            packed: ArcSwapOption::empty(),
            origin: Mutex::new(origin),
        }
    }
}

/// A position in a chunk. A chunk is closed at [`CHUNK_BYTES`], so only a
/// single record of 4 GiB could pass this; no snapshot gets that far.
fn offset(at: usize) -> u32 {
    u32::try_from(at).expect("a record of less than 4 GiB")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rendered(records: &[&str]) -> Rendered {
        let mut r = Renderer::default();
        for text in records {
            r.push_raw(text.as_bytes());
        }
        r.finish()
    }

    fn texts(r: &Rendered) -> Vec<String> {
        (0..r.count())
            .map(|i| String::from_utf8(r.record(i).to_vec()).unwrap())
            .collect()
    }

    /// An earlier version's records.
    const FIVE: [&str; 5] = [
        "{\"a\":1}",
        "{\"b\":2}",
        "{\"c\":3}",
        "{\"d\":4}",
        "{\"e\":5}",
    ];

    /// A record the next version adds.
    const NEW: &str = "{\"x\":9}";

    /// The next version of `old` (`FIVE`) so far: its record `kept`, then [`NEW`].
    fn kept_then_new(old: &Arc<Rendered>, kept: usize) -> Renderer {
        let mut next = Renderer::default();
        next.push_from(old, kept);
        next.push_raw(NEW.as_bytes());
        next
    }

    #[test]
    fn records_taken_over_share_their_chunk_and_read_the_same() {
        let old = Arc::new(rendered(&FIVE));
        let mut next = kept_then_new(&old, 0);
        for i in 1..5 {
            next.push_from(&old, i);
        }
        let new = next.finish();
        let [a, b, c, d, e] = FIVE;
        assert_eq!(texts(&new), [a, NEW, b, c, d, e]);
        assert!(new.shares_chunk_with(&old, 0, 0));
        assert!(new.shares_chunk_with(&old, 5, 4));
        assert!(!new.shares_chunk_with(&old, 1, 0));
        assert_eq!(new.bytes(), old.bytes() + 7);
        let mut page = Vec::new();
        new.write(&[5, 1, 0], &mut page);
        assert_eq!(page, b"{\"e\":5},{\"x\":9},{\"a\":1}");
    }

    #[test]
    fn a_mostly_dead_chunk_is_compacted() {
        let old = Arc::new(rendered(&FIVE));
        let new = kept_then_new(&old, 2).finish();
        assert_eq!(texts(&new), [FIVE[2], NEW]);
        assert!(
            !new.shares_chunk_with(&old, 0, 2),
            "one survivor of five is copied out"
        );
        assert_eq!(new.chunks.len(), 1);
    }

    #[test]
    fn appended_batches_keep_their_order_and_their_shared_chunks() {
        let old = Arc::new(rendered(&["{\"a\":1}", "{\"b\":2}"]));
        let mut first = Renderer::default();
        first.push_raw(b"{\"x\":1}");
        first.push_from(&old, 0);
        let mut second = Renderer::default();
        second.push_from(&old, 1);
        second.push_raw(b"{\"y\":2}");
        first.append(second);
        let new = first.finish();
        assert_eq!(
            texts(&new),
            ["{\"x\":1}", "{\"a\":1}", "{\"b\":2}", "{\"y\":2}"]
        );
        assert!(new.shares_chunk_with(&old, 1, 0) && new.shares_chunk_with(&old, 2, 1));
        assert_eq!(new.chunks.len(), 2, "the old chunk once, and the new one");
    }

    #[test]
    fn large_collections_are_cut_into_chunks() {
        let record = format!("{{\"t\":\"{}\"}}", "x".repeat(100_000));
        let mut r = Renderer::default();
        for _ in 0..200 {
            r.push_raw(record.as_bytes());
        }
        let r = r.finish();
        assert!(r.chunks.len() >= 2);
        assert!((0..200).all(|i| r.record(i) == record.as_bytes()));
    }
}
