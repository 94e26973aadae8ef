//! The streaming parse: a snapshot read through a window of a few
//! megabytes, never held whole.
//!
//! A small structural scanner walks the top-level object and the arrays of
//! records, finding where each value ends (it tracks strings and nesting,
//! nothing else). Each record is then walked once from its bytes to its
//! served form ([`super::onepass`]); one the walk declines is parsed by
//! serde_json, with the same wire types, checks and builder calls as the
//! whole-buffer parse ([`super::parse`](mod@super::parse)). A first load on one thread walks
//! each record where it lies in the window, and the walk finds its end:
//! the scanner only runs where the walk does not. Header members are
//! parsed by serde_json. A record's bytes are dropped from the window once
//! it is rendered, so a load holds the window and what the builder keeps.
//!
//! This pass only has to be right on good files. On anything it does not
//! accept (a syntax error, a wrong type, a failed check, bytes it cannot
//! read) it gives up, and the caller runs the whole-buffer parse, which
//! finds the same first problem with the same message as it always has
//! (docs/snapshot-format.md#order-of-reporting). If that parse accepts the
//! file after all, its result is used: the fast path can cost speed, never
//! correctness.

use std::hash::Hasher;
use std::io::Read;

use super::batches::{RecordSink, Workers, worker_count};
use super::format::JsonText;
use super::onepass;
use super::parse::{SnapshotHeader, Top};
use super::records::{self, WireRecord, WithRecordType, with_record_type};
use super::structure::Nesting;
use crate::store::{Builder, BytesDigest, Collection, Threads};

/// How much the window reads at a time.
const CHUNK: usize = 1 << 20;

/// Why the streaming pass gave up; the whole-buffer parse says it properly.
#[derive(Debug)]
pub struct GaveUp;

/// What a streaming pass read: the header, and a hash of the content (every
/// value's bytes, so layout whitespace does not count) for ETags.
pub struct Streamed {
    pub header: SnapshotHeader,
    pub content_hash: u64,
}

/// Parses a snapshot from `reader`, handing each record to `builder`;
/// where `threads` gives more than one, records are built on the others
/// while this one reads on ([`super::batches`]).
pub fn parse_stream(
    file: &str,
    reader: impl Read,
    size_hint: u64,
    builder: &mut Builder,
    threads: &dyn Threads,
    progress: &mut dyn FnMut(Collection, usize),
) -> Result<Streamed, GaveUp> {
    match worker_count(size_hint, threads.count()) {
        0 => scan(file, reader, RecordSink::Inline(builder), progress),
        count => {
            let (workers, jobs) = Workers::start(file, count, builder);
            let mut streamed = Err(GaveUp);
            let reading = || streamed = scan(file, reader, RecordSink::Workers(workers), progress);
            threads.run(Box::new(reading), jobs);
            streamed
        }
    }
}

/// The pass itself: each record's bytes go to `sink` as the scanner finds
/// them (to be built, or only hashed: [`super::digests`](mod@super::digests)), and the header
/// is checked at the end.
pub fn scan<'b>(
    file: &str,
    reader: impl Read,
    sink: RecordSink<'_, 'b>,
    progress: &'b mut dyn FnMut(Collection, usize),
) -> Result<Streamed, GaveUp> {
    scan_within(file, reader, sink, progress, usize::MAX)
}

/// [`scan`] holding at most `max_value` bytes of one value (a record, a
/// header member) in its window, besides the chunk being read: it gives up
/// on a larger one, so that what the pass costs is bounded whatever the
/// file holds.
pub fn scan_within<'b>(
    file: &str,
    reader: impl Read,
    sink: RecordSink<'_, 'b>,
    progress: &'b mut dyn FnMut(Collection, usize),
    max_value: usize,
) -> Result<Streamed, GaveUp> {
    let mut window = ReadWindow::new(reader);
    window.max = max_value;
    let walk_first = matches!(&sink, RecordSink::Inline(builder) if builder.previous().is_none());
    let mut s = StreamingPass {
        walk_first,
        window,
        file,
        sink,
        progress,
        records: 0,
        unreported: 0,
        hash: rustc_hash::FxHasher::default(),
    };
    let top = s.document()?;
    s.sink.finish()?;
    Ok(Streamed {
        // The same checks, in the same order, as the whole-buffer parse.
        header: top.check(file).map_err(|_| GaveUp)?,
        content_hash: s.hash.finish(),
    })
}

/// Bytes of records after which progress is reported even before
/// [`super::parse::PROGRESS_EVERY`] records (about 0.1 ms of parsing).
const PROGRESS_BYTES: usize = 32 * 1024;

struct StreamingPass<'f, 's, 'b, R> {
    window: ReadWindow<R>,
    /// Whether records are walked where they lie ([`StreamingPass::walk_in_window`]).
    walk_first: bool,
    file: &'f str,
    sink: RecordSink<'s, 'b>,
    progress: &'b mut dyn FnMut(Collection, usize),
    records: usize,
    /// Bytes of records read since `progress` was last told.
    unreported: usize,
    hash: rustc_hash::FxHasher,
}

impl<R: Read> StreamingPass<'_, '_, '_, R> {
    /// `{ "key": value, ... }` and nothing after it but blanks.
    fn document(&mut self) -> Result<Top, GaveUp> {
        let mut top = Top::default();
        let mut seen: Vec<String> = Vec::new();
        self.expect(b'{')?;
        if self.window.skip_blanks()? == Some(b'}') {
            self.window.advance(1);
        } else {
            loop {
                let key = self.key()?;
                if seen.contains(&key) {
                    return Err(GaveUp);
                }
                self.expect(b':')?;
                self.window.skip_blanks()?;
                self.member(&key, &mut top)?;
                seen.push(key);
                match self.window.skip_blanks()? {
                    Some(b',') => self.window.advance(1),
                    Some(b'}') => {
                        self.window.advance(1);
                        break;
                    }
                    _ => return Err(GaveUp),
                }
            }
        }
        match self.window.skip_blanks()? {
            None => Ok(top),
            Some(_) => Err(GaveUp),
        }
    }

    fn expect(&mut self, byte: u8) -> Result<(), GaveUp> {
        if self.window.skip_blanks()? != Some(byte) {
            return Err(GaveUp);
        }
        self.window.advance(1);
        Ok(())
    }

    /// A member name: a JSON string, escapes and all.
    fn key(&mut self) -> Result<String, GaveUp> {
        if self.window.skip_blanks()? != Some(b'"') {
            return Err(GaveUp);
        }
        let len = self.window.value_len()?;
        let key = serde_json::from_slice::<JsonText<'_>>(self.window.peek(len))
            .map(|t| t.as_str().to_owned())
            .map_err(|_| GaveUp)?;
        self.window.advance(len);
        Ok(key)
    }

    /// One top-level member's value.
    fn member(&mut self, key: &str, top: &mut Top) -> Result<(), GaveUp> {
        if let Some(collection) = Collection::from_name(key) {
            return self.collection(collection);
        }
        let len = self.window.value_len()?;
        let bytes = self.window.peek(len);
        self.hash.write(bytes);
        self.hash.write_u8(0);
        let mut value = serde_json::Deserializer::from_slice(bytes);
        top.read(key, &mut value)
            .and_then(|_| value.end())
            .map_err(|_| GaveUp)?;
        self.window.advance(len);
        Ok(())
    }

    /// `null` (no records), or an array of records.
    fn collection(&mut self, collection: Collection) -> Result<(), GaveUp> {
        match self.window.skip_blanks()? {
            Some(b'n') => {
                let len = self.window.value_len()?;
                if self.window.peek(len) != b"null" {
                    return Err(GaveUp);
                }
                self.window.advance(len);
                return Ok(());
            }
            Some(b'[') => self.window.advance(1),
            _ => return Err(GaveUp),
        }
        if self.window.skip_blanks()? == Some(b']') {
            self.window.advance(1);
            return Ok(());
        }
        let mut index = 0;
        loop {
            self.window.skip_blanks()?;
            let len = match self.walk_in_window(collection) {
                Some(len) => len,
                None => {
                    let len = self.window.value_len()?;
                    self.record(collection, index, len)?;
                    len
                }
            };
            self.window.advance(len);
            index += 1;
            self.records += 1;
            self.unreported += len;
            // Every few records, or sooner where records are large (a
            // meeting's transcript): each report is a chance to pace.
            if self.records.is_multiple_of(super::parse::PROGRESS_EVERY)
                || self.unreported >= PROGRESS_BYTES
            {
                self.unreported = 0;
                (self.progress)(collection, self.records);
            }
            match self.window.skip_blanks()? {
                Some(b',') => self.window.advance(1),
                Some(b']') => {
                    self.window.advance(1);
                    return Ok(());
                }
                _ => return Err(GaveUp),
            }
        }
    }

    /// Where records are built on this thread from nothing before them (a
    /// first load: no version to take records over from), the record at
    /// the window's start walked and built where it lies
    /// ([`onepass::build_first`]), which finds its end too: no scan of its
    /// structure first. Its length, or `None` to take the way every record
    /// takes (the walk declined it, or the window holds only part of it).
    fn walk_in_window(&mut self, collection: Collection) -> Option<usize> {
        let RecordSink::Inline(builder) = &mut self.sink else {
            return None;
        };
        if !self.walk_first {
            return None;
        }
        let len = onepass::build_first(collection, self.window.rest(), builder).ok()?;
        let bytes = self.window.peek(len);
        self.hash.write(bytes);
        self.hash.write_u8(0);
        Some(len)
    }

    /// Hands the record in the next `len` bytes to the sink.
    fn record(&mut self, collection: Collection, index: usize, len: usize) -> Result<(), GaveUp> {
        let offset = self.window.start + self.window.pos as u64;
        let bytes = self.window.peek(len);
        self.hash.write(bytes);
        self.hash.write_u8(0);
        self.sink
            .record(self.file, collection, index, offset, bytes)
    }
}

/// Parses, checks and builds one record of `collection` from `bytes`,
/// unless the version this load replaces has a record of the same bytes,
/// which the builder then takes over (`store::Previous`).
pub fn build_record(
    file: &str,
    collection: Collection,
    index: usize,
    bytes: &[u8],
    builder: &mut Builder,
) -> Result<(), GaveUp> {
    let digest = digest(bytes);
    build_digested(file, collection, index, bytes, digest, builder)
}

/// The digest by which a record's bytes are matched with the version
/// before's ([`crate::store::Previous`]).
pub fn digest(bytes: &[u8]) -> BytesDigest {
    xxhash_rust::xxh3::xxh3_128(bytes)
}

/// [`build_record`] of a record whose bytes' digest is known.
pub fn build_digested(
    file: &str,
    collection: Collection,
    index: usize,
    bytes: &[u8],
    digest: BytesDigest,
    builder: &mut Builder,
) -> Result<(), GaveUp> {
    if builder.reuse(collection, index, digest) {
        return Ok(());
    }
    builder.digest_next(digest);
    if onepass::build(collection, bytes, builder).is_ok() {
        return Ok(());
    }
    // Declined: serde_json and the wire types take the record, or give up
    // on it (the whole-buffer parse then says why).
    build_parsed(file, collection, index, bytes, builder)
}

/// Parses, checks and builds one record of `collection` as the wire types
/// read it (serde_json, `records.rs`): the reference that the one-pass
/// walk is held to, and the path of every record that walk declines.
pub(super) fn build_parsed(
    file: &str,
    collection: Collection,
    index: usize,
    bytes: &[u8],
    builder: &mut Builder,
) -> Result<(), GaveUp> {
    let record = UnparsedRecord {
        file,
        index,
        bytes,
        builder,
    };
    with_record_type(collection, record)
}

/// One record's bytes, to be parsed as its collection's type, checked and
/// built.
struct UnparsedRecord<'a, 'de> {
    file: &'a str,
    index: usize,
    bytes: &'de [u8],
    builder: &'a mut Builder,
}

impl<'de> WithRecordType<'de> for UnparsedRecord<'_, 'de> {
    type Output = Result<(), GaveUp>;

    fn with<P: WireRecord<'de>>(self, collection: Collection) -> Result<(), GaveUp> {
        // UTF-8 checked once for the whole record (std's check runs a
        // word at a time over ASCII), not string by string as
        // `from_slice` would.
        let text = std::str::from_utf8(self.bytes).map_err(|_| GaveUp)?;
        let parsed: P = serde_json::from_str(text).map_err(|_| GaveUp)?;
        records::build(self.file, collection, self.index, &parsed, self.builder).map_err(|_| GaveUp)
    }
}

/// A window over a reader: the bytes not yet consumed, refilled a chunk at
/// a time; consumed bytes are dropped at the next refill.
struct ReadWindow<R> {
    reader: R,
    buf: Vec<u8>,
    /// The first byte not yet consumed.
    pos: usize,
    /// Where `buf[0]` is in the input, so that a record's offset is known
    /// (`super::digests` gives each record's span).
    start: u64,
    eof: bool,
    /// The most bytes not yet consumed that a refill may add to: past it
    /// the window gives up rather than grow ([`scan_within`]).
    max: usize,
}

impl<R: Read> ReadWindow<R> {
    fn new(reader: R) -> ReadWindow<R> {
        ReadWindow {
            reader,
            buf: Vec::with_capacity(2 * CHUNK),
            pos: 0,
            start: 0,
            eof: false,
            max: usize::MAX,
        }
    }

    /// Drops the consumed bytes and reads one more chunk. Returns how far
    /// the bytes moved (so scans can adjust their indices) and whether any
    /// were read (`false` at the end of the input).
    fn fill(&mut self) -> Result<(usize, bool), GaveUp> {
        let shift = self.pos;
        if shift > 0 {
            self.buf.drain(..shift);
            self.pos = 0;
            self.start += shift as u64;
        }
        if self.eof {
            return Ok((shift, false));
        }
        let len = self.buf.len();
        if len > self.max {
            // One value larger than the pass may hold.
            return Err(GaveUp);
        }
        self.buf.reserve(CHUNK);
        // read_to_end fills the spare capacity without zeroing it first.
        let read = loop {
            match (&mut self.reader)
                .take(CHUNK as u64)
                .read_to_end(&mut self.buf)
            {
                Ok(n) => break n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => {
                    self.buf.truncate(len);
                    return Err(GaveUp);
                }
            }
        };
        self.eof = read == 0;
        Ok((shift, read > 0))
    }

    /// The bytes not yet consumed, as many as the window holds.
    fn rest(&self) -> &[u8] {
        &self.buf[self.pos..]
    }

    /// The next `len` bytes (which a scan has made sure are there).
    fn peek(&self, len: usize) -> &[u8] {
        &self.buf[self.pos..self.pos + len]
    }

    fn advance(&mut self, len: usize) {
        self.pos += len;
    }

    /// Skips JSON blanks; the next byte, or `None` at the end of the input.
    fn skip_blanks(&mut self) -> Result<Option<u8>, GaveUp> {
        loop {
            while let Some(&b) = self.buf.get(self.pos) {
                if !matches!(b, b' ' | b'\n' | b'\t' | b'\r') {
                    return Ok(Some(b));
                }
                self.pos += 1;
            }
            if !self.fill()?.1 {
                return Ok(None);
            }
        }
    }

    /// The length of the JSON value that starts at `pos`: a string, an
    /// object or array (strings and nesting tracked), or a scalar up to the
    /// next delimiter. Its content is left for serde_json to check.
    fn value_len(&mut self) -> Result<usize, GaveUp> {
        if matches!(self.buf.get(self.pos), Some(b'{' | b'[')) {
            return self.nested_len();
        }
        self.plain_len()
    }

    /// [`ReadWindow::value_len`] of an object or array, 64 bytes at a time
    /// ([`super::structure`]): every record.
    fn nested_len(&mut self) -> Result<usize, GaveUp> {
        let mut nesting = Nesting::default();
        // Scanned so far, from `pos` (which a refill moves, with the bytes).
        let mut scanned = 0;
        loop {
            let at = self.pos + scanned;
            if let Some(block) = self.buf.get(at..at + 64) {
                let block = block.try_into().expect("64 bytes");
                if let Some(end) = nesting.block(block).map_err(|_| GaveUp)? {
                    return Ok(scanned + end + 1);
                }
                scanned += 64;
                continue;
            }
            if self.fill()?.1 {
                continue;
            }
            // The end of the input: the last bytes, padded with blanks.
            let rest = &self.buf[self.pos + scanned..];
            let mut block = [b' '; 64];
            block[..rest.len()].copy_from_slice(rest);
            return match nesting.block(&block).map_err(|_| GaveUp)? {
                Some(end) if end < rest.len() => Ok(scanned + end + 1),
                _ => Err(GaveUp),
            };
        }
    }

    /// [`ReadWindow::value_len`] a byte at a time: strings and scalars (the
    /// header's values), and the reference the block scan is tested
    /// against.
    fn plain_len(&mut self) -> Result<usize, GaveUp> {
        let mut i = self.pos;
        let mut depth = 0usize;
        let mut in_string = false;
        let first = *self.buf.get(i).ok_or(GaveUp)?;
        let scalar = !matches!(first, b'{' | b'[' | b'"');
        loop {
            if i >= self.buf.len() {
                let (shift, more) = self.fill()?;
                i -= shift;
                if more {
                    continue;
                }
                // A scalar may end the input; nothing else may.
                return match i - self.pos {
                    len if scalar && len > 0 => Ok(len),
                    _ => Err(GaveUp),
                };
            }
            if in_string {
                match memchr::memchr2(b'"', b'\\', &self.buf[i..]) {
                    None => i = self.buf.len(),
                    Some(at) if self.buf[i + at] == b'\\' => {
                        let backslash = i + at;
                        if backslash + 1 < self.buf.len() {
                            i = backslash + 2;
                            continue;
                        }
                        // The escaped byte lies past the window's end.
                        let (shift, more) = self.fill()?;
                        if !more {
                            return Err(GaveUp);
                        }
                        i = backslash - shift;
                    }
                    Some(at) => {
                        i += at + 1;
                        in_string = false;
                        if depth == 0 {
                            return Ok(i - self.pos);
                        }
                    }
                }
                continue;
            }
            let b = self.buf[i];
            if scalar {
                if matches!(b, b',' | b'}' | b']' | b' ' | b'\n' | b'\t' | b'\r') {
                    return match i - self.pos {
                        0 => Err(GaveUp),
                        len => Ok(len),
                    };
                }
                i += 1;
                continue;
            }
            i += 1;
            match b {
                b'"' => in_string = true,
                b'{' | b'[' => depth += 1,
                b'}' | b']' => {
                    depth = depth.checked_sub(1).ok_or(GaveUp)?;
                    if depth == 0 {
                        return Ok(i - self.pos);
                    }
                }
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader that hands out at most `step` bytes per read, so values
    /// straddle every possible window boundary.
    struct Trickle<'a> {
        bytes: &'a [u8],
        step: usize,
    }

    impl Read for Trickle<'_> {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            let n = self.step.min(out.len()).min(self.bytes.len());
            out[..n].copy_from_slice(&self.bytes[..n]);
            self.bytes = &self.bytes[n..];
            Ok(n)
        }
    }

    fn lengths(text: &str, step: usize) -> Result<Vec<usize>, GaveUp> {
        let mut w = ReadWindow::new(Trickle {
            bytes: text.as_bytes(),
            step,
        });
        let mut out = Vec::new();
        while w.skip_blanks()?.is_some() {
            let len = w.value_len()?;
            out.push(len);
            w.advance(len);
        }
        Ok(out)
    }

    #[test]
    fn values_end_where_json_says_whatever_the_chunking() {
        let values = [
            r#"{"a":"x\"}","b":[1,{"c":"]"}]}"#,
            r#""\\""#,
            "12.5e3",
            "null",
            "[]",
            r#""é\u00e9""#,
            "true",
        ];
        let text = values.join(" \n");
        let expected: Vec<usize> = values.iter().map(|v| v.len()).collect();
        for step in [1, 2, 3, 7, 64, CHUNK] {
            assert_eq!(lengths(&text, step).unwrap(), expected, "step {step}");
        }
    }

    /// A JSON text of nested values, strings full of escapes and brackets,
    /// and blanks, about `len` bytes long.
    fn nested_values(seed: u64, len: usize) -> String {
        let pieces = [
            r#"{"a":"x\"}","b":[1,{"c":"]"}]}"#,
            r#"["\\",{"d":"[\u00e9{"},[],{}]"#,
            r#"{"e":"\\\"]","f":null}"#,
            "\n  ",
        ];
        let mut state = seed | 1;
        let mut text = String::new();
        while text.len() < len {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let piece = pieces[(state % pieces.len() as u64) as usize];
            text.push_str(piece);
            text.push(' ');
        }
        text
    }

    #[test]
    fn nested_values_end_where_the_byte_scan_says_whatever_the_chunking() {
        for seed in 0..40 {
            let text = nested_values(seed, 200 + 37 * seed as usize);
            for step in [1, 5, 63, 64, 65, 200, CHUNK] {
                let mut blocks = ReadWindow::new(Trickle {
                    bytes: text.as_bytes(),
                    step,
                });
                let mut bytes = ReadWindow::new(Trickle {
                    bytes: text.as_bytes(),
                    step,
                });
                while blocks.skip_blanks().unwrap().is_some() {
                    assert!(bytes.skip_blanks().unwrap().is_some());
                    let (len, plain) = (blocks.value_len().unwrap(), bytes.plain_len().unwrap());
                    assert_eq!(len, plain, "seed {seed} step {step}");
                    blocks.advance(len);
                    bytes.advance(plain);
                }
            }
        }
    }

    #[test]
    fn a_bounded_window_gives_up_on_a_larger_value_only() {
        // Refilled a chunk at a time: a value of three chunks.
        let text = format!("[\"{}\"] [1]", "x".repeat(3 * CHUNK));
        let lengths_within = |max: usize| {
            let mut w = ReadWindow::new(Trickle {
                bytes: text.as_bytes(),
                step: CHUNK,
            });
            w.max = max;
            let mut out = Vec::new();
            while w.skip_blanks()?.is_some() {
                let len = w.value_len()?;
                out.push(len);
                w.advance(len);
            }
            Ok::<_, GaveUp>(out)
        };
        assert_eq!(lengths_within(4 * CHUNK).unwrap(), [3 * CHUNK + 4, 3]);
        assert!(lengths_within(CHUNK).is_err());
    }

    #[test]
    fn unfinished_values_give_up() {
        for text in [r#"{"a":1"#, r#""abc"#, r#"["\"]"#, "]", r#"{"a":"}"#, "[[]"] {
            assert!(lengths(text, 3).is_err(), "{text}");
        }
    }
}
