//! The streaming JSON writer: a buffer that inserts commas by itself and is
//! flushed to the file as it fills.

use std::io::{self, Write};

use super::timestamp::{DAY, Ts, push_date, push_timestamp};
use crate::snapshot::render::Render;
use crate::store::id::push_id;

/// Flush the JSON buffer to the writer once it holds this many bytes.
const FLUSH_AT: usize = 1 << 16;

/// A minimal streaming JSON writer that inserts commas by itself.
///
/// Building into the buffer cannot fail; only [`Json::flush`] does IO.
pub(super) struct Json {
    pub(super) buf: Vec<u8>,
    /// One entry per open object or array: whether it already has a member.
    open: Vec<bool>,
    /// Whether a key was just written, so the next value needs no comma.
    after_key: bool,
}

impl Json {
    /// Creates an empty writer.
    pub(super) fn new() -> Self {
        Self {
            buf: Vec::with_capacity(FLUSH_AT * 2),
            open: Vec::new(),
            after_key: false,
        }
    }

    /// Writes the comma that separates this value from the previous member, if any.
    fn separate(&mut self) {
        if self.after_key {
            self.after_key = false;
            return;
        }
        if let Some(has_member) = self.open.last_mut() {
            if *has_member {
                self.buf.push(b',');
            } else {
                *has_member = true;
            }
        }
    }

    /// Opens an object.
    pub(super) fn begin_object(&mut self) {
        self.open_with(b"{");
    }

    /// Opens an object on a new line, as each record of a collection is.
    pub(super) fn begin_record(&mut self) {
        self.open_with(b"\n{");
    }

    /// Closes the innermost object.
    pub(super) fn end_object(&mut self) {
        self.close_with(b'}');
    }

    /// Opens an array.
    pub(super) fn begin_array(&mut self) {
        self.open_with(b"[");
    }

    /// Closes the innermost array.
    pub(super) fn end_array(&mut self) {
        self.close_with(b']');
    }

    /// Writes `bracket` as the next value and opens a level with no member yet.
    fn open_with(&mut self, bracket: &[u8]) {
        self.separate();
        self.buf.extend_from_slice(bracket);
        self.open.push(false);
    }

    /// Writes `bracket` and closes the innermost level.
    fn close_with(&mut self, bracket: u8) {
        self.buf.push(bracket);
        self.open.pop();
    }

    /// Writes an object key (a plain ASCII literal that needs no escaping).
    pub(super) fn key(&mut self, key: &str) {
        self.separate();
        self.push_key(key);
    }

    /// Writes an object key on a new line, as the top-level keys are.
    pub(super) fn key_line(&mut self, key: &str) {
        self.separate();
        self.buf.push(b'\n');
        self.push_key(key);
    }

    /// Appends `"key":` and expects the value next.
    fn push_key(&mut self, key: &str) {
        self.buf.push(b'"');
        self.buf.extend_from_slice(key.as_bytes());
        self.buf.extend_from_slice(b"\":");
        self.after_key = true;
    }

    /// Writes an escaped string value, escaped as the API renders strings
    /// (serde_json's escaping).
    ///
    /// This generator used to escape by itself, identically but for U+0008
    /// and U+000C, which serde_json writes as `\b` and `\f` where it wrote
    /// `\u0008` and `\u000c`. Generated text never holds either: it is made
    /// of this crate's string literals, whose only control characters are
    /// `\n` and `\t`, and of decimal and hexadecimal numbers. So the output is
    /// byte-identical to what it was (the crate's
    /// `tests::text_holds_no_control_characters_but_newline_and_tab` checks
    /// the texts).
    pub(super) fn string(&mut self, text: &str) {
        self.separate();
        text.render(&mut self.buf);
    }

    /// Writes the member `key` with a string value.
    pub(super) fn str_field(&mut self, key: &str, value: &str) {
        self.key(key);
        self.string(value);
    }

    /// Writes `text` escaped as [`Json::string`] does, followed inside the
    /// same string by `tail`, which is already JSON string content
    /// (`escapes`): written as it is.
    pub(super) fn string_with_escaped_tail(&mut self, text: &str, tail: &str) {
        self.separate();
        text.render(&mut self.buf);
        // `render` wrote the closing quote last; the tail goes before it.
        self.buf.pop();
        self.buf.extend_from_slice(tail.as_bytes());
        self.buf.push(b'"');
    }

    /// Writes a string value or `null`.
    pub(super) fn opt_string(&mut self, text: Option<&str>) {
        match text {
            Some(text) => self.string(text),
            None => self.null(),
        }
    }

    /// Writes `null`.
    pub(super) fn null(&mut self) {
        self.separate();
        self.buf.extend_from_slice(b"null");
    }

    /// Writes `true` or `false`.
    pub(super) fn boolean(&mut self, value: bool) {
        self.separate();
        self.buf
            .extend_from_slice(if value { b"true" } else { b"false" });
    }

    /// Writes an unsigned integer.
    pub(super) fn uint(&mut self, value: u64) {
        self.separate();
        push_padded(&mut self.buf, value, 1);
    }

    /// Writes a number given in hundredths, with at most two decimals (`1250` is `12.5`).
    pub(super) fn hundredths(&mut self, value: i64) {
        self.separate();
        if value < 0 {
            self.buf.push(b'-');
        }
        let abs = value.unsigned_abs();
        push_padded(&mut self.buf, abs / 100, 1);
        let cents = abs % 100;
        let (tenths, hundredths) = (cents / 10, cents % 10);
        if hundredths > 0 {
            self.buf.push(b'.');
            push_padded(&mut self.buf, cents, 2);
        } else if tenths > 0 {
            self.buf.push(b'.');
            push_padded(&mut self.buf, tenths, 1);
        }
    }

    /// Writes an id as a UUID string.
    pub(super) fn uuid(&mut self, id: u128) {
        self.separate();
        self.buf.push(b'"');
        push_id(&mut self.buf, id);
        self.buf.push(b'"');
    }

    /// Writes an RFC 3339 timestamp string.
    pub(super) fn timestamp(&mut self, ts: Ts) {
        self.separate();
        self.buf.push(b'"');
        push_timestamp(&mut self.buf, ts);
        self.buf.push(b'"');
    }

    /// Writes the UTC calendar date of `secs` as a `YYYY-MM-DD` string.
    pub(super) fn date(&mut self, secs: i64) {
        self.separate();
        self.buf.push(b'"');
        push_date(&mut self.buf, secs.div_euclid(DAY));
        self.buf.push(b'"');
    }

    /// Writes the buffer out once it is large enough.
    pub(super) fn flush_if_full<W: Write>(&mut self, w: &mut W) -> io::Result<()> {
        if self.buf.len() >= FLUSH_AT {
            self.flush(w)?;
        }
        Ok(())
    }

    /// Writes the whole buffer out.
    pub(super) fn flush<W: Write>(&mut self, w: &mut W) -> io::Result<()> {
        w.write_all(&self.buf)?;
        self.buf.clear();
        Ok(())
    }
}

/// Appends `value` in decimal, left-padded with zeros to `width` digits.
pub(super) fn push_padded(buf: &mut Vec<u8>, value: u64, width: usize) {
    let mut digits = [b'0'; 20];
    let mut n = value;
    let mut len = 0;
    while n > 0 || len == 0 {
        digits[19 - len] = b'0' + (n % 10) as u8;
        n /= 10;
        len += 1;
    }
    for _ in len..width {
        buf.push(b'0');
    }
    buf.extend_from_slice(&digits[20 - len..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_escaped_as_json_requires_and_parse_back_unchanged() {
        let text = "quote \" backslash \\ newline \n tab \t bell \u{7} Zürich 🚀";
        let mut json = Json::new();
        json.begin_array();
        json.string(text);
        json.end_array();
        assert_eq!(
            String::from_utf8(json.buf.clone()).expect("UTF-8"),
            r#"["quote \" backslash \\ newline \n tab \t bell \u0007 Zürich 🚀"]"#
        );
        let parsed: Vec<String> = serde_json::from_slice(&json.buf).expect("valid JSON");
        assert_eq!(parsed, [text]);
    }

    #[test]
    fn hundredths_drop_trailing_zeros() {
        let mut json = Json::new();
        json.begin_array();
        for value in [0, 5, 50, 1_250, 1_205, -1_000, 2_736_700_000] {
            json.hundredths(value);
        }
        json.end_array();
        assert_eq!(
            String::from_utf8(json.buf).expect("ASCII"),
            "[0,0.05,0.5,12.5,12.05,-10,27367000]"
        );
    }
}
