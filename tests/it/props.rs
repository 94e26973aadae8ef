//! Property tests (proptest): the parsers of untrusted text, and page
//! assembly against a naive model.
//!
//! - Query strings: whatever the client sends, `offset_page`, `feed`,
//!   `filter` and `include_notes` return a bounded value or a 400, and agree
//!   with a reference decoder written here from the WHATWG
//!   `application/x-www-form-urlencoded` rules.
//! - Ids: `parse_id` accepts exactly the pattern of docs/api.md#ids, checked
//!   against a hand-written matcher of that regex.
//! - Timestamps and cursors: `Instant`'s `Display` reads back with
//!   `parse_expanded` and agrees with chrono; `parse_rfc3339` of a timestamp
//!   built from random components (any offset, any number of fraction digits,
//!   out-of-range fields, leap seconds) gives the instant chrono computes, or
//!   nothing when a component is out of range; `Cursor` `Display` round trips.
//! - Pages: random snapshots (many tied instants written in different UTC
//!   offsets, ids in both cases, filters that hit and miss, dangling parents)
//!   are loaded with `load_snapshot` and every list page, and every feed
//!   traversal, is compared with a model that sorts the input records here.
//! - HTTP: random paths and query strings on every endpoint of a running
//!   server: never a 5xx, always a JSON body, and the status the model
//!   predicts.
//!
//! Each property sets its case count explicitly and persists no failures.

use std::collections::BTreeSet;

use chrono::{DateTime, NaiveDate};
use portfolio_replica::api::Query;
use portfolio_replica::snapshot::load as load_snapshot;
use portfolio_replica::store::id::parse_id;
use portfolio_replica::store::time::Instant;
use portfolio_replica::store::{Cursor, Dataset, FeedQuery, OffsetPage};
use proptest::prelude::*;
use proptest::test_runner::TestRunner;
use serde_json::{Value, json};

use crate::util::*;

/// A proptest configuration with `cases` cases and no regression files.
fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// The largest `offset` of the API (2^53 - 1).
const MAX_OFFSET: u64 = 9_007_199_254_740_991;

// ---------------------------------------------------------------------------
// Query strings.
// ---------------------------------------------------------------------------

/// Parameter names, known ones in every spelling a client may use.
const KEYS: &[&str] = &[
    "limit",
    "offset",
    "cursor",
    "include",
    "filter[type]",
    "filter[status]",
    "filter[priority]",
    "filter%5Btype%5D",
    "filter%5bstatus%5d",
    "filter%5Bpriority]",
    "filter[priority%5D",
    "li%6Dit",
    "%6Fffset",
    "limit%00",
    "limit+",
    "LIMIT",
    "filter[type",
    "filter]type[",
    "filter",
    "foo",
    "",
    "%",
    "%zz",
    "include%",
];

/// Values that hit the edges of every check.
const VALUES: &[&str] = &[
    "",
    "0",
    "1",
    "20",
    "50",
    "51",
    "100",
    "101",
    "007",
    "-1",
    "+5",
    "%2B5",
    "1.5",
    "1e3",
    " 5",
    "5 ",
    "%205",
    "５",
    "9007199254740991",
    "9007199254740992",
    "18446744073709551615",
    "18446744073709551616",
    "340282366920938463463374607431768211456",
    "notes",
    "no%74es",
    "NOTES",
    "notes%00",
    "triage",
    "in+progress",
    "in%20progress",
    "product-update",
    "high",
    "%FF",
    "%C3%A9",
    "%C3",
    "%E2%82",
    "%ED%A0%80",
    "%",
    "%%",
    "%4",
    "%G1",
    "[]",
    "%5B%5D",
    "&",
    "=",
    "2026-04-12T09:30:00.000Z",
    "2026-04-12T11:30:00.000+02:00",
    "2026-04-12T11:30:00.000%2B02:00",
    "2026-04-12T09:30:00.000Z~6f1c2d3e-4b5a-4c6d-8e7f-0a1b2c3d4e5f",
    "2026-04-12T09:30:00.000Z~",
    "~6f1c2d3e-4b5a-4c6d-8e7f-0a1b2c3d4e5f",
    "+10000-01-01T00:30:00.000Z",
    "-0001-12-31T23:30:00.000Z",
    "2016-12-31T23:59:60Z",
    "2026-02-29T00:00:00Z",
];

/// A query value: edge values, huge digit strings, escapes of arbitrary
/// bytes (often not UTF-8), timestamps and cursors, arbitrary text.
fn query_value() -> BoxedStrategy<String> {
    prop_oneof![
        4 => prop::sample::select(VALUES).prop_map(str::to_owned),
        2 => (0u64..200).prop_map(|n| n.to_string()),
        1 => any::<u64>().prop_map(|n| n.to_string()),
        2 => "[0-9]{15,45}",
        1 => "0{1,40}[0-9]{1,3}",
        1 => "[0-9]{1000}",
        2 => prop::collection::vec(any::<u8>(), 0..8).prop_map(|bytes| {
            bytes
                .iter()
                .map(|b| format!("%{b:02X}"))
                .collect::<String>()
        }),
        2 => timestamp_text(),
        1 => (timestamp_text(), id_text()).prop_map(|(t, id)| format!("{t}~{id}")),
        1 => "[%&=+;\\[\\]#?a-z0-9~:.-]{0,16}",
        1 => "\\PC{0,12}",
    ]
    .boxed()
}

/// A timestamp as a client may put it in a query: any offset, the `+` raw
/// (it then decodes to a space) or escaped.
fn timestamp_text() -> impl Strategy<Value = String> {
    (
        instant_in(-62_000_000_000..YEAR_10000 - 100_000),
        -1439i32..=1439,
        0usize..=12,
        any::<bool>(),
    )
        .prop_map(|((secs, nanos), offset, extra, escape_plus)| {
            let digits = (fraction_digits_needed(nanos) + extra).min(12);
            let offset = clamp_offset(secs, offset);
            let text = write_rfc3339(secs, nanos, offset, digits, false);
            if escape_plus {
                text.replace('+', "%2B")
            } else {
                text
            }
        })
}

/// A query string: a few `name=value` pairs, or arbitrary text.
fn query_string() -> BoxedStrategy<String> {
    let key = prop_oneof![
        6 => prop::sample::select(KEYS).prop_map(str::to_owned),
        1 => "[a-z\\[\\]%5BbDd=+]{0,10}",
    ];
    let pair = (
        key,
        prop::option::weighted(0.9, query_value()),
        prop::sample::select(&["&", "&", "&", "&&", ";"][..]),
    );
    prop_oneof![
        8 => prop::collection::vec(pair, 0..6).prop_map(|pairs| {
            let mut out = String::new();
            for (key, value, sep) in pairs {
                if !out.is_empty() {
                    out.push_str(sep);
                }
                out.push_str(&key);
                if let Some(value) = value {
                    out.push('=');
                    out.push_str(&value);
                }
            }
            out
        }),
        1 => any::<String>(),
        1 => "[a-z0-9=&%+\\[\\];]{0,30}",
    ]
    .boxed()
}

/// Percent-decodes one component as `application/x-www-form-urlencoded`
/// does: `+` is a space, `%XX` a byte, any other `%` itself; then the bytes
/// are read as UTF-8 with U+FFFD for what is not.
fn form_decode(text: &str) -> String {
    let b = text.as_bytes();
    let hex = |c: u8| (c as char).to_digit(16);
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < b.len() && hex(b[i + 1]).is_some() && hex(b[i + 2]).is_some() => {
                out.push((hex(b[i + 1]).unwrap_or(0) * 16 + hex(b[i + 2]).unwrap_or(0)) as u8);
                i += 2;
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The decoded pairs of a query string (empty pieces between `&` are skipped).
fn form_pairs(raw: &str) -> Vec<(String, String)> {
    raw.split('&')
        .filter(|piece| !piece.is_empty())
        .map(|piece| {
            let (k, v) = piece.split_once('=').unwrap_or((piece, ""));
            (form_decode(k), form_decode(v))
        })
        .collect()
}

/// The value of `name`: `Err` when given more than once.
fn model_get<'p>(pairs: &'p [(String, String)], name: &str) -> Result<Option<&'p str>, ()> {
    let mut values = pairs.iter().filter(|(k, _)| k == name).map(|(_, v)| v);
    match (values.next(), values.next()) {
        (None, _) => Ok(None),
        (Some(v), None) => Ok(Some(v.as_str())),
        (Some(_), Some(_)) => Err(()),
    }
}

/// A plain decimal integer from `min` to `max`, or the default when absent.
fn model_integer(
    pairs: &[(String, String)],
    name: &str,
    min: u64,
    max: u64,
) -> Result<Option<u64>, ()> {
    let Some(text) = model_get(pairs, name)? else {
        return Ok(None);
    };
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(());
    }
    let digits = text.trim_start_matches('0');
    if digits.len() > 20 {
        return Err(());
    }
    let n: u128 = if digits.is_empty() {
        0
    } else {
        digits.parse().map_err(|_| ())?
    };
    if n < u128::from(min) || n > u128::from(max) {
        return Err(());
    }
    Ok(Some(n as u64))
}

fn model_filter<'p>(pairs: &'p [(String, String)], name: &str) -> Result<Option<&'p str>, ()> {
    match model_get(pairs, name)? {
        Some("") => Err(()),
        other => Ok(other),
    }
}

fn model_offset_page(pairs: &[(String, String)], max: u64, default: u64) -> Result<OffsetPage, ()> {
    Ok(OffsetPage {
        limit: model_integer(pairs, "limit", 1, max)?.unwrap_or(default),
        offset: model_integer(pairs, "offset", 0, MAX_OFFSET)?.unwrap_or(0),
    })
}

fn model_include(pairs: &[(String, String)]) -> Result<bool, ()> {
    match model_get(pairs, "include")? {
        None => Ok(false),
        Some("notes") => Ok(true),
        Some(_) => Err(()),
    }
}

/// `limit`, `kind`, and the cursor text of a `/feed` query.
type FeedModel<'p> = (u64, Option<&'p str>, Option<&'p str>);

fn model_feed(pairs: &[(String, String)]) -> Result<FeedModel<'_>, ()> {
    let cursor = model_get(pairs, "cursor")?;
    if let Some(text) = cursor
        && Cursor::parse(text).is_err()
    {
        return Err(());
    }
    let limit = model_integer(pairs, "limit", 1, 50)?.unwrap_or(20);
    let kind = model_filter(pairs, "filter[type]")?;
    Ok((limit, kind, cursor))
}

/// Fails unless `got` is a 400 exactly when `want` is an error, and equal otherwise.
fn agree<T: std::fmt::Debug, U: std::fmt::Debug>(
    what: &str,
    raw: &str,
    got: Result<T, portfolio_replica::api::ApiError>,
    want: Result<U, ()>,
    same: impl Fn(&T, &U) -> bool,
) -> Result<(), TestCaseError> {
    match (&got, &want) {
        (Ok(g), Ok(w)) if same(g, w) => Ok(()),
        (Err(e), Err(())) if e.status.as_u16() == 400 && !e.message.is_empty() => Ok(()),
        _ => Err(TestCaseError::fail(format!(
            "{what} of {raw:?}: got {got:?}, the model says {want:?}"
        ))),
    }
}

proptest! {
    #![proptest_config(config(3000))]

    /// Any query string: every accessor answers a bounded value or a 400,
    /// and the same one the reference decoder predicts.
    #[test]
    fn query_accessors_answer_a_bounded_value_or_a_400(raw in query_string()) {
        let query = Query::parse(&raw);
        let pairs = form_pairs(&raw);

        for (max, default) in [(100, 50), (50, 20)] {
            let got = query.offset_page(max, default);
            if let Ok(page) = &got {
                prop_assert!((1..=max).contains(&page.limit), "{raw:?}: limit {page:?}");
                prop_assert!(page.offset <= MAX_OFFSET, "{raw:?}: offset {page:?}");
            }
            agree("offset_page", &raw, got, model_offset_page(&pairs, max, default), |g, w| g == w)?;
        }

        let got = query.feed();
        if let Ok(feed) = &got {
            prop_assert!((1..=50).contains(&feed.limit), "{raw:?}: feed limit {}", feed.limit);
            prop_assert!(feed.kind != Some(""), "{raw:?}: empty filter accepted");
        }
        agree("feed", &raw, got, model_feed(&pairs), |g, (limit, kind, cursor)| {
            g.limit == *limit
                && g.kind == *kind
                && g.cursor == cursor.map(|c| Cursor::parse(c).expect("checked by the model"))
        })?;

        for name in ["filter[type]", "filter[status]", "filter[priority]", "foo"] {
            agree(name, &raw, query.filter(name), model_filter(&pairs, name), |g, w| g == w)?;
        }
        agree("include", &raw, query.include_notes(), model_include(&pairs), |g, w| g == w)?;
    }
}

// ---------------------------------------------------------------------------
// Ids.
// ---------------------------------------------------------------------------

const NIL: &str = "00000000-0000-0000-0000-000000000000";
const MAX_ID: &str = "ffffffff-ffff-ffff-ffff-ffffffffffff";

/// docs/api.md#ids, by hand: `^([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[1-8][0-9a-fA-F]{3}-
/// [89abAB][0-9a-fA-F]{3}-[0-9a-fA-F]{12}|0{8}-0{4}-0{4}-0{4}-0{12}|f{8}-...)$`,
/// with `$` the end of the text (ECMA-262: no trailing newline either).
fn matches_id_pattern(text: &str) -> bool {
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
fn id_value() -> impl Strategy<Value = u128> {
    (any::<u128>(), 1u128..=8, 8u128..=11)
        .prop_map(|(r, version, variant)| id_with(r, version, variant))
}

fn id_with(r: u128, version: u128, variant: u128) -> u128 {
    (r & !(0xF << 76) & !(0xF << 60)) | (version << 76) | (variant << 60)
}

/// The canonical text of an id, lower or upper case.
fn id_string(id: u128, upper: bool) -> String {
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
fn id_text() -> BoxedStrategy<String> {
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

// ---------------------------------------------------------------------------
// Instants and cursors.
// ---------------------------------------------------------------------------

/// Seconds of `10000-01-01T00:00:00Z`.
const YEAR_10000: i64 = 253_402_300_800;

/// The fraction digits needed to write `nanos` exactly.
fn fraction_digits_needed(nanos: u32) -> usize {
    if nanos == 0 {
        return 0;
    }
    let mut n = nanos;
    let mut digits = 9;
    while n % 10 == 0 {
        n /= 10;
        digits -= 1;
    }
    digits
}

/// An instant with seconds in `secs`; fractions are often round.
fn instant_in(secs: std::ops::Range<i64>) -> impl Strategy<Value = (i64, u32)> {
    let nanos = prop_oneof![
        Just(0u32),
        (0u32..1000).prop_map(|ms| ms * 1_000_000),
        (0u32..1_000_000).prop_map(|us| us * 1000),
        0u32..1_000_000_000,
    ];
    (secs, nanos)
}

/// An offset (minutes east of UTC) near `offset` that keeps the local time
/// of `secs` in the four-digit years RFC 3339 can write.
fn clamp_offset(secs: i64, offset: i32) -> i32 {
    /// Seconds of `0000-01-01T00:00:00Z`.
    const YEAR_0: i64 = -62_167_219_200;
    let local = secs + i64::from(offset) * 60;
    let shift = if local >= YEAR_10000 {
        -((local - YEAR_10000) / 60 + 1)
    } else if local < YEAR_0 {
        (YEAR_0 - local + 59) / 60
    } else {
        0
    };
    (i64::from(offset) + shift).clamp(-1439, 1439) as i32
}

/// Writes an instant as RFC 3339 in local time `offset` minutes east of UTC,
/// with `digits` fraction digits (zeros past the ninth); `Z` for offset 0
/// unless `numeric_zero`. The local time must have a four-digit year.
fn write_rfc3339(secs: i64, nanos: u32, offset: i32, digits: usize, numeric_zero: bool) -> String {
    let local = DateTime::from_timestamp(secs + i64::from(offset) * 60, nanos)
        .expect("within chrono's range")
        .naive_utc();
    let mut text = local.format("%Y-%m-%dT%H:%M:%S").to_string();
    assert_eq!(text.len(), 19, "not a four-digit year: {text}");
    if digits > 0 {
        let fraction = format!("{nanos:09}");
        text.push('.');
        text.push_str(&fraction[..digits.min(9)]);
        for _ in 9..digits {
            text.push('0');
        }
    }
    if offset == 0 && !numeric_zero {
        text.push('Z');
    } else {
        let sign = if offset < 0 { '-' } else { '+' };
        let abs = offset.unsigned_abs();
        text.push_str(&format!("{sign}{:02}:{:02}", abs / 60, abs % 60));
    }
    text
}

/// The UTC text `Display` must write, computed with chrono.
fn chrono_display(secs: i64, nanos: u32) -> Option<String> {
    let at = DateTime::from_timestamp(secs, nanos)?;
    let fraction = format!("{nanos:09}");
    let fraction = if nanos % 1_000_000 == 0 {
        &fraction[..3]
    } else if nanos % 1000 == 0 {
        &fraction[..6]
    } else {
        &fraction[..]
    };
    Some(format!("{}.{fraction}Z", at.format("%Y-%m-%dT%H:%M:%S")))
}

/// How a timestamp built from components is spelled.
#[derive(Clone, Debug)]
struct Spelling {
    lower_t: bool,
    /// 0: `Z`, 1: `z`, 2: a numeric offset.
    zone: u8,
    offset_negative: bool,
    /// A fraction's digits (any count, up to 12).
    fraction: Option<String>,
}

fn spelling() -> impl Strategy<Value = Spelling> {
    (
        any::<bool>(),
        prop_oneof![2 => Just(0u8), 1 => Just(1u8), 5 => Just(2u8)],
        any::<bool>(),
        prop::option::of("[0-9]{1,12}"),
    )
        .prop_map(|(lower_t, zone, offset_negative, fraction)| Spelling {
            lower_t,
            zone,
            offset_negative,
            fraction,
        })
}

/// Date-time components, usually in range, sometimes one past it.
fn components() -> impl Strategy<Value = (i32, u32, u32, u32, u32, u32, u32, u32)> {
    (
        0i32..=9999,
        prop_oneof![20 => 1u32..=12, 1 => prop::sample::select(&[0u32, 13][..])],
        prop_oneof![20 => 1u32..=28, 4 => 29u32..=31, 1 => prop::sample::select(&[0u32, 32][..])],
        prop_oneof![20 => 0u32..=23, 1 => Just(24u32)],
        prop_oneof![20 => 0u32..=59, 1 => Just(60u32)],
        prop_oneof![20 => 0u32..=59, 2 => Just(60u32), 1 => Just(61u32)],
        prop_oneof![20 => 0u32..=23, 1 => Just(24u32)],
        prop_oneof![20 => 0u32..=59, 1 => Just(60u32)],
    )
}

proptest! {
    #![proptest_config(config(3000))]

    /// `Display` writes UTC with 3, 6 or 9 fraction digits, as chrono
    /// formats the same instant, and `parse_expanded` reads it back,
    /// expanded years included.
    #[test]
    fn instant_display_round_trips(
        (secs, nanos) in prop_oneof![
            3 => instant_in(-62_200_000_000..YEAR_10000 + 100_000_000),
            1 => instant_in(-31_000_000_000_000..31_000_000_000_000),
        ]
    ) {
        let instant = Instant { secs, nanos };
        let text = instant.to_string();
        prop_assert_eq!(Instant::parse_expanded(&text), Some(instant), "{}", text);
        if let Some(want) = chrono_display(secs, nanos) {
            prop_assert_eq!(&text, &want);
        }
        if !text.starts_with(['+', '-']) {
            prop_assert_eq!(Instant::parse_rfc3339(&text), Some(instant), "{}", text);
        }
    }

    /// A timestamp built from components parses to the instant chrono
    /// computes, or to nothing exactly when a component is out of range.
    #[test]
    fn rfc3339_parses_to_the_instant_chrono_computes(
        (year, month, day, hour, minute, second, off_h, off_m) in components(),
        spelling in spelling(),
    ) {
        let t = if spelling.lower_t { 't' } else { 'T' };
        let mut text = format!("{year:04}-{month:02}-{day:02}{t}{hour:02}:{minute:02}:{second:02}");
        let mut nanos = 0u32;
        if let Some(fraction) = &spelling.fraction {
            text.push('.');
            text.push_str(fraction);
            let nine = format!("{:0<9}", &fraction[..fraction.len().min(9)]);
            nanos = nine.parse().expect("nine digits");
        }
        let offset_minutes: i64 = match spelling.zone {
            0 => { text.push('Z'); 0 }
            1 => { text.push('z'); 0 }
            _ => {
                let sign = if spelling.offset_negative { '-' } else { '+' };
                text.push_str(&format!("{sign}{off_h:02}:{off_m:02}"));
                let minutes = i64::from(off_h * 60 + off_m);
                if spelling.offset_negative { -minutes } else { minutes }
            }
        };
        let offset_ok = spelling.zone < 2 || (off_h <= 23 && off_m <= 59);
        // A leap second is 23:59:60 UTC, whatever the offset it is written in.
        let leap_ok = second != 60
            || (i64::from(hour * 60 + minute) - offset_minutes).rem_euclid(1440) == 1439;
        let want = NaiveDate::from_ymd_opt(year, month, day)
            .and_then(|date| date.and_hms_opt(hour, minute, second.min(59)))
            .filter(|_| second <= 60 && offset_ok && leap_ok)
            .map(|local| Instant {
                secs: local.and_utc().timestamp() - offset_minutes * 60 + i64::from(second == 60),
                nanos,
            });
        prop_assert_eq!(Instant::parse_rfc3339(&text), want, "{}", text);
        prop_assert_eq!(Instant::parse_expanded(&text), want, "{}", text);
        // A cursor of that text is the instant itself, also when an
        // unencoded `+` of the offset arrived as a space.
        prop_assert_eq!(Cursor::parse(&text).ok(), want.map(Cursor::Before), "{}", text);
        prop_assert_eq!(Cursor::parse(&text.replace('+', " ")).ok(), want.map(Cursor::Before), "{}", text);
    }

    /// A timestamp with one character dropped, doubled or replaced never
    /// panics a parser, and whatever parses shows again as itself.
    #[test]
    fn damaged_timestamps_never_panic(
        (secs, nanos) in instant_in(-62_000_000_000..YEAR_10000 - 100_000),
        offset in -1439i32..=1439,
        at in 0usize..40,
        damage in 0u8..3,
        with in prop::sample::select(&["0", "9", ":", "-", "+", "T", "Z", ".", " ", "é", "~"][..]),
    ) {
        let offset = clamp_offset(secs, offset);
        let mut chars: Vec<String> = write_rfc3339(secs, nanos, offset, fraction_digits_needed(nanos), true)
            .chars()
            .map(String::from)
            .collect();
        let at = at % chars.len();
        match damage {
            0 => { chars.remove(at); }
            1 => { let c = chars[at].clone(); chars.insert(at, c); }
            _ => chars[at] = with.to_owned(),
        }
        let text = chars.concat();
        for parsed in [Instant::parse_rfc3339(&text), Instant::parse_expanded(&text)].into_iter().flatten() {
            prop_assert_eq!(Instant::parse_expanded(&parsed.to_string()), Some(parsed));
        }
        if let Ok(cursor) = Cursor::parse(&text) {
            prop_assert_eq!(Cursor::parse(&cursor.to_string()), Ok(cursor));
        }
    }

    /// Both cursor forms round trip through their text: the feed's
    /// `nextCursor` reads back as the position it was made from.
    #[test]
    fn cursor_display_round_trips(
        (secs, nanos) in prop_oneof![
            3 => instant_in(-62_200_000_000..YEAR_10000 + 100_000_000),
            1 => instant_in(-31_000_000_000_000..31_000_000_000_000),
        ],
        id in prop_oneof![8 => id_value(), 1 => Just(0u128), 1 => Just(u128::MAX)],
        tie in any::<bool>(),
    ) {
        let at = Instant { secs, nanos };
        let cursor = if tie { Cursor::After { at, id } } else { Cursor::Before(at) };
        let text = cursor.to_string();
        prop_assert_eq!(text.contains('~'), tie, "{}", text);
        prop_assert_eq!(Cursor::parse(&text), Ok(cursor), "{}", text);
    }

    /// Anything a client sends as a cursor parses or is refused, never panics;
    /// what parses round trips.
    #[test]
    fn any_cursor_text_parses_or_is_refused(
        text in prop_oneof![query_value(), (timestamp_text(), id_text()).prop_map(|(t, id)| format!("{t}~{id}"))]
    ) {
        let text = form_decode(&text);
        if let Ok(cursor) = Cursor::parse(&text) {
            prop_assert_eq!(Cursor::parse(&cursor.to_string()), Ok(cursor), "{}", text);
        }
    }
}

// ---------------------------------------------------------------------------
// Page assembly against a naive model.
// ---------------------------------------------------------------------------

/// `2026-03-01T10:00:00Z`.
const BASE: i64 = 1_772_359_200;

/// `high` is also a priority: a filter must not match the other attribute.
const STATUSES: &[&str] = &["triage", "done", "in progress", "high"];
const PRIORITIES: &[&str] = &["low", "high"];
const TYPES: &[&str] = &["product-update", "fundraise-announcement"];
const NAMES: &[&str] = &["Acme", "acme", "Acme ", "Zeta", "Émile", "Ä", "a", "Zeta"];

/// Parents of records that no company of the snapshot has.
const DANGLING: [u128; 2] = [
    0x0000_0000_0000_4000_8000_0000_0000_dead,
    0xffff_ffff_ffff_4fff_bfff_ffff_ffff_dead,
];

/// One generated record, and everything the model needs to know about it.
#[derive(Clone, Debug)]
struct Rec {
    id: u128,
    id_text: String,
    at: (i64, u32),
    at_text: String,
    /// Index into the companies, or past them for a dangling parent.
    parent: usize,
    parent_upper: bool,
    /// Status (tasks), type (feed) or name index (companies).
    a: Option<usize>,
    /// Priority (tasks, companies).
    b: Option<usize>,
    /// Write an absent value as `null` rather than leaving it out.
    explicit_null: bool,
    private: bool,
}

/// An instant from a small pool, so that ties are frequent, written in a
/// random offset with random fraction digits.
fn pooled_instant() -> impl Strategy<Value = ((i64, u32), String)> {
    let instant = prop_oneof![
        10 => (
            prop::sample::select(&[0i64, 1, 3600, -86_400][..]),
            prop::sample::select(&[0u32, 1, 500_000_000, 999_999_999][..]),
        )
            .prop_map(|(d, n)| (BASE + d, n)),
        1 => Just((YEAR_10000 + 1800, 0)),
        1 => Just((-1, 500_000_000)),
    ];
    let offset = prop_oneof![
        3 => Just(0i32),
        6 => prop::sample::select(&[120, -330, 840, -720, 60, -60, 345, 1439, -1439][..]),
        1 => -1439i32..=1439,
    ];
    (instant, offset, 0usize..4, any::<bool>()).prop_map(
        |((secs, nanos), offset, extra, numeric_zero)| {
            let offset = clamp_offset(secs, offset);
            let digits = fraction_digits_needed(nanos) + extra;
            (
                (secs, nanos),
                write_rfc3339(secs, nanos, offset, digits, numeric_zero),
            )
        },
    )
}

fn rec(a_values: usize, b_values: usize) -> impl Strategy<Value = Rec> {
    (
        id_value(),
        any::<bool>(),
        pooled_instant(),
        0usize..8,
        any::<bool>(),
        prop::option::weighted(0.85, 0..a_values.max(1)),
        prop::option::weighted(0.85, 0..b_values.max(1)),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(
            |(id, upper, (at, at_text), parent, parent_upper, a, b, explicit_null, private)| Rec {
                id,
                id_text: id_string(id, upper),
                at,
                at_text,
                parent,
                parent_upper,
                a,
                b,
                explicit_null,
                private,
            },
        )
}

/// A random workspace: companies, tasks, notes and feed entries.
#[derive(Clone, Debug)]
struct Data {
    companies: Vec<Rec>,
    tasks: Vec<Rec>,
    notes: Vec<Rec>,
    feed: Vec<Rec>,
}

/// Drops records whose id an earlier one of the list has (shrinking makes ids collide).
fn unique(mut list: Vec<Rec>) -> Vec<Rec> {
    let mut seen = BTreeSet::new();
    list.retain(|r| seen.insert(r.id));
    list
}

fn data() -> impl Strategy<Value = Data> {
    (
        prop::collection::vec(rec(NAMES.len(), PRIORITIES.len()), 0..6),
        prop::collection::vec(rec(STATUSES.len(), PRIORITIES.len()), 0..40),
        prop::collection::vec(rec(1, 1), 0..25),
        prop::collection::vec(rec(TYPES.len(), 1), 0..45),
    )
        .prop_map(|(companies, tasks, notes, feed)| Data {
            companies: unique(companies),
            tasks: unique(tasks),
            notes: unique(notes),
            feed: unique(feed),
        })
}

impl Data {
    /// The id a record's `company_id` names.
    fn parent_id(&self, r: &Rec) -> u128 {
        self.companies
            .get(r.parent)
            .map_or(DANGLING[r.parent % 2], |c| c.id)
    }

    fn parent_text(&self, r: &Rec) -> String {
        id_string(self.parent_id(r), r.parent_upper)
    }

    fn snapshot(&self) -> Value {
        let opt = |r: &Rec,
                   value: Option<&str>,
                   attrs: &mut serde_json::Map<String, Value>,
                   name: &str| {
            match value {
                Some(v) => {
                    attrs.insert(name.to_owned(), json!(v));
                }
                None if r.explicit_null => {
                    attrs.insert(name.to_owned(), Value::Null);
                }
                None => {}
            }
        };
        let companies: Vec<Value> = self
            .companies
            .iter()
            .map(|c| {
                let mut attrs = serde_json::Map::new();
                attrs.insert("name".into(), json!(NAMES[c.a.unwrap_or(0)]));
                opt(c, c.b.map(|b| PRIORITIES[b]), &mut attrs, "priority");
                json!({ "id": c.id_text, "attributes": attrs })
            })
            .collect();
        let tasks: Vec<Value> = self
            .tasks
            .iter()
            .map(|t| {
                let mut attrs = serde_json::Map::new();
                attrs.insert("company_id".into(), json!(self.parent_text(t)));
                attrs.insert("created_at".into(), json!(t.at_text));
                attrs.insert("title".into(), json!(format!("task {}", t.id_text)));
                opt(t, t.a.map(|a| STATUSES[a]), &mut attrs, "status");
                opt(t, t.b.map(|b| PRIORITIES[b]), &mut attrs, "priority");
                json!({ "id": t.id_text, "attributes": attrs })
            })
            .collect();
        let notes: Vec<Value> = self
            .notes
            .iter()
            .map(|n| {
                json!({ "id": n.id_text, "attributes": {
                    "company_id": self.parent_text(n),
                    "created_at": n.at_text,
                }})
            })
            .collect();
        let feed: Vec<Value> = self
            .feed
            .iter()
            .map(|f| {
                let mut attrs = serde_json::Map::new();
                attrs.insert("company_id".into(), json!(self.parent_text(f)));
                attrs.insert("published_at".into(), json!(f.at_text));
                attrs.insert("private".into(), json!(f.private));
                opt(f, f.a.map(|a| TYPES[a]), &mut attrs, "type");
                json!({ "id": f.id_text, "attributes": attrs })
            })
            .collect();
        json!({
            "format_version": 1,
            "workspace": { "id": "ws-props" },
            "api_keys": [ { "sha256": key_hash(KEY) } ],
            "companies": companies,
            "tasks": tasks,
            "notes": notes,
            "feed": feed,
        })
    }
}

/// Newest first, ties by id descending: the order of task, note and feed lists.
fn newest_first<'r>(records: impl IntoIterator<Item = &'r Rec>) -> Vec<&'r Rec> {
    let mut list: Vec<&Rec> = records.into_iter().collect();
    list.sort_by_key(|r| std::cmp::Reverse((r.at, r.id)));
    list
}

/// `{"data": [...], "pagination": {...}}` as the model expects it.
fn model_offset_body(list: &[&Rec], page: OffsetPage) -> (Vec<String>, Value) {
    let from = (page.offset.min(list.len() as u64)) as usize;
    let to = (page
        .offset
        .saturating_add(page.limit)
        .min(list.len() as u64)) as usize;
    let ids = list[from..to].iter().map(|r| r.id_text.clone()).collect();
    let has_more = page.offset.saturating_add(page.limit) < list.len() as u64;
    (
        ids,
        json!({ "limit": page.limit, "offset": page.offset, "hasMore": has_more }),
    )
}

/// The ids of `body`'s `data`, and its `pagination`.
fn served(body: &[u8]) -> Result<(Vec<Value>, Value), TestCaseError> {
    let body: Value = serde_json::from_slice(body)
        .map_err(|e| TestCaseError::fail(format!("body is not JSON: {e}")))?;
    let data = body["data"]
        .as_array()
        .cloned()
        .ok_or_else(|| TestCaseError::fail(format!("no data array: {body}")))?;
    Ok((data, body["pagination"].clone()))
}

fn ids_of(data: &[Value]) -> Vec<String> {
    data.iter()
        .map(|r| r["id"].as_str().unwrap_or("<no id>").to_owned())
        .collect()
}

/// Checks an offset page body against the model, and that each record
/// carries the attributes it was written with.
fn check_offset_page(
    what: &str,
    body: &[u8],
    list: &[&Rec],
    page: OffsetPage,
    attrs: impl Fn(&Rec) -> Value,
) -> Result<(), TestCaseError> {
    let (data, pagination) = served(body)?;
    let (want_ids, want_pagination) = model_offset_body(list, page);
    prop_assert_eq!(ids_of(&data), want_ids, "{}: ids of {:?}", what, page);
    prop_assert_eq!(
        pagination,
        want_pagination,
        "{}: pagination of {:?}",
        what,
        page
    );
    for record in &data {
        let id = record["id"].as_str().unwrap_or_default();
        let Some(r) = list.iter().find(|r| r.id_text == id) else {
            continue;
        };
        let want = attrs(r);
        for (name, value) in want.as_object().expect("an object") {
            prop_assert_eq!(
                &record["attributes"][name],
                value,
                "{}: attribute {} of {}",
                what,
                name,
                id
            );
        }
    }
    Ok(())
}

/// One random request against a dataset.
#[derive(Clone, Debug)]
struct Op {
    kind: u8,
    x: usize,
    y: usize,
    z: u8,
    limit: u64,
    offset: u64,
}

fn op() -> impl Strategy<Value = Op> {
    (
        0u8..7,
        0usize..64,
        0usize..64,
        0u8..4,
        prop_oneof![4 => 1u64..=8, 1 => 1u64..=100],
        prop_oneof![
            6 => 0u64..48,
            1 => prop::sample::select(&[MAX_OFFSET, u64::MAX - 3, u64::MAX][..]),
            1 => any::<u64>(),
        ],
    )
        .prop_map(|(kind, x, y, z, limit, offset)| Op {
            kind,
            x,
            y,
            z,
            limit,
            offset,
        })
}

/// `None`, one of `values`, or a value no record has.
fn pick<'v>(n: usize, values: &[&'v str]) -> Option<&'v str> {
    match n % (values.len() + 2) {
        0 => None,
        i if i <= values.len() => Some(values[i - 1]),
        _ => Some("no such value"),
    }
}

/// A position in the feed, as the model reads it.
#[derive(Clone, Copy, Debug, PartialEq)]
enum ModelCursor {
    Before((i64, u32)),
    After((i64, u32), u128),
}

impl ModelCursor {
    fn is_before(self, r: &Rec) -> bool {
        match self {
            ModelCursor::Before(at) => r.at >= at,
            ModelCursor::After(at, id) => (r.at, r.id) >= (at, id),
        }
    }

    fn to_cursor(self) -> Cursor {
        let instant = |(secs, nanos)| Instant { secs, nanos };
        match self {
            ModelCursor::Before(at) => Cursor::Before(instant(at)),
            ModelCursor::After(at, id) => Cursor::After {
                at: instant(at),
                id,
            },
        }
    }
}

/// Fetches one feed page and checks it against the model; returns the
/// served `nextCursor`.
fn check_feed_page(
    ds: &Dataset,
    list: &[&Rec],
    kind: Option<&str>,
    limit: u64,
    cursor: Option<(Cursor, ModelCursor)>,
) -> Result<(Vec<String>, Option<String>), TestCaseError> {
    let body = ds.feed(FeedQuery {
        limit,
        cursor: cursor.map(|c| c.0),
        kind,
    });
    let (data, pagination) = served(&body)?;
    let rest: Vec<&Rec> = list
        .iter()
        .copied()
        .filter(|r| !cursor.is_some_and(|(_, m)| m.is_before(r)))
        .collect();
    let page = &rest[..rest.len().min(limit as usize)];
    let want_ids: Vec<String> = page.iter().map(|r| r.id_text.clone()).collect();
    let context = format!(
        "feed kind {kind:?} limit {limit} cursor {:?}",
        cursor.map(|c| c.0)
    );
    prop_assert_eq!(ids_of(&data), want_ids.clone(), "{}", context);
    for (record, r) in data.iter().zip(page) {
        prop_assert_eq!(
            &record["attributes"]["published_at"],
            &json!(r.at_text),
            "{}",
            context
        );
    }
    prop_assert_eq!(&pagination["limit"], &json!(limit), "{}", context);
    let next = &pagination["nextCursor"];
    let want_next = (rest.len() > page.len() && !page.is_empty()).then(|| {
        let (last, after) = (page[page.len() - 1], rest[page.len()]);
        if after.at < last.at {
            ModelCursor::Before(last.at)
        } else {
            ModelCursor::After(last.at, last.id)
        }
    });
    match want_next {
        None => {
            prop_assert!(
                next.is_null(),
                "{}: nextCursor {} where no older entry exists",
                context,
                next
            );
            Ok((want_ids, None))
        }
        Some(want) => {
            let text = next.as_str().ok_or_else(|| {
                TestCaseError::fail(format!("{context}: nextCursor {next}, expected {want:?}"))
            })?;
            prop_assert_eq!(
                Cursor::parse(text),
                Ok(want.to_cursor()),
                "{}: nextCursor {}",
                context,
                text
            );
            // The plain timestamp wherever it alone is exact.
            prop_assert_eq!(
                text.contains('~'),
                matches!(want, ModelCursor::After(..)),
                "{}: nextCursor {}",
                context,
                text
            );
            Ok((want_ids, Some(text.to_owned())))
        }
    }
}

/// Follows `nextCursor` from the first page to the last; the pages must
/// list the model's entries once each, in order.
fn check_feed_traversal(
    ds: &Dataset,
    list: &[&Rec],
    kind: Option<&str>,
    limit: u64,
) -> Result<(), TestCaseError> {
    let mut seen = Vec::new();
    let mut cursor = None;
    for _ in 0..=list.len() + 1 {
        let (ids, next) = check_feed_page(ds, list, kind, limit, cursor)?;
        seen.extend(ids);
        let Some(text) = next else {
            let want: Vec<String> = list.iter().map(|r| r.id_text.clone()).collect();
            prop_assert_eq!(seen, want, "feed traversal kind {:?} limit {}", kind, limit);
            return Ok(());
        };
        let parsed = Cursor::parse(&text).expect("checked by check_feed_page");
        let model = match parsed {
            Cursor::Before(at) => ModelCursor::Before((at.secs, at.nanos)),
            Cursor::After { at, id } => ModelCursor::After((at.secs, at.nanos), id),
        };
        cursor = Some((parsed, model));
    }
    Err(TestCaseError::fail(format!(
        "feed traversal kind {kind:?} limit {limit} did not end after {} pages",
        list.len() + 2
    )))
}

fn run_op(data: &Data, ds: &Dataset, op: &Op) -> Result<(), TestCaseError> {
    let page = OffsetPage {
        limit: op.limit,
        offset: op.offset,
    };
    let feed_limit = (op.limit - 1) % 50 + 1;
    let companies = data.companies.len();
    // A known company, a dangling parent, or an id nobody uses.
    let company = |n: usize| match n % (companies + 3) {
        i if i < companies => data.companies[i].id,
        i if i < companies + 2 => DANGLING[i - companies],
        _ => 0x1234_5678_9abc_4def_8123_4567_89ab_cdef,
    };
    match op.kind {
        0 => {
            let (status, priority) = (pick(op.x, STATUSES), pick(op.y, PRIORITIES));
            let list = newest_first(data.tasks.iter().filter(|t| {
                status.is_none_or(|s| t.a.map(|a| STATUSES[a]) == Some(s))
                    && priority.is_none_or(|p| t.b.map(|b| PRIORITIES[b]) == Some(p))
            }));
            let body = ds.tasks(status, priority, page);
            check_offset_page(
                &format!("tasks {status:?} {priority:?}"),
                &body,
                &list,
                page,
                |t| {
                    json!({
                        "created_at": t.at_text,
                        "company_id": data.parent_text(t),
                        "status": t.a.map(|a| STATUSES[a]),
                        "priority": t.b.map(|b| PRIORITIES[b]),
                    })
                },
            )
        }
        1 | 2 => {
            let id = company(op.x);
            let known = data.companies.iter().any(|c| c.id == id);
            let records = if op.kind == 1 {
                &data.tasks
            } else {
                &data.notes
            };
            let list = newest_first(records.iter().filter(|r| data.parent_id(r) == id));
            let body = if op.kind == 1 {
                ds.company_tasks(id, page)
            } else {
                ds.company_notes(id, page)
            };
            let what = format!(
                "{} of {}",
                if op.kind == 1 { "tasks" } else { "notes" },
                id_string(id, false)
            );
            match body {
                None => {
                    prop_assert!(
                        !known,
                        "{}: no answer for a company the snapshot holds",
                        what
                    );
                    Ok(())
                }
                Some(body) => {
                    prop_assert!(
                        known,
                        "{}: an answer for a company the snapshot does not hold",
                        what
                    );
                    check_offset_page(
                        &what,
                        &body,
                        &list,
                        page,
                        |r| json!({ "created_at": r.at_text, "company_id": data.parent_text(r) }),
                    )
                }
            }
        }
        3 => {
            let priority = pick(op.x, PRIORITIES);
            let mut list: Vec<&Rec> = data
                .companies
                .iter()
                .filter(|c| priority.is_none_or(|p| c.b.map(|b| PRIORITIES[b]) == Some(p)))
                .collect();
            list.sort_by(|x, y| {
                NAMES[x.a.unwrap_or(0)]
                    .as_bytes()
                    .cmp(NAMES[y.a.unwrap_or(0)].as_bytes())
                    .then(x.id.cmp(&y.id))
            });
            let body = ds.portfolio(priority, page);
            check_offset_page(
                &format!("portfolio {priority:?}"),
                &body,
                &list,
                page,
                |c| json!({ "name": NAMES[c.a.unwrap_or(0)], "priority": c.b.map(|b| PRIORITIES[b]) }),
            )
        }
        kind => {
            let type_filter = pick(op.x, TYPES);
            let list = newest_first(
                data.feed
                    .iter()
                    .filter(|f| type_filter.is_none_or(|t| f.a.map(|a| TYPES[a]) == Some(t))),
            );
            if kind == 4 {
                return check_feed_traversal(ds, &list, type_filter, feed_limit);
            }
            // A cursor a client builds: an entry's own timestamp text (any
            // offset), one nanosecond either side of it, or a tie-breaking
            // cursor naming an entry (or a near id).
            let (at, at_text, id, id_text) = match data.feed.get(op.y % data.feed.len().max(1)) {
                Some(f) => (f.at, f.at_text.clone(), f.id, f.id_text.clone()),
                None => (
                    (BASE, 0),
                    "2026-03-01T10:00:00Z".to_owned(),
                    DANGLING[0],
                    id_string(DANGLING[0], false),
                ),
            };
            let (at, text) = match op.z {
                0 | 1 => (at, at_text),
                2 if at.1 < 999_999_999 => (
                    (at.0, at.1 + 1),
                    Instant {
                        secs: at.0,
                        nanos: at.1 + 1,
                    }
                    .to_string(),
                ),
                _ if at.1 > 0 => (
                    (at.0, at.1 - 1),
                    Instant {
                        secs: at.0,
                        nanos: at.1 - 1,
                    }
                    .to_string(),
                ),
                _ => (at, at_text),
            };
            let (text, model) = if kind == 5 {
                (text, ModelCursor::Before(at))
            } else {
                let id_near = match op.z {
                    0 => id,
                    1 => id.wrapping_add(1),
                    _ => id.wrapping_sub(1),
                };
                let id_text = if id_near == id {
                    id_text
                } else {
                    id_string(id_near, false)
                };
                (format!("{text}~{id_text}"), ModelCursor::After(at, id_near))
            };
            let parsed = Cursor::parse(&text);
            // A near id may leave the pattern (its version or variant digit
            // changed): then the cursor is refused, as it must be.
            let pattern_ok = !text.contains('~')
                || matches_id_pattern(text.rsplit('~').next().unwrap_or_default());
            prop_assert_eq!(parsed.is_ok(), pattern_ok, "cursor {}", text);
            let Ok(cursor) = parsed else { return Ok(()) };
            prop_assert_eq!(cursor, model.to_cursor(), "cursor {}", text);
            check_feed_page(ds, &list, type_filter, feed_limit, Some((cursor, model))).map(|_| ())
        }
    }
}

proptest! {
    #![proptest_config(config(200))]

    /// Random snapshots load, and every page of every list, and every feed
    /// traversal, is what the model computes from the input records.
    #[test]
    fn pages_match_the_model(data in data(), ops in prop::collection::vec(op(), 1..20)) {
        let bytes = serde_json::to_vec(&data.snapshot()).expect("serialize");
        let loaded = load_snapshot("props.json", &bytes)
            .map_err(|e| TestCaseError::fail(format!("a valid snapshot was rejected: {e}")))?;
        let ds = &loaded.dataset;
        prop_assert_eq!(ds.counts.tasks, data.tasks.len());
        prop_assert_eq!(ds.counts.feed, data.feed.len());
        // Every request kind once, and the random ones.
        for kind in 0..7 {
            run_op(&data, ds, &Op { kind, x: 0, y: 0, z: 0, limit: 100, offset: 0 })?;
        }
        for op in &ops {
            run_op(&data, ds, op)?;
        }
        // The whole feed, in every page size, without a filter.
        let list = newest_first(&data.feed);
        for limit in [1, 2, 3, 50] {
            check_feed_traversal(ds, &list, None, limit)?;
        }
    }
}

// ---------------------------------------------------------------------------
// Over HTTP.
// ---------------------------------------------------------------------------

/// The fixture's ids (`Fixture::ids(0)`) and the routes that take one.
#[derive(Clone, Copy, Debug)]
enum Route {
    Portfolio,
    Company,
    CompanyTasks,
    CompanyRoles,
    CompanyNotes,
    CompanyMetrics,
    Tasks,
    Task,
    Roles,
    Note,
    Feed,
    Meeting,
}

const ROUTES: &[Route] = &[
    Route::Portfolio,
    Route::Company,
    Route::CompanyTasks,
    Route::CompanyRoles,
    Route::CompanyNotes,
    Route::CompanyMetrics,
    Route::Tasks,
    Route::Task,
    Route::Roles,
    Route::Note,
    Route::Feed,
    Route::Meeting,
];

impl Route {
    /// The path with `segment` as its id.
    fn path(self, segment: &str) -> String {
        match self {
            Route::Portfolio => "/portfolio".into(),
            Route::Company => format!("/portfolio/{segment}"),
            Route::CompanyTasks => format!("/portfolio/{segment}/tasks"),
            Route::CompanyRoles => format!("/portfolio/{segment}/roles"),
            Route::CompanyNotes => format!("/portfolio/{segment}/notes"),
            Route::CompanyMetrics => format!("/portfolio/{segment}/metrics"),
            Route::Tasks => "/tasks".into(),
            Route::Task => format!("/tasks/{segment}"),
            Route::Roles => "/roles".into(),
            Route::Note => format!("/notes/{segment}"),
            Route::Feed => "/feed".into(),
            Route::Meeting => format!("/meetings/{segment}"),
        }
    }

    /// The id of the fixture's record this route finds, if it takes one.
    fn existing(self) -> Option<u128> {
        let n = match self {
            Route::Portfolio | Route::Tasks | Route::Roles | Route::Feed => return None,
            Route::Task => 2,
            Route::Note => 3,
            Route::Meeting => 7,
            _ => 1,
        };
        parse_id(&uuid(n))
    }

    /// `segment`, with `OWN` (`own`) read as the id of `existing` in upper
    /// (lower) case.
    fn own(self, segment: &str) -> String {
        let own = self
            .existing()
            .map_or_else(|| uuid(1), |id| id_string(id, false));
        match segment {
            "OWN" => own.to_uppercase(),
            "own" => own,
            other => other.to_owned(),
        }
    }

    /// The status the model predicts for `segment` and the decoded query.
    fn expected_status(self, segment: &str, pairs: &[(String, String)]) -> u16 {
        let query_ok = match self {
            Route::Portfolio => {
                model_filter(pairs, "filter[priority]").is_ok()
                    && model_offset_page(pairs, 100, 50).is_ok()
            }
            Route::CompanyTasks | Route::CompanyNotes => model_offset_page(pairs, 100, 50).is_ok(),
            Route::Tasks => {
                model_filter(pairs, "filter[status]").is_ok()
                    && model_filter(pairs, "filter[priority]").is_ok()
                    && model_offset_page(pairs, 100, 50).is_ok()
            }
            Route::Feed => model_feed(pairs).is_ok(),
            Route::Meeting => model_include(pairs).is_ok(),
            _ => true,
        };
        let Some(existing) = self.existing() else {
            return if query_ok { 200 } else { 400 };
        };
        if segment.is_empty() {
            // `/tasks/` and `/portfolio//tasks` name no route.
            return 404;
        }
        if !matches_id_pattern(segment) || !query_ok {
            return 400;
        }
        let id = u128::from_str_radix(&segment.replace('-', ""), 16).expect("32 hex digits");
        if id == existing { 200 } else { 404 }
    }
}

/// A path segment: the fixture's ids (in both cases, percent-encoded),
/// unknown ids, the nil and max ids, near ids and garbage.
fn segment() -> BoxedStrategy<String> {
    prop_oneof![
        // The route's own record (see `Route::own`), in either case.
        3 => prop::sample::select(&["OWN", "own"][..]).prop_map(str::to_owned),
        2 => (1u64..=8, any::<bool>()).prop_map(|(n, upper)| if upper { uuid(n).to_uppercase() } else { uuid(n) }),
        1 => (1u64..=8).prop_map(|n| enc(&uuid(n)).replacen('0', "%30", 1)),
        2 => id_text().prop_map(|t| enc(&t)),
        1 => "[A-Za-z0-9._~!$&'()*+,;=:@%-]{0,40}",
        1 => prop::collection::vec(any::<u8>(), 0..40).prop_map(|bytes| {
            bytes.iter().map(|b| format!("%{b:02x}")).collect::<String>()
        }),
    ]
    .boxed()
}

/// Escapes what may not appear raw in an HTTP request target (RFC 3986;
/// `[` and `]` are left raw, as browsers send them). Hyper itself refuses a
/// raw `"`, `<`, `>`, DEL or a non-UTF-8 byte with an empty 400 before the
/// API sees the request, so those are always sent escaped here.
fn target_safe(text: &str) -> String {
    let mut out = String::new();
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=:@/?%[]".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The snapshot the HTTP property serves: the fixture plus a few more records.
fn http_snapshot() -> Value {
    let mut snap = fixture("ws-http", &[KEY], 0);
    add(
        &mut snap,
        "tasks",
        instant_records(100, |id, ts| {
            with(
                task(id, 1, ts),
                json!({ "status": "triage", "priority": "low" }),
            )
        }),
    );
    add(
        &mut snap,
        "feed",
        instant_records(200, |id, ts| feed_entry(id, 1, ts)),
    );
    add(
        &mut snap,
        "notes",
        instant_records(300, |id, ts| note(id, 1, ts)),
    );
    snap
}

/// Random paths and query strings on every endpoint: always JSON, never a
/// 5xx, and the status the model predicts (400 before 404).
#[test]
fn http_answers_are_json_with_the_predicted_status() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let server = runtime.block_on(TestServer::start(&[("ws.json", http_snapshot())]));
    let mut runner = TestRunner::new(config(250));
    let strategy = (
        prop::sample::select(ROUTES),
        segment(),
        query_string(),
        any::<bool>(),
    );
    let result = runner.run(&strategy, |(route, segment, query, with_query)| {
        let segment = route.own(&segment);
        let query = target_safe(&query);
        let mut target = route.path(&segment);
        if with_query {
            target.push('?');
            target.push_str(&query);
        }
        let resp = runtime.block_on(server.get(&target, Some(KEY)));
        let context = format!("GET {target}");
        prop_assert!(
            resp.status < 500,
            "{}: status {}, body {}",
            context,
            resp.status,
            resp.text()
        );
        prop_assert_eq!(
            resp.header("content-type"),
            Some("application/json"),
            "{}",
            context
        );
        let body: Value = serde_json::from_slice(&resp.body).map_err(|e| {
            TestCaseError::fail(format!(
                "{context}: body is not JSON ({e}): {}",
                resp.text()
            ))
        })?;
        let pairs = if with_query {
            form_pairs(&query)
        } else {
            Vec::new()
        };
        let mut expected = BTreeSet::from([route.expected_status(&segment, &pairs)]);
        if segment.contains('%') {
            // A percent-encoded id may be read raw (never an id) or decoded.
            expected.insert(route.expected_status(&form_decode(&segment), &pairs));
        }
        prop_assert!(
            expected.contains(&resp.status),
            "{}: status {} instead of {:?}, body {}",
            context,
            resp.status,
            expected,
            resp.text()
        );
        if resp.status == 200 {
            prop_assert!(
                body.get("data").is_some(),
                "{}: no data in {}",
                context,
                body
            );
        } else if let Some(problem) = resp.error_problem(resp.status) {
            return Err(TestCaseError::fail(format!("{context}: {problem}")));
        }
        Ok(())
    });
    drop(server);
    if let Err(e) = result {
        panic!("{e}");
    }
}
