//! The one-pass walk held to serde_json, the reference: on every record
//! the generator writes (plain and `--text escapes`), and on records and
//! files mutated from them at random (seeded, so a failure repeats).
//!
//! What must hold: a record the walk takes is one the wire types take,
//! with the same served bytes, key and indexed texts in the builder; a
//! record it declines leaves the builder as it was; every generated record
//! is taken (the walk is the load's path, not a detour); and a file loads
//! with the same result, or is rejected with the same message, as the
//! whole-buffer parse that explains rejected files gives.

use portfolio_generate::{Options, Scale, TextStyle, snapshot_bytes};

use super::object::{self, Schema, Slots};
use crate::snapshot::batches::RecordSink;
use crate::snapshot::format::{
    Attendee, CompanyAttrs, FeedAttrs, FeedSource, MeetingAttrs, MeetingNoteAttrs, MetricAttrs,
    NoteAttrs, RoleAttrs, Segment, TaskAttrs, Transcript, ValueProposition,
};
use crate::snapshot::render::Render;
use crate::snapshot::stream;
use crate::store::{Builder, Collection, OneThread};

/// What the builder holds after the walk took the record, if it did, as
/// the load's step gives it: told the record's digest first.
fn one_pass(collection: Collection, bytes: &[u8]) -> Option<String> {
    let mut builder = Builder::default();
    builder.digest_next(stream::digest(bytes));
    if super::build(collection, bytes, &mut builder).is_err() {
        let mut untouched = Builder::default();
        untouched.digest_next(stream::digest(bytes));
        assert_eq!(
            builder.describe(),
            untouched.describe(),
            "a declined record leaves nothing behind: {}",
            String::from_utf8_lossy(bytes)
        );
        return None;
    }
    let ours = builder.describe();
    // Walked where it lies, with what follows it in a file after it, the
    // walk finds its end and takes its digest itself; cut short, it is
    // declined.
    let mut window = bytes.to_vec();
    window.extend_from_slice(b",\n{\"id\":");
    let mut builder = Builder::default();
    assert_eq!(
        super::build_first(collection, &window, &mut builder).ok(),
        Some(bytes.len())
    );
    assert_eq!(builder.describe(), ours);
    let cut = &bytes[..bytes.len() / 2 + bytes.len() % 7];
    assert!(super::build_first(collection, cut, &mut Builder::default()).is_err());
    Some(ours)
}

/// What the builder holds after serde_json and the wire types took the
/// record, if they did.
fn reference(collection: Collection, bytes: &[u8]) -> Option<String> {
    let mut builder = Builder::default();
    builder.digest_next(stream::digest(bytes));
    stream::build_parsed("t.json", collection, 0, bytes, &mut builder).ok()?;
    Some(builder.describe())
}

/// How the two paths judged a set of records.
#[derive(Debug, Default)]
struct Tally {
    both: usize,
    neither: usize,
    /// Good records the walk leaves to serde_json.
    declined_good: usize,
}

impl Tally {
    fn judge(&mut self, collection: Collection, bytes: &[u8]) {
        match (one_pass(collection, bytes), reference(collection, bytes)) {
            (Some(ours), Some(theirs)) => {
                assert_eq!(
                    ours,
                    theirs,
                    "{} record served otherwise: {}",
                    collection.name(),
                    String::from_utf8_lossy(bytes)
                );
                self.both += 1;
            }
            (Some(ours), None) => panic!(
                "the walk took a {} record that serde_json refuses: {}\n{ours}",
                collection.name(),
                String::from_utf8_lossy(bytes)
            ),
            (None, Some(_)) => self.declined_good += 1,
            (None, None) => self.neither += 1,
        }
    }
}

/// Each record of a snapshot: its collection, offset and bytes.
fn records_of(bytes: &[u8]) -> Vec<(Collection, u64, Vec<u8>)> {
    let mut records = Vec::new();
    let mut on = |collection, _, offset, record: &[u8]| {
        records.push((collection, offset, record.to_vec()));
        Ok(())
    };
    let streamed = stream::scan(
        "t.json",
        bytes,
        RecordSink::Digests(&mut on),
        &mut |_, _| {},
    );
    assert!(streamed.is_ok(), "the generator writes valid snapshots");
    records
}

fn generated(seed: u64, text: TextStyle) -> Vec<u8> {
    snapshot_bytes(&Options {
        text,
        ..Options::new(Scale::Small, seed)
    })
}

#[test]
fn every_generated_record_is_walked_as_serde_json_reads_it() {
    for text in [TextStyle::Plain, TextStyle::Escapes] {
        for seed in [42, 7] {
            let bytes = generated(seed, text);
            let records = records_of(&bytes);
            let mut tally = Tally::default();
            let mut seen = [0usize; Collection::COUNT];
            for (collection, _, record) in &records {
                tally.judge(*collection, record);
                seen[collection.index()] += 1;
            }
            assert_eq!(tally.both, records.len(), "{text:?} {seed}: {tally:?}");
            assert!(seen.iter().all(|&n| n > 0), "every collection: {seen:?}");
        }
    }
}

/// A small deterministic generator (xorshift): no crate, the same
/// failure every time.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n.max(1) as u64) as usize
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// Values put in place of others: every JSON kind, numbers in every form
/// (and out of range), timestamps in and out of the profile, ids, emails,
/// strings with every kind of escape, arrays standing for objects.
const VALUES: &[&str] = &[
    "null",
    "true",
    "false",
    "0",
    "-0",
    "12",
    "2.50",
    "-1.5e-7",
    "1E+300",
    "1e400",
    "-1e400",
    "1e-400",
    "01",
    "1.",
    ".5",
    "-",
    "123456789012345678901234567890",
    "0.1e1",
    "nul",
    "truex",
    r#""""#,
    r#""x""#,
    r#""2026-03-01T10:00:00Z""#,
    r#""2026-03-01T10:00:00.123456789123+02:00""#,
    r#""2026-03-01t10:00:00Z""#,
    r#""2026-03-01T10:00:00z""#,
    r#""2016-12-31T23:59:60Z""#,
    r#""0000-01-01T00:00:00Z""#,
    r#""2026-02-30T10:00:00Z""#,
    r#""2026-03-01T10:00:00""#,
    r#""2026-03-01T10:00:00\u005a""#,
    r#""notetool""#,
    r#""note\u0074ool""#,
    r#""ann@example.com""#,
    r#""not an email""#,
    r#""a\u0040b.c""#,
    r#""o'brien@[192.0.2.1]""#,
    r#""0190a3a4-1111-7abc-8def-000000000001""#,
    r#""0190A3A4-1111-7ABC-8DEF-000000000001""#,
    r#""00000000-0000-0000-0000-000000000000""#,
    r#""FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF""#,
    r#""0190a3a4-1111-7abc-8def-00000000000\u0031""#,
    r#""0190a3a4-1111-9abc-8def-000000000001""#,
    "[]",
    r#"["a"]"#,
    r#"["a", "b\n\u00e9"]"#,
    "[null]",
    "[1]",
    "[{}]",
    r#"[{"problem":"p","x":1,"icp":"\ud83d\ude80"}]"#,
    r#"[{"email":"e@x.io","organizer":true,"name":null}]"#,
    r#"[{"organizer":false,"email":"e@x.io","name":"N"}]"#,
    r#"[{"email":"e@x.io"}]"#,
    "[[]]",
    "{}",
    r#"{"a":1}"#,
    r#"{"segments":[]}"#,
    r#"{"segments":[{"speaker":null,"text":"t","endTime":2.50,"startTime":-0}]}"#,
    r#"{"segments":[{"text":"t","startTime":"1"}]}"#,
    r#"{"segments":null}"#,
    r#"{"segments":[],"segments":[]}"#,
    r#"["a","b","c"]"#,
    "[null,null,null]",
    r#"["e@x.io",true,"n"]"#,
    r#"["e@x.io",true]"#,
    r#""\ud83d\ude80""#,
    r#""\ud83d""#,
    r#""\ude80""#,
    r#""\ud83d\u0041""#,
    r#""\u0000\u001f\u007f\u2028""#,
    "\"tab\there\"",
    "\"\u{7f}\u{2028}é\"",
    r#""caf\u00e9 \"q\" \\ \/ \b\f\n\r\t""#,
    r#""\x""#,
    r#""\u12g4""#,
    r#"["\ud83d"]"#,
    r#"{"n\u0061me":"x"}"#,
    "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]",
    "  null  ",
    r#"{"a":1,"a":2}"#,
];

/// Member names put in place of others: the members of every record
/// kind, and names no record has.
const NAMES: &[&str] = &[
    "id",
    "attributes",
    "company_id",
    "name",
    "priority",
    "status",
    "type",
    "created_at",
    "opened_at",
    "published_at",
    "reported_at",
    "start_time",
    "end_time",
    "attendees",
    "meeting_id",
    "notes",
    "transcript",
    "synced_at",
    "updated_at",
    "value_numeric",
    "sources",
    "private",
    "labels",
    "value_propositions",
    "title",
    "unknown",
    "Name",
    "i\\u0064",
];

/// Where a record's values start (after a `:`, a `[` or a `,`) and where
/// its member names do, outside strings.
fn places(bytes: &[u8]) -> (Vec<usize>, Vec<usize>) {
    let (mut values, mut names) = (Vec::new(), Vec::new());
    let (mut in_string, mut escaped) = (false, false);
    let mut open = Vec::new();
    for (i, &b) in bytes.iter().enumerate() {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'{' | b'[' => open.push(b),
            b'}' | b']' => drop(open.pop()),
            _ => {}
        }
        match (b, open.last()) {
            (b':', _) | (b'[', _) | (b',', Some(b'[')) => values.push(i + 1),
            (b'{', _) | (b',', Some(b'{')) => names.push(i + 1),
            _ => {}
        }
    }
    (values, names)
}

/// Where the value (or member) at `start` ends, by the walk's own skip.
fn end_of_value(bytes: &[u8], start: usize) -> Option<usize> {
    let mut c = super::walk::Cursor { bytes, pos: start };
    c.skip().ok()?;
    Some(c.pos)
}

/// The member `"name": value` that starts at `start` (after blanks), and
/// where it ends.
fn member_at(bytes: &[u8], start: usize) -> Option<(usize, usize)> {
    let mut c = super::walk::Cursor { bytes, pos: start };
    if c.peek().ok()? != b'"' {
        return None;
    }
    let from = c.pos;
    c.string::<false>().ok()?;
    c.eat(b':').ok()?;
    c.skip().ok()?;
    Some((from, c.pos))
}

/// One random change to a record.
fn mutate(rng: &mut Rng, bytes: &mut Vec<u8>) {
    let (values, names) = places(bytes);
    let splice = |bytes: &mut Vec<u8>, from: usize, to: usize, with: &[u8]| {
        bytes.splice(from..to, with.iter().copied());
    };
    match rng.below(10) {
        // A value replaced.
        0..=2 if !values.is_empty() => {
            let at = *rng.pick(&values);
            let to = end_of_value(bytes, at).unwrap_or(at);
            splice(bytes, at, to, rng.pick(VALUES).as_bytes());
        }
        // A member dropped, given twice, or swapped with the next.
        3 if !names.is_empty() => {
            if let Some((from, to)) = member_at(bytes, *rng.pick(&names)) {
                let member = bytes[from..to].to_vec();
                match rng.below(3) {
                    0 => {
                        let comma = bytes[to..].iter().position(|&b| b == b',');
                        let to = comma.map_or(to, |k| to + k + 1);
                        bytes.drain(from..to);
                    }
                    1 => splice(bytes, to, to, &[b",".as_slice(), &member].concat()),
                    _ => {
                        let next = bytes[to..].iter().position(|&b| b == b',');
                        if let Some((a, b)) = next.and_then(|k| member_at(bytes, to + k + 1)) {
                            let other = bytes[a..b].to_vec();
                            splice(bytes, a, b, &member);
                            splice(bytes, from, to, &other);
                        }
                    }
                }
            }
        }
        // A member renamed.
        4 if !names.is_empty() => {
            if let Some((from, _)) = member_at(bytes, *rng.pick(&names)) {
                let len = bytes[from + 1..]
                    .iter()
                    .position(|&b| b == b'"')
                    .unwrap_or(0);
                let name = format!("\"{}\"", rng.pick(NAMES));
                splice(bytes, from, from + len + 2, name.as_bytes());
            }
        }
        // A member added, unknown or known.
        5 if !names.is_empty() => {
            let at = *rng.pick(&names);
            let member = format!("\"{}\":{},", rng.pick(NAMES), rng.pick(VALUES));
            splice(bytes, at, at, member.as_bytes());
        }
        // Blanks where JSON allows them.
        6 if !values.is_empty() => {
            let at = *rng.pick(&values);
            splice(bytes, at, at, rng.pick(&[" ", "\n\t", "\r\n  "]).as_bytes());
        }
        // A byte changed, dropped or added, anywhere.
        _ if !bytes.is_empty() => {
            let at = rng.below(bytes.len());
            let byte = *rng.pick(b"\"\\{}[],: \x01\xff\xc3\x80n0-e.uDd");
            match rng.below(3) {
                0 => bytes[at] = byte,
                1 => drop(bytes.remove(at)),
                _ => bytes.insert(at, byte),
            }
        }
        _ => {}
    }
}

#[test]
fn mutated_records_are_taken_only_as_serde_json_takes_them() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut tally = Tally::default();
    for text in [TextStyle::Plain, TextStyle::Escapes] {
        let records = records_of(&generated(3, text));
        for _ in 0..20_000 {
            let (collection, _, record) = rng.pick(&records);
            let mut record = record.clone();
            for _ in 0..1 + rng.below(3) {
                mutate(&mut rng, &mut record);
            }
            tally.judge(*collection, &record);
        }
    }
    // Both kinds are made, and the walk takes most good ones itself.
    assert!(tally.both > 10_000 && tally.neither > 20_000, "{tally:?}");
    assert!(tally.declined_good * 10 < tally.both, "{tally:?}");
}

#[test]
fn mutated_files_load_or_fail_as_the_whole_buffer_parse_says() {
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    for text in [TextStyle::Plain, TextStyle::Escapes] {
        let bytes = generated(5, text);
        let records = records_of(&bytes);
        for _ in 0..60 {
            let (_, offset, record) = rng.pick(&records);
            let mut changed = record.clone();
            mutate(&mut rng, &mut changed);
            let at = *offset as usize;
            let mut file = bytes.clone();
            file.splice(at..at + record.len(), changed.iter().copied());
            let loaded = crate::snapshot::load("t.json", &file);
            let parsed = crate::snapshot::load_buffer("t.json", &file, &OneThread, &mut |_, _| {});
            match (loaded, parsed) {
                (Ok(ours), Ok(theirs)) => {
                    assert_eq!(ours.warnings, theirs.warnings);
                    assert_eq!(ours.dataset.counts, theirs.dataset.counts);
                }
                (ours, theirs) => assert_eq!(
                    ours.err().map(|e| e.to_string()),
                    theirs.err().map(|e| e.to_string()),
                    "{}",
                    String::from_utf8_lossy(&changed)
                ),
            }
        }
    }
}

/// Records that serde reads but the walk leaves to it, and the forms
/// around them that the walk takes: the same either way.
#[test]
fn odd_good_records_are_served_alike_whichever_path_takes_them() {
    let id = "0190a3a4-1111-7abc-8def-000000000001";
    let cases = [
        (Collection::Companies, format!(r#"{{"id":"{id}"}}"#)),
        (
            Collection::Companies,
            format!(r#"{{"attributes":null,"id":"{id}"}}"#),
        ),
        (
            Collection::Companies,
            format!(
                r#"{{"attributes":{{"name":"Ac\u006de","extra":1,"domain":"d"}},"id":"{id}"}}"#
            ),
        ),
        (
            Collection::Companies,
            format!(r#"{{"id":"{id}","attributes":{{"value_propositions":[["p","s","i"]]}}}}"#),
        ),
        (
            Collection::Companies,
            format!(
                r#"{{"id":"{}","attributes":{{"n\u0061me":"x"}}}}"#,
                id.to_uppercase()
            ),
        ),
        (
            Collection::Tasks,
            format!(r#"["{id}",{{"company_id":"c","created_at":"2026-03-01T10:00:00Z"}}]"#),
        ),
        (
            Collection::Metrics,
            format!(
                r#"{{"attributes":{{"reported_at":"2026-03-01T10:00:00Z","value_numeric":-0.0e-0}},"company_id":"c","id":"{id}"}}"#
            ),
        ),
        (
            Collection::MeetingNotes,
            format!(
                r#"{{"id":"{id}","attributes":{{"meeting_id":"m","type":"notetool","notes":null,"transcript":{{"segments":[{{"text":"a","speaker":"s","x":[]}}]}},"synced_at":null,"created_at":"2026-03-01T10:00:00Z","updated_at":""}}}}"#
            ),
        ),
    ];
    for (collection, record) in cases {
        let theirs = reference(collection, record.as_bytes());
        assert!(theirs.is_some(), "serde_json takes {record}");
        if let Some(ours) = one_pass(collection, record.as_bytes()) {
            assert_eq!(Some(ours), theirs, "{record}");
        }
        // Through the load's own step, whichever path it takes.
        let mut builder = Builder::default();
        stream::build_record("t.json", collection, 0, record.as_bytes(), &mut builder).unwrap();
        let mut reference = Builder::default();
        reference.digest_next(stream::digest(record.as_bytes()));
        stream::build_parsed("t.json", collection, 0, record.as_bytes(), &mut reference).unwrap();
        assert_eq!(builder.describe(), reference.describe(), "{record}");
    }
}

/// Each schema names the members of its wire type, in its order, and
/// leaves out the same ones: an object with every member absent renders
/// alike both ways.
#[test]
fn schemas_render_as_the_wire_types_do() {
    fn absent(schema: &Schema) -> String {
        let mut out = Vec::new();
        // Requirements aside: only the rendering is compared.
        let _ = object::absent(schema, &mut out, &Slots::default());
        String::from_utf8(out).unwrap()
    }
    fn rendered(value: &impl Render) -> String {
        let mut out = Vec::new();
        value.render(&mut out);
        String::from_utf8(out).unwrap()
    }
    let pairs = [
        (absent(&object::COMPANY), rendered(&CompanyAttrs::default())),
        (absent(&object::TASK), rendered(&TaskAttrs::default())),
        (absent(&object::ROLE), rendered(&RoleAttrs::default())),
        (absent(&object::FEED), rendered(&FeedAttrs::default())),
        (absent(&object::NOTE), rendered(&NoteAttrs::default())),
        (absent(&object::METRIC), rendered(&MetricAttrs::default())),
        (absent(&object::MEETING), rendered(&MeetingAttrs::default())),
        (
            absent(&object::MEETING_NOTE),
            rendered(&MeetingNoteAttrs::default()),
        ),
        (
            absent(&object::VALUE_PROPOSITION),
            rendered(&ValueProposition::default()),
        ),
        (
            absent(&object::FEED_SOURCE),
            rendered(&FeedSource::default()),
        ),
        (absent(&object::ATTENDEE), rendered(&Attendee::default())),
        (
            absent(&object::TRANSCRIPT),
            rendered(&Transcript::default()),
        ),
        (absent(&object::SEGMENT), rendered(&Segment::default())),
    ];
    for (ours, theirs) in pairs {
        assert_eq!(ours, theirs);
    }
}
