//! Each collection's records: the wire type they are read as, the checks
//! they pass, and what they hand the store's builder.
//!
//! [`with_record_type`] is the one place where a [`Collection`] becomes the
//! type its records are read as; the streaming pass, the whole-buffer pass
//! and the diagnosis of a rejected file all read records through it. Its
//! match is exhaustive, so a collection added to the store's list does not
//! compile until it has a type there, nor that type until it is a
//! [`WireRecord`]: for a record in the API's `{"id", "attributes"}` shape,
//! until its attributes are [`Attributes`], which say what they are checked
//! for and what they hand the builder.
//!
//! A check knows where its record is ([`RecordCheck`]), so every failure
//! names the collection, the record's position and id, and the field
//! (docs/snapshot-format.md#validation). A record that passes is rendered
//! right away: its closure writes the JSON the API serves.

use std::borrow::Cow;

use serde::Deserialize;

use super::error::{Place, SnapshotError, quote, shorten};
use super::format::{
    ApiRecord, CompanyAttrs, FeedAttrs, Field, JsonText, MeetingAttrs, MeetingNoteAttrs,
    MetricRecord, NoteAttrs, RoleAttrs, TaskAttrs,
};
use super::render::{self, Render};
use crate::store::id::parse_id;
use crate::store::time::Instant;
use crate::store::{Builder, Collection, Key};

/// A collection's record as the file has it: read by serde, then checked
/// and handed to the builder.
pub trait WireRecord<'de>: Deserialize<'de> {
    /// The record's id as written.
    fn id_text(&self) -> Option<&str>;

    /// Checks the record, whose id is known good, in the documented order
    /// (docs/snapshot-format.md#order-of-reporting), and hands it to the
    /// builder.
    fn build(
        &self,
        c: &RecordCheck<'_>,
        id: u128,
        builder: &mut Builder,
    ) -> Result<(), SnapshotError>;
}

/// What a pass does with the records of one collection, whatever their
/// type: [`with_record_type`] calls it with the type.
pub trait WithRecordType<'de> {
    type Output;

    fn with<P: WireRecord<'de>>(self, collection: Collection) -> Self::Output;
}

/// Calls `w` with the type that `collection`'s records are read as.
pub fn with_record_type<'de, W: WithRecordType<'de>>(collection: Collection, w: W) -> W::Output {
    match collection {
        Collection::Companies => w.with::<ApiRecord<'de, CompanyAttrs<'de>>>(collection),
        Collection::Tasks => w.with::<ApiRecord<'de, TaskAttrs<'de>>>(collection),
        Collection::Roles => w.with::<ApiRecord<'de, RoleAttrs<'de>>>(collection),
        Collection::Feed => w.with::<ApiRecord<'de, FeedAttrs<'de>>>(collection),
        Collection::Notes => w.with::<ApiRecord<'de, NoteAttrs<'de>>>(collection),
        Collection::Metrics => w.with::<MetricRecord<'de>>(collection),
        Collection::Meetings => w.with::<ApiRecord<'de, MeetingAttrs<'de>>>(collection),
        Collection::MeetingNotes => w.with::<ApiRecord<'de, MeetingNoteAttrs<'de>>>(collection),
    }
}

/// Checks the parsed record at `index` of `collection` (its id, then the
/// rest) and hands it to the builder. `file` only names the file in errors.
pub fn build<'de>(
    file: &str,
    collection: Collection,
    index: usize,
    parsed: &impl WireRecord<'de>,
    builder: &mut Builder,
) -> Result<(), SnapshotError> {
    let id_text = parsed.id_text();
    let c = RecordCheck {
        file,
        collection: collection.name(),
        index,
        id: id_text,
    };
    let id = check_id(&c, id_text)?;
    parsed.build(&c, id, builder)
}

/// The attributes of a collection whose records are `{"id", "attributes"}`.
/// Absent or `null` attributes are checked as `{}`.
pub trait Attributes: Render + Default + Clone {
    /// Checks the attributes in the documented order; the record's key.
    fn key(&self, c: &RecordCheck<'_>, id: u128) -> Result<Key, SnapshotError>;

    /// Hands the checked record to the builder: its key, the attributes
    /// the store indexes, and `json`, which writes the record.
    fn hand(&self, key: Key, builder: &mut Builder, json: impl FnOnce(&mut Vec<u8>));
}

impl<'de, A: Attributes + Deserialize<'de>> WireRecord<'de> for ApiRecord<'de, A> {
    fn id_text(&self) -> Option<&str> {
        self.id.as_ref().map(JsonText::as_str)
    }

    fn build(
        &self,
        c: &RecordCheck<'_>,
        id: u128,
        builder: &mut Builder,
    ) -> Result<(), SnapshotError> {
        let a = attrs_or_default(&self.attributes);
        let key = a.key(c, id)?;
        a.hand(key, builder, |out| {
            render::record(out, id_of(&self.id), &*a)
        });
        Ok(())
    }
}

/// Companies are ordered by name, not by an instant, and belong to nothing.
impl Attributes for CompanyAttrs<'_> {
    fn key(&self, _: &RecordCheck<'_>, id: u128) -> Result<Key, SnapshotError> {
        Ok(Key {
            id,
            ..Key::default()
        })
    }

    fn hand(&self, key: Key, builder: &mut Builder, json: impl FnOnce(&mut Vec<u8>)) {
        builder.company(key, text(&self.name), text(&self.priority), json);
    }
}

// Each collection's checks and builder call, in the order of the
// collections. Tasks, roles, feed entries and notes share one shape: a
// required `company_id` and a required ordering timestamp.

impl Attributes for TaskAttrs<'_> {
    fn key(&self, c: &RecordCheck<'_>, id: u128) -> Result<Key, SnapshotError> {
        c.keyed(id, &self.company_id, &self.created_at, "created_at")
    }

    fn hand(&self, key: Key, builder: &mut Builder, json: impl FnOnce(&mut Vec<u8>)) {
        builder.task(key, text(&self.status), text(&self.priority), json);
    }
}

impl Attributes for RoleAttrs<'_> {
    fn key(&self, c: &RecordCheck<'_>, id: u128) -> Result<Key, SnapshotError> {
        c.keyed(id, &self.company_id, &self.opened_at, "opened_at")
    }

    fn hand(&self, key: Key, builder: &mut Builder, json: impl FnOnce(&mut Vec<u8>)) {
        builder.role(key, json);
    }
}

impl Attributes for FeedAttrs<'_> {
    fn key(&self, c: &RecordCheck<'_>, id: u128) -> Result<Key, SnapshotError> {
        c.keyed(id, &self.company_id, &self.published_at, "published_at")
    }

    fn hand(&self, key: Key, builder: &mut Builder, json: impl FnOnce(&mut Vec<u8>)) {
        builder.feed_entry(key, text(&self.kind), json);
    }
}

impl Attributes for NoteAttrs<'_> {
    fn key(&self, c: &RecordCheck<'_>, id: u128) -> Result<Key, SnapshotError> {
        c.keyed(id, &self.company_id, &self.created_at, "created_at")
    }

    fn hand(&self, key: Key, builder: &mut Builder, json: impl FnOnce(&mut Vec<u8>)) {
        builder.note(key, json);
    }
}

/// A metric value's `company_id` sits beside its attributes, so the record
/// is checked as a whole.
impl<'de> WireRecord<'de> for MetricRecord<'de> {
    fn id_text(&self) -> Option<&str> {
        self.id.as_ref().map(JsonText::as_str)
    }

    fn build(
        &self,
        c: &RecordCheck<'_>,
        id: u128,
        builder: &mut Builder,
    ) -> Result<(), SnapshotError> {
        let Some(company) = &self.company_id else {
            return Err(c.fail(
                "company_id",
                "required field is missing or null (it sits beside attributes)",
            ));
        };
        let a = attrs_or_default(&self.attributes);
        let key = Key {
            id,
            at: c.ordering(&a.reported_at, "reported_at")?,
            parent: parse_id(company.as_str()),
        };
        builder.metric(key, text(&a.name), |out| {
            render::record(out, id_of(&self.id), &*a)
        });
        Ok(())
    }
}

impl Attributes for MeetingAttrs<'_> {
    fn key(&self, c: &RecordCheck<'_>, id: u128) -> Result<Key, SnapshotError> {
        let company = c.required_text(&self.company_id, "company_id")?;
        c.required_text(&self.title, "title")?;
        let at = c.timestamp(&self.start_time, "start_time")?;
        c.nullable(&self.end_time, "end_time")?;
        c.required_text(&self.created_at, "created_at")?;
        c.required_text(&self.updated_at, "updated_at")?;
        let attendees = c.required(&self.attendees, "attendees", "an array of attendees")?;
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
        Ok(Key {
            id,
            at,
            parent: parse_id(company),
        })
    }

    fn hand(&self, key: Key, builder: &mut Builder, json: impl FnOnce(&mut Vec<u8>)) {
        builder.meeting(key, json);
    }
}

impl Attributes for MeetingNoteAttrs<'_> {
    fn key(&self, c: &RecordCheck<'_>, id: u128) -> Result<Key, SnapshotError> {
        let meeting = c.required_text(&self.meeting_id, "meeting_id")?;
        let kind = c.required_text(&self.kind, "type")?;
        if kind != "notetool" {
            return Err(c.fail(
                &attr("type"),
                format!("{} is not an allowed type (only \"notetool\")", quote(kind)),
            ));
        }
        c.nullable(&self.notes, "notes")?;
        c.nullable(&self.transcript, "transcript")?;
        if let Field::Value(transcript) = &self.transcript {
            let segments = c.required(
                &transcript.segments,
                "transcript.segments",
                "an array of segments",
            )?;
            for (i, segment) in segments.iter().enumerate() {
                c.required_text(&segment.text, &format!("transcript.segments[{i}].text"))?;
            }
        }
        c.nullable(&self.synced_at, "synced_at")?;
        let at = c.timestamp(&self.created_at, "created_at")?;
        c.required_text(&self.updated_at, "updated_at")?;
        Ok(Key {
            id,
            at,
            parent: parse_id(meeting),
        })
    }

    fn hand(&self, key: Key, builder: &mut Builder, json: impl FnOnce(&mut Vec<u8>)) {
        builder.meeting_note(key, json);
    }
}

/// The attributes of a record; absent ones are all `null`.
fn attrs_or_default<A: Default + Clone>(attributes: &Option<A>) -> Cow<'_, A> {
    match attributes {
        Some(a) => Cow::Borrowed(a),
        None => Cow::Owned(A::default()),
    }
}

fn id_of<'p, 'de>(id: &'p Option<JsonText<'de>>) -> &'p JsonText<'de> {
    const NONE: &JsonText<'static> = &JsonText(Cow::Borrowed(""));
    id.as_ref().unwrap_or(NONE)
}

/// The text of an optional attribute.
fn text<'t>(value: &'t Option<JsonText<'_>>) -> Option<&'t str> {
    value.as_ref().map(JsonText::as_str)
}

/// An ordering timestamp: RFC 3339 in the profile that every common client
/// parses (docs/snapshot-format.md#timestamps). It is served as written, so
/// a lower-case `t` or `z`, which RFC 3339 allows, or a leap second would
/// reach clients that fail on them (JavaScript's `Date`, Python's
/// `datetime`): such a file is rejected, saying how to write it.
fn parse_timestamp(c: &RecordCheck<'_>, text: &str, field: &str) -> Result<Instant, SnapshotError> {
    let fail = |why: &str| c.fail(&attr(field), format!("{} {why}", quote(text)));
    let instant = Instant::parse_rfc3339(text)
        .ok_or_else(|| fail("is not an RFC 3339 timestamp (like 2026-03-01T10:00:00.123Z)"))?;
    if let Some(problem) = client_profile_problem(text.as_bytes()) {
        return Err(fail(problem));
    }
    Ok(instant)
}

/// Why an RFC 3339 timestamp is outside the profile common clients parse.
pub(super) fn client_profile_problem(b: &[u8]) -> Option<&'static str> {
    if b.get(10) == Some(&b't') || b.last() == Some(&b'z') {
        return Some(
            "writes T or Z in lower case, which many clients cannot parse: write them in upper case (2026-03-01T10:00:00Z)",
        );
    }
    if b.get(0..4) == Some(b"0000") {
        return Some(
            "is in the year 0000, which many clients cannot represent (Python's datetime starts at year 1)",
        );
    }
    if b.get(17..19) == Some(b"60") {
        return Some(
            "is a leap second, which many clients cannot parse: write 23:59:59.999 or the next second",
        );
    }
    None
}

fn attr(field: &str) -> String {
    format!("attributes.{field}")
}

/// An email address as JSON Schema's `format: email` means it (RFC 5321's
/// mailbox, without quoted local parts): a dot-atom local part, `@`, and a
/// domain of letter-digit-hyphen labels (or an address literal in brackets).
pub(super) fn looks_like_email(text: &str) -> bool {
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
pub struct RecordCheck<'f> {
    pub file: &'f str,
    pub collection: &'static str,
    pub index: usize,
    pub id: Option<&'f str>,
}

impl RecordCheck<'_> {
    fn fail(&self, field: &str, message: impl Into<String>) -> SnapshotError {
        SnapshotError::at(
            self.file,
            Place {
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
        field: &'v Field<JsonText<'_>>,
        name: &str,
    ) -> Result<&'v str, SnapshotError> {
        self.required(field, name, "a string").map(JsonText::as_str)
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

    fn timestamp(&self, field: &Field<JsonText<'_>>, name: &str) -> Result<Instant, SnapshotError> {
        let text = self.required(field, name, "a timestamp")?;
        parse_timestamp(self, text.as_str(), name)
    }

    /// The key of a record with a required `company_id` and a required
    /// ordering timestamp `at_field`, checked in that order.
    fn keyed(
        &self,
        id: u128,
        company: &Option<JsonText<'_>>,
        at: &Option<JsonText<'_>>,
        at_field: &str,
    ) -> Result<Key, SnapshotError> {
        let Some(company) = company else {
            return Err(self.fail(&attr("company_id"), "required attribute is missing or null"));
        };
        Ok(Key {
            id,
            at: self.ordering(at, at_field)?,
            parent: parse_id(company.as_str()),
        })
    }

    /// The required ordering timestamp of a record that is not a meeting's.
    fn ordering(&self, at: &Option<JsonText<'_>>, field: &str) -> Result<Instant, SnapshotError> {
        match at {
            None => Err(self.fail(&attr(field), "required timestamp is missing or null")),
            Some(text) => parse_timestamp(self, text.as_str(), field),
        }
    }
}

/// The record's id: present and a UUID. (Repeats are found by the store,
/// which indexes ids anyway.)
pub fn check_id(c: &RecordCheck<'_>, id_text: Option<&str>) -> Result<u128, SnapshotError> {
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

#[cfg(test)]
mod tests {
    use super::looks_like_email;

    #[test]
    fn timestamps_must_be_in_the_profile_clients_parse() {
        for ok in [
            "2026-03-01T10:00:00Z",
            "2026-03-01T10:00:00.123456+02:00",
            "2026-03-01T10:00:59-05:30",
        ] {
            assert_eq!(super::client_profile_problem(ok.as_bytes()), None, "{ok}");
        }
        for bad in [
            "2026-03-01t10:00:00Z",
            "2026-03-01T10:00:00z",
            "2016-12-31T23:59:60Z",
            "2016-12-31T23:59:60.5Z",
            "0000-01-01T00:00:00Z",
        ] {
            assert!(
                super::client_profile_problem(bad.as_bytes()).is_some(),
                "{bad}"
            );
        }
    }

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
