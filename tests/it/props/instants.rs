//! Timestamps and cursors: `Instant`'s `Display` reads back with
//! `parse_expanded` and agrees with chrono; `parse_rfc3339` of a timestamp
//! built from random components (any offset, any number of fraction digits,
//! out-of-range fields, leap seconds) gives the instant chrono computes, or
//! nothing when a component is out of range; `Cursor` `Display` round trips.

use chrono::{DateTime, NaiveDate};
use portfolio_domain::store::Cursor;
use portfolio_domain::store::time::Instant;
use proptest::prelude::*;

use super::ids::*;
use super::query::*;
use super::*;

/// Seconds of `10000-01-01T00:00:00Z`.
pub(super) const YEAR_10000: i64 = 253_402_300_800;

/// The fraction digits needed to write `nanos` exactly.
pub(super) fn fraction_digits_needed(nanos: u32) -> usize {
    if nanos == 0 {
        return 0;
    }
    let mut n = nanos;
    let mut digits = 9;
    while n.is_multiple_of(10) {
        n /= 10;
        digits -= 1;
    }
    digits
}

/// An instant with seconds in `secs`; fractions are often round.
pub(super) fn instant_in(secs: std::ops::Range<i64>) -> impl Strategy<Value = (i64, u32)> {
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
pub(super) fn clamp_offset(secs: i64, offset: i32) -> i32 {
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
pub(super) fn write_rfc3339(
    secs: i64,
    nanos: u32,
    offset: i32,
    digits: usize,
    numeric_zero: bool,
) -> String {
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
    let fraction = if nanos.is_multiple_of(1_000_000) {
        &fraction[..3]
    } else if nanos.is_multiple_of(1000) {
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
