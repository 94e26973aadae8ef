//! Tests of the symbols [`train`] keeps for the packing: a packing that
//! writes them is, bit for bit, one that parses every record again (its
//! fragments, tables and pages), on any number of threads; they are kept
//! only for streams parsed whole, and take at most about a word a byte.

use super::*;
use crate::GzipPage;
use crate::pack::{Packed, Packing, build, trimmed};
use crate::tests::gunzip;

type Records = Vec<Vec<u8>>;

/// `n` JSON-like records of about `words` words each, drawn from a small
/// vocabulary (so that records repeat themselves and their neighbours),
/// every seventh a copy of the one before, every thirteenth empty.
fn records(seed: u32, n: usize, words: usize) -> Records {
    const WORDS: [&str; 10] = [
        "status", "todo", "done", "review", "contract", "renewal", "aaaa", "x", "title", "plan",
    ];
    let mut x = seed | 1;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        x as usize
    };
    let mut out: Records = Vec::with_capacity(n);
    for i in 0..n {
        let record = match i % 13 {
            12 => Vec::new(),
            _ if i % 7 == 6 => out[i - 1].clone(),
            _ => {
                let len = words / 2 + next() % (words + 1);
                let text: Vec<&str> = (0..len).map(|_| WORDS[next() % WORDS.len()]).collect();
                format!(r#"{{"id":"{i:08}","text":"{}"}}"#, text.join(" ")).into_bytes()
            }
        };
        out.push(record);
    }
    out
}

/// Chain orders of `n` records: all of them descending, every third
/// ascending then the rest descending, a few, one record, none.
fn orders(n: usize) -> Vec<Vec<u32>> {
    let all: Vec<u32> = (0..n as u32).rev().collect();
    let (mut by3, rest): (Vec<u32>, Vec<u32>) = (0..n as u32).partition(|i| i % 3 == 0);
    by3.extend(rest.iter().rev());
    let few: Vec<u32> = (0..n as u32).step_by(5).take(9).collect();
    vec![all, by3, few, vec![0], vec![]]
}

/// Builds `r` with and without the kept symbols and checks that the two
/// are the same, bit for bit, pages included; returns what training kept.
fn same_with_and_without(r: &Records, packing: &Packing<'_>, threads: usize) -> Recorded {
    let with = build(r, packing, threads, &(), &|| true, true).expect("built");
    let without = build(r, packing, threads, &(), &|| true, false).expect("built");
    let what = format!(
        "{} records, {} chains, depths {:?}, trim {}, solo {}, openable {}, {threads} threads",
        r.len(),
        packing.chains.len(),
        packing.depths,
        packing.trim,
        packing.solo,
        packing.openable
    );
    assert!(with.identical(&without), "{what}");
    assert_eq!(with.compressed(), without.compressed(), "{what}");
    let record = |i: usize| trimmed(&r[i], packing.trim);
    let mut lists: Vec<(Vec<u32>, Option<usize>)> = vec![(
        (0..r.len() as u32)
            .map(|i| i * 7 % r.len() as u32)
            .collect(),
        None,
    )];
    for (c, order) in packing.chains.iter().enumerate() {
        lists.push((order[..order.len().min(60)].to_vec(), Some(c)));
    }
    for (list, hint) in &lists {
        let page = |packed: &Packed| {
            let mut gz = GzipPage::new(0);
            gz.text(packed, b"[");
            gz.list(packed, list, *hint, record);
            gz.text(packed, b"]");
            gz.finish()
        };
        let (a, b) = (page(&with), page(&without));
        assert_eq!(a, b, "{what}: list {list:?}");
        let plain: Vec<&[u8]> = list.iter().map(|&i| record(i as usize)).collect();
        assert_eq!(
            gunzip(&a),
            [&b"["[..], &plain.join(&b","[..]), b"]"].concat()
        );
    }
    let (n, record) = (r.len(), |i: usize| trimmed(&r[i], packing.trim));
    train(&record, n, packing.chains, packing.solo, threads, true).recorded
}

#[test]
fn kept_symbols_pack_as_parsing_again_does() {
    for (seed, n, words) in [(1, 1, 30), (2, 2, 30), (3, 9, 200), (4, 300, 40)] {
        let r = records(seed, n, words);
        let orders = orders(n);
        let all: Vec<&[u32]> = orders.iter().map(Vec::as_slice).collect();
        let chain_sets: [&[&[u32]]; 3] = [&[], &all[..1], &all];
        // Solo fragments that end on a literal too: kept symbols and a
        // parse are cut there alike.
        for (chains, solo, trim, openable) in [
            (chain_sets[0], true, 0, false),
            (chain_sets[0], true, 0, true),
            (chain_sets[1], true, 3, true),
            (chain_sets[1], false, 0, false),
            (chain_sets[2], true, 0, false),
            (chain_sets[2], false, 3, false),
        ] {
            let packing = Packing {
                chains,
                depths: &[1, 2, 4, 8],
                trim,
                solo,
                openable,
            };
            for threads in [1, 3] {
                let kept = same_with_and_without(&r, &packing, threads);
                let record = |i: usize| trimmed(&r[i], trim);
                // Every record of every stream was kept: the packing
                // parsed none of them again for its solo fragments or
                // first rung.
                for i in 0..n {
                    assert_eq!(kept.solo(i).is_some(), solo, "record {i}");
                    if let Some(symbols) = kept.solo(i) {
                        assert!(symbols.len() <= record(i).len());
                    }
                }
                for (c, order) in chains.iter().enumerate() {
                    assert!(kept.chained(c, 0).is_none());
                    for k in 1..order.len() {
                        let symbols = kept.chained(c, k).expect("kept");
                        assert!(symbols.len() <= record(order[k] as usize).len());
                    }
                }
                let plain: usize = (0..n).map(|i| record(i).len()).sum();
                let bound = 2 * (plain + n) * (1 + chains.len());
                assert!(kept.words() <= bound, "{} words", kept.words());
            }
        }
    }
}

#[test]
fn nothing_is_kept_past_the_sample_limits() {
    let r = records(5, SAMPLE + 1, 2);
    let few: Vec<u32> = (0..40).collect();
    let all: Vec<u32> = (0..r.len() as u32).rev().collect();
    // Sampled every other record (solo and `all`); `few` is sampled whole,
    // and kept.
    let packing = Packing {
        chains: &[&all, &few],
        depths: &[1, 2],
        trim: 0,
        solo: true,
        openable: false,
    };
    let kept = same_with_and_without(&r, &packing, 2);
    assert!(kept.solo(0).is_none() && kept.chained(0, 1).is_none());
    assert!((1..40).all(|k| kept.chained(1, k).is_some()));
    assert!(kept.words() < 2 * SAMPLE);

    // Just over SAMPLE_BYTES, in fewer records than SAMPLE.
    let mut r = records(6, 600, 400);
    let mut plain = 0;
    let over = r.iter().position(|b| {
        plain += b.len();
        plain > SAMPLE_BYTES
    });
    r.truncate(over.expect("enough records") + 1);
    let all: Vec<u32> = (0..r.len() as u32).collect();
    for solo in [true, false] {
        let packing = Packing {
            chains: &[&all],
            depths: &[1, 2],
            trim: 1,
            solo,
            openable: false,
        };
        let kept = same_with_and_without(&r, &packing, 2);
        assert_eq!(kept.words(), 0);
    }

    // One record larger than SAMPLE_BYTES: sampled whole, but not kept.
    let big = vec![records(7, 1, 2 * SAMPLE_BYTES / 7).concat()];
    assert!(big[0].len() > SAMPLE_BYTES);
    let packing = Packing {
        chains: &[],
        depths: &[1],
        trim: 0,
        solo: true,
        openable: false,
    };
    assert_eq!(same_with_and_without(&big, &packing, 1).words(), 0);
}
