//! What warming a built dataset means, before or while it serves: its
//! records compressed into gzip fragments (`--precompress on`), described
//! as [`WarmJob`]s that each run synchronously on the threads their caller
//! gives, and the [`Warming`] state a dataset carries (done or not, and
//! whether anyone still wants it).
//!
//! Who runs the jobs, on which thread, at what priority, and whether the
//! records then move onto huge pages is the caller's: the server's
//! loader drives a warm-up stage (`serve::loader::warm` in the binary), as
//! tantivy's reader drives its warmers; tests and benches call
//! [`Dataset::warm`].

use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex, OnceLock, Weak};

use bytes::Bytes;
use gzip_fragments::{Packed, Packing, Placement};

use crate::store::Positions;
use crate::store::rendered::{Origin, Rendered};
use crate::store::{Collection, Dataset};

/// Each collection's chain orders, by their index in its `Packed`. A page
/// of a list that is a stretch of one of them says so (`store::query`),
/// and is assembled without looking its records up.
///
/// One chain per collection, the order its pages are served in most (the
/// main list; a parent's list where there is no main list): a chain costs
/// about 0.4 of the collection's bytes, so every further order would
/// cost as much again (see `precompression_jobs`). Companies, few and
/// small, keep a second; meeting notes, served a few together behind
/// their meeting, have none.
pub mod chains {
    pub const TASKS_BY_DATE: usize = 0;
    pub const COMPANIES_BY_NAME: usize = 0;
    pub const COMPANIES_BY_PRIORITY: usize = 1;
    pub const FEED_BY_DATE: usize = 0;
    /// Notes, roles, metrics and meetings by company.
    pub const BY_PARENT: usize = 0;
}

/// Collections smaller than this are not precompressed: a Huffman code
/// alone costs about 1.4 KB (a tenth of such a collection), and a page of
/// at most this much costs tens of microseconds to compress per request.
/// It keeps a replica of many small workspaces (2,000 of about 100 KB)
/// within its memory budget (BENCHMARKS.md, "gzip by default").
pub const MIN_PRECOMPRESSED_BYTES: usize = 16 * 1024;

/// One piece of warming: a collection's records to compress, or a body
/// to gzip once.
pub enum WarmJob {
    /// Records to compress, chained in each of `chains`, less `trim` bytes
    /// at the end of each; solo too if `solo`, each solo fragment ending
    /// on a literal if `openable` (see `gzip_fragments::Packing`).
    Records {
        records: Arc<Rendered>,
        /// The version the records were taken over from: fragments of
        /// records unchanged with their neighbours are copied from its.
        origin: Option<Origin>,
        chains: Vec<Positions>,
        depths: &'static [usize],
        trim: usize,
        solo: bool,
        openable: bool,
    },
    /// A whole body (`/roles`) gzipped once.
    Whole {
        body: Bytes,
        into: Arc<OnceLock<Bytes>>,
    },
}

/// A dataset's side of its warming: whether it is done, and the token
/// whose drop (the dataset replaced and gone) tells the warmer to stop.
pub struct Warming {
    done: Arc<Done>,
    alive: Arc<()>,
}

/// The warmer's side: whether the dataset is still wanted, and the flag
/// its waiters wait on. Dropping it says done, so that a warmer that
/// panics or gives up never leaves a waiter hanging.
pub struct WarmTicket {
    alive: Weak<()>,
    done: Arc<Done>,
}

#[derive(Default)]
struct Done {
    finished: Mutex<bool>,
    changed: Condvar,
}

impl Done {
    fn finish(&self) {
        *self.finished.lock().unwrap_or_else(|p| p.into_inner()) = true;
        self.changed.notify_all();
    }
}

impl Warming {
    /// Nothing to wait for: a dataset before its warming starts, or
    /// without one.
    pub(crate) fn off() -> Warming {
        let done = Arc::new(Done::default());
        done.finish();
        Warming {
            done,
            alive: Arc::new(()),
        }
    }

    /// Whether the warming is done (or was given up, or never started).
    pub fn is_done(&self) -> bool {
        *self.done.finished.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Blocks until the warming is done (or given up).
    pub fn wait(&self) {
        let mut finished = self.done.finished.lock().unwrap_or_else(|p| p.into_inner());
        while !*finished {
            finished = self
                .done
                .changed
                .wait(finished)
                .unwrap_or_else(|p| p.into_inner());
        }
    }
}

impl WarmTicket {
    /// Whether the dataset is still alive: a warmer stops, or skips it,
    /// once it was dropped.
    pub fn keep_going(&self) -> bool {
        self.alive.strong_count() > 0
    }

    /// Tells the dataset's waiters that the warming they wait for is done
    /// (what may follow, such as huge pages, is not waited for).
    pub fn finish(&self) {
        self.done.finish();
    }
}

impl Drop for WarmTicket {
    fn drop(&mut self) {
        self.done.finish();
    }
}

impl Dataset {
    /// The jobs that warm this dataset, the largest collections first
    /// (see `precompression_jobs`). Each collection's origin (the
    /// version it follows) is taken by its job: call it once.
    pub fn warm_jobs(&self) -> Vec<WarmJob> {
        precompression_jobs(self)
    }

    /// Lets go of the versions this one's records were taken over from,
    /// for a dataset that is not warmed: nothing will copy their fragments.
    pub fn forget_origins(&self) {
        for c in Collection::ALL {
            self.records(c).take_origin();
        }
    }

    /// Starts this dataset's warming: from now on [`Dataset::warming_done`]
    /// is false until the ticket is finished or dropped. Call it before
    /// the dataset is shared.
    pub fn start_warming(&mut self) -> WarmTicket {
        let done = Arc::new(Done::default());
        let alive = Arc::new(());
        let ticket = WarmTicket {
            alive: Arc::downgrade(&alive),
            done: Arc::clone(&done),
        };
        self.warming = Warming { done, alive };
        ticket
    }

    /// The jobs that make again the fragments let go for a load that then
    /// failed (`Previous::missed`), with a ticket nobody waits on; `None`
    /// if none were let go. The dataset serves meanwhile, its gzip answers
    /// compressed per request.
    pub fn warm_again(&self) -> Option<(Vec<WarmJob>, WarmTicket)> {
        if !self.fragments_let_go.swap(false, Ordering::Relaxed) {
            return None;
        }
        let jobs: Vec<WarmJob> = precompression_jobs(self)
            .into_iter()
            .filter(|job| match job {
                WarmJob::Records { records, .. } => records.packed().is_none(),
                WarmJob::Whole { into, .. } => into.get().is_none(),
            })
            .collect();
        let ticket = WarmTicket {
            alive: Arc::downgrade(&self.warming.alive),
            done: Arc::new(Done::default()),
        };
        (!jobs.is_empty()).then_some((jobs, ticket))
    }

    /// Whether the dataset's warming is over (or was never started).
    pub fn warming_done(&self) -> bool {
        self.warming.is_done()
    }

    /// Blocks until the dataset's warming is over.
    pub fn wait_warmed(&self) {
        self.warming.wait();
    }

    /// Every collection's records, the largest first: what a warmer moves
    /// onto huge pages, in the order they gain the most.
    pub fn records_largest_first(&self) -> Vec<Arc<Rendered>> {
        let mut records: Vec<_> = Collection::ALL.map(|c| Arc::clone(self.records(c))).into();
        records.sort_by_key(|r| std::cmp::Reverse(r.bytes()));
        records
    }

    /// Warms the dataset here and now, every job on up to `threads`
    /// threads, with no placement: what a test or a bench needs.
    pub fn warm(&self, threads: usize) {
        for job in self.warm_jobs() {
            let _ = job.run(threads, &(), &|| true);
        }
    }
}

/// The groups of an index one after the other (in the order of their
/// keys): the chain order of the lists the index serves, a company's
/// tasks, a filter's.
fn concat<K: Ord>(groups: impl IntoIterator<Item = (K, impl AsRef<[u32]>)>) -> Positions {
    let mut groups: Vec<_> = groups.into_iter().collect();
    groups.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    groups
        .iter()
        .flat_map(|(_, g)| g.as_ref().iter().copied())
        .collect()
}

/// Each collection's records to compress, chained in the order of its
/// main list (or by parent), in the order of [`chains`]; the largest
/// collections first; none under [`MIN_PRECOMPRESSED_BYTES`].
///
/// What is left out, measured on the `medium` dataset (BENCHMARKS.md,
/// "gzip by default"): solo fragments (0.6 of the records' bytes, where a
/// chain is 0.4; a record that starts a page goes as literals instead),
/// and the chains of tasks by company and by status and priority and of
/// the feed by type (0.4 each). With them the fragments took 1.6 times
/// the JSON; without, 0.42. Pages in those orders are compressed per
/// request.
fn precompression_jobs(ds: &Dataset) -> Vec<WarmJob> {
    let chained = |r: &Arc<Rendered>, chain: Positions| WarmJob::Records {
        records: Arc::clone(r),
        origin: r.take_origin(),
        chains: vec![chain],
        depths: &[1],
        trim: 0,
        solo: false,
        openable: false,
    };
    let mut jobs = vec![
        chained(&ds.parts.tasks.records, ds.parts.tasks.order.clone()),
        // Few and large, with much in common: deeper dictionaries pay, and
        // solo fragments for `/portfolio/{id}`.
        WarmJob::Records {
            records: Arc::clone(&ds.parts.companies.records),
            origin: ds.parts.companies.records.take_origin(),
            chains: vec![
                ds.parts.companies.order.clone(),
                concat(&ds.parts.companies.by_priority),
            ],
            depths: &[1, 2, 4, 8],
            trim: 0,
            solo: true,
            openable: false,
        },
        chained(&ds.parts.feed.records, ds.parts.feed.order.clone()),
        chained(&ds.parts.notes.records, concat(&ds.parts.notes.by_company)),
        chained(&ds.parts.roles.records, concat(&ds.parts.roles.by_company)),
        chained(&ds.parts.metrics.records, ds.parts.metrics.all.clone()),
        // Served alone (solo fragments) and in a company's list (chained
        // by company), whole: packed open (a trim of the brace), a list of
        // them would be solo fragments each, eight times the size of gzip
        // -1 on a page of 50 similar meetings, against a chain's run. Ahead
        // of its notes (`include=notes`) a meeting is left open: its solo
        // fragment ends on its brace as a literal (`openable`), so the page
        // copies all of it but that literal. Written as literals there,
        // that gzip answer cost 1.46 times the instructions (BENCHMARKS.md,
        // request cost).
        WarmJob::Records {
            records: Arc::clone(&ds.parts.meetings.records),
            origin: ds.parts.meetings.records.take_origin(),
            chains: vec![concat(&ds.parts.meetings.by_company)],
            depths: &[1],
            trim: 0,
            solo: true,
            openable: true,
        },
        // Long (17 KB on `medium`) and about one to a meeting: a note
        // written as literals would cost 100 us and four times gzip -1,
        // and a chain would rarely be followed. Solo fragments only.
        WarmJob::Records {
            records: Arc::clone(&ds.parts.meeting_notes.records),
            origin: ds.parts.meeting_notes.records.take_origin(),
            chains: Vec::new(),
            depths: &[1],
            trim: 0,
            solo: true,
            openable: false,
        },
    ];
    jobs.retain(|job| match job {
        WarmJob::Records { records, .. } => records.bytes() >= MIN_PRECOMPRESSED_BYTES,
        WarmJob::Whole { .. } => true,
    });
    jobs.push(WarmJob::Whole {
        body: ds.parts.roles.body.clone(),
        into: Arc::clone(&ds.parts.roles.gzip),
    });
    jobs
}

impl WarmJob {
    /// Does the job on up to `threads` threads, its buffers placed by
    /// `placement`; gives the bytes it made, or `None` if it gave up (the
    /// dataset was dropped).
    pub fn run(
        self,
        threads: usize,
        placement: &impl Placement,
        keep_going: &(dyn Fn() -> bool + Sync),
    ) -> Option<usize> {
        match self {
            WarmJob::Records {
                records,
                origin,
                chains,
                depths,
                trim,
                solo,
                openable,
            } => {
                let chains: Vec<&[u32]> = chains.iter().map(Vec::as_slice).collect();
                let packing = Packing {
                    chains: &chains,
                    depths,
                    trim,
                    solo,
                    openable,
                };
                let built = match origin.as_ref().and_then(|o| Some((o.packed()?, &o.of))) {
                    // Only what changed is compressed; the rest copied.
                    Some((old, of)) => Packed::rebuild(
                        &old, &*records, of, &packing, threads, placement, keep_going,
                    ),
                    None => Packed::build(&*records, &packing, threads, placement, keep_going),
                };
                // The version before may go now.
                drop(origin);
                let packed = built?;
                let bytes = packed.heap_bytes();
                records.set_packed(packed);
                Some(bytes)
            }
            WarmJob::Whole { body, into } => {
                let gzip = gzip_once(&body);
                let bytes = gzip.len();
                let _ = into.set(gzip);
                Some(bytes)
            }
        }
    }

    /// Whether the job copies the fragments of all but a few records (at
    /// most one in `SMALL_CHANGE`, 64): a few milliseconds, worth doing
    /// before the dataset serves, so that its gzip answers are at full
    /// speed from its first request.
    pub fn is_small_change(&self) -> bool {
        match self {
            WarmJob::Records {
                origin: Some(origin),
                ..
            } => {
                let changed = origin.of.iter().filter(|&&o| o == Packed::CHANGED).count();
                origin.packed().is_some() && changed * SMALL_CHANGE <= origin.of.len()
            }
            WarmJob::Records { origin: None, .. } | WarmJob::Whole { .. } => false,
        }
    }
}

/// A change to at most one record in this many is packed before its
/// dataset serves ([`WarmJob::is_small_change`]). A packing after one change
/// in 50,000 tasks takes 4 ms against 380 for all of them (the codec's
/// `repack` bench); at one in 64 it is still a fraction of the load.
const SMALL_CHANGE: usize = 64;

/// `body` gzipped at the default level, once: the bytes
/// `flate2::write::GzEncoder` writes, from a deflate encoder kept per
/// thread (the same writer inside, fed the same way: a compressor given
/// the whole body at once wrote other bytes for some bodies). A new one
/// allocates and clears a few hundred kilobytes of tables, which cost
/// more than compressing the small body of most workspaces (a start of
/// 8,000 of them spent 4% of its time there).
fn gzip_once(body: &[u8]) -> Bytes {
    use std::io::Write;
    thread_local! {
        static DEFLATE: std::cell::RefCell<flate2::write::DeflateEncoder<Vec<u8>>> =
            std::cell::RefCell::new(flate2::write::DeflateEncoder::new(
                Vec::new(),
                flate2::Compression::default(),
            ));
    }
    // GzEncoder's header at the default level: no name, no time, "unknown" system.
    const HEADER: [u8; 10] = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 255];
    let mut out = Vec::with_capacity(HEADER.len() + body.len() / 4 + 64);
    out.extend_from_slice(&HEADER);
    let deflated = DEFLATE.with_borrow_mut(|deflate| {
        // The encoder writes after the header; `reset` finishes the stream
        // and hands the bytes back, the encoder ready for the next body.
        deflate.reset(out).ok()?;
        deflate.write_all(body).ok()?;
        deflate.reset(Vec::new()).ok()
    });
    // Not seen (writing into a Vec does not fail), but a compressor in a
    // bad state must not cost a correct answer.
    let Some(mut out) = deflated else {
        return gzip_fresh(body);
    };
    let mut crc = flate2::Crc::new();
    crc.update(body);
    out.extend_from_slice(&crc.sum().to_le_bytes());
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    Bytes::from(out)
}

/// `body` gzipped at the default level by a new encoder.
fn gzip_fresh(body: &[u8]) -> Bytes {
    use std::io::Write;
    let mut encoder = flate2::write::GzEncoder::new(
        Vec::with_capacity(body.len() / 4),
        flate2::Compression::default(),
    );
    // Writing into a Vec cannot fail.
    let _ = encoder.write_all(body);
    Bytes::from(encoder.finish().unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_compressor_writes_the_bytes_a_new_encoder_writes() {
        let long: Vec<u8> = (0..300_000u32)
            .flat_map(|i| (i % 251).to_le_bytes())
            .collect();
        let bodies: [&[u8]; 5] = [b"", b"[]", br#"{"data":[{"id":"1"}]}"#, &long, b"[]"];
        for body in bodies {
            assert_eq!(gzip_once(body), gzip_fresh(body), "{} bytes", body.len());
        }
    }
}
