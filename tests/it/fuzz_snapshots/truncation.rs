//! Truncation at every byte of the small snapshot, and at sampled positions
//! of each kind of the generated one.

use std::collections::{BTreeMap, BTreeSet};

use super::bases::*;
use super::judge::*;
use super::*;

/// What a cut before a byte leaves at the end of the prefix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Cut {
    Empty,
    InKey,
    AfterKey,
    AfterColon,
    InString,
    InEscape,
    InNumber,
    InLiteral,
    AfterOpen,
    BetweenRecords,
    AfterValue,
}

/// The kind of every cut position `0..bytes.len()` of a JSON document.
fn cut_kinds(b: &[u8]) -> Vec<Cut> {
    let mut kinds = vec![Cut::Empty; b.len()];
    let mut stack: Vec<u8> = Vec::new();
    let mut expect_key = false;
    let mut last = Cut::Empty;
    // After a value or a comma: between two records of a collection?
    let after = |stack: &[u8]| {
        if stack.len() == 2 && stack[1] == b'[' {
            Cut::BetweenRecords
        } else {
            Cut::AfterValue
        }
    };
    let mut i = 0;
    while i < b.len() {
        kinds[i] = last;
        match b[i] {
            b'"' => {
                let key = stack.last() == Some(&b'{') && expect_key;
                let inside = if key { Cut::InKey } else { Cut::InString };
                let mut j = i + 1;
                while j < b.len() && b[j] != b'"' {
                    kinds[j] = inside;
                    if b[j] == b'\\' {
                        let len = if b.get(j + 1) == Some(&b'u') { 6 } else { 2 };
                        let end = (j + len).min(b.len());
                        kinds[j + 1..end].fill(Cut::InEscape);
                        j += len;
                    } else {
                        j += 1;
                    }
                }
                if j < b.len() {
                    kinds[j] = inside;
                }
                i = j + 1;
                last = if key { Cut::AfterKey } else { after(&stack) };
                expect_key &= !key;
                continue;
            }
            b':' => last = Cut::AfterColon,
            b',' => {
                expect_key = stack.last() == Some(&b'{');
                last = after(&stack);
            }
            c @ (b'{' | b'[') => {
                stack.push(c);
                expect_key = c == b'{';
                last = Cut::AfterOpen;
            }
            b'}' | b']' => {
                stack.pop();
                expect_key = false;
                last = after(&stack);
            }
            c @ (b'-' | b'0'..=b'9' | b't' | b'f' | b'n') => {
                let inside = if c.is_ascii_alphabetic() {
                    Cut::InLiteral
                } else {
                    Cut::InNumber
                };
                let mut j = i + 1;
                while j < b.len()
                    && (b[j].is_ascii_alphanumeric() || matches!(b[j], b'.' | b'+' | b'-'))
                {
                    kinds[j] = inside;
                    j += 1;
                }
                i = j;
                last = after(&stack);
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    kinds
}

/// Judges the prefix `bytes[..at]`: a truncated document is rejected as
/// truncated; only a prefix that is still a whole document (the final
/// newline cut) may load.
fn judge_cut(run: &mut Run, bytes: &[u8], at: usize, kind: Cut, base: &str) {
    let prefix = &bytes[..at];
    let ending = String::from_utf8_lossy(&prefix[at.saturating_sub(24)..]);
    let what = format!(
        "{base} cut at byte {at} of {} ({kind:?}, ending {ending:?})",
        bytes.len()
    );
    if serde_json::from_slice::<serde::de::IgnoredAny>(prefix).is_ok() {
        return run.check(&what, prefix, Expect::Either, None, &[]);
    }
    // A cut right after a number's `.`, `-`, `+` or `e` is reported by
    // serde_json as an invalid number, not as an early end (see the report).
    let number_cut =
        kind == Cut::InNumber && matches!(prefix.last(), Some(b'.' | b'-' | b'+' | b'e' | b'E'));
    let mentions: &[&str] = if number_cut {
        &["invalid number"]
    } else {
        &["truncated"]
    };
    run.check(&what, prefix, Expect::Reject, None, mentions);
}

#[test]
fn truncation_at_every_byte_of_a_small_snapshot_is_rejected_as_truncated() {
    let bytes = small_base_bytes();
    let kinds = cut_kinds(&bytes);
    let mut run = Run::default();
    for (at, kind) in kinds.iter().enumerate() {
        judge_cut(&mut run, &bytes, at, *kind, "small");
    }
    run.finish("truncations of the small snapshot");
    let seen: BTreeSet<Cut> = kinds.into_iter().collect();
    assert_eq!(seen.len(), 11, "every kind of cut is exercised: {seen:?}");
}

#[test]
fn truncation_of_the_generated_snapshot_at_every_kind_of_position_is_rejected() {
    let bytes = generated_base();
    let kinds = cut_kinds(bytes);
    let mut by_kind: BTreeMap<Cut, Vec<usize>> = BTreeMap::new();
    for (at, kind) in kinds.iter().enumerate() {
        by_kind.entry(*kind).or_default().push(at);
    }
    let mut rng = Rng::new(0x7472_756e_6361_7465);
    let mut run = Run::default();
    for (kind, positions) in &by_kind {
        for _ in 0..12.min(positions.len()) {
            judge_cut(&mut run, bytes, *rng.pick(positions), *kind, "acme.json");
        }
    }
    // The last bytes: the end of the final record, the closing brackets.
    for (at, kind) in kinds.iter().enumerate().skip(bytes.len().saturating_sub(8)) {
        judge_cut(&mut run, bytes, at, *kind, "acme.json");
    }
    run.finish("truncations of the generated snapshot");
    let kinds: Vec<&Cut> = by_kind.keys().collect();
    assert_eq!(kinds.len(), 11, "every kind of cut is exercised: {kinds:?}");
}
