//! Criterion benches of the codec alone, on synthetic task-like records
//! (about 400 bytes of JSON each, every tenth sharing its title and text
//! with its predecessor): packing a collection (solo fragments and one
//! chain order, on one thread), and assembling a 50-record page from it,
//! as a stretch of the chain (one solo fragment and one run) and as
//! scattered records (50 solo fragments, each shifted into place).
//! And a new version of a larger collection (50,000 records of about 600
//! bytes, packed as the server packs tasks: one chain order, no solo
//! fragments, one thread), after one record changed and after every
//! record changed: packed afresh (`repack/build_*`) and rebuilt from the
//! previous version's packing (`repack/rebuild_*`, which packs afresh when
//! every record changed).
//! The server's own benches (`cargo bench --bench store -- respond/`)
//! measure whole answers on a generated dataset.
//!
//! Run: `cargo bench -p gzip-fragments` (`-- repack/` for the versions).

use std::hint::black_box;
use std::io::Read;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use gzip_fragments::{GzipPage, Packed, Packing};

const RECORDS: usize = 20_000;
/// Records of a version, and words of text in each (about 600 bytes).
const VERSION_RECORDS: usize = 50_000;
const VERSION_WORDS: usize = 60;
const PAGE: usize = 50;

type Records = Vec<Vec<u8>>;

/// `count` deterministic records: ids, dates, a status out of four,
/// `words` words drawn by a xorshift from a small vocabulary.
fn records(count: usize, words: usize) -> Records {
    const WORDS: [&str; 16] = [
        "review",
        "contract",
        "renewal",
        "quarterly",
        "board",
        "draft",
        "call",
        "budget",
        "hiring",
        "plan",
        "vendor",
        "audit",
        "launch",
        "follow-up",
        "notes",
        "roadmap",
    ];
    let mut x = 0x9E37_79B9u32;
    let mut word = || {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        WORDS[(x % 16) as usize]
    };
    let mut out: Vec<Vec<u8>> = Vec::with_capacity(count);
    let mut text = String::new();
    for i in 0..count {
        if i % 10 != 1 {
            text = (0..words).map(|_| word()).collect::<Vec<_>>().join(" ");
        }
        let status = ["open", "in_progress", "blocked", "done"][i % 4];
        out.push(
            format!(
                r#"{{"id":"{i:032x}","attributes":{{"companyId":"{:032x}","title":"{} {}","status":"{status}","dueDate":"2025-{:02}-{:02}T09:00:00Z","text":"{text}"}}}}"#,
                i / 40,
                word(),
                word(),
                i % 12 + 1,
                i % 28 + 1,
            )
            .into_bytes(),
        );
    }
    out
}

fn benches(c: &mut Criterion) {
    let records = records(RECORDS, 30);
    let bytes: usize = records.iter().map(Vec::len).sum();
    let chain: Vec<u32> = (0..RECORDS as u32).rev().collect();
    let packing = Packing {
        chains: &[&chain],
        depths: &[1],
        trim: 0,
        solo: true,
        openable: false,
    };

    let mut group = c.benchmark_group("pack");
    group.sample_size(10);
    group.throughput(Throughput::Bytes(bytes as u64));
    group.bench_function("collection", |b| {
        b.iter(|| Packed::build(&records, &packing, 1, &(), &|| true))
    });
    group.finish();

    let packed = Packed::build(&records, &packing, 1, &(), &|| true).expect("built");
    let len = |i: usize| &records[i][..];
    let stretch = &chain[9_000..9_000 + PAGE];
    let scattered: Vec<u32> = (0..PAGE as u32).map(|k| k * 397 % RECORDS as u32).collect();
    let page = |list: &[u32], hint: Option<usize>| {
        let mut gz = GzipPage::new(16 * 1024);
        gz.text(&packed, b"{\"data\":[");
        gz.list(&packed, list, hint, len);
        gz.text(&packed, b"],\"pagination\":{\"offset\":9000,\"limit\":50}}");
        gz.finish()
    };
    // What is timed is right: each page decodes to its plain text.
    for (list, hint) in [(stretch, Some(0)), (&scattered[..], None)] {
        let plain: Vec<&[u8]> = list.iter().map(|&i| &records[i as usize][..]).collect();
        let plain = [
            &b"{\"data\":["[..],
            &plain.join(&b","[..]),
            b"],\"pagination\":{\"offset\":9000,\"limit\":50}}",
        ]
        .concat();
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(&page(list, hint)[..])
            .read_to_end(&mut out)
            .expect("a gzip page");
        assert_eq!(out, plain);
    }

    let mut group = c.benchmark_group("page");
    group.bench_function("stretch_of_chain", |b| {
        b.iter(|| page(black_box(stretch), Some(0)))
    });
    group.bench_function("scattered", |b| {
        b.iter(|| page(black_box(&scattered), None))
    });
    group.finish();
}

/// A version of `old` with the records `changed` picks edited (their
/// status), and what a rebuild is told of each.
fn edited(old: &Records, changed: impl Fn(usize) -> bool) -> (Records, Vec<u32>) {
    let edit =
        |r: &[u8]| String::from_utf8_lossy(r).replacen("\"status\":\"", "\"status\":\"re", 1);
    let new = (0..old.len())
        .map(|i| match changed(i) {
            true => edit(&old[i]).into_bytes(),
            false => old[i].clone(),
        })
        .collect();
    let previous = (0..old.len() as u32)
        .map(|i| match changed(i as usize) {
            true => Packed::CHANGED,
            false => i,
        })
        .collect();
    (new, previous)
}

fn versions(c: &mut Criterion) {
    let old = records(VERSION_RECORDS, VERSION_WORDS);
    let bytes: usize = old.iter().map(Vec::len).sum();
    // Tasks by date: the one chain order the server packs tasks in.
    let chain: Vec<u32> = (0..VERSION_RECORDS as u32).rev().collect();
    let packing = Packing {
        chains: &[&chain],
        depths: &[1],
        trim: 0,
        solo: false,
        openable: false,
    };
    let build = |records: &Records| Packed::build(records, &packing, 1, &(), &|| true);
    let old_packed = build(&old).expect("built");
    let one = edited(&old, |i| i == VERSION_RECORDS / 2);
    let all = edited(&old, |_| true);
    let rebuild = |(records, previous): &(Records, Vec<u32>)| {
        Packed::rebuild(&old_packed, records, previous, &packing, 1, &(), &|| true)
    };
    // What is timed is what it says: one change compresses the record and
    // its successor in the chain; every change, everything.
    assert_eq!(rebuild(&one).expect("rebuilt").compressed(), 2);
    assert_eq!(
        rebuild(&all).expect("rebuilt").compressed(),
        VERSION_RECORDS - 1
    );
    println!(
        "repack: {VERSION_RECORDS} records, {} bytes, {} bytes of fragments",
        bytes,
        old_packed.heap_bytes()
    );

    let mut group = c.benchmark_group("repack");
    group.sample_size(10);
    group.throughput(Throughput::Bytes(bytes as u64));
    for (name, version) in [("one_changed", &one), ("all_changed", &all)] {
        group.bench_function(format!("build_{name}"), |b| {
            b.iter(|| build(black_box(&version.0)))
        });
        group.bench_function(format!("rebuild_{name}"), |b| {
            b.iter(|| rebuild(black_box(version)))
        });
    }
    group.finish();
}

criterion_group!(fragments, benches, versions);
criterion_main!(fragments);
