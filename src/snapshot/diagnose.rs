//! Explaining a rejected file. Runs only on the error path, so it may take
//! more passes over the bytes: a good file is never slowed down by it.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::value::RawValue;

use super::error::{Location, SnapshotError, shorten};
use super::format::SnapshotDoc;
use super::header::check_format_version;

/// The format version problem of a document, if it has one. Runs only on
/// the error path: a scan of the whole file that skips everything else.
pub fn format_version_problem(file: &str, bytes: &[u8]) -> Option<SnapshotError> {
    // serde reads a struct from an array too, by position: only an object
    // has a format_version.
    if !is_object(bytes) {
        return None;
    }
    #[derive(Deserialize)]
    struct HeaderOnly<'a> {
        #[serde(borrow)]
        format_version: Option<&'a RawValue>,
    }
    let header: HeaderOnly<'_> = serde_json::from_slice(bytes).ok()?;
    check_format_version(file, header.format_version.map(RawValue::get)).err()
}

/// Whether a JSON text is an object (its first non-blank byte is `{`).
fn is_object(bytes: &[u8]) -> bool {
    bytes.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{')
}

/// Explains why the parse failed on a JSON error. Runs only on the error path.
pub fn diagnose(file: &str, bytes: &[u8]) -> SnapshotError {
    // 1. Is it JSON at all? IgnoredAny checks syntax without building values.
    if let Err(err) = serde_json::from_slice::<IgnoredAny>(bytes) {
        return if err.is_eof() {
            SnapshotError::new(
                file,
                format!(
                    "file is truncated: the JSON ends early (line {}, column {})",
                    err.line(),
                    err.column()
                ),
            )
        } else {
            SnapshotError::new(file, format!("invalid JSON: {err}"))
        };
    }
    // 2. A document of another format version may fail for that reason alone.
    if let Some(problem) = format_version_problem(file, bytes) {
        return problem;
    }
    // 3. Rerun a typed parse of the whole document, tracking the path to the
    // failing value.
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let err = match serde_path_to_error::deserialize::<_, SnapshotDoc<'_>>(&mut de) {
        Ok(_) => {
            return SnapshotError::new(
                file,
                "a snapshot must be a JSON object with the documented keys",
            );
        }
        Err(err) => err,
    };
    let mut segments = Vec::new();
    for segment in err.path().iter() {
        use serde_path_to_error::Segment;
        segments.push(match segment {
            Segment::Seq { index } => Seg::Index(*index),
            Segment::Map { key } | Segment::Enum { variant: key } => Seg::Key(key.clone()),
            Segment::Unknown => Seg::Key("?".to_owned()),
        });
    }
    let mut message = shorten_message(&err.into_inner().to_string());
    let mut parts = segments.into_iter();
    // A plain key pasted where its hash belongs must not be quoted back
    // into logs and /snapshots: serde's message cites the offending value.
    if matches!(segments_first(&parts), Some("api_keys")) {
        message =
            "must be an array of objects {\"sha256\": \"<64 hex digits>\", \"label\": \"...\"} \
                   (see `portfolio-replica hash-key`)"
                .to_owned();
    }
    let Some(Seg::Key(collection)) = parts.next() else {
        return SnapshotError::new(file, format!("a snapshot must be a JSON object: {message}"));
    };
    let mut loc = Location {
        collection,
        ..Location::default()
    };
    let mut field = Vec::new();
    for (n, seg) in parts.enumerate() {
        match seg {
            Seg::Index(i) if n == 0 => loc.index = Some(i),
            Seg::Index(i) => field.push(format!("[{i}]")),
            Seg::Key(k) => field.push(format!(".{k}")),
        }
    }
    if !field.is_empty() {
        loc.field = Some(field.concat().trim_start_matches('.').to_owned());
    }
    if let Some(index) = loc.index {
        loc.id = record_id(bytes, &loc.collection, index);
    }
    SnapshotError::at(file, loc, message)
}

enum Seg {
    Index(usize),
    Key(String),
}

/// serde's messages quote the offending value whole; keep their start (what
/// was wrong) and end (where: line and column).
fn shorten_message(message: &str) -> String {
    const KEEP: usize = 200;
    if message.len() <= 2 * KEEP {
        return message.to_owned();
    }
    let mut head = KEEP;
    while !message.is_char_boundary(head) {
        head -= 1;
    }
    let mut tail = message.len() - KEEP;
    while !message.is_char_boundary(tail) {
        tail += 1;
    }
    format!("{} … {}", &message[..head], &message[tail..])
}

/// The top-level key a path starts with.
fn segments_first(parts: &std::vec::IntoIter<Seg>) -> Option<&str> {
    match parts.as_slice().first() {
        Some(Seg::Key(key)) => Some(key),
        _ => None,
    }
}

/// Finds the id of `collection[index]` in a document known to be valid JSON.
fn record_id(bytes: &[u8], collection: &str, index: usize) -> Option<String> {
    if !is_object(bytes) {
        return None;
    }
    let top: BTreeMap<String, &RawValue> = serde_json::from_slice(bytes).ok()?;
    let records: Vec<&RawValue> = serde_json::from_str(top.get(collection)?.get()).ok()?;
    #[derive(Deserialize)]
    struct IdOnly<'a> {
        #[serde(borrow)]
        id: Option<&'a RawValue>,
    }
    let record = records.get(index)?.get();
    if !is_object(record.as_bytes()) {
        return None;
    }
    let record: IdOnly<'_> = serde_json::from_str(record).ok()?;
    let raw = record.id?.get();
    let id = serde_json::from_str::<String>(raw).unwrap_or_else(|_| raw.to_owned());
    Some(shorten(&id, 64))
}
