//! Rendering wire types to the JSON the API serves.
//!
//! Each record is rendered once, at load, so this is the only serialization
//! there is; it writes straight into the store's buffers. A string that
//! was borrowed from the input had no escape sequences, and JSON forbids raw
//! quotes and control characters inside strings, so its text is copied as
//! is; only strings that had escapes are escaped again.
//!
//! Attributes are written in the spec's order, `null` where the snapshot
//! omitted them, and nothing the spec does not list: each wire object's
//! impl is made from the list of its members in [`super::format`].

use std::borrow::Cow;

use super::format::{Field, JsonText, Number};

/// A value that writes itself as JSON.
pub trait Render {
    fn render(&self, out: &mut Vec<u8>);
}

impl Render for JsonText<'_> {
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
pub fn record(out: &mut Vec<u8>, id: &JsonText<'_>, attributes: &impl Render) {
    out.extend_from_slice(b"{\"id\":");
    id.render(out);
    out.extend_from_slice(b",\"attributes\":");
    attributes.render(out);
    out.push(b'}');
}

/// Writes `"name":` and the value, with a comma before all but the first:
/// one member of an object (the wire objects' [`Render`] impls are made by
/// `wire_objects!` in [`super::format`] from the list of their members).
pub(super) fn member(
    out: &mut Vec<u8>,
    first: &mut bool,
    name: &str,
    value: &(impl Render + ?Sized),
) {
    if !*first {
        out.push(b',');
    }
    *first = false;
    out.push(b'"');
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b"\":");
    value.render(out);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::format::{Attendee, RoleAttrs, Segment};

    fn render(value: &impl Render) -> String {
        let mut out = Vec::new();
        value.render(&mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn borrowed_text_is_copied_and_owned_text_is_escaped() {
        let json = br#"{"a":"plain \u00e9","b":"caf\u00e9 \"q\" \\ \n","c":"no escapes"}"#;
        let parsed: std::collections::BTreeMap<String, JsonText<'_>> =
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
