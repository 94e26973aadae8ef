//! API keys as the store knows them: the SHA-256 of the whole key text.
//!
//! A key is `<prefix>_<secret>` (docs/api.md#authentication). Snapshots and
//! the catalog hold only hashes, so a plain key is never written to a file,
//! logged or served; the API keeps the text of the last few keys per thread
//! in memory only, to skip hashing them again (`serve::api::auth`).

use sha2::{Digest, Sha256};

/// The SHA-256 of a whole key, prefix included.
pub type KeyHash = [u8; 32];

/// The SHA-256 of a whole key, as snapshots store it.
pub fn hash_key(key: &str) -> KeyHash {
    Sha256::digest(key.as_bytes()).into()
}

/// The secret of `key` if it has the form `<prefix>_<secret>` with a
/// non-empty secret; a key of any other form can never authenticate.
pub fn secret<'k>(key: &'k str, prefix: &str) -> Option<&'k str> {
    let secret = key.strip_prefix(prefix)?.strip_prefix('_')?;
    (!secret.is_empty()).then_some(secret)
}

/// Lower-case hex, as `api_keys[].sha256` is written.
pub fn to_hex(hash: &KeyHash) -> String {
    use std::fmt::Write;
    hash.iter().fold(String::with_capacity(64), |mut out, b| {
        let _ = write!(out, "{b:02x}");
        out
    })
}

/// Parses 64 hex digits (either case) into a hash.
pub fn from_hex(text: &str) -> Option<KeyHash> {
    let bytes = text.as_bytes();
    if bytes.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, pair) in bytes.chunks_exact(2).enumerate() {
        let hi = (pair[0] as char).to_digit(16)?;
        let lo = (pair[1] as char).to_digit(16)?;
        out[i] = (hi * 16 + lo) as u8;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_is_lower_case_sha256_and_round_trips() {
        let hash = hash_key("");
        let hex = to_hex(&hash);
        assert_eq!(
            hex,
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(from_hex(&hex), Some(hash));
        assert_eq!(from_hex(&hex.to_uppercase()), Some(hash));
        assert_eq!(from_hex(&hex[1..]), None);
        assert_eq!(from_hex(&format!("{}g", &hex[1..])), None);
    }

    #[test]
    fn a_key_needs_the_prefix_an_underscore_and_a_secret() {
        assert_eq!(secret("cura_abc", "cura"), Some("abc"));
        assert_eq!(secret("cura_a_b", "cura"), Some("a_b"));
        for bad in [
            "",
            "cura",
            "cura_",
            "curaabc",
            "other_abc",
            "Cura_abc",
            "_abc",
        ] {
            assert_eq!(secret(bad, "cura"), None, "{bad:?}");
        }
    }
}
