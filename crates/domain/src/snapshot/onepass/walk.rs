//! The byte walker of the one-pass record load: JSON's grammar exactly as
//! serde_json reads it (its whitespace, escapes, surrogate rules, number
//! forms and literals) over one record's bytes, and the served spelling of
//! each string.
//!
//! A string is served as it stands unless it holds an escape; then it is
//! served as serde_json writes its decoded text (today's renderer decodes
//! such a string and escapes it again), which this writes straight from
//! the escaped bytes: raw runs copied, each escape converted.

use super::Declined;

/// What a step of the walk gives, or [`Declined`].
pub(super) type Walk<T> = Result<T, Declined>;

/// A string as the record has it: its content's span (between the quotes)
/// and whether it holds an escape.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Str {
    pub start: usize,
    pub end: usize,
    pub escaped: bool,
}

/// A position in one record's bytes.
pub(super) struct Cursor<'a> {
    pub bytes: &'a [u8],
    pub pos: usize,
}

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGH: u64 = 0x8080_8080_8080_8080;

/// The high bit of each byte of `w` that ends a string run: a quote, a
/// backslash or a control character. Only the lowest bit set is exact
/// (a borrow may flag a byte above it), and only that one is used.
#[inline]
fn specials(w: u64) -> u64 {
    let zero = |v: u64| v.wrapping_sub(ONES) & !v & HIGH;
    zero(w ^ (ONES * u64::from(b'"')))
        | zero(w ^ (ONES * u64::from(b'\\')))
        | (w.wrapping_sub(ONES * 0x20) & !w & HIGH)
}

/// Four hex digits at `at`, as serde_json decodes a `\u` escape.
#[inline]
fn hex4(b: &[u8], at: usize) -> Walk<u32> {
    let digits = b.get(at..at + 4).ok_or(Declined)?;
    let mut n = 0;
    for &d in digits {
        let v = match d {
            b'0'..=b'9' => d - b'0',
            b'a'..=b'f' => d - b'a' + 10,
            b'A'..=b'F' => d - b'A' + 10,
            _ => return Err(Declined),
        };
        n = (n << 4) | u32::from(v);
    }
    Ok(n)
}

/// The escape at `at` (a backslash): where it ends. As text (`TEXT`),
/// serde_json also wants a surrogate escape paired; skipped, it does not.
#[inline]
fn escape<const TEXT: bool>(b: &[u8], at: usize) -> Walk<usize> {
    match b.get(at + 1) {
        Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => Ok(at + 2),
        Some(b'u') => {
            let n = hex4(b, at + 2)?;
            if !TEXT || !(0xD800..=0xDFFF).contains(&n) {
                return Ok(at + 6);
            }
            if n >= 0xDC00 || b.get(at + 6..at + 8) != Some(b"\\u") {
                return Err(Declined);
            }
            match hex4(b, at + 8)? {
                0xDC00..=0xDFFF => Ok(at + 12),
                _ => Err(Declined),
            }
        }
        _ => Err(Declined),
    }
}

impl<'a> Cursor<'a> {
    pub fn new(bytes: &'a [u8]) -> Cursor<'a> {
        Cursor { bytes, pos: 0 }
    }

    /// Skips JSON's blanks; the next byte, if any.
    #[inline]
    pub fn ws(&mut self) -> Option<u8> {
        while let Some(&b) = self.bytes.get(self.pos) {
            if !matches!(b, b' ' | b'\n' | b'\t' | b'\r') {
                return Some(b);
            }
            self.pos += 1;
        }
        None
    }

    /// The next byte after blanks; the record ending here is no record.
    #[inline]
    pub fn peek(&mut self) -> Walk<u8> {
        self.ws().ok_or(Declined)
    }

    /// `byte`, after blanks.
    #[inline]
    pub fn eat(&mut self, byte: u8) -> Walk<()> {
        if self.ws() != Some(byte) {
            return Err(Declined);
        }
        self.pos += 1;
        Ok(())
    }

    /// The literal `word` (`null`, `true`, `false`) at the cursor. What
    /// follows it is the next step's to check, as in serde_json.
    #[inline]
    pub fn literal(&mut self, word: &[u8]) -> Walk<()> {
        if !self.bytes[self.pos..].starts_with(word) {
            return Err(Declined);
        }
        self.pos += word.len();
        Ok(())
    }

    /// The string at the cursor (its opening quote), read as serde_json
    /// reads a string as text (`TEXT`: surrogate escapes paired) or skips
    /// one: no raw control character, every escape known, and UTF-8. The
    /// walk checks UTF-8 string by string, only where a string has a byte
    /// outside ASCII: a record it takes has no such byte elsewhere, so
    /// that is the check of the whole record that serde_json's path makes.
    #[inline]
    pub fn string<const TEXT: bool>(&mut self) -> Walk<Str> {
        let b = self.bytes;
        let start = self.pos + 1;
        let mut i = start;
        let (mut escaped, mut high) = (false, false);
        loop {
            // Sixteen bytes at a time while none ends the run (a vector
            // compare each), then eight (a word's arithmetic).
            while let Some(block) = b.get(i..i + 16) {
                let found = crate::os::string_bytes(block.try_into().expect("16 bytes"));
                high |= found.high != 0;
                if found.ends != 0 {
                    i += found.ends.trailing_zeros() as usize;
                    break;
                }
                i += 16;
            }
            if let Some(word) = b.get(i..i + 8) {
                let w = u64::from_le_bytes(word.try_into().expect("8 bytes"));
                high |= w & HIGH != 0;
                i += match specials(w) {
                    0 => 8,
                    m => (m.trailing_zeros() / 8) as usize,
                };
            }
            match *b.get(i).ok_or(Declined)? {
                b'"' => {
                    if high && std::str::from_utf8(&b[start..i]).is_err() {
                        return Err(Declined);
                    }
                    self.pos = i + 1;
                    return Ok(Str {
                        start,
                        end: i,
                        escaped,
                    });
                }
                b'\\' => {
                    escaped = true;
                    i = escape::<TEXT>(b, i)?;
                }
                0..=0x1f => return Err(Declined),
                c => {
                    high |= c >= 0x80;
                    i += 1;
                }
            }
        }
    }

    /// The number at the cursor, in JSON's grammar as serde_json checks it
    /// (one leading zero at most, digits after `.` and after `e`): its span.
    pub fn number(&mut self) -> Walk<(usize, usize)> {
        let b = self.bytes;
        let start = self.pos;
        let mut i = start + usize::from(b.get(start) == Some(&b'-'));
        let digits = |mut i: usize| {
            while b.get(i).is_some_and(u8::is_ascii_digit) {
                i += 1;
            }
            i
        };
        match b.get(i) {
            Some(b'0') => {
                i += 1;
                if b.get(i).is_some_and(u8::is_ascii_digit) {
                    return Err(Declined);
                }
            }
            Some(b'1'..=b'9') => i = digits(i + 1),
            _ => return Err(Declined),
        }
        if b.get(i) == Some(&b'.') {
            let after = digits(i + 1);
            if after == i + 1 {
                return Err(Declined);
            }
            i = after;
        }
        if matches!(b.get(i), Some(b'e' | b'E')) {
            i += 1 + usize::from(matches!(b.get(i + 1), Some(b'+' | b'-')));
            let after = digits(i);
            if after == i {
                return Err(Declined);
            }
            i = after;
        }
        self.pos = i;
        Ok((start, i))
    }

    /// Skips one value of any kind, as serde_json skips a member it does
    /// not know: checked, not kept. Nesting deeper than 256 is declined
    /// (serde_json has no limit there; the record's own path decides).
    pub fn skip(&mut self) -> Walk<()> {
        // One bit per open bracket: set for an object.
        let mut open = [0u64; 4];
        let mut depth = 0usize;
        loop {
            // A value.
            match self.peek()? {
                b'"' => drop(self.string::<false>()?),
                b'n' => self.literal(b"null")?,
                b't' => self.literal(b"true")?,
                b'f' => self.literal(b"false")?,
                b'-' | b'0'..=b'9' => drop(self.number()?),
                bracket @ (b'[' | b'{') => {
                    if depth == 256 {
                        return Err(Declined);
                    }
                    let object = bracket == b'{';
                    let bit = 1u64 << (depth % 64);
                    match object {
                        true => open[depth / 64] |= bit,
                        false => open[depth / 64] &= !bit,
                    }
                    depth += 1;
                    self.pos += 1;
                    let close = if object { b'}' } else { b']' };
                    if self.peek()? != close {
                        if object {
                            self.member_name()?;
                        }
                        continue;
                    }
                    self.pos += 1;
                    depth -= 1;
                }
                _ => return Err(Declined),
            }
            // After a value: close what it ends, or go on to the next.
            loop {
                if depth == 0 {
                    return Ok(());
                }
                let object = open[(depth - 1) / 64] & (1 << ((depth - 1) % 64)) != 0;
                match (self.peek()?, object) {
                    (b',', _) => {
                        self.pos += 1;
                        if object {
                            self.member_name()?;
                        }
                        break;
                    }
                    (b']', false) | (b'}', true) => {
                        self.pos += 1;
                        depth -= 1;
                    }
                    _ => return Err(Declined),
                }
            }
        }
    }

    /// A skipped object's member name and its colon.
    fn member_name(&mut self) -> Walk<()> {
        if self.peek()? != b'"' {
            return Err(Declined);
        }
        self.string::<false>()?;
        self.eat(b':')
    }

    /// Writes the string `s` as it is served: as it stands, or, if it holds
    /// an escape, as serde_json writes its text.
    #[inline]
    pub fn put_text(&self, s: Str, out: &mut Vec<u8>) {
        let content = &self.bytes[s.start..s.end];
        out.reserve(content.len() + 2);
        out.push(b'"');
        if s.escaped {
            convert(content, out);
        } else {
            out.extend_from_slice(content);
        }
        out.push(b'"');
    }
}

/// Writes the content of a string checked as text, with its escapes in the
/// spelling serde_json gives the text they decode to: `\"`, `\\`, `\b`,
/// `\f`, `\n`, `\r`, `\t`, other control characters as `\u00xx`, and
/// everything else (`\/`, `\u00e9`, a surrogate pair) as the character.
fn convert(content: &[u8], out: &mut Vec<u8>) {
    let mut i = 0;
    while let Some(at) = memchr::memchr(b'\\', &content[i..]) {
        out.extend_from_slice(&content[i..i + at]);
        i += at;
        let (ch, len) = match content[i + 1] {
            b'u' => {
                let n = hex4(content, i + 2).unwrap_or(0xFFFD);
                match n {
                    0xD800..=0xDBFF => {
                        let low = hex4(content, i + 8).unwrap_or(0xDC00);
                        (
                            0x10000 + ((n - 0xD800) << 10) + (low.wrapping_sub(0xDC00)),
                            12,
                        )
                    }
                    _ => (n, 6),
                }
            }
            b'b' => (0x08, 2),
            b'f' => (0x0c, 2),
            b'n' => (u32::from(b'\n'), 2),
            b'r' => (u32::from(b'\r'), 2),
            b't' => (u32::from(b'\t'), 2),
            other => (u32::from(other), 2),
        };
        i += len;
        put_char(ch, out);
    }
    out.extend_from_slice(&content[i..]);
}

/// One decoded character as serde_json writes it in a string.
fn put_char(ch: u32, out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    match ch {
        0x08 => out.extend_from_slice(b"\\b"),
        0x09 => out.extend_from_slice(b"\\t"),
        0x0a => out.extend_from_slice(b"\\n"),
        0x0c => out.extend_from_slice(b"\\f"),
        0x0d => out.extend_from_slice(b"\\r"),
        0x00..=0x1f => out.extend_from_slice(&[
            b'\\',
            b'u',
            b'0',
            b'0',
            HEX[(ch >> 4) as usize],
            HEX[(ch & 0xf) as usize],
        ]),
        0x22 => out.extend_from_slice(b"\\\""),
        0x5c => out.extend_from_slice(b"\\\\"),
        _ => {
            let c = char::from_u32(ch).unwrap_or('\u{fffd}');
            let mut buf = [0u8; 4];
            out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(json: &str) -> Option<String> {
        let mut c = Cursor::new(json.as_bytes());
        let s = c.string::<true>().ok()?;
        let mut out = Vec::new();
        c.put_text(s, &mut out);
        Some(String::from_utf8(out).unwrap())
    }

    /// serde_json's served form of a JSON string: decoded and written again.
    fn reference(json: &str) -> Option<String> {
        let decoded: String = serde_json::from_str(json).ok()?;
        Some(serde_json::to_string(&decoded).unwrap())
    }

    #[test]
    fn strings_are_served_as_serde_json_writes_them() {
        for json in [
            r#""plain""#,
            r#""caf\u00e9 \"q\" \\ \n \/ \b\f\r\t""#,
            r#""\u0000\u001f\u007f\u0022\u005C\u005c\u0008""#,
            r#""\ud83d\ude80 and 🚀""#,
            r#""\ud83d""#,
            r#""\ude80""#,
            r#""\ud83d\u0041""#,
            r#""\ud83dx""#,
            r#""\x""#,
            r#""\u12""#,
            "\"raw\ttab\"",
            "\"\u{7f} del and \u{2028}\"",
            r#""12345678\"12345678\\12345678""#,
        ] {
            assert_eq!(text(json), reference(json), "{json}");
        }
    }

    #[test]
    fn numbers_follow_json_grammar() {
        for ok in [
            "0",
            "-0",
            "12",
            "2.50",
            "1e5",
            "1E+5",
            "-1.5e-07",
            "123456789012345678901",
        ] {
            let mut c = Cursor::new(ok.as_bytes());
            assert_eq!(c.number().ok(), Some((0, ok.len())), "{ok}");
        }
        for bad in ["01", "-", "1.", ".5", "1e", "1e+", "+1", "-a"] {
            let mut c = Cursor::new(bad.as_bytes());
            let whole = c.number().is_ok_and(|(_, end)| end == bad.len());
            assert!(!whole, "{bad}");
        }
    }

    #[test]
    fn skipping_accepts_what_serde_json_ignores() {
        for json in [
            r#"{"a":[1,{"b":"\ud83d"},[],{}],"c":null}"#,
            "[true,false,null,-1.5e3]",
            r#""x\u0041""#,
            r#"{"a" : [ ] , "b" : { } }"#,
        ] {
            let mut c = Cursor::new(json.as_bytes());
            assert!(c.skip().is_ok() && c.ws().is_none(), "{json}");
            assert!(serde_json::from_str::<serde::de::IgnoredAny>(json).is_ok());
        }
        for json in [
            "[1,]",
            "{\"a\"}",
            "{\"a\":1,}",
            "[01]",
            "\"\\x\"",
            "[\"\u{1}\"]",
            "{1:2}",
            "nul",
        ] {
            let mut c = Cursor::new(json.as_bytes());
            let whole = c.skip().is_ok() && c.ws().is_none();
            assert!(!whole, "{json}");
        }
    }
}
