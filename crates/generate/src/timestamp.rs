//! Generated timestamps: the range they fall in, the instants shared on
//! purpose, and how each is written (UTC offset and fraction digits).

use super::json::push_padded;
use super::rng::Rng;
use crate::store::time::{civil_from_days, days_from_civil};

pub(super) const DAY: i64 = 86_400;
pub(super) const HOUR: i64 = 3_600;
/// First instant any generated timestamp may have (2023-01-02T00:00:00Z).
pub(super) const RANGE_START: i64 = days_from_civil(2023, 1, 2) * DAY;
/// Last instant any generated timestamp may have (2026-11-20T00:00:00Z).
pub(super) const RANGE_END: i64 = days_from_civil(2026, 11, 20) * DAY;
/// Last calendar day a due date or metric period may fall on.
pub(super) const LAST_DAY: i64 = days_from_civil(2026, 12, 31) * DAY;
/// The instant shared by the first records of tasks, feed and notes (2026-03-01T10:00:00Z).
pub(super) const SHARED_INSTANT: i64 = days_from_civil(2026, 3, 1) * DAY + 10 * HOUR;

/// How a timestamp is written: its UTC offset and its number of fraction digits.
#[derive(Clone, Copy, Debug)]
pub(super) struct Style {
    pub(super) offset_minutes: i64,
    pub(super) zulu: bool,
    pub(super) digits: u8,
}

/// The offsets timestamps are written in, with their weights.
const OFFSETS: [((i64, bool), u64); 8] = [
    ((0, true), 44),
    ((0, false), 4),
    ((120, false), 14),
    ((60, false), 6),
    ((-300, false), 14),
    ((-480, false), 5),
    ((330, false), 10),
    ((540, false), 3),
];

impl Style {
    /// Returns a random offset written with `digits` fraction digits.
    fn with_digits(rng: &mut Rng, digits: u8) -> Self {
        let (offset_minutes, zulu) = rng.weighted(&OFFSETS);
        Self {
            offset_minutes,
            zulu,
            digits,
        }
    }

    /// Returns a random style whose precision can represent `micros` exactly.
    pub(super) fn random_for(rng: &mut Rng, micros: u32) -> Self {
        let sub_millis = micros % 1_000;
        let digits = if sub_millis > 0 {
            6
        } else if micros > 0 {
            rng.weighted(&[(3, 3), (6, 1)])
        } else {
            rng.weighted(&DIGITS)
        };
        Self::with_digits(rng, digits)
    }
}

/// The numbers of fraction digits timestamps are written with, with their weights.
const DIGITS: [(u8, u64); 3] = [(3, 6), (0, 2), (6, 2)];

/// One instant plus the way it is written.
#[derive(Clone, Copy, Debug)]
pub(super) struct Ts {
    pub(super) secs: i64,
    pub(super) micros: u32,
    pub(super) style: Style,
}

impl Ts {
    /// Returns a random instant in `lo..hi` (clamped to the generated range) in a random style.
    pub(super) fn random(rng: &mut Rng, lo: i64, hi: i64) -> Self {
        let lo = lo.clamp(RANGE_START, RANGE_END);
        let hi = hi.clamp(lo + 1, RANGE_END.max(lo + 1));
        let secs = rng.between_i64(lo, hi - 1);
        let digits = rng.weighted(&DIGITS);
        let micros = match digits {
            0 => 0,
            3 => rng.below(1_000) as u32 * 1_000,
            _ => rng.below(1_000_000) as u32,
        };
        Self {
            secs,
            micros,
            style: Style::with_digits(rng, digits),
        }
    }

    /// Returns a random instant between `min` and `max` seconds after `base`.
    pub(super) fn after(rng: &mut Rng, base: i64, min: i64, max: i64) -> Self {
        Self::random(rng, base + min, base + max + 1)
    }

    /// Returns the same instant written in another random style.
    pub(super) fn restyled(self, rng: &mut Rng) -> Self {
        Self {
            style: Style::random_for(rng, self.micros),
            ..self
        }
    }
}

/// Appends the calendar date of a local day count as `YYYY-MM-DD` (the
/// date of `store::time::civil_from_days`, zero-padded).
pub(super) fn push_date(buf: &mut Vec<u8>, days: i64) {
    let (year, month, day) = civil_from_days(days);
    push_padded(buf, year as u64, 4);
    buf.push(b'-');
    push_padded(buf, month as u64, 2);
    buf.push(b'-');
    push_padded(buf, day as u64, 2);
}

/// Appends `ts` as an RFC 3339 timestamp, in its style's offset and number
/// of fraction digits.
///
/// `store::time::Instant`'s `Display` cannot write these: it writes UTC with
/// a `Z` and at least three fraction digits, while the generator varies the
/// offset and writes zero, three or six digits on purpose (the API must
/// order by instant, not by text). It agrees only for the `Z`, three-digit
/// style (tests below). The calendar arithmetic is the store's; this writes
/// straight into the buffer because millions of timestamps go through it.
pub(super) fn push_timestamp(buf: &mut Vec<u8>, ts: Ts) {
    let offset = ts.style.offset_minutes;
    let local = ts.secs + offset * 60;
    push_date(buf, local.div_euclid(DAY));
    let second_of_day = local.rem_euclid(DAY) as u64;
    buf.push(b'T');
    push_padded(buf, second_of_day / 3_600, 2);
    buf.push(b':');
    push_padded(buf, second_of_day / 60 % 60, 2);
    buf.push(b':');
    push_padded(buf, second_of_day % 60, 2);
    match ts.style.digits {
        3 => {
            buf.push(b'.');
            push_padded(buf, u64::from(ts.micros / 1_000), 3);
        }
        6 => {
            buf.push(b'.');
            push_padded(buf, u64::from(ts.micros), 6);
        }
        _ => {}
    }
    if offset == 0 && ts.style.zulu {
        buf.push(b'Z');
    } else {
        buf.push(if offset < 0 { b'-' } else { b'+' });
        let abs = offset.unsigned_abs();
        push_padded(buf, abs / 60, 2);
        buf.push(b':');
        push_padded(buf, abs % 60, 2);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::time::Instant;

    /// Renders one timestamp to text.
    fn render(ts: Ts) -> String {
        let mut buf = Vec::new();
        push_timestamp(&mut buf, ts);
        String::from_utf8(buf).expect("timestamps are ASCII")
    }

    #[test]
    fn timestamps_render_one_instant_in_several_offsets() {
        let style = |offset_minutes, zulu, digits| Style {
            offset_minutes,
            zulu,
            digits,
        };
        let at = |micros, style| Ts {
            secs: SHARED_INSTANT,
            micros,
            style,
        };
        assert_eq!(render(at(0, style(0, true, 3))), "2026-03-01T10:00:00.000Z");
        assert_eq!(
            render(at(0, style(120, false, 3))),
            "2026-03-01T12:00:00.000+02:00"
        );
        assert_eq!(
            render(at(0, style(-300, false, 0))),
            "2026-03-01T05:00:00-05:00"
        );
        assert_eq!(
            render(at(250_000, style(330, false, 6))),
            "2026-03-01T15:30:00.250000+05:30"
        );
        assert_eq!(
            render(at(0, style(0, false, 0))),
            "2026-03-01T10:00:00+00:00"
        );
    }

    /// Every style the generator writes parses back, with the store's own
    /// parser, to the instant it was given; and the `Z`, three-digit style is
    /// exactly what `Instant`'s `Display` writes.
    #[test]
    fn every_style_parses_back_to_the_same_instant() {
        let mut styles = vec![(0, true, 3), (0, false, 0)];
        for ((offset_minutes, zulu), _) in OFFSETS {
            for (digits, _) in DIGITS {
                styles.push((offset_minutes, zulu, digits));
            }
        }
        for secs in [
            RANGE_START,
            SHARED_INSTANT,
            RANGE_END - 1,
            LAST_DAY + DAY - 1,
        ] {
            for (offset_minutes, zulu, digits) in styles.iter().copied() {
                let micros = match digits {
                    0 => 0,
                    3 => 250_000,
                    _ => 123_456,
                };
                let style = Style {
                    offset_minutes,
                    zulu,
                    digits,
                };
                let text = render(Ts {
                    secs,
                    micros,
                    style,
                });
                let instant = Instant {
                    secs,
                    nanos: micros * 1_000,
                };
                assert_eq!(Instant::parse_rfc3339(&text), Some(instant), "{text}");
                if zulu && digits == 3 {
                    assert_eq!(text, instant.to_string());
                }
            }
        }
    }

    #[test]
    fn calendar_conversion_round_trips() {
        for days in days_from_civil(2022, 12, 1)..days_from_civil(2027, 2, 1) {
            let (year, month, day) = civil_from_days(days);
            assert_eq!(days_from_civil(year, month, day), days);
        }
        assert_eq!(civil_from_days(days_from_civil(2024, 2, 29)), (2024, 2, 29));
    }
}
