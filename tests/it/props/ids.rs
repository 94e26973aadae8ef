//! Ids: `parse_id` accepts exactly the pattern of docs/api.md#ids, checked
//! against a hand-written matcher of that regex.

use portfolio_domain::store::id::parse_id;
use proptest::prelude::*;

use super::*;

const NIL: &str = "00000000-0000-0000-0000-000000000000";
const MAX_ID: &str = "ffffffff-ffff-ffff-ffff-ffffffffffff";

/// docs/api.md#ids, by hand: `^([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[1-8][0-9a-fA-F]{3}-
/// [89abAB][0-9a-fA-F]{3}-[0-9a-fA-F]{12}|0{8}-0{4}-0{4}-0{4}-0{12}|f{8}-...)$`,
/// with `$` the end of the text (ECMA-262: no trailing newline either).
pub(super) fn matches_id_pattern(text: &str) -> bool {
    if text == NIL || text == MAX_ID {
        return true;
    }
    let groups: Vec<&str> = text.split('-').collect();
    let hex = |g: &str| g.chars().all(|c| c.is_ascii_hexdigit());
    groups.len() == 5
        && groups.iter().map(|g| g.len()).eq([8, 4, 4, 4, 12])
        && groups.iter().all(|g| hex(g))
        && matches!(groups[2].as_bytes()[0], b'1'..=b'8')
        && matches!(
            groups[3].as_bytes()[0],
            b'8' | b'9' | b'a' | b'b' | b'A' | b'B'
        )
}

/// A UUID of the pattern with random version (1-8) and variant (8-b) digits.
pub(super) fn id_value() -> impl Strategy<Value = u128> {
    (any::<u128>(), 1u128..=8, 8u128..=11)
        .prop_map(|(r, version, variant)| id_with(r, version, variant))
}

fn id_with(r: u128, version: u128, variant: u128) -> u128 {
    (r & !(0xF << 76) & !(0xF << 60)) | (version << 76) | (variant << 60)
}

/// The canonical text of an id, lower or upper case.
pub(super) fn id_string(id: u128, upper: bool) -> String {
    let hex = format!("{id:032x}");
    let text = format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    );
    if upper { text.to_uppercase() } else { text }
}

/// Text that is an id, nearly an id, or anything.
pub(super) fn id_text() -> BoxedStrategy<String> {
    let valid = (id_value(), any::<bool>())
        .prop_map(|(id, upper)| id_string(id, upper))
        .boxed();
    prop_oneof![
        3 => valid.clone(),
        // One character replaced by a hex digit, a letter past f, a dash,
        // something multi-byte or a control character.
        4 => (valid.clone(), 0usize..36, prop::sample::select(&[
            "0", "1", "7", "8", "9", "a", "b", "c", "f", "A", "B", "C", "F", "g", "G", "-", "_",
            " ", "\n", "é", "٣", "\u{0}", "{", "", "00",
        ][..]))
            .prop_map(|(id, at, with)| {
                let mut chars: Vec<String> = id.chars().map(String::from).collect();
                chars[at] = with.to_owned();
                chars.concat()
            }),
        1 => (valid.clone(), prop::sample::select(&["\n", " ", "\r\n", "}", "0", "\u{0}"][..]), any::<bool>())
            .prop_map(|(id, extra, front)| if front { format!("{extra}{id}") } else { format!("{id}{extra}") }),
        1 => prop::sample::select(&[
            NIL, MAX_ID, "FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF", "ffffffff-ffff-ffff-ffff-fffffffffffF",
            "00000000-0000-0000-0000-00000000000O", "00000000-0000-1000-8000-000000000000",
            "ffffffff-ffff-8fff-bfff-ffffffffffff", "",
        ][..]).prop_map(str::to_owned),
        2 => "[0-9a-fA-FgG-]{34,38}",
        1 => "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
        1 => any::<String>(),
    ]
    .boxed()
}

proptest! {
    #![proptest_config(config(5000))]

    /// `parse_id` accepts exactly the contract's pattern, and reads the
    /// number the hex digits spell, whatever their case.
    #[test]
    fn parse_id_accepts_exactly_the_contract_pattern(text in id_text()) {
        let want = matches_id_pattern(&text)
            .then(|| u128::from_str_radix(&text.replace('-', ""), 16).expect("32 hex digits"));
        prop_assert_eq!(parse_id(&text), want, "{:?}", text);
    }
}
