//! Parsing and validation: bytes in, a checked document out, or one
//! [`SnapshotError`] that names file, collection, record id and field.
//!
//! The fast path is a single typed `serde_json` pass over the borrowed input.
//! Only when it fails does [`diagnose`] spend more passes to tell a syntax
//! error from a truncated file from a wrong type, and to find the id of the
//! record at fault; a rejected file may be slow to explain, a good one is never
//! slowed down by the explaining.

use std::collections::BTreeMap;
use std::collections::hash_map::Entry;

use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::value::RawValue;

use super::error::{Location, SnapshotError};
use super::format::{Field, Record, SnapshotDoc, Text};
use super::id::{IdMap, parse_id};
use super::time::Instant;

/// The only `format_version` this build reads.
pub const FORMAT_VERSION: u64 = 1;

/// What the store needs to know about one record besides its attributes:
/// its id, the instant that orders its list, and the record it points at
/// (a company, or a meeting for a meeting note).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Key {
    pub id: u128,
    pub at: Instant,
    pub parent: Option<u128>,
}

/// A snapshot that passed every check of CONTRACT.md §2.
///
/// `doc` keeps the parsed records (with absent `attributes` filled in as all
/// `null`); each key vector runs parallel to its collection in `doc`.
pub struct Validated<'a> {
    pub doc: SnapshotDoc<'a>,
    pub workspace_id: String,
    pub workspace_name: Option<String>,
    /// The exporter's version text, if it gave one.
    pub version: Option<String>,
    pub key_hashes: Vec<[u8; 32]>,
    pub companies: Vec<Key>,
    pub tasks: Vec<Key>,
    pub roles: Vec<Key>,
    pub feed: Vec<Key>,
    pub notes: Vec<Key>,
    pub metrics: Vec<Key>,
    pub meetings: Vec<Key>,
    pub meeting_notes: Vec<Key>,
    /// Problems that do not stop the load (dangling references).
    pub warnings: Vec<String>,
}

/// Parses and validates one snapshot. `file` only names the file in errors.
pub fn validate<'a>(file: &str, bytes: &'a [u8]) -> Result<Validated<'a>, SnapshotError> {
    let mut doc: SnapshotDoc<'a> = match serde_json::from_slice(bytes) {
        Ok(doc) => doc,
        Err(_) => return Err(diagnose(file, bytes)),
    };
    check_format_version(file, doc.format_version)?;
    let mut v = Validator {
        file,
        warnings: Vec::new(),
    };
    let (workspace_id, workspace_name) = v.workspace(&doc)?;
    let version = v.version(&doc)?;
    let key_hashes = v.api_keys(&doc)?;

    let companies = v.records("companies", &mut doc.companies, |_, _| Ok(Key::default()))?;
    let company_ids: IdMap<()> = companies.iter().map(|k| (k.id, ())).collect();

    let tasks = v.records("tasks", &mut doc.tasks, |c, a| {
        keyed(
            c,
            a.company_id.as_ref(),
            "company_id",
            a.created_at.as_ref(),
            "created_at",
        )
    })?;
    let roles = v.records("roles", &mut doc.roles, |c, a| {
        keyed(
            c,
            a.company_id.as_ref(),
            "company_id",
            a.opened_at.as_ref(),
            "opened_at",
        )
    })?;
    let feed = v.records("feed", &mut doc.feed, |c, a| {
        keyed(
            c,
            a.company_id.as_ref(),
            "company_id",
            a.published_at.as_ref(),
            "published_at",
        )
    })?;
    let notes = v.records("notes", &mut doc.notes, |c, a| {
        keyed(
            c,
            a.company_id.as_ref(),
            "company_id",
            a.created_at.as_ref(),
            "created_at",
        )
    })?;
    let metrics = v.metrics(&doc)?;
    let meetings = v.records("meetings", &mut doc.meetings, |c, a| {
        let company = c.required_text(&a.company_id, "company_id")?;
        c.required_text(&a.title, "title")?;
        let at = c.timestamp(
            a.start_time.value().map(Text::as_str),
            &a.start_time,
            "start_time",
        )?;
        c.nullable(&a.end_time, "end_time")?;
        c.required_text(&a.created_at, "created_at")?;
        c.required_text(&a.updated_at, "updated_at")?;
        let attendees = c.required(&a.attendees, "attendees", "an array of attendees")?;
        for (i, attendee) in attendees.iter().enumerate() {
            let field = format!("attendees[{i}].email");
            let email = c.required_text(&attendee.email, &field)?;
            if !looks_like_email(email) {
                return Err(c.fail(&field, format!("{email:?} is not an email address")));
            }
            c.required(
                &attendee.organizer,
                &format!("attendees[{i}].organizer"),
                "a boolean",
            )?;
        }
        Ok(Key {
            id: 0,
            at,
            parent: parse_id(company),
        })
    })?;
    let meeting_notes = v.records("meeting_notes", &mut doc.meeting_notes, |c, a| {
        let meeting = c.required_text(&a.meeting_id, "meeting_id")?;
        let kind = c.required_text(&a.kind, "type")?;
        if kind != "notetool" {
            return Err(c.fail(
                "type",
                format!("{kind:?} is not an allowed type (only \"notetool\")"),
            ));
        }
        c.nullable(&a.notes, "notes")?;
        c.nullable(&a.transcript, "transcript")?;
        if let Field::Value(transcript) = &a.transcript {
            let segments = c.required(
                &transcript.segments,
                "transcript.segments",
                "an array of segments",
            )?;
            for (i, segment) in segments.iter().enumerate() {
                c.required_text(&segment.text, &format!("transcript.segments[{i}].text"))?;
            }
        }
        c.nullable(&a.synced_at, "synced_at")?;
        let at = c.timestamp(
            a.created_at.value().map(Text::as_str),
            &a.created_at,
            "created_at",
        )?;
        c.required_text(&a.updated_at, "updated_at")?;
        Ok(Key {
            id: 0,
            at,
            parent: parse_id(meeting),
        })
    })?;

    let meeting_ids: IdMap<()> = meetings.iter().map(|k| (k.id, ())).collect();
    for (name, keys) in [
        ("tasks", &tasks),
        ("roles", &roles),
        ("feed", &feed),
        ("notes", &notes),
    ] {
        v.warn_dangling(name, "company", keys, &company_ids);
    }
    v.warn_dangling("metrics", "company", &metrics, &company_ids);
    v.warn_dangling("meetings", "company", &meetings, &company_ids);
    v.warn_dangling("meeting_notes", "meeting", &meeting_notes, &meeting_ids);
    if key_hashes.is_empty() {
        v.warnings
            .push("api_keys is empty: no key can read this workspace".to_owned());
    }

    Ok(Validated {
        doc,
        workspace_id,
        workspace_name,
        version,
        key_hashes,
        companies,
        tasks,
        roles,
        feed,
        notes,
        metrics,
        meetings,
        meeting_notes,
        warnings: v.warnings,
    })
}

fn check_format_version(file: &str, raw: Option<&RawValue>) -> Result<(), SnapshotError> {
    let loc = || Location {
        collection: "format_version".into(),
        ..Location::default()
    };
    match raw {
        None => Err(SnapshotError::at(
            file,
            loc(),
            "is missing (this server reads format_version 1)",
        )),
        Some(raw) if raw.get() == FORMAT_VERSION.to_string() => Ok(()),
        Some(raw) => Err(SnapshotError::at(
            file,
            loc(),
            format!(
                "{} is not a known format version (this server reads {FORMAT_VERSION})",
                raw.get()
            ),
        )),
    }
}

/// The common shape of tasks, roles, feed entries and notes: a required
/// `company_id` and a required ordering timestamp.
fn keyed(
    c: &RecordCheck<'_>,
    company: Option<&Text<'_>>,
    company_field: &str,
    at: Option<&Text<'_>>,
    at_field: &str,
) -> Result<Key, SnapshotError> {
    let Some(company) = company else {
        return Err(c.fail(
            &attr(company_field),
            "required attribute is missing or null",
        ));
    };
    let at = match at {
        None => return Err(c.fail(&attr(at_field), "required timestamp is missing or null")),
        Some(text) => parse_timestamp(c, text.as_str(), at_field)?,
    };
    Ok(Key {
        id: 0,
        at,
        parent: parse_id(company.as_str()),
    })
}

fn parse_timestamp(c: &RecordCheck<'_>, text: &str, field: &str) -> Result<Instant, SnapshotError> {
    Instant::parse_rfc3339(text).ok_or_else(|| {
        c.fail(
            &attr(field),
            format!("{text:?} is not an RFC 3339 timestamp (like 2026-03-01T10:00:00.123Z)"),
        )
    })
}

fn attr(field: &str) -> String {
    format!("attributes.{field}")
}

/// The loosest check that still catches a name or a blank where an address
/// belongs: something, one `@`, something with no spaces.
fn looks_like_email(text: &str) -> bool {
    match text.split_once('@') {
        Some((local, domain)) => {
            !local.is_empty()
                && !domain.is_empty()
                && !domain.contains('@')
                && !text.contains(char::is_whitespace)
        }
        None => false,
    }
}

struct Validator<'f> {
    file: &'f str,
    warnings: Vec<String>,
}

/// Checks inside one record; knows where it is, so every failure names the
/// collection, the position, the id and the field.
struct RecordCheck<'f> {
    file: &'f str,
    collection: &'static str,
    index: usize,
    id: Option<&'f str>,
}

impl RecordCheck<'_> {
    fn fail(&self, field: &str, message: impl Into<String>) -> SnapshotError {
        SnapshotError::at(
            self.file,
            Location {
                collection: self.collection.to_owned(),
                index: Some(self.index),
                id: self.id.map(str::to_owned),
                field: Some(field.to_owned()),
            },
            message,
        )
    }

    fn required<'v, T>(
        &self,
        field: &'v Field<T>,
        name: &str,
        kind: &str,
    ) -> Result<&'v T, SnapshotError> {
        match field {
            Field::Value(v) => Ok(v),
            Field::Missing => Err(self.fail(&attr(name), "required attribute is missing")),
            Field::Null => Err(self.fail(&attr(name), format!("must be {kind}, not null"))),
        }
    }

    fn required_text<'v>(
        &self,
        field: &'v Field<Text<'_>>,
        name: &str,
    ) -> Result<&'v str, SnapshotError> {
        self.required(field, name, "a string").map(Text::as_str)
    }

    fn nullable<T>(&self, field: &Field<T>, name: &str) -> Result<(), SnapshotError> {
        match field {
            Field::Missing => Err(self.fail(
                &attr(name),
                "required attribute is missing (it may be null)",
            )),
            _ => Ok(()),
        }
    }

    fn timestamp(
        &self,
        text: Option<&str>,
        field: &Field<Text<'_>>,
        name: &str,
    ) -> Result<Instant, SnapshotError> {
        match text {
            Some(text) => parse_timestamp(self, text, name),
            None => self
                .required(field, name, "a timestamp")
                .map(|_| Instant::default()),
        }
    }
}

impl Validator<'_> {
    fn top(
        &self,
        collection: &str,
        field: Option<&str>,
        message: impl Into<String>,
    ) -> SnapshotError {
        SnapshotError::at(
            self.file,
            Location {
                collection: collection.to_owned(),
                field: field.map(str::to_owned),
                ..Location::default()
            },
            message,
        )
    }

    fn workspace(&self, doc: &SnapshotDoc<'_>) -> Result<(String, Option<String>), SnapshotError> {
        let Some(ws) = &doc.workspace else {
            return Err(self.top(
                "workspace",
                None,
                "is missing (it must name the workspace: {\"id\": ...})",
            ));
        };
        let id = match &ws.id {
            Some(id) if !id.as_str().trim().is_empty() && id.as_str().len() <= 200 => id.as_str(),
            Some(_) => {
                return Err(self.top(
                    "workspace",
                    Some("id"),
                    "must be 1 to 200 characters, not blank",
                ));
            }
            None => return Err(self.top("workspace", Some("id"), "is missing or null")),
        };
        if id.chars().any(char::is_control) {
            return Err(self.top(
                "workspace",
                Some("id"),
                "must not contain control characters",
            ));
        }
        Ok((
            id.to_owned(),
            ws.name.as_ref().map(|n| n.as_str().to_owned()),
        ))
    }

    fn version(&self, doc: &SnapshotDoc<'_>) -> Result<Option<String>, SnapshotError> {
        let Some(version) = &doc.version else {
            return Ok(None);
        };
        let text = version.as_str();
        let printable = text.bytes().all(|b| (0x20..0x7f).contains(&b));
        if text.is_empty() || text.len() > 256 || !printable || text.trim() != text {
            return Err(self.top(
                "version",
                None,
                "must be 1 to 256 printable ASCII characters without surrounding spaces \
                 (it is sent in the X-Snapshot-Version header); omit it to have one derived from the content",
            ));
        }
        Ok(Some(text.to_owned()))
    }

    fn api_keys(&self, doc: &SnapshotDoc<'_>) -> Result<Vec<[u8; 32]>, SnapshotError> {
        let mut hashes = Vec::new();
        for (i, key) in doc.api_keys.iter().flatten().enumerate() {
            let fail = |message: &str| {
                SnapshotError::at(
                    self.file,
                    Location {
                        collection: "api_keys".into(),
                        index: Some(i),
                        id: None,
                        field: Some("sha256".into()),
                    },
                    message,
                )
            };
            let Some(text) = &key.sha256 else {
                return Err(fail("is missing or null"));
            };
            let hash = decode_sha256(text.as_str())
                .ok_or_else(|| fail("must be 64 hex digits: the SHA-256 of the whole key (see `portfolio-replica hash-key`)"))?;
            if !hashes.contains(&hash) {
                hashes.push(hash);
            }
        }
        Ok(hashes)
    }

    /// Checks ids (present, a UUID, unique), fills in absent attributes, and
    /// runs `check` on each record's attributes to get its key.
    fn records<'a, A: Default>(
        &mut self,
        collection: &'static str,
        records: &mut Option<Vec<Record<'a, A>>>,
        check: impl Fn(&RecordCheck<'_>, &A) -> Result<Key, SnapshotError>,
    ) -> Result<Vec<Key>, SnapshotError> {
        let records = records.get_or_insert_with(Vec::new);
        let mut keys = Vec::with_capacity(records.len());
        let mut seen: IdMap<usize> = IdMap::default();
        seen.reserve(records.len());
        for (index, record) in records.iter_mut().enumerate() {
            let id_text = record.id.as_ref().map(Text::as_str);
            let c = RecordCheck {
                file: self.file,
                collection,
                index,
                id: id_text,
            };
            let id = check_id(&c, id_text, &mut seen)?;
            let attrs = record.attributes.get_or_insert_with(A::default);
            let key = check(&c, attrs)?;
            keys.push(Key { id, ..key });
        }
        Ok(keys)
    }

    fn metrics(&mut self, doc: &SnapshotDoc<'_>) -> Result<Vec<Key>, SnapshotError> {
        let records = doc.metrics.as_deref().unwrap_or_default();
        let mut keys = Vec::with_capacity(records.len());
        let mut seen: IdMap<usize> = IdMap::default();
        seen.reserve(records.len());
        for (index, record) in records.iter().enumerate() {
            let id_text = record.id.as_ref().map(Text::as_str);
            let c = RecordCheck {
                file: self.file,
                collection: "metrics",
                index,
                id: id_text,
            };
            let id = check_id(&c, id_text, &mut seen)?;
            let Some(company) = &record.company_id else {
                return Err(c.fail(
                    "company_id",
                    "required field is missing or null (it sits beside attributes)",
                ));
            };
            let reported = record
                .attributes
                .as_ref()
                .and_then(|a| a.reported_at.as_ref());
            let Some(reported) = reported else {
                return Err(c.fail(
                    "attributes.reported_at",
                    "required timestamp is missing or null",
                ));
            };
            let at = parse_timestamp(&c, reported.as_str(), "reported_at")?;
            keys.push(Key {
                id,
                at,
                parent: parse_id(company.as_str()),
            });
        }
        Ok(keys)
    }

    /// Records pointing at a parent the snapshot does not hold are kept; one
    /// warning per collection says how many, with the first as an example.
    fn warn_dangling(&mut self, collection: &str, parent: &str, keys: &[Key], parents: &IdMap<()>) {
        let mut dangling = keys
            .iter()
            .filter(|k| !k.parent.is_some_and(|p| parents.contains_key(&p)));
        if let Some(first) = dangling.next() {
            let count = 1 + dangling.count();
            self.warnings.push(format!(
                "{collection}: {count} record(s) point at a {parent} this snapshot does not hold \
                 (first: {}); they are kept",
                format_id(first.id)
            ));
        }
    }
}

fn check_id(
    c: &RecordCheck<'_>,
    id_text: Option<&str>,
    seen: &mut IdMap<usize>,
) -> Result<u128, SnapshotError> {
    let Some(text) = id_text else {
        return Err(c.fail("id", "record has no id"));
    };
    let Some(id) = parse_id(text) else {
        return Err(c.fail(
            "id",
            format!(
                "{text:?} is not a UUID (8-4-4-4-12 hex digits, version 1-8, variant 8, 9, a or b)"
            ),
        ));
    };
    match seen.entry(id) {
        Entry::Occupied(first) => Err(c.fail(
            "id",
            format!(
                "id repeats within {}: {}[{}] has it too",
                c.collection,
                c.collection,
                first.get()
            ),
        )),
        Entry::Vacant(slot) => {
            slot.insert(c.index);
            Ok(id)
        }
    }
}

/// Formats an id in the canonical lower-case text form.
pub fn format_id(id: u128) -> String {
    let hex = format!("{id:032x}");
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

fn decode_sha256(text: &str) -> Option<[u8; 32]> {
    let bytes = text.as_bytes();
    if bytes.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, pair) in bytes.chunks_exact(2).enumerate() {
        let hi = (pair[0] as char).to_digit(16)?;
        let lo = (pair[1] as char).to_digit(16)?;
        out[i] = (hi * 16 + lo) as u8;
    }
    Some(out)
}

/// Explains why the typed parse failed. Runs only on the error path.
fn diagnose(file: &str, bytes: &[u8]) -> SnapshotError {
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
    #[derive(Deserialize)]
    struct Header<'a> {
        #[serde(borrow)]
        format_version: Option<&'a RawValue>,
    }
    match serde_json::from_slice::<Header<'_>>(bytes) {
        Ok(header) => {
            if let Err(err) = check_format_version(file, header.format_version) {
                return err;
            }
        }
        Err(err) => {
            return SnapshotError::new(file, format!("a snapshot must be a JSON object: {err}"));
        }
    }
    // 3. Rerun the typed parse, tracking the path to the failing value.
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let err = match serde_path_to_error::deserialize::<_, SnapshotDoc<'_>>(&mut de) {
        Ok(_) => return SnapshotError::new(file, "the snapshot could not be parsed"),
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
    let message = err.into_inner().to_string();
    let mut parts = segments.into_iter();
    let Some(Seg::Key(collection)) = parts.next() else {
        return SnapshotError::new(file, message);
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

/// Finds the id of `collection[index]` in a document known to be valid JSON.
fn record_id(bytes: &[u8], collection: &str, index: usize) -> Option<String> {
    let top: BTreeMap<String, &RawValue> = serde_json::from_slice(bytes).ok()?;
    let records: Vec<&RawValue> = serde_json::from_str(top.get(collection)?.get()).ok()?;
    #[derive(Deserialize)]
    struct IdOnly<'a> {
        #[serde(borrow)]
        id: Option<&'a RawValue>,
    }
    let record: IdOnly<'_> = serde_json::from_str(records.get(index)?.get()).ok()?;
    let raw = record.id?.get();
    Some(serde_json::from_str::<String>(raw).unwrap_or_else(|_| raw.to_owned()))
}
