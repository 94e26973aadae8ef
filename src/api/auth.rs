//! Bearer authentication: one SHA-256 and one map lookup per request.
//!
//! A key is `<prefix>_<secret>`; snapshots hold the SHA-256 of the whole key
//! text, never the key. Every way of failing (no header, another scheme, a
//! wrong prefix, an unknown secret) gets the same 401, so a client learns
//! nothing about which part was wrong.

use sha2::{Digest, Sha256};
use warp::http::HeaderMap;
use warp::http::header::AUTHORIZATION;

/// The SHA-256 of the bearer key in `headers`, if there is one of the form
/// `<prefix>_<secret>`. The scheme is case-insensitive.
pub fn bearer_key_hash(headers: &HeaderMap, prefix: &str) -> Option<[u8; 32]> {
    let value = headers.get(AUTHORIZATION)?.to_str().ok()?;
    let (scheme, key) = value.trim().split_once([' ', '\t'])?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let key = key.trim();
    let secret = key.strip_prefix(prefix)?.strip_prefix('_')?;
    if secret.is_empty() {
        return None;
    }
    Some(hash_key(key))
}

/// The SHA-256 of a whole key, as snapshots store it.
pub fn hash_key(key: &str) -> [u8; 32] {
    Sha256::digest(key.as_bytes()).into()
}

/// Lower-case hex, as `api_keys[].sha256` is written.
pub fn to_hex(hash: &[u8; 32]) -> String {
    use std::fmt::Write;
    hash.iter().fold(String::with_capacity(64), |mut out, b| {
        let _ = write!(out, "{b:02x}");
        out
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use warp::http::HeaderValue;

    fn check(header: Option<&str>, expected_key: Option<&str>) {
        let mut headers = HeaderMap::new();
        if let Some(h) = header {
            headers.insert(AUTHORIZATION, HeaderValue::from_str(h).unwrap());
        }
        assert_eq!(
            bearer_key_hash(&headers, "cura"),
            expected_key.map(hash_key),
            "{header:?}"
        );
    }

    #[test]
    fn accepts_bearer_keys_with_the_prefix() {
        check(Some("Bearer cura_abc"), Some("cura_abc"));
        check(Some("bearer cura_abc"), Some("cura_abc"));
        check(Some("BEARER   cura_abc "), Some("cura_abc"));
        check(Some("Bearer cura_a_b"), Some("cura_a_b"));
    }

    #[test]
    fn rejects_everything_else() {
        for header in [
            None,
            Some(""),
            Some("Bearer"),
            Some("Bearer "),
            Some("Basic cura_abc"),
            Some("cura_abc"),
            Some("Bearer cura_"),
            Some("Bearer cura"),
            Some("Bearer curaabc"),
            Some("Bearer other_abc"),
            Some("Bearer Cura_abc"),
        ] {
            check(header, None);
        }
    }

    #[test]
    fn hex_is_lower_case_sha256() {
        assert_eq!(
            to_hex(&hash_key("")),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }
}
