//! Explaining a rejected file. Runs only on the error path, so it may take
//! more passes over the bytes: a good file is never slowed down by it.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde::de::{Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::value::RawValue;

use super::error::{Place, SnapshotError, shorten};
use super::format::JsonText;
use super::header::check_format_version;
use super::parse::{Top, TopValue, first_time};
use super::records::{WireRecord, WithRecordType, with_record_type};
use crate::store::Collection;

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

/// The `]` or `}` at `line` and `column` (serde_json's position: 1-based,
/// in bytes) when the last non-blank byte before it is a comma. serde_json's
/// syntax pass calls such a comma "expected value" (an array) or "key must
/// be a string" (an object): the right place, in words that do not say
/// what is wrong.
fn trailing_comma(bytes: &[u8], line: usize, column: usize) -> Option<u8> {
    let start = match line {
        0 => return None,
        1 => 0,
        _ => {
            bytes
                .iter()
                .enumerate()
                .filter(|(_, b)| **b == b'\n')
                .nth(line - 2)?
                .0
                + 1
        }
    };
    let at = start + column.checked_sub(1)?;
    let close = *bytes.get(at)?;
    let before = bytes[..at]
        .iter()
        .rev()
        .find(|b| !b.is_ascii_whitespace())?;
    (matches!(close, b']' | b'}') && *before == b',').then_some(close)
}

/// Whether a JSON text is an object (its first non-blank byte is `{`).
fn is_object(bytes: &[u8]) -> bool {
    bytes.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{')
}

/// Explains why the parse failed on a JSON error. Runs only on the error path.
pub fn diagnose(file: &str, bytes: &[u8]) -> SnapshotError {
    // 0. A byte order mark: serde_json would only say "expected value".
    if let Some(problem) = byte_order_mark(bytes) {
        return SnapshotError::new(file, problem);
    }
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
        } else if let Some(close) = trailing_comma(bytes, err.line(), err.column()) {
            SnapshotError::new(
                file,
                format!(
                    "invalid JSON: trailing comma before the `{}` at line {} column {} \
                     (JSON allows no comma after the last {}: remove it)",
                    char::from(close),
                    err.line(),
                    err.column(),
                    if close == b']' { "element" } else { "member" }
                ),
            )
        } else {
            SnapshotError::new(file, format!("invalid JSON: {err}"))
        };
    }
    // 2. Valid JSON, but not an object.
    if let Some(kind) = top_level_kind(bytes) {
        return SnapshotError::new(
            file,
            format!(
                "a snapshot is a JSON object {{\"format_version\": 1, \"workspace\": {{\"id\": ...}}, ...}}, \
                 not {kind}"
            ),
        );
    }
    // 3. A document of another format version may fail for that reason alone.
    if let Some(problem) = format_version_problem(file, bytes) {
        return problem;
    }
    // 4. Rerun a typed parse of the whole document, tracking the path to the
    // failing value.
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let err = match serde_path_to_error::deserialize::<_, TypedDoc>(&mut de) {
        Ok(_) => {
            // The typed parse skips unknown keys; the streaming one does
            // not allow any key twice.
            let message = match repeated_top_level_key(bytes) {
                Some(key) => duplicate_key(&key),
                None => "a snapshot must be a JSON object with the documented keys".to_owned(),
            };
            return SnapshotError::new(file, format!("top level: {message}"));
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
    let mut message = in_words(&err.into_inner().to_string());
    // serde reads an object's fields from an array too, by position: an
    // index where no array belongs means an array was given for an object.
    if let Some(at) = array_for_object(&segments) {
        segments.truncate(at);
        message = "expected an object, found an array".to_owned();
    }
    let mut message = shorten_message(&message);
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
        return SnapshotError::new(file, format!("top level: {message}"));
    };
    let mut loc = Place {
        collection,
        ..Place::default()
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

/// A snapshot read as both passes read it, types only, until a value of a
/// wrong type stops the read: what makes the path to that value. Each
/// collection's records are read as [`with_record_type`] says, the rest as
/// [`Top::read`] does; a key of the header or a collection given twice is
/// an error, in the words serde's derive uses for a struct's field.
struct TypedDoc;

impl<'de> Deserialize<'de> for TypedDoc {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<TypedDoc, D::Error> {
        deserializer.deserialize_map(TypedDoc)
    }
}

impl<'de> Visitor<'de> for TypedDoc {
    type Value = TypedDoc;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a snapshot object")
    }

    fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<TypedDoc, M::Error> {
        let mut top = Top::default();
        let mut seen: Vec<JsonText<'de>> = Vec::new();
        while let Some(key) = map.next_key::<JsonText<'de>>()? {
            // Only known keys are kept, so only they can repeat.
            first_time(&seen, &key)?;
            let known = match Collection::from_name(key.as_str()) {
                Some(collection) => {
                    with_record_type(collection, TypedRecords(&mut map)).map(|()| true)
                }
                None => map.next_value_seed(TopValue {
                    top: &mut top,
                    key: key.as_str(),
                }),
            }?;
            if known {
                seen.push(key);
            }
        }
        Ok(TypedDoc)
    }
}

/// Reads a collection's value as an array of its records.
struct TypedRecords<'m, M>(&'m mut M);

impl<'de, M: MapAccess<'de>> WithRecordType<'de> for TypedRecords<'_, M> {
    type Output = Result<(), M::Error>;

    fn with<P: WireRecord<'de>>(self, _: Collection) -> Self::Output {
        self.0.next_value::<Option<Vec<P>>>().map(drop)
    }
}

/// What a file that starts with a byte order mark should be told.
fn byte_order_mark(bytes: &[u8]) -> Option<String> {
    if bytes.starts_with(&[0xEF, 0xBB, 0xBF]) {
        return Some(
            "the file starts with a UTF-8 byte order mark (EF BB BF); save it without a BOM"
                .to_owned(),
        );
    }
    let utf16 = match bytes {
        [0xFF, 0xFE, ..] => "FF FE",
        [0xFE, 0xFF, ..] => "FE FF",
        _ => return None,
    };
    Some(format!(
        "the file starts with a UTF-16 byte order mark ({utf16}); a snapshot is UTF-8: \
         save it as UTF-8 without a BOM"
    ))
}

/// The kind of a valid JSON text that is not an object, in words.
fn top_level_kind(bytes: &[u8]) -> Option<&'static str> {
    match bytes.iter().find(|b| !b.is_ascii_whitespace())? {
        b'{' => None,
        b'[' => Some("an array"),
        b'"' => Some("a string"),
        b'n' => Some("null"),
        b't' | b'f' => Some("true or false"),
        _ => Some("a number"),
    }
}

/// The keys under which a JSON array is allowed: the collections and the
/// array-valued fields. An index after any other key means serde read an
/// object's fields from an array.
fn is_array_key(key: &str) -> bool {
    Collection::ALL.iter().any(|c| c.name() == key) || ARRAY_FIELDS.contains(&key)
}

/// The array-valued fields of records and of the header.
const ARRAY_FIELDS: &[&str] = &[
    "api_keys",
    "domain_aliases",
    "labels",
    "value_propositions",
    "sources",
    "attendees",
    "segments",
];

/// Where in `segments` an array stands in place of an object: the position
/// of the first index that does not follow an array-valued key.
fn array_for_object(segments: &[Seg]) -> Option<usize> {
    segments.iter().enumerate().find_map(|(n, seg)| {
        let Seg::Index(_) = seg else { return None };
        let legit = matches!(
            n.checked_sub(1).map(|p| &segments[p]),
            Some(Seg::Key(key)) if is_array_key(key)
        );
        (!legit).then_some(n)
    })
}

/// serde's message in the operator's terms: JSON kinds instead of Rust
/// types, "expected X, found Y", and the position in parentheses.
fn in_words(message: &str) -> String {
    let (body, position) = match message.rsplit_once(" at line ") {
        Some((body, at)) => match at.split_once(" column ") {
            Some((line, column))
                if line.bytes().all(|b| b.is_ascii_digit())
                    && column.bytes().all(|b| b.is_ascii_digit()) =>
            {
                (body, format!(" (line {line}, column {column})"))
            }
            _ => (message, String::new()),
        },
        None => (message, String::new()),
    };
    let words = if let Some(rest) = body.strip_prefix("invalid type: ") {
        match rest.rsplit_once(", expected ") {
            Some((found, expected)) => format!(
                "expected {}, found {}",
                expected_in_words(expected),
                found_in_words(found)
            ),
            None => body.to_owned(),
        }
    } else if let Some(rest) = body.strip_prefix("invalid length ") {
        match rest.split_once(", expected ") {
            Some((_, expected)) if expected.starts_with("struct ") => {
                "expected an object, found an array".to_owned()
            }
            Some((len, expected)) => format!(
                "expected {}, found an array of {len} element(s)",
                expected_in_words(expected)
            ),
            None => body.to_owned(),
        }
    } else if let Some(rest) = body.strip_prefix("invalid value: ") {
        match rest.rsplit_once(", expected ") {
            Some((found, expected)) => format!("expected {expected}, found {found}"),
            None => body.to_owned(),
        }
    } else if let Some(key) = body
        .strip_prefix("duplicate field `")
        .and_then(|k| k.strip_suffix('`'))
    {
        duplicate_key(key)
    } else if let Some(key) = body
        .strip_prefix("missing field `")
        .and_then(|k| k.strip_suffix('`'))
    {
        format!("required key {key:?} is missing")
    } else {
        body.to_owned()
    };
    format!("{words}{position}")
}

fn duplicate_key(key: &str) -> String {
    format!("duplicate key {key:?}: a key may appear only once in an object")
}

/// What serde expected, as a JSON kind.
fn expected_in_words(expected: &str) -> String {
    if expected.starts_with("struct ") || expected == "a snapshot object" || expected == "a map" {
        return "an object".to_owned();
    }
    match expected {
        "a sequence" => "an array".to_owned(),
        "a borrowed string" => "a string".to_owned(),
        "a boolean" => "true or false".to_owned(),
        other => other.to_owned(),
    }
}

/// What serde found (its `Unexpected`), as a JSON value.
fn found_in_words(found: &str) -> String {
    let quoted = |prefix: &str| {
        found
            .strip_prefix(prefix)
            .and_then(|v| v.strip_prefix('`'))
            .and_then(|v| v.strip_suffix('`'))
            .map(str::to_owned)
    };
    if let Some(n) = quoted("integer ").or_else(|| quoted("floating point ")) {
        return format!("the number {n}");
    }
    if let Some(b) = quoted("boolean ") {
        return b;
    }
    if let Some(s) = found.strip_prefix("string ") {
        return format!("the string {s}");
    }
    match found {
        "map" => "an object".to_owned(),
        "sequence" => "an array".to_owned(),
        "unit value" | "null" => "null".to_owned(),
        "a boolean" => "true or false".to_owned(),
        other => other.to_owned(),
    }
}

/// The first key that appears twice at the top level of a JSON object.
fn repeated_top_level_key(bytes: &[u8]) -> Option<String> {
    struct Keys;
    impl<'de> serde::de::Visitor<'de> for Keys {
        type Value = Option<String>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("an object")
        }
        fn visit_map<M: serde::de::MapAccess<'de>>(
            self,
            mut map: M,
        ) -> Result<Option<String>, M::Error> {
            // Read to the end: serde_json rejects a map left half read.
            let mut seen = std::collections::HashSet::new();
            let mut repeated = None;
            while let Some(key) = map.next_key::<String>()? {
                map.next_value::<IgnoredAny>()?;
                if !seen.insert(key.clone()) {
                    repeated.get_or_insert(key);
                }
            }
            Ok(repeated)
        }
    }
    use serde::Deserializer as _;
    serde_json::Deserializer::from_slice(bytes)
        .deserialize_map(Keys)
        .ok()
        .flatten()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_a_repeated_top_level_key() {
        assert_eq!(
            repeated_top_level_key(br#"{"format_version":1,"x":1,"x":2}"#).as_deref(),
            Some("x")
        );
        assert_eq!(
            repeated_top_level_key(br#"{"a":1,"x":1,"x":2,"b":{"c":[]},"b":3}"#).as_deref(),
            Some("x")
        );
        assert_eq!(repeated_top_level_key(br#"{"a":1,"b":2}"#), None);
    }

    #[test]
    fn no_rust_type_names_reach_the_operator() {
        let cases: &[(&[u8], &str)] = &[
            (
                b"[]",
                "f: a snapshot is a JSON object {\"format_version\": 1, \"workspace\": {\"id\": ...}, ...}, not an array",
            ),
            (
                b"\xEF\xBB\xBF{}",
                "f: the file starts with a UTF-8 byte order mark (EF BB BF); save it without a BOM",
            ),
            (
                br#"{"format_version":1,"workspace":"w"}"#,
                "f: workspace: expected an object, found the string \"w\" (line 1, column 35)",
            ),
            (
                br#"{"format_version":1,"workspace":["w"]}"#,
                "f: workspace: expected an object, found an array (line 1, column 37)",
            ),
            (
                br#"{"format_version":1,"workspace":{"id":"w"},"tasks":[[5]]}"#,
                "f: tasks[0]: expected an object, found an array",
            ),
            (
                br#"{"format_version":1,"workspace":{"id":"w"},"tasks":{}}"#,
                "f: tasks: expected an array, found an object (line 1, column 51)",
            ),
            (
                br#"{"format_version":1,"format_version":1}"#,
                "f: top level: duplicate key \"format_version\": a key may appear only once in an object (line 1, column 36)",
            ),
        ];
        for (bytes, want) in cases {
            assert_eq!(diagnose("f", bytes).to_string(), *want);
        }
    }

    #[test]
    fn a_comma_before_a_closing_bracket_is_called_a_trailing_comma() {
        let cases: &[(&[u8], &str)] = &[
            (
                b"{\"format_version\": 1,\n \"api_keys\": [\n  {\"sha256\": \"x\"},\n  ]\n}",
                "f: invalid JSON: trailing comma before the `]` at line 4 column 3 \
                 (JSON allows no comma after the last element: remove it)",
            ),
            (
                br#"{"format_version": 1, "workspace": {"id": "w",}}"#,
                "f: invalid JSON: trailing comma before the `}` at line 1 column 47 \
                 (JSON allows no comma after the last member: remove it)",
            ),
            (
                b"{\"a\": [1,\t\r\n]}",
                "f: invalid JSON: trailing comma before the `]` at line 2 column 1 \
                 (JSON allows no comma after the last element: remove it)",
            ),
            // Other syntax errors keep serde_json's words.
            (
                br#"{"a": [1, , 2]}"#,
                "f: invalid JSON: expected value at line 1 column 11",
            ),
            (
                br#"{"a": 1 "b": 2}"#,
                "f: invalid JSON: expected `,` or `}` at line 1 column 9",
            ),
        ];
        for (bytes, want) in cases {
            assert_eq!(diagnose("f", bytes).to_string(), *want);
        }
    }
}
