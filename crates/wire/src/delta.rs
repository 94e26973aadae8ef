//! The delta format (docs/object-storage.md#deltas): how a publish sends a
//! new version of a workspace as the bytes it shares with the version it
//! replaces plus what changed, and how a replica rebuilds the new version's
//! file from the old one, exactly, byte for byte.
//!
//! A delta is gzip of:
//! - `PRDELTA\n`, then a little-endian `u32` length and that many bytes of
//!   JSON, the [`DeltaHeader`]: the format, the base object's SHA-256 (as the
//!   manifest names it) and its uncompressed length and SHA-256;
//! - ops, each a tag byte and LEB128 numbers: `C offset len` copies `len`
//!   bytes of the uncompressed base from `offset`; `I len bytes` inserts
//!   `len` bytes; `E` ends them;
//! - after `E`, the uncompressed target's length (LEB128) and SHA-256 (32
//!   bytes): the result is refused unless it is exactly that.
//!
//! The publisher makes the ops from record spans (`snapshot::digests`): a
//! record whose bytes are in the base is copied from there, and runs of
//! records that follow each other in both files, with the same bytes
//! between them, are one copy; everything else is inserted. So a change of
//! one record in a file of any size is a few ops: a copy up to it, the
//! bytes before it and the record inserted (two ops), a copy of the rest,
//! and the end. The format itself knows nothing of records: a copy is any
//! range of the base.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::os::unix::fs::FileExt;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::snapshot::RecordSpan;

/// The format this build writes and reads.
pub const FORMAT: u32 = 1;

const MAGIC: &[u8; 8] = b"PRDELTA\n";

/// The longest header a reader takes.
const MAX_HEADER: u32 = 64 << 10;

/// Bytes between records (or before the first, after the last) longer than
/// this are never matched with the base's, only inserted.
const MAX_GAP: u64 = 64 << 10;

/// What a delta says before its ops.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DeltaHeader {
    pub delta_format: u32,
    /// The SHA-256 of the base object, as the manifest names it.
    pub base: String,
    /// The base's uncompressed length and SHA-256 (lower-case hex).
    pub base_len: u64,
    pub base_sha256: String,
}

/// What encoding a delta made.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Encoded {
    pub copied: u64,
    pub inserted: u64,
    pub ops: u64,
    /// The target's uncompressed length.
    pub target_len: u64,
}

/// Why a delta cannot be applied.
#[derive(Debug)]
pub enum DeltaError {
    /// Not a delta of this format, cut short, or out of the base's bounds.
    Corrupt(String),
    /// A delta against another base than the one given.
    Mismatch(String),
    /// The result is not the target the delta names.
    Result(String),
    Io(std::io::Error),
}

impl std::fmt::Display for DeltaError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DeltaError::Corrupt(m) => write!(f, "corrupt delta: {m}"),
            DeltaError::Mismatch(m) => write!(f, "delta against another base: {m}"),
            DeltaError::Result(m) => write!(f, "the delta's result is wrong: {m}"),
            DeltaError::Io(e) => write!(f, "{e}"),
        }
    }
}

impl From<std::io::Error> for DeltaError {
    fn from(e: std::io::Error) -> DeltaError {
        DeltaError::Io(e)
    }
}

/// A file's records and the bytes between them, read once front to back:
/// what [`encode`] matches a new version against.
pub struct Layout {
    spans: Vec<RecordSpan>,
    /// Gap `i` is before span `i` (the last after every span): its bytes'
    /// range in `gap_bytes`, or `None` if longer than [`MAX_GAP`].
    gaps: Vec<Option<(usize, usize)>>,
    gap_bytes: Vec<u8>,
    pub len: u64,
    pub sha256: String,
}

impl Layout {
    /// Reads `reader` (the uncompressed file `spans` were found in).
    pub fn read(spans: &[RecordSpan], mut reader: impl Read) -> std::io::Result<Layout> {
        let mut hashing = Sha256AndLen::new();
        let mut layout = Layout {
            spans: spans.to_vec(),
            gaps: Vec::with_capacity(spans.len() + 1),
            gap_bytes: Vec::new(),
            len: 0,
            sha256: String::new(),
        };
        let mut at = 0u64;
        for span in spans {
            let gap = span.offset.checked_sub(at).ok_or_else(overlap)?;
            layout.gap(&mut reader, &mut hashing, Some(gap))?;
            if hashing.copy(&mut reader, span.len, &mut std::io::sink())? != span.len {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            at = span.offset + span.len;
        }
        layout.gap(&mut reader, &mut hashing, None)?;
        layout.len = hashing.len;
        layout.sha256 = hashing.hex();
        Ok(layout)
    }

    fn gap(
        &mut self,
        reader: &mut impl Read,
        hashing: &mut Sha256AndLen,
        len: Option<u64>,
    ) -> std::io::Result<()> {
        let start = self.gap_bytes.len();
        let limit = len.unwrap_or(u64::MAX);
        let mut kept = Vec::new();
        let first = limit.min(MAX_GAP + 1);
        let mut got = hashing.copy(&mut reader.by_ref().take(first), first, &mut kept)?;
        if got > MAX_GAP {
            got += hashing.copy(reader, limit - got, &mut std::io::sink())?;
            self.gaps.push(None);
        } else {
            self.gap_bytes.extend_from_slice(&kept);
            self.gaps.push(Some((start, self.gap_bytes.len())));
        }
        if len.is_some_and(|len| got != len) {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        Ok(())
    }

    fn gap_at(&self, i: usize) -> Option<&[u8]> {
        let (start, end) = self.gaps.get(i).copied().flatten()?;
        Some(&self.gap_bytes[start..end])
    }

    /// Where gap `i` starts in the file.
    fn gap_start(&self, i: usize) -> u64 {
        i.checked_sub(1)
            .map_or(0, |p| self.spans[p].offset + self.spans[p].len)
    }
}

fn overlap() -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, "record spans overlap")
}

/// Writes the delta (uncompressed: the caller gzips `out`) that turns
/// `base` into the file `new` (uncompressed, read front to back) whose
/// records are at `spans`.
pub fn encode(
    header: &DeltaHeader,
    base: &Layout,
    spans: &[RecordSpan],
    mut new: impl Read,
    out: &mut impl Write,
) -> std::io::Result<Encoded> {
    let json = serde_json::to_vec(header).map_err(std::io::Error::other)?;
    out.write_all(MAGIC)?;
    out.write_all(&(json.len() as u32).to_le_bytes())?;
    out.write_all(&json)?;
    let mut by_digest: HashMap<_, usize> = HashMap::with_capacity(base.spans.len());
    for (j, span) in base.spans.iter().enumerate().rev() {
        by_digest.insert((span.digest, span.len), j);
    }
    let mut w = Ops {
        out,
        hashing: Sha256AndLen::new(),
        run: None,
        encoded: Encoded::default(),
    };
    let mut at = 0u64;
    // The base record the current run ended with.
    let mut last: Option<usize> = None;
    for span in spans {
        let gap_len = span.offset.checked_sub(at).ok_or_else(overlap)?;
        let gap = w.read_gap(&mut new, gap_len)?;
        let next = last.map(|l| l + 1).filter(|&j| {
            base.spans
                .get(j)
                .is_some_and(|b| (b.digest, b.len) == (span.digest, span.len))
                && gap.as_deref().is_some_and(|g| base.gap_at(j) == Some(g))
        });
        let found = next.or_else(|| by_digest.get(&(span.digest, span.len)).copied());
        match (next, found) {
            (Some(j), _) => {
                w.extend(gap_len + span.len, &gap, &mut new)?;
                last = Some(j);
            }
            (None, Some(j)) => {
                w.close()?;
                if gap.as_deref().is_some_and(|g| base.gap_at(j) == Some(g)) {
                    // The bytes before the record are the base's too.
                    w.run = Some((base.gap_start(j), 0));
                    w.extend(gap_len + span.len, &gap, &mut new)?;
                } else {
                    w.insert(gap, gap_len, &mut new)?;
                    w.run = Some((base.spans[j].offset, 0));
                    w.extend(span.len, &None, &mut new)?;
                }
                last = Some(j);
            }
            (None, None) => {
                w.close()?;
                last = None;
                w.insert(gap, gap_len, &mut new)?;
                w.insert(None, span.len, &mut new)?;
            }
        }
        at = span.offset + span.len;
    }
    // The tail: read to the end.
    let mut tail = Vec::new();
    let got = w
        .hashing
        .copy(&mut new.by_ref().take(MAX_GAP + 1), MAX_GAP + 1, &mut tail)?;
    let tail_matches = got <= MAX_GAP
        && match last {
            Some(l) => l + 1 == base.spans.len() && base.gap_at(l + 1) == Some(&tail[..]),
            None => spans.is_empty() && base.spans.is_empty() && base.gap_at(0) == Some(&tail[..]),
        };
    if tail_matches {
        match &mut w.run {
            Some((_, len)) => *len += got,
            None => w.run = Some((0, got)),
        }
        w.encoded.copied += got;
        w.close()?;
    } else {
        w.close()?;
        w.op_insert(&tail)?;
        // A tail longer than a gap is read on, inserted a chunk at a time.
        let mut chunk = vec![0u8; 1 << 20];
        loop {
            let n = read_some(&mut new, &mut chunk)?;
            if n == 0 {
                break;
            }
            w.hashing.update(&chunk[..n]);
            w.op_insert(&chunk[..n])?;
        }
    }
    let mut encoded = w.encoded;
    encoded.target_len = w.hashing.len;
    let digest = w.hashing.hasher.finalize();
    let out = w.out;
    out.write_all(b"E")?;
    write_number(out, encoded.target_len)?;
    out.write_all(&digest)?;
    encoded.ops += 1;
    Ok(encoded)
}

/// The op writer of [`encode`]: a copy run grows until something breaks it.
struct Ops<'o, W: Write> {
    out: &'o mut W,
    hashing: Sha256AndLen,
    /// The copy being made: from where in the base, and how long so far.
    run: Option<(u64, u64)>,
    encoded: Encoded,
}

impl<W: Write> Ops<'_, W> {
    /// The next `len` bytes of the new file (a gap), kept if short enough
    /// to compare; a longer one is left in the reader (inserted later).
    fn read_gap(&mut self, new: &mut impl Read, len: u64) -> std::io::Result<Option<Vec<u8>>> {
        if len > MAX_GAP {
            return Ok(None);
        }
        let mut gap = Vec::with_capacity(len as usize);
        let got = self
            .hashing
            .copy(&mut new.by_ref().take(len), len, &mut gap)?;
        if got != len {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        Ok(Some(gap))
    }

    /// The run grows by `len` bytes of the new file: the gap (read
    /// already, if `gap` holds it) and the record, read and hashed now.
    fn extend(
        &mut self,
        len: u64,
        gap: &Option<Vec<u8>>,
        new: &mut impl Read,
    ) -> std::io::Result<()> {
        let read_now = len - gap.as_ref().map_or(0, |g| g.len() as u64);
        let got = self.hashing.copy(
            &mut new.by_ref().take(read_now),
            read_now,
            &mut std::io::sink(),
        )?;
        if got != read_now {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        if let Some((_, run)) = &mut self.run {
            *run += len;
        }
        self.encoded.copied += len;
        Ok(())
    }

    /// Ends the run, writing its copy.
    fn close(&mut self) -> std::io::Result<()> {
        if let Some((from, len)) = self.run.take()
            && len > 0
        {
            self.out.write_all(b"C")?;
            write_number(self.out, from)?;
            write_number(self.out, len)?;
            self.encoded.ops += 1;
        }
        Ok(())
    }

    /// Inserts a gap (`held`, or `len` bytes still in the reader).
    fn insert(
        &mut self,
        held: Option<Vec<u8>>,
        len: u64,
        new: &mut impl Read,
    ) -> std::io::Result<()> {
        if let Some(bytes) = held {
            return self.op_insert(&bytes);
        }
        let mut left = len;
        let mut chunk = vec![0u8; (1 << 20).min(len as usize)];
        while left > 0 {
            let n = (chunk.len() as u64).min(left) as usize;
            new.read_exact(&mut chunk[..n])?;
            self.hashing.update(&chunk[..n]);
            self.op_insert(&chunk[..n])?;
            left -= n as u64;
        }
        Ok(())
    }

    fn op_insert(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        if bytes.is_empty() {
            return Ok(());
        }
        self.out.write_all(b"I")?;
        write_number(self.out, bytes.len() as u64)?;
        self.out.write_all(bytes)?;
        self.encoded.inserted += bytes.len() as u64;
        self.encoded.ops += 1;
        Ok(())
    }
}

/// What applying a delta wrote.
#[derive(Debug)]
pub struct AppliedDelta {
    pub len: u64,
    pub sha256: String,
}

/// Reads a delta's header (after which `delta` is at its ops).
pub fn read_header(delta: &mut impl Read) -> Result<DeltaHeader, DeltaError> {
    let mut magic = [0u8; 8];
    read_exact(delta, &mut magic)?;
    if &magic != MAGIC {
        return Err(DeltaError::Corrupt("not a delta".into()));
    }
    let mut len = [0u8; 4];
    read_exact(delta, &mut len)?;
    let len = u32::from_le_bytes(len);
    if len > MAX_HEADER {
        return Err(DeltaError::Corrupt(format!("a header of {len} bytes")));
    }
    let mut json = vec![0u8; len as usize];
    read_exact(delta, &mut json)?;
    let header: DeltaHeader = serde_json::from_slice(&json)
        .map_err(|e| DeltaError::Corrupt(format!("its header: {e}")))?;
    if header.delta_format != FORMAT {
        return Err(DeltaError::Corrupt(format!(
            "delta_format {}; this build reads {FORMAT}",
            header.delta_format
        )));
    }
    Ok(header)
}

impl DeltaHeader {
    /// Refuses a delta made against anything but the base object `object`
    /// whose uncompressed bytes are `len` long with SHA-256 `sha256`.
    pub fn check_base(&self, object: &str, len: u64, sha256: &str) -> Result<(), DeltaError> {
        if (self.base.as_str(), self.base_len, self.base_sha256.as_str()) != (object, len, sha256) {
            return Err(DeltaError::Mismatch(format!(
                "it is against object {} ({} bytes, sha256 {}), not {object} ({len} bytes, sha256 {sha256})",
                self.base, self.base_len, self.base_sha256
            )));
        }
        Ok(())
    }
}

/// Whether `n` more bytes after `len` stay within `at_most`.
fn within(len: u64, n: u64, at_most: u64) -> Result<(), DeltaError> {
    if len.checked_add(n).is_none_or(|end| end > at_most) {
        return Err(DeltaError::Corrupt(format!(
            "it writes past the {at_most} bytes its result may have"
        )));
    }
    Ok(())
}

/// Writes to `out` the target of `delta` (uncompressed, its header read
/// already by [`read_header`]) applied to `base`, the uncompressed base
/// file of `base_len` bytes. The result is checked against the length and
/// SHA-256 the delta ends with, and never grows past `at_most` bytes: the
/// delta is not covered by a signature, so whoever can write the bucket
/// could otherwise make it fill the disk before that check.
pub fn apply(
    base: &std::fs::File,
    base_len: u64,
    delta: &mut impl Read,
    out: &mut impl Write,
    at_most: u64,
) -> Result<AppliedDelta, DeltaError> {
    let mut hasher = Sha256::new();
    let mut len = 0u64;
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let mut tag = [0u8; 1];
        read_exact(delta, &mut tag)?;
        match tag[0] {
            b'C' => {
                let (from, n) = (read_number(delta)?, read_number(delta)?);
                within(len, n, at_most)?;
                if from.checked_add(n).is_none_or(|end| end > base_len) {
                    return Err(DeltaError::Corrupt(format!(
                        "a copy of {n} bytes at {from}, past the base's {base_len}"
                    )));
                }
                let mut done = 0u64;
                while done < n {
                    let step = (buf.len() as u64).min(n - done) as usize;
                    base.read_exact_at(&mut buf[..step], from + done)?;
                    hasher.update(&buf[..step]);
                    out.write_all(&buf[..step])?;
                    done += step as u64;
                }
                len += n;
            }
            b'I' => {
                let n = read_number(delta)?;
                within(len, n, at_most)?;
                let mut done = 0u64;
                while done < n {
                    let step = (buf.len() as u64).min(n - done) as usize;
                    read_exact(delta, &mut buf[..step])?;
                    hasher.update(&buf[..step]);
                    out.write_all(&buf[..step])?;
                    done += step as u64;
                }
                len += n;
            }
            b'E' => break,
            other => return Err(DeltaError::Corrupt(format!("an op tagged {other:#04x}"))),
        }
    }
    let expected_len = read_number(delta)?;
    let mut expected = [0u8; 32];
    read_exact(delta, &mut expected)?;
    if delta.read(&mut [0u8; 1])? != 0 {
        return Err(DeltaError::Corrupt("bytes after its end".into()));
    }
    let got = hasher.finalize();
    if len != expected_len || got[..] != expected[..] {
        return Err(DeltaError::Result(format!(
            "{len} bytes with sha256 {}, not {expected_len} bytes with sha256 {}",
            hex(&got),
            hex(&expected)
        )));
    }
    Ok(AppliedDelta {
        len,
        sha256: hex(&got),
    })
}

fn read_exact(reader: &mut impl Read, buf: &mut [u8]) -> Result<(), DeltaError> {
    reader.read_exact(buf).map_err(|e| match e.kind() {
        std::io::ErrorKind::UnexpectedEof => DeltaError::Corrupt("cut short".into()),
        // A gzip stream that does not decode is a corrupt delta too.
        std::io::ErrorKind::InvalidInput | std::io::ErrorKind::InvalidData => {
            DeltaError::Corrupt(e.to_string())
        }
        _ => DeltaError::Io(e),
    })
}

fn write_number(out: &mut impl Write, mut n: u64) -> std::io::Result<()> {
    let mut bytes = [0u8; 10];
    let mut i = 0;
    loop {
        let low = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            bytes[i] = low;
            return out.write_all(&bytes[..=i]);
        }
        bytes[i] = low | 0x80;
        i += 1;
    }
}

fn read_number(reader: &mut impl Read) -> Result<u64, DeltaError> {
    let mut n = 0u64;
    for shift in (0..64).step_by(7) {
        let mut byte = [0u8; 1];
        read_exact(reader, &mut byte)?;
        // The tenth byte holds bit 63 alone: anything more would be lost
        // in the shift, and a delta is refused rather than misread.
        if shift == 63 && byte[0] & 0x7f > 1 {
            return Err(DeltaError::Corrupt("a number of more than 64 bits".into()));
        }
        n |= u64::from(byte[0] & 0x7f) << shift;
        if byte[0] & 0x80 == 0 {
            return Ok(n);
        }
    }
    Err(DeltaError::Corrupt("a number of more than 64 bits".into()))
}

fn read_some(reader: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    loop {
        match reader.read(buf) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            other => return other,
        }
    }
}

/// SHA-256 and length of what goes through.
struct Sha256AndLen {
    hasher: Sha256,
    len: u64,
}

impl Sha256AndLen {
    fn new() -> Sha256AndLen {
        Sha256AndLen {
            hasher: Sha256::new(),
            len: 0,
        }
    }

    fn update(&mut self, bytes: &[u8]) {
        self.hasher.update(bytes);
        self.len += bytes.len() as u64;
    }

    /// Copies up to `len` bytes of `reader` to `out`, hashing them: how
    /// many there were.
    fn copy(
        &mut self,
        reader: &mut impl Read,
        len: u64,
        out: &mut impl Write,
    ) -> std::io::Result<u64> {
        let mut buf = [0u8; 64 << 10];
        let mut done = 0u64;
        while done < len {
            let want = (buf.len() as u64).min(len - done) as usize;
            let n = read_some(reader, &mut buf[..want])?;
            if n == 0 {
                break;
            }
            self.update(&buf[..n]);
            out.write_all(&buf[..n])?;
            done += n as u64;
        }
        Ok(done)
    }

    fn hex(&self) -> String {
        hex(&self.hasher.clone().finalize())
    }
}

/// `bytes` in lower-case hex, as the manifest, deltas and signatures write
/// digests.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests;
