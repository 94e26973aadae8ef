//! Any text as a `--trust-key` file: reading it never panics, every key
//! it reads has a key id of 16 hex digits, reading is deterministic, and a
//! refusal names the file. Shared by the `key_file` fuzz target and the seed replay in
//! `cargo test`.

use portfolio_wire::signed::TrustedKeys;

pub fn check(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match TrustedKeys::parse(text, "fuzz.pub") {
        Ok(keys) => {
            for id in keys.ids() {
                assert_eq!(id.len(), 16, "{id}");
                assert!(id.bytes().all(|b| b.is_ascii_hexdigit()), "{id}");
            }
            assert!(!keys.is_empty(), "an empty key file is refused");
            let again = TrustedKeys::parse(text, "again").expect("the same text reads again");
            assert_eq!(again.ids(), keys.ids());
        }
        Err(error) => assert!(error.to_string().contains("fuzz.pub"), "{error}"),
    }
}
