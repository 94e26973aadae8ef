//! Bearer authentication: the SHA-256 of the key, then one map lookup per
//! request.
//!
//! A key is `<prefix>_<secret>`; snapshots hold the SHA-256 of the whole key
//! text, never the key. Every way of failing (no header, another scheme, a
//! wrong prefix, an unknown secret) gets the same 401, so a client learns
//! nothing about which part was wrong.
//!
//! The last few keys are kept per thread with their hashes ([`Recent`]): a
//! client sends the same key on every request, and the hash is a pure
//! function of the key's text, so a kept hash is always the right one.
//! What is kept is the key's text itself (keys of up to [`KEPT_KEY_BYTES`]),
//! in this thread's memory only: never logged, never in a response, and
//! compared in constant time (`subtle`). Never kept is which workspace a
//! key opened: every request still looks its hash up in the catalog it
//! loaded, so reloads and key changes apply at once.

use std::cell::RefCell;

use subtle::ConstantTimeEq;
use warp::http::HeaderMap;
use warp::http::header::AUTHORIZATION;

use portfolio_domain::store::key::{KeyHash, hash_key, secret};

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
    Some(hashed(key))
}

/// Keys this long or shorter are kept with their hash (generated keys are
/// 37 bytes; a longer one is hashed every time).
const KEPT_KEY_BYTES: usize = 64;

/// Keys kept per thread: the clients of one replica use a few keys at once.
const KEPT_KEYS: usize = 4;

/// The last [`KEPT_KEYS`] keys seen by this thread, and their hashes.
struct Recent {
    /// The keys' text: slot `n` holds `lens[n]` bytes of it.
    keys: [[u8; KEPT_KEY_BYTES]; KEPT_KEYS],
    lens: [usize; KEPT_KEYS],
    hashes: [KeyHash; KEPT_KEYS],
    /// The slot the next new key takes (round robin).
    next: usize,
}

thread_local! {
    static RECENT: RefCell<Recent> = const {
        RefCell::new(Recent {
            keys: [[0; KEPT_KEY_BYTES]; KEPT_KEYS],
            // No key has this length: empty slots match nothing.
            lens: [usize::MAX; KEPT_KEYS],
            hashes: [[0; 32]; KEPT_KEYS],
            next: 0,
        })
    };
}

/// `hash_key(key)`, from this thread's [`Recent`] keys when it is one.
fn hashed(key: &str) -> KeyHash {
    let bytes = key.as_bytes();
    if bytes.len() > KEPT_KEY_BYTES {
        return hash_key(key);
    }
    // Kept keys are padded with zeros, so that two are compared whole, as
    // eight words, whatever their lengths.
    let mut padded = [0u8; KEPT_KEY_BYTES];
    padded[..bytes.len()].copy_from_slice(bytes);
    RECENT
        .try_with(|recent| {
            let Ok(mut recent) = recent.try_borrow_mut() else {
                return hash_key(key);
            };
            for slot in 0..KEPT_KEYS {
                // The lengths may be compared as usual (a client knows the
                // length of what it sends); the bytes in constant time, so
                // that a client cannot learn a kept key byte by byte from
                // how long its guesses take to be compared.
                if recent.lens[slot] == bytes.len() && same(&recent.keys[slot], &padded) {
                    return recent.hashes[slot];
                }
            }
            let hash = hash_key(key);
            let slot = recent.next;
            recent.keys[slot] = padded;
            recent.lens[slot] = bytes.len();
            recent.hashes[slot] = hash;
            recent.next = (slot + 1) % KEPT_KEYS;
            hash
        })
        .unwrap_or_else(|_| hash_key(key))
}

/// Whether two padded keys are equal, in constant time: their eight `u64`
/// words XORed and ORed together without a branch, and the result compared
/// with zero by `subtle`. One `ct_eq` rather than one per word (or per
/// byte, 50 ns a request more: `auth/hash_and_lookup`).
fn same(a: &[u8; KEPT_KEY_BYTES], b: &[u8; KEPT_KEY_BYTES]) -> bool {
    let word = |key: &[u8; KEPT_KEY_BYTES], i: usize| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&key[i * 8..i * 8 + 8]);
        u64::from_ne_bytes(w)
    };
    let differ = (0..KEPT_KEY_BYTES / 8).fold(0u64, |differ, i| differ | (word(a, i) ^ word(b, i)));
    bool::from(differ.ct_eq(&0))
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
    fn kept_hashes_are_those_of_the_exact_key() {
        // More keys than are kept, each asked for twice, in an order that
        // makes them evict each other; keys that share a prefix or differ
        // only in length; a key too long to keep.
        let long = format!("cura_{}", "x".repeat(KEPT_KEY_BYTES));
        let mut keys: Vec<String> = (0..KEPT_KEYS + 2).map(|n| format!("cura_{n}")).collect();
        keys.extend(["cura_1x".into(), "cura_".into(), "cura_1\0".into(), long]);
        for round in 0..3 {
            for key in keys.iter().chain(keys.iter().rev()) {
                assert_eq!(hashed(key), hash_key(key), "{key:?}, round {round}");
            }
        }
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
