//! Query strings, parsed once into validated values.
//!
//! Standard URL decoding (`filter%5Btype%5D` is `filter[type]`, `+` is a
//! space). Parameters an endpoint does not know are ignored; one it knows,
//! given twice, is a 400. `limit` and `offset` are plain decimal integers.

use std::borrow::Cow;

use portfolio_domain::store::{Cursor, FeedQuery, OffsetPage};

use super::error::ApiError;

/// A query string, decoded as each parameter is asked for: a request asks
/// for two to four names, and walking a short string again for each costs
/// less than collecting its pairs into a vector (an allocation per request).
pub struct Query<'q> {
    raw: &'q str,
    /// Whether `raw` has nothing to decode (no `%`, no `+`), as most
    /// queries do: then pairs are compared as they are, without decoding
    /// each name on each walk (2% of the CPU of random `/tasks` pages).
    plain: bool,
}

/// The largest `offset` (2^53 - 1, the largest integer a JSON client keeps exactly).
pub const MAX_OFFSET: u64 = 9_007_199_254_740_991;

impl<'q> Query<'q> {
    pub fn parse(raw: &'q str) -> Query<'q> {
        let plain = !raw.bytes().any(|b| b == b'%' || b == b'+');
        Query { raw, plain }
    }

    /// The value of `name`, if given once; a 400 if given more than once.
    pub fn get(&self, name: &str) -> Result<Option<Cow<'q, str>>, ApiError> {
        let mut found = None;
        let mut take = |value: Cow<'q, str>| {
            if found.is_some() {
                return Err(ApiError::bad_request(format!(
                    "Invalid query: {name} is given more than once"
                )));
            }
            found = Some(value);
            Ok(())
        };
        if self.plain {
            // What `form_urlencoded::parse` gives when there is nothing to
            // decode: pieces between `&` (empty ones skipped), split at
            // their first `=` (none: an empty value).
            for piece in self.raw.split('&').filter(|p| !p.is_empty()) {
                let (key, value) = piece.split_once('=').unwrap_or((piece, ""));
                if key == name {
                    take(Cow::Borrowed(value))?;
                }
            }
        } else {
            for (key, value) in form_urlencoded::parse(self.raw.as_bytes()) {
                if key == name {
                    take(value)?;
                }
            }
        }
        Ok(found)
    }

    /// A filter value: exact match; an empty value is a 400.
    pub fn filter(&self, name: &str) -> Result<Option<Cow<'q, str>>, ApiError> {
        match self.get(name)? {
            Some(value) if value.is_empty() => Err(ApiError::bad_request(format!(
                "Invalid query: {name} must not be empty"
            ))),
            other => Ok(other),
        }
    }

    /// `limit` (1 to `max`, default `default`) and `offset` (0 to 2^53 - 1).
    pub fn offset_page(&self, max: u64, default: u64) -> Result<OffsetPage, ApiError> {
        Ok(OffsetPage {
            limit: self.integer("limit", 1, max)?.unwrap_or(default),
            offset: self.integer("offset", 0, MAX_OFFSET)?.unwrap_or(0),
        })
    }

    /// `/feed`'s `limit` (1 to 50, default 20), `cursor` and `filter[type]`
    /// (decoded into `kind`, which the query borrows), checked in that order.
    pub fn feed<'k>(&self, kind: &'k mut Option<Cow<'q, str>>) -> Result<FeedQuery<'k>, ApiError> {
        let cursor = match self.get("cursor")? {
            None => None,
            Some(text) => Some(
                Cursor::parse(&text)
                    .map_err(|e| ApiError::bad_request(format!("Invalid query: {e}")))?,
            ),
        };
        let limit = self.integer("limit", 1, 50)?.unwrap_or(20);
        *kind = self.filter("filter[type]")?;
        Ok(FeedQuery {
            limit,
            cursor,
            kind: kind.as_deref(),
        })
    }

    /// `include` on `/meetings/{id}`: only `notes` is allowed.
    pub fn include_notes(&self) -> Result<bool, ApiError> {
        match self.get("include")?.as_deref() {
            None => Ok(false),
            Some("notes") => Ok(true),
            Some(_) => Err(ApiError::bad_request(
                "Invalid query: include must be notes",
            )),
        }
    }

    fn integer(&self, name: &str, min: u64, max: u64) -> Result<Option<u64>, ApiError> {
        let Some(text) = self.get(name)? else {
            return Ok(None);
        };
        match parse_decimal(&text) {
            Some(n) if (min..=max).contains(&n) => Ok(Some(n)),
            _ => Err(ApiError::bad_request(format!(
                "Invalid query: {name} must be an integer from {min} to {max}"
            ))),
        }
    }
}

/// Digits only (no sign, no spaces, no exponent); `None` past `u64`.
fn parse_decimal(text: &str) -> Option<u64> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.bytes().try_fold(0u64, |n, b| {
        n.checked_mul(10)?.checked_add(u64::from(b - b'0'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_is_digits_only() {
        for (text, expected) in [
            ("0", Some(0)),
            ("007", Some(7)),
            ("18446744073709551615", Some(u64::MAX)),
            ("18446744073709551616", None),
            ("", None),
            ("+5", None),
            ("-1", None),
            ("1.5", None),
            ("1e3", None),
            (" 5", None),
            ("５", None),
        ] {
            assert_eq!(parse_decimal(text), expected, "{text:?}");
        }
    }

    #[test]
    fn pages_are_bounded() {
        let page = |q: &str| Query::parse(q).offset_page(100, 50);
        assert_eq!(
            page("").unwrap(),
            OffsetPage {
                limit: 50,
                offset: 0
            }
        );
        assert_eq!(
            page("limit=100&offset=9007199254740991").unwrap(),
            OffsetPage {
                limit: 100,
                offset: MAX_OFFSET
            }
        );
        for bad in [
            "limit=0",
            "limit=101",
            "limit=",
            "offset=9007199254740992",
            "offset=-1",
            "limit=1&limit=1",
        ] {
            assert!(page(bad).is_err(), "{bad}");
        }
        assert_eq!(page("foo=1&limit=7&bar").unwrap().limit, 7);
    }

    #[test]
    fn queries_without_escapes_read_as_decoded_ones() {
        let queries = [
            "",
            "&",
            "a",
            "a=",
            "=1",
            "a=1&&a=2",
            "a=1=2&b",
            "&a=x&",
            "limit=5&offset=10&x=é",
            "a%3D=1&a=2",
            "a+b=1&a=c+d",
        ];
        for raw in queries {
            for name in ["a", "b", "limit", "offset", "x", "", "a=", "a b"] {
                let decoded: Vec<_> = form_urlencoded::parse(raw.as_bytes())
                    .filter(|(k, _)| k == name)
                    .map(|(_, v)| v.into_owned())
                    .collect();
                let expected = match decoded.len() {
                    0 => Ok(None),
                    1 => Ok(Some(decoded[0].clone())),
                    _ => Err(()),
                };
                let got = Query::parse(raw)
                    .get(name)
                    .map(|v| v.map(Cow::into_owned))
                    .map_err(|_| ());
                assert_eq!(got, expected, "{raw:?} {name:?}");
            }
        }
    }

    #[test]
    fn filters_decode_and_reject_empty_and_repeats() {
        let q = Query::parse("filter%5Bstatus%5D=in%20progress&filter[priority]=");
        assert_eq!(
            q.filter("filter[status]").unwrap().as_deref(),
            Some("in progress")
        );
        assert!(q.filter("filter[priority]").is_err());
        assert!(
            Query::parse("filter[type]=a&filter%5Btype%5D=b")
                .filter("filter[type]")
                .is_err()
        );
    }
}
