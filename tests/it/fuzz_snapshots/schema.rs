//! Paths into a document, and the schema of docs/snapshot-format.md: where
//! a value of another type (or null) is accepted.

use serde_json::{Value, json};

use super::judge::*;
use crate::util::COLLECTIONS;

#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Seg {
    Key(String),
    Index(usize),
}

pub(super) fn all_paths(value: &Value, prefix: &mut Vec<Seg>, out: &mut Vec<Vec<Seg>>) {
    out.push(prefix.clone());
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                prefix.push(Seg::Key(k.clone()));
                all_paths(v, prefix, out);
                prefix.pop();
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                prefix.push(Seg::Index(i));
                all_paths(v, prefix, out);
                prefix.pop();
            }
        }
        _ => {}
    }
}

pub(super) fn at_mut<'v>(value: &'v mut Value, path: &[Seg]) -> &'v mut Value {
    path.iter().fold(value, |v, seg| match seg {
        Seg::Key(k) => &mut v[k.as_str()],
        Seg::Index(i) => &mut v[*i],
    })
}

pub(super) fn show(path: &[Seg]) -> String {
    let mut out = String::new();
    for seg in path {
        match seg {
            Seg::Key(k) if out.is_empty() => out.push_str(k),
            Seg::Key(k) => {
                out.push('.');
                out.push_str(k);
            }
            Seg::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}

/// Where a problem at `path` must be reported.
pub(super) fn place_of(path: &[Seg]) -> Place<'_> {
    let Some(Seg::Key(collection)) = path.first() else {
        return None;
    };
    let index = match path.get(1) {
        Some(Seg::Index(i)) => Some(*i),
        _ => None,
    };
    Some((collection.as_str(), index))
}

/// A JSON type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    Null,
    Bool,
    Number,
    Str,
    Array,
    Object,
    /// `format_version`: only the number 1.
    One,
}

pub(super) fn kind_of(value: &Value) -> Kind {
    match value {
        Value::Null => Kind::Null,
        Value::Bool(_) => Kind::Bool,
        Value::Number(_) => Kind::Number,
        Value::String(_) => Kind::Str,
        Value::Array(_) => Kind::Array,
        Value::Object(_) => Kind::Object,
    }
}

/// The type the format wants at `path` and whether `null` is accepted
/// there; `None` where the format ignores what it finds.
pub(super) fn slot(path: &[Seg]) -> Option<(Kind, bool)> {
    use Kind::*;
    let p: Vec<&str> = path
        .iter()
        .map(|s| match s {
            Seg::Key(k) => k.as_str(),
            Seg::Index(_) => "[]",
        })
        .collect();
    let text = |nullable| Some((Str, nullable));
    Some(match p.as_slice() {
        ["format_version"] => (One, false),
        ["version"] => (Str, true),
        ["workspace"] => (Object, false),
        ["workspace", "id"] => (Str, false),
        ["workspace", "name"] => (Str, true),
        ["api_keys"] => (Array, true),
        ["api_keys", "[]"] => (Object, false),
        ["api_keys", "[]", "sha256"] => (Str, false),
        ["api_keys", "[]", "label"] => (Str, true),
        [c] if COLLECTIONS.contains(c) => (Array, true),
        [c, "[]"] if COLLECTIONS.contains(c) => (Object, false),
        [c, "[]", "id"] if COLLECTIONS.contains(c) => (Str, false),
        ["metrics", "[]", "company_id"] => (Str, false),
        [c, "[]", "attributes"] if COLLECTIONS.contains(c) => (Object, *c == "companies"),
        [c, "[]", "attributes", rest @ ..] => return attribute_slot(c, rest, text),
        _ => return None,
    })
}

fn attribute_slot(
    collection: &str,
    p: &[&str],
    text: impl Fn(bool) -> Option<(Kind, bool)>,
) -> Option<(Kind, bool)> {
    use Kind::*;
    match (collection, p) {
        ("companies", ["domain_aliases" | "labels" | "value_propositions"]) => Some((Array, true)),
        ("companies", ["domain_aliases" | "labels", "[]"]) => text(false),
        ("companies", ["value_propositions", "[]"]) => Some((Object, false)),
        ("companies", ["value_propositions", "[]", "problem" | "solution" | "icp"]) => text(true),
        (
            "companies",
            [
                "domain"
                | "name"
                | "logo_url"
                | "headline"
                | "description"
                | "professional_network"
                | "x"
                | "careers_url"
                | "priority",
            ],
        ) => text(true),
        ("tasks", ["company_id" | "created_at"]) => text(false),
        (
            "tasks",
            [
                "title" | "description" | "status" | "priority" | "source" | "assignee_id"
                | "due_date" | "updated_at",
            ],
        ) => text(true),
        ("roles", ["company_id" | "opened_at"]) => text(false),
        ("roles", ["name" | "url" | "description" | "domain" | "level"]) => text(true),
        ("feed", ["company_id" | "published_at"]) => text(false),
        ("feed", ["type" | "title" | "content"]) => text(true),
        ("feed", ["private"]) => Some((Bool, true)),
        ("feed", ["sources"]) => Some((Array, true)),
        ("feed", ["sources", "[]"]) => Some((Object, false)),
        ("feed", ["sources", "[]", "source" | "url" | "title" | "published_at"]) => text(true),
        ("notes", ["company_id" | "created_at"]) => text(false),
        ("notes", ["title" | "content" | "source" | "created_by"]) => text(true),
        ("metrics", ["reported_at"]) => text(false),
        ("metrics", ["value_numeric"]) => Some((Number, true)),
        (
            "metrics",
            [
                "name" | "unit" | "value_text" | "value_currency" | "period_label" | "period_start"
                | "period_end",
            ],
        ) => text(true),
        ("meetings", ["company_id" | "title" | "start_time" | "created_at" | "updated_at"]) => {
            text(false)
        }
        ("meetings", ["end_time"]) => text(true),
        ("meetings", ["attendees"]) => Some((Array, false)),
        ("meetings", ["attendees", "[]"]) => Some((Object, false)),
        ("meetings", ["attendees", "[]", "email"]) => text(false),
        ("meetings", ["attendees", "[]", "organizer"]) => Some((Bool, false)),
        ("meetings", ["attendees", "[]", "name"]) => text(true),
        ("meeting_notes", ["meeting_id" | "type" | "created_at" | "updated_at"]) => text(false),
        ("meeting_notes", ["notes" | "synced_at"]) => text(true),
        ("meeting_notes", ["transcript"]) => Some((Object, true)),
        ("meeting_notes", ["transcript", "segments"]) => Some((Array, false)),
        ("meeting_notes", ["transcript", "segments", "[]"]) => Some((Object, false)),
        ("meeting_notes", ["transcript", "segments", "[]", "text"]) => text(false),
        ("meeting_notes", ["transcript", "segments", "[]", "speaker"]) => text(true),
        ("meeting_notes", ["transcript", "segments", "[]", "startTime" | "endTime"]) => {
            Some((Number, true))
        }
        _ => None,
    }
}

/// Values of every JSON type, to put where another type is.
pub(super) fn replacements() -> Vec<Value> {
    vec![
        Value::Null,
        json!(true),
        json!(0),
        json!(-1.5),
        json!("x"),
        json!([]),
        json!({}),
        json!([1, "a"]),
        json!({ "k": 1 }),
    ]
}

/// What replacing the value at `path` by `new` must do.
pub(super) fn expect_swap(path: &[Seg], new: &Value) -> Expect {
    match slot(path) {
        None => Expect::Accept,
        Some((_, nullable)) if new.is_null() => {
            if nullable {
                Expect::Accept
            } else {
                Expect::Reject
            }
        }
        Some((kind, _)) if kind == kind_of(new) => Expect::Either,
        Some(_) => Expect::Reject,
    }
}
