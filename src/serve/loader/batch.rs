//! When what a scan has loaded settles: in batches (one conflict check
//! and one catalog swap for many small files, since each costs time in
//! proportion to the workspaces serving).

use std::time::{Duration, Instant as Clock};

use super::load::ReadResult;

/// A batch settles once its files add up to this many bytes: what is read
/// but not yet serving stays bounded (docs/reload.md#memory).
const BATCH_BYTES: u64 = 64 << 20;

/// ... or once its first file has waited this long, so that a burst of
/// changes is not held back by the files after it ...
const BATCH_WAIT: Duration = Duration::from_millis(50);

/// ... or this many times as long as the last settle took, if longer.
pub const SETTLE_SHARE: u32 = 4;

/// Files read and not yet settled.
#[derive(Default)]
pub struct Batch {
    results: Vec<ReadResult>,
    bytes: u64,
    since: Option<Clock>,
}

impl Batch {
    pub fn add(&mut self, result: ReadResult) {
        self.bytes += result.bytes;
        self.since.get_or_insert_with(Clock::now);
        self.results.push(result);
    }

    /// Whether the batch should settle now, `wait` being how long a batch
    /// waits at least (besides [`BATCH_WAIT`]).
    pub fn is_full(&self, wait: Duration) -> bool {
        let wait = wait.max(BATCH_WAIT);
        self.bytes >= BATCH_BYTES || self.since.is_some_and(|at| at.elapsed() >= wait)
    }

    /// What the batch holds, leaving it empty.
    pub fn take(&mut self) -> Vec<ReadResult> {
        std::mem::take(self).results
    }
}
