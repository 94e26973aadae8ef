//! Query strings: whatever the client sends, `offset_page`, `feed`,
//! `filter` and `include_notes` return a bounded value or a 400, and agree
//! with a reference decoder written here from the WHATWG
//! `application/x-www-form-urlencoded` rules.

use portfolio_domain::store::{Cursor, OffsetPage};
use portfolio_replica::serve::api::Query;
use proptest::prelude::*;

use super::ids::*;
use super::instants::*;
use super::*;

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
pub(super) fn query_value() -> BoxedStrategy<String> {
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
pub(super) fn timestamp_text() -> impl Strategy<Value = String> {
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
pub(super) fn query_string() -> BoxedStrategy<String> {
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
pub(super) fn form_decode(text: &str) -> String {
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
pub(super) fn form_pairs(raw: &str) -> Vec<(String, String)> {
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

pub(super) fn model_filter<'p>(
    pairs: &'p [(String, String)],
    name: &str,
) -> Result<Option<&'p str>, ()> {
    match model_get(pairs, name)? {
        Some("") => Err(()),
        other => Ok(other),
    }
}

pub(super) fn model_offset_page(
    pairs: &[(String, String)],
    max: u64,
    default: u64,
) -> Result<OffsetPage, ()> {
    Ok(OffsetPage {
        limit: model_integer(pairs, "limit", 1, max)?.unwrap_or(default),
        offset: model_integer(pairs, "offset", 0, MAX_OFFSET)?.unwrap_or(0),
    })
}

pub(super) fn model_include(pairs: &[(String, String)]) -> Result<bool, ()> {
    match model_get(pairs, "include")? {
        None => Ok(false),
        Some("notes") => Ok(true),
        Some(_) => Err(()),
    }
}

/// `limit`, `kind`, and the cursor text of a `/feed` query.
type FeedModel<'p> = (u64, Option<&'p str>, Option<&'p str>);

pub(super) fn model_feed(pairs: &[(String, String)]) -> Result<FeedModel<'_>, ()> {
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
    got: Result<T, portfolio_replica::serve::api::ApiError>,
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

        let mut kind = None;
        let got = query.feed(&mut kind);
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
            agree(name, &raw, query.filter(name), model_filter(&pairs, name), |g, w| g.as_deref() == *w)?;
        }
        agree("include", &raw, query.include_notes(), model_include(&pairs), |g, w| g == w)?;
    }
}
