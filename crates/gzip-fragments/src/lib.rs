//! gzip answers at the cost of a copy: records compressed once into
//! deflate fragments that any page strings together.
//!
//! A general-purpose compressor cannot do this: its blocks carry their own
//! Huffman tables and end wherever its buffers fill. Here each collection
//! of records gets one Huffman code, made from a sample of them; each
//! record is compressed with it into a bit string of symbols ([`Packed`]);
//! and a page ([`GzipPage`]) is a block header per collection, those bit
//! strings copied one after the other (shifted to wherever the previous one
//! ended), the page's own few bytes of text written with the same code, and
//! a trailer whose CRC-32 is combined from the records' CRCs. The result is
//! one ordinary gzip member that any decoder reads.
//!
//! The crate knows records only as bytes by index ([`IndexedRecords`]) and
//! lists only as orders of those indices: what a record means, and which
//! orders a collection is served in, are its caller's. So are the
//! machine's resources: [`Packed::build`] runs on as many threads as it is
//! given and shows its large buffers to the caller's [`Placement`] (huge
//! pages, say); the crate makes no system call. A new version of a collection
//! is packed from the previous one's packing by [`Packed::rebuild`], which
//! compresses only the records that changed and their neighbours.
//!
//! The parts: the match finder (`lz77`), Huffman codes and block headers
//! (`huffman`), bit streams (`bits`), CRC-32 combination (`crc`), a
//! collection's code and, for a small one, its records' symbols found
//! making it (`train`), its fragments (`pack`, compressed in
//! pieces on every thread given by `pass`), a new version's made from the
//! previous version's (`repack`), and a page assembled from them (`page`).

mod bits;
mod crc;
mod huffman;
mod lz77;
mod pack;
mod page;
mod pass;
mod placement;
mod repack;
mod train;

pub use pack::{IndexedRecords, Packed, Packing};
pub use page::GzipPage;
pub use placement::Placement;

#[cfg(test)]
pub(crate) mod tests {
    use std::io::Read;

    use super::*;

    type Records = Vec<Vec<u8>>;

    pub(crate) fn gunzip(bytes: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(bytes)
            .read_to_end(&mut out)
            .expect("valid gzip");
        out
    }

    fn records(n: usize) -> Records {
        (0..n)
            .map(|i| {
                let text = "lorem ipsum dolor ".repeat(i % 7 + (i * 31) % 97);
                format!(r#"{{"id":"{i:08}","attributes":{{"title":"task {i}","text":"{text}","n":{}}}}}"#, i * i)
                    .into_bytes()
            })
            .collect()
    }

    /// The plain page `head list tail` and its gzip form (`list` is a
    /// stretch of chain order `hint`, if given).
    fn page(
        r: &Records,
        packed: &Packed,
        list: &[u32],
        hint: Option<usize>,
        head: &[u8],
        tail: &[u8],
    ) -> (Vec<u8>, Vec<u8>) {
        let mut plain = head.to_vec();
        for (n, &i) in list.iter().enumerate() {
            if n > 0 {
                plain.push(b',');
            }
            plain.extend_from_slice(&r[i as usize]);
        }
        plain.extend_from_slice(tail);
        let mut gz = GzipPage::new(0);
        gz.text(packed, head);
        gz.list(packed, list, hint, |i| &r[i][..]);
        gz.text(packed, tail);
        (plain, gz.finish())
    }

    #[test]
    fn pages_of_any_records_decompress_to_the_plain_page() {
        let r = records(300);
        let chain: Vec<u32> = (0..300).rev().collect();
        // A second chain: multiples of 3, then the rest, each descending.
        let (mut by3, rest): (Vec<u32>, Vec<u32>) = chain.iter().partition(|&&i| i % 3 == 0);
        let thirds = by3.clone();
        by3.extend(rest);
        for solo in [true, false] {
            let packing = Packing {
                chains: &[&chain, &by3],
                depths: &[1, 2, 4],
                trim: 0,
                solo,
                openable: false,
            };
            // Four threads for more pieces than that (CHUNK is 8192).
            let packed = Packed::build(&r, &packing, 4, &(), &|| true).expect("built");
            check_pages(&r, &packed, &chain, &by3, &thirds);
        }
    }

    fn check_pages(r: &Records, packed: &Packed, chain: &[u32], by3: &[u32], thirds: &[u32]) {
        let lists: Vec<Vec<u32>> = vec![
            vec![],
            vec![5],
            vec![5, 4],
            chain[..50].to_vec(),
            chain[17..90].to_vec(),
            chain[200..203].to_vec(),
            thirds[3..40].to_vec(),
            [
                &chain[10..14],
                &thirds[20..27],
                &chain[100..101],
                &thirds[1..2],
            ]
            .concat(),
            vec![7, 6, 5, 100, 99, 1, 0, 299],
            (0..300).collect(),
        ];
        for list in &lists {
            // Looked up record by record; and said to be a stretch of each
            // chain order it is one of (a page whose list is one).
            let stretch = |order: &[u32]| order.windows(list.len().max(1)).any(|w| w == &list[..]);
            let hints = [None, stretch(chain).then_some(0), stretch(by3).then_some(1)];
            for hint in hints {
                let (plain, gz) = page(
                    r,
                    packed,
                    list,
                    hint,
                    b"{\"data\":[",
                    b"],\"pagination\":{}}",
                );
                assert_eq!(gunzip(&gz), plain, "list {list:?}, chain {hint:?}");
            }
        }
        let (plain, gz) = page(r, packed, chain, Some(0), b"", b"");
        assert!(
            gz.len() * 4 < plain.len(),
            "{} of {}",
            gz.len(),
            plain.len()
        );
    }

    #[test]
    fn two_collections_share_a_page_and_a_trim_leaves_a_record_open() {
        let meetings = records(4);
        let notes = records(40);
        let by_meeting: Vec<u32> = (0..40).collect();
        let packing = |chains, trim| Packing {
            chains,
            depths: &[1],
            trim,
            solo: true,
            openable: false,
        };
        let m = Packed::build(&meetings, &packing(&[], 1), 1, &(), &|| true).expect("built");
        let n =
            Packed::build(&notes, &packing(&[&by_meeting], 0), 1, &(), &|| true).expect("built");
        let mut gz = GzipPage::new(0);
        let meeting = &meetings[2];
        gz.text(&m, b"{\"data\":");
        gz.record(&m, 2, &meeting[..meeting.len() - 1]);
        gz.text(&m, b",\"notes\":[");
        gz.list(&n, &[3, 4, 5, 9], Some(0), |i| &notes[i][..]);
        gz.text(&n, b"]}}");
        let mut plain = b"{\"data\":".to_vec();
        plain.extend_from_slice(&meeting[..meeting.len() - 1]);
        plain.extend_from_slice(b",\"notes\":[");
        plain.extend_from_slice(&[&notes[3][..], &notes[4], &notes[5], &notes[9]].join(&b","[..]));
        plain.extend_from_slice(b"]}}");
        assert_eq!(gunzip(&gz.finish()), plain);
        assert_eq!(gunzip(&GzipPage::new(0).finish()), b"");
    }

    /// A record left open is its solo fragment less the literal it ends
    /// with: closed again as text, the page is the whole record's bit for
    /// bit. Where the parse ended on a match (a record ending as something
    /// before it does), the packing cut it short for that literal.
    #[test]
    fn an_openable_record_is_its_solo_fragment_less_its_last_literal() {
        let mut meetings = records(12);
        let twice = r#"{"id":"7","attributes":{"title":"sync"}}"#.repeat(2);
        meetings.push(twice.into_bytes());
        let mut symbols = Vec::new();
        lz77::Matcher::default().parse(&meetings[12], 0, &mut symbols);
        assert!(matches!(symbols.last(), Some(lz77::Symbol::Match { .. })));
        let notes = records(40);
        let by_meeting: Vec<u32> = (0..40).collect();
        fn packing<'a>(chains: &'a [&'a [u32]], openable: bool) -> Packing<'a> {
            Packing {
                chains,
                depths: &[1],
                trim: 0,
                solo: true,
                openable,
            }
        }
        let n =
            Packed::build(&notes, &packing(&[&by_meeting], false), 1, &(), &|| true).expect("n");
        let order: Vec<u32> = (0..13).collect();
        for openable in [true, false] {
            let m = Packed::build(&meetings, &packing(&[&order], openable), 1, &(), &|| true)
                .expect("built");
            assert_eq!(m.is_openable(), openable);
            for (i, meeting) in meetings.iter().enumerate() {
                let (open, last) = (&meeting[..meeting.len() - 1], meeting[meeting.len() - 1]);
                let page = |open: bool| {
                    let mut gz = GzipPage::new(0);
                    gz.text(&m, b"{\"data\":");
                    match open {
                        true => {
                            gz.open_record(&m, i, meeting);
                            gz.text(&m, &[last]);
                        }
                        false => gz.record(&m, i, meeting),
                    }
                    gz.text(&m, b"}");
                    gz.finish()
                };
                let whole = page(false);
                assert_eq!(gunzip(&whole), [&b"{\"data\":"[..], meeting, b"}"].concat());
                // Not openable, the record open goes as literals.
                if openable {
                    assert_eq!(page(true), whole, "meeting {i}");
                }
                assert_eq!(gunzip(&page(true)), gunzip(&whole), "meeting {i}");

                let mut gz = GzipPage::new(0);
                gz.text(&m, b"{\"data\":");
                gz.open_record(&m, i, meeting);
                gz.text(&m, b",\"notes\":[");
                gz.list(&n, &[i as u32, i as u32 + 1], Some(0), |j| &notes[j][..]);
                gz.text(&n, b"]}}");
                let listed = [&notes[i][..], b",", &notes[i + 1]].concat();
                let plain = [&b"{\"data\":"[..], open, b",\"notes\":[", &listed, b"]}}"];
                assert_eq!(
                    gunzip(&gz.finish()),
                    plain.concat(),
                    "meeting {i} with notes"
                );
            }
        }
    }
}
