//! `--text escapes`: fragments of JSON string text, already escaped, full of
//! what a JSON decoder has to work for: quotes, backslashes, control
//! characters as `\u` escapes, non-ASCII both raw and as `\u` escapes
//! (surrogate pairs for emoji), CJK, right-to-left scripts, emoji with
//! joiners and combining marks.
//!
//! They are written into the file as they are, not through serde_json's
//! escaping (which would write non-ASCII raw and never `\u` escape a
//! letter), so the files hold every way of spelling a character that a
//! client or the server may meet.

use super::rng::Rng;

/// Pieces of JSON string content (between the quotes), each valid on its
/// own; `tests::every_fragment_is_json_string_content` below checks that
/// each decodes.
const FRAGMENTS: &[&str] = &[
    // Quotes and backslashes.
    "\\\"quoted\\\" and \\\\back\\\\slashed\\\\",
    "C:\\\\Users\\\\\\\"ops\\\"\\\\notes.txt",
    // The short escapes, and `\/`, which only decoders know.
    "line\\nbreak\\ttab\\rreturn\\b\\f and a\\/slash",
    // Control characters that only `\u` can write, NUL and DEL included.
    "\\u0000nul \\u0001soh \\u0007bel \\u001besc \\u001fus \\u007fdel",
    // Non-ASCII, raw.
    "«Ünïcödé» naïve façade smørrebrød Straße",
    // The same kind of text as `\u` escapes.
    "\\u00abEsc\\u00e4ped \\u00dcn\\u00efc\\u00f6d\\u00e9\\u00bb",
    // CJK and Korean, raw and escaped.
    "漢字かなカナ 한국어 \\u6f22\\u5b57\\u304b\\u306a",
    // Right-to-left scripts.
    "עברית العربية",
    // Emoji, raw, as a surrogate pair, with a zero-width joiner and a skin tone.
    "🚀🦀 \\ud83d\\ude80 👩\u{200d}💻 👍🏽",
    // Combining marks: decomposed letters, raw and escaped.
    "Zoe\u{308} n\u{303}o e\\u0301 a\\u030a Z\u{335}a\u{336}l\u{337}g\u{338}o",
    // Currency, math and a byte order mark in the middle of text.
    "€ £ ¥ ₹ ∑ √ ∞ \\ufeffbom \u{2028}sep",
];

/// Appends one to three fragments, each after a space, to `out`.
pub(super) fn append(rng: &mut Rng, out: &mut String) {
    for _ in 0..rng.between(1, 3) {
        out.push(' ');
        out.push_str(rng.word(FRAGMENTS));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Decodes `fragment` as the content of a JSON string.
    fn decode(fragment: &str) -> String {
        serde_json::from_str(&format!("\"{fragment}\"")).expect("a valid JSON string")
    }

    #[test]
    fn every_fragment_is_json_string_content() {
        let all: String = FRAGMENTS.iter().map(|f| decode(f)).collect();
        for want in [
            '"', '\\', '\0', '\u{1f}', '\u{7f}', 'Ü', '漢', '🚀', '\u{301}', '\u{feff}',
        ] {
            assert!(all.contains(want), "no {want:?} in the fragments");
        }
        // Every fragment needs escaping or is not ASCII: none is plain text.
        for fragment in FRAGMENTS {
            assert!(
                fragment.contains('\\') || !fragment.is_ascii(),
                "{fragment}"
            );
        }
    }
}
