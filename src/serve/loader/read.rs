//! Step 3 of a scan: fetch each changed entry and load it. The reloader
//! thread fetches in order (a stat for a directory, a download for an
//! object store) and judges every result itself; the loads of small files
//! are spread over the cores, because a workspace of a few hundred
//! kilobytes is parsed on one thread (a large file spreads its own records
//! over the cores, `snapshot::batches`). Large files load one at a time,
//! alone, so that a scan's peak memory stays that of one large file.

use std::sync::{Arc, Mutex, MutexGuard, mpsc};
use std::time::Instant as Clock;

use super::files::ReadResult;
use super::{Snapshots, load_logging_progress};
use crate::snapshot::{Loaded, SnapshotError};
use crate::storage::{Fetch, Fingerprint, Local, SnapshotFile, StorageError};
use crate::store::Dataset;

/// Files at least this large load alone, on the reloader thread.
const LOAD_ALONE: u64 = 16 << 20;

/// Files fetched ahead of the workers, per worker. Only their names and
/// paths wait in the queue; what they load goes to the batch either way.
const QUEUE_PER_WORKER: usize = 16;

/// Files at least this large log when their load starts.
const LARGE_FILE: u64 = 100 << 20;

/// What reading one changed entry gave.
pub enum Read {
    Done(Box<ReadResult>),
    /// Still being written, or changed while it was read: left for a later
    /// scan rather than judged.
    Settling(String),
    /// Cannot be fetched now (storage trouble): left for the next poll.
    Failed(String, StorageError),
}

/// An entry fetched to local disk, to be loaded.
struct Fetched {
    name: String,
    fingerprint: Fingerprint,
    local: Local,
    started: Clock,
    /// The dataset the entry serves now: the load takes over its
    /// unchanged records.
    previous: Option<Arc<Dataset>>,
}

type Loading = (Fetched, Result<Loaded, SnapshotError>);

impl Snapshots {
    /// Fetches and loads each of `entries`, handing what each gave to
    /// `done` on this thread, in the order the loads finish.
    pub(super) fn read_all(&self, entries: Vec<(String, Fingerprint)>, done: &mut dyn FnMut(Read)) {
        let workers = crate::os::cores().min(entries.len());
        if workers <= 1 {
            for (name, fingerprint) in entries {
                match self.fetch_one(name, fingerprint) {
                    Ok(fetched) => {
                        let loaded = self.load_fetched(&fetched);
                        done(self.finish_one(fetched, loaded));
                    }
                    Err(read) => done(read),
                }
            }
            return;
        }
        // A queue deep enough that the workers keep loading while this
        // thread settles a batch (a few tens of milliseconds).
        let (jobs, queue) = mpsc::sync_channel::<Fetched>(workers * QUEUE_PER_WORKER);
        let queue = Mutex::new(queue);
        let (results, finished) = mpsc::channel::<Loading>();
        std::thread::scope(|scope| {
            for _ in 0..workers {
                let (queue, results) = (&queue, results.clone());
                scope.spawn(move || {
                    loop {
                        // The lock is held only to take the next file.
                        let next = lock(queue).recv();
                        let Ok(fetched) = next else { return };
                        let loaded = self.load_fetched(&fetched);
                        if results.send((fetched, loaded)).is_err() {
                            return;
                        }
                    }
                });
            }
            drop(results);
            let mut in_flight = 0usize;
            for (name, fingerprint) in entries {
                let fetched = match self.fetch_one(name, fingerprint) {
                    Ok(fetched) => fetched,
                    Err(read) => {
                        done(read);
                        continue;
                    }
                };
                if fetched.local.len >= LOAD_ALONE {
                    while in_flight > 0 && self.take(&finished, true, done) {
                        in_flight -= 1;
                    }
                    let loaded = self.load_fetched(&fetched);
                    done(self.finish_one(fetched, loaded));
                    continue;
                }
                if jobs.send(fetched).is_err() {
                    break;
                }
                in_flight += 1;
                while self.take(&finished, false, done) {
                    in_flight -= 1;
                }
            }
            drop(jobs);
            while in_flight > 0 && self.take(&finished, true, done) {
                in_flight -= 1;
            }
        });
    }

    /// Judges one finished load, waiting for it if `wait`; false if there
    /// was none.
    fn take(
        &self,
        finished: &mpsc::Receiver<Loading>,
        wait: bool,
        done: &mut dyn FnMut(Read),
    ) -> bool {
        let next = if wait {
            finished.recv().ok()
        } else {
            finished.try_recv().ok()
        };
        match next {
            Some((fetched, loaded)) => {
                done(self.finish_one(fetched, loaded));
                true
            }
            None => false,
        }
    }

    /// Fetches one entry: ready to load, or what stands in the way.
    fn fetch_one(&self, name: String, fingerprint: Fingerprint) -> Result<Fetched, Read> {
        let started = Clock::now();
        match self.origin.fetch(&name, &fingerprint) {
            Fetch::Ready(local) => Ok(Fetched {
                previous: self.files().get(&name).and_then(|e| e.dataset.clone()),
                name,
                fingerprint,
                local,
                started,
            }),
            Fetch::Settling => Err(Read::Settling(name)),
            Fetch::Failed(error) => Err(Read::Failed(name, error)),
        }
    }

    /// Loads a fetched entry (on any thread), unless the memory limit
    /// refuses it first.
    fn load_fetched(&self, fetched: &Fetched) -> Result<Loaded, SnapshotError> {
        let local = &fetched.local;
        let file = SnapshotFile::named(&local.path, &local.label);
        if let Some(refused) = self
            .memory
            .refusal(&local.label, &file, local.len, self.precompress)
        {
            return Err(refused);
        }
        if local.len >= LARGE_FILE {
            tracing::info!(file = %fetched.name, bytes = local.len, "loading a large snapshot");
        }
        let previous = fetched.previous.clone();
        load_logging_progress(
            &local.label,
            &file,
            previous,
            fetched.started,
            &self.metrics,
        )
    }

    /// Judges a load on the reloader thread: a file rewritten while it was
    /// read may be half written, and is read again by a later scan.
    fn finish_one(&self, fetched: Fetched, result: Result<Loaded, SnapshotError>) -> Read {
        let Fetched {
            name,
            fingerprint,
            local,
            started,
            previous,
        } = fetched;
        if result.is_err()
            && let Some(previous) = previous
        {
            // It keeps serving: if its fragments were let go for the load
            // that failed, they are made again.
            super::warm::again(&previous);
        }
        if !self.origin.unchanged(&name, &fingerprint) {
            return Read::Settling(name);
        }
        let result = result.map(|mut loaded| {
            super::warm::start(&mut loaded.dataset, self.precompress);
            loaded
        });
        let (source, bytes) = (local.source.clone(), local.len);
        self.origin.loaded(&name, local, result.is_ok());
        Read::Done(Box::new(ReadResult {
            name,
            fingerprint,
            bytes,
            result,
            elapsed: started.elapsed(),
            source,
        }))
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}
