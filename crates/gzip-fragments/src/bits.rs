//! Bit streams as deflate packs them: least significant bit first.
//!
//! [`BitWriter`] writes codes and copies runs of bits out of other streams.
//! Precompressed fragments are bit strings of any length, so a page made of
//! them is a series of shifted copies; [`BitWriter::copy`] does one with two
//! loads, two shifts and a store per 8 bytes, about the cost of a `memcpy`
//! of the plain text the fragment stands for, which is three times longer.

/// Every bit stream that [`BitWriter::copy`] reads ends with this many zero
/// bytes, so that it may load whole words past the last bit it copies.
pub const PADDING: usize = 16;

/// A growing bit stream. Whole bytes go to `out`; up to 63 bits wait in
/// `acc` (only fewer than 32 between calls).
#[derive(Default)]
pub struct BitWriter {
    out: Vec<u8>,
    acc: u64,
    pending: u32,
}

impl BitWriter {
    /// A writer appending to `out`, which must end on a byte boundary.
    pub fn new(out: Vec<u8>) -> BitWriter {
        BitWriter {
            out,
            acc: 0,
            pending: 0,
        }
    }

    /// Bits written so far, `out`'s initial bytes included.
    pub fn bit_len(&self) -> u64 {
        self.out.len() as u64 * 8 + u64::from(self.pending)
    }

    /// Writes at most `max_bits` bits with `f`, through a [`BurstWriter`]:
    /// many codes in a row (a fragment's symbols) at a fraction of
    /// [`put`]'s cost each. The burst goes to `f` and back by value, so that its
    /// state can stay in registers.
    ///
    /// [`put`]: BitWriter::put
    #[inline]
    pub fn burst(&mut self, max_bits: usize, f: impl FnOnce(BurstWriter<'_>) -> BurstWriter<'_>) {
        let at = self.out.len();
        // Room for the waiting bits, `max_bits`, and the 8-byte store made
        // at the last byte reached.
        self.out.resize(at + max_bits.div_ceil(8) + 16, 0);
        let burst = BurstWriter {
            buf: &mut self.out[at..],
            at: 0,
            acc: self.acc,
            pending: self.pending,
        };
        let BurstWriter {
            at: written,
            acc,
            pending,
            ..
        } = f(burst);
        self.out.truncate(at + written);
        self.acc = acc;
        self.pending = pending;
    }

    /// Writes the low `len` bits of `bits` (`len` ≤ 32, no higher bits set).
    #[inline]
    pub fn put(&mut self, bits: u32, len: u32) {
        debug_assert!(len <= 32 && (len == 32 || bits >> len == 0));
        self.acc |= u64::from(bits) << self.pending;
        self.pending += len;
        if self.pending >= 32 {
            self.out.extend_from_slice(&(self.acc as u32).to_le_bytes());
            self.acc >>= 32;
            self.pending -= 32;
        }
    }

    /// Moves whole bytes out of the accumulator: fewer than 8 bits wait.
    fn drain_bytes(&mut self) {
        while self.pending >= 8 {
            self.out.push(self.acc as u8);
            self.acc >>= 8;
            self.pending -= 8;
        }
    }

    /// Pads with zero bits to the next byte boundary.
    pub fn align(&mut self) {
        self.drain_bytes();
        if self.pending > 0 {
            self.out.push(self.acc as u8);
            self.acc = 0;
            self.pending = 0;
        }
    }

    /// Appends whole bytes; the stream must be on a byte boundary.
    pub fn bytes(&mut self, bytes: &[u8]) {
        self.drain_bytes();
        debug_assert_eq!(self.pending, 0, "bytes() off a byte boundary");
        self.out.extend_from_slice(bytes);
    }

    /// Copies bits `from..to` of `src`, a stream ending in [`PADDING`] zero
    /// bytes.
    pub fn copy(&mut self, src: &[u8], from: u64, to: u64) {
        debug_assert!(from <= to && to.div_ceil(8) as usize + PADDING <= src.len());
        let mut from = from;
        if to - from < 128 {
            while from < to {
                let n = (to - from).min(32) as u32;
                self.put(read(src, from, n), n);
                from += u64::from(n);
            }
            return;
        }
        // Up to the next byte boundary of the output bit by bit, then whole
        // words: bits `from..from + 64` of `src` become the next 8 bytes.
        self.drain_bytes();
        if self.pending > 0 {
            let n = 8 - self.pending;
            self.put(read(src, from, n), n);
            from += u64::from(n);
            self.drain_bytes();
        }
        let words = ((to - from) / 64) as usize;
        let shift = (from % 8) as u32;
        let start = (from / 8) as usize;
        if shift == 0 {
            self.out.extend_from_slice(&src[start..start + words * 8]);
        } else {
            // Word i of the output is the high bits of source word i and
            // the low bits of word i + 1 (the padding has that word).
            let run = &src[start..start + words * 8 + 8];
            let at = self.out.len();
            self.out.resize(at + words * 8, 0);
            let words_here = run[..words * 8].chunks_exact(8);
            let words_next = run[8..].chunks_exact(8);
            let dest = self.out[at..].chunks_exact_mut(8);
            for ((here, next), out) in words_here.zip(words_next).zip(dest) {
                let here = u64::from_le_bytes(here.try_into().expect("8 bytes"));
                let next = u64::from_le_bytes(next.try_into().expect("8 bytes"));
                out.copy_from_slice(&((here >> shift) | (next << (64 - shift))).to_le_bytes());
            }
        }
        from += words as u64 * 64;
        while from < to {
            let n = (to - from).min(32) as u32;
            self.put(read(src, from, n), n);
            from += u64::from(n);
        }
    }

    /// Pads to a byte boundary and returns the bytes.
    pub fn finish(mut self) -> Vec<u8> {
        self.align();
        self.out
    }
}

/// Where codes go: a [`BitWriter`], or a [`BurstWriter`] of it.
pub trait BitSink {
    /// Writes the low `len` bits of `bits` (`len` ≤ 28, no higher bits set).
    fn put(&mut self, bits: u32, len: u32);
}

impl BitSink for BitWriter {
    #[inline]
    fn put(&mut self, bits: u32, len: u32) {
        BitWriter::put(self, bits, len);
    }
}

/// A [`BitWriter`] with room made: each code is or-ed into the
/// accumulator, which is stored whole (8 bytes) at the first byte not yet
/// full, and the bytes it filled are stepped over; no branch, no capacity
/// to check, and the state in registers.
pub struct BurstWriter<'b> {
    buf: &'b mut [u8],
    /// Bytes complete.
    at: usize,
    acc: u64,
    /// Bits in `acc` (fewer than 32 on entry, fewer than 8 after a put).
    pending: u32,
}

impl BitSink for BurstWriter<'_> {
    #[inline(always)]
    fn put(&mut self, bits: u32, len: u32) {
        debug_assert!(len <= 28 && bits >> len == 0 && self.pending < 32);
        self.acc |= u64::from(bits) << self.pending;
        self.pending += len;
        self.buf[self.at..self.at + 8].copy_from_slice(&self.acc.to_le_bytes());
        let full = self.pending / 8;
        self.at += full as usize;
        self.acc >>= full * 8;
        self.pending -= full * 8;
    }
}

/// Bits `at..at + n` of `src` (`n` ≤ 32), which must have 8 readable bytes
/// from byte `at / 8` on.
#[inline]
pub fn read(src: &[u8], at: u64, n: u32) -> u32 {
    let p = (at / 8) as usize;
    let word = u64::from_le_bytes(src[p..p + 8].try_into().expect("8 bytes"));
    ((word >> (at % 8)) & ((1u64 << n) - 1)) as u32
}
