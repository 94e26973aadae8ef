//! The warm-up threads: the stage a dataset goes through once built and
//! before (or while) it serves, as tantivy's reader drives its warmers:
//! the jobs the domain describes (`store::warm`: the records' gzip
//! fragments, `--precompress on`) run here, and then, where the process
//! has more than one core and the records fill huge pages, the records
//! move onto huge pages.
//!
//! One background thread per core does it for every dataset, each
//! taking the next one queued: a first scan of thousands of small
//! workspaces must not start a thread for each, and one thread for them
//! all left the other cores idle once the first scan was over (8,000
//! workspaces of 100 KB took as long to warm on two cores as on one). A
//! large dataset is warmed alone, its packing spread over every core.
//! Compressing every record takes longer than parsing the snapshot, so
//! it does not hold up publishing: a new dataset serves at once, its gzip
//! answers compressed per request, and switches to precompressed
//! fragments collection by collection as they are made. The threads run
//! at a low priority (nice 10), so that on a busy core requests go first,
//! and stop early when their dataset is dropped (replaced by a newer
//! version) before it is done. A small change (`WarmJob::is_small_change`) is
//! repacked on the loader's thread instead, right after its dataset is
//! published ([`Repacks`]): a new version serves as soon as it is built,
//! and its gzip answers are compressed per request only for the few
//! milliseconds (a tenth of a second for 100 MB of records, whose
//! fragments it copies) until then.
//!
//! The scan's warm-up step (`serve::loader::warm`) calls [`start`] between
//! settling and publishing, and [`remake_fragments`] for a version that
//! keeps serving after a load that followed it failed; a load on demand
//! (`serve::residency`) calls [`start_on_demand`].

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock, Weak, mpsc};
use std::time::Instant as Clock;

use gzip_fragments::Placement;

use portfolio_domain::store::warm::{WarmJob, WarmTicket};
use portfolio_domain::store::{Dataset, Rendered};
use portfolio_os as os;

/// Datasets' records smaller than this are not moved onto huge pages.
const MIN_COLLAPSED_BYTES: usize = 4 << 20;

/// A dataset whose records (rendered bytes, not file bytes) come to this
/// much is warmed alone, on every core; smaller ones one per core, side by
/// side: at most one large packing's scratch memory at a time. The same
/// figure as, but not the same measure as, a file that loads alone
/// (`storage::LARGE_SNAPSHOT_FILE_BYTES`, bytes of the file).
const ALONE_RECORD_BYTES: usize = 16 << 20;

/// Small changes' repacks (`WarmJob::is_small_change`): mostly copies of
/// the version before's fragments, run on the loader's thread once the new
/// version is published, not on the threads at nice 10, which requests
/// may keep waiting. Dropping them unrun leaves the collections to the
/// per-request compression.
#[derive(Default)]
#[must_use = "run the repacks once the datasets are published"]
pub struct Repacks(Vec<WarmJob>);

impl Repacks {
    pub fn add(&mut self, more: Repacks) {
        self.0.extend(more.0);
    }

    /// Runs them, on this thread. One thread: a small change is mostly
    /// copies, and threads started for it at every reload leave their
    /// heaps behind.
    pub fn run(self) {
        for job in self.0 {
            let _ = job.run(1, &HugePages, &|| true);
        }
    }
}

/// Starts warming `dataset` (its gzip fragments if `precompress`, then
/// huge pages if [`os::collapse_is_worth_it`]); only the fragments are
/// waited for (`Dataset::wait_warmed`). Call it once, before the dataset
/// is shared; run the small changes' repacks it returns once it is.
///
/// Huge pages make a page scattered over a gigabyte of records about a
/// fifth cheaper to copy (random 50-task pages of the `medium` dataset,
/// in-process: 5.8-6.1 us against 7.5), and cost about 5 s of a core per
/// gigabyte after each load; on a single core they are not worth the
/// requests' wait (see `os`).
pub fn start(dataset: &mut Dataset, precompress: bool) -> Repacks {
    let records_bytes = records_bytes(dataset);
    // Records smaller than a huge page or two gain nothing from one.
    let collapse = os::collapse_is_worth_it() && records_bytes >= MIN_COLLAPSED_BYTES;
    if !precompress {
        // Nothing copies fragments from the version before: let it go.
        dataset.forget_origins();
    }
    if !precompress && !collapse {
        return Repacks::default();
    }
    let mut jobs = if precompress {
        dataset.warm_jobs()
    } else {
        Vec::new()
    };
    // The small changes on the loader's thread once published; the rest
    // queued.
    let repacks = Repacks(jobs.extract_if(.., |job| job.is_small_change()).collect());
    let to_collapse = if collapse {
        dataset.records_largest_first()
    } else {
        Vec::new()
    };
    let workspace = dataset.workspace_id.clone();
    let ticket = dataset.start_warming();
    let task = Task {
        jobs: Jobs::Ready(jobs),
        to_collapse,
        ticket,
        workspace,
        bytes: records_bytes,
    };
    if let Err(err) = queue(task) {
        // The task (and its ticket, which says done) was dropped.
        tracing::warn!(error = %err, "cannot start precompressing; gzip answers are compressed per request");
    }
    repacks
}

/// Queues the making again of the gzip fragments `dataset` let go for a
/// load that then failed (`Previous::missed`). Nobody waits for it: the
/// dataset serves, its gzip answers compressed per request until then.
pub fn remake_fragments(dataset: &Dataset) {
    let Some((jobs, ticket)) = dataset.warm_again() else {
        return;
    };
    let task = Task {
        jobs: Jobs::Ready(jobs),
        to_collapse: Vec::new(),
        ticket,
        workspace: dataset.workspace_id.clone(),
        bytes: records_bytes(dataset),
    };
    if let Err(err) = queue(task) {
        tracing::warn!(error = %err, "cannot precompress again; gzip answers are compressed per request");
    }
}

/// What the background thread does for one dataset.
struct Task {
    jobs: Jobs,
    to_collapse: Vec<Arc<Rendered>>,
    /// Says whether the dataset is still wanted; says done when dropped.
    ticket: WarmTicket,
    workspace: String,
    /// The dataset's records: whether it is warmed alone.
    bytes: usize,
}

/// A dataset's warm jobs: made when it is queued, or (a load on demand)
/// when the thread comes to it, from a weak reference, so that the queue
/// never keeps an evicted dataset's records alive: loads on demand can
/// come faster than one thread packs them.
enum Jobs {
    Ready(Vec<WarmJob>),
    Later(Weak<Dataset>),
}

/// Shares a dataset loaded on demand (`demand.rs`) and starts its warming:
/// its gzip fragments follow in the background, as after a reload, made
/// only if it is still in memory when the thread comes to it. No huge
/// pages: it may be evicted soon.
pub fn start_on_demand(mut dataset: Dataset, precompress: bool) -> Arc<Dataset> {
    if !precompress {
        dataset.forget_origins();
        return Arc::new(dataset);
    }
    let ticket = dataset.start_warming();
    let workspace = dataset.workspace_id.clone();
    let bytes = records_bytes(&dataset);
    let dataset = Arc::new(dataset);
    let task = Task {
        jobs: Jobs::Later(Arc::downgrade(&dataset)),
        to_collapse: Vec::new(),
        ticket,
        workspace,
        bytes,
    };
    if let Err(err) = queue(task) {
        tracing::warn!(error = %err, "cannot start precompressing; gzip answers are compressed per request");
    }
    dataset
}

/// Tasks queued and not yet done.
static PENDING: AtomicUsize = AtomicUsize::new(0);

/// Hands `task` to the background threads, starting them the first time
/// (one per core, at nice 10, for as long as the process lives).
fn queue(task: Task) -> std::io::Result<()> {
    static QUEUE: OnceLock<Mutex<mpsc::Sender<Task>>> = OnceLock::new();
    if QUEUE.get().is_none() {
        let (tx, rx) = mpsc::channel::<Task>();
        let rx = Arc::new(Mutex::new(rx));
        for _ in 0..os::cores() {
            let rx = Arc::clone(&rx);
            std::thread::Builder::new()
                .name("precompress".to_owned())
                .spawn(move || work(&rx))?;
        }
        // Two datasets racing to start them: the loser's threads end at
        // once, its channel's sender dropped here.
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
        std::io::Error::other("the precompression threads have stopped")
    })
}

/// One background thread: the next task queued, until the process ends.
fn work(rx: &Mutex<mpsc::Receiver<Task>>) {
    // Small datasets share the cores (a read lock each); a large one
    // waits for them and has every core (the write lock).
    static ALONE: RwLock<()> = RwLock::new(());
    os::lower_priority();
    loop {
        let next = rx.lock().unwrap_or_else(|p| p.into_inner()).recv();
        let Ok(task) = next else { return };
        let alone = task.bytes >= ALONE_RECORD_BYTES;
        let threads = if alone { os::cores() } else { 1 };
        {
            let _shared = (!alone).then(|| ALONE.read().unwrap_or_else(|p| p.into_inner()));
            let _alone = alone.then(|| ALONE.write().unwrap_or_else(|p| p.into_inner()));
            // A panic in one dataset's packing (its waiters are released
            // by the ticket's drop) must not stop the others'.
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(task, threads)));
        }
        // The packings' scratch memory goes back to the OS once the queue
        // is empty (the scan's own trim came before).
        if PENDING.fetch_sub(1, Ordering::AcqRel) == 1 {
            os::release_free_memory();
        }
    }
}

/// The bytes of `dataset`'s records.
fn records_bytes(dataset: &Dataset) -> usize {
    dataset
        .records_largest_first()
        .iter()
        .map(|r| r.bytes())
        .sum()
}

fn run(task: Task, threads: usize) {
    let Task {
        jobs,
        to_collapse,
        ticket,
        workspace,
        bytes: _,
    } = task;
    let workspace = workspace.as_str();
    let keep_going = || ticket.keep_going();
    let started = Clock::now();
    let mut bytes = 0;
    let (jobs, on_demand) = match jobs {
        Jobs::Ready(jobs) => (jobs, false),
        Jobs::Later(dataset) => match dataset.upgrade() {
            Some(dataset) => (dataset.warm_jobs(), true),
            // Evicted before its turn.
            None => return,
        },
    };
    for job in jobs {
        if !keep_going() {
            tracing::debug!(workspace, "dataset replaced; precompression stopped");
            return;
        }
        match job.run(threads, &HugePages, &keep_going) {
            Some(made) => bytes += made,
            None => return,
        }
    }
    // Loads on demand come by the thousand: their packings are not news.
    if bytes > 0 && !on_demand {
        tracing::info!(
            workspace,
            bytes,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "records precompressed for gzip answers"
        );
    }
    // Whoever waits for the precompression may go on; huge pages are
    // not waited for.
    ticket.finish();
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
