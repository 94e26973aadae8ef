//! Records rendered to JSON once, at load, and (when precompression is
//! on) compressed once for gzip answers.

use std::sync::OnceLock;

use gzip_fragments::{Packed, RecordBytes};

use crate::os;

/// How many records ahead of its copy a record is prefetched.
/// Measured on random 50-task pages of the large dataset (then on huge
/// pages): 6.1-6.5 us a page without, 5.8-6.1 us with 8 (4 and 16 are no
/// better).
/// Such a page is some 450 cache lines from DRAM: the misses are what it
/// costs, and prefetching only overlaps a few more of them.
const PREFETCH_AHEAD: usize = 8;

/// Records of one kind, each rendered as `{"id":...,"attributes":{...}}`,
/// back to back in one buffer, in the order the snapshot listed them. Lists
/// are orders of record indices over it: a page copies its records out of
/// here, one `memcpy` each.
pub struct Rendered {
    buf: Vec<u8>,
    /// `ends[i]` is one past the last byte of record `i`.
    ends: Vec<usize>,
    /// The same records as deflate fragments, for gzip answers, once the
    /// dataset's precompression has made them. Boxed: a `Packed` holds its
    /// code tables inline (about 1.4 KB), which eight collections of every
    /// workspace would pay for whether or not they are ever packed.
    packed: OnceLock<Box<Packed>>,
}

impl RecordBytes for Rendered {
    fn count(&self) -> usize {
        self.ends.len()
    }

    fn record(&self, i: usize) -> &[u8] {
        Rendered::record(self, i)
    }
}

impl Rendered {
    /// The JSON of record `i`.
    pub fn record(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.buf[start..self.ends[i]]
    }

    /// Bytes of all the records.
    pub fn bytes(&self) -> usize {
        self.buf.len()
    }

    /// The length of record `i`.
    #[inline]
    pub fn len_of(&self, i: usize) -> usize {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        self.ends[i] - start
    }

    /// Moves the records onto huge pages (see [`os`]), while
    /// `keep_going` says so.
    pub fn collapse_to_huge_pages(&self, keep_going: &dyn Fn() -> bool) {
        os::collapse_to_huge_pages_while(&self.buf, keep_going);
        os::collapse_to_huge_pages_while(&self.ends, keep_going);
    }

    /// Keeps the records' deflate fragments (once; later ones are dropped).
    pub fn set_packed(&self, packed: Packed) {
        let _ = self.packed.set(Box::new(packed));
    }

    /// The records' deflate fragments, if precompressed.
    pub fn packed(&self) -> Option<&Packed> {
        self.packed.get().map(|packed| &**packed)
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
        if let (Some(c), Some(packed)) = (chain, self.packed())
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
        let mut out = Renderer::with_capacity(indices.len(), self.size(indices));
        for &i in indices {
            out.push_raw(self.record(i as usize));
        }
        out.finish()
    }
}

/// Renders records one by one into a [`Rendered`].
#[derive(Default)]
pub struct Renderer {
    buf: Vec<u8>,
    ends: Vec<usize>,
}

impl Renderer {
    pub fn with_capacity(records: usize, bytes: usize) -> Renderer {
        Renderer {
            buf: Vec::with_capacity(bytes),
            ends: Vec::with_capacity(records),
        }
    }

    /// Appends the record that `json` writes. A record is a JSON object:
    /// `/meetings/{id}?include=notes` inserts `notes` before its final `}`.
    pub fn push_with(&mut self, json: impl FnOnce(&mut Vec<u8>)) {
        let start = self.buf.len();
        json(&mut self.buf);
        debug_assert!(
            self.buf.get(start) == Some(&b'{') && self.buf.last() == Some(&b'}'),
            "a record is a JSON object"
        );
        self.ends.push(self.buf.len());
    }

    /// Appends every record of `other` after this one's.
    pub fn append(&mut self, other: Renderer) {
        let offset = self.buf.len();
        self.buf.extend_from_slice(&other.buf);
        self.ends
            .extend(other.ends.into_iter().map(|end| end + offset));
    }

    fn push_raw(&mut self, record: &[u8]) {
        self.buf.extend_from_slice(record);
        self.ends.push(self.buf.len());
    }

    pub fn finish(mut self) -> Rendered {
        self.buf.shrink_to_fit();
        self.ends.shrink_to_fit();
        Rendered {
            buf: self.buf,
            ends: self.ends,
            packed: OnceLock::new(),
        }
    }
}
