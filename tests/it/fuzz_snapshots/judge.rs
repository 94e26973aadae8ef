//! Judging a load (rejected naming the file, or loaded whole, never a
//! panic), raw edits of a serialized document, and the runner of mutations.

use std::panic::{AssertUnwindSafe, catch_unwind};

use portfolio_domain::snapshot::load as load_snapshot;
use serde_json::{Value, json};

use super::complete::*;
use super::schema::*;
use super::*;

/// What a load of mutated bytes may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Expect {
    Reject,
    Accept,
    Either,
}

/// Where a rejection must point: the collection (top-level key) and, for a
/// record, its position.
pub(super) type Place<'a> = Option<(&'a str, Option<usize>)>;

/// Keeps the report readable when a message or document is huge.
pub(super) fn short(text: &str) -> String {
    if text.len() <= 300 {
        return text.to_owned();
    }
    let mut end = 300;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}... ({} bytes)", &text[..end], text.len())
}

pub(super) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "<non-text panic>".to_owned())
}

/// Loads `bytes` and judges the outcome; `Ok(true)` if it loaded. A loaded
/// dataset is compared with `reference` when given, else with the bytes
/// themselves: `reference` is for documents the test's own JSON reader
/// cannot hold (nesting past its recursion limit, numbers past `f64`) in
/// places the format ignores.
fn judge(
    bytes: &[u8],
    reference: Option<&Value>,
    what: &str,
    expect: Expect,
    place: Place<'_>,
    mentions: &[&str],
) -> Result<bool, String> {
    let result = catch_unwind(AssertUnwindSafe(|| load_snapshot(FILE, bytes))).map_err(|p| {
        format!(
            "{what}: load_snapshot panicked: {}",
            panic_message(p.as_ref())
        )
    })?;
    match result {
        Err(e) => {
            let text = e.to_string();
            if expect == Expect::Accept {
                return Err(format!(
                    "{what}: rejected, though it must load: {}",
                    short(&text)
                ));
            }
            if e.file != FILE || !text.starts_with(&format!("{FILE}: ")) {
                return Err(format!(
                    "{what}: the error does not name the file: {}",
                    short(&text)
                ));
            }
            if let Some((collection, index)) = place {
                let location = e.location.as_deref();
                if location.map(|l| l.collection.as_str()) != Some(collection)
                    || !text.contains(collection)
                {
                    return Err(format!(
                        "{what}: the error does not name the collection {collection}: {}",
                        short(&text)
                    ));
                }
                if index.is_some() && location.and_then(|l| l.index) != index {
                    return Err(format!(
                        "{what}: the error does not name the record {collection}[{}]: {}",
                        index.unwrap_or_default(),
                        short(&text)
                    ));
                }
            }
            if let Some(word) = mentions.iter().find(|w| !text.contains(**w)) {
                return Err(format!(
                    "{what}: the error does not mention {word:?}: {}",
                    short(&text)
                ));
            }
            Ok(false)
        }
        Ok(loaded) => {
            if expect == Expect::Reject {
                return Err(format!("{what}: loaded, though it must be rejected"));
            }
            let doc = match reference {
                Some(doc) => doc.clone(),
                None => serde_json::from_slice(bytes)
                    .or_else(|_| serde_json::from_str(&String::from_utf8_lossy(bytes)))
                    .map_err(|e| {
                        format!("{what}: loaded, but the test cannot read the document: {e}")
                    })?,
            };
            check_complete(&loaded.dataset, &doc)
                .map_err(|p| format!("{what}: loaded, but {p}"))?;
            Ok(true)
        }
    }
}

/// Fails the test listing every problem, if there are any.
pub(super) fn assert_no_problems(problems: &[String], cases: usize, what: &str) {
    assert!(
        problems.is_empty(),
        "{what}: {} of {cases} mutations went wrong:\n{}",
        problems.len(),
        problems
            .iter()
            .take(40)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// The placeholder that raw edits replace.
const MARK: &str = "\u{1}MARK\u{1}";

/// A path written as text: `tasks[1].attributes.created_at`.
pub(super) fn path(text: &str) -> Vec<Seg> {
    text.split(['.', '['])
        .filter(|s| !s.is_empty())
        .map(|s| match s.strip_suffix(']') {
            Some(i) => Seg::Index(i.parse().expect("an index")),
            None => Seg::Key(s.to_owned()),
        })
        .collect()
}

/// Serializes `doc` with the value at `at` replaced by the raw bytes `raw`.
pub(super) fn raw_at(doc: &Value, at: &str, raw: &[u8]) -> Vec<u8> {
    let mut doc = doc.clone();
    *at_mut(&mut doc, &path(at)) = json!(MARK);
    let text = serde_json::to_vec(&doc).expect("serialize");
    replace_once(
        &text,
        &serde_json::to_vec(&json!(MARK)).expect("serialize"),
        raw,
    )
}

fn replace_once(haystack: &[u8], needle: &[u8], with: &[u8]) -> Vec<u8> {
    let at = haystack
        .windows(needle.len())
        .position(|w| w == needle)
        .expect("the placeholder is in the text");
    [&haystack[..at], with, &haystack[at + needle.len()..]].concat()
}

/// Serializes `doc` with `member` (raw `"key":value` text) added first to
/// the object at `at`: the way to write a duplicate key.
pub(super) fn member_at(doc: &Value, at: &str, member: &str) -> Vec<u8> {
    member_raw_at(doc, at, member.as_bytes())
}

pub(super) fn member_raw_at(doc: &Value, at: &str, member: &[u8]) -> Vec<u8> {
    let mut object = doc.clone();
    let text = serde_json::to_vec(at_mut(&mut object, &path(at))).expect("serialize");
    let rest = text.strip_prefix(b"{").expect("an object");
    let sep: &[u8] = if rest == b"}" { b"" } else { b"," };
    raw_at(doc, at, &[b"{", member, sep, rest].concat())
}

/// `doc` with `null` at `at`, a key added where needed: what a document
/// whose value at `at` the format ignores must load as.
fn nulled(doc: &Value, at: &str) -> Value {
    let mut doc = doc.clone();
    *at_mut(&mut doc, &path(at)) = Value::Null;
    doc
}

/// Runs mutations and collects what went wrong.
#[derive(Default)]
pub(super) struct Run {
    pub(super) cases: usize,
    pub(super) loaded: usize,
    pub(super) problems: Vec<String>,
}

impl Run {
    pub(super) fn check(
        &mut self,
        what: &str,
        bytes: &[u8],
        expect: Expect,
        place: Place<'_>,
        mentions: &[&str],
    ) {
        self.check_as(what, bytes, None, expect, place, mentions);
    }

    pub(super) fn check_as(
        &mut self,
        what: &str,
        bytes: &[u8],
        reference: Option<&Value>,
        expect: Expect,
        place: Place<'_>,
        mentions: &[&str],
    ) {
        self.cases += 1;
        match judge(bytes, reference, what, expect, place, mentions) {
            Ok(true) => self.loaded += 1,
            Ok(false) => {}
            Err(problem) => self.problems.push(problem),
        }
    }

    /// Puts `raw` at `at` of `doc`: a rejection must name the record at `at`.
    pub(super) fn raw(&mut self, doc: &Value, at: &str, raw: &[u8], shown: &str, expect: Expect) {
        let bytes = raw_at(doc, at, raw);
        self.check(
            &format!("{at} = {shown}"),
            &bytes,
            expect,
            place_of(&path(at)),
            &[],
        );
    }

    /// Puts `raw` at `at`, a place the format ignores: the load may fail
    /// (naming the file) or hold `doc` without it.
    pub(super) fn ignored(&mut self, doc: &Value, at: &str, raw: &[u8], shown: &str) {
        let reference = nulled(doc, at);
        let bytes = raw_at(&reference, at, raw);
        self.check_as(
            &format!("{at} = {shown}"),
            &bytes,
            Some(&reference),
            Expect::Either,
            None,
            &[],
        );
    }

    pub(super) fn finish(self, what: &str) -> usize {
        assert_no_problems(&self.problems, self.cases, what);
        self.loaded
    }
}
