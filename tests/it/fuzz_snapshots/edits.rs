//! Type swaps (a value of another JSON type at a random path, judged against
//! the schema) and random edits of the bytes.

use serde_json::Value;

use super::bases::*;
use super::judge::*;
use super::schema::*;
use super::*;

/// `cases` values of another JSON type at random paths of `doc`.
fn swap_round(run: &mut Run, doc: &Value, name: &str, seed: u64, cases: usize) {
    let mut paths = Vec::new();
    all_paths(doc, &mut Vec::new(), &mut paths);
    paths.retain(|p| !p.is_empty());
    let mut rng = Rng::new(seed);
    let replacements = replacements();
    for _ in 0..cases {
        let path = rng.pick(&paths).clone();
        let mut mutated = doc.clone();
        let target = at_mut(&mut mutated, &path);
        let old = kind_of(target);
        let choices: Vec<&Value> = replacements.iter().filter(|v| kind_of(v) != old).collect();
        let new = (*rng.pick(&choices)).clone();
        *target = new.clone();
        let bytes = serde_json::to_vec_pretty(&mutated).expect("serialize");
        let what = format!("{name}: {} = {new} (was {old:?})", show(&path));
        run.check(
            &what,
            &bytes,
            expect_swap(&path, &new),
            place_of(&path),
            &[],
        );
    }
}

#[test]
fn a_value_of_another_type_is_rejected_where_the_format_forbids_it_and_loaded_whole_elsewhere() {
    let mut run = Run::default();
    swap_round(&mut run, &small_base(), "small", 0x7377_6170, 600);
    let generated: Value =
        serde_json::from_slice(generated_base()).expect("the generated snapshot is JSON");
    swap_round(&mut run, &generated, "acme.json", 0x7377_6171, 40);
    let cases = run.cases;
    let loaded = run.finish("type swaps");
    assert!(
        loaded > 20 && cases - loaded > 200,
        "both outcomes are exercised: {loaded} of {cases} loaded"
    );
}

/// The unmutated snapshots load, whole: the baseline of every mutation.
#[test]
fn the_snapshots_mutations_start_from_load_whole() {
    let mut run = Run::default();
    run.check("small", &small_base_bytes(), Expect::Accept, None, &[]);
    run.check("acme.json", generated_base(), Expect::Accept, None, &[]);
    run.finish("the unmutated snapshots");
}

/// Tokens to splice into a document.
const TOKENS: &[&[u8]] = &[
    b"{",
    b"}",
    b"[",
    b"]",
    b",",
    b":",
    b"\"",
    b"\\",
    b"null",
    b"true",
    b"0",
    b"-",
    b"1e400",
    b"\"id\":",
    b"\"attributes\":{}",
    b"\\u0000",
    b"\\ud800",
    b" ",
    b"\n",
    b"\x00",
    b"\xff",
];

/// One random edit of `bytes`: a byte changed, a range deleted or
/// repeated, or a token inserted.
fn random_edit(rng: &mut Rng, bytes: &[u8]) -> (Vec<u8>, String) {
    let at = rng.below(bytes.len());
    let len = 1 + rng.below(16.min(bytes.len() - at));
    let mut out = bytes.to_vec();
    let what = match rng.below(4) {
        0 => {
            let byte = rng.next() as u8;
            out[at] = byte;
            format!("byte {at} set to {byte:#04x}")
        }
        1 => {
            out.drain(at..at + len);
            format!("bytes {at}..{} deleted", at + len)
        }
        2 => {
            out.splice(at..at, bytes[at..at + len].iter().copied());
            format!("bytes {at}..{} repeated", at + len)
        }
        _ => {
            let token = rng.pick(TOKENS);
            out.splice(at..at, token.iter().copied());
            format!("{:?} inserted at byte {at}", String::from_utf8_lossy(token))
        }
    };
    (out, what)
}

#[test]
fn random_edits_are_rejected_naming_the_file_or_load_whole() {
    let mut rng = Rng::new(0x6564_6974);
    let mut run = Run::default();
    for (name, base, rounds) in [
        ("small", small_base_bytes(), 500),
        ("acme.json", generated_base().to_vec(), 25),
    ] {
        for _ in 0..rounds {
            let mut bytes = base.clone();
            let mut edits = Vec::new();
            for _ in 0..1 + rng.below(3) {
                let (edited, what) = random_edit(&mut rng, &bytes);
                bytes = edited;
                edits.push(what);
            }
            run.check(
                &format!("{name}: {}", edits.join(", then ")),
                &bytes,
                Expect::Either,
                None,
                &[],
            );
        }
    }
    assert!(
        run.finish("random edits") > 0,
        "no edit left a loadable document"
    );
}
