//! Step 4 of a scan, load: each fetched entry is built into a dataset,
//! and the result judged on the reloader thread. The loads of small files
//! are spread over the cores, because a workspace of a few hundred
//! kilobytes is parsed on one thread (a large file spreads its own records
//! over the cores, `snapshot::batches`). A large file loads alone, once
//! the small ones before it are done, so that a scan's peak memory stays
//! that of one large file.

use std::sync::{Arc, Mutex, MutexGuard, mpsc};
use std::thread::Scope;
use std::time::Duration;

use super::fetch::{Fetched, Unfetched};
use super::limit::{Ledger, MemoryLimit, json_bytes};
use super::verify;
use crate::metrics::Metrics;
use crate::storage::signatures::Signed;
use crate::storage::{
    EntryStamp, LARGE_SNAPSHOT_FILE_BYTES, SnapshotFile, SourceStatus, StorageError, StorageOrigin,
};
use portfolio_domain::snapshot::{self, Loaded, SnapshotError};
use portfolio_domain::store::Dataset;

/// Files fetched ahead of the workers, per worker. Only their names and
/// paths wait in the queue; what they load goes to the batch either way.
const QUEUE_PER_WORKER: usize = 16;

/// Files at least this large log when their load starts.
const LARGE_FILE: u64 = 100 << 20;

/// What loading needs of the scan.
pub struct Loading<'a> {
    /// Where the entries come from: a load is judged against it.
    pub origin: &'a StorageOrigin,
    pub metrics: &'a Metrics,
    /// Files whose load would not fit are refused before they are built.
    pub memory: MemoryLimit,
    /// What counts against the memory limit.
    pub ledger: &'a Ledger,
    /// Whether datasets will be precompressed: their fragments count
    /// against the memory limit.
    pub precompress: bool,
}

/// What reading one changed entry gave.
pub enum EntryRead {
    Done(Box<ReadResult>),
    /// Still being written, or changed while it was read: left for a later
    /// scan rather than judged.
    Settling(String),
    /// Cannot be fetched now (storage trouble): left for the next poll.
    Failed(String, StorageError),
}

impl Loading<'_> {
    /// What an entry that was not fetched gives: a refusal for its
    /// signature is judged as a rejected load, counted here.
    fn unfetched(&self, unfetched: Unfetched) -> EntryRead {
        match unfetched {
            Unfetched::Settling(name) => EntryRead::Settling(name),
            Unfetched::Failed(name, error) => EntryRead::Failed(name, error),
            Unfetched::Refused(refused) => {
                let (name, fingerprint, refusal, claims) = *refused;
                self.metrics.signature_refused(refusal.kind());
                EntryRead::Done(Box::new(ReadResult {
                    result: Err(SnapshotError::new(&name, verify::message(&refusal))),
                    name,
                    fingerprint,
                    bytes: 0,
                    elapsed: Duration::ZERO,
                    source: None,
                    need: 0,
                    refused: None,
                    claims,
                    signed: None,
                    refusal: Some(refusal.kind()),
                }))
            }
        }
    }
}

/// What loading one changed entry gave.
pub struct ReadResult {
    pub name: String,
    pub fingerprint: EntryStamp,
    /// The size of what was read.
    pub bytes: u64,
    pub result: Result<Loaded, SnapshotError>,
    pub elapsed: Duration,
    /// Object storage: the object it was read from.
    pub source: Option<SourceStatus>,
    /// What its load was counted at against the memory limit.
    pub need: u64,
    /// Refused for memory, and why.
    pub refused: Option<MemoryRefusal>,
    /// Refused (for memory, or its signature): what it claims, read
    /// without building it, where that can be believed; its keys then
    /// answer 503 (`Dataset::refused`) and it takes part in conflicts.
    pub claims: Option<Dataset>,
    /// Under `--trust-key`: the signature it was accepted with, or the
    /// kind of refusal that rejected it.
    pub signed: Option<Signed>,
    pub refusal: Option<&'static str>,
}

/// A load refused for memory.
pub struct MemoryRefusal {
    /// What the load would have been counted at.
    pub need: u64,
}

/// The largest value (a record, a header member) that reading a refused
/// version's claims holds (`snapshot::claims`): the pass holds that and a
/// chunk of the file, so it costs a few MiB whatever the file, which the
/// process's own share of the memory limit (`limit::PROCESS_BYTES`, its
/// buffers) covers; it runs on the reloader thread, one at a time. A file
/// with a larger value (a meeting's transcript of megabytes) claims
/// nothing, and its keys get 401 as before.
pub const CLAIMS_MAX_VALUE: usize = 4 << 20;

/// A load finished on a worker, to be judged, with what it was counted at.
type Finished = (Fetched, u64, BuildResult);

/// What a load gave, and under `--trust-key` the SHA-256 of the bytes it
/// read (hashed as it read them: `SnapshotFile::digesting`).
pub struct BuildResult {
    pub result: Result<Loaded, SnapshotError>,
    pub sha256: Option<std::io::Result<String>>,
}

/// Loads what `fetched` gives, small files on a worker per core (started
/// in `scope`, stopped when the iterator is done), large ones alone on
/// this thread. Yields what each gave, judged on this thread, in the order
/// the loads finish; an entry is fetched once the one before it is queued
/// or loaded, and a large one loads only once every load before it is
/// judged (and so may have settled).
pub fn load_on_cores<'scope, 'env, F>(
    scope: &'scope Scope<'scope, 'env>,
    fetched: F,
    loading: &'env Loading<'env>,
) -> Loads<'env, F>
where
    F: ExactSizeIterator<Item = Result<Fetched, Unfetched>>,
{
    let workers = portfolio_os::cores().min(fetched.len());
    let (results, finished) = mpsc::channel::<Finished>();
    // A queue deep enough that the workers keep loading while this thread
    // settles a batch (a few tens of milliseconds).
    let jobs = (workers > 1).then(|| {
        let (jobs, queue) = mpsc::sync_channel::<(Fetched, u64)>(workers * QUEUE_PER_WORKER);
        let queue = Arc::new(Mutex::new(queue));
        for _ in 0..workers {
            let (queue, results) = (Arc::clone(&queue), results.clone());
            scope.spawn(move || {
                loop {
                    // The lock is held only to take the next file.
                    let next = lock(&queue).recv();
                    let Ok((fetched, need)) = next else { return };
                    let loaded = loading.load(&fetched);
                    if results.send((fetched, need, loaded)).is_err() {
                        return;
                    }
                }
            });
        }
        jobs
    });
    Loads {
        fetched,
        loading,
        jobs,
        finished,
        in_flight: 0,
        alone: None,
        fetching: true,
    }
}

/// The loads of one round of a scan, as an iterator ([`load_on_cores`]).
pub struct Loads<'env, F> {
    fetched: F,
    loading: &'env Loading<'env>,
    /// The workers' queue; `None` with one worker or fewer (everything
    /// loads on this thread) and once every entry is queued.
    jobs: Option<mpsc::SyncSender<(Fetched, u64)>>,
    finished: mpsc::Receiver<Finished>,
    /// Loads queued or under way on the workers.
    in_flight: usize,
    /// A file to load on this thread once nothing is in flight.
    alone: Option<(Fetched, u64)>,
    /// False once every entry is fetched (or the workers are gone).
    fetching: bool,
}

impl<F> Iterator for Loads<'_, F>
where
    F: Iterator<Item = Result<Fetched, Unfetched>>,
{
    type Item = EntryRead;

    fn next(&mut self) -> Option<EntryRead> {
        loop {
            if self.alone.is_some() {
                if self.in_flight > 0
                    && let Some(read) = self.take(true)
                {
                    return Some(read);
                }
                let (fetched, need) = self.alone.take()?;
                let loaded = self.loading.load(&fetched);
                return Some(self.loading.judge(fetched, need, loaded, None));
            }
            if self.in_flight > 0
                && let Some(read) = self.take(false)
            {
                return Some(read);
            }
            let next = if self.fetching {
                self.fetched.next()
            } else {
                None
            };
            let Some(next) = next else {
                self.fetching = false;
                // The workers finish what is queued, then stop.
                self.jobs = None;
                return if self.in_flight > 0 {
                    self.take(true)
                } else {
                    None
                };
            };
            let fetched = match next {
                Ok(fetched) => fetched,
                Err(unfetched) => return Some(self.loading.unfetched(unfetched)),
            };
            // Admitted here, in the order of the entries, so that what is
            // refused depends only on the files and the limit.
            let need = match self.loading.admit(&fetched) {
                Ok(need) => need,
                Err((need, refused)) => return Some(self.loading.refuse(fetched, need, refused)),
            };
            match &self.jobs {
                Some(jobs) if fetched.local.len < LARGE_SNAPSHOT_FILE_BYTES => {
                    if jobs.send((fetched, need)).is_err() {
                        // The workers are gone: fetch nothing more.
                        self.fetching = false;
                        continue;
                    }
                    self.in_flight += 1;
                }
                _ => self.alone = Some((fetched, need)),
            }
        }
    }
}

impl<F> Loads<'_, F> {
    /// Judges one finished load, waiting for it if `wait`; `None` if there
    /// was none (none is in flight any more if the workers are gone).
    fn take(&mut self, wait: bool) -> Option<EntryRead> {
        let next = if wait {
            self.finished.recv().ok()
        } else {
            self.finished.try_recv().ok()
        };
        match next {
            Some((fetched, need, loaded)) => {
                self.in_flight -= 1;
                Some(self.loading.judge(fetched, need, loaded, None))
            }
            None => {
                if wait {
                    self.in_flight = 0;
                }
                None
            }
        }
    }
}

impl Loading<'_> {
    /// What loading `fetched` is counted at against the memory limit,
    /// counted from now on; or why it does not fit.
    fn admit(&self, fetched: &Fetched) -> Result<u64, (u64, SnapshotError)> {
        let local = &fetched.local;
        let file = fetched.snapshot_file();
        let need = self.memory.need(&file, local.len, self.precompress);
        match self
            .memory
            .refusal(&local.label, need, self.ledger, self.precompress)
        {
            Some(refused) => Err((need, refused)),
            None => {
                self.ledger.admit(need);
                Ok(need)
            }
        }
    }

    /// A fetched entry refused for memory, judged with what it claims.
    /// Under `--trust-key` its claims count only as far as its accepted
    /// statement vouches for them (its bytes are not hashed unbuilt).
    fn refuse(&self, fetched: Fetched, need: u64, refused: SnapshotError) -> EntryRead {
        let file = fetched.snapshot_file();
        let claims =
            snapshot::claims(&fetched.local.label, &file, CLAIMS_MAX_VALUE).and_then(|claims| {
                match &fetched.signed {
                    Some(signed) => verify::vouched(signed.statement(), claims),
                    None => Some(claims.refused()),
                }
            });
        let built = BuildResult {
            result: Err(refused),
            sha256: None,
        };
        self.judge(fetched, 0, built, Some((MemoryRefusal { need }, claims)))
    }

    /// Loads a fetched entry (on any thread), hashing what it reads where
    /// a signature names the bytes.
    fn load(&self, fetched: &Fetched) -> BuildResult {
        let local = &fetched.local;
        let mut file = fetched.snapshot_file();
        if fetched.signed.is_some() {
            file = file.digesting();
        }
        if self.memory.bytes().is_some() {
            // Not past what the limit counted it at.
            let counted = json_bytes(&file, local.len);
            file = file.inflating_at_most(counted);
        }
        if local.len >= LARGE_FILE {
            tracing::info!(file = %fetched.name, bytes = local.len, "loading a large snapshot");
        }
        let previous = fetched.previous.clone();
        seam::at(seam::Step::Load);
        let result = crate::serve::build::following(
            &local.label,
            &file,
            previous,
            fetched.started,
            self.metrics,
        );
        BuildResult {
            sha256: file.sha256(),
            result,
        }
    }

    /// Judges a load on the reloader thread: a file rewritten while it was
    /// read may be half written, and is read again by a later scan.
    fn judge(
        &self,
        fetched: Fetched,
        need: u64,
        built: BuildResult,
        refused: Option<(MemoryRefusal, Option<Dataset>)>,
    ) -> EntryRead {
        let Fetched {
            name,
            fingerprint,
            local,
            file: _,
            started,
            previous,
            signed,
        } = fetched;
        // What loaded must be what was signed: the bytes it read,
        // workspace, version, keys.
        let mut refusal = None;
        let result = match (built.result, &signed) {
            (Ok(loaded), Some(signed)) => match verify::read(signed, built.sha256)
                .and_then(|()| verify::loaded(signed, &loaded.dataset))
            {
                Ok(()) => Ok(loaded),
                Err(refused) => {
                    self.metrics.signature_refused(refused.kind());
                    refusal = Some(refused.kind());
                    Err(SnapshotError::new(&local.label, verify::message(&refused)))
                }
            },
            (result, _) => result,
        };
        if result.is_err()
            && let Some(previous) = previous
        {
            // It keeps serving: if its fragments were let go for the load
            // that failed, they are made again.
            crate::serve::build::warming::remake_fragments(&previous);
        }
        seam::at(seam::Step::Judge);
        if !self.origin.unchanged(&name, &fingerprint) {
            // Read again later: no longer counted.
            self.ledger.settled(need, None);
            return EntryRead::Settling(name);
        }
        let (source, bytes) = (local.source.clone(), local.len);
        self.origin.loaded(&name, local, result.is_ok());
        let (refused, claims) = refused.map_or((None, None), |(r, c)| (Some(r), c));
        EntryRead::Done(Box::new(ReadResult {
            name,
            fingerprint,
            bytes,
            result,
            elapsed: started.elapsed(),
            source,
            need,
            refused,
            claims,
            signed,
            refusal,
        }))
    }
}

impl Fetched {
    /// The fetched content as the load reads it: the one open file.
    fn snapshot_file(&self) -> SnapshotFile {
        let local = &self.local;
        SnapshotFile::opened(Arc::clone(&self.file), &local.path, &local.label)
    }
}

/// Where a test may act between the steps of one load, on the thread that
/// runs it (a single file loads on the scan's own thread): the moments at
/// which a writer racing the scan could change the file. Nothing outside
/// tests.
pub(super) mod seam {
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum Step {
        /// The load is about to read the fetched content.
        Load,
        /// The load is done and about to be judged.
        Judge,
    }

    /// What a test runs at each step.
    #[cfg(test)]
    pub type Hook = Box<dyn Fn(Step)>;

    #[cfg(test)]
    thread_local! {
        pub static HOOK: std::cell::RefCell<Option<Hook>> =
            const { std::cell::RefCell::new(None) };
    }

    pub fn at(_step: Step) {
        #[cfg(test)]
        HOOK.with_borrow(|hook| {
            if let Some(hook) = hook {
                hook(_step);
            }
        });
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}
