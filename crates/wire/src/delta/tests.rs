//! The delta format's tests: numbers, round trips of every kind of change, a
//! one-record change as a few ops, tampering and bounds refused.

use super::*;

#[test]
fn numbers_round_trip_and_a_65th_bit_is_refused() {
    for n in [0, 1, 127, 128, 300, u64::from(u32::MAX), u64::MAX] {
        let mut bytes = Vec::new();
        write_number(&mut bytes, n).unwrap();
        assert_eq!(read_number(&mut &bytes[..]).unwrap(), n);
    }
    // Ten bytes whose last holds more than bit 63.
    let mut too_long = vec![0xff; 9];
    too_long.push(0x02);
    assert!(matches!(
        read_number(&mut &too_long[..]),
        Err(DeltaError::Corrupt(_))
    ));
}

fn company(n: usize, name: &str) -> String {
    format!(
        r#"{{"id":"0190a3a4-1111-7abc-8def-{n:012}","attributes":{{"name":"{name}","domain":"acme.test"}}}}"#
    )
}

fn snapshot(version: &str, companies: &[String]) -> String {
    format!(
        "{{\"format_version\":1,\"version\":\"{version}\",\"workspace\":{{\"id\":\"ws-1\"}},\"api_keys\":[],\n\"companies\":[\n{}\n]}}\n",
        companies.join(",\n")
    )
}

fn spans(text: &str) -> Vec<RecordSpan> {
    crate::snapshot::digests("t.json", text.as_bytes())
        .unwrap_or_else(|e| panic!("{e}"))
        .spans
}

/// The delta from `old` to `new`, and what it encoded.
fn delta(old: &str, new: &str) -> (Vec<u8>, Encoded) {
    let base = Layout::read(&spans(old), old.as_bytes()).unwrap();
    let header = DeltaHeader {
        delta_format: FORMAT,
        base: "ab".repeat(32),
        base_len: base.len,
        base_sha256: base.sha256.clone(),
    };
    let mut out = Vec::new();
    let encoded = encode(&header, &base, &spans(new), new.as_bytes(), &mut out).unwrap();
    (out, encoded)
}

fn apply_to(old: &str, delta: &[u8]) -> Result<Vec<u8>, DeltaError> {
    apply_within(old, delta, 1 << 30)
}

fn apply_within(old: &str, delta: &[u8], at_most: u64) -> Result<Vec<u8>, DeltaError> {
    let path = std::env::temp_dir().join(format!(
        "delta-test-{}-{:x}",
        std::process::id(),
        Sha256::digest(delta)[0] as u64 + delta.len() as u64 * 256
    ));
    std::fs::write(&path, old).unwrap();
    let base = std::fs::File::open(&path).unwrap();
    let mut reader = delta;
    let result = read_header(&mut reader).and_then(|header| {
        let sha = hex(&Sha256::digest(old));
        header.check_base(&"ab".repeat(32), old.len() as u64, &sha)?;
        let mut out = Vec::new();
        apply(&base, old.len() as u64, &mut reader, &mut out, at_most).map(|_| out)
    });
    let _ = std::fs::remove_file(&path);
    result
}

fn records(n: usize, name: &str) -> Vec<String> {
    (0..n).map(|i| company(i, &format!("{name} {i}"))).collect()
}

/// `n` records, and the same with the one at `at` changed.
fn one_changed(n: usize, at: usize) -> (Vec<String>, Vec<String>) {
    let old = records(n, "Acme");
    let mut changed = old.clone();
    changed[at] = company(at, "Changed");
    (old, changed)
}

#[test]
fn round_trips_every_kind_of_change_exactly() {
    let (old_records, changed) = one_changed(50, 20);
    let old = snapshot("v1", &old_records);
    let mut added = old_records.clone();
    added.insert(10, company(500, "New"));
    added.push(company(501, "Last"));
    let mut removed = old_records.clone();
    removed.remove(0);
    removed.remove(30);
    let mut reordered = old_records.clone();
    reordered.reverse();
    let cases = [
        ("same", old.clone()),
        ("one changed", snapshot("v2", &changed)),
        ("added", snapshot("v2", &added)),
        ("removed", snapshot("v2", &removed)),
        ("reordered", snapshot("v2", &reordered)),
        ("all new", snapshot("v2", &records(30, "Globex"))),
        ("none", snapshot("v2", &[])),
        (
            "spaced",
            snapshot("v2", &old_records).replace(",\n", ",\n  "),
        ),
    ];
    for (what, new) in cases {
        let (delta, encoded) = delta(&old, &new);
        let got = apply_to(&old, &delta).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert!(got == new.as_bytes(), "{what}");
        assert_eq!(encoded.target_len, new.len() as u64, "{what}");
        assert_eq!(
            encoded.copied + encoded.inserted,
            new.len() as u64,
            "{what}"
        );
    }
    // From nothing in common, too.
    let (delta, _) = delta(&snapshot("v0", &[]), &old);
    assert_eq!(
        apply_to(&snapshot("v0", &[]), &delta).unwrap(),
        old.as_bytes()
    );
}

#[test]
fn a_change_of_one_record_is_a_few_ops_whatever_the_size() {
    let (old_records, changed) = one_changed(2000, 1000);
    let old = snapshot("v1", &old_records);
    let (same, encoded) = delta(&old, &old);
    assert_eq!(
        (encoded.ops, encoded.inserted),
        (2, 0),
        "one copy and the end"
    );
    assert!(same.len() < 400, "{}", same.len());
    let new = snapshot("v2", &changed);
    let (_, encoded) = delta(&old, &new);
    // The header (its version changed), a copy, the record, a copy.
    assert!(encoded.ops <= 6, "{encoded:?}");
    assert!(encoded.inserted < 300, "{encoded:?}");
}

#[test]
fn tampering_is_refused() {
    let (old_records, changed) = one_changed(20, 5);
    let old = snapshot("v1", &old_records);
    let new = snapshot("v2", &changed);
    let (good, _) = delta(&old, &new);
    assert_eq!(apply_to(&old, &good).unwrap(), new.as_bytes());
    // A changed byte anywhere past the magic is refused, whatever it hits.
    for at in (8..good.len()).step_by(3) {
        let mut bad = good.clone();
        bad[at] ^= 0x20;
        assert!(apply_to(&old, &bad).is_err(), "byte {at} of {}", good.len());
    }
    // Cut short, or longer than its end.
    for len in [0, 5, good.len() / 2, good.len() - 1] {
        assert!(apply_to(&old, &good[..len]).is_err(), "cut at {len}");
    }
    // A result longer than it may be stops as it would pass the bound,
    // before a byte past it is written.
    let exact = new.len() as u64;
    assert_eq!(apply_within(&old, &good, exact).unwrap(), new.as_bytes());
    let refused = apply_within(&old, &good, exact - 1).unwrap_err();
    assert!(
        matches!(&refused, DeltaError::Corrupt(why) if why.contains("writes past")),
        "{refused:?}"
    );
    let mut longer = good.clone();
    longer.push(b'I');
    assert!(matches!(
        apply_to(&old, &longer),
        Err(DeltaError::Corrupt(_))
    ));
    // Another base of the same length: refused by its header, and by
    // the result where the header is not checked.
    let other = old.replace("Acme 1", "Acmf 1");
    assert!(matches!(
        apply_to(&other, &good),
        Err(DeltaError::Mismatch(_))
    ));
    let path = std::env::temp_dir().join(format!("delta-other-{}", std::process::id()));
    std::fs::write(&path, &other).unwrap();
    let mut reader = &good[..];
    read_header(&mut reader).unwrap();
    let base = std::fs::File::open(&path).unwrap();
    let got = apply(
        &base,
        other.len() as u64,
        &mut reader,
        &mut Vec::new(),
        1 << 30,
    );
    assert!(matches!(got, Err(DeltaError::Result(_))), "{got:?}");
    std::fs::remove_file(&path).unwrap();
}
