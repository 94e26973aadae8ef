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
/// this runs millions of times per load: a table lookup per hex digit and
/// one check of all the bits that must be clear, no branch per character.
pub fn parse_id(text: &str) -> Option<u128> {
    const NIL: &str = "00000000-0000-0000-0000-000000000000";
    const MAX: &str = "ffffffff-ffff-ffff-ffff-ffffffffffff";
    let b = text.as_bytes();
    if b.len() != 36 || b[8] != b'-' || b[13] != b'-' || b[18] != b'-' || b[23] != b'-' {
        return None;
    }
    if !matches!(b[14], b'1'..=b'8') || !matches!(b[19], b'8' | b'9' | b'a' | b'b' | b'A' | b'B') {
        return if text == NIL {
            Some(0)
        } else if text == MAX {
            Some(u128::MAX)
        } else {
            None
        };
    }
    let b: &[u8; 36] = b.try_into().ok()?;
    // Each half in a word of its own, from fixed positions: a chain of
    // iterators over the five groups, and shifts of 128 bits, cost this a
    // twentieth of a whole load once records were walked in one pass.
    let mut invalid = 0u8;
    let mut half = |positions: &[usize]| {
        let mut value = 0u64;
        for &at in positions {
            let nibble = HEX_VALUE[b[at] as usize];
            invalid |= nibble;
            value = (value << 4) | u64::from(nibble & 0x0f);
        }
        value
    };
    let (high, low) = (half(&DIGITS[..16]), half(&DIGITS[16..]));
    (invalid & 0xf0 == 0).then_some((u128::from(high) << 64) | u128::from(low))
}

/// Where the 32 hex digits of an id are in its 36 bytes.
const DIGITS: [usize; 32] = [
    0, 1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12, 14, 15, 16, 17, 19, 20, 21, 22, 24, 25, 26, 27, 28, 29,
    30, 31, 32, 33, 34, 35,
];

/// The value of each hex digit; `0xff` for every other byte.
const HEX_VALUE: [u8; 256] = {
    let mut table = [0xffu8; 256];
    let mut i = 0;
    while i < 10 {
        table[b'0' as usize + i] = i as u8;
        i += 1;
    }
    let mut i = 0;
    while i < 6 {
        table[b'a' as usize + i] = 10 + i as u8;
        table[b'A' as usize + i] = 10 + i as u8;
        i += 1;
    }
    table
};

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
    use super::{format_id, parse_id, push_id};

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
