//! The snapshot file format (docs/snapshot-format.md) as serde types.
//!
//! These are wire types: they mirror the JSON an exporter writes, borrow their
//! text from the input buffer where the JSON has no escapes, and are validated
//! by [`super::validate`] before the store builds anything from them.
//! [`super::render`] writes them back as exactly the attributes the API
//! serves; that is how each record is rendered to JSON once, at load.
//!
//! Non-meeting attributes are `Option`s: absent and `null` both render as
//! `null`, and a value of another JSON type fails the parse. Meeting and
//! meeting-note attributes are required, so they use [`Field`], which tells
//! an absent attribute from an explicit `null`.

use std::borrow::Cow;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};
use serde_json::value::RawValue;

/// A JSON string, borrowed from the input unless it contained escapes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Text<'a>(pub Cow<'a, str>);

impl Text<'_> {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct TextVisitor;
        impl<'de> Visitor<'de> for TextVisitor {
            type Value = Text<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Text(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Text(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(Text(Cow::Owned(v)))
            }
        }
        deserializer.deserialize_str(TextVisitor)
    }
}

/// A JSON number, kept as the exporter wrote it so that no precision is lost
/// (an `f64` round trip would turn `12` into `12.0` and mangle big integers).
#[derive(Clone, Copy, Debug)]
pub struct Number<'a>(pub &'a RawValue);

impl<'de: 'a, 'a> Deserialize<'de> for Number<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = <&'a RawValue>::deserialize(deserializer)?;
        let text = raw.get();
        if !text.starts_with(|c: char| c == '-' || c.is_ascii_digit()) {
            return Err(de::Error::invalid_type(unexpected_kind(text), &"a number"));
        }
        // Served as written, so it must be a number every client can read:
        // `1e400` would be Infinity in JavaScript and an error in serde_json.
        if !text.parse::<f64>().is_ok_and(f64::is_finite) {
            return Err(de::Error::invalid_value(
                de::Unexpected::Other(text),
                &"a number within the range of a double",
            ));
        }
        Ok(Number(raw))
    }
}

/// Names the JSON kind of a raw value for a type error.
fn unexpected_kind(raw: &str) -> de::Unexpected<'_> {
    match raw.as_bytes().first() {
        Some(b'"') => de::Unexpected::Other("a string"),
        Some(b't' | b'f') => de::Unexpected::Other("a boolean"),
        Some(b'[') => de::Unexpected::Seq,
        Some(b'{') => de::Unexpected::Map,
        Some(b'n') => de::Unexpected::Unit,
        _ => de::Unexpected::Other(raw),
    }
}

/// An attribute that must be present but may be allowed to be `null`.
#[derive(Clone, Debug, Default)]
pub enum Field<T> {
    #[default]
    Missing,
    Null,
    Value(T),
}

impl<T> Field<T> {
    pub fn value(&self) -> Option<&T> {
        match self {
            Field::Value(v) => Some(v),
            _ => None,
        }
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Field<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(match Option::<T>::deserialize(deserializer)? {
            Some(v) => Field::Value(v),
            None => Field::Null,
        })
    }
}

/// A whole snapshot file.
#[derive(Deserialize)]
#[serde(bound(deserialize = "'de: 'a"))]
pub struct SnapshotDoc<'a> {
    pub format_version: Option<&'a RawValue>,
    pub version: Option<Text<'a>>,
    pub workspace: Option<WorkspaceDoc<'a>>,
    pub api_keys: Option<Vec<ApiKeyDoc<'a>>>,
    pub companies: Option<Vec<Record<'a, CompanyAttrs<'a>>>>,
    pub tasks: Option<Vec<Record<'a, TaskAttrs<'a>>>>,
    pub roles: Option<Vec<Record<'a, RoleAttrs<'a>>>>,
    pub feed: Option<Vec<Record<'a, FeedAttrs<'a>>>>,
    pub notes: Option<Vec<Record<'a, NoteAttrs<'a>>>>,
    pub metrics: Option<Vec<MetricRecord<'a>>>,
    pub meetings: Option<Vec<Record<'a, MeetingAttrs<'a>>>>,
    pub meeting_notes: Option<Vec<Record<'a, MeetingNoteAttrs<'a>>>>,
}

#[derive(Deserialize)]
#[serde(bound(deserialize = "'de: 'a"))]
pub struct WorkspaceDoc<'a> {
    pub id: Option<Text<'a>>,
    pub name: Option<Text<'a>>,
}

#[derive(Deserialize)]
#[serde(bound(deserialize = "'de: 'a"))]
pub struct ApiKeyDoc<'a> {
    pub sha256: Option<Text<'a>>,
    pub label: Option<Text<'a>>,
}

/// A record in the API's own shape.
#[derive(Deserialize)]
#[serde(bound(deserialize = "'de: 'a, A: Deserialize<'de>"))]
pub struct Record<'a, A> {
    pub id: Option<Text<'a>>,
    pub attributes: Option<A>,
}

/// A metric value: `company_id` sits beside `attributes`, since the Metric
/// resource has no such attribute (and it is not served).
#[derive(Deserialize)]
#[serde(bound(deserialize = "'de: 'a"))]
pub struct MetricRecord<'a> {
    pub id: Option<Text<'a>>,
    pub company_id: Option<Text<'a>>,
    pub attributes: Option<MetricAttrs<'a>>,
}

#[derive(Clone, Default, Deserialize)]
#[serde(bound(deserialize = "'de: 'a"))]
pub struct CompanyAttrs<'a> {
    pub domain: Option<Text<'a>>,
    pub name: Option<Text<'a>>,
    pub logo_url: Option<Text<'a>>,
    pub headline: Option<Text<'a>>,
    pub description: Option<Text<'a>>,
    pub professional_network: Option<Text<'a>>,
    pub x: Option<Text<'a>>,
    pub careers_url: Option<Text<'a>>,
    pub domain_aliases: Option<Vec<Text<'a>>>,
    pub priority: Option<Text<'a>>,
    pub labels: Option<Vec<Text<'a>>>,
    pub value_propositions: Option<Vec<ValueProposition<'a>>>,
}

#[derive(Clone, Deserialize)]
#[serde(bound(deserialize = "'de: 'a"))]
pub struct ValueProposition<'a> {
    pub problem: Option<Text<'a>>,
    pub solution: Option<Text<'a>>,
    pub icp: Option<Text<'a>>,
}

#[derive(Clone, Default, Deserialize)]
#[serde(bound(deserialize = "'de: 'a"))]
pub struct TaskAttrs<'a> {
    pub title: Option<Text<'a>>,
    pub description: Option<Text<'a>>,
    pub status: Option<Text<'a>>,
    pub priority: Option<Text<'a>>,
    pub source: Option<Text<'a>>,
    pub company_id: Option<Text<'a>>,
    pub assignee_id: Option<Text<'a>>,
    pub due_date: Option<Text<'a>>,
    pub created_at: Option<Text<'a>>,
    pub updated_at: Option<Text<'a>>,
}

#[derive(Clone, Default, Deserialize)]
#[serde(bound(deserialize = "'de: 'a"))]
pub struct RoleAttrs<'a> {
    pub company_id: Option<Text<'a>>,
    pub name: Option<Text<'a>>,
    pub url: Option<Text<'a>>,
    pub description: Option<Text<'a>>,
    pub domain: Option<Text<'a>>,
    pub level: Option<Text<'a>>,
    pub opened_at: Option<Text<'a>>,
}

#[derive(Clone, Default, Deserialize)]
#[serde(bound(deserialize = "'de: 'a"))]
pub struct FeedAttrs<'a> {
    pub company_id: Option<Text<'a>>,
    #[serde(rename = "type")]
    pub kind: Option<Text<'a>>,
    pub title: Option<Text<'a>>,
    pub content: Option<Text<'a>>,
    pub published_at: Option<Text<'a>>,
    pub private: Option<bool>,
    pub sources: Option<Vec<FeedSource<'a>>>,
}

#[derive(Clone, Deserialize)]
#[serde(bound(deserialize = "'de: 'a"))]
pub struct FeedSource<'a> {
    pub source: Option<Text<'a>>,
    pub url: Option<Text<'a>>,
    pub title: Option<Text<'a>>,
    pub published_at: Option<Text<'a>>,
}

#[derive(Clone, Default, Deserialize)]
#[serde(bound(deserialize = "'de: 'a"))]
pub struct NoteAttrs<'a> {
    pub company_id: Option<Text<'a>>,
    pub title: Option<Text<'a>>,
    pub content: Option<Text<'a>>,
    pub source: Option<Text<'a>>,
    pub created_by: Option<Text<'a>>,
    pub created_at: Option<Text<'a>>,
}

#[derive(Clone, Default, Deserialize)]
#[serde(bound(deserialize = "'de: 'a"))]
pub struct MetricAttrs<'a> {
    pub name: Option<Text<'a>>,
    pub unit: Option<Text<'a>>,
    pub value_text: Option<Text<'a>>,
    pub value_numeric: Option<Number<'a>>,
    pub value_currency: Option<Text<'a>>,
    pub period_label: Option<Text<'a>>,
    pub period_start: Option<Text<'a>>,
    pub period_end: Option<Text<'a>>,
    pub reported_at: Option<Text<'a>>,
}

#[derive(Clone, Default, Deserialize)]
#[serde(bound(deserialize = "'de: 'a"))]
pub struct MeetingAttrs<'a> {
    #[serde(default)]
    pub company_id: Field<Text<'a>>,
    #[serde(default)]
    pub title: Field<Text<'a>>,
    #[serde(default)]
    pub start_time: Field<Text<'a>>,
    #[serde(default)]
    pub end_time: Field<Text<'a>>,
    #[serde(default)]
    pub attendees: Field<Vec<Attendee<'a>>>,
    #[serde(default)]
    pub created_at: Field<Text<'a>>,
    #[serde(default)]
    pub updated_at: Field<Text<'a>>,
}

#[derive(Clone, Deserialize)]
#[serde(bound(deserialize = "'de: 'a"))]
pub struct Attendee<'a> {
    #[serde(default)]
    pub email: Field<Text<'a>>,
    #[serde(default)]
    pub organizer: Field<bool>,
    pub name: Option<Text<'a>>,
}

#[derive(Clone, Default, Deserialize)]
#[serde(bound(deserialize = "'de: 'a"))]
pub struct MeetingNoteAttrs<'a> {
    #[serde(default)]
    pub meeting_id: Field<Text<'a>>,
    #[serde(default, rename = "type")]
    pub kind: Field<Text<'a>>,
    #[serde(default)]
    pub notes: Field<Text<'a>>,
    #[serde(default)]
    pub transcript: Field<Transcript<'a>>,
    #[serde(default)]
    pub synced_at: Field<Text<'a>>,
    #[serde(default)]
    pub created_at: Field<Text<'a>>,
    #[serde(default)]
    pub updated_at: Field<Text<'a>>,
}

#[derive(Clone, Deserialize)]
#[serde(bound(deserialize = "'de: 'a"))]
pub struct Transcript<'a> {
    #[serde(default)]
    pub segments: Field<Vec<Segment<'a>>>,
}

#[derive(Clone, Deserialize)]
#[serde(bound(deserialize = "'de: 'a"))]
pub struct Segment<'a> {
    #[serde(default)]
    pub text: Field<Text<'a>>,
    pub speaker: Option<Text<'a>>,
    #[serde(rename = "startTime")]
    pub start_time: Option<Number<'a>>,
    #[serde(rename = "endTime")]
    pub end_time: Option<Number<'a>>,
}
