//! RFC 3339 timestamps as instants.
//!
//! Snapshots write timestamps with any UTC offset and any number of fraction
//! digits; lists are ordered by the *instant*, never by the text. This parser
//! is strict (the profile of ISO 8601 that the web uses) and allocation-free,
//! because a large snapshot holds millions of timestamps.

use std::fmt;
use std::time::SystemTime;

/// A point in time: seconds since the Unix epoch plus nanoseconds.
///
/// Field order makes the derived `Ord` compare seconds first, then nanoseconds.
/// Seconds are `i64` so that any four-digit year fits (nanoseconds in an `i64`
/// would stop at the year 2262).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Instant {
    pub secs: i64,
    pub nanos: u32,
}

impl Instant {
    /// The same moment as a `SystemTime` (before the epoch: the epoch).
    pub fn to_system_time(self) -> SystemTime {
        let since = std::time::Duration::new(self.secs.max(0) as u64, self.nanos);
        SystemTime::UNIX_EPOCH + since
    }

    /// Parses an RFC 3339 date-time: `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`.
    ///
    /// `T` and `Z` may be lower case, as RFC 3339 allows. Fraction digits past
    /// the ninth are checked but do not take part in comparisons.
    pub fn parse_rfc3339(text: &str) -> Option<Instant> {
        Instant::parse_rfc3339_bytes(text.as_bytes())
    }

    /// [`Instant::parse_rfc3339`] of text as bytes.
    pub fn parse_rfc3339_bytes(b: &[u8]) -> Option<Instant> {
        let year = digits(b, 0, 4)? as i64;
        parse_after_year(year, b.get(4..)?)
    }

    /// [`Instant::parse_rfc3339`], and also ISO 8601 expanded years
    /// (`+10000-01-01T00:00:00Z`, `-0001-...`), which [`Instant`]'s
    /// `Display` writes for instants outside the years 0000 to 9999 UTC (a
    /// timestamp of 9999-12-31 with a negative offset is one).
    pub fn parse_expanded(text: &str) -> Option<Instant> {
        let b = text.as_bytes();
        let sign = match b.first()? {
            b'+' => 1,
            b'-' => -1,
            _ => return Instant::parse_rfc3339(text),
        };
        let len = b[1..].iter().take_while(|c| c.is_ascii_digit()).count();
        if !(4..=6).contains(&len) {
            return None;
        }
        let year = sign * i64::from(digits(b, 1, len)?);
        parse_after_year(year, &b[1 + len..])
    }
}

/// Writes the instant in UTC as `YYYY-MM-DDTHH:MM:SS.fffZ`, with three
/// fraction digits, or six or nine when that many are needed to be exact.
impl fmt::Display for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let days = self.secs.div_euclid(86_400);
        let rem = self.secs.rem_euclid(86_400);
        let (year, month, day) = civil_from_days(days);
        let (h, m, s) = (rem / 3600, rem % 3600 / 60, rem % 60);
        if (0..=9999).contains(&year) {
            write!(f, "{year:04}")?;
        } else {
            // ISO 8601 expanded year; read back by `parse_expanded`.
            write!(f, "{year:+05}")?;
        }
        write!(f, "-{month:02}-{day:02}T{h:02}:{m:02}:{s:02}")?;
        let n = self.nanos;
        if n.is_multiple_of(1_000_000) {
            write!(f, ".{:03}Z", n / 1_000_000)
        } else if n.is_multiple_of(1_000) {
            write!(f, ".{:06}Z", n / 1_000)
        } else {
            write!(f, ".{n:09}Z")
        }
    }
}

/// Parses `-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`, what follows the year.
fn parse_after_year(year: i64, b: &[u8]) -> Option<Instant> {
    if b.len() < 16 {
        return None;
    }
    let month = digits(b, 1, 2)?;
    let day = digits(b, 4, 2)?;
    let hour = digits(b, 7, 2)?;
    let minute = digits(b, 10, 2)?;
    let second = digits(b, 13, 2)?;
    if b[0] != b'-' || b[3] != b'-' || !matches!(b[6], b'T' | b't') || b[9] != b':' || b[12] != b':'
    {
        return None;
    }
    if !(1..=12).contains(&month) || day == 0 || day > days_in_month(year, month) {
        return None;
    }
    if hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    let mut pos = 15;
    let mut nanos: u32 = 0;
    if b[pos] == b'.' {
        pos += 1;
        let start = pos;
        while pos < b.len() && b[pos].is_ascii_digit() {
            if pos - start < 9 {
                nanos = nanos * 10 + u32::from(b[pos] - b'0');
            }
            pos += 1;
        }
        let count = pos - start;
        if count == 0 {
            return None;
        }
        for _ in count..9 {
            nanos *= 10;
        }
    }
    let offset_secs: i64 = match b.get(pos..)? {
        [b'Z' | b'z'] => 0,
        [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2] => {
            let oh = two_digits(*h1, *h2)?;
            let om = two_digits(*m1, *m2)?;
            if oh > 23 || om > 59 {
                return None;
            }
            let value = i64::from(oh * 3600 + om * 60);
            if *sign == b'+' { value } else { -value }
        }
        _ => return None,
    };
    // A leap second is 23:59:60 UTC, whatever the offset it is written in.
    if second == 60 && (i64::from(hour * 60 + minute) - offset_secs / 60).rem_euclid(1440) != 1439 {
        return None;
    }
    let days = days_from_civil(year, i64::from(month), i64::from(day));
    let secs = days * 86_400 + i64::from(hour * 3600 + minute * 60 + second) - offset_secs;
    Some(Instant { secs, nanos })
}

fn digits(b: &[u8], at: usize, len: usize) -> Option<u32> {
    let mut value = 0u32;
    for &c in b.get(at..at + len)? {
        if !c.is_ascii_digit() {
            return None;
        }
        value = value * 10 + u32::from(c - b'0');
    }
    Some(value)
}

fn two_digits(a: u8, b: u8) -> Option<u32> {
    digits(&[a, b], 0, 2)
}

fn is_leap(year: i64) -> bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

fn days_in_month(year: i64, month: u32) -> u32 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
/// algorithm). `const`, so the generator can build constants with it.
pub const fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if month > 2 { month - 3 } else { month + 9 }) + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The inverse of [`days_from_civil`]: `(year, month, day)`.
pub fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + (month <= 2) as i64;
    (year, month, day)
}

/// The one way the service writes a moment of its own (`loaded_at`,
/// `published_at`, `updated_at`, ...): RFC 3339 in UTC with milliseconds,
/// `2026-11-24T23:13:11.042Z`. Snapshot timestamps are served as written,
/// never through this.
pub fn utc_millis(at: SystemTime) -> String {
    let at: chrono::DateTime<chrono::Utc> = at.into();
    at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// [`utc_millis`] of the present moment.
pub fn utc_now() -> String {
    utc_millis(SystemTime::now())
}

#[cfg(test)]
mod tests {
    use super::Instant;

    fn parse(text: &str) -> Option<Instant> {
        Instant::parse_rfc3339(text)
    }

    #[test]
    fn same_instant_in_different_offsets_compares_equal() {
        let utc = parse("2026-03-01T10:00:00.000Z").unwrap();
        assert_eq!(parse("2026-03-01T12:00:00+02:00"), Some(utc));
        assert_eq!(parse("2026-03-01T04:30:00.000000-05:30"), Some(utc));
        assert_eq!(parse("2026-03-01t10:00:00z"), Some(utc));
        assert!(parse("2026-03-01T10:00:00.5Z").unwrap() > utc);
        assert!(parse("2026-03-01T10:00:00.000000001Z").unwrap() > utc);
    }

    #[test]
    fn epoch_and_far_dates_are_exact() {
        assert_eq!(
            parse("1970-01-01T00:00:00Z"),
            Some(Instant { secs: 0, nanos: 0 })
        );
        assert_eq!(
            parse("2000-02-29T00:00:00Z").map(|i| i.secs),
            Some(951_782_400)
        );
        assert!(parse("9999-12-31T23:59:59Z").is_some());
        assert!(parse("0001-01-01T00:00:00Z").unwrap() < parse("1969-12-31T23:59:59Z").unwrap());
    }

    #[test]
    fn rejects_what_is_not_rfc3339() {
        for bad in [
            "",
            "yesterday",
            "2026-03-01",
            "2026-03-01T10:00:00",
            "2026-03-01 10:00:00Z",
            "2026-13-01T10:00:00Z",
            "2026-02-29T10:00:00Z",
            "2026-03-01T24:00:00Z",
            "2026-03-01T10:00:00.Z",
            "2026-03-01T10:00:00+2:00",
            "2026-03-01T10:00:00+02:00 ",
            "2026-03-01T10:00:00+0200",
            "+2026-03-01T10:00:00Z",
            "2026-03-01T10:00:00ZZ",
        ] {
            assert_eq!(parse(bad), None, "{bad:?} must be rejected");
        }
    }

    #[test]
    fn leap_seconds_only_at_23_59_60_utc() {
        assert!(parse("2016-12-31T23:59:60Z").is_some());
        assert!(parse("2017-01-01T00:59:60+01:00").is_some());
        assert_eq!(parse("2026-03-01T10:00:60Z"), None);
    }

    #[test]
    fn instants_beyond_four_digit_years_round_trip_in_expanded_form() {
        let late = parse("9999-12-31T23:30:00-01:00").unwrap();
        assert_eq!(late.to_string(), "+10000-01-01T00:30:00.000Z");
        assert_eq!(Instant::parse_expanded(&late.to_string()), Some(late));
        let early = parse("0000-01-01T00:30:00+01:00").unwrap();
        assert_eq!(early.to_string(), "-0001-12-31T23:30:00.000Z");
        assert_eq!(Instant::parse_expanded(&early.to_string()), Some(early));
        assert_eq!(Instant::parse_rfc3339("+10000-01-01T00:30:00.000Z"), None);
        assert_eq!(Instant::parse_expanded("+100-01-01T00:30:00.000Z"), None);
    }

    #[test]
    fn display_round_trips_with_the_fewest_exact_digits() {
        for (input, shown) in [
            ("2026-04-12T09:30:00Z", "2026-04-12T09:30:00.000Z"),
            ("2026-04-12T11:30:00.120+02:00", "2026-04-12T09:30:00.120Z"),
            ("2026-04-12T09:30:00.123456Z", "2026-04-12T09:30:00.123456Z"),
            (
                "2026-04-12T09:30:00.1234567891Z",
                "2026-04-12T09:30:00.123456789Z",
            ),
            ("1969-12-31T23:59:59.5Z", "1969-12-31T23:59:59.500Z"),
        ] {
            let instant = parse(input).unwrap();
            assert_eq!(instant.to_string(), shown);
            assert_eq!(parse(shown), Some(instant));
        }
    }
}
