//! Rendering wire types to the JSON the API serves.
//!
//! Each record is rendered once, at load, so this is the only serialization
//! there is; it writes straight into the store's buffers. A string that
//! was borrowed from the input had no escape sequences, and JSON forbids raw
//! quotes and control characters inside strings, so its text is copied as
//! is; only strings that had escapes are escaped again.
//!
//! Attributes are written in the spec's order, `null` where the snapshot
//! omitted them, and nothing the spec does not list.

use std::borrow::Cow;

use super::format::{
    Attendee, CompanyAttrs, FeedAttrs, FeedSource, Field, MeetingAttrs, MeetingNoteAttrs,
    MetricAttrs, NoteAttrs, Number, RoleAttrs, Segment, TaskAttrs, Text, Transcript,
    ValueProposition,
};

/// A value that writes itself as JSON.
pub trait Render {
    fn render(&self, out: &mut Vec<u8>);
}

impl Render for Text<'_> {
    fn render(&self, out: &mut Vec<u8>) {
        match &self.0 {
            Cow::Borrowed(text) => {
                out.reserve(text.len() + 2);
                out.push(b'"');
                out.extend_from_slice(text.as_bytes());
                out.push(b'"');
            }
            // Writing a string into a Vec cannot fail.
            Cow::Owned(text) => {
                let _ = serde_json::to_writer(&mut *out, text.as_str());
            }
        }
    }
}

impl Render for str {
    fn render(&self, out: &mut Vec<u8>) {
        let _ = serde_json::to_writer(&mut *out, self);
    }
}

impl Render for Number<'_> {
    fn render(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(self.0.get().as_bytes());
    }
}

impl Render for bool {
    fn render(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(if *self { b"true" } else { b"false" });
    }
}

impl<T: Render> Render for Option<T> {
    fn render(&self, out: &mut Vec<u8>) {
        match self {
            Some(value) => value.render(out),
            None => out.extend_from_slice(b"null"),
        }
    }
}

impl<T: Render> Render for Field<T> {
    fn render(&self, out: &mut Vec<u8>) {
        match self {
            Field::Value(value) => value.render(out),
            Field::Missing | Field::Null => out.extend_from_slice(b"null"),
        }
    }
}

impl<T: Render> Render for Vec<T> {
    fn render(&self, out: &mut Vec<u8>) {
        out.push(b'[');
        for (i, item) in self.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            item.render(out);
        }
        out.push(b']');
    }
}

/// Writes a record as the API serves it: `{"id":<id>,"attributes":<attributes>}`.
pub fn record(out: &mut Vec<u8>, id: &Text<'_>, attributes: &impl Render) {
    out.extend_from_slice(b"{\"id\":");
    id.render(out);
    out.extend_from_slice(b",\"attributes\":");
    attributes.render(out);
    out.push(b'}');
}

/// Writes `"name":` and the value, with a comma before all but the first.
fn member(out: &mut Vec<u8>, first: &mut bool, name: &str, value: &(impl Render + ?Sized)) {
    if !*first {
        out.push(b',');
    }
    *first = false;
    out.push(b'"');
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b"\":");
    value.render(out);
}

/// Implements [`Render`] for a struct as an object of the listed fields, in
/// order, under their JSON names.
macro_rules! render_object {
    ($ty:ident { $($field:ident => $name:literal),* $(,)? }) => {
        impl Render for $ty<'_> {
            fn render(&self, out: &mut Vec<u8>) {
                let mut first = true;
                out.push(b'{');
                $( member(out, &mut first, $name, &self.$field); )*
                out.push(b'}');
            }
        }
    };
}

render_object!(CompanyAttrs {
    domain => "domain",
    name => "name",
    logo_url => "logo_url",
    headline => "headline",
    description => "description",
    professional_network => "professional_network",
    x => "x",
    careers_url => "careers_url",
    domain_aliases => "domain_aliases",
    priority => "priority",
    labels => "labels",
    value_propositions => "value_propositions",
});

render_object!(ValueProposition { problem => "problem", solution => "solution", icp => "icp" });

render_object!(TaskAttrs {
    title => "title",
    description => "description",
    status => "status",
    priority => "priority",
    source => "source",
    company_id => "company_id",
    assignee_id => "assignee_id",
    due_date => "due_date",
    created_at => "created_at",
    updated_at => "updated_at",
});

render_object!(RoleAttrs {
    company_id => "company_id",
    name => "name",
    url => "url",
    description => "description",
    domain => "domain",
    level => "level",
    opened_at => "opened_at",
});

render_object!(FeedAttrs {
    company_id => "company_id",
    kind => "type",
    title => "title",
    content => "content",
    published_at => "published_at",
    private => "private",
    sources => "sources",
});

render_object!(FeedSource { source => "source", url => "url", title => "title", published_at => "published_at" });

render_object!(NoteAttrs {
    company_id => "company_id",
    title => "title",
    content => "content",
    source => "source",
    created_by => "created_by",
    created_at => "created_at",
});

render_object!(MetricAttrs {
    name => "name",
    unit => "unit",
    value_text => "value_text",
    value_numeric => "value_numeric",
    value_currency => "value_currency",
    period_label => "period_label",
    period_start => "period_start",
    period_end => "period_end",
    reported_at => "reported_at",
});

render_object!(MeetingAttrs {
    company_id => "company_id",
    title => "title",
    start_time => "start_time",
    end_time => "end_time",
    attendees => "attendees",
    created_at => "created_at",
    updated_at => "updated_at",
});

render_object!(MeetingNoteAttrs {
    meeting_id => "meeting_id",
    kind => "type",
    notes => "notes",
    transcript => "transcript",
    synced_at => "synced_at",
    created_at => "created_at",
    updated_at => "updated_at",
});

render_object!(Transcript { segments => "segments" });

/// Optional attendee `name` is left out when absent.
impl Render for Attendee<'_> {
    fn render(&self, out: &mut Vec<u8>) {
        let mut first = true;
        out.push(b'{');
        member(out, &mut first, "email", &self.email);
        member(out, &mut first, "organizer", &self.organizer);
        if let Some(name) = &self.name {
            member(out, &mut first, "name", name);
        }
        out.push(b'}');
    }
}

/// Optional segment `speaker`, `startTime` and `endTime` are left out when absent.
impl Render for Segment<'_> {
    fn render(&self, out: &mut Vec<u8>) {
        let mut first = true;
        out.push(b'{');
        member(out, &mut first, "text", &self.text);
        if let Some(speaker) = &self.speaker {
            member(out, &mut first, "speaker", speaker);
        }
        if let Some(start) = &self.start_time {
            member(out, &mut first, "startTime", start);
        }
        if let Some(end) = &self.end_time {
            member(out, &mut first, "endTime", end);
        }
        out.push(b'}');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(value: &impl Render) -> String {
        let mut out = Vec::new();
        value.render(&mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn borrowed_text_is_copied_and_owned_text_is_escaped() {
        let json = br#"{"a":"plain \u00e9","b":"caf\u00e9 \"q\" \\ \n","c":"no escapes"}"#;
        let parsed: std::collections::BTreeMap<String, Text<'_>> =
            serde_json::from_slice(json).unwrap();
        assert!(matches!(parsed["c"].0, Cow::Borrowed(_)));
        assert_eq!(render(&parsed["c"]), r#""no escapes""#);
        assert_eq!(render(&parsed["a"]), "\"plain \u{e9}\"");
        assert_eq!(render(&parsed["b"]), "\"caf\u{e9} \\\"q\\\" \\\\ \\n\"");
        for key in ["a", "b", "c"] {
            let back: String = serde_json::from_str(&render(&parsed[key])).unwrap();
            assert_eq!(back, parsed[key].as_str());
        }
    }

    #[test]
    fn objects_keep_the_spec_order_and_null_for_omitted() {
        let attrs: RoleAttrs<'_> =
            serde_json::from_str(r#"{"opened_at":"t","name":"n","extra":1}"#).unwrap();
        assert_eq!(
            render(&attrs),
            r#"{"company_id":null,"name":"n","url":null,"description":null,"domain":null,"level":null,"opened_at":"t"}"#
        );
    }

    #[test]
    fn optional_members_are_left_out() {
        let segment: Segment<'_> = serde_json::from_str(r#"{"text":"hi","endTime":2.50}"#).unwrap();
        assert_eq!(render(&segment), r#"{"text":"hi","endTime":2.50}"#);
        let attendee: Attendee<'_> =
            serde_json::from_str(r#"{"email":"a@b.c","organizer":false,"name":null}"#).unwrap();
        assert_eq!(render(&attendee), r#"{"email":"a@b.c","organizer":false}"#);
    }
}
