//! Any records and pages over them: every page `gzip-fragments` assembles
//! is one gzip member that decodes to the plain page.
//!
//! Input: three bytes of settings (bit 0 of the first: trim a byte off each
//! record; bits 1-2: the dictionary depths; bit 3: no solo fragments, so
//! that records which start a run are written as literals; bit 4: solo
//! fragments end on a literal, `Packing::openable`; then a page's offset and
//! limit), then the records, separated by 0xFF (a byte no UTF-8 text, so no
//! rendered record, holds). The chains are the record order, its reverse,
//! and the even records then the odd ones; the pages are a stretch of each
//! (vouched for), the same stretch looked up record by record, and a list
//! of any records named by the records' own first bytes, each after the
//! first record left open (less its last byte, as a meeting ahead of its
//! notes).

#![no_main]

use std::io::Read;

use gzip_fragments::{GzipPage, Packed, Packing};
use libfuzzer_sys::fuzz_target;

type Records<'a> = Vec<&'a [u8]>;

const DEPTHS: [&[usize]; 4] = [&[1], &[1, 2], &[1, 2, 4], &[1, 2, 4, 8]];

fuzz_target!(|data: &[u8]| {
    let [flags, offset, limit, rest @ ..] = data else {
        return;
    };
    let records: Records = rest.split(|&b| b == 0xFF).collect();
    let n = records.len() as u32;
    let trim = usize::from(flags & 1);
    let plain_of = |i: usize| {
        let r = records[i];
        &r[..r.len() - trim.min(r.len())]
    };
    let forward: Vec<u32> = (0..n).collect();
    let backward: Vec<u32> = (0..n).rev().collect();
    let parity: Vec<u32> = (0..n).step_by(2).chain((1..n).step_by(2)).collect();
    let chains = [&forward[..], &backward, &parity];
    let packing = Packing {
        chains: &chains,
        depths: DEPTHS[usize::from(flags >> 1 & 3)],
        trim,
        solo: flags & 8 == 0,
        openable: flags & 16 != 0,
    };
    let packed = Packed::build(&records, &packing, 1, &(), &|| true).expect("not stopped");

    let any: Vec<u32> = records
        .iter()
        .filter_map(|r| r.first().map(|&b| u32::from(b) % n))
        .collect();
    let mut lists: Vec<(Vec<u32>, Option<usize>)> = vec![(any, None)];
    for (c, chain) in chains.iter().enumerate() {
        let from = usize::from(*offset).min(chain.len());
        let to = (from + usize::from(*limit)).min(chain.len());
        lists.push((chain[from..to].to_vec(), Some(c)));
        lists.push((chain[from..to].to_vec(), None));
    }
    for (list, chain) in lists {
        let first = plain_of(0);
        let open = &first[..first.len().saturating_sub(1)];
        let mut plain = [open, b"{\"data\":["].concat();
        let mut gz = GzipPage::new(0);
        gz.open_record(&packed, 0, first);
        gz.text(&packed, b"{\"data\":[");
        for (k, &i) in list.iter().enumerate() {
            if k > 0 {
                plain.push(b',');
            }
            plain.extend_from_slice(plain_of(i as usize));
        }
        gz.list(&packed, &list, chain, plain_of);
        plain.extend_from_slice(b"]}");
        gz.text(&packed, b"]}");

        let gz = gz.finish();
        let mut one = flate2::bufread::GzDecoder::new(&gz[..]);
        let mut out = Vec::new();
        one.read_to_end(&mut out).expect("a valid gzip member");
        assert!(one.into_inner().is_empty(), "bytes after the gzip member");
        assert_eq!(out, plain, "list {list:?}, chain {chain:?}");
    }
});
