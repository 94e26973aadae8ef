//! Hot reload: what makes the loader scan the snapshots (a directory or an
//! object store) again.
//!
//! One thread, the reloader, does every scan, so scans never overlap and
//! never run on the async runtime. It scans when
//!
//! - file events arrive (notify), for any name in the directory, hidden
//!   ones included, since a Kubernetes volume update is a rename of the
//!   hidden `..data` symlink. A burst of events is one scan: 15 ms after
//!   its last if it was renames into place alone (each such file is read
//!   without waiting for it to settle: a rename is atomic, so its content
//!   is whole; the source is told, `ScanBookkeeping::renamed_into_place`), 100 ms
//!   after it otherwise (a write in place);
//! - the poll interval passes, with `--poll-interval` (network filesystems
//!   and some container volumes deliver no events);
//! - [`RescanHandle::rescan`] is called (SIGHUP);
//! - a file it skipped because it was still being written has settled.
//!
//! Scans of a directory are cheap when nothing changed: a `stat` per file.
//!
//! An object store has no events: it is polled, every `--poll-interval`
//! (10 s by default) jittered by ±20%, and less often while it fails
//! (`storage::StorageOrigin::next_poll`).

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use notify::event::{ModifyKind, RenameMode};
use notify::{EventKind, RecursiveMode, Watcher};

use crate::serve::loader::{ScanReport, Snapshots};

/// How long file events other than a rename must pause before a scan:
/// long enough to coalesce a burst (writes, chmod), short enough to serve
/// a new snapshot soon.
const DEBOUNCE: Duration = Duration::from_millis(100);

/// How long renames into place must pause before a scan: a file renamed
/// into place is whole, but a writer's next step (removing the file's
/// old name, renaming its next file) usually follows at once, and one
/// scan must see both: a workspace moving from one name to another then
/// serves on, never unloaded in between.
const RENAME_PAUSE: Duration = Duration::from_millis(15);

/// A writer that never pauses still gets a scan this long after its first
/// event.
const DEBOUNCE_AT_MOST: Duration = Duration::from_secs(1);

/// How soon to look again at files that were still being written.
const SETTLE_RETRY: Duration = Duration::from_millis(200);

/// How long the first scan waits for files that are still being written
/// before it reads them anyway.
const FIRST_SCAN_PATIENCE: Duration = Duration::from_secs(10);

/// How often an object store is polled without `--poll-interval`.
const OBJECT_STORE_POLL: Duration = Duration::from_secs(10);

/// How often serving versions' signatures are looked at for expiry.
const EXPIRY_LOOK: Duration = Duration::from_secs(60);

enum Message {
    Rescan,
    /// File events other than a rename into place: a scan once they pause.
    Changed,
    /// These names were renamed into place: a scan once renames pause.
    Renamed(Vec<String>),
    Stop,
}

/// Owns the reloader thread and the file watcher; dropping it stops both.
pub struct Reloader {
    tx: mpsc::Sender<Message>,
    thread: Option<JoinHandle<()>>,
    /// Kept alive for as long as the reloader: dropping it stops the events.
    _watcher: Option<notify::RecommendedWatcher>,
}

impl Reloader {
    /// Starts the reloader: the first scan right away (setting `ready` when
    /// it has finished), then a scan on every trigger.
    pub fn start(
        snapshots: Arc<Snapshots>,
        poll_interval: Option<Duration>,
        ready: Arc<AtomicBool>,
    ) -> std::io::Result<Reloader> {
        let (tx, rx) = mpsc::channel();
        let (watcher, poll_interval) = match (poll_interval, snapshots.origin().directory()) {
            (Some(interval), _) => (None, Some(interval)),
            (None, None) => (None, Some(OBJECT_STORE_POLL)),
            (None, Some(dir)) => match watch(dir, tx.clone()) {
                Ok(watcher) => (Some(watcher), None),
                Err(err) => {
                    let fallback = Duration::from_secs(1);
                    tracing::warn!(
                        dir = %dir.display(),
                        error = %err,
                        poll_interval_ms = fallback.as_millis() as u64,
                        "cannot watch the snapshot directory; polling instead"
                    );
                    (None, Some(fallback))
                }
            },
        };
        let thread = std::thread::Builder::new()
            .name("snapshot-reloader".into())
            .spawn(move || run(&snapshots, &rx, poll_interval, &ready))?;
        Ok(Reloader {
            tx,
            thread: Some(thread),
            _watcher: watcher,
        })
    }

    /// A handle that asks for a rescan (what SIGHUP does).
    pub fn handle(&self) -> RescanHandle {
        RescanHandle(self.tx.clone())
    }
}

/// Asks the reloader for a full rescan; cheap to clone and to call.
#[derive(Clone)]
pub struct RescanHandle(mpsc::Sender<Message>);

impl RescanHandle {
    pub fn rescan(&self) {
        let _ = self.0.send(Message::Rescan);
    }
}

impl Drop for Reloader {
    /// Stops the watcher at once and the thread after the scan in progress,
    /// without waiting for it: shutdown must not wait for a large load.
    fn drop(&mut self) {
        let _ = self.tx.send(Message::Stop);
        self.thread.take();
    }
}

fn watch(dir: &Path, tx: mpsc::Sender<Message>) -> notify::Result<notify::RecommendedWatcher> {
    let mut watcher = notify::recommended_watcher(move |result: notify::Result<notify::Event>| {
        let message = match result {
            Ok(event) => match event.kind {
                // `To` names the new path; `Both`, the old one then the new.
                EventKind::Modify(ModifyKind::Name(RenameMode::To)) => renamed(&event.paths[..]),
                EventKind::Modify(ModifyKind::Name(RenameMode::Both)) => {
                    renamed(event.paths.get(1..).unwrap_or_default())
                }
                // The name a rename took a file from (reported apart from
                // the one it went to): part of the same rename.
                EventKind::Modify(ModifyKind::Name(RenameMode::From)) => {
                    Message::Renamed(Vec::new())
                }
                EventKind::Access(_) => return,
                _ => Message::Changed,
            },
            Err(error) => {
                tracing::warn!(error = %error, "file watcher error; rescanning");
                Message::Rescan
            }
        };
        let _ = tx.send(message);
    })?;
    watcher.watch(dir, RecursiveMode::NonRecursive)?;
    Ok(watcher)
}

/// The message for paths renamed into the directory.
fn renamed(paths: &[std::path::PathBuf]) -> Message {
    let names = paths
        .iter()
        .filter_map(|p| p.file_name()?.to_str().map(str::to_owned))
        .collect();
    Message::Renamed(names)
}

/// The reloader thread's loop.
fn run(
    snapshots: &Snapshots,
    rx: &mpsc::Receiver<Message>,
    poll: Option<Duration>,
    ready: &AtomicBool,
) {
    if !first_scan(snapshots, rx, poll) {
        return;
    }
    ready.store(true, Ordering::Release);
    let mut retry_at: Option<Instant> = None;
    // When the next poll is due (with `--poll-interval` or object storage).
    let mut poll_at: Option<Instant> = None;
    // Events not scanned yet.
    let mut pending: Option<EventBurst> = None;
    loop {
        let debounced = pending.as_ref().map(EventBurst::due);
        let poll_due = poll.map(|interval| {
            *poll_at.get_or_insert_with(|| Instant::now() + snapshots.origin().next_poll(interval))
        });
        let wait = match retry_at.into_iter().chain(debounced).chain(poll_due).min() {
            Some(at) => at.saturating_duration_since(Instant::now()),
            None => Duration::from_secs(3600),
        };
        // Signatures expire whether or not anything changes: looked at
        // every minute, so the log says it within one.
        snapshots.look_at_expiries();
        let wait = if snapshots.origin().trust().enabled() {
            wait.min(EXPIRY_LOOK)
        } else {
            wait
        };
        match rx.recv_timeout(wait) {
            Ok(Message::Stop) | Err(RecvTimeoutError::Disconnected) => return,
            Ok(message) => {
                // Whatever else is queued joins it.
                let mut rescan = take(snapshots, message, &mut pending);
                while let Ok(message) = rx.try_recv() {
                    if let Message::Stop = message {
                        return;
                    }
                    rescan |= take(snapshots, message, &mut pending);
                }
                if !rescan {
                    continue;
                }
            }
            Err(RecvTimeoutError::Timeout) => {
                let due = |at: Option<Instant>| at.is_some_and(|at| at <= Instant::now());
                if !(due(poll_due) || due(retry_at) || due(debounced)) {
                    continue;
                }
            }
        }
        // The scan covers every event before it.
        pending = None;
        poll_at = None;
        let report = scan(snapshots);
        retry_at = (!report.settling.is_empty()).then(|| Instant::now() + SETTLE_RETRY);
    }
}

/// Takes in one message other than `Stop`: file events join the pending
/// burst; whether it asks for a scan now (`Rescan`).
fn take(snapshots: &Snapshots, message: Message, pending: &mut Option<EventBurst>) -> bool {
    let rename = match message {
        Message::Rescan => return true,
        Message::Stop => return false,
        Message::Changed => false,
        Message::Renamed(names) => {
            tell_renamed(snapshots, &names);
            true
        }
    };
    let at = Instant::now();
    let burst = pending.get_or_insert(EventBurst {
        first: at,
        last: at,
        renames_only: true,
    });
    burst.last = at;
    burst.renames_only &= rename;
    false
}

/// File events not scanned yet.
struct EventBurst {
    first: Instant,
    last: Instant,
    /// Whether every one was a rename into place.
    renames_only: bool,
}

impl EventBurst {
    /// When to scan: once the events pause, briefly after renames alone
    /// (whole files), longer after writes in place; and not later than
    /// [`DEBOUNCE_AT_MOST`] after the first.
    fn due(&self) -> Instant {
        let pause = if self.renames_only {
            RENAME_PAUSE
        } else {
            DEBOUNCE
        };
        (self.last + pause).min(self.first + DEBOUNCE_AT_MOST)
    }
}

/// Tells the source which names arrived by a rename, before the scan.
fn tell_renamed(snapshots: &Snapshots, names: &[String]) {
    for name in names {
        snapshots.origin().renamed_into_place(name);
    }
}

/// The first scan waits (within reason) for files still being written, so
/// that ready means "every file present at startup has been judged". An
/// object store must have been listed (or, while unreachable, the cache
/// restored) first: it is polled again, backing off, until then. Returns
/// false if the reloader was stopped meanwhile.
fn first_scan(snapshots: &Snapshots, rx: &mpsc::Receiver<Message>, poll: Option<Duration>) -> bool {
    let started = Instant::now();
    let is_directory = snapshots.origin().directory().is_some();
    loop {
        let report = scan(snapshots);
        let wait = if !is_directory && !report.listed {
            snapshots
                .origin()
                .next_poll(poll.unwrap_or(OBJECT_STORE_POLL))
        } else if report.settling.is_empty() {
            tracing::info!(
                dir = %snapshots.origin().describe(),
                elapsed_ms = started.elapsed().as_millis() as u64,
                "first scan finished"
            );
            return true;
        } else if started.elapsed() > FIRST_SCAN_PATIENCE {
            tracing::warn!(files = ?report.settling, "files still changing after the first scan's patience; ready anyway");
            return true;
        } else {
            SETTLE_RETRY
        };
        match rx.recv_timeout(wait) {
            Ok(Message::Stop) | Err(RecvTimeoutError::Disconnected) => return false,
            Ok(Message::Renamed(names)) => tell_renamed(snapshots, &names),
            Ok(Message::Rescan | Message::Changed) | Err(RecvTimeoutError::Timeout) => {}
        }
    }
}

fn scan(snapshots: &Snapshots) -> ScanReport {
    match snapshots.scan() {
        Ok(report) => report,
        Err(err) => {
            tracing::error!(dir = %snapshots.origin().describe(), error = %err, "cannot scan the snapshot directory");
            ScanReport::default()
        }
    }
}
