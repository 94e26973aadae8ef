//! Parsing and validation in one streaming pass: bytes in, each record
//! checked and handed to a [`RecordSink`] as soon as it is parsed, a
//! [`Header`] out, or one [`SnapshotError`] that names file, collection,
//! record id and field.
//!
//! A record's parsed form lives only while the sink renders it, so the
//! memory of a load is the file's bytes plus what the sink keeps, never a
//! second copy of the whole document as structs. Only when the pass fails on
//! a JSON error does [`diagnose`] spend more passes to tell a syntax error
//! from a truncated file from a wrong type, and to find the id of the record
//! at fault; a rejected file may be slow to explain, a good one is never
//! slowed down by the explaining.

use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;

use super::error::{Location, SnapshotError};
use super::format::{
    ApiKeyDoc, CompanyAttrs, FeedAttrs, Field, MeetingAttrs, MeetingNoteAttrs, MetricRecord,
    NoteAttrs, Record, RoleAttrs, SnapshotDoc, TaskAttrs, Text, WorkspaceDoc,
};
use crate::store::id::{format_id, parse_id};
use crate::store::key::from_hex;
use crate::store::time::Instant;

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

/// Receives every record of a snapshot, checked, in file order. A record's
/// index in its collection is the number of records of that collection the
/// sink received before it.
pub trait RecordSink {
    fn company(&mut self, key: &Key, attrs: &CompanyAttrs<'_>, id: &Text<'_>);
    fn task(&mut self, key: &Key, attrs: &TaskAttrs<'_>, id: &Text<'_>);
    fn role(&mut self, key: &Key, attrs: &RoleAttrs<'_>, id: &Text<'_>);
    fn feed(&mut self, key: &Key, attrs: &FeedAttrs<'_>, id: &Text<'_>);
    fn note(&mut self, key: &Key, attrs: &NoteAttrs<'_>, id: &Text<'_>);
    fn metric(&mut self, key: &Key, attrs: &super::format::MetricAttrs<'_>, id: &Text<'_>);
    fn meeting(&mut self, key: &Key, attrs: &MeetingAttrs<'_>, id: &Text<'_>);
    fn meeting_note(&mut self, key: &Key, attrs: &MeetingNoteAttrs<'_>, id: &Text<'_>);
}

/// Everything of a snapshot that is not a record.
pub struct Header {
    pub workspace_id: String,
    pub workspace_name: Option<String>,
    /// The exporter's version text, if it gave one.
    pub version: Option<String>,
    pub key_hashes: Vec<[u8; 32]>,
}

/// Parses and validates one snapshot, handing each record to `sink`.
/// `file` only names the file in errors. On an error the sink has seen part
/// of the records and must be thrown away.
pub fn parse(
    file: &str,
    bytes: &[u8],
    sink: &mut impl RecordSink,
) -> Result<Header, SnapshotError> {
    let mut ctx = Ctx {
        file,
        sink,
        error: None,
    };
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let result = (&mut de)
        .deserialize_map(DocVisitor { ctx: &mut ctx })
        .and_then(|top| de.end().map(|()| top));
    match (result, ctx.error) {
        (Ok(top), _) => {
            check_format_version(file, top.format_version.as_deref())?;
            let workspace = check_workspace(file, top.workspace.as_ref())?;
            let version = check_version(file, top.version.as_deref())?;
            let key_hashes = check_api_keys(file, top.api_keys.as_deref().unwrap_or_default())?;
            Ok(Header {
                workspace_id: workspace.0,
                workspace_name: workspace.1,
                version,
                key_hashes,
            })
        }
        // A record failed a check. An unknown format version explains that
        // better, whatever the order of the keys in the file.
        (Err(_), Some(error)) => Err(format_version_problem(file, bytes).unwrap_or(error)),
        (Err(_), None) => Err(diagnose(file, bytes)),
    }
}

/// The non-record parts of the document, kept as they were parsed.
#[derive(Default)]
struct Top {
    format_version: Option<String>,
    version: Option<String>,
    workspace: Option<(Option<String>, Option<String>)>,
    api_keys: Option<Vec<Option<String>>>,
}

struct Ctx<'f, 's, S> {
    file: &'f str,
    sink: &'s mut S,
    /// The check that stopped the parse, if one did.
    error: Option<SnapshotError>,
}

struct DocVisitor<'c, 'f, 's, S> {
    ctx: &'c mut Ctx<'f, 's, S>,
}

impl<'de, S: RecordSink> Visitor<'de> for DocVisitor<'_, '_, '_, S> {
    type Value = Top;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a snapshot object")
    }

    fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<Top, M::Error> {
        let ctx = self.ctx;
        let mut top = Top::default();
        let mut seen: Vec<Text<'de>> = Vec::new();
        while let Some(key) = map.next_key::<Text<'de>>()? {
            if seen.contains(&key) {
                return Err(de::Error::custom(format_args!(
                    "duplicate field `{}`",
                    key.as_str()
                )));
            }
            match key.as_str() {
                "format_version" => {
                    top.format_version = Some(map.next_value::<&RawValue>()?.get().to_owned());
                }
                "version" => {
                    top.version = map
                        .next_value::<Option<Text<'de>>>()?
                        .map(|t| t.as_str().to_owned());
                }
                "workspace" => {
                    top.workspace = map.next_value::<Option<WorkspaceDoc<'de>>>()?.map(|w| {
                        (
                            w.id.map(|t| t.as_str().to_owned()),
                            w.name.map(|t| t.as_str().to_owned()),
                        )
                    });
                }
                "api_keys" => {
                    top.api_keys = map
                        .next_value::<Option<Vec<ApiKeyDoc<'de>>>>()?
                        .map(|keys| {
                            keys.into_iter()
                                .map(|k| k.sha256.map(|t| t.as_str().to_owned()))
                                .collect()
                        });
                }
                "companies" => map.next_value_seed(Collection::new(ctx, check_company))?,
                "tasks" => map.next_value_seed(Collection::new(ctx, check_task))?,
                "roles" => map.next_value_seed(Collection::new(ctx, check_role))?,
                "feed" => map.next_value_seed(Collection::new(ctx, check_feed))?,
                "notes" => map.next_value_seed(Collection::new(ctx, check_note))?,
                "metrics" => map.next_value_seed(Collection::new(ctx, check_metric))?,
                "meetings" => map.next_value_seed(Collection::new(ctx, check_meeting))?,
                "meeting_notes" => map.next_value_seed(Collection::new(ctx, check_meeting_note))?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
            seen.push(key);
        }
        Ok(top)
    }
}

/// Checks a parsed record, returning its key (with `id` left 0), and hands it
/// to the sink once the id is known good.
type Check<S, P> = fn(&RecordCheck<'_>, &P, &mut S, &Key) -> Result<Key, SnapshotError>;

struct Collection<'c, 'f, 's, S, P> {
    ctx: &'c mut Ctx<'f, 's, S>,
    name: &'static str,
    check: Check<S, P>,
    _parsed: PhantomData<P>,
}

/// What a check function needs to know about its record type.
trait Checked<'de>: Deserialize<'de> {
    const NAME: &'static str;
    fn id_text(&self) -> Option<&Text<'de>>;
}

impl<'c, 'f, 's, 'de, S: RecordSink, P: Checked<'de>> Collection<'c, 'f, 's, S, P> {
    fn new(ctx: &'c mut Ctx<'f, 's, S>, check: Check<S, P>) -> Self {
        Collection {
            ctx,
            name: P::NAME,
            check,
            _parsed: PhantomData,
        }
    }
}

impl<'de, S: RecordSink, P: Checked<'de>> DeserializeSeed<'de> for Collection<'_, '_, '_, S, P> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_option(self)
    }
}

impl<'de, S: RecordSink, P: Checked<'de>> Visitor<'de> for Collection<'_, '_, '_, S, P> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "an array of {} records", self.name)
    }

    /// An absent or `null` collection is empty.
    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_seq(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let ctx = self.ctx;
        let mut index = 0;
        while let Some(parsed) = seq.next_element::<P>()? {
            let id_text = parsed.id_text().map(Text::as_str);
            let c = RecordCheck {
                file: ctx.file,
                collection: self.name,
                index,
                id: id_text,
            };
            let outcome = check_id(&c, id_text).and_then(|id| {
                (self.check)(
                    &c,
                    &parsed,
                    ctx.sink,
                    &Key {
                        id,
                        ..Key::default()
                    },
                )
            });
            if let Err(error) = outcome {
                ctx.error = Some(error);
                return Err(de::Error::custom("record rejected"));
            }
            index += 1;
        }
        Ok(())
    }
}

macro_rules! checked {
    ($parsed:ty, $name:literal) => {
        impl<'de> Checked<'de> for $parsed {
            const NAME: &'static str = $name;
            fn id_text(&self) -> Option<&Text<'de>> {
                self.id.as_ref()
            }
        }
    };
}

checked!(Record<'de, CompanyAttrs<'de>>, "companies");
checked!(Record<'de, TaskAttrs<'de>>, "tasks");
checked!(Record<'de, RoleAttrs<'de>>, "roles");
checked!(Record<'de, FeedAttrs<'de>>, "feed");
checked!(Record<'de, NoteAttrs<'de>>, "notes");
checked!(MetricRecord<'de>, "metrics");
checked!(Record<'de, MeetingAttrs<'de>>, "meetings");
checked!(Record<'de, MeetingNoteAttrs<'de>>, "meeting_notes");

/// The attributes of a record; absent ones are all `null`.
fn attrs_or_default<A: Default + Clone>(attributes: &Option<A>) -> std::borrow::Cow<'_, A> {
    match attributes {
        Some(a) => std::borrow::Cow::Borrowed(a),
        None => std::borrow::Cow::Owned(A::default()),
    }
}

fn id_of<'p, 'de>(id: &'p Option<Text<'de>>) -> &'p Text<'de> {
    const NONE: &Text<'static> = &Text(std::borrow::Cow::Borrowed(""));
    id.as_ref().unwrap_or(NONE)
}

fn check_company<S: RecordSink>(
    _: &RecordCheck<'_>,
    r: &Record<'_, CompanyAttrs<'_>>,
    sink: &mut S,
    key: &Key,
) -> Result<Key, SnapshotError> {
    sink.company(key, &attrs_or_default(&r.attributes), id_of(&r.id));
    Ok(*key)
}

/// Tasks, roles, feed entries and notes share one shape: a required
/// `company_id` and a required ordering timestamp.
macro_rules! check_keyed {
    ($name:ident, $attrs:ident, $at:ident, $sink:ident) => {
        fn $name<S: RecordSink>(
            c: &RecordCheck<'_>,
            r: &Record<'_, $attrs<'_>>,
            sink: &mut S,
            key: &Key,
        ) -> Result<Key, SnapshotError> {
            let a = attrs_or_default(&r.attributes);
            let key = keyed(
                c,
                key,
                a.company_id.as_ref(),
                a.$at.as_ref(),
                stringify!($at),
            )?;
            sink.$sink(&key, &a, id_of(&r.id));
            Ok(key)
        }
    };
}

check_keyed!(check_task, TaskAttrs, created_at, task);
check_keyed!(check_role, RoleAttrs, opened_at, role);
check_keyed!(check_feed, FeedAttrs, published_at, feed);
check_keyed!(check_note, NoteAttrs, created_at, note);

fn check_metric<S: RecordSink>(
    c: &RecordCheck<'_>,
    r: &MetricRecord<'_>,
    sink: &mut S,
    key: &Key,
) -> Result<Key, SnapshotError> {
    let Some(company) = &r.company_id else {
        return Err(c.fail(
            "company_id",
            "required field is missing or null (it sits beside attributes)",
        ));
    };
    let a = attrs_or_default(&r.attributes);
    let Some(reported) = &a.reported_at else {
        return Err(c.fail(
            "attributes.reported_at",
            "required timestamp is missing or null",
        ));
    };
    let at = parse_timestamp(c, reported.as_str(), "reported_at")?;
    let key = Key {
        id: key.id,
        at,
        parent: parse_id(company.as_str()),
    };
    sink.metric(&key, &a, id_of(&r.id));
    Ok(key)
}

fn check_meeting<S: RecordSink>(
    c: &RecordCheck<'_>,
    r: &Record<'_, MeetingAttrs<'_>>,
    sink: &mut S,
    key: &Key,
) -> Result<Key, SnapshotError> {
    let a = attrs_or_default(&r.attributes);
    let company = c.required_text(&a.company_id, "company_id")?;
    c.required_text(&a.title, "title")?;
    let at = c.timestamp(&a.start_time, "start_time")?;
    c.nullable(&a.end_time, "end_time")?;
    c.required_text(&a.created_at, "created_at")?;
    c.required_text(&a.updated_at, "updated_at")?;
    let attendees = c.required(&a.attendees, "attendees", "an array of attendees")?;
    for (i, attendee) in attendees.iter().enumerate() {
        let field = format!("attendees[{i}].email");
        let email = c.required_text(&attendee.email, &field)?;
        if !looks_like_email(email) {
            return Err(c.fail(
                &attr(&field),
                format!("{} is not an email address", quote(email)),
            ));
        }
        c.required(
            &attendee.organizer,
            &format!("attendees[{i}].organizer"),
            "a boolean",
        )?;
    }
    let key = Key {
        id: key.id,
        at,
        parent: parse_id(company),
    };
    sink.meeting(&key, &a, id_of(&r.id));
    Ok(key)
}

fn check_meeting_note<S: RecordSink>(
    c: &RecordCheck<'_>,
    r: &Record<'_, MeetingNoteAttrs<'_>>,
    sink: &mut S,
    key: &Key,
) -> Result<Key, SnapshotError> {
    let a = attrs_or_default(&r.attributes);
    let meeting = c.required_text(&a.meeting_id, "meeting_id")?;
    let kind = c.required_text(&a.kind, "type")?;
    if kind != "notetool" {
        return Err(c.fail(
            &attr("type"),
            format!("{} is not an allowed type (only \"notetool\")", quote(kind)),
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
    let at = c.timestamp(&a.created_at, "created_at")?;
    c.required_text(&a.updated_at, "updated_at")?;
    let key = Key {
        id: key.id,
        at,
        parent: parse_id(meeting),
    };
    sink.meeting_note(&key, &a, id_of(&r.id));
    Ok(key)
}

/// The key of a record with a required `company_id` and a required
/// ordering timestamp `at_field`.
fn keyed(
    c: &RecordCheck<'_>,
    key: &Key,
    company: Option<&Text<'_>>,
    at: Option<&Text<'_>>,
    at_field: &str,
) -> Result<Key, SnapshotError> {
    let Some(company) = company else {
        return Err(c.fail(&attr("company_id"), "required attribute is missing or null"));
    };
    let at = match at {
        None => return Err(c.fail(&attr(at_field), "required timestamp is missing or null")),
        Some(text) => parse_timestamp(c, text.as_str(), at_field)?,
    };
    Ok(Key {
        id: key.id,
        at,
        parent: parse_id(company.as_str()),
    })
}

fn parse_timestamp(c: &RecordCheck<'_>, text: &str, field: &str) -> Result<Instant, SnapshotError> {
    Instant::parse_rfc3339(text).ok_or_else(|| {
        c.fail(
            &attr(field),
            format!(
                "{} is not an RFC 3339 timestamp (like 2026-03-01T10:00:00.123Z)",
                quote(text)
            ),
        )
    })
}

fn attr(field: &str) -> String {
    format!("attributes.{field}")
}

/// An email address as JSON Schema's `format: email` means it (RFC 5321's
/// mailbox, without quoted local parts): a dot-atom local part, `@`, and a
/// domain of letter-digit-hyphen labels (or an address literal in brackets).
fn looks_like_email(text: &str) -> bool {
    let Some((local, domain)) = text.rsplit_once('@') else {
        return false;
    };
    let atext =
        |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+/=?^_`{|}~-".contains(c) || !c.is_ascii();
    let dot_atom = |s: &str| {
        !s.is_empty()
            && s.split('.')
                .all(|part| !part.is_empty() && part.chars().all(atext))
    };
    let label = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && !l.starts_with('-')
            && !l.ends_with('-')
            && l.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || !c.is_ascii())
    };
    let domain_ok = if domain.starts_with('[') && domain.ends_with(']') {
        domain.len() > 2
    } else {
        domain.len() <= 253 && domain.split('.').all(label)
    };
    local.len() <= 64 && dot_atom(local) && domain_ok
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
                id: self.id.map(|id| shorten(id, 64)),
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

    fn timestamp(&self, field: &Field<Text<'_>>, name: &str) -> Result<Instant, SnapshotError> {
        let text = self.required(field, name, "a timestamp")?;
        parse_timestamp(self, text.as_str(), name)
    }
}

/// The record's id: present and a UUID. (Repeats are found by the store,
/// which indexes ids anyway.)
fn check_id(c: &RecordCheck<'_>, id_text: Option<&str>) -> Result<u128, SnapshotError> {
    let Some(text) = id_text else {
        return Err(c.fail("id", "record has no id"));
    };
    parse_id(text).ok_or_else(|| {
        c.fail(
            "id",
            format!(
                "{} is not a UUID (8-4-4-4-12 hex digits, version 1-8, variant 8, 9, a or b)",
                quote(text)
            ),
        )
    })
}

/// The error for a record whose id an earlier record of its collection has.
pub fn repeated_id(
    file: &str,
    collection: &str,
    index: usize,
    first: usize,
    id: u128,
) -> SnapshotError {
    SnapshotError::at(
        file,
        Location {
            collection: collection.to_owned(),
            index: Some(index),
            id: Some(format_id(id)),
            field: Some("id".to_owned()),
        },
        format!("id repeats within {collection}: {collection}[{first}] has it too"),
    )
}

fn top_error(
    file: &str,
    collection: &str,
    field: Option<&str>,
    message: impl Into<String>,
) -> SnapshotError {
    SnapshotError::at(
        file,
        Location {
            collection: collection.to_owned(),
            field: field.map(str::to_owned),
            ..Location::default()
        },
        message,
    )
}

fn check_format_version(file: &str, raw: Option<&str>) -> Result<(), SnapshotError> {
    match raw {
        None => Err(top_error(
            file,
            "format_version",
            None,
            "is missing (this server reads format_version 1)",
        )),
        Some(raw) if raw == FORMAT_VERSION.to_string() => Ok(()),
        Some(raw) => Err(top_error(
            file,
            "format_version",
            None,
            format!(
                "{} is not a known format version (this server reads {FORMAT_VERSION})",
                shorten(raw, 64)
            ),
        )),
    }
}

fn check_workspace(
    file: &str,
    workspace: Option<&(Option<String>, Option<String>)>,
) -> Result<(String, Option<String>), SnapshotError> {
    let Some((id, name)) = workspace else {
        return Err(top_error(
            file,
            "workspace",
            None,
            "is missing (it must name the workspace: {\"id\": ...})",
        ));
    };
    let Some(id) = id else {
        return Err(top_error(
            file,
            "workspace",
            Some("id"),
            "is missing or null",
        ));
    };
    if id.trim().is_empty() || id.len() > 200 {
        return Err(top_error(
            file,
            "workspace",
            Some("id"),
            "must be 1 to 200 characters, not blank",
        ));
    }
    if id.chars().any(char::is_control) {
        return Err(top_error(
            file,
            "workspace",
            Some("id"),
            "must not contain control characters",
        ));
    }
    Ok((id.clone(), name.clone()))
}

fn check_version(file: &str, version: Option<&str>) -> Result<Option<String>, SnapshotError> {
    let Some(text) = version else {
        return Ok(None);
    };
    let printable = text.bytes().all(|b| (0x20..0x7f).contains(&b));
    if text.is_empty() || text.len() > 256 || !printable || text.trim() != text {
        return Err(top_error(
            file,
            "version",
            None,
            "must be 1 to 256 printable ASCII characters without surrounding spaces \
             (it is sent in the X-Snapshot-Version header); omit it to have one derived from the content",
        ));
    }
    Ok(Some(text.to_owned()))
}

fn check_api_keys(file: &str, keys: &[Option<String>]) -> Result<Vec<[u8; 32]>, SnapshotError> {
    let mut hashes = Vec::new();
    for (i, key) in keys.iter().enumerate() {
        let fail = |message: &str| {
            SnapshotError::at(
                file,
                Location {
                    collection: "api_keys".into(),
                    index: Some(i),
                    id: None,
                    field: Some("sha256".into()),
                },
                message,
            )
        };
        let Some(text) = key else {
            return Err(fail("is missing or null"));
        };
        let hash = from_hex(text).ok_or_else(|| {
            fail("must be 64 hex digits: the SHA-256 of the whole key (see `portfolio-replica hash-key`)")
        })?;
        if !hashes.contains(&hash) {
            hashes.push(hash);
        }
    }
    Ok(hashes)
}

/// The format version problem of a document, if it has one. Runs only on
/// the error path: a scan of the whole file that skips everything else.
fn format_version_problem(file: &str, bytes: &[u8]) -> Option<SnapshotError> {
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

/// A value quoted for an error message, cut to a readable length: messages
/// go to logs and `/snapshots`, and a snapshot's values can be megabytes.
fn quote(text: &str) -> String {
    format!("{:?}", shorten(text, 64))
}

/// `text` cut to about `max` bytes (on a character boundary), saying how
/// long it really was.
fn shorten(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes)", &text[..end], text.len())
}

/// Explains why the parse failed on a JSON error. Runs only on the error path.
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

#[cfg(test)]
mod tests {
    use super::looks_like_email;

    #[test]
    fn emails_follow_the_json_schema_format() {
        for ok in [
            "ann@example.com",
            "a.b+tag@sub.example.co",
            "x@localhost",
            "o'brien@example.ie",
            "ann@[192.0.2.1]",
        ] {
            assert!(looks_like_email(ok), "{ok}");
        }
        for bad in [
            "",
            "ann",
            "@example.com",
            "ann@",
            "x,y@example.com",
            "ann..x@example.com",
            ".ann@example.com",
            "ann.@example.com",
            "ann@exa_mple.com",
            "ann@-example.com",
            "ann@example..com",
            "ann smith@example.com",
            "ann@exam ple.com",
        ] {
            assert!(!looks_like_email(bad), "{bad}");
        }
    }
}
