//! The feed cursor.
//!
//! Clients treat `nextCursor` as opaque, but the public service's guide shows
//! it as a timestamp and clients build such cursors themselves, so two forms
//! are accepted:
//!
//! - `2026-04-12T09:30:00.000Z`: entries strictly older than this instant
//!   (any RFC 3339 offset is accepted);
//! - `2026-04-12T09:30:00.000Z~6f1c2d3e-4b5a-4c6d-8e7f-0a1b2c3d4e5f`:
//!   entries after the entry with this instant and id in feed order (older,
//!   or as old with a smaller id).
//!
//! The server emits the plain timestamp wherever it alone is exact, and the
//! tie-breaking form only when the next entry shares the boundary instant.
//! Both are positions, not offsets, so paging neither skips nor repeats an
//! entry when newer entries arrive between two requests.

use std::fmt;

use super::id::format_id;
use super::id::parse_id;
use super::time::Instant;

/// A position in the feed: entries *after* it are returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cursor {
    /// Entries strictly older than the instant.
    Before(Instant),
    /// Entries after `(at, id)` in (newest first, id descending) order.
    After { at: Instant, id: u128 },
}

/// A cursor that does not parse.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "cursor is not valid: pass the nextCursor of a previous page, or an ISO 8601 timestamp like 2026-05-01T00:00:00.000Z"
)]
pub struct CursorError;

impl Cursor {
    pub fn parse(text: &str) -> Result<Cursor, CursorError> {
        let (time, id) = match text.split_once('~') {
            Some((time, id)) => (time, Some(parse_id(id).ok_or(CursorError)?)),
            None => (text, None),
        };
        let at = parse_instant(time).ok_or(CursorError)?;
        Ok(match id {
            Some(id) => Cursor::After { at, id },
            None => Cursor::Before(at),
        })
    }

    /// Whether the feed entry `(at, id)` lies before the cursor, i.e. on an
    /// earlier page. In feed order this holds for a prefix of the list.
    pub fn is_before(&self, key: (Instant, u128)) -> bool {
        match *self {
            Cursor::Before(at) => key.0 >= at,
            Cursor::After { at, id } => key >= (at, id),
        }
    }
}

/// Accepts an RFC 3339 timestamp; a `+` of an offset that arrived as a space
/// (an unencoded `+` in a query string) is read as the `+` it was.
fn parse_instant(text: &str) -> Option<Instant> {
    Instant::parse_expanded(text).or_else(|| {
        if text.contains(' ') {
            Instant::parse_expanded(&text.replace(' ', "+"))
        } else {
            None
        }
    })
}

impl fmt::Display for Cursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cursor::Before(at) => write!(f, "{at}"),
            Cursor::After { at, id } => write!(f, "{at}~{}", format_id(*id)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_forms_round_trip() {
        for text in [
            "2026-04-12T09:30:00.000Z",
            "2026-04-12T09:30:00.123456Z~6f1c2d3e-4b5a-4c6d-8e7f-0a1b2c3d4e5f",
        ] {
            assert_eq!(Cursor::parse(text).unwrap().to_string(), text);
        }
    }

    #[test]
    fn accepts_offsets_and_a_decoded_plus() {
        let utc = Cursor::parse("2026-04-12T09:30:00.000Z").unwrap();
        assert_eq!(Cursor::parse("2026-04-12T11:30:00.000+02:00"), Ok(utc));
        assert_eq!(Cursor::parse("2026-04-12T11:30:00.000 02:00"), Ok(utc));
    }

    #[test]
    fn rejects_garbage() {
        for text in [
            "",
            "abc",
            "2026-04-12",
            "2026-04-12T09:30:00.000Z~",
            "2026-04-12T09:30:00.000Z~xyz",
            "~6f1c2d3e-4b5a-4c6d-8e7f-0a1b2c3d4e5f",
        ] {
            assert_eq!(Cursor::parse(text), Err(CursorError), "{text:?}");
        }
    }
}
