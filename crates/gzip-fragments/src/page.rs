//! [`GzipPage`]: a gzip member (RFC 1952) assembled from precompressed
//! fragments and a little text compressed on the spot.
//!
//! Layout: the 10-byte gzip header; one dynamic block per run of pieces
//! that share a Huffman code (the page's own text, such as `{"data":[` or
//! the pagination, is written with the code of the block it falls in);
//! an empty final block; CRC-32 and length of the plain text. The CRC is
//! combined from the records' CRCs, so the plain text is never read.

use crate::bits::BitWriter;
use crate::crc;
use crate::huffman::Code;
use crate::pack::Packed;

/// ID1 ID2 CM=deflate FLG=0 MTIME=0 XFL=0 OS=unknown.
const HEADER: [u8; 10] = [0x1F, 0x8B, 8, 0, 0, 0, 0, 0, 0, 0xFF];

/// A gzip answer being written.
pub struct GzipPage<'a> {
    out: BitWriter,
    /// CRC-32 and length of the plain text so far.
    crc: u32,
    len: u64,
    /// The code of the open block, if one is open.
    code: Option<&'a Code>,
}

impl<'a> GzipPage<'a> {
    /// A page expected to take about `capacity` bytes.
    pub fn new(capacity: usize) -> GzipPage<'a> {
        GzipPage::in_buffer(Vec::new(), capacity)
    }

    /// A page written into `out` (cleared first: a buffer kept from an
    /// earlier answer), expected to take about `capacity` bytes.
    pub fn in_buffer(mut out: Vec<u8>, capacity: usize) -> GzipPage<'a> {
        out.clear();
        out.reserve(capacity + 32);
        out.extend_from_slice(&HEADER);
        GzipPage {
            out: BitWriter::new(out),
            crc: 0,
            len: 0,
            code: None,
        }
    }

    /// Opens a block with `code` unless the open one has it.
    fn block(&mut self, code: &'a Code) {
        if let Some(open) = self.code {
            if std::ptr::eq(open, code) {
                return;
            }
            open.put_end(&mut self.out);
        }
        self.out.put(0, 1); // BFINAL = 0: the final block is an empty one.
        self.out.copy(&code.header, 0, code.header_bits);
        self.code = Some(code);
    }

    /// Writes `text` with the open block's code, or in a block with
    /// `packed`'s code if none is open.
    pub fn text(&mut self, packed: &'a Packed, text: &[u8]) {
        if text.is_empty() {
            return;
        }
        let code = match self.code {
            Some(code) => code,
            None => {
                self.block(&packed.code);
                &packed.code
            }
        };
        literals(code, &mut self.out, text);
        self.crc = crc::update(self.crc, text);
        self.len += text.len() as u64;
    }

    /// Record `i` of `packed`, whose bytes (less the packing's trim) are
    /// `bytes`: its solo fragment, or its bytes as literals if the packing
    /// made none.
    pub fn record(&mut self, packed: &'a Packed, i: usize, bytes: &[u8]) {
        self.block(&packed.code);
        match packed.solo(i) {
            Some((src, from, to, crc, shift)) => {
                self.out.copy(src, from, to);
                self.crc = crc::combine(self.crc, crc, shift);
                self.len += bytes.len() as u64;
            }
            None => self.literal_record(packed, bytes),
        }
    }

    /// Record `i` of `packed`, whose bytes are `record`, less its last
    /// byte (a meeting left open for its notes): its solo fragment but the
    /// literal it ends with, where the packing is
    /// [`openable`](crate::Packing::openable), and its CRC the whole
    /// record's with that byte taken off (one step of the CRC, not a pass
    /// over the record); its bytes as literals otherwise. A page that then
    /// writes that byte as text is the one [`GzipPage::record`] writes, bit
    /// for bit.
    pub fn open_record(&mut self, packed: &'a Packed, i: usize, record: &[u8]) {
        let Some((&last, open)) = record.split_last() else {
            return;
        };
        self.block(&packed.code);
        match packed.solo(i).filter(|_| packed.is_openable()) {
            Some((src, from, to, crc, shift)) => {
                let literal = packed.code.literal[last as usize];
                let end = to - u64::from(literal.len);
                debug_assert_eq!(
                    crate::bits::read(src, end, u32::from(literal.len)),
                    u32::from(literal.code),
                    "record {i}'s solo fragment ends with its last byte"
                );
                self.out.copy(src, from, end);
                let whole = crc::combine(self.crc, crc, shift);
                self.crc = crc::without_last(whole, last);
                self.len += open.len() as u64;
            }
            None => self.literal_record(packed, open),
        }
    }

    /// `bytes`, a record or part of one, as literals of `packed`'s code in
    /// the open block.
    fn literal_record(&mut self, packed: &'a Packed, bytes: &[u8]) {
        literals(&packed.code, &mut self.out, bytes);
        let shift = crc::shift_for(bytes.len() as u64);
        self.crc = crc::combine(self.crc, crc::of(bytes), shift);
        self.len += bytes.len() as u64;
    }

    /// Records `list` of `packed`, comma-separated; `record(i)` is record
    /// `i`'s plain text. A record whose neighbour before it is its
    /// predecessor in a chain order goes as its chained fragment, and a run
    /// of them in one chain as one copy.
    ///
    /// With `chain`, the caller vouches that `list` is a stretch of that
    /// chain order (a main list, a company's list): then no record is
    /// looked up but the first.
    pub fn list<'r>(
        &mut self,
        packed: &'a Packed,
        list: &[u32],
        chain: Option<usize>,
        record: impl Fn(usize) -> &'r [u8],
    ) {
        let Some(&first) = list.first() else {
            return;
        };
        if let Some(chain) = chain
            && let Some(k) = packed.stretch(chain, list)
        {
            self.first(packed, first as usize, chain, k, record(first as usize));
            self.run(packed, chain, k + 1, list.len() - 1);
            return;
        }
        self.record(packed, first as usize, record(first as usize));
        let mut j = 1;
        while j < list.len() {
            let (before, here) = (list[j - 1] as usize, list[j] as usize);
            let Some((chain, start)) = packed.follows(before, here) else {
                self.comma(packed);
                self.record(packed, here, record(here));
                j += 1;
                continue;
            };
            // The run of `chain` from `start` on.
            let run = j;
            j += 1;
            while j < list.len()
                && packed.position(chain, list[j] as usize) == Some(start + j - run)
            {
                j += 1;
            }
            self.run(packed, chain, start, j - run);
        }
    }

    /// Record `i` of `packed` (plain text `bytes`), at position `k` of chain
    /// `chain`, where a run begins: as [`GzipPage::record`], but a record
    /// without a solo fragment, written as literals, takes its CRC from the
    /// chain's prefix CRCs (two multiplications) instead of from its bytes
    /// (a pass over some 600 bytes, the longest step of a page's assembly).
    fn first(&mut self, packed: &'a Packed, i: usize, chain: usize, k: usize, bytes: &[u8]) {
        let len = bytes.len() as u64;
        let start = if k == 0 {
            0
        } else {
            packed.prefix_len(chain, k - 1) + 1
        };
        if packed.solo(i).is_some() || packed.prefix_len(chain, k) - start != len {
            return self.record(packed, i, bytes);
        }
        self.block(&packed.code);
        literals(&packed.code, &mut self.out, bytes);
        // The chain's text up to record k is prefix(k - 1), a comma, the
        // record: the record's CRC is prefix(k) - (prefix(k - 1) + ",")·x^8len,
        // added to the page's: (page + prefix(k - 1) + ",")·x^8len + prefix(k).
        let anchor = match k {
            0 => 0,
            _ => crc::update(packed.prefix_crc(chain, k - 1), b","),
        };
        let shift = crc::shift_for(len);
        self.crc = crc::multiply_fast(shift, self.crc ^ anchor) ^ packed.prefix_crc(chain, k);
        self.len += len;
    }

    /// The `n` chained records of chain `chain` from position `start` on
    /// (`start` ≥ 1: the record before it is the last one written).
    fn run(&mut self, packed: &'a Packed, chain: usize, start: usize, n: usize) {
        if n == 0 {
            return;
        }
        self.block(&packed.code);
        // The record `t` places into the run refers back `t` records at
        // most: the deepest rung that needs no more, in one copy each.
        let mut r = 0;
        while let Some(depth) = packed.depth(chain, r).filter(|&d| d <= n) {
            let next = packed.depth(chain, r + 1).map_or(n, |d| (d - 1).min(n));
            let (src, from, to) = packed.chained(chain, r, start + depth - 1, start + next);
            self.out.copy(src, from, to);
            r += 1;
        }
        // The run's text is the chain's text from the comma after the
        // record before it to its last record: its CRC is prefix(last) -
        // prefix(before)·x^8n, added to the page's: (page +
        // prefix(before))·x^8n + prefix(last).
        let (before, last) = (start - 1, start + n - 1);
        let bytes = packed.prefix_len(chain, last) - packed.prefix_len(chain, before);
        let shift = crc::shift_for(bytes);
        let (anchor, end) = (
            packed.prefix_crc(chain, before),
            packed.prefix_crc(chain, last),
        );
        self.crc = crc::multiply_fast(shift, self.crc ^ anchor) ^ end;
        self.len += bytes;
    }

    fn comma(&mut self, packed: &'a Packed) {
        self.text(packed, b",");
    }

    /// Ends the stream: the open block, an empty final block, the trailer.
    pub fn finish(mut self) -> Vec<u8> {
        if let Some(code) = self.code {
            code.put_end(&mut self.out);
        }
        // BFINAL = 1, BTYPE = 01 (fixed codes), end of block (seven zeros).
        self.out.put(0b011, 10);
        self.out.align();
        self.out.bytes(&self.crc.to_le_bytes());
        self.out.bytes(&(self.len as u32).to_le_bytes());
        self.out.finish()
    }
}

/// `bytes` as literals of `code`, two to a write: a code is 15 bits at
/// most, so two fit the 32 bits a write takes, and the writer's checks are
/// paid once per pair.
fn literals(code: &Code, out: &mut BitWriter, bytes: &[u8]) {
    let table = &code.literal;
    let mut pairs = bytes.chunks_exact(2);
    for pair in &mut pairs {
        let (a, b) = (table[pair[0] as usize], table[pair[1] as usize]);
        out.put(
            u32::from(a.code) | (u32::from(b.code) << a.len),
            u32::from(a.len) + u32::from(b.len),
        );
    }
    for &b in pairs.remainder() {
        code.put_literal(out, b);
    }
}
