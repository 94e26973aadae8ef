//! Where a JSON object or array ends, found 64 bytes at a time, as
//! simdjson's first stage finds structure: each block's quotes,
//! backslashes and brackets as bit masks (`os::json_bytes`, one vector
//! instruction per kind and 16 bytes), the escaped bytes found with a
//! subtraction's carries, the inside of strings with a prefix XOR of the
//! quotes that are left, and the brackets outside strings counted. A
//! record costs a few operations per 64 bytes instead of a branch per
//! byte; only its brackets are visited one by one.
//!
//! No crate fit: sonic-rs and simd-json find structure over a whole
//! document in memory, and the load reads a window of the file (its
//! peak must not grow with the file), so it asks where each record ends.
//! A record is then walked by `onepass` (which finds its end itself where
//! a first load walks records in place), or parsed by serde_json.

use crate::os;

/// The state of a scan between blocks: whether the next byte is escaped,
/// whether it is inside a string, and how deep it is.
#[derive(Default)]
pub(crate) struct Nesting {
    /// 1 if the block before ended with an escaping backslash.
    escaped: u64,
    /// All ones if the block before ended inside a string.
    in_string: u64,
    depth: usize,
}

/// A closing bracket with nothing open: not a value the scan accepts.
#[derive(Debug)]
pub(crate) struct Unbalanced;

/// Alternate bits, starting with the second: where a run of backslashes
/// starting at an even position has its odd members.
const ODD_BITS: u64 = 0xAAAA_AAAA_AAAA_AAAA;

impl Nesting {
    /// Scans the next 64 bytes of a value that starts at the first byte
    /// of the first block (an opening bracket). Returns the index in
    /// `block` of the bracket that closes the value, if it is there.
    pub(crate) fn block(&mut self, block: &[u8; 64]) -> Result<Option<usize>, Unbalanced> {
        let bytes = os::json_bytes(block);
        let quotes = bytes.quotes & !self.escaped(bytes.backslashes);
        let in_string = prefix_xor(quotes) ^ self.in_string;
        self.in_string = ((in_string as i64) >> 63) as u64;
        let opens = bytes.opens & !in_string;
        let mut brackets = (bytes.opens | bytes.closes) & !in_string;
        while brackets != 0 {
            let at = brackets.trailing_zeros() as usize;
            brackets &= brackets - 1;
            if opens & (1 << at) != 0 {
                self.depth += 1;
                continue;
            }
            self.depth = self.depth.checked_sub(1).ok_or(Unbalanced)?;
            if self.depth == 0 {
                return Ok(Some(at));
            }
        }
        Ok(None)
    }

    /// The bytes of this block that a backslash escapes (simdjson's
    /// branchless escape scanner): in each run of backslashes every other
    /// one escapes the byte after it, counting from the run's start.
    fn escaped(&mut self, backslashes: u64) -> u64 {
        if backslashes == 0 {
            return std::mem::take(&mut self.escaped);
        }
        // A backslash escaped by the block before starts no escape.
        let potential = backslashes & !self.escaped;
        // Adding each run's start to the odd bits carries through the run
        // and flips the bits after an escaping backslash.
        let code = ((potential << 1) | ODD_BITS).wrapping_sub(potential) ^ ODD_BITS;
        let escaped = code ^ (backslashes | self.escaped);
        self.escaped = (code & backslashes) >> 63;
        escaped
    }
}

/// Each bit the XOR of itself and every bit below it: set from an opening
/// quote up to (not including) its closing one.
fn prefix_xor(mut x: u64) -> u64 {
    x ^= x << 1;
    x ^= x << 2;
    x ^= x << 4;
    x ^= x << 8;
    x ^= x << 16;
    x ^= x << 32;
    x
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Where the value at the start of `text` ends, byte by byte.
    fn plain_end(text: &[u8]) -> Option<usize> {
        let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
        for (i, &b) in text.iter().enumerate() {
            if in_string {
                match (escaped, b) {
                    (true, _) => escaped = false,
                    (false, b'\\') => escaped = true,
                    (false, b'"') => in_string = false,
                    _ => {}
                }
                continue;
            }
            match b {
                b'"' => in_string = true,
                b'{' | b'[' => depth += 1,
                b'}' | b']' => {
                    depth = depth.checked_sub(1)?;
                    if depth == 0 {
                        return Some(i);
                    }
                }
                _ => {}
            }
        }
        None
    }

    fn block_end(text: &[u8]) -> Option<usize> {
        let mut nesting = Nesting::default();
        for (n, block) in text.chunks(64).enumerate() {
            let mut padded = [b' '; 64];
            padded[..block.len()].copy_from_slice(block);
            if let Some(at) = nesting.block(&padded).ok()? {
                return Some(n * 64 + at).filter(|&end| end < text.len());
            }
        }
        None
    }

    /// A small deterministic generator (xorshift), so that the test needs
    /// no crate and fails the same way every time.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self, n: usize) -> usize {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 % n as u64) as usize
        }
    }

    #[test]
    fn ends_where_a_byte_by_byte_scan_ends_across_block_boundaries() {
        // Brackets and blanks between strings; in strings, runs of
        // backslashes, escaped quotes and brackets, falling on every side
        // of every block boundary. (Backslashes outside strings are not
        // JSON: there the two scans may differ, and serde_json refuses
        // the record whatever its length.)
        let outside: [&[u8]; 5] = [b"{", b"}", b"[", b"]", b"  "];
        let inside: [&[u8]; 7] = [b"\\\\", b"\\\"", b"a", b"{", b"]", b"\\\\\\\"", b"}"];
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let mut ended = 0;
        for _ in 0..20_000 {
            let mut text = b"{".to_vec();
            let len = 1 + rng.next(300);
            while text.len() < len {
                if rng.next(3) > 0 {
                    text.extend_from_slice(outside[rng.next(outside.len())]);
                    continue;
                }
                text.push(b'"');
                for _ in 0..rng.next(12) {
                    text.extend_from_slice(inside[rng.next(inside.len())]);
                }
                text.push(b'"');
            }
            let expected = plain_end(&text);
            ended += usize::from(expected.is_some());
            assert_eq!(
                block_end(&text),
                expected,
                "{}",
                String::from_utf8_lossy(&text)
            );
        }
        // The generator makes both kinds: values that end and that do not.
        assert!(ended > 1000 && ended < 19_000, "{ended}");
    }

    #[test]
    fn a_record_ends_at_its_closing_brace_whatever_its_strings_hold() {
        let record = br#"{"id":"a\"}","attributes":{"t":"\\","u":"[{\\\"","v":[1,{"w":"]"}]}} ,"#;
        let end = record.iter().rposition(|&b| b == b'}').unwrap();
        assert_eq!(block_end(record), Some(end));
        assert_eq!(plain_end(record), Some(end));
    }
}
