//! Building a dataset from a local snapshot file: the one function the
//! scan's loads (`serve::loader`) and loads on demand
//! (`serve::residency`) both build through. It streams the file through
//! [`snapshot::load_following`] on every core ([`crate::threads::Cores`]),
//! logs the progress of a long load, paces it on a single core so that
//! requests do not notice it (`Pacer`), and, under `--trust-key`, holds
//! what it read to the signature it was accepted with (`signed.rs`). What
//! a build costs in memory is estimated here too, for the memory limit
//! and for the bound of loads on demand. The warm-up threads that make a
//! built dataset's gzip fragments are `warming.rs`.

pub mod signed;
pub mod warming;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant as Clock};

use crate::metrics::Metrics;
use crate::storage::signatures::Signed;
use crate::storage::{FetchedFile, OpenFile, SnapshotFile};
use portfolio_domain::snapshot::{self, Loaded, SnapshotError};
use portfolio_domain::store::{Dataset, Previous};

/// Peak bytes a build needs per byte of JSON: the rendered records (about
/// the JSON's size), their keys, id maps and list orders, and the read
/// window. Measured at 1.1 to 1.2 on the generator's data (BENCHMARKS.md,
/// "Reload cost"); the margin covers text with many escapes.
pub const BUILD_FACTOR: (u64, u64) = (13, 10);

/// What building a snapshot of `len` bytes on disk takes at its peak,
/// without its gzip fragments: the same estimate as a scan's (for a
/// `.json.gz` whose trailer is not read, eight times its length).
pub fn estimate(len: u64, gzip: bool) -> u64 {
    let json = if gzip { len.saturating_mul(8) } else { len };
    json.saturating_mul(BUILD_FACTOR.0) / BUILD_FACTOR.1
}

/// The file `local` holds, opened once: as the source opened it (a
/// directory's file or its private copy), or a download's path now.
pub fn opened(local: &FetchedFile) -> std::io::Result<Arc<OpenFile>> {
    match &local.file {
        Some(file) => Ok(Arc::clone(file)),
        None => OpenFile::open(&local.path).map(Arc::new),
    }
}

/// Builds the file at `path` with nothing to take over (a load on
/// demand: `serve::residency`), logged like any load. With
/// `signed`, the bytes it reads are hashed as it reads them and must be
/// content that signature names.
pub fn from_file(
    label: &str,
    path: &Path,
    signed: Option<&Signed>,
    metrics: &Metrics,
) -> Result<Loaded, SnapshotError> {
    let opened = OpenFile::open(path)
        .map_err(|e| SnapshotError::new(label, format!("cannot read {}: {e}", path.display())))?;
    from_opened(label, Arc::new(opened), path, signed, metrics)
}

/// [`from_file`] of a file already open (at `path`).
pub fn from_opened(
    label: &str,
    opened: Arc<OpenFile>,
    path: &Path,
    signed: Option<&Signed>,
    metrics: &Metrics,
) -> Result<Loaded, SnapshotError> {
    let mut file = SnapshotFile::opened(opened, path, label);
    if signed.is_some() {
        file = file.digesting();
    }
    let loaded = following(label, &file, None, Clock::now(), metrics)?;
    if let Some(signed) = signed {
        signed::read(signed, file.sha256())
            .and_then(|()| signed::loaded(signed, &loaded.dataset))
            .map_err(|refused| {
                metrics.signature_refused(refused.kind());
                SnapshotError::new(label, signed::message(&refused))
            })?;
    }
    Ok(loaded)
}

/// How often a long load says how far it has come.
const PROGRESS_INTERVAL: Duration = Duration::from_secs(2);

/// Loads a snapshot through [`snapshot::load_following`], taking over the
/// unchanged records of `previous`; a load that takes long logs its
/// progress every few seconds, so that it is never mistaken for a hang. On a single core the
/// load is paced so that requests do not notice it (`Pacer`).
pub fn following(
    name: &str,
    file: &SnapshotFile,
    previous: Option<Arc<Dataset>>,
    started: Clock,
    metrics: &Metrics,
) -> Result<snapshot::Loaded, snapshot::SnapshotError> {
    let mut last = started;
    let mut pacer = Pacer::on_a_single_core(metrics);
    let previous = previous.and_then(Previous::of);
    snapshot::load_following(
        name,
        file,
        previous,
        &crate::threads::Cores,
        &mut |collection, records| {
            if let Some(pacer) = &mut pacer {
                pacer.pace();
            }
            if last.elapsed() >= PROGRESS_INTERVAL {
                last = Clock::now();
                tracing::info!(
                    file = %name,
                    collection = collection.name(),
                    records,
                    elapsed_ms = started.elapsed().as_millis() as u64,
                    "still loading"
                );
            }
        },
    )
}

/// How long the reloader works before it looks whether requests came.
const PACE_RUN: Duration = Duration::from_micros(250);

/// How long it then steps aside if they did.
const PACE_PAUSE: Duration = Duration::from_micros(500);

/// How long after the last answered request the reloader still steps
/// aside: a slice in which the worker could answer nothing (because the
/// reloader held the core) does not mean that no request is waiting.
const PACE_BUSY: Duration = Duration::from_millis(2);

/// Keeps a load from delaying requests when the reloader and the request
/// worker share one core (a replica given one CPU). The reloader works in
/// slices of [`PACE_RUN`]; after each slice, while requests were answered
/// in the last [`PACE_BUSY`], it sleeps [`PACE_PAUSE`], so a request waits
/// at most one slice, and under
/// full load the reload still gets a third of the core (it takes at most
/// about three times as long). With no requests it never pauses. With more
/// cores the scheduler runs both at once and nothing is paced.
struct Pacer<'m> {
    metrics: &'m Metrics,
    slice: Clock,
    seen: u64,
    /// When `seen` last changed.
    busy_at: Option<Clock>,
}

impl<'m> Pacer<'m> {
    fn on_a_single_core(metrics: &'m Metrics) -> Option<Pacer<'m>> {
        let cores = portfolio_os::cores();
        (cores == 1).then(|| Pacer {
            metrics,
            slice: Clock::now(),
            seen: metrics.answered(),
            busy_at: None,
        })
    }

    fn pace(&mut self) {
        if self.slice.elapsed() < PACE_RUN {
            return;
        }
        let answered = self.metrics.answered();
        if answered != self.seen {
            self.seen = answered;
            self.busy_at = Some(Clock::now());
        }
        if self.busy_at.is_some_and(|at| at.elapsed() < PACE_BUSY) {
            std::thread::sleep(PACE_PAUSE);
        }
        self.slice = Clock::now();
    }
}
