//! What the unit tests of this crate share.

/// Asserts that `text` holds each of `parts`, showing all of it if not.
#[track_caller]
pub fn assert_holds(text: &str, parts: &[&str]) {
    assert!(parts.iter().all(|part| text.contains(part)), "{text}");
}
