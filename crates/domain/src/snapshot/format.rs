//! The snapshot file format (docs/snapshot-format.md) as serde types.
//!
//! These are wire types: they mirror the JSON an exporter writes, borrow their
//! text from the input buffer where the JSON has no escapes, and are checked
//! by `records.rs` before the store builds anything from them. Each
//! object of a record is declared once, in the `wire_objects!` list below:
//! its members, their JSON names and the order the API serves them in. That
//! one list makes both the struct serde reads and the [`Render`] impl that
//! writes it back as exactly the attributes the API serves; that is how
//! each record is rendered to JSON once, at load.
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

use super::render::{Render, member};

/// A JSON string, borrowed from the input unless it contained escapes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JsonText<'a>(pub Cow<'a, str>);

impl JsonText<'_> {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for JsonText<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct TextVisitor;
        impl<'de> Visitor<'de> for TextVisitor {
            type Value = JsonText<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(JsonText(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(JsonText(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(JsonText(Cow::Owned(v)))
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

#[derive(Deserialize)]
#[serde(bound(deserialize = "'de: 'a"))]
pub struct WorkspaceDoc<'a> {
    pub id: Option<JsonText<'a>>,
    pub name: Option<JsonText<'a>>,
}

#[derive(Deserialize)]
#[serde(bound(deserialize = "'de: 'a"))]
pub struct ApiKeyDoc<'a> {
    pub sha256: Option<JsonText<'a>>,
    pub label: Option<JsonText<'a>>,
}

/// A record in the API's own shape.
#[derive(Deserialize)]
#[serde(bound(deserialize = "'de: 'a, A: Deserialize<'de>"))]
pub struct ApiRecord<'a, A> {
    pub id: Option<JsonText<'a>>,
    pub attributes: Option<A>,
}

/// A metric value: `company_id` sits beside `attributes`, since the Metric
/// resource has no such attribute (and it is not served).
#[derive(Deserialize)]
#[serde(bound(deserialize = "'de: 'a"))]
pub struct MetricRecord<'a> {
    pub id: Option<JsonText<'a>>,
    pub company_id: Option<JsonText<'a>>,
    pub attributes: Option<MetricAttrs<'a>>,
}

/// Declares wire objects, each from one list of its members: the struct
/// that serde reads and the [`Render`] impl that writes it back, so that a
/// member is added, renamed or moved in one place.
///
/// Members are listed in the order the API serves them (the spec's), in
/// runs of one type: `a, b: Option<JsonText<'a>>` (the input's lifetime is
/// `'a`). A member whose JSON name is not a Rust name says it:
/// `kind as "type"`. An absent member is read as `None`, or as
/// [`Field::Missing`], and written as `null`, except in a run marked
/// `#[omit_if_none]`, whose members are left out of the rendering when
/// `None` (docs/snapshot-format.md#rendering).
macro_rules! wire_objects {
    ($( $(#[$doc:meta])* $name:ident { $($runs:tt)* } )*) => {$(
        wire_objects!(@struct [$(#[$doc])*] $name {} $($runs)*);
        wire_objects!(@render $name $($runs)*);
    )*};

    // The struct, a run of members at a time. Only `Field` members are
    // `serde(default)`: that is how an absent one is told from a `null`.
    // Serde also reads a struct from an array, by position, and a default
    // fills a missing position: on an `Option` member it would let `[]`
    // stand for an object, which the format rejects.
    (
        @struct $docs:tt $name:ident {$($done:tt)*}
        $(#[$omit:ident])? $($member:ident $(as $json:literal)?),+ : Field<$inner:ty>
        $(, $($rest:tt)*)?
    ) => {
        wire_objects!(@struct $docs $name {
            $($done)*
            $( #[serde(default $(, rename = $json)?)] pub $member: Field<$inner>, )+
        } $($($rest)*)?);
    };
    (
        @struct $docs:tt $name:ident {$($done:tt)*}
        $(#[$omit:ident])? $($member:ident $(as $json:literal)?),+ : $ty:ty
        $(, $($rest:tt)*)?
    ) => {
        wire_objects!(@struct $docs $name {
            $($done)*
            $( $(#[serde(rename = $json)])? pub $member: $ty, )+
        } $($($rest)*)?);
    };
    (@struct [$($doc:tt)*] $name:ident {$($done:tt)*}) => {
        $($doc)*
        #[derive(Clone, Default, Deserialize)]
        #[serde(bound(deserialize = "'de: 'a"))]
        pub struct $name<'a> {
            $($done)*
        }
    };

    // The rendering: each member in the order listed.
    (
        @render $name:ident
        $( $(#[$omit:ident])? $($member:ident $(as $json:literal)?),+ : $ty:ty ),* $(,)?
    ) => {
        impl Render for $name<'_> {
            fn render(&self, out: &mut Vec<u8>) {
                let mut first = true;
                out.push(b'{');
                $( wire_objects!(@run self, out, first, [$($omit)?] $($member $($json)?),+); )*
                out.push(b'}');
            }
        }
    };
    // One run of members: each written as `null` when absent...
    (@run $self:ident, $out:ident, $first:ident, [] $($member:ident $($json:literal)?),+) => {
        $( member($out, &mut $first, wire_objects!(@name $member $($json)?), &$self.$member); )+
    };
    // ... or left out.
    (
        @run $self:ident, $out:ident, $first:ident,
        [omit_if_none] $($member:ident $($json:literal)?),+
    ) => {
        $(
            if let Some(value) = &$self.$member {
                member($out, &mut $first, wire_objects!(@name $member $($json)?), value);
            }
        )+
    };
    // A member's JSON name: its own, or the one it gives after `as`.
    (@name $member:ident) => { stringify!($member) };
    (@name $member:ident $json:literal) => { $json };
}

wire_objects! {
    CompanyAttrs {
        domain, name, logo_url, headline, description, professional_network, x,
        careers_url: Option<JsonText<'a>>,
        domain_aliases: Option<Vec<JsonText<'a>>>,
        priority: Option<JsonText<'a>>,
        labels: Option<Vec<JsonText<'a>>>,
        value_propositions: Option<Vec<ValueProposition<'a>>>,
    }

    ValueProposition {
        problem, solution, icp: Option<JsonText<'a>>,
    }

    TaskAttrs {
        title, description, status, priority, source, company_id, assignee_id, due_date,
        created_at, updated_at: Option<JsonText<'a>>,
    }

    RoleAttrs {
        company_id, name, url, description, domain, level, opened_at: Option<JsonText<'a>>,
    }

    FeedAttrs {
        company_id, kind as "type", title, content, published_at: Option<JsonText<'a>>,
        private: Option<bool>,
        sources: Option<Vec<FeedSource<'a>>>,
    }

    FeedSource {
        source, url, title, published_at: Option<JsonText<'a>>,
    }

    NoteAttrs {
        company_id, title, content, source, created_by, created_at: Option<JsonText<'a>>,
    }

    MetricAttrs {
        name, unit, value_text: Option<JsonText<'a>>,
        value_numeric: Option<Number<'a>>,
        value_currency, period_label, period_start, period_end, reported_at: Option<JsonText<'a>>,
    }

    MeetingAttrs {
        company_id, title, start_time, end_time: Field<JsonText<'a>>,
        attendees: Field<Vec<Attendee<'a>>>,
        created_at, updated_at: Field<JsonText<'a>>,
    }

    Attendee {
        email: Field<JsonText<'a>>,
        organizer: Field<bool>,
        #[omit_if_none] name: Option<JsonText<'a>>,
    }

    MeetingNoteAttrs {
        meeting_id, kind as "type", notes: Field<JsonText<'a>>,
        transcript: Field<Transcript<'a>>,
        synced_at, created_at, updated_at: Field<JsonText<'a>>,
    }

    Transcript {
        segments: Field<Vec<Segment<'a>>>,
    }

    Segment {
        text: Field<JsonText<'a>>,
        #[omit_if_none] speaker: Option<JsonText<'a>>,
        #[omit_if_none] start_time as "startTime", end_time as "endTime": Option<Number<'a>>,
    }
}
