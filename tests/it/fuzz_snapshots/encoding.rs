//! Invalid UTF-8, duplicate keys, and numbers out of range.

use portfolio_domain::snapshot::load as load_snapshot;
use portfolio_domain::store::id::parse_id;
use serde_json::json;

use super::bases::*;
use super::judge::*;
use super::schema::*;
use super::*;
use crate::util::*;

/// Byte sequences that are not UTF-8: a stray continuation byte, an
/// overlong encoding, a surrogate, a cut sequence, bytes past U+10FFFF.
const NOT_UTF8: &[&[u8]] = &[
    b"\xff",
    b"\x80",
    b"\xc0\x80",
    b"\xed\xa0\x80",
    b"\xe2\x82",
    b"\xf4\x90\x80\x80",
    b"\xf8\x88\x80\x80\x80",
    b"\xfe\xfe\xff\xff",
];

#[test]
fn invalid_utf8_is_rejected_in_what_is_served_and_never_served() {
    let doc = small_base();
    let mut run = Run::default();
    for bad in NOT_UTF8 {
        let shown = format!("a string holding the bytes {bad:x?}");
        // Inside served strings: rejected, naming the record.
        let raw = [b"\"ok ".as_slice(), bad, b" ok\""].concat();
        for at in [
            "companies[1].attributes.name",
            "tasks[1].attributes.title",
            "tasks[0].attributes.created_at",
            "feed[1].id",
            "meeting_notes[1].attributes.notes",
            "workspace.name",
            "version",
        ] {
            run.raw(&doc, at, &raw, &shown, Expect::Reject);
        }
        // In an attribute's name.
        let member = [b"\"ti".as_slice(), bad, b"tle\":\"t\""].concat();
        let bytes = member_raw_at(&doc, "tasks[1].attributes", &member);
        let place = Some(("tasks", Some(1)));
        run.check(
            &format!("an attribute name holding {bad:x?}"),
            &bytes,
            Expect::Either,
            place,
            &[],
        );
        // Between tokens.
        let text = serde_json::to_vec_pretty(&doc).expect("serialize");
        let at = text.iter().position(|&c| c == b'\n').expect("a newline");
        let bytes = [&text[..at], bad, &text[at..]].concat();
        run.check(
            &format!("the bytes {bad:x?} between tokens"),
            &bytes,
            Expect::Reject,
            None,
            &[],
        );
    }
    // At random positions of both snapshots: whatever loads is valid and whole.
    let mut rng = Rng::new(0x7574_6638);
    for (name, text, rounds) in [
        ("small", small_base_bytes(), 300),
        ("acme.json", generated_base().to_vec(), 30),
    ] {
        for _ in 0..rounds {
            let at = rng.below(text.len());
            let bad = rng.pick(NOT_UTF8);
            let bytes = [&text[..at], bad, &text[at..]].concat();
            run.check(
                &format!("{name}: {bad:x?} inserted at byte {at}"),
                &bytes,
                Expect::Either,
                None,
                &[],
            );
        }
    }
    run.finish("invalid UTF-8");
}

#[test]
fn duplicate_keys_are_rejected_naming_the_record() {
    let doc = small_base();
    let mut rng = Rng::new(0x6475_7073);
    let mut run = Run::default();
    // Rejected, saying so; api_keys errors never quote the file (a pasted
    // key must not reach the logs), so they cannot say what was duplicated.
    let dup = |run: &mut Run, at: &str, member: &str, what: &str| {
        let place = place_of(&path(at)).map(|(c, i)| (c.to_owned(), i));
        let place = place.as_ref().map(|(c, i)| (c.as_str(), *i));
        let quiet = place.is_some_and(|(c, _)| c == "api_keys");
        let mentions: &[&str] = if quiet { &[] } else { &["duplicate"] };
        run.check(
            &format!("{at}: {what}"),
            &member_at(&doc, at, member),
            Expect::Reject,
            place,
            mentions,
        );
    };
    for collection in COLLECTIONS {
        for (index, record) in doc[collection].as_array().into_iter().flatten().enumerate() {
            let at = format!("{collection}[{index}]");
            let id = record["id"].to_string();
            let other = uuid(900 + rng.below(50) as u64);
            dup(
                &mut run,
                &at,
                &format!("\"id\":\"{other}\""),
                "a second, different id",
            );
            dup(&mut run, &at, &format!("\"id\":{id}"), "the id twice");
            dup(
                &mut run,
                &at,
                &format!("\"i\\u0064\":{id}"),
                "the id twice, once escaped",
            );
            dup(
                &mut run,
                &at,
                "\"attributes\":{}",
                "a second attributes object",
            );
            let attrs = record["attributes"]
                .as_object()
                .cloned()
                .unwrap_or_default();
            if let Some((name, value)) = attrs.iter().nth(rng.below(attrs.len().max(1))) {
                let member = format!("{}:{value}", json!(name));
                let attrs_at = format!("{at}.attributes");
                if slot(&path(&format!("{attrs_at}.{name}"))).is_some() {
                    dup(&mut run, &attrs_at, &member, &format!("{name} twice"));
                } else {
                    let bytes = member_at(&doc, &attrs_at, &member);
                    let what = format!("{attrs_at}: {name}, unknown, twice");
                    run.check(&what, &bytes, Expect::Either, None, &[]);
                }
            }
            // An unknown key twice: the format ignores it.
            let bytes = member_at(&doc, &at, "\"extra\":1,\"extra\":2");
            run.check(
                &format!("{at}: an unknown key twice"),
                &bytes,
                Expect::Either,
                None,
                &[],
            );
        }
    }
    dup(
        &mut run,
        "companies[1].attributes.value_propositions[0]",
        "\"problem\":\"q\"",
        "problem twice",
    );
    dup(
        &mut run,
        "meeting_notes[1].attributes.transcript.segments[0]",
        "\"text\":\"t\"",
        "text twice",
    );
    dup(
        &mut run,
        "meetings[1].attributes.attendees[0]",
        "\"organizer\":false",
        "organizer twice",
    );
    dup(&mut run, "workspace", "\"id\":\"ws-other\"", "id twice");
    dup(
        &mut run,
        "api_keys[0]",
        &format!("\"sha256\":\"{}\"", key_hash("cura_other")),
        "sha256 twice",
    );
    // At the top level, before and after the first occurrence.
    let text = serde_json::to_string(&doc).expect("serialize");
    for key in [
        "format_version",
        "version",
        "workspace",
        "api_keys",
        "companies",
        "tasks",
        "meeting_notes",
    ] {
        let value = doc[key].to_string();
        let before = format!("{{\"{key}\":{value},{}", &text[1..]);
        run.check(
            &format!("top-level {key} twice"),
            before.as_bytes(),
            Expect::Reject,
            None,
            &["duplicate"],
        );
        let second = if doc[key].is_array() { "[]" } else { &value };
        let after = format!("{},\"{key}\":{second}}}", &text[..text.len() - 1]);
        let what = format!("top-level {key} twice, the second {second}");
        run.check(
            &what,
            after.as_bytes(),
            Expect::Reject,
            None,
            &["duplicate"],
        );
    }
    let ignored = format!("{{\"x-exporter\":1,\"x-exporter\":2,{}", &text[1..]);
    run.check(
        "an unknown top-level key twice",
        ignored.as_bytes(),
        Expect::Either,
        None,
        &[],
    );
    // Ids that differ only in case are the same id: a repeat.
    let mut upper = doc.clone();
    upper["tasks"][1]["id"] = json!(uuid(2).to_uppercase());
    let bytes = serde_json::to_vec(&upper).expect("serialize");
    let place = Some(("tasks", Some(1)));
    run.check(
        "tasks[1] has the id of tasks[0] in upper case",
        &bytes,
        Expect::Reject,
        place,
        &["repeats"],
    );
    run.finish("duplicate keys");
}

/// A large integer that is a finite double (about 1.2e29), not an exact one.
pub(super) const BIG: &str = "123456789012345678901234567890";

#[test]
fn numbers_out_of_range_are_rejected_and_large_finite_ones_served_as_written() {
    let doc = small_base();
    let value = "metrics[1].attributes.value_numeric";
    let start = "meeting_notes[1].attributes.transcript.segments[0].startTime";
    let huge_digits = format!("1{}", "0".repeat(10_000));
    let tiny_digits = format!("0.{}1", "0".repeat(10_000));
    let mut run = Run::default();
    for (number, expect) in [
        ("1e400", Expect::Reject),
        ("-1e400", Expect::Reject),
        ("1.7976931348623159e308", Expect::Reject),
        (huge_digits.as_str(), Expect::Reject),
        (BIG, Expect::Accept),
        ("-123456789012345678901234567890.5", Expect::Accept),
        ("1e-400", Expect::Accept),
        (tiny_digits.as_str(), Expect::Accept),
        ("-0", Expect::Accept),
        ("1E+2", Expect::Accept),
        ("1.7976931348623157e308", Expect::Accept),
    ] {
        let (raw, shown) = (number.as_bytes(), short(number));
        run.raw(&doc, value, raw, &shown, expect);
        run.raw(&doc, start, raw, &shown, expect);
        // Where a number is ignored, and where no number belongs.
        run.ignored(&doc, "x-count", raw, &shown);
        run.ignored(&doc, "metrics[1].attributes.x-weight", raw, &shown);
        for at in [
            "format_version",
            "tasks[1].attributes.title",
            "feed[1].attributes.private",
            "companies[1].id",
        ] {
            run.raw(&doc, at, raw, &shown, Expect::Reject);
        }
    }
    // Large and odd finite numbers are served exactly as written.
    let company = parse_id(&uuid(11)).expect("an id");
    let meeting = parse_id(&uuid(16)).expect("an id");
    for number in [
        BIG,
        "-123456789012345678901234567890.5",
        "1e-400",
        "1E+2",
        "-0",
    ] {
        for (at, key) in [(value, "value_numeric"), (start, "startTime")] {
            run.cases += 1;
            let body = load_snapshot(FILE, &raw_at(&doc, at, number.as_bytes())).map(|loaded| {
                let ds = loaded.dataset;
                let mut body = ds.company_metrics(company).unwrap_or_default().to_vec();
                body.extend_from_slice(&ds.meeting(meeting, true).unwrap_or_default());
                body
            });
            let want = format!("\"{key}\":{number},");
            match body {
                Err(e) => run.problems.push(format!("{at} = {number}: rejected: {e}")),
                Ok(body) if !String::from_utf8_lossy(&body).contains(&want) => {
                    run.problems
                        .push(format!("{at} = {number} is not served as written"));
                }
                Ok(_) => {}
            }
        }
    }
    run.finish("numbers out of range");
}
