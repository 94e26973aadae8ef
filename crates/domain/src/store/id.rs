//! Record ids: the UUID pattern of the API (docs/api.md#ids), as a 128-bit number.
//!
//! The pattern is the public service's, character for character:
//! `^([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[1-8][0-9a-fA-F]{3}-[89abAB][0-9a-fA-F]{3}-[0-9a-fA-F]{12}|00000000-0000-0000-0000-000000000000|ffffffff-ffff-ffff-ffff-ffffffffffff)$`.
//! So the nil and max ids match in lower case only. The same check guards
//! path parameters and the ids in a snapshot.
//!
//! Ids are compared and looked up as numbers: two spellings that differ only
//! in case are the same record, and numeric order is the order of the
//! lower-case text.

/// Parses `text` if it matches the id pattern.
///
/// Every record of a snapshot has an id and most point at a company, so
/// this runs millions of times per load: eight digits at a time in a
/// word's arithmetic, no branch per character.
pub fn parse_id(text: &str) -> Option<u128> {
    parse_id_bytes(text.as_bytes())
}

/// [`parse_id`] of text as bytes (the one-pass load reads ids where they
/// lie, checked as UTF-8 already).
pub fn parse_id_bytes(b: &[u8]) -> Option<u128> {
    const NIL: &[u8] = b"00000000-0000-0000-0000-000000000000";
    const MAX: &[u8] = b"ffffffff-ffff-ffff-ffff-ffffffffffff";
    if b.len() != 36 || b[8] != b'-' || b[13] != b'-' || b[18] != b'-' || b[23] != b'-' {
        return None;
    }
    if !matches!(b[14], b'1'..=b'8') || !matches!(b[19], b'8' | b'9' | b'a' | b'b' | b'A' | b'B') {
        return if b == NIL {
            Some(0)
        } else if b == MAX {
            Some(u128::MAX)
        } else {
            None
        };
    }
    // The 32 digits side by side, then eight at a time in a word: a
    // table lookup per digit cost this a twentieth of a load once records
    // were walked in one pass.
    let mut digits = [0u8; 32];
    digits[..8].copy_from_slice(&b[..8]);
    digits[8..12].copy_from_slice(&b[9..13]);
    digits[12..16].copy_from_slice(&b[14..18]);
    digits[16..20].copy_from_slice(&b[19..23]);
    digits[20..].copy_from_slice(&b[24..36]);
    let mut value = 0u128;
    for word in digits.chunks_exact(8) {
        let word = u64::from_le_bytes(word.try_into().expect("8 bytes"));
        value = (value << 32) | u128::from(hex_word(word)?);
    }
    Some(value)
}

/// Eight ASCII hex digits (the first in the lowest byte) as the number
/// they write, or `None` if one is not a hex digit.
fn hex_word(x: u64) -> Option<u32> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    // For bytes below 0x80: the high bit of each byte in `lo..=hi`.
    let within = |v: u64, lo: u64, hi: u64| {
        v.wrapping_add(ONES * (0x80 - lo)) & !v.wrapping_add(ONES * (0x7f - hi)) & HIGH
    };
    // Letters in either case, folded to lower case (digits stay as they are).
    let lower = x | (ONES * 0x20);
    let digit = within(x, 0x30, 0x39);
    let letter = within(lower, 0x61, 0x66);
    if x & HIGH != 0 || digit | letter != HIGH {
        return None;
    }
    // Each byte's value: its low four bits, and 9 more for a letter.
    let n = (x & (ONES * 0x0f)) + (letter >> 7) * 9;
    // Bytes b0..b7 into the nibbles of b0b1...b7, pairs at a time.
    let n = ((n & 0x000f_000f_000f_000f) << 4) | ((n >> 8) & 0x000f_000f_000f_000f);
    let n = ((n & 0x0000_00ff_0000_00ff) << 8) | ((n >> 16) & 0x0000_00ff_0000_00ff);
    let n = ((n & 0xffff) << 16) | ((n >> 32) & 0xffff);
    Some(n as u32)
}

/// Formats an id in the canonical lower-case text form.
pub fn format_id(id: u128) -> String {
    let mut text = Vec::with_capacity(36);
    push_id(&mut text, id);
    String::from_utf8(text).expect("hex digits and dashes are ASCII")
}

/// Appends the canonical lower-case text form of an id to `out`, without
/// allocating (the generator writes millions).
pub fn push_id(out: &mut Vec<u8>, id: u128) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut text = [b'-'; 36];
    let mut shift = 128;
    for (i, c) in text.iter_mut().enumerate() {
        if !matches!(i, 8 | 13 | 18 | 23) {
            shift -= 4;
            *c = HEX[(id >> shift) as usize & 0xf];
        }
    }
    out.extend_from_slice(&text);
}

#[cfg(test)]
mod tests {
    use super::{format_id, hex_word, parse_id, push_id};

    #[test]
    fn a_word_of_hex_digits_reads_as_a_digit_at_a_time_would() {
        let digit = |b: u8| (b as char).to_digit(16);
        for value in 0..=255u8 {
            for at in 0..8 {
                let mut word = *b"0a1B2c3D";
                word[at] = value;
                word[7 - at] = value.wrapping_add(at as u8);
                let expected = word
                    .iter()
                    .try_fold(0u32, |n, &b| Some((n << 4) | digit(b)?));
                assert_eq!(hex_word(u64::from_le_bytes(word)), expected, "{word:?}");
            }
        }
    }

    #[test]
    fn formats_the_lower_case_text_that_parses_back() {
        for text in [
            "6f1c2d3e-4b5a-4c6d-8e7f-0a1b2c3d4e5f",
            "00000000-0000-0000-0000-000000000000",
            "ffffffff-ffff-ffff-ffff-ffffffffffff",
            "00000000-0000-4000-8000-000000000001",
        ] {
            let id = parse_id(text).unwrap();
            assert_eq!(format_id(id), text);
            let mut out = b"id:".to_vec();
            push_id(&mut out, id);
            assert_eq!(out, format!("id:{text}").into_bytes());
        }
        let upper = parse_id("6F1C2D3E-4B5A-4C6D-8E7F-0A1B2C3D4E5F").unwrap();
        assert_eq!(format_id(upper), "6f1c2d3e-4b5a-4c6d-8e7f-0a1b2c3d4e5f");
    }

    #[test]
    fn accepts_the_pattern_and_only_it() {
        let ok = [
            "6f1c2d3e-4b5a-4c6d-8e7f-0a1b2c3d4e5f",
            "6F1C2D3E-4B5A-1C6D-BE7F-0A1B2C3D4E5F",
            "6f1c2d3e-4b5a-8c6d-9e7f-0a1b2c3d4e5f",
            "00000000-0000-0000-0000-000000000000",
            "ffffffff-ffff-ffff-ffff-ffffffffffff",
        ];
        for id in ok {
            assert!(parse_id(id).is_some(), "{id} must match");
        }
        let bad = [
            "",
            "6f1c2d3e-4b5a-0c6d-8e7f-0a1b2c3d4e5f",
            "6f1c2d3e-4b5a-9c6d-8e7f-0a1b2c3d4e5f",
            "6f1c2d3e-4b5a-4c6d-ce7f-0a1b2c3d4e5f",
            "6f1c2d3e-4b5a-4c6d-7e7f-0a1b2c3d4e5f",
            "6f1c2d3e-4b5a-4c6d-8e7f-0a1b2c3d4e5",
            "6f1c2d3e-4b5a-4c6d-8e7f-0a1b2c3d4e5f0",
            "6f1c2d3e4b5a-4c6d-8e7f-0a1b2c3d4e5f0",
            "6f1c2d3g-4b5a-4c6d-8e7f-0a1b2c3d4e5f",
            "FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF",
            "{6f1c2d3e-4b5a-4c6d-8e7f-0a1b2c3d4e5f}",
            "6f1c2d3e-4b5a-4c6d-8e7f-0a1b2c3d4e5\u{e9}",
        ];
        for id in bad {
            assert_eq!(parse_id(id), None, "{id} must not match");
        }
    }

    #[test]
    fn case_does_not_change_the_value() {
        assert_eq!(
            parse_id("6f1c2d3e-4b5a-4c6d-8e7f-0a1b2c3d4e5f"),
            parse_id("6F1C2D3E-4B5A-4C6D-8E7F-0A1B2C3D4E5F")
        );
        assert!(
            parse_id("10000000-0000-4000-8000-000000000000")
                > parse_id("0fffffff-ffff-4fff-bfff-ffffffffffff")
        );
    }
}

/// A hash map keyed by id.
///
/// Ids are random 128-bit numbers, so a multiply-fold of the two halves spreads
/// them as well as SipHash does at a fraction of the cost. Lookups come from
/// requests but never insert, so a hostile client cannot flood a map.
pub type IdMap<V> = std::collections::HashMap<u128, V, std::hash::BuildHasherDefault<IdHasher>>;

/// The hasher behind [`IdMap`]; see there.
#[derive(Default)]
pub struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u64(&mut self, n: u64) {
        let product = u128::from(self.0 ^ n) * 0x9E37_79B9_7F4A_7C15_u128;
        self.0 = (product as u64) ^ ((product >> 64) as u64);
    }

    fn write_u128(&mut self, n: u128) {
        self.write_u64(n as u64);
        self.write_u64((n >> 64) as u64);
    }
}
