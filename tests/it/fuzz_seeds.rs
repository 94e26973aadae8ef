//! The fuzz targets' checks (`fuzz/checks/`), replayed on stable over each
//! target's seed corpus (`fuzz/seeds/<target>/`) and over every one-byte
//! change of each seed: a regression corpus that `cargo test` runs, since
//! cargo-fuzz itself needs nightly.

#[path = "../../fuzz/checks/delta.rs"]
mod delta;
#[path = "../../fuzz/checks/envelope.rs"]
mod envelope;
#[path = "../../fuzz/checks/key_file.rs"]
mod key_file;

/// Runs `check` over every seed of `target`, and over each seed with each
/// of up to 128 of its bytes flipped in turn, spread over it.
fn replay(target: &str, check: fn(&[u8])) -> usize {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/seeds")
        .join(target);
    let mut runs = 0;
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let seed = std::fs::read(entry.unwrap().path()).unwrap();
        check(&seed);
        let step = (seed.len() / 128).max(1);
        for at in (0..seed.len()).step_by(step) {
            let mut mutated = seed.clone();
            mutated[at] ^= 0x20;
            check(&mutated);
            runs += 1;
        }
        runs += 1;
    }
    runs
}

#[test]
fn envelope_seeds_and_their_mutations_pass_the_envelope_check() {
    assert!(replay("envelope", envelope::check) > 1);
}

#[test]
fn key_file_seeds_and_their_mutations_pass_the_key_file_check() {
    assert!(replay("key_file", key_file::check) > 1);
}

#[test]
fn delta_seeds_and_their_mutations_pass_the_delta_check() {
    assert!(replay("delta", delta::check) > 1);
}

/// The seeds are what they say: a signed envelope verifies, a key file
/// reads, a delta applies to its base (so the mutations above start from
/// inputs that reach the deep paths).
#[test]
fn the_seeds_reach_past_the_parsers() {
    let seeds = |target: &str| {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fuzz/seeds")
            .join(target);
        std::fs::read_dir(dir)
            .unwrap()
            .map(|e| std::fs::read(e.unwrap().path()).unwrap())
            .collect::<Vec<_>>()
    };
    let verified = seeds("envelope").iter().any(|s| {
        let envelope = portfolio_wire::signed::Envelope::parse(s).unwrap();
        envelope::trusted().verify(&envelope).is_ok()
    });
    assert!(verified, "no envelope seed verifies");
    for seed in seeds("key_file") {
        let text = std::str::from_utf8(&seed).unwrap();
        portfolio_wire::signed::TrustedKeys::parse(text, "seed").unwrap();
    }
    let applied = seeds("delta").iter().any(|s| {
        let mut reader = &s[..];
        portfolio_wire::delta::read_header(&mut reader).is_ok()
            && portfolio_wire::delta::apply(
                delta::base_file(),
                delta::BASE.len() as u64,
                &mut reader,
                &mut std::io::sink(),
                1 << 20,
            )
            .is_ok()
    });
    assert!(applied, "no delta seed applies to its base");
}
