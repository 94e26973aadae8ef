//! CRC-32 (the gzip trailer's) of a page from its pieces' CRCs.
//!
//! A CRC is linear: the CRC of `a ++ b` is the CRC of `a` multiplied by
//! x^(8·len(b)) modulo the polynomial, plus the CRC of `b` (zlib's
//! `crc32_combine`). Each record keeps its CRC and its x^(8·len) at load, so
//! a page's CRC costs one multiplication per record. The CRCs follow zlib's
//! convention: `update(0, bytes)` is the CRC-32 of `bytes`.

/// The CRC-32 polynomial, reflected.
const POLY: u32 = 0xEDB8_8320;

const fn byte_table() -> [u32; 256] {
    let mut table = [0u32; 256];
    let mut n = 0;
    while n < 256 {
        let mut c = n as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 { (c >> 1) ^ POLY } else { c >> 1 };
            k += 1;
        }
        table[n] = c;
        n += 1;
    }
    table
}

static BYTES: [u32; 256] = byte_table();

/// By the top byte of a byte table entry, its index: the top bytes of the
/// 256 entries are all different (checked here as the table is made), so
/// a step of [`update`] can be undone ([`without_last`]).
const fn top_byte_index() -> [u8; 256] {
    let mut index = [0u8; 256];
    let mut seen = [false; 256];
    let table = byte_table();
    let mut n = 0;
    while n < 256 {
        let top = (table[n] >> 24) as usize;
        assert!(!seen[top], "two byte table entries share a top byte");
        seen[top] = true;
        index[top] = n as u8;
        n += 1;
    }
    index
}

static TOP_BYTE_INDEX: [u8; 256] = top_byte_index();

/// `a(x)·b(x)` modulo the polynomial (reflected: bit 31 is x^0), one bit
/// at a time; also what makes the tables.
pub const fn multiply(a: u32, mut b: u32) -> u32 {
    let mut product = 0;
    let mut bit = 0;
    while bit < 32 {
        // Branch-free: the bits of `a` are as good as random.
        product ^= b & ((a >> (31 - bit)) & 1).wrapping_neg();
        b = (b >> 1) ^ (POLY & (b & 1).wrapping_neg());
        bit += 1;
    }
    product
}

/// x^(2^k) modulo the polynomial, for k = 0..32.
const fn powers() -> [u32; 32] {
    let mut table = [0u32; 32];
    table[0] = 1 << 30; // x^1
    let mut k = 1;
    while k < 32 {
        table[k] = multiply(table[k - 1], table[k - 1]);
        k += 1;
    }
    table
}

const POWERS: [u32; 32] = powers();

/// `SHIFTS[j][b]` is x^(8·b·256^j) modulo the polynomial.
const fn shifts() -> [[u32; 256]; 4] {
    let mut table = [[0u32; 256]; 4];
    let mut j = 0;
    while j < 4 {
        // x^(8·256^j) = x^(2^(3 + 8j)).
        let step = POWERS[3 + 8 * j];
        table[j][0] = 1 << 31;
        let mut b = 1;
        while b < 256 {
            table[j][b] = multiply(table[j][b - 1], step);
            b += 1;
        }
        j += 1;
    }
    table
}

static SHIFTS: [[u32; 256]; 4] = shifts();

/// x^(8·n) modulo the polynomial: what a CRC is multiplied by when `n`
/// bytes follow. A multiplication per non-zero byte of `n` below 2^32.
pub fn shift_for(n: u64) -> u32 {
    let mut p = 1u32 << 31; // x^0
    for (j, table) in SHIFTS.iter().enumerate() {
        let b = ((n >> (8 * j)) & 0xFF) as usize;
        if b != 0 {
            p = multiply_fast(p, table[b]);
        }
    }
    let mut high = n >> 32;
    let mut k = 35;
    while high != 0 {
        if high & 1 != 0 {
            p = multiply_fast(POWERS[k & 31], p);
        }
        high >>= 1;
        k += 1;
    }
    p
}

/// The CRC of `a ++ b` from the CRC of `a`, the CRC of `b` and
/// `shift_for(len(b))`.
#[inline]
pub fn combine(crc_a: u32, crc_b: u32, shift_b: u32) -> u32 {
    multiply_fast(shift_b, crc_a) ^ crc_b
}

/// [`multiply`] with the processor's carry-less multiplication where it
/// has one: a page combines one CRC per record.
#[inline]
pub fn multiply_fast(a: u32, b: u32) -> u32 {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("pclmulqdq") {
        // SAFETY: the processor has the instruction, checked just above.
        return unsafe { clmul::multiply(a, b) };
    }
    multiply(a, b)
}

/// `c(x)·x^32` modulo the polynomial: four steps of the byte table.
#[inline]
fn times_x32(mut c: u32) -> u32 {
    for _ in 0..4 {
        c = (c >> 8) ^ BYTES[(c & 0xFF) as usize];
    }
    c
}

#[cfg(target_arch = "x86_64")]
mod clmul {
    use std::arch::x86_64::{__m128i, _mm_clmulepi64_si128, _mm_cvtsi64_si128, _mm_cvtsi128_si64};

    /// The carry-less product of `a` and `b` (reflected, so bit k of it
    /// stands for x^(62-k)), reduced: its terms of degree 32 to 62 (bits 0
    /// to 30) are multiplied down by x^32 with the byte table, the rest
    /// (bits 31 to 62) are already a reflected 32-bit value.
    #[target_feature(enable = "pclmulqdq,sse2")]
    pub(super) fn multiply(a: u32, b: u32) -> u32 {
        let x: __m128i = _mm_cvtsi64_si128(i64::from(a));
        let y: __m128i = _mm_cvtsi64_si128(i64::from(b));
        let product = _mm_cvtsi128_si64(_mm_clmulepi64_si128::<0>(x, y)) as u64;
        let low = (product << 1) as u32;
        let high = (product >> 31) as u32;
        high ^ super::times_x32(low)
    }
}

/// The CRC-32 of `bytes`, with the processor's carry-less multiplication
/// where it has one (`crc32fast`: about 10 times zlib-rs's table-driven
/// CRC, which a load runs over every record).
#[inline]
pub fn of(bytes: &[u8]) -> u32 {
    crc32fast::hash(bytes)
}

/// The CRC of what `crc` covered followed by `bytes` (short texts; records
/// use [`of`]).
#[inline]
pub fn update(crc: u32, bytes: &[u8]) -> u32 {
    let mut c = !crc;
    for &b in bytes {
        c = BYTES[((c ^ u32::from(b)) & 0xFF) as usize] ^ (c >> 8);
    }
    !c
}

/// The CRC of what `crc` covered but its last byte, `last`: [`update`]'s
/// step backwards. A step shifts the register right by a byte and adds the
/// table entry of the low byte, so the register's top byte names that
/// entry; a record written without its last byte (a meeting left open for
/// its notes) takes its CRC from the whole record's this way, at the cost
/// of one step, instead of from a pass over its bytes.
#[inline]
pub fn without_last(crc: u32, last: u8) -> u32 {
    let c = !crc;
    let index = TOP_BYTE_INDEX[(c >> 24) as usize];
    let shifted = c ^ BYTES[index as usize];
    !((shifted << 8) | u32::from(index ^ last))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_combine_to_the_crc_of_the_whole() {
        // The check value of CRC-32.
        assert_eq!(update(0, b"123456789"), 0xCBF4_3926);
        let (a, b) = (&b"{\"data\":[{\"id\":1},"[..], &b"{\"id\":2}]}"[..]);
        let whole = update(update(0, a), b);
        assert_eq!(
            combine(update(0, a), update(0, b), shift_for(b.len() as u64)),
            whole
        );
        assert_eq!(combine(update(0, a), 0, shift_for(0)), update(0, a));
        assert_eq!(of(a), update(0, a));
        let long: Vec<u8> = (0..5000u32).map(|i| (i * 7 % 251) as u8).collect();
        assert_eq!(of(&long), update(0, &long));
    }

    #[test]
    fn a_last_byte_is_taken_off_a_crc() {
        let text = b"{\"data\":{\"id\":\"7\",\"attributes\":{}}";
        for end in 1..=text.len() {
            let (head, last) = (&text[..end - 1], text[end - 1]);
            assert_eq!(without_last(update(0, &text[..end]), last), update(0, head));
        }
        for b in 0..=255u8 {
            assert_eq!(without_last(update(0, &[b]), b), 0, "byte {b}");
            assert_eq!(without_last(update(0xDEAD_BEEF, &[b]), b), 0xDEAD_BEEF);
        }
    }

    #[test]
    fn the_fast_multiplication_is_the_bitwise_one() {
        let mut x = 0x1234_5678u32;
        for _ in 0..10_000 {
            // xorshift
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            let y = x.rotate_left(11) ^ 0x9E37_79B9;
            assert_eq!(multiply_fast(x, y), multiply(x, y), "{x:08x} * {y:08x}");
        }
        assert_eq!(multiply_fast(1 << 31, 0xDEAD_BEEF), 0xDEAD_BEEF);
        assert_eq!(multiply_fast(0, 0xDEAD_BEEF), 0);
    }
}
