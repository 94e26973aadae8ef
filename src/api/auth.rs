//! Bearer authentication: one SHA-256 and one map lookup per request.
//!
//! A key is `<prefix>_<secret>`; snapshots hold the SHA-256 of the whole key
//! text, never the key. Every way of failing (no header, another scheme, a
//! wrong prefix, an unknown secret) gets the same 401, so a client learns
//! nothing about which part was wrong.

use warp::http::HeaderMap;
use warp::http::header::AUTHORIZATION;

use crate::store::key::{KeyHash, hash_key, secret};

/// The SHA-256 of the bearer key in `headers`, if there is one of the form
/// `<prefix>_<secret>`. The scheme is case-insensitive.
pub fn bearer_key_hash(headers: &HeaderMap, prefix: &str) -> Option<KeyHash> {
    let value = headers.get(AUTHORIZATION)?.to_str().ok()?;
    let (scheme, key) = value.trim().split_once([' ', '\t'])?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let key = key.trim();
    secret(key, prefix)?;
    Some(hash_key(key))
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
}
