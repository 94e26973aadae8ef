//! Property tests (proptest) of the codec through its public API: any
//! records (JSON-ish text with escapes, quotes, backslashes, non-ASCII and
//! emoji; empty ones; repeated ones; arbitrary bytes; long runs), any chain
//! orders and dictionary depths, and any page made of text, single records
//! and lists (stretches of a chain at any offset and limit, or any indices)
//! over two collections: the page is exactly one gzip member, and it
//! decodes to the plain text the same parts make. The same of a packing
//! rebuilt from a previous version's after any edits (records changed,
//! inserted, deleted, moved in a chain, swapped in the record order).

use std::io::Read;
use std::sync::atomic::{AtomicUsize, Ordering};

use gzip_fragments::{GzipPage, Packed, Packing, Placement};
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::{Index, subsequence};

/// A collection's records, by index.
type Records = Vec<Vec<u8>>;

/// What the test asks of a collection's packing: its records, its chain
/// orders, their rungs, the trim, solo fragments and whether they end on
/// a literal, the threads.
#[derive(Clone, Debug)]
struct Collection {
    records: Records,
    chains: Vec<Vec<u32>>,
    depths: &'static [usize],
    trim: usize,
    solo: bool,
    openable: bool,
    threads: usize,
}

impl Collection {
    /// Record `i` as a page shows it: less the trim.
    fn plain(&self, i: usize) -> &[u8] {
        let r = &self.records[i];
        &r[..r.len() - self.trim.min(r.len())]
    }

    fn pack(&self, placement: &impl Placement) -> Packed {
        self.pack_from(None, placement)
    }

    /// Packed afresh, or rebuilt from `old` (with `previous`, see
    /// [`Packed::rebuild`]).
    fn pack_from(&self, old: Option<(&Packed, &[u32])>, placement: &impl Placement) -> Packed {
        let chains: Vec<&[u32]> = self.chains.iter().map(Vec::as_slice).collect();
        let packing = Packing {
            chains: &chains,
            depths: self.depths,
            trim: self.trim,
            solo: self.solo,
            openable: self.openable,
        };
        let (records, threads) = (&self.records, self.threads);
        match old {
            None => Packed::build(records, &packing, threads, placement, &|| true),
            Some((old, previous)) => Packed::rebuild(
                old,
                records,
                previous,
                &packing,
                threads,
                placement,
                &|| true,
            ),
        }
        .expect("nothing asks it to stop")
    }

    /// This collection after `edits`, and what [`Packed::rebuild`] is told
    /// of each record: its index here if its bytes are unchanged.
    fn edited(&self, edits: &[Edit]) -> (Collection, Vec<u32>) {
        let mut new = self.clone();
        let mut previous: Vec<u32> = (0..self.records.len() as u32).collect();
        for edit in edits {
            let n = new.records.len();
            match edit {
                Edit::Change(i, bytes) if n > 0 => {
                    let i = i.index(n);
                    if new.records[i] != *bytes {
                        previous[i] = Packed::CHANGED;
                        new.records[i] = bytes.clone();
                    }
                }
                Edit::Insert(i, bytes, at) => {
                    let i = i.index(n + 1);
                    new.records.insert(i, bytes.clone());
                    previous.insert(i, Packed::CHANGED);
                    for (c, chain) in new.chains.iter_mut().enumerate() {
                        chain
                            .iter_mut()
                            .filter(|r| **r >= i as u32)
                            .for_each(|r| *r += 1);
                        if let Some(at) = at.get(c) {
                            chain.insert(at.index(chain.len() + 1), i as u32);
                        }
                    }
                }
                Edit::Delete(i) if n > 0 => {
                    let i = i.index(n) as u32;
                    new.records.remove(i as usize);
                    previous.remove(i as usize);
                    for chain in &mut new.chains {
                        chain.retain(|&r| r != i);
                        chain.iter_mut().filter(|r| **r > i).for_each(|r| *r -= 1);
                    }
                }
                Edit::Move(c, from, to) if !new.chains.is_empty() => {
                    let chain = &mut new.chains[c.index(self.chains.len())];
                    if !chain.is_empty() {
                        let r = chain.remove(from.index(chain.len()));
                        chain.insert(to.index(chain.len() + 1), r);
                    }
                }
                Edit::Swap(a, b) if n > 0 => {
                    let (a, b) = (a.index(n), b.index(n));
                    new.records.swap(a, b);
                    previous.swap(a, b);
                    let other = |r: u32| match r as usize {
                        r if r == a => b as u32,
                        r if r == b => a as u32,
                        r => r as u32,
                    };
                    new.chains.iter_mut().flatten().for_each(|r| *r = other(*r));
                }
                _ => {}
            }
        }
        (new, previous)
    }
}

/// A change from one version of a collection to the next.
#[derive(Clone, Debug)]
enum Edit {
    /// A record's bytes replaced.
    Change(Index, Vec<u8>),
    /// A new record, at some place in some of the chains.
    Insert(Index, Vec<u8>, Vec<Index>),
    Delete(Index),
    /// A record moved in a chain.
    Move(Index, Index, Index),
    /// Two records trade places in the record order (their indices).
    Swap(Index, Index),
}

fn edit() -> impl Strategy<Value = Edit> {
    let i = any::<Index>;
    prop_oneof![
        3 => (i(), record()).prop_map(|(i, r)| Edit::Change(i, r)),
        2 => (i(), record(), vec(i(), 0..=3)).prop_map(|(i, r, at)| Edit::Insert(i, r, at)),
        2 => i().prop_map(Edit::Delete),
        1 => (i(), i(), i()).prop_map(|(c, from, to)| Edit::Move(c, from, to)),
        1 => (i(), i()).prop_map(|(a, b)| Edit::Swap(a, b)),
    ]
}

/// One piece of a page, in collection `c` (of two).
#[derive(Clone, Debug)]
enum PagePart {
    Text {
        c: usize,
        text: Vec<u8>,
    },
    Record {
        c: usize,
        i: Index,
    },
    /// A record less its last byte (a meeting left open for its notes).
    Open {
        c: usize,
        i: Index,
    },
    /// `limit` records of chain `chain` from `offset` on (of the records
    /// in their order when the collection has no chains), said to be a
    /// stretch of the chain if `vouch`.
    Stretch {
        c: usize,
        chain: Index,
        offset: usize,
        limit: usize,
        vouch: bool,
    },
    /// Any records, repeats and all, comma-separated.
    List {
        c: usize,
        list: Vec<Index>,
    },
}

/// JSON-ish text as rendered records have it: words, digits, escapes,
/// bare quotes and backslashes, accents, CJK, emoji.
fn text() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        4 => "[a-z ]{1,12}",
        2 => "[0-9]{1,6}",
        1 => Just(r#"\""#.to_owned()),
        1 => Just(r"\\".to_owned()),
        1 => Just(r"\n\t".to_owned()),
        1 => Just(r"\u00e9\ud83d\ude00".to_owned()),
        1 => Just("\"".to_owned()),
        1 => Just("\\".to_owned()),
        1 => Just("é ü ß".to_owned()),
        1 => Just("日本語".to_owned()),
        1 => Just("😀👍🏽".to_owned()),
    ];
    vec(piece, 0..24).prop_map(|pieces| pieces.concat())
}

fn record() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        1 => Just(Vec::new()),
        8 => (text(), text(), 0u32..1000).prop_map(|(title, body, n)| {
            format!(r#"{{"id":"{n:08}","attributes":{{"title":"{title}","text":"{body}","n":{n}}}}}"#)
                .into_bytes()
        }),
        2 => vec(any::<u8>(), 0..120),
        // Long matches, some longer than deflate's 258 and, rarely, a
        // record longer than its 32 KB window.
        1 => ("[a-z]{1,6}", prop_oneof![9 => 1usize..200, 1 => 5000usize..7000])
            .prop_map(|(word, times)| word.repeat(times).into_bytes()),
    ]
}

/// Up to 30 records, some of them repeated elsewhere in the collection.
fn records() -> impl Strategy<Value = Records> {
    (
        vec(record(), 0..30),
        vec((any::<Index>(), any::<Index>()), 0..6),
    )
        .prop_map(|(mut records, repeats)| {
            for (from, to) in repeats {
                if !records.is_empty() {
                    let copy = records[from.index(records.len())].clone();
                    records.insert(to.index(records.len() + 1), copy);
                }
            }
            records
        })
}

fn collection() -> impl Strategy<Value = Collection> {
    let depths = prop_oneof![
        Just(&[1][..]),
        Just(&[1, 2][..]),
        Just(&[1, 2, 4][..]),
        Just(&[1, 2, 4, 8][..]),
    ];
    let shape = (0usize..=1, any::<bool>(), any::<bool>());
    (records(), depths, shape, 1usize..=3).prop_flat_map(
        |(records, depths, (trim, solo, openable), threads)| {
            let all: Vec<u32> = (0..records.len() as u32).collect();
            let n = all.len();
            // Each chain: any subset of the records in any order, or in
            // record order (as a collection's main list often is).
            let chain = prop_oneof![
                subsequence(all.clone(), 0..=n).prop_shuffle(),
                subsequence(all, 0..=n),
            ];
            vec(chain, 0..=3).prop_map(move |chains| Collection {
                records: records.clone(),
                chains,
                depths,
                trim,
                solo,
                openable,
                threads,
            })
        },
    )
}

fn part() -> impl Strategy<Value = PagePart> {
    let text = prop_oneof![
        Just(b"{\"data\":[".to_vec()),
        Just(b"],\"pagination\":{\"offset\":20,\"hasMore\":true}}".to_vec()),
        Just(b",".to_vec()),
        text().prop_map(String::into_bytes),
    ];
    let c = 0usize..2;
    prop_oneof![
        2 => (c.clone(), text).prop_map(|(c, text)| PagePart::Text { c, text }),
        1 => (c.clone(), any::<Index>()).prop_map(|(c, i)| PagePart::Record { c, i }),
        1 => (c.clone(), any::<Index>()).prop_map(|(c, i)| PagePart::Open { c, i }),
        3 => (c.clone(), any::<Index>(), 0usize..40, 0usize..40, any::<bool>()).prop_map(
            |(c, chain, offset, limit, vouch)| PagePart::Stretch { c, chain, offset, limit, vouch }
        ),
        1 => (c, vec(any::<Index>(), 0..12)).prop_map(|(c, list)| PagePart::List { c, list }),
    ]
}

/// `bytes` decoded as exactly one gzip member, nothing after it; and the
/// same by a decoder that would go on to further members.
fn gunzip_one(bytes: &[u8]) -> Vec<u8> {
    let mut one = flate2::bufread::GzDecoder::new(bytes);
    let mut out = Vec::new();
    one.read_to_end(&mut out).expect("a valid gzip member");
    assert!(one.into_inner().is_empty(), "bytes after the gzip member");
    let mut multi = Vec::new();
    flate2::read::MultiGzDecoder::new(bytes)
        .read_to_end(&mut multi)
        .expect("a valid gzip stream");
    assert_eq!(multi, out);
    out
}

/// The page `parts` make, plain and gzip.
fn page(
    collections: &[Collection; 2],
    packed: &[Packed; 2],
    parts: &[PagePart],
) -> (Vec<u8>, Vec<u8>) {
    let mut plain = Vec::new();
    let mut gz = GzipPage::new(64);
    for part in parts {
        match part {
            PagePart::Text { c, text } => {
                plain.extend_from_slice(text);
                gz.text(&packed[*c], text);
            }
            PagePart::Record { c, i } => {
                let col = &collections[*c];
                if col.records.is_empty() {
                    continue;
                }
                let i = i.index(col.records.len());
                plain.extend_from_slice(col.plain(i));
                gz.record(&packed[*c], i, col.plain(i));
            }
            PagePart::Open { c, i } => {
                let col = &collections[*c];
                if col.records.is_empty() {
                    continue;
                }
                let i = i.index(col.records.len());
                let record = col.plain(i);
                plain.extend_from_slice(&record[..record.len().saturating_sub(1)]);
                gz.open_record(&packed[*c], i, record);
            }
            PagePart::Stretch {
                c,
                chain,
                offset,
                limit,
                vouch,
            } => {
                let col = &collections[*c];
                let (list, chain): (Vec<u32>, _) = if col.chains.is_empty() {
                    ((0..col.records.len() as u32).collect(), None)
                } else {
                    let k = chain.index(col.chains.len());
                    (col.chains[k].clone(), vouch.then_some(k))
                };
                let list = &list[(*offset).min(list.len())..(offset + limit).min(list.len())];
                write_list(&mut plain, &mut gz, col, &packed[*c], list, chain);
            }
            PagePart::List { c, list } => {
                let col = &collections[*c];
                if col.records.is_empty() {
                    continue;
                }
                let n = col.records.len();
                let list: Vec<u32> = list.iter().map(|i| i.index(n) as u32).collect();
                write_list(&mut plain, &mut gz, col, &packed[*c], &list, None);
            }
        }
    }
    (plain, gz.finish())
}

fn write_list<'a>(
    plain: &mut Vec<u8>,
    gz: &mut GzipPage<'a>,
    col: &Collection,
    packed: &'a Packed,
    list: &[u32],
    chain: Option<usize>,
) {
    for (n, &i) in list.iter().enumerate() {
        if n > 0 {
            plain.push(b',');
        }
        plain.extend_from_slice(col.plain(i as usize));
    }
    gz.list(packed, list, chain, |i| col.plain(i));
}

/// Counts what it is shown, and places nothing.
#[derive(Default)]
struct Counting {
    reserved: AtomicUsize,
    built: AtomicUsize,
}

impl Placement for Counting {
    fn reserved<T>(&self, _: &Vec<T>) {
        self.reserved.fetch_add(1, Ordering::Relaxed);
    }
    fn built<T>(&self, _: &[T]) {
        self.built.fetch_add(1, Ordering::Relaxed);
    }
}

/// A proptest configuration with `cases` cases and no regression files.
fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config(96))]

    #[test]
    fn any_page_is_one_gzip_member_of_its_plain_text(
        collections in [collection(), collection()],
        parts in vec(part(), 0..10),
    ) {
        let packed = [collections[0].pack(&()), collections[1].pack(&())];
        let (plain, gz) = page(&collections, &packed, &parts);
        prop_assert_eq!(gunzip_one(&gz), plain);
    }
}

proptest! {
    #![proptest_config(config(64))]

    /// A packing rebuilt from the previous version's after any edits, and
    /// one rebuilt from that in turn, make pages that decode to their
    /// plain text; nothing is compressed again when nothing changed.
    #[test]
    fn a_rebuilt_packing_pages_like_a_fresh_one(
        old in collection(),
        edits in vec(edit(), 0..6),
        parts in vec(part(), 0..10),
    ) {
        let (new, previous) = old.edited(&edits);
        let old_packed = old.pack(&());
        let rebuilt = new.pack_from(Some((&old_packed, &previous)), &());
        if edits.is_empty() {
            prop_assert_eq!(rebuilt.compressed(), 0);
        }
        let twice = new.edited(&edits[..edits.len().min(1)]);
        let again = twice.0.pack_from(Some((&rebuilt, &twice.1)), &());
        let (plain, gz) = page(&[new.clone(), twice.0], &[rebuilt, again], &parts);
        prop_assert_eq!(gunzip_one(&gz), plain);
    }
}

proptest! {
    #![proptest_config(config(48))]

    /// Where solo fragments end on a literal, a record left open and then
    /// closed as text is the page of the record whole, bit for bit: the
    /// open record is a prefix of its fragment.
    #[test]
    fn an_open_record_closed_as_text_is_the_record_whole(
        collection in collection(),
        head in text(),
    ) {
        let col = Collection { solo: true, openable: true, ..collection };
        let packed = col.pack(&());
        for i in 0..col.records.len() {
            let record = col.plain(i);
            let Some(&last) = record.last() else {
                continue;
            };
            let page = |open: bool| {
                let mut gz = GzipPage::new(0);
                gz.text(&packed, head.as_bytes());
                if open {
                    gz.open_record(&packed, i, record);
                    gz.text(&packed, &[last]);
                } else {
                    gz.record(&packed, i, record);
                }
                gz.finish()
            };
            prop_assert_eq!(page(true), page(false), "record {}", i);
        }
    }
}

proptest! {
    #![proptest_config(config(16))]

    /// The fragments are the same bytes whatever the threads and the
    /// placement: responses do not depend on the machine.
    #[test]
    fn pages_do_not_depend_on_threads_or_placement(
        collection in collection(),
        parts in vec(part(), 1..6),
    ) {
        let one = Collection { threads: 1, ..collection.clone() };
        let counting = Counting::default();
        let packed = [one.pack(&()), one.pack(&())];
        let placed = [collection.pack(&counting), collection.pack(&())];
        let two = [one.clone(), one];
        prop_assert_eq!(page(&two, &packed, &parts).1, page(&two, &placed, &parts).1);
        // The solo stream and its table (if made), and per rung its stream
        // and table, and per chain its three tables.
        let rungs = collection.chains.len() * collection.depths.len();
        let buffers = 2 * usize::from(collection.solo) + 2 * rungs + 3 * collection.chains.len();
        prop_assert_eq!(counting.reserved.load(Ordering::Relaxed), buffers);
        prop_assert_eq!(counting.built.load(Ordering::Relaxed), buffers);
    }
}

#[test]
fn a_packing_told_to_stop_gives_up() {
    let records: Records = vec![b"{\"id\":1}".to_vec(); 10];
    let packing = Packing {
        chains: &[],
        depths: &[1],
        trim: 0,
        solo: true,
        openable: false,
    };
    assert!(Packed::build(&records, &packing, 1, &(), &|| false).is_none());
    assert!(Packed::build(&records, &packing, 1, &(), &|| true).is_some());
}
