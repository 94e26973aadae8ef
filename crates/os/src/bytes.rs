//! Which bytes of a 64-byte block are which: the one vector instruction a
//! JSON structural scan needs (simdjson's "stage 1" classifies its input
//! this way), behind a safe function. SSE2 is part of every x86-64
//! processor, so no detection at run time; elsewhere a plain loop gives
//! the same masks.

/// Bit `i` of each mask says whether byte `i` of the block is that byte.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JsonBytes {
    /// `"`
    pub quotes: u64,
    /// `\`
    pub backslashes: u64,
    /// `{` or `[`
    pub opens: u64,
    /// `}` or `]`
    pub closes: u64,
}

/// Classifies the 64 bytes of `block`.
#[inline]
pub fn json_bytes(block: &[u8; 64]) -> JsonBytes {
    #[cfg(target_arch = "x86_64")]
    {
        sse2(block)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        json_bytes_plain(block)
    }
}

#[cfg(target_arch = "x86_64")]
#[inline]
fn sse2(block: &[u8; 64]) -> JsonBytes {
    use std::arch::x86_64::{
        __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_or_si128, _mm_set1_epi8,
    };
    // SAFETY: SSE2 is part of every x86-64 processor (the target has
    // it), and each load reads 16 bytes of `block`, unaligned.
    unsafe {
        let mut out = JsonBytes::default();
        // `{` (0x7b) and `[` (0x5b) differ only in bit 0x20, as do `}`
        // and `]`: one comparison after setting that bit finds both, and
        // no other byte.
        let (quote, backslash, open, close, case) = (
            _mm_set1_epi8(b'"' as i8),
            _mm_set1_epi8(b'\\' as i8),
            _mm_set1_epi8(b'{' as i8),
            _mm_set1_epi8(b'}' as i8),
            _mm_set1_epi8(0x20),
        );
        for (i, lane) in block.chunks_exact(16).enumerate() {
            let v = _mm_loadu_si128(lane.as_ptr().cast::<__m128i>());
            let folded = _mm_or_si128(v, case);
            let mask = |eq| u64::from(_mm_movemask_epi8(eq) as u16) << (16 * i);
            out.quotes |= mask(_mm_cmpeq_epi8(v, quote));
            out.backslashes |= mask(_mm_cmpeq_epi8(v, backslash));
            out.opens |= mask(_mm_cmpeq_epi8(folded, open));
            out.closes |= mask(_mm_cmpeq_epi8(folded, close));
        }
        out
    }
}

/// Which bytes of a 16-byte block of JSON string text are which.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StringBytes {
    /// Bytes that end a run of string text: a quote, a backslash or a
    /// control character (below 0x20, which JSON allows only escaped). A
    /// string's bytes up to the first are served as they stand.
    pub ends: u16,
    /// Bytes outside ASCII, which must be checked as UTF-8.
    pub high: u16,
}

/// Classifies the 16 bytes of `block` as string text.
#[inline]
pub fn string_bytes(block: &[u8; 16]) -> StringBytes {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{
            __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_min_epu8, _mm_movemask_epi8,
            _mm_or_si128, _mm_set1_epi8,
        };
        // SAFETY: SSE2 is part of every x86-64 processor, and the load
        // reads the 16 bytes of `block`, unaligned.
        unsafe {
            let v = _mm_loadu_si128(block.as_ptr().cast::<__m128i>());
            // Unsigned: a byte below 0x20 is its own minimum with 0x1f.
            let control = _mm_cmpeq_epi8(_mm_min_epu8(v, _mm_set1_epi8(0x1f)), v);
            let quote = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'"' as i8));
            let backslash = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\\' as i8));
            let ends = _mm_or_si128(control, _mm_or_si128(quote, backslash));
            StringBytes {
                ends: _mm_movemask_epi8(ends) as u16,
                high: _mm_movemask_epi8(v) as u16,
            }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        string_bytes_plain(block)
    }
}

/// [`string_bytes`] a byte at a time.
pub fn string_bytes_plain(block: &[u8; 16]) -> StringBytes {
    let mut out = StringBytes::default();
    for (i, &b) in block.iter().enumerate() {
        if b == b'"' || b == b'\\' || b < 0x20 {
            out.ends |= 1 << i;
        }
        if b >= 0x80 {
            out.high |= 1 << i;
        }
    }
    out
}

/// The same masks, a byte at a time: other processors, and the tests'
/// reference.
pub fn json_bytes_plain(block: &[u8; 64]) -> JsonBytes {
    let mut out = JsonBytes::default();
    for (i, &b) in block.iter().enumerate() {
        let bit = 1u64 << i;
        match b {
            b'"' => out.quotes |= bit,
            b'\\' => out.backslashes |= bit,
            b'{' | b'[' => out.opens |= bit,
            b'}' | b']' => out.closes |= bit,
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string_bytes_are_found_as_a_loop_finds_them() {
        for value in 0..=255u8 {
            for at in 0..16 {
                let mut block = [b'a'; 16];
                block[at] = value;
                block[15 - at] = value.wrapping_add(at as u8);
                assert_eq!(
                    string_bytes(&block),
                    string_bytes_plain(&block),
                    "byte {value:#x} at {at}"
                );
            }
        }
    }

    #[test]
    fn every_byte_value_in_every_position_is_classified_as_a_loop_would() {
        for value in 0..=255u8 {
            for at in 0..64 {
                let mut block = [b'a'; 64];
                block[at] = value;
                block[63 - at] = value.wrapping_add(at as u8);
                assert_eq!(
                    json_bytes(&block),
                    json_bytes_plain(&block),
                    "byte {value:#x} at {at}"
                );
            }
        }
    }
}
