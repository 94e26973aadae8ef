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

/// `a(x)·b(x)` modulo the polynomial (reflected: bit 31 is x^0).
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

static POWERS: [u32; 32] = powers();

/// x^(8·n) modulo the polynomial: what a CRC is multiplied by when `n`
/// bytes follow.
pub fn shift_for(n: u64) -> u32 {
    let mut p = 1u32 << 31; // x^0
    let mut n = n;
    let mut k = 3;
    while n != 0 {
        if n & 1 != 0 {
            p = multiply(POWERS[k & 31], p);
        }
        n >>= 1;
        k += 1;
    }
    p
}

/// The CRC of `a ++ b` from the CRC of `a`, the CRC of `b` and
/// `shift_for(len(b))`.
#[inline]
pub fn combine(crc_a: u32, crc_b: u32, shift_b: u32) -> u32 {
    multiply(shift_b, crc_a) ^ crc_b
}

/// The CRC of what `crc` covered followed by `bytes` (short texts; records
/// use a vectorized CRC at load).
#[inline]
pub fn update(crc: u32, bytes: &[u8]) -> u32 {
    let mut c = !crc;
    for &b in bytes {
        c = BYTES[((c ^ u32::from(b)) & 0xFF) as usize] ^ (c >> 8);
    }
    !c
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
        let mut crc = flate2::Crc::new();
        crc.update(a);
        assert_eq!(crc.sum(), update(0, a));
    }
}
