//! The checks of each record, and what each hands to the store's builder.
//!
//! A check knows where its record is ([`RecordCheck`]), so every failure
//! names the collection, the record's position and id, and the field
//! (docs/snapshot-format.md#validation). A record that passes is rendered
//! right away: its closure writes the JSON the API serves.

use std::borrow::Cow;

use super::error::{Place, SnapshotError, quote, shorten};
use super::format::{
    CompanyAttrs, FeedAttrs, Field, MeetingAttrs, MeetingNoteAttrs, MetricRecord, NoteAttrs,
    Record, RoleAttrs, TaskAttrs, Text,
};
use super::render;
use crate::store::id::parse_id;
use crate::store::time::Instant;
use crate::store::{Builder, Key};

/// The attributes of a record; absent ones are all `null`.
fn attrs_or_default<A: Default + Clone>(attributes: &Option<A>) -> Cow<'_, A> {
    match attributes {
        Some(a) => Cow::Borrowed(a),
        None => Cow::Owned(A::default()),
    }
}

fn id_of<'p, 'de>(id: &'p Option<Text<'de>>) -> &'p Text<'de> {
    const NONE: &Text<'static> = &Text(Cow::Borrowed(""));
    id.as_ref().unwrap_or(NONE)
}

pub fn company(
    _: &RecordCheck<'_>,
    r: &Record<'_, CompanyAttrs<'_>>,
    id: u128,
    builder: &mut Builder,
) -> Result<(), SnapshotError> {
    let a = attrs_or_default(&r.attributes);
    let key = Key {
        id,
        ..Key::default()
    };
    builder.company(key, text(&a.name), text(&a.priority), |out| {
        render::record(out, id_of(&r.id), &*a)
    });
    Ok(())
}

// Tasks, roles, feed entries and notes share one shape: a required
// `company_id` and a required ordering timestamp.

pub fn task(
    c: &RecordCheck<'_>,
    r: &Record<'_, TaskAttrs<'_>>,
    id: u128,
    builder: &mut Builder,
) -> Result<(), SnapshotError> {
    let a = attrs_or_default(&r.attributes);
    let key = keyed(
        c,
        id,
        a.company_id.as_ref(),
        a.created_at.as_ref(),
        "created_at",
    )?;
    builder.task(key, text(&a.status), text(&a.priority), |out| {
        render::record(out, id_of(&r.id), &*a)
    });
    Ok(())
}

pub fn role(
    c: &RecordCheck<'_>,
    r: &Record<'_, RoleAttrs<'_>>,
    id: u128,
    builder: &mut Builder,
) -> Result<(), SnapshotError> {
    let a = attrs_or_default(&r.attributes);
    let key = keyed(
        c,
        id,
        a.company_id.as_ref(),
        a.opened_at.as_ref(),
        "opened_at",
    )?;
    builder.role(key, |out| render::record(out, id_of(&r.id), &*a));
    Ok(())
}

pub fn feed_entry(
    c: &RecordCheck<'_>,
    r: &Record<'_, FeedAttrs<'_>>,
    id: u128,
    builder: &mut Builder,
) -> Result<(), SnapshotError> {
    let a = attrs_or_default(&r.attributes);
    let key = keyed(
        c,
        id,
        a.company_id.as_ref(),
        a.published_at.as_ref(),
        "published_at",
    )?;
    builder.feed_entry(key, text(&a.kind), |out| {
        render::record(out, id_of(&r.id), &*a)
    });
    Ok(())
}

pub fn note(
    c: &RecordCheck<'_>,
    r: &Record<'_, NoteAttrs<'_>>,
    id: u128,
    builder: &mut Builder,
) -> Result<(), SnapshotError> {
    let a = attrs_or_default(&r.attributes);
    let key = keyed(
        c,
        id,
        a.company_id.as_ref(),
        a.created_at.as_ref(),
        "created_at",
    )?;
    builder.note(key, |out| render::record(out, id_of(&r.id), &*a));
    Ok(())
}

/// The text of an optional attribute.
fn text<'t>(value: &'t Option<Text<'_>>) -> Option<&'t str> {
    value.as_ref().map(Text::as_str)
}

pub fn metric(
    c: &RecordCheck<'_>,
    r: &MetricRecord<'_>,
    id: u128,
    builder: &mut Builder,
) -> Result<(), SnapshotError> {
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
        id,
        at,
        parent: parse_id(company.as_str()),
    };
    builder.metric(key, text(&a.name), |out| {
        render::record(out, id_of(&r.id), &*a)
    });
    Ok(())
}

pub fn meeting(
    c: &RecordCheck<'_>,
    r: &Record<'_, MeetingAttrs<'_>>,
    id: u128,
    builder: &mut Builder,
) -> Result<(), SnapshotError> {
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
        id,
        at,
        parent: parse_id(company),
    };
    builder.meeting(key, |out| render::record(out, id_of(&r.id), &*a));
    Ok(())
}

pub fn meeting_note(
    c: &RecordCheck<'_>,
    r: &Record<'_, MeetingNoteAttrs<'_>>,
    id: u128,
    builder: &mut Builder,
) -> Result<(), SnapshotError> {
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
        id,
        at,
        parent: parse_id(meeting),
    };
    builder.meeting_note(key, |out| render::record(out, id_of(&r.id), &*a));
    Ok(())
}

/// The key of a record with a required `company_id` and a required
/// ordering timestamp `at_field`.
fn keyed(
    c: &RecordCheck<'_>,
    id: u128,
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
        id,
        at,
        parent: parse_id(company.as_str()),
    })
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
    if let Some(problem) = client_profile_problem(text) {
        return Err(fail(problem));
    }
    Ok(instant)
}

/// Why an RFC 3339 timestamp is outside the profile common clients parse.
fn client_profile_problem(text: &str) -> Option<&'static str> {
    let b = text.as_bytes();
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
            assert_eq!(super::client_profile_problem(ok), None, "{ok}");
        }
        for bad in [
            "2026-03-01t10:00:00Z",
            "2026-03-01T10:00:00z",
            "2016-12-31T23:59:60Z",
            "2016-12-31T23:59:60.5Z",
            "0000-01-01T00:00:00Z",
        ] {
            assert!(super::client_profile_problem(bad).is_some(), "{bad}");
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
