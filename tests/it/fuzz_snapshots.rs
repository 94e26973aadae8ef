//! Snapshot fuzzing: random mutations of valid snapshots (docs/snapshot-format.md).
//!
//! Every mutated file must be rejected with an error that names the file
//! (and, for a problem inside a record, the collection and the record's
//! position), or be loaded whole and correct: the counts are the lengths of
//! the document's arrays and every record is served with the attributes the
//! document gives it. `load_snapshot` never panics. Over HTTP, a mutated
//! replacement of a serving file never stops the previous version from
//! serving and no response ever mixes two versions.
//!
//! The mutations start from the generator's small `acme.json` (seed 42) and
//! from a small hand-made snapshot holding every attribute of every kind:
//!
//! - truncation at every byte of the small snapshot, and at sampled
//!   positions of each kind (inside a key, after a key, after a colon, inside
//!   a string, inside an escape, inside a number or literal, between
//!   records...) of the generated one;
//! - a value of another JSON type at a random path, judged against the
//!   schema of docs/snapshot-format.md (null is accepted exactly where it may be);
//! - 10,000 levels of nesting where the format ignores it and where it does not;
//! - 50 MB strings;
//! - invalid UTF-8 inside served strings, ignored strings and between tokens;
//! - duplicate keys in records, attributes, nested objects and at the top level;
//! - numbers out of range (`1e400`, `-1e400`) and a large but finite
//!   `123456789012345678901234567890`, which is served exactly as written.
//!
//! A deterministic generator drives every choice, so a failure reproduces.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::SocketAddr;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use portfolio_replica::generate::{Scale, generate};
use portfolio_replica::snapshot::load as load_snapshot;
use portfolio_replica::store::id::parse_id;
use portfolio_replica::store::time::Instant;
use portfolio_replica::store::{Cursor, Dataset, FeedQuery, OffsetPage};
use serde_json::{Value, json};

use crate::util::*;

/// The name mutated snapshots are loaded under; every error must name it.
const FILE: &str = "fuzz.json";

/// The longest error message still read as "clear" (a line an operator
/// can read in a log or in `/snapshots`).
const MAX_MESSAGE: usize = 16 * 1024;

// ---------------------------------------------------------------------------
// A deterministic generator.
// ---------------------------------------------------------------------------

/// SplitMix64: tiny, seeded, the same sequence everywhere.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

// ---------------------------------------------------------------------------
// Valid snapshots to start from.
// ---------------------------------------------------------------------------

/// The generator's `acme.json` (small scale, seed 42), generated once.
fn generated_base() -> &'static [u8] {
    static BASE: OnceLock<Vec<u8>> = OnceLock::new();
    BASE.get_or_init(|| {
        let dir = tempdir();
        let files = generate(dir.path(), Scale::Small, 42).expect("generate the small snapshots");
        let acme = files
            .iter()
            .find(|f| f.path.file_name().is_some_and(|n| n == "acme.json"))
            .expect("the generator writes acme.json");
        std::fs::read(&acme.path).expect("read acme.json")
    })
}

/// A small snapshot holding every attribute of every kind of record.
fn small_base() -> Value {
    let mut snap = fixture("ws-fuzz", &[KEY], 0);
    add(
        &mut snap,
        "companies",
        [record(
            11,
            json!({
                "domain": "acme.example", "name": "Ácme \"Labs\"", "logo_url": "https://acme.example/l.png",
                "headline": "h", "description": "line\nbreak\ttab \\ é", "professional_network": "https://pn/acme",
                "x": "https://x/acme", "careers_url": "https://acme.example/jobs",
                "domain_aliases": ["acme.io", "acme.dev"], "priority": "high", "labels": ["seed", "ai"],
                "value_propositions": [{ "problem": "p", "solution": "s", "icp": "i" }],
                "not_in_the_spec": { "kept": false },
            }),
        )],
    );
    add(
        &mut snap,
        "tasks",
        [with(
            task(12, 11, "2026-03-01T12:00:00.123+02:00"),
            json!({
                "title": "Call", "description": "d", "status": "triage", "priority": "low",
                "source": "manual", "assignee_id": "u-1", "due_date": "2026-04-01",
                "updated_at": "2026-03-02T00:00:00Z",
            }),
        )],
    );
    add(
        &mut snap,
        "roles",
        [with(
            role(17, 11, "2026-03-01T09:00:00-05:30"),
            json!({ "name": "Engineer", "url": "https://acme.example/jobs/1", "description": "d",
                    "domain": "engineering", "level": "ic" }),
        )],
    );
    add(
        &mut snap,
        "feed",
        [with(
            feed_entry(13, 11, "2026-03-01T10:00:00.5Z"),
            json!({
                "title": "Raised", "content": "c", "type": "fundraise-announcement", "private": true,
                "sources": [{ "source": "professional_network", "url": "https://pn/p/1", "title": "t",
                              "published_at": "2026-03-01T10:00:00Z" }],
            }),
        )],
    );
    add(
        &mut snap,
        "notes",
        [with(
            note(18, 11, "2026-03-01T08:00:00Z"),
            json!({ "title": "t", "content": "c", "source": "email", "created_by": "u-2" }),
        )],
    );
    let mut value = metric(14, 11, "Annualized Revenue", "2026-03-01T10:00:00Z");
    value["attributes"]
        .as_object_mut()
        .expect("attributes")
        .extend(
            json!({
                "unit": "number", "value_text": "$1.2M", "value_numeric": 1200000,
                "value_currency": "USD", "period_label": "Q1", "period_start": "2026-01-01",
                "period_end": "2026-03-31",
            })
            .as_object()
            .expect("an object")
            .clone(),
        );
    add(&mut snap, "metrics", [value]);
    let mut meeting_value = meeting(16, 11, "2026-03-01T15:00:00+01:00");
    meeting_value["attributes"]["end_time"] = json!("2026-03-01T16:00:00+01:00");
    meeting_value["attributes"]["attendees"] = json!([
        { "email": "ceo@acme.example", "organizer": true, "name": "Ann" },
        { "email": "vc@fund.example", "organizer": false },
    ]);
    add(&mut snap, "meetings", [meeting_value]);
    let mut note_value = meeting_note(15, 16, "2026-03-01T17:00:00Z");
    note_value["attributes"]["transcript"] = json!({ "segments": [
        { "text": "Hello", "speaker": "Ann", "startTime": 1.5, "endTime": 3 },
        { "text": "Hi" },
    ]});
    note_value["attributes"]["synced_at"] = json!("2026-03-01T17:05:00Z");
    add(&mut snap, "meeting_notes", [note_value]);
    snap
}

fn small_base_bytes() -> Vec<u8> {
    serde_json::to_vec_pretty(&small_base()).expect("serialize")
}

// ---------------------------------------------------------------------------
// Judging a load.
// ---------------------------------------------------------------------------

/// What a load of mutated bytes may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Expect {
    Reject,
    Accept,
    Either,
}

/// Where a rejection must point: the collection (top-level key) and, for a
/// record, its position.
type Place<'a> = Option<(&'a str, Option<usize>)>;

/// Keeps the report readable when a message or document is huge.
fn short(text: &str) -> String {
    if text.len() <= 300 {
        return text.to_owned();
    }
    let mut end = 300;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}... ({} bytes)", &text[..end], text.len())
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "<non-text panic>".to_owned())
}

/// Loads `bytes` and judges the outcome; `Ok(true)` if it loaded. A loaded
/// dataset is compared with `reference` when given, else with the bytes
/// themselves: `reference` is for documents the test's own JSON reader
/// cannot hold (nesting past its recursion limit, numbers past `f64`) in
/// places the format ignores.
fn judge(
    bytes: &[u8],
    reference: Option<&Value>,
    what: &str,
    expect: Expect,
    place: Place<'_>,
    mentions: &[&str],
) -> Result<bool, String> {
    let result = catch_unwind(AssertUnwindSafe(|| load_snapshot(FILE, bytes))).map_err(|p| {
        format!(
            "{what}: load_snapshot panicked: {}",
            panic_message(p.as_ref())
        )
    })?;
    match result {
        Err(e) => {
            let text = e.to_string();
            if expect == Expect::Accept {
                return Err(format!(
                    "{what}: rejected, though it must load: {}",
                    short(&text)
                ));
            }
            if e.file != FILE || !text.starts_with(&format!("{FILE}: ")) {
                return Err(format!(
                    "{what}: the error does not name the file: {}",
                    short(&text)
                ));
            }
            if let Some((collection, index)) = place {
                let location = e.location.as_deref();
                if location.map(|l| l.collection.as_str()) != Some(collection)
                    || !text.contains(collection)
                {
                    return Err(format!(
                        "{what}: the error does not name the collection {collection}: {}",
                        short(&text)
                    ));
                }
                if index.is_some() && location.and_then(|l| l.index) != index {
                    return Err(format!(
                        "{what}: the error does not name the record {collection}[{}]: {}",
                        index.unwrap_or_default(),
                        short(&text)
                    ));
                }
            }
            if let Some(word) = mentions.iter().find(|w| !text.contains(**w)) {
                return Err(format!(
                    "{what}: the error does not mention {word:?}: {}",
                    short(&text)
                ));
            }
            Ok(false)
        }
        Ok(loaded) => {
            if expect == Expect::Reject {
                return Err(format!("{what}: loaded, though it must be rejected"));
            }
            let doc = match reference {
                Some(doc) => doc.clone(),
                None => serde_json::from_slice(bytes)
                    .or_else(|_| serde_json::from_str(&String::from_utf8_lossy(bytes)))
                    .map_err(|e| {
                        format!("{what}: loaded, but the test cannot read the document: {e}")
                    })?,
            };
            check_complete(&loaded.dataset, &doc)
                .map_err(|p| format!("{what}: loaded, but {p}"))?;
            Ok(true)
        }
    }
}

/// Fails the test listing every problem, if there are any.
fn assert_no_problems(problems: &[String], cases: usize, what: &str) {
    assert!(
        problems.is_empty(),
        "{what}: {} of {cases} mutations went wrong:\n{}",
        problems.len(),
        problems
            .iter()
            .take(40)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
}

// ---------------------------------------------------------------------------
// A loaded dataset against its document.
// ---------------------------------------------------------------------------

/// Whether a served value is what the document says: an object agrees when
/// each of its keys agrees with the document's (absent there reads as
/// `null`; an absent or `null` object has every attribute `null`), an array
/// when its elements do, a scalar when equal.
fn agrees(served: &Value, doc: Option<&Value>) -> bool {
    match (served, doc.unwrap_or(&Value::Null)) {
        (Value::Object(s), Value::Object(d)) => s.iter().all(|(k, v)| agrees(v, d.get(k))),
        (Value::Object(s), Value::Null) => s.values().all(|v| agrees(v, None)),
        (Value::Array(s), Value::Array(d)) => {
            s.len() == d.len() && s.iter().zip(d).all(|(a, b)| agrees(a, Some(b)))
        }
        (s, d) => s == d,
    }
}

fn body_json(body: &[u8], what: &str) -> Result<Value, String> {
    serde_json::from_slice(body).map_err(|e| {
        format!(
            "{what}: the body is not JSON ({e}): {}",
            short(&String::from_utf8_lossy(body))
        )
    })
}

/// Every page of an offset list, `limit` 100.
fn offset_all(what: &str, page: impl Fn(OffsetPage) -> bytes::Bytes) -> Result<Vec<Value>, String> {
    let mut records = Vec::new();
    for n in 0u64.. {
        let body = body_json(
            &page(OffsetPage {
                limit: 100,
                offset: n * 100,
            }),
            what,
        )?;
        records.extend(body["data"].as_array().cloned().unwrap_or_default());
        if body["pagination"]["hasMore"] != json!(true) {
            return Ok(records);
        }
        if n > 100_000 {
            break;
        }
    }
    Err(format!("{what}: hasMore never ends"))
}

/// Every feed entry, following `nextCursor`.
fn feed_all(ds: &Dataset) -> Result<Vec<Value>, String> {
    let mut records = Vec::new();
    let mut cursor = None;
    for _ in 0..=ds.counts.feed + 1 {
        let body = body_json(
            &ds.feed(FeedQuery {
                limit: 50,
                cursor,
                kind: None,
            }),
            "feed",
        )?;
        records.extend(body["data"].as_array().cloned().unwrap_or_default());
        match body["pagination"]["nextCursor"].as_str() {
            None => return Ok(records),
            Some(text) => {
                cursor = Some(
                    Cursor::parse(text)
                        .map_err(|_| format!("feed: nextCursor {text:?} does not parse"))?,
                )
            }
        }
    }
    Err("feed: nextCursor never ends".to_owned())
}

/// The document's records of `collection`.
fn doc_records<'d>(doc: &'d Value, collection: &str) -> &'d [Value] {
    doc.get(collection)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn id_of(record: &Value) -> Option<u128> {
    record["id"].as_str().and_then(parse_id)
}

/// Served records against the document's: each once, shaped exactly
/// `{id, attributes}`, agreeing attribute by attribute; all of them when
/// `whole`.
fn compare_records(
    collection: &str,
    served: &[Value],
    doc: &[Value],
    whole: bool,
) -> Result<(), String> {
    let by_id: HashMap<u128, &Value> = doc.iter().filter_map(|r| Some((id_of(r)?, r))).collect();
    if whole && served.len() != doc.len() {
        return Err(format!(
            "{collection}: {} records served, the document has {}",
            served.len(),
            doc.len()
        ));
    }
    let mut seen = BTreeSet::new();
    for record in served {
        let keys: BTreeSet<&str> = record
            .as_object()
            .map(|o| o.keys().map(String::as_str).collect())
            .unwrap_or_default();
        if keys != BTreeSet::from(["id", "attributes"]) {
            return Err(format!(
                "{collection}: a record is not {{id, attributes}}: {}",
                short(&record.to_string())
            ));
        }
        let id = id_of(record)
            .ok_or_else(|| format!("{collection}: a served id is not an id: {}", record["id"]))?;
        if !seen.insert(id) {
            return Err(format!("{collection}: {} is served twice", record["id"]));
        }
        let Some(source) = by_id.get(&id) else {
            return Err(format!(
                "{collection}: {} is served but not in the document",
                record["id"]
            ));
        };
        if record["id"] != source["id"] {
            return Err(format!(
                "{collection}: id {} served as {}",
                source["id"], record["id"]
            ));
        }
        if !agrees(&record["attributes"], source.get("attributes")) {
            return Err(format!(
                "{collection}: {} is served as {} but written as {}",
                record["id"],
                short(&record["attributes"].to_string()),
                short(&source["attributes"].to_string())
            ));
        }
    }
    Ok(())
}

/// Checks that a loaded dataset holds the document, all of it, as written.
fn check_complete(ds: &Dataset, doc: &Value) -> Result<(), String> {
    let c = ds.counts;
    for (collection, count) in [
        ("companies", c.companies),
        ("tasks", c.tasks),
        ("roles", c.roles),
        ("feed", c.feed),
        ("notes", c.notes),
        ("metrics", c.metrics),
        ("meetings", c.meetings),
        ("meeting_notes", c.meeting_notes),
    ] {
        let len = doc_records(doc, collection).len();
        if count != len {
            return Err(format!(
                "counts.{collection} is {count}, the document has {len}"
            ));
        }
    }
    let companies = offset_all("portfolio", |page| ds.portfolio(None, page))?;
    compare_records("companies", &companies, doc_records(doc, "companies"), true)?;
    let tasks = offset_all("tasks", |page| ds.tasks(None, None, page))?;
    compare_records("tasks", &tasks, doc_records(doc, "tasks"), true)?;
    compare_records("feed", &feed_all(ds)?, doc_records(doc, "feed"), true)?;
    let roles = body_json(&ds.roles(), "roles")?;
    let roles = roles["data"].as_array().cloned().unwrap_or_default();
    compare_records("roles", &roles, doc_records(doc, "roles"), true)?;

    let mut notes = Vec::new();
    for note in doc_records(doc, "notes") {
        let id = id_of(note).ok_or("notes: a loaded note has no valid id")?;
        let body = ds
            .note(id)
            .ok_or_else(|| format!("notes: {} is not served", note["id"]))?;
        notes.push(body_json(&body, "note")?["data"].clone());
    }
    compare_records("notes", &notes, doc_records(doc, "notes"), true)?;

    let mut meetings = Vec::new();
    let mut meeting_notes = Vec::new();
    for meeting in doc_records(doc, "meetings") {
        let id = id_of(meeting).ok_or("meetings: a loaded meeting has no valid id")?;
        let body = ds
            .meeting(id, true)
            .ok_or_else(|| format!("meetings: {} is not served", meeting["id"]))?;
        let mut record = body_json(&body, "meeting")?["data"].clone();
        let attached = record
            .as_object_mut()
            .and_then(|o| o.remove("notes"))
            .and_then(|n| n.as_array().cloned())
            .ok_or_else(|| {
                format!(
                    "meetings: {} has no notes with include=notes",
                    meeting["id"]
                )
            })?;
        let want = doc_records(doc, "meeting_notes")
            .iter()
            .filter(|n| n["attributes"]["meeting_id"].as_str().and_then(parse_id) == Some(id))
            .count();
        if attached.len() != want {
            return Err(format!(
                "meetings: {} has {} notes attached, the document {want}",
                meeting["id"],
                attached.len()
            ));
        }
        meetings.push(record);
        meeting_notes.extend(attached);
    }
    compare_records("meetings", &meetings, doc_records(doc, "meetings"), true)?;
    compare_records(
        "meeting_notes",
        &meeting_notes,
        doc_records(doc, "meeting_notes"),
        false,
    )?;

    // Metrics: per company, the latest value of each name, and only those.
    let metrics = doc_records(doc, "metrics");
    for company in doc_records(doc, "companies") {
        let id = id_of(company).ok_or("companies: a loaded company has no valid id")?;
        let body = ds
            .company_metrics(id)
            .ok_or_else(|| format!("metrics of {} are not served", company["id"]))?;
        let served = body_json(&body, "metrics")?["data"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        compare_records("metrics", &served, metrics, false)?;
        let mine: Vec<&Value> = metrics
            .iter()
            .filter(|m| m["company_id"].as_str().and_then(parse_id) == Some(id))
            .collect();
        let key = |m: &Value| {
            let at = m["attributes"]["reported_at"]
                .as_str()
                .and_then(Instant::parse_rfc3339);
            (at, id_of(m))
        };
        let mut latest: BTreeMap<Option<String>, &Value> = BTreeMap::new();
        for m in &mine {
            let name = m["attributes"]["name"].as_str().map(str::to_owned);
            let slot = latest.entry(name).or_insert(m);
            if key(m) > key(slot) {
                *slot = m;
            }
        }
        let served_ids: BTreeSet<Option<u128>> = served.iter().map(id_of).collect();
        let want_ids: BTreeSet<Option<u128>> = latest.values().map(|m| id_of(m)).collect();
        if served_ids != want_ids || served.len() != latest.len() {
            return Err(format!(
                "metrics of {}: served {:?}, the latest values are {:?}",
                company["id"],
                served.iter().map(|m| m["id"].clone()).collect::<Vec<_>>(),
                latest.values().map(|m| m["id"].clone()).collect::<Vec<_>>()
            ));
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Paths into a document, and the schema of docs/snapshot-format.md.
// ---------------------------------------------------------------------------

#[derive(Clone, Debug, PartialEq, Eq)]
enum Seg {
    Key(String),
    Index(usize),
}

fn all_paths(value: &Value, prefix: &mut Vec<Seg>, out: &mut Vec<Vec<Seg>>) {
    out.push(prefix.clone());
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                prefix.push(Seg::Key(k.clone()));
                all_paths(v, prefix, out);
                prefix.pop();
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                prefix.push(Seg::Index(i));
                all_paths(v, prefix, out);
                prefix.pop();
            }
        }
        _ => {}
    }
}

fn at_mut<'v>(value: &'v mut Value, path: &[Seg]) -> &'v mut Value {
    path.iter().fold(value, |v, seg| match seg {
        Seg::Key(k) => &mut v[k.as_str()],
        Seg::Index(i) => &mut v[*i],
    })
}

fn show(path: &[Seg]) -> String {
    let mut out = String::new();
    for seg in path {
        match seg {
            Seg::Key(k) if out.is_empty() => out.push_str(k),
            Seg::Key(k) => {
                out.push('.');
                out.push_str(k);
            }
            Seg::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}

/// Where a problem at `path` must be reported.
fn place_of(path: &[Seg]) -> Place<'_> {
    let Some(Seg::Key(collection)) = path.first() else {
        return None;
    };
    let index = match path.get(1) {
        Some(Seg::Index(i)) => Some(*i),
        _ => None,
    };
    Some((collection.as_str(), index))
}

/// A JSON type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Null,
    Bool,
    Number,
    Str,
    Array,
    Object,
    /// `format_version`: only the number 1.
    One,
}

fn kind_of(value: &Value) -> Kind {
    match value {
        Value::Null => Kind::Null,
        Value::Bool(_) => Kind::Bool,
        Value::Number(_) => Kind::Number,
        Value::String(_) => Kind::Str,
        Value::Array(_) => Kind::Array,
        Value::Object(_) => Kind::Object,
    }
}

const COLLECTIONS: &[&str] = &[
    "companies",
    "tasks",
    "roles",
    "feed",
    "notes",
    "metrics",
    "meetings",
    "meeting_notes",
];

/// The type the format wants at `path` and whether `null` is accepted
/// there; `None` where the format ignores what it finds.
fn slot(path: &[Seg]) -> Option<(Kind, bool)> {
    use Kind::*;
    let p: Vec<&str> = path
        .iter()
        .map(|s| match s {
            Seg::Key(k) => k.as_str(),
            Seg::Index(_) => "[]",
        })
        .collect();
    let text = |nullable| Some((Str, nullable));
    Some(match p.as_slice() {
        ["format_version"] => (One, false),
        ["version"] => (Str, true),
        ["workspace"] => (Object, false),
        ["workspace", "id"] => (Str, false),
        ["workspace", "name"] => (Str, true),
        ["api_keys"] => (Array, true),
        ["api_keys", "[]"] => (Object, false),
        ["api_keys", "[]", "sha256"] => (Str, false),
        ["api_keys", "[]", "label"] => (Str, true),
        [c] if COLLECTIONS.contains(c) => (Array, true),
        [c, "[]"] if COLLECTIONS.contains(c) => (Object, false),
        [c, "[]", "id"] if COLLECTIONS.contains(c) => (Str, false),
        ["metrics", "[]", "company_id"] => (Str, false),
        [c, "[]", "attributes"] if COLLECTIONS.contains(c) => (Object, *c == "companies"),
        [c, "[]", "attributes", rest @ ..] => return attribute_slot(c, rest, text),
        _ => return None,
    })
}

fn attribute_slot(
    collection: &str,
    p: &[&str],
    text: impl Fn(bool) -> Option<(Kind, bool)>,
) -> Option<(Kind, bool)> {
    use Kind::*;
    match (collection, p) {
        ("companies", ["domain_aliases" | "labels" | "value_propositions"]) => Some((Array, true)),
        ("companies", ["domain_aliases" | "labels", "[]"]) => text(false),
        ("companies", ["value_propositions", "[]"]) => Some((Object, false)),
        ("companies", ["value_propositions", "[]", "problem" | "solution" | "icp"]) => text(true),
        (
            "companies",
            [
                "domain"
                | "name"
                | "logo_url"
                | "headline"
                | "description"
                | "professional_network"
                | "x"
                | "careers_url"
                | "priority",
            ],
        ) => text(true),
        ("tasks", ["company_id" | "created_at"]) => text(false),
        (
            "tasks",
            [
                "title" | "description" | "status" | "priority" | "source" | "assignee_id"
                | "due_date" | "updated_at",
            ],
        ) => text(true),
        ("roles", ["company_id" | "opened_at"]) => text(false),
        ("roles", ["name" | "url" | "description" | "domain" | "level"]) => text(true),
        ("feed", ["company_id" | "published_at"]) => text(false),
        ("feed", ["type" | "title" | "content"]) => text(true),
        ("feed", ["private"]) => Some((Bool, true)),
        ("feed", ["sources"]) => Some((Array, true)),
        ("feed", ["sources", "[]"]) => Some((Object, false)),
        ("feed", ["sources", "[]", "source" | "url" | "title" | "published_at"]) => text(true),
        ("notes", ["company_id" | "created_at"]) => text(false),
        ("notes", ["title" | "content" | "source" | "created_by"]) => text(true),
        ("metrics", ["reported_at"]) => text(false),
        ("metrics", ["value_numeric"]) => Some((Number, true)),
        (
            "metrics",
            [
                "name" | "unit" | "value_text" | "value_currency" | "period_label" | "period_start"
                | "period_end",
            ],
        ) => text(true),
        ("meetings", ["company_id" | "title" | "start_time" | "created_at" | "updated_at"]) => {
            text(false)
        }
        ("meetings", ["end_time"]) => text(true),
        ("meetings", ["attendees"]) => Some((Array, false)),
        ("meetings", ["attendees", "[]"]) => Some((Object, false)),
        ("meetings", ["attendees", "[]", "email"]) => text(false),
        ("meetings", ["attendees", "[]", "organizer"]) => Some((Bool, false)),
        ("meetings", ["attendees", "[]", "name"]) => text(true),
        ("meeting_notes", ["meeting_id" | "type" | "created_at" | "updated_at"]) => text(false),
        ("meeting_notes", ["notes" | "synced_at"]) => text(true),
        ("meeting_notes", ["transcript"]) => Some((Object, true)),
        ("meeting_notes", ["transcript", "segments"]) => Some((Array, false)),
        ("meeting_notes", ["transcript", "segments", "[]"]) => Some((Object, false)),
        ("meeting_notes", ["transcript", "segments", "[]", "text"]) => text(false),
        ("meeting_notes", ["transcript", "segments", "[]", "speaker"]) => text(true),
        ("meeting_notes", ["transcript", "segments", "[]", "startTime" | "endTime"]) => {
            Some((Number, true))
        }
        _ => None,
    }
}

/// Values of every JSON type, to put where another type is.
fn replacements() -> Vec<Value> {
    vec![
        Value::Null,
        json!(true),
        json!(0),
        json!(-1.5),
        json!("x"),
        json!([]),
        json!({}),
        json!([1, "a"]),
        json!({ "k": 1 }),
    ]
}

/// What replacing the value at `path` by `new` must do.
fn expect_swap(path: &[Seg], new: &Value) -> Expect {
    match slot(path) {
        None => Expect::Accept,
        Some((_, nullable)) if new.is_null() => {
            if nullable {
                Expect::Accept
            } else {
                Expect::Reject
            }
        }
        Some((kind, _)) if kind == kind_of(new) => Expect::Either,
        Some(_) => Expect::Reject,
    }
}

// ---------------------------------------------------------------------------
// Raw edits of a serialized document, and a runner of mutations.
// ---------------------------------------------------------------------------

/// The placeholder that raw edits replace.
const MARK: &str = "\u{1}MARK\u{1}";

/// A path written as text: `tasks[1].attributes.created_at`.
fn path(text: &str) -> Vec<Seg> {
    text.split(['.', '['])
        .filter(|s| !s.is_empty())
        .map(|s| match s.strip_suffix(']') {
            Some(i) => Seg::Index(i.parse().expect("an index")),
            None => Seg::Key(s.to_owned()),
        })
        .collect()
}

/// Serializes `doc` with the value at `at` replaced by the raw bytes `raw`.
fn raw_at(doc: &Value, at: &str, raw: &[u8]) -> Vec<u8> {
    let mut doc = doc.clone();
    *at_mut(&mut doc, &path(at)) = json!(MARK);
    let text = serde_json::to_vec(&doc).expect("serialize");
    replace_once(
        &text,
        &serde_json::to_vec(&json!(MARK)).expect("serialize"),
        raw,
    )
}

fn replace_once(haystack: &[u8], needle: &[u8], with: &[u8]) -> Vec<u8> {
    let at = haystack
        .windows(needle.len())
        .position(|w| w == needle)
        .expect("the placeholder is in the text");
    [&haystack[..at], with, &haystack[at + needle.len()..]].concat()
}

/// Serializes `doc` with `member` (raw `"key":value` text) added first to
/// the object at `at`: the way to write a duplicate key.
fn member_at(doc: &Value, at: &str, member: &str) -> Vec<u8> {
    member_raw_at(doc, at, member.as_bytes())
}

fn member_raw_at(doc: &Value, at: &str, member: &[u8]) -> Vec<u8> {
    let mut object = doc.clone();
    let text = serde_json::to_vec(at_mut(&mut object, &path(at))).expect("serialize");
    let rest = text.strip_prefix(b"{").expect("an object");
    let sep: &[u8] = if rest == b"}" { b"" } else { b"," };
    raw_at(doc, at, &[b"{", member, sep, rest].concat())
}

/// `doc` with `null` at `at`, a key added where needed: what a document
/// whose value at `at` the format ignores must load as.
fn nulled(doc: &Value, at: &str) -> Value {
    let mut doc = doc.clone();
    *at_mut(&mut doc, &path(at)) = Value::Null;
    doc
}

/// Runs mutations and collects what went wrong.
#[derive(Default)]
struct Run {
    cases: usize,
    loaded: usize,
    problems: Vec<String>,
}

impl Run {
    fn check(
        &mut self,
        what: &str,
        bytes: &[u8],
        expect: Expect,
        place: Place<'_>,
        mentions: &[&str],
    ) {
        self.check_as(what, bytes, None, expect, place, mentions);
    }

    fn check_as(
        &mut self,
        what: &str,
        bytes: &[u8],
        reference: Option<&Value>,
        expect: Expect,
        place: Place<'_>,
        mentions: &[&str],
    ) {
        self.cases += 1;
        match judge(bytes, reference, what, expect, place, mentions) {
            Ok(true) => self.loaded += 1,
            Ok(false) => {}
            Err(problem) => self.problems.push(problem),
        }
    }

    /// Puts `raw` at `at` of `doc`: a rejection must name the record at `at`.
    fn raw(&mut self, doc: &Value, at: &str, raw: &[u8], shown: &str, expect: Expect) {
        let bytes = raw_at(doc, at, raw);
        self.check(
            &format!("{at} = {shown}"),
            &bytes,
            expect,
            place_of(&path(at)),
            &[],
        );
    }

    /// Puts `raw` at `at`, a place the format ignores: the load may fail
    /// (naming the file) or hold `doc` without it.
    fn ignored(&mut self, doc: &Value, at: &str, raw: &[u8], shown: &str) {
        let reference = nulled(doc, at);
        let bytes = raw_at(&reference, at, raw);
        self.check_as(
            &format!("{at} = {shown}"),
            &bytes,
            Some(&reference),
            Expect::Either,
            None,
            &[],
        );
    }

    fn finish(self, what: &str) -> usize {
        assert_no_problems(&self.problems, self.cases, what);
        self.loaded
    }
}

// ---------------------------------------------------------------------------
// Truncation.
// ---------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------
// Type swaps.
// ---------------------------------------------------------------------------

/// `cases` values of another JSON type at random paths of `doc`.
fn swap_round(run: &mut Run, doc: &Value, name: &str, seed: u64, cases: usize) {
    let mut paths = Vec::new();
    all_paths(doc, &mut Vec::new(), &mut paths);
    paths.retain(|p| !p.is_empty());
    let mut rng = Rng::new(seed);
    let replacements = replacements();
    for _ in 0..cases {
        let path = rng.pick(&paths).clone();
        let mut mutated = doc.clone();
        let target = at_mut(&mut mutated, &path);
        let old = kind_of(target);
        let choices: Vec<&Value> = replacements.iter().filter(|v| kind_of(v) != old).collect();
        let new = (*rng.pick(&choices)).clone();
        *target = new.clone();
        let bytes = serde_json::to_vec_pretty(&mutated).expect("serialize");
        let what = format!("{name}: {} = {new} (was {old:?})", show(&path));
        run.check(
            &what,
            &bytes,
            expect_swap(&path, &new),
            place_of(&path),
            &[],
        );
    }
}

#[test]
fn a_value_of_another_type_is_rejected_where_the_format_forbids_it_and_loaded_whole_elsewhere() {
    let mut run = Run::default();
    swap_round(&mut run, &small_base(), "small", 0x7377_6170, 600);
    let generated: Value =
        serde_json::from_slice(generated_base()).expect("the generated snapshot is JSON");
    swap_round(&mut run, &generated, "acme.json", 0x7377_6171, 40);
    let cases = run.cases;
    let loaded = run.finish("type swaps");
    assert!(
        loaded > 20 && cases - loaded > 200,
        "both outcomes are exercised: {loaded} of {cases} loaded"
    );
}

/// The unmutated snapshots load, whole: the baseline of every mutation.
#[test]
fn the_snapshots_mutations_start_from_load_whole() {
    let mut run = Run::default();
    run.check("small", &small_base_bytes(), Expect::Accept, None, &[]);
    run.check("acme.json", generated_base(), Expect::Accept, None, &[]);
    run.finish("the unmutated snapshots");
}

// ---------------------------------------------------------------------------
// Random edits.
// ---------------------------------------------------------------------------

/// Tokens to splice into a document.
const TOKENS: &[&[u8]] = &[
    b"{",
    b"}",
    b"[",
    b"]",
    b",",
    b":",
    b"\"",
    b"\\",
    b"null",
    b"true",
    b"0",
    b"-",
    b"1e400",
    b"\"id\":",
    b"\"attributes\":{}",
    b"\\u0000",
    b"\\ud800",
    b" ",
    b"\n",
    b"\x00",
    b"\xff",
];

/// One random edit of `bytes`: a byte changed, a range deleted or
/// repeated, or a token inserted.
fn random_edit(rng: &mut Rng, bytes: &[u8]) -> (Vec<u8>, String) {
    let at = rng.below(bytes.len());
    let len = 1 + rng.below(16.min(bytes.len() - at));
    let mut out = bytes.to_vec();
    let what = match rng.below(4) {
        0 => {
            let byte = rng.next() as u8;
            out[at] = byte;
            format!("byte {at} set to {byte:#04x}")
        }
        1 => {
            out.drain(at..at + len);
            format!("bytes {at}..{} deleted", at + len)
        }
        2 => {
            out.splice(at..at, bytes[at..at + len].iter().copied());
            format!("bytes {at}..{} repeated", at + len)
        }
        _ => {
            let token = rng.pick(TOKENS);
            out.splice(at..at, token.iter().copied());
            format!("{:?} inserted at byte {at}", String::from_utf8_lossy(token))
        }
    };
    (out, what)
}

#[test]
fn random_edits_are_rejected_naming_the_file_or_load_whole() {
    let mut rng = Rng::new(0x6564_6974);
    let mut run = Run::default();
    for (name, base, rounds) in [
        ("small", small_base_bytes(), 500),
        ("acme.json", generated_base().to_vec(), 25),
    ] {
        for _ in 0..rounds {
            let mut bytes = base.clone();
            let mut edits = Vec::new();
            for _ in 0..1 + rng.below(3) {
                let (edited, what) = random_edit(&mut rng, &bytes);
                bytes = edited;
                edits.push(what);
            }
            run.check(
                &format!("{name}: {}", edits.join(", then ")),
                &bytes,
                Expect::Either,
                None,
                &[],
            );
        }
    }
    assert!(
        run.finish("random edits") > 0,
        "no edit left a loadable document"
    );
}

// ---------------------------------------------------------------------------
// Deep nesting.
// ---------------------------------------------------------------------------

/// `depth` times `open`, then `center`, then `depth` times `close`.
fn nested(depth: usize, open: &str, center: &str, close: &str) -> Vec<u8> {
    [open.repeat(depth), center.to_owned(), close.repeat(depth)]
        .concat()
        .into_bytes()
}

#[test]
fn ten_thousand_levels_of_nesting_are_rejected_or_ignored_never_a_crash() {
    let doc = small_base();
    let arrays = nested(10_000, "[", "", "]");
    let objects = nested(10_000, "{\"a\":", "1", "}");
    let (a, o) = ("10,000 nested arrays", "10,000 nested objects");
    let mut run = Run::default();
    // Where the format ignores the value.
    run.ignored(&doc, "deep", &arrays, a);
    run.ignored(&doc, "deep", &objects, o);
    run.ignored(&doc, "tasks[0].attributes.deep", &arrays, a);
    run.ignored(&doc, "companies[0].deep", &objects, o);
    // Where it does not.
    run.check(
        "the document is 10,000 nested arrays",
        &arrays,
        Expect::Reject,
        None,
        &[],
    );
    run.check(
        "the document is 10,000 nested objects",
        &objects,
        Expect::Reject,
        None,
        &[],
    );
    for at in [
        "companies[0].attributes.name",
        "companies[1].attributes.labels",
        "tasks[0]",
        "metrics[0].attributes.value_numeric",
        "format_version",
    ] {
        run.raw(&doc, at, &arrays, a, Expect::Reject);
    }
    run.raw(&doc, "tasks[0].attributes", &objects, o, Expect::Reject);
    run.raw(
        &doc,
        "meeting_notes[1].attributes.transcript",
        &objects,
        o,
        Expect::Reject,
    );
    let unclosed = [&arrays[..10_000], b"1"].concat();
    let bytes = raw_at(&doc, "tasks", &unclosed);
    run.check(
        "tasks: 10,000 unclosed arrays",
        &bytes,
        Expect::Reject,
        None,
        &[],
    );
    let whole = raw_at(&doc, "tasks", &arrays);
    let open = whole
        .windows(2)
        .position(|w| w == b"[[")
        .expect("the arrays")
        + 10_000;
    let what = "the file ends inside 10,000 nested arrays";
    run.check(what, &whole[..open], Expect::Reject, None, &["truncated"]);
    run.finish("deep nesting");
}

// ---------------------------------------------------------------------------
// Huge strings.
// ---------------------------------------------------------------------------

/// A JSON string literal of `len` characters: letters, with an escape
/// (`\n`) every `escape_every` characters when that is not 0.
fn huge_string(len: usize, escape_every: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + len / escape_every.max(1) + 2);
    out.push(b'"');
    for i in 0..len {
        if escape_every > 0 && i % escape_every == escape_every - 1 {
            out.extend_from_slice(b"\\n");
        } else {
            out.push(b'a' + (i % 26) as u8);
        }
    }
    out.push(b'"');
    out
}

/// The size of a huge string (50 MB).
const HUGE: usize = 50 * 1024 * 1024;

/// A smaller huge string (4 MB, far past every length limit of the format)
/// for the cases that cost several passes over the file.
const LARGE: usize = 4 * 1024 * 1024;

/// How many times `needle` occurs in `haystack`.
fn occurrences(haystack: &[u8], needle: &[u8]) -> usize {
    haystack
        .windows(needle.len())
        .filter(|w| *w == needle)
        .count()
}

#[test]
fn huge_strings_load_whole_or_are_rejected() {
    let doc = small_base();
    let mut run = Run::default();

    // 50 MB in a company description: served whole, byte for byte.
    let plain = huge_string(HUGE, 0);
    let bytes = raw_at(&doc, "companies[1].attributes.description", &plain);
    run.cases += 1;
    match catch_unwind(AssertUnwindSafe(|| load_snapshot(FILE, &bytes))) {
        Err(p) => run.problems.push(format!(
            "a 50 MB description: panic: {}",
            panic_message(p.as_ref())
        )),
        Ok(Err(e)) => run.problems.push(format!(
            "a 50 MB description: rejected: {}",
            short(&e.to_string())
        )),
        Ok(Ok(loaded)) => {
            let ds = &loaded.dataset;
            let body = ds
                .company(parse_id(&uuid(11)).expect("an id"))
                .unwrap_or_default();
            let page = ds.portfolio(
                None,
                OffsetPage {
                    limit: 100,
                    offset: 0,
                },
            );
            if occurrences(&body, &plain) != 1
                || occurrences(&page, &plain) != 1
                || ds.counts.companies != 2
            {
                run.problems
                    .push("a 50 MB description is not served whole".to_owned());
            }
        }
    }
    drop((bytes, plain));

    // 4 MB strings where they are allowed: loaded and checked whole.
    let large = huge_string(LARGE, 0);
    let escaped = huge_string(LARGE, 1000);
    let fraction = [
        b"\"2026-03-01T10:00:00.".as_slice(),
        &vec![b'7'; LARGE],
        b"Z\"",
    ]
    .concat();
    run.raw(
        &doc,
        "tasks[1].attributes.title",
        &escaped,
        "4 MB with an escape every 1000 bytes",
        Expect::Accept,
    );
    run.raw(
        &doc,
        "meeting_notes[1].attributes.notes",
        &large,
        "4 MB",
        Expect::Accept,
    );
    // RFC 3339 allows any number of fraction digits.
    run.raw(
        &doc,
        "tasks[1].attributes.created_at",
        &fraction,
        "4 MB of fraction digits",
        Expect::Accept,
    );
    run.ignored(&doc, "blob", &large, "4 MB");
    let title = raw_at(&doc, "tasks[1].attributes.title", &escaped);
    if let Ok(loaded) = load_snapshot(FILE, &title) {
        let body = loaded
            .dataset
            .task(parse_id(&uuid(12)).expect("an id"))
            .unwrap_or_default();
        let body: Value = serde_json::from_slice(&body).unwrap_or_default();
        let len = body["data"]["attributes"]["title"]
            .as_str()
            .map_or(0, |t| t.chars().count());
        if len != LARGE {
            run.problems.push(format!(
                "the 4 MB title is served with {len} characters, not {LARGE}"
            ));
        }
    }

    // Where the format bounds or checks the text: rejected.
    for at in [
        "version",
        "workspace.id",
        "api_keys[0].sha256",
        "tasks[1].attributes.created_at",
        "tasks[1].id",
        "feed[1].attributes.private",
    ] {
        run.raw(&doc, at, &large, "4 MB", Expect::Reject);
    }
    run.finish("huge strings");
}

/// Rejections of huge or odd input are reported in a message an operator
/// can read (it is logged and served on `/snapshots`) that says what is
/// wrong: never the offending text itself, megabytes of it.
#[test]
fn rejection_messages_are_short_and_say_what_is_wrong() {
    let doc = small_base();
    let large = huge_string(LARGE, 0);
    let arrays = nested(10_000, "[", "", "]");
    let email = [b"[{\"organizer\":true,\"email\":".as_slice(), &large, b"}]"].concat();
    let cases: Vec<(&str, Vec<u8>, &[&str])> = vec![
        (
            "a 50 MB task created_at that is no timestamp",
            raw_at(
                &doc,
                "tasks[1].attributes.created_at",
                &huge_string(HUGE, 0),
            ),
            &["tasks", "created_at"],
        ),
        (
            "a 4 MB task id",
            raw_at(&doc, "tasks[1].id", &large),
            &["tasks", "id"],
        ),
        (
            "a 4 MB string where feed.private wants a boolean",
            raw_at(&doc, "feed[1].attributes.private", &large),
            &["feed", "private"],
        ),
        (
            "a 4 MB attendee email",
            raw_at(&doc, "meetings[1].attributes.attendees", &email),
            &["meetings", "email"],
        ),
        (
            "a 4 MB string as the whole document",
            large.clone(),
            &["JSON object"],
        ),
        (
            "format_version is 10,000 nested arrays",
            raw_at(&doc, "format_version", &arrays),
            &["format_version"],
        ),
        (
            "a task is 10,000 nested arrays",
            raw_at(&doc, "tasks[0]", &arrays),
            &["tasks"],
        ),
        (
            "the document is 10,000 nested arrays",
            arrays.clone(),
            &["JSON object"],
        ),
        (
            "the document is the array [2]",
            b"[2]".to_vec(),
            &["JSON object"],
        ),
    ];
    let mut problems = Vec::new();
    for (what, bytes, mentions) in &cases {
        match catch_unwind(AssertUnwindSafe(|| load_snapshot(FILE, bytes))) {
            Err(p) => problems.push(format!("{what}: panic: {}", panic_message(p.as_ref()))),
            Ok(Ok(_)) => problems.push(format!("{what}: loaded, though it must be rejected")),
            Ok(Err(e)) => {
                let text = e.to_string();
                if text.len() > MAX_MESSAGE {
                    problems.push(format!(
                        "{what}: a {} byte message: {}",
                        text.len(),
                        short(&text)
                    ));
                } else if let Some(word) = mentions.iter().find(|w| !text.contains(**w)) {
                    problems.push(format!("{what}: the message does not say {word:?}: {text}"));
                }
            }
        }
    }
    assert_no_problems(&problems, cases.len(), "rejection messages");
}

// ---------------------------------------------------------------------------
// Invalid UTF-8.
// ---------------------------------------------------------------------------

/// Byte sequences that are not UTF-8: a stray continuation byte, an
/// overlong encoding, a surrogate, a cut sequence, bytes past U+10FFFF.
const NOT_UTF8: &[&[u8]] = &[
    b"\xff",
    b"\x80",
    b"\xc0\x80",
    b"\xed\xa0\x80",
    b"\xe2\x82",
    b"\xf4\x90\x80\x80",
    b"\xf8\x88\x80\x80\x80",
    b"\xfe\xfe\xff\xff",
];

#[test]
fn invalid_utf8_is_rejected_in_what_is_served_and_never_served() {
    let doc = small_base();
    let mut run = Run::default();
    for bad in NOT_UTF8 {
        let shown = format!("a string holding the bytes {bad:x?}");
        // Inside served strings: rejected, naming the record.
        let raw = [b"\"ok ".as_slice(), bad, b" ok\""].concat();
        for at in [
            "companies[1].attributes.name",
            "tasks[1].attributes.title",
            "tasks[0].attributes.created_at",
            "feed[1].id",
            "meeting_notes[1].attributes.notes",
            "workspace.name",
            "version",
        ] {
            run.raw(&doc, at, &raw, &shown, Expect::Reject);
        }
        // In an attribute's name.
        let member = [b"\"ti".as_slice(), bad, b"tle\":\"t\""].concat();
        let bytes = member_raw_at(&doc, "tasks[1].attributes", &member);
        let place = Some(("tasks", Some(1)));
        run.check(
            &format!("an attribute name holding {bad:x?}"),
            &bytes,
            Expect::Either,
            place,
            &[],
        );
        // Between tokens.
        let text = serde_json::to_vec_pretty(&doc).expect("serialize");
        let at = text.iter().position(|&c| c == b'\n').expect("a newline");
        let bytes = [&text[..at], bad, &text[at..]].concat();
        run.check(
            &format!("the bytes {bad:x?} between tokens"),
            &bytes,
            Expect::Reject,
            None,
            &[],
        );
    }
    // At random positions of both snapshots: whatever loads is valid and whole.
    let mut rng = Rng::new(0x7574_6638);
    for (name, text, rounds) in [
        ("small", small_base_bytes(), 300),
        ("acme.json", generated_base().to_vec(), 30),
    ] {
        for _ in 0..rounds {
            let at = rng.below(text.len());
            let bad = rng.pick(NOT_UTF8);
            let bytes = [&text[..at], bad, &text[at..]].concat();
            run.check(
                &format!("{name}: {bad:x?} inserted at byte {at}"),
                &bytes,
                Expect::Either,
                None,
                &[],
            );
        }
    }
    run.finish("invalid UTF-8");
}

// ---------------------------------------------------------------------------
// Duplicate keys.
// ---------------------------------------------------------------------------

#[test]
fn duplicate_keys_are_rejected_naming_the_record() {
    let doc = small_base();
    let mut rng = Rng::new(0x6475_7073);
    let mut run = Run::default();
    // Rejected, saying so; api_keys errors never quote the file (a pasted
    // key must not reach the logs), so they cannot say what was duplicated.
    let dup = |run: &mut Run, at: &str, member: &str, what: &str| {
        let place = place_of(&path(at)).map(|(c, i)| (c.to_owned(), i));
        let place = place.as_ref().map(|(c, i)| (c.as_str(), *i));
        let quiet = place.is_some_and(|(c, _)| c == "api_keys");
        let mentions: &[&str] = if quiet { &[] } else { &["duplicate"] };
        run.check(
            &format!("{at}: {what}"),
            &member_at(&doc, at, member),
            Expect::Reject,
            place,
            mentions,
        );
    };
    for collection in COLLECTIONS {
        for (index, record) in doc[collection].as_array().into_iter().flatten().enumerate() {
            let at = format!("{collection}[{index}]");
            let id = record["id"].to_string();
            let other = uuid(900 + rng.below(50) as u64);
            dup(
                &mut run,
                &at,
                &format!("\"id\":\"{other}\""),
                "a second, different id",
            );
            dup(&mut run, &at, &format!("\"id\":{id}"), "the id twice");
            dup(
                &mut run,
                &at,
                &format!("\"i\\u0064\":{id}"),
                "the id twice, once escaped",
            );
            dup(
                &mut run,
                &at,
                "\"attributes\":{}",
                "a second attributes object",
            );
            let attrs = record["attributes"]
                .as_object()
                .cloned()
                .unwrap_or_default();
            if let Some((name, value)) = attrs.iter().nth(rng.below(attrs.len().max(1))) {
                let member = format!("{}:{value}", json!(name));
                let attrs_at = format!("{at}.attributes");
                if slot(&path(&format!("{attrs_at}.{name}"))).is_some() {
                    dup(&mut run, &attrs_at, &member, &format!("{name} twice"));
                } else {
                    let bytes = member_at(&doc, &attrs_at, &member);
                    let what = format!("{attrs_at}: {name}, unknown, twice");
                    run.check(&what, &bytes, Expect::Either, None, &[]);
                }
            }
            // An unknown key twice: the format ignores it.
            let bytes = member_at(&doc, &at, "\"extra\":1,\"extra\":2");
            run.check(
                &format!("{at}: an unknown key twice"),
                &bytes,
                Expect::Either,
                None,
                &[],
            );
        }
    }
    dup(
        &mut run,
        "companies[1].attributes.value_propositions[0]",
        "\"problem\":\"q\"",
        "problem twice",
    );
    dup(
        &mut run,
        "meeting_notes[1].attributes.transcript.segments[0]",
        "\"text\":\"t\"",
        "text twice",
    );
    dup(
        &mut run,
        "meetings[1].attributes.attendees[0]",
        "\"organizer\":false",
        "organizer twice",
    );
    dup(&mut run, "workspace", "\"id\":\"ws-other\"", "id twice");
    dup(
        &mut run,
        "api_keys[0]",
        &format!("\"sha256\":\"{}\"", key_hash("cura_other")),
        "sha256 twice",
    );
    // At the top level, before and after the first occurrence.
    let text = serde_json::to_string(&doc).expect("serialize");
    for key in [
        "format_version",
        "version",
        "workspace",
        "api_keys",
        "companies",
        "tasks",
        "meeting_notes",
    ] {
        let value = doc[key].to_string();
        let before = format!("{{\"{key}\":{value},{}", &text[1..]);
        run.check(
            &format!("top-level {key} twice"),
            before.as_bytes(),
            Expect::Reject,
            None,
            &["duplicate"],
        );
        let second = if doc[key].is_array() { "[]" } else { &value };
        let after = format!("{},\"{key}\":{second}}}", &text[..text.len() - 1]);
        let what = format!("top-level {key} twice, the second {second}");
        run.check(
            &what,
            after.as_bytes(),
            Expect::Reject,
            None,
            &["duplicate"],
        );
    }
    let ignored = format!("{{\"x-exporter\":1,\"x-exporter\":2,{}", &text[1..]);
    run.check(
        "an unknown top-level key twice",
        ignored.as_bytes(),
        Expect::Either,
        None,
        &[],
    );
    // Ids that differ only in case are the same id: a repeat.
    let mut upper = doc.clone();
    upper["tasks"][1]["id"] = json!(uuid(2).to_uppercase());
    let bytes = serde_json::to_vec(&upper).expect("serialize");
    let place = Some(("tasks", Some(1)));
    run.check(
        "tasks[1] has the id of tasks[0] in upper case",
        &bytes,
        Expect::Reject,
        place,
        &["repeats"],
    );
    run.finish("duplicate keys");
}

// ---------------------------------------------------------------------------
// Numbers out of range.
// ---------------------------------------------------------------------------

/// A large integer that is a finite double (about 1.2e29), not an exact one.
const BIG: &str = "123456789012345678901234567890";

#[test]
fn numbers_out_of_range_are_rejected_and_large_finite_ones_served_as_written() {
    let doc = small_base();
    let value = "metrics[1].attributes.value_numeric";
    let start = "meeting_notes[1].attributes.transcript.segments[0].startTime";
    let huge_digits = format!("1{}", "0".repeat(10_000));
    let tiny_digits = format!("0.{}1", "0".repeat(10_000));
    let mut run = Run::default();
    for (number, expect) in [
        ("1e400", Expect::Reject),
        ("-1e400", Expect::Reject),
        ("1.7976931348623159e308", Expect::Reject),
        (huge_digits.as_str(), Expect::Reject),
        (BIG, Expect::Accept),
        ("-123456789012345678901234567890.5", Expect::Accept),
        ("1e-400", Expect::Accept),
        (tiny_digits.as_str(), Expect::Accept),
        ("-0", Expect::Accept),
        ("1E+2", Expect::Accept),
        ("1.7976931348623157e308", Expect::Accept),
    ] {
        let (raw, shown) = (number.as_bytes(), short(number));
        run.raw(&doc, value, raw, &shown, expect);
        run.raw(&doc, start, raw, &shown, expect);
        // Where a number is ignored, and where no number belongs.
        run.ignored(&doc, "x-count", raw, &shown);
        run.ignored(&doc, "metrics[1].attributes.x-weight", raw, &shown);
        for at in [
            "format_version",
            "tasks[1].attributes.title",
            "feed[1].attributes.private",
            "companies[1].id",
        ] {
            run.raw(&doc, at, raw, &shown, Expect::Reject);
        }
    }
    // Large and odd finite numbers are served exactly as written.
    let company = parse_id(&uuid(11)).expect("an id");
    let meeting = parse_id(&uuid(16)).expect("an id");
    for number in [
        BIG,
        "-123456789012345678901234567890.5",
        "1e-400",
        "1E+2",
        "-0",
    ] {
        for (at, key) in [(value, "value_numeric"), (start, "startTime")] {
            run.cases += 1;
            let body = load_snapshot(FILE, &raw_at(&doc, at, number.as_bytes())).map(|loaded| {
                let ds = loaded.dataset;
                let mut body = ds.company_metrics(company).unwrap_or_default().to_vec();
                body.extend_from_slice(&ds.meeting(meeting, true).unwrap_or_default());
                body
            });
            let want = format!("\"{key}\":{number},");
            match body {
                Err(e) => run.problems.push(format!("{at} = {number}: rejected: {e}")),
                Ok(body) if !String::from_utf8_lossy(&body).contains(&want) => {
                    run.problems
                        .push(format!("{at} = {number} is not served as written"));
                }
                Ok(_) => {}
            }
        }
    }
    run.finish("numbers out of range");
}

// ---------------------------------------------------------------------------
// Over HTTP: a mutated replacement never stops the old version serving.
// ---------------------------------------------------------------------------

/// A snapshot of `ws-acme` whose companies, tasks and feed entries carry
/// `version` as the first word of their name or title.
fn tagged(version: &str) -> Value {
    let mut snap = snapshot("ws-acme", &[KEY]);
    snap["version"] = json!(version);
    let at = |i: u64| format!("2026-03-01T10:{i:02}:00Z");
    add(
        &mut snap,
        "companies",
        (1..=4).map(|i| company(i, &format!("{version} company {i}"))),
    );
    add(
        &mut snap,
        "tasks",
        (1..=4).map(|i| {
            with(
                task(100 + i, i, &at(i)),
                json!({ "title": format!("{version} task {i}") }),
            )
        }),
    );
    add(
        &mut snap,
        "feed",
        (1..=4).map(|i| {
            with(
                feed_entry(200 + i, i, &at(i)),
                json!({ "title": format!("{version} feed {i}") }),
            )
        }),
    );
    let mut value = metric(300, 1, "Annualized Revenue", &at(1));
    value["attributes"]["value_numeric"] = json!(7);
    add(&mut snap, "metrics", [value]);
    snap
}

/// How many times the server has rejected `file` (admin `/metrics`).
async fn failures_of(server: &TestServer, file: &str) -> f64 {
    let (_, samples) = scrape(server).await;
    value_of(
        &samples,
        "portfolio_replica_snapshot_load_failures_total",
        &[("file", file)],
    )
    .unwrap_or(0.0)
}

/// Keeps asking for every list until `stop`; returns the number of answers
/// and every answer that is not a whole 200 of an allowed version.
async fn watch(
    api: SocketAddr,
    allowed: Arc<Mutex<BTreeSet<String>>>,
    stop: Arc<AtomicBool>,
) -> (usize, Vec<String>) {
    let mut answers = 0;
    let mut problems = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        for (path, field) in [
            ("/portfolio", "name"),
            ("/tasks", "title"),
            ("/feed", "title"),
        ] {
            answers += 1;
            let resp = match get_from(api, path, Some(KEY)).await {
                Ok(resp) => resp,
                Err(e) => {
                    problems.push(format!("GET {path}: {e}"));
                    continue;
                }
            };
            let version = resp
                .header("x-snapshot-version")
                .unwrap_or_default()
                .to_owned();
            if resp.status != 200 || !allowed.lock().expect("lock").contains(&version) {
                problems.push(format!(
                    "GET {path}: status {}, version {version:?}: {}",
                    resp.status,
                    short(&resp.text())
                ));
                continue;
            }
            let body: Value = serde_json::from_slice(&resp.body).unwrap_or_default();
            let data = body["data"].as_array().cloned().unwrap_or_default();
            if data.len() != 4 {
                problems.push(format!(
                    "GET {path}: {} records in version {version}",
                    data.len()
                ));
            }
            for record in data {
                let text = record["attributes"][field].as_str().unwrap_or_default();
                if text.split(' ').next() != Some(version.as_str()) {
                    problems.push(format!(
                        "GET {path}: {field} {text:?} in a response of version {version}"
                    ));
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    (answers, problems)
}

/// Every mutation kind applied to the serving file `acme.json`: each one is
/// rejected (counted and reported for `acme.json`) while v1 keeps serving
/// whole; then a valid v2 with a large finite number is served as written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutated_replacements_never_stop_the_old_version_nor_mix_versions() {
    let dir = tempdir();
    write_json(dir.path(), "acme.json", &tagged("v1"));
    let server = TestServer::start_in(dir, |_| {}).await;
    server.wait_version("/portfolio", KEY, "v1").await;

    let allowed = Arc::new(Mutex::new(BTreeSet::from(["v1".to_owned()])));
    let stop = Arc::new(AtomicBool::new(false));
    let watcher = tokio::spawn(watch(server.api, Arc::clone(&allowed), Arc::clone(&stop)));

    let full = serde_json::to_vec_pretty(&tagged("m-cut")).expect("serialize");
    let name = "companies[0].attributes.name";
    let dup_id = format!("\"id\":\"{}\"", uuid(999));
    let top = serde_json::to_string(&tagged("m-top")).expect("serialize");
    let mutants: Vec<(&str, Vec<u8>)> = vec![
        ("a truncated file", full[..full.len() * 2 / 3].to_vec()),
        ("an empty file", Vec::new()),
        (
            "invalid UTF-8",
            raw_at(&tagged("m-utf8"), name, b"\"m-utf8 \xff\xfe\""),
        ),
        (
            "a wrong type",
            raw_at(&tagged("m-type"), "tasks[1].attributes.created_at", b"42"),
        ),
        (
            "deep nesting",
            raw_at(&tagged("m-deep"), name, &nested(10_000, "[", "", "]")),
        ),
        (
            "a duplicate id",
            member_at(&tagged("m-dup"), "tasks[2]", &dup_id),
        ),
        (
            "1e400",
            raw_at(
                &tagged("m-range"),
                "metrics[0].attributes.value_numeric",
                b"1e400",
            ),
        ),
        (
            "a 5 MB version",
            raw_at(&tagged("m-huge"), "version", &huge_string(5 << 20, 0)),
        ),
        (
            "a duplicate top-level key",
            format!("{},\"companies\":[]}}", &top[..top.len() - 1]).into_bytes(),
        ),
    ];

    for (what, bytes) in &mutants {
        let before = failures_of(&server, "acme.json").await;
        replace_backdated(server.dir(), "acme.json", bytes);
        eventually(
            &format!("{what}: the replacement is rejected"),
            async || match failures_of(&server, "acme.json").await {
                now if now > before => Ok(()),
                now => Err(format!("{now} failures, as before")),
            },
        )
        .await;
        let entry = server
            .snapshot_status("acme.json")
            .await
            .expect("/snapshots lists acme.json");
        let error = entry["error"].as_str().unwrap_or_default();
        assert!(
            error.contains("acme.json"),
            "{what}: /snapshots error does not name the file: {}",
            short(error)
        );
        server.wait_version("/portfolio", KEY, "v1").await;
    }

    allowed.lock().expect("lock").insert("v2".to_owned());
    let good = tagged("v2");
    let good = raw_at(&good, "metrics[0].attributes.value_numeric", BIG.as_bytes());
    replace_backdated(server.dir(), "acme.json", &good);
    server.wait_version("/portfolio", KEY, "v2").await;
    let metrics = server
        .get(&format!("/portfolio/{}/metrics", uuid(1)), Some(KEY))
        .await;
    assert_eq!(metrics.status, 200, "{}", metrics.text());
    assert!(
        metrics.text().contains(&format!("\"value_numeric\":{BIG}")),
        "the large number is not served as written: {}",
        metrics.text()
    );

    stop.store(true, Ordering::Relaxed);
    let (answers, problems) = watcher.await.expect("the watcher");
    assert!(
        answers > mutants.len(),
        "only {answers} answers were checked"
    );
    assert!(
        problems.is_empty(),
        "{} of {answers} answers went wrong:\n{}",
        problems.len(),
        problems.join("\n")
    );
}
