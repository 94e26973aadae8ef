//! A loaded dataset against its document: the counts are the lengths of
//! the document's arrays and every record is served with the attributes the
//! document gives it.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use portfolio_domain::store::id::parse_id;
use portfolio_domain::store::time::Instant;
use portfolio_domain::store::{Cursor, Dataset, FeedQuery, OffsetPage};
use serde_json::{Value, json};

use super::judge::*;

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
pub(super) fn check_complete(ds: &Dataset, doc: &Value) -> Result<(), String> {
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
