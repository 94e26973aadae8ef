//! Tests of [`Packed::rebuild`] against the packing it stands for: random
//! collections, random edits (records changed, inserted, deleted, moved
//! in a chain or in the record order, all changed), every shape; the
//! rebuilt packing must be, bit for bit, a full packing of the new records
//! with the old code, cost only the fragments an edit touches, and give
//! pages that inflate to their plain text.

use crate::GzipPage;
use crate::bits::read;
use crate::pack::{Packed, Packing, pack};
use crate::train::{Recorded, Trained};

/// A xorshift: the cases are many and reproducible by their seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// A collection version: items by record index (an item keeps its id
/// across versions) and chain orders of item ids.
#[derive(Clone)]
struct Version {
    ids: Vec<u32>,
    records: Vec<Vec<u8>>,
    chains: Vec<Vec<u32>>,
}

/// A task-like record of item `id`, some of its text repeated from the
/// item before it (as neighbours in a list often share).
fn record(rng: &mut Rng, id: u32) -> Vec<u8> {
    const WORDS: [&str; 8] = [
        "review",
        "contract",
        "é ü",
        "board",
        "\\\"q\\\"",
        "plan",
        "日本",
        "x",
    ];
    let words = 3 + rng.below(40);
    let text: Vec<&str> = (0..words).map(|_| WORDS[rng.below(WORDS.len())]).collect();
    let status = ["open", "done", "blocked"][rng.below(3)];
    format!(
        r#"{{"id":"{id:08}","attributes":{{"status":"{status}","text":"{}","n":{}}}}}"#,
        text.join(" "),
        rng.next() % 1000
    )
    .into_bytes()
}

fn version(rng: &mut Rng, n: usize) -> Version {
    let ids: Vec<u32> = (0..n as u32).collect();
    let records = ids.iter().map(|&id| record(rng, id)).collect();
    // Chain 0 holds every item, shuffled a little; chain 1 every third.
    let mut all = ids.clone();
    for _ in 0..n / 4 {
        let (a, b) = (rng.below(n), rng.below(n));
        all.swap(a, b);
    }
    let thirds = all.iter().copied().filter(|id| id % 3 == 0).collect();
    Version {
        ids,
        records,
        chains: vec![all, thirds],
    }
}

#[derive(Clone, Copy, Debug)]
enum Edit {
    Change,
    Insert,
    Delete,
    /// An item moved in chain 0.
    Move,
    /// Two items swap record indices.
    Swap,
    ChangeAll,
}

/// `old` after `edit`, and the `previous` the rebuild is given.
fn edited(rng: &mut Rng, old: &Version, edits: &[Edit]) -> (Version, Vec<u32>) {
    let mut new = old.clone();
    let mut next_id = old.ids.iter().max().map_or(0, |m| m + 1);
    for &edit in edits {
        let n = new.ids.len();
        match edit {
            Edit::Change if n > 0 => {
                let i = rng.below(n);
                new.records[i] = record(rng, new.ids[i]);
            }
            Edit::Insert => {
                let (id, i) = (next_id, rng.below(n + 1));
                next_id += 1;
                new.ids.insert(i, id);
                new.records.insert(i, record(rng, id));
                for chain in &mut new.chains {
                    let at = rng.below(chain.len() + 1);
                    chain.insert(at, id);
                }
            }
            Edit::Delete if n > 0 => {
                let i = rng.below(n);
                let id = new.ids.remove(i);
                new.records.remove(i);
                for chain in &mut new.chains {
                    chain.retain(|&c| c != id);
                }
            }
            Edit::Move if !new.chains[0].is_empty() => {
                let chain = &mut new.chains[0];
                let id = chain.remove(rng.below(chain.len()));
                let at = rng.below(chain.len() + 1);
                chain.insert(at, id);
            }
            Edit::Swap if n > 0 => {
                let (a, b) = (rng.below(n), rng.below(n));
                new.ids.swap(a, b);
                new.records.swap(a, b);
            }
            Edit::ChangeAll => {
                for i in 0..n {
                    new.records[i] = record(rng, new.ids[i]);
                }
            }
            _ => {}
        }
    }
    let previous = new
        .ids
        .iter()
        .zip(&new.records)
        .map(|(id, bytes)| match old.ids.iter().position(|o| o == id) {
            Some(o) if old.records[o] == *bytes => o as u32,
            _ => Packed::CHANGED,
        })
        .collect();
    (new, previous)
}

/// Chain orders of record indices, from orders of ids.
fn orders(v: &Version) -> Vec<Vec<u32>> {
    let index = |id: &u32| v.ids.iter().position(|i| i == id).expect("an item") as u32;
    v.chains
        .iter()
        .map(|c| c.iter().map(index).collect())
        .collect()
}

/// A shape of packing: depths, trim, solo fragments, whether they end on
/// a literal.
type Shape = (&'static [usize], usize, bool, bool);

const SHAPES: [Shape; 5] = [
    (&[1], 0, false, false),
    (&[1], 1, true, false),
    (&[1, 2, 4, 8], 0, true, false),
    (&[1, 2, 4, 8], 1, false, false),
    (&[1, 2], 0, true, true),
];

/// `make` given the packing of `v`'s orders in `shape`.
fn in_shape<T>(
    v: &Version,
    (depths, trim, solo, openable): Shape,
    make: impl FnOnce(&Packing<'_>) -> T,
) -> T {
    let orders = orders(v);
    let chains: Vec<&[u32]> = orders.iter().map(Vec::as_slice).collect();
    make(&Packing {
        chains: &chains,
        depths,
        trim,
        solo,
        openable,
    })
}

fn packed(v: &Version, shape: Shape, old: Option<(&Packed, &[u32])>) -> Packed {
    let threads = 1 + v.records.len() % 3;
    let built = in_shape(v, shape, |packing| match old {
        None => Packed::build(&v.records, packing, threads, &(), &|| true),
        Some((old, previous)) => {
            Packed::rebuild(old, &v.records, previous, packing, threads, &(), &|| true)
        }
    });
    built.expect("nothing asks it to stop")
}

/// A full packing of `v` with `code_of`'s code: what a rebuild stands for.
fn with_code(v: &Version, shape: Shape, code_of: &Packed) -> Packed {
    in_shape(v, shape, |packing| {
        let trained = Trained {
            code: code_of.code.clone(),
            recorded: Recorded::default(),
        };
        pack(&v.records, packing, trained, &(), 2, &(), &|| true).expect("built")
    })
}

/// Pages of `v` from `packed`: stretches of each chain, vouched for or
/// not, and scattered records; each must inflate to its plain text.
fn check_pages(rng: &mut Rng, v: &Version, packed: &Packed, trim: usize) {
    let plain = |i: usize| crate::pack::trimmed(&v.records[i], trim);
    let orders = orders(v);
    let n = v.records.len();
    let mut lists: Vec<(Vec<u32>, Option<usize>)> = Vec::new();
    for (c, order) in orders.iter().enumerate() {
        for _ in 0..4 {
            let from = rng.below(order.len());
            let to = (from + 1 + rng.below(60)).min(order.len());
            lists.push((order[from..to].to_vec(), Some(c)));
            lists.push((order[from..to].to_vec(), None));
        }
        lists.push((order.clone(), Some(c)));
    }
    if n > 0 {
        let scattered = (0..rng.below(30)).map(|_| rng.below(n) as u32).collect();
        lists.push((scattered, None));
    }
    for (list, hint) in lists {
        let mut text = b"{\"data\":[".to_vec();
        let records: Vec<&[u8]> = list.iter().map(|&i| plain(i as usize)).collect();
        text.extend_from_slice(&records.join(&b","[..]));
        text.extend_from_slice(b"]}");
        let mut gz = GzipPage::new(0);
        gz.text(packed, b"{\"data\":[");
        gz.list(packed, &list, hint, plain);
        gz.text(packed, b"]}");
        assert_eq!(crate::tests::gunzip(&gz.finish()), text, "list {list:?}");
    }
    // A record left open, as a meeting ahead of its notes: from its
    // (copied or compressed) solo fragment where it ends on a literal.
    for i in (0..n).step_by(7) {
        let record = plain(i);
        let open = &record[..record.len().saturating_sub(1)];
        let mut gz = GzipPage::new(0);
        gz.text(packed, b"{\"data\":");
        gz.open_record(packed, i, record);
        gz.text(packed, b",\"notes\":[]}}");
        let text = [&b"{\"data\":"[..], open, b",\"notes\":[]}}"].concat();
        assert_eq!(crate::tests::gunzip(&gz.finish()), text, "record {i} open");
    }
}

#[test]
fn a_rebuild_is_a_full_packing_with_the_old_code_and_pages_inflate() {
    let edits = [
        Edit::Change,
        Edit::Insert,
        Edit::Delete,
        Edit::Move,
        Edit::Swap,
    ];
    for seed in 1..=48u64 {
        let rng = &mut Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let shape = SHAPES[seed as usize % SHAPES.len()];
        let old = version(rng, [0, 1, 5, 90, 200][seed as usize % 5]);
        let mut script: Vec<Edit> = (0..rng.below(6)).map(|_| edits[rng.below(5)]).collect();
        if seed % 8 == 0 {
            script.push(Edit::ChangeAll);
        }
        let (new, previous) = edited(rng, &old, &script);
        let old_packed = packed(&old, shape, None);
        let rebuilt = packed(&new, shape, Some((&old_packed, &previous)));
        let changed = previous.iter().filter(|&&o| o == Packed::CHANGED).count();
        let fell_back = changed * 2 > new.records.len();
        let expected = if fell_back {
            packed(&new, shape, None)
        } else {
            with_code(&new, shape, &old_packed)
        };
        assert!(rebuilt.identical(&expected), "seed {seed}, {script:?}");
        if !fell_back {
            assert!(rebuilt.compressed() <= expected.compressed(), "seed {seed}");
        }
        check_pages(rng, &new, &rebuilt, shape.1);
        // And a second version on top of the rebuilt one.
        let (newer, previous) = edited(rng, &new, &[Edit::Change, Edit::Insert]);
        let again = packed(&newer, shape, Some((&rebuilt, &previous)));
        check_pages(rng, &newer, &again, shape.1);
    }
}

/// Bits `from..to` of a stream, as 0s and 1s.
fn bits((src, from, to): (&[u8], u64, u64)) -> Vec<u32> {
    (from..to).map(|b| read(src, b, 1)).collect()
}

#[test]
fn a_change_costs_the_fragments_it_touches_and_copies_the_rest() {
    let shape: Shape = (&[1, 2, 4, 8], 0, true, false);
    let rng = &mut Rng(7);
    let old = version(rng, 300);
    let old_packed = packed(&old, shape, None);
    // Every solo fragment, and four rungs of 300 and of 100 positions.
    assert_eq!(old_packed.compressed(), 300 + 4 * (299 + 99));

    // Unchanged: nothing compressed, everything as it was.
    let (same, previous) = edited(rng, &old, &[]);
    let rebuilt = packed(&same, shape, Some((&old_packed, &previous)));
    assert_eq!(rebuilt.compressed(), 0);
    assert!(rebuilt.identical(&old_packed));

    // One record changed, in the middle of chain 0 and in chain 1 if its
    // id is a multiple of 3: its solo fragment, and per rung of depth d
    // its own and the d after it.
    let id = 150u32;
    let mut one = old.clone();
    one.records[id as usize] = record(rng, id);
    let previous: Vec<u32> = (0..300)
        .map(|i| if i == id { Packed::CHANGED } else { i })
        .collect();
    let rebuilt = packed(&one, shape, Some((&old_packed, &previous)));
    let orders = orders(&one);
    let mut expected = 1;
    let mut untouched = 0;
    for (c, order) in orders.iter().enumerate() {
        let Some(k) = order.iter().position(|&i| i == id) else {
            continue;
        };
        for (r, depth) in [1, 2, 4, 8].into_iter().enumerate() {
            let touched = |p: usize| p >= k && p <= k + depth && p > 0;
            expected += (1..order.len()).filter(|&p| touched(p)).count();
            for p in (1..order.len()).filter(|&p| !touched(p)) {
                let old_bits = bits(old_packed.chained(c, r, p, p + 1));
                assert_eq!(
                    bits(rebuilt.chained(c, r, p, p + 1)),
                    old_bits,
                    "{c} {r} {p}"
                );
                untouched += 1;
            }
        }
    }
    assert_eq!(rebuilt.compressed(), expected);
    assert!(untouched > 1000, "{untouched}");
    for i in (0..300).filter(|&i| i != id as usize) {
        let solo = |p: &Packed| p.solo(i).map(|(s, f, t, ..)| bits((s, f, t)));
        assert_eq!(solo(&rebuilt), solo(&old_packed), "record {i}");
    }
    assert!(rebuilt.identical(&with_code(&one, shape, &old_packed)));
    check_pages(rng, &one, &rebuilt, 0);
}

#[test]
fn an_insertion_or_a_deletion_rechains_the_records_after_it() {
    let shape: Shape = (&[1, 2, 4, 8], 0, false, false);
    let rng = &mut Rng(11);
    // One chain, in record order: the new record goes at position 100.
    let mut old = version(rng, 200);
    old.chains = vec![old.ids.clone()];
    let old_packed = packed(&old, shape, None);

    let mut inserted = old.clone();
    inserted.ids.insert(100, 1000);
    inserted.records.insert(100, record(rng, 1000));
    inserted.chains[0].insert(100, 1000);
    let previous: Vec<u32> = (0..201u32)
        .map(|i| match i {
            ..100 => i,
            100 => Packed::CHANGED,
            _ => i - 1,
        })
        .collect();
    let rebuilt = packed(&inserted, shape, Some((&old_packed, &previous)));
    // Per rung of depth d: the new record's fragment and the d after it.
    assert_eq!(rebuilt.compressed(), 2 + 3 + 5 + 9);
    assert!(rebuilt.identical(&with_code(&inserted, shape, &old_packed)));
    check_pages(rng, &inserted, &rebuilt, 0);

    let mut deleted = old.clone();
    deleted.ids.remove(100);
    deleted.records.remove(100);
    deleted.chains[0].remove(100);
    let previous: Vec<u32> = (0..199u32)
        .map(|i| if i < 100 { i } else { i + 1 })
        .collect();
    let rebuilt = packed(&deleted, shape, Some((&old_packed, &previous)));
    // Per rung of depth d: the d records after the gap.
    assert_eq!(rebuilt.compressed(), 1 + 2 + 4 + 8);
    assert!(rebuilt.identical(&with_code(&deleted, shape, &old_packed)));
    check_pages(rng, &deleted, &rebuilt, 0);
}

#[test]
fn another_shape_or_most_records_changed_packs_afresh() {
    let rng = &mut Rng(3);
    let old = version(rng, 120);
    let old_packed = packed(&old, (&[1], 0, true, false), None);
    let (same, previous) = edited(rng, &old, &[]);
    for shape in [
        (&[1, 2][..], 0, true, false),
        (&[1][..], 1, true, false),
        (&[1][..], 0, false, false),
        (&[1][..], 0, true, true),
    ] {
        let rebuilt = packed(&same, shape, Some((&old_packed, &previous)));
        assert!(rebuilt.identical(&packed(&same, shape, None)), "{shape:?}");
    }
    let (changed, previous) = edited(rng, &old, &[Edit::ChangeAll]);
    let rebuilt = packed(
        &changed,
        (&[1], 0, true, false),
        Some((&old_packed, &previous)),
    );
    assert!(rebuilt.identical(&packed(&changed, (&[1], 0, true, false), None)));
    // A wrong number of entries in `previous`, too.
    let rebuilt = packed(
        &same,
        (&[1], 0, true, false),
        Some((&old_packed, &previous[1..])),
    );
    assert!(rebuilt.identical(&packed(&same, (&[1], 0, true, false), None)));
}

#[test]
fn a_rebuild_told_to_stop_gives_up() {
    let rng = &mut Rng(5);
    let old = version(rng, 50);
    let old_packed = packed(&old, (&[1], 0, true, false), None);
    let (new, previous) = edited(rng, &old, &[Edit::Change]);
    let orders = orders(&new);
    let chains: Vec<&[u32]> = orders.iter().map(Vec::as_slice).collect();
    let packing = Packing {
        chains: &chains,
        depths: &[1],
        trim: 0,
        solo: true,
        openable: false,
    };
    let rebuild = |go: &(dyn Fn() -> bool + Sync)| {
        Packed::rebuild(&old_packed, &new.records, &previous, &packing, 1, &(), go)
    };
    assert!(rebuild(&|| false).is_none());
    assert!(rebuild(&|| true).is_some());
}
