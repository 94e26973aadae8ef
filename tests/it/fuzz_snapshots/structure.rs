//! Deep nesting (10,000 levels) and huge strings (50 MB), and how short and
//! clear rejection messages are.

use std::panic::{AssertUnwindSafe, catch_unwind};

use portfolio_domain::snapshot::load as load_snapshot;
use portfolio_domain::store::OffsetPage;
use portfolio_domain::store::id::parse_id;
use serde_json::Value;

use super::bases::*;
use super::judge::*;
use super::*;
use crate::util::*;

/// `depth` times `open`, then `center`, then `depth` times `close`.
pub(super) fn nested(depth: usize, open: &str, center: &str, close: &str) -> Vec<u8> {
    [open.repeat(depth), center.to_owned(), close.repeat(depth)]
        .concat()
        .into_bytes()
}

#[test]
fn ten_thousand_levels_of_nesting_are_rejected_or_ignored_never_a_crash() {
    let doc = small_base();
    let arrays = nested(10_000, "[", "", "]");
    let objects = nested(10_000, "{\"a\":", "1", "}");
    let (a, o) = ("10,000 nested arrays", "10,000 nested objects");
    let mut run = Run::default();
    // Where the format ignores the value.
    run.ignored(&doc, "deep", &arrays, a);
    run.ignored(&doc, "deep", &objects, o);
    run.ignored(&doc, "tasks[0].attributes.deep", &arrays, a);
    run.ignored(&doc, "companies[0].deep", &objects, o);
    // Where it does not.
    run.check(
        "the document is 10,000 nested arrays",
        &arrays,
        Expect::Reject,
        None,
        &[],
    );
    run.check(
        "the document is 10,000 nested objects",
        &objects,
        Expect::Reject,
        None,
        &[],
    );
    for at in [
        "companies[0].attributes.name",
        "companies[1].attributes.labels",
        "tasks[0]",
        "metrics[0].attributes.value_numeric",
        "format_version",
    ] {
        run.raw(&doc, at, &arrays, a, Expect::Reject);
    }
    run.raw(&doc, "tasks[0].attributes", &objects, o, Expect::Reject);
    run.raw(
        &doc,
        "meeting_notes[1].attributes.transcript",
        &objects,
        o,
        Expect::Reject,
    );
    let unclosed = [&arrays[..10_000], b"1"].concat();
    let bytes = raw_at(&doc, "tasks", &unclosed);
    run.check(
        "tasks: 10,000 unclosed arrays",
        &bytes,
        Expect::Reject,
        None,
        &[],
    );
    let whole = raw_at(&doc, "tasks", &arrays);
    let open = whole
        .windows(2)
        .position(|w| w == b"[[")
        .expect("the arrays")
        + 10_000;
    let what = "the file ends inside 10,000 nested arrays";
    run.check(what, &whole[..open], Expect::Reject, None, &["truncated"]);
    run.finish("deep nesting");
}

/// A JSON string literal of `len` characters: letters, with an escape
/// (`\n`) every `escape_every` characters when that is not 0.
pub(super) fn huge_string(len: usize, escape_every: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + len / escape_every.max(1) + 2);
    out.push(b'"');
    for i in 0..len {
        if escape_every > 0 && i % escape_every == escape_every - 1 {
            out.extend_from_slice(b"\\n");
        } else {
            out.push(b'a' + (i % 26) as u8);
        }
    }
    out.push(b'"');
    out
}

/// The size of a huge string (50 MB).
const HUGE: usize = 50 * 1024 * 1024;

/// A smaller huge string (4 MB, far past every length limit of the format)
/// for the cases that cost several passes over the file.
const LARGE: usize = 4 * 1024 * 1024;

/// How many times `needle` occurs in `haystack`.
fn occurrences(haystack: &[u8], needle: &[u8]) -> usize {
    haystack
        .windows(needle.len())
        .filter(|w| *w == needle)
        .count()
}

#[test]
fn huge_strings_load_whole_or_are_rejected() {
    let doc = small_base();
    let mut run = Run::default();

    // 50 MB in a company description: served whole, byte for byte.
    let plain = huge_string(HUGE, 0);
    let bytes = raw_at(&doc, "companies[1].attributes.description", &plain);
    run.cases += 1;
    match catch_unwind(AssertUnwindSafe(|| load_snapshot(FILE, &bytes))) {
        Err(p) => run.problems.push(format!(
            "a 50 MB description: panic: {}",
            panic_message(p.as_ref())
        )),
        Ok(Err(e)) => run.problems.push(format!(
            "a 50 MB description: rejected: {}",
            short(&e.to_string())
        )),
        Ok(Ok(loaded)) => {
            let ds = &loaded.dataset;
            let body = ds
                .company(parse_id(&uuid(11)).expect("an id"))
                .unwrap_or_default();
            let page = ds.portfolio(
                None,
                OffsetPage {
                    limit: 100,
                    offset: 0,
                },
            );
            if occurrences(&body, &plain) != 1
                || occurrences(&page, &plain) != 1
                || ds.counts.companies != 2
            {
                run.problems
                    .push("a 50 MB description is not served whole".to_owned());
            }
        }
    }
    drop((bytes, plain));

    // 4 MB strings where they are allowed: loaded and checked whole.
    let large = huge_string(LARGE, 0);
    let escaped = huge_string(LARGE, 1000);
    let fraction = [
        b"\"2026-03-01T10:00:00.".as_slice(),
        &vec![b'7'; LARGE],
        b"Z\"",
    ]
    .concat();
    run.raw(
        &doc,
        "tasks[1].attributes.title",
        &escaped,
        "4 MB with an escape every 1000 bytes",
        Expect::Accept,
    );
    run.raw(
        &doc,
        "meeting_notes[1].attributes.notes",
        &large,
        "4 MB",
        Expect::Accept,
    );
    // RFC 3339 allows any number of fraction digits.
    run.raw(
        &doc,
        "tasks[1].attributes.created_at",
        &fraction,
        "4 MB of fraction digits",
        Expect::Accept,
    );
    run.ignored(&doc, "blob", &large, "4 MB");
    let title = raw_at(&doc, "tasks[1].attributes.title", &escaped);
    if let Ok(loaded) = load_snapshot(FILE, &title) {
        let body = loaded
            .dataset
            .task(parse_id(&uuid(12)).expect("an id"))
            .unwrap_or_default();
        let body: Value = serde_json::from_slice(&body).unwrap_or_default();
        let len = body["data"]["attributes"]["title"]
            .as_str()
            .map_or(0, |t| t.chars().count());
        if len != LARGE {
            run.problems.push(format!(
                "the 4 MB title is served with {len} characters, not {LARGE}"
            ));
        }
    }

    // Where the format bounds or checks the text: rejected.
    for at in [
        "version",
        "workspace.id",
        "api_keys[0].sha256",
        "tasks[1].attributes.created_at",
        "tasks[1].id",
        "feed[1].attributes.private",
    ] {
        run.raw(&doc, at, &large, "4 MB", Expect::Reject);
    }
    run.finish("huge strings");
}

/// Rejections of huge or odd input are reported in a message an operator
/// can read (it is logged and served on `/snapshots`) that says what is
/// wrong: never the offending text itself, megabytes of it.
#[test]
fn rejection_messages_are_short_and_say_what_is_wrong() {
    let doc = small_base();
    let large = huge_string(LARGE, 0);
    let arrays = nested(10_000, "[", "", "]");
    let email = [b"[{\"organizer\":true,\"email\":".as_slice(), &large, b"}]"].concat();
    let cases: Vec<(&str, Vec<u8>, &[&str])> = vec![
        (
            "a 50 MB task created_at that is no timestamp",
            raw_at(
                &doc,
                "tasks[1].attributes.created_at",
                &huge_string(HUGE, 0),
            ),
            &["tasks", "created_at"],
        ),
        (
            "a 4 MB task id",
            raw_at(&doc, "tasks[1].id", &large),
            &["tasks", "id"],
        ),
        (
            "a 4 MB string where feed.private wants a boolean",
            raw_at(&doc, "feed[1].attributes.private", &large),
            &["feed", "private"],
        ),
        (
            "a 4 MB attendee email",
            raw_at(&doc, "meetings[1].attributes.attendees", &email),
            &["meetings", "email"],
        ),
        (
            "a 4 MB string as the whole document",
            large.clone(),
            &["JSON object"],
        ),
        (
            "format_version is 10,000 nested arrays",
            raw_at(&doc, "format_version", &arrays),
            &["format_version"],
        ),
        (
            "a task is 10,000 nested arrays",
            raw_at(&doc, "tasks[0]", &arrays),
            &["tasks"],
        ),
        (
            "the document is 10,000 nested arrays",
            arrays.clone(),
            &["JSON object"],
        ),
        (
            "the document is the array [2]",
            b"[2]".to_vec(),
            &["JSON object"],
        ),
    ];
    let mut problems = Vec::new();
    for (what, bytes, mentions) in &cases {
        match catch_unwind(AssertUnwindSafe(|| load_snapshot(FILE, bytes))) {
            Err(p) => problems.push(format!("{what}: panic: {}", panic_message(p.as_ref()))),
            Ok(Ok(_)) => problems.push(format!("{what}: loaded, though it must be rejected")),
            Ok(Err(e)) => {
                let text = e.to_string();
                if text.len() > MAX_MESSAGE {
                    problems.push(format!(
                        "{what}: a {} byte message: {}",
                        text.len(),
                        short(&text)
                    ));
                } else if let Some(word) = mentions.iter().find(|w| !text.contains(**w)) {
                    problems.push(format!("{what}: the message does not say {word:?}: {text}"));
                }
            }
        }
    }
    assert_no_problems(&problems, cases.len(), "rejection messages");
}
