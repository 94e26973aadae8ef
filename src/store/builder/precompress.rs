//! Precompressing a dataset's records for gzip answers once the dataset is
//! built (`--precompress on`); then, where the process has more than one
//! core and the records fill huge pages, moving them onto huge pages. One
//! background thread does it for every dataset in turn (a packing spreads
//! over the cores itself): a first scan of thousands of small workspaces
//! must not start a thread for each.
//!
//! Compressing every record takes several times as long as parsing the
//! snapshot, so it does not hold up publishing: a new dataset serves at
//! once, its gzip answers compressed per request, and switches to
//! precompressed fragments collection by collection as they are made. The
//! thread runs at a low priority (nice 10), so that on a busy core
//! requests go first, and stops early when its dataset is dropped
//! (replaced by a newer version) before it is done.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock, Weak, mpsc};
use std::time::Instant as Clock;

use bytes::Bytes;
use gzip_fragments::{Packed, Packing, Placement};

use crate::os;
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
/// cost as much again (see [`precompression_jobs`]). Companies, few and
/// small, keep a second; meetings and their notes, served alone or a few
/// together, have none.
pub mod chains {
    pub const TASKS_BY_DATE: usize = 0;
    pub const COMPANIES_BY_NAME: usize = 0;
    pub const COMPANIES_BY_PRIORITY: usize = 1;
    pub const FEED_BY_DATE: usize = 0;
    /// Notes, roles and metrics by company.
    pub const BY_PARENT: usize = 0;
}

/// Collections smaller than this are not precompressed: a Huffman code
/// alone costs about 1.4 KB (a tenth of such a collection), and a page of
/// at most this much costs tens of microseconds to compress per request.
/// It keeps a replica of many small workspaces (2,000 of about 100 KB)
/// within its memory budget (BENCHMARKS.md, "gzip by default").
pub const MIN_PRECOMPRESSED_BYTES: usize = 16 * 1024;

/// One piece of work: a collection's records to compress, or a body to
/// gzip once.
enum Job {
    /// Records to compress, chained in each of `chains`, less `trim` bytes
    /// at the end of each; solo too if `solo`.
    Records {
        records: Arc<Rendered>,
        /// The version the records were taken over from: fragments of
        /// records unchanged with their neighbours are copied from its.
        origin: Option<Origin>,
        chains: Vec<Positions>,
        depths: &'static [usize],
        trim: usize,
        solo: bool,
    },
    /// A whole body (`/roles`) gzipped once.
    Whole {
        body: Bytes,
        into: Arc<OnceLock<Bytes>>,
    },
}

/// A dataset's side of its precompression: whether it is done, and the
/// token whose drop tells the thread to stop.
pub struct Precompression {
    done: Arc<Done>,
    _alive: Arc<()>,
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

/// Sets `done` even if the thread panics, so that no waiter hangs.
struct FinishOnDrop(Arc<Done>);

impl Drop for FinishOnDrop {
    fn drop(&mut self) {
        self.0.finish();
    }
}

impl Precompression {
    /// Nothing running: the state of a dataset before [`start`].
    pub(super) fn off() -> Precompression {
        let done = Arc::new(Done::default());
        done.finish();
        Precompression {
            done,
            _alive: Arc::new(()),
        }
    }

    /// Whether the thread is done precompressing (or has given up); the
    /// move onto huge pages may still be going on.
    pub fn is_done(&self) -> bool {
        *self.done.finished.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Blocks until the thread is done precompressing (or has given up).
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

/// Starts, on a thread of its own, precompressing `dataset`'s records (if
/// `precompress`) and then moving them onto huge pages (if
/// [`os::collapse_is_worth_it`]), and gives the dataset its side of
/// it. Only the precompression is waited for.
///
/// Huge pages make a page scattered over a gigabyte of records about a
/// fifth cheaper to copy (random 50-task pages of the `medium` dataset,
/// in-process: 5.8-6.1 us against 7.5), and cost about 5 s of a core per
/// gigabyte after each load; on a single core they are not worth the
/// requests' wait (see `os`).
pub fn start(dataset: &mut Dataset, precompress: bool) {
    // Records smaller than a huge page or two gain nothing from one.
    let collapse = os::collapse_is_worth_it()
        && Collection::ALL
            .iter()
            .map(|c| dataset.records(*c).bytes())
            .sum::<usize>()
            >= MIN_COLLAPSED_BYTES;
    if !precompress {
        // Nothing copies fragments from the version before: let it go.
        for c in Collection::ALL {
            dataset.records(c).take_origin();
        }
    }
    if !precompress && !collapse {
        return;
    }
    let ds = &*dataset;
    let mut jobs = if precompress {
        precompression_jobs(ds)
    } else {
        Vec::new()
    };
    // The small changes now, on the loader's thread; the rest queued.
    let now: Vec<Job> = jobs.extract_if(.., |job| job.is_small_change()).collect();
    // One thread: a small change is mostly copies, and threads started
    // for it at every reload leave their heaps behind. No huge pages: the
    // kernel's copy into them (5 s a gigabyte) would hold up the reload.
    for job in now {
        let _ = job.run(1, &(), &|| true);
    }
    let mut to_collapse = Vec::new();
    if collapse {
        // The largest collections first: they gain the most.
        to_collapse.extend(Collection::ALL.map(|c| Arc::clone(ds.records(c))));
        to_collapse.sort_by_key(|records| std::cmp::Reverse(records.bytes()));
    }
    let done = Arc::new(Done::default());
    let alive = Arc::new(());
    let (weak, finished) = (Arc::downgrade(&alive), Arc::clone(&done));
    let task = Task {
        jobs,
        to_collapse,
        alive: weak,
        done: finished,
        workspace: ds.workspace_id.clone(),
    };
    if let Err(err) = queue(task) {
        tracing::warn!(error = %err, "cannot start precompressing; gzip answers are compressed per request");
        done.finish();
    }
    dataset.precompression = Precompression {
        done,
        _alive: alive,
    };
}

/// Queues the precompression of `dataset`'s collections that have no
/// fragments (they were let go for a load that failed; see
/// `Dataset::precompress_again`). Nobody waits for it: the dataset serves,
/// and its gzip answers are compressed per request until it is done.
pub fn again(dataset: &Dataset) {
    let jobs: Vec<Job> = precompression_jobs(dataset)
        .into_iter()
        .filter(|job| match job {
            Job::Records { records, .. } => records.packed().is_none(),
            Job::Whole { into, .. } => into.get().is_none(),
        })
        .collect();
    if jobs.is_empty() {
        return;
    }
    let task = Task {
        jobs,
        to_collapse: Vec::new(),
        alive: Arc::downgrade(&dataset.precompression._alive),
        done: Arc::new(Done::default()),
        workspace: dataset.workspace_id.clone(),
    };
    if let Err(err) = queue(task) {
        tracing::warn!(error = %err, "cannot precompress again; gzip answers are compressed per request");
    }
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
fn precompression_jobs(ds: &Dataset) -> Vec<Job> {
    let chained = |r: &Arc<Rendered>, chain: Positions| Job::Records {
        records: Arc::clone(r),
        origin: r.take_origin(),
        chains: vec![chain],
        depths: &[1],
        trim: 0,
        solo: false,
    };
    let mut jobs = vec![
        chained(&ds.tasks.records, ds.tasks.order.clone()),
        // Few and large, with much in common: deeper dictionaries pay, and
        // solo fragments for `/portfolio/{id}`.
        Job::Records {
            records: Arc::clone(&ds.companies.records),
            origin: ds.companies.records.take_origin(),
            chains: vec![
                ds.companies.order.clone(),
                concat(&ds.companies.by_priority),
            ],
            depths: &[1, 2, 4, 8],
            trim: 0,
            solo: true,
        },
        chained(&ds.feed.records, ds.feed.order.clone()),
        chained(&ds.notes.records, concat(&ds.notes.by_company)),
        chained(&ds.roles.records, concat(&ds.roles.by_company)),
        chained(&ds.metrics.records, ds.metrics.all.clone()),
        // Served alone or ahead of their notes: solo fragments only, less
        // the closing brace where `notes` goes in.
        Job::Records {
            records: Arc::clone(&ds.meetings.records),
            origin: ds.meetings.records.take_origin(),
            chains: Vec::new(),
            depths: &[1],
            trim: 1,
            solo: true,
        },
        // Long (17 KB on `medium`) and about one to a meeting: a note
        // written as literals would cost 100 us and four times gzip -1,
        // and a chain would rarely be followed. Solo fragments only.
        Job::Records {
            records: Arc::clone(&ds.meeting_notes.records),
            origin: ds.meeting_notes.records.take_origin(),
            chains: Vec::new(),
            depths: &[1],
            trim: 0,
            solo: true,
        },
    ];
    jobs.retain(|job| match job {
        Job::Records { records, .. } => records.bytes() >= MIN_PRECOMPRESSED_BYTES,
        Job::Whole { .. } => true,
    });
    jobs.push(Job::Whole {
        body: ds.roles.body.clone(),
        into: Arc::clone(&ds.roles.gzip),
    });
    jobs
}

impl Job {
    /// Does the job on up to `threads` threads, its buffers placed by
    /// `placement`; gives the bytes it made, or `None` if it gave up (the
    /// dataset was dropped).
    fn run(
        self,
        threads: usize,
        placement: &impl Placement,
        keep_going: &(dyn Fn() -> bool + Sync),
    ) -> Option<usize> {
        match self {
            Job::Records {
                records,
                origin,
                chains,
                depths,
                trim,
                solo,
            } => {
                let chains: Vec<&[u32]> = chains.iter().map(Vec::as_slice).collect();
                let packing = Packing {
                    chains: &chains,
                    depths,
                    trim,
                    solo,
                };
                let built = match origin.as_ref().and_then(|o| Some((o.packed()?, &o.of))) {
                    // Only what changed is compressed; the rest copied.
                    Some((old, of)) => Packed::rebuild(
                        &old, &*records, of, &packing, threads, &HugePages, keep_going,
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
            Job::Whole { body, into } => {
                let gzip = gzip_once(&body);
                let bytes = gzip.len();
                let _ = into.set(gzip);
                Some(bytes)
            }
        }
    }

    /// Whether the job copies the fragments of all but a few records (at
    /// most one in [`SMALL_CHANGE`]): a few milliseconds, worth doing
    /// before the dataset serves, so that its gzip answers are at full
    /// speed from its first request.
    fn is_small_change(&self) -> bool {
        match self {
            Job::Records {
                origin: Some(origin),
                ..
            } => {
                let changed = origin.of.iter().filter(|&&o| o == Packed::CHANGED).count();
                origin.packed().is_some() && changed * SMALL_CHANGE <= origin.of.len()
            }
            Job::Records { origin: None, .. } | Job::Whole { .. } => false,
        }
    }
}

/// A change to at most one record in this many is packed before its
/// dataset serves ([`Job::is_small_change`]). A packing after one change
/// in 50,000 tasks takes 4 ms against 380 for all of them (the codec's
/// `repack` bench); at one in 64 it is still a fraction of the load.
const SMALL_CHANGE: usize = 64;

/// What the background thread does for one dataset.
struct Task {
    jobs: Vec<Job>,
    to_collapse: Vec<Arc<Rendered>>,
    /// Gone once the dataset is dropped: the task stops, or is skipped.
    alive: Weak<()>,
    done: Arc<Done>,
    workspace: String,
}

/// Tasks queued and not yet done.
static PENDING: AtomicUsize = AtomicUsize::new(0);

/// Datasets' records smaller than this are not moved onto huge pages.
const MIN_COLLAPSED_BYTES: usize = 4 << 20;

/// Hands `task` to the background thread, starting it the first time
/// (at nice 10, for as long as the process lives).
fn queue(task: Task) -> std::io::Result<()> {
    static QUEUE: OnceLock<Mutex<mpsc::Sender<Task>>> = OnceLock::new();
    if QUEUE.get().is_none() {
        let (tx, rx) = mpsc::channel::<Task>();
        std::thread::Builder::new()
            .name("precompress".to_owned())
            .spawn(move || {
                os::lower_priority();
                while let Ok(task) = rx.recv() {
                    // A panic in one dataset's packing (its waiters are
                    // released by `FinishOnDrop`) must not stop the others'.
                    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(task)));
                    // The packings' scratch memory goes back to the OS once
                    // the queue is empty (the scan's own trim came before).
                    if PENDING.fetch_sub(1, Ordering::AcqRel) == 1 {
                        os::release_free_memory();
                    }
                }
            })?;
        // Two datasets racing to start it: the loser's thread ends at once,
        // its channel's sender dropped here.
        let _ = QUEUE.set(Mutex::new(tx));
    }
    let sender = QUEUE
        .get()
        .expect("set above")
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    PENDING.fetch_add(1, Ordering::AcqRel);
    sender.send(task).map_err(|_| {
        PENDING.fetch_sub(1, Ordering::AcqRel);
        std::io::Error::other("the precompression thread has stopped")
    })
}

fn run(task: Task) {
    let Task {
        jobs,
        to_collapse,
        alive,
        done,
        workspace,
    } = task;
    let workspace = workspace.as_str();
    let finish = FinishOnDrop(done);
    let keep_going = || alive.strong_count() > 0;
    let started = Clock::now();
    let mut bytes = 0;
    for job in jobs {
        if !keep_going() {
            tracing::debug!(workspace, "dataset replaced; precompression stopped");
            return;
        }
        match job.run(os::cores(), &HugePages, &keep_going) {
            Some(made) => bytes += made,
            None => return,
        }
    }
    if bytes > 0 {
        tracing::info!(
            workspace,
            bytes,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "records precompressed for gzip answers"
        );
    }
    // Whoever waits for the precompression may go on; huge pages are
    // not waited for.
    finish.0.finish();
    for records in to_collapse {
        if !keep_going() {
            return;
        }
        records.collapse_to_huge_pages(&keep_going);
    }
}

/// The fragments on huge pages, like the records they are made from: a
/// page reads them from all over the collection.
struct HugePages;

impl Placement for HugePages {
    fn reserved<T>(&self, buf: &Vec<T>) {
        os::prefer_huge_pages(buf);
    }

    fn built<T>(&self, data: &[T]) {
        os::collapse_to_huge_pages(data);
    }
}

/// `body` gzipped at the default level, once.
fn gzip_once(body: &[u8]) -> Bytes {
    use std::io::Write;
    let mut encoder = flate2::write::GzEncoder::new(
        Vec::with_capacity(body.len() / 4),
        flate2::Compression::default(),
    );
    // Writing into a Vec cannot fail.
    let _ = encoder.write_all(body);
    Bytes::from(encoder.finish().unwrap_or_default())
}
