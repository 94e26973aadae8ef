//! Pages: random snapshots (many tied instants written in different UTC
//! offsets, ids in both cases, filters that hit and miss, dangling parents)
//! are loaded with `load_snapshot` and every list page, and every feed
//! traversal, is compared with a model that sorts the input records here.

use std::collections::BTreeSet;

use portfolio_domain::snapshot::load as load_snapshot;
use portfolio_domain::store::time::Instant;
use portfolio_domain::store::{Cursor, Dataset, FeedQuery, OffsetPage};
use proptest::prelude::*;
use serde_json::{Value, json};

use super::ids::*;
use super::instants::*;
use super::*;
use crate::util::*;

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

/// A random workspace: companies, tasks, notes, feed entries and meetings.
#[derive(Clone, Debug)]
struct Data {
    companies: Vec<Rec>,
    tasks: Vec<Rec>,
    notes: Vec<Rec>,
    feed: Vec<Rec>,
    meetings: Vec<Rec>,
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
        prop::collection::vec(rec(1, 1), 0..25),
    )
        .prop_map(|(companies, tasks, notes, feed, meetings)| Data {
            companies: unique(companies),
            tasks: unique(tasks),
            notes: unique(notes),
            feed: unique(feed),
            meetings: unique(meetings),
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
        let meetings: Vec<Value> = self
            .meetings
            .iter()
            .map(|m| {
                json!({ "id": m.id_text, "attributes": {
                    "company_id": self.parent_text(m),
                    "title": format!("meeting {}", m.id_text),
                    "start_time": m.at_text,
                    "end_time": null,
                    "attendees": [],
                    "created_at": "2026-01-01T00:00:00Z",
                    "updated_at": "2026-01-01T00:00:00Z",
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
            "meetings": meetings,
        })
    }
}

/// Newest first, ties by id descending: the order of task, note, feed and
/// company meeting lists.
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
        0u8..8,
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
        1 | 2 | 7 => {
            let id = company(op.x);
            let known = data.companies.iter().any(|c| c.id == id);
            let (records, body, name, instant) = match op.kind {
                1 => (
                    &data.tasks,
                    ds.company_tasks(id, page),
                    "tasks",
                    "created_at",
                ),
                2 => (
                    &data.notes,
                    ds.company_notes(id, page),
                    "notes",
                    "created_at",
                ),
                _ => (
                    &data.meetings,
                    ds.company_meetings(id, page),
                    "meetings",
                    "start_time",
                ),
            };
            let list = newest_first(records.iter().filter(|r| data.parent_id(r) == id));
            let what = format!("{name} of {}", id_string(id, false));
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
                        |r| json!({ instant: r.at_text, "company_id": data.parent_text(r) }),
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
        prop_assert_eq!(ds.counts.meetings, data.meetings.len());
        // Every request kind once, and the random ones.
        for kind in 0..8 {
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
