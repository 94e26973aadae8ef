//! When what a scan has loaded settles: small files in batches (one
//! conflict check and one catalog swap for many, since each costs time in
//! proportion to the workspaces serving), a large file at once.

use std::time::{Duration, Instant as Clock};

use super::load::ReadResult;
use crate::storage::LARGE_SNAPSHOT_FILE_BYTES;

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
pub struct SettleBatch {
    results: Vec<ReadResult>,
    bytes: u64,
    since: Option<Clock>,
    /// It holds a file that loaded alone ([`LARGE_SNAPSHOT_FILE_BYTES`]).
    large: bool,
}

impl SettleBatch {
    pub fn add(&mut self, result: ReadResult) {
        self.bytes += result.bytes;
        self.large |= result.bytes >= LARGE_SNAPSHOT_FILE_BYTES;
        self.since.get_or_insert_with(Clock::now);
        self.results.push(result);
    }

    pub fn is_empty(&self) -> bool {
        self.results.is_empty()
    }

    /// Whether the batch should settle now, `wait` being how long a batch
    /// waits at least (besides [`BATCH_WAIT`]). A large file settles as
    /// soon as it is built, with the small ones read before it, so that
    /// its dataset (or the one it replaces) is never held while the next
    /// large file is built: at most one large dataset that does not serve
    /// exists at a time.
    pub fn is_full(&self, wait: Duration) -> bool {
        let wait = wait.max(BATCH_WAIT);
        self.large || self.bytes >= BATCH_BYTES || self.since.is_some_and(|at| at.elapsed() >= wait)
    }

    /// What the batch holds, leaving it empty.
    pub fn take(&mut self) -> Vec<ReadResult> {
        std::mem::take(self).results
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::{EntryStamp, FileStamp};
    use portfolio_domain::snapshot::SnapshotError;

    fn read(bytes: u64) -> ReadResult {
        let fingerprint = EntryStamp::File(FileStamp {
            len: bytes,
            modified: None,
            changed: (0, 0),
            inode: (0, 0),
            signature: None,
        });
        ReadResult {
            name: "a.json".to_owned(),
            fingerprint,
            bytes,
            result: Err(SnapshotError::new("a.json", "not read")),
            elapsed: Duration::ZERO,
            source: None,
            need: 0,
            refused: None,
            claims: None,
            signed: None,
            refusal: None,
        }
    }

    /// A minute: no batch in these tests waits that long.
    const PATIENT: Duration = Duration::from_secs(60);

    #[test]
    fn a_file_that_loaded_alone_settles_at_once() {
        let mut batch = SettleBatch::default();
        batch.add(read(1 << 20));
        assert!(!batch.is_full(PATIENT), "a small file waits for more");
        batch.add(read(LARGE_SNAPSHOT_FILE_BYTES));
        assert!(batch.is_full(PATIENT), "a large file does not wait");
        assert_eq!(batch.take().len(), 2, "it settles with the small one");
        assert!(!batch.is_full(PATIENT), "an empty batch never settles");

        // Between LARGE_SNAPSHOT_FILE_BYTES and BATCH_BYTES too (it used to wait).
        batch.add(read(BATCH_BYTES - 1));
        assert!(batch.is_full(PATIENT));
    }

    #[test]
    fn small_files_settle_by_bytes_or_by_time() {
        let mut batch = SettleBatch::default();
        for _ in 0..(BATCH_BYTES / (LARGE_SNAPSHOT_FILE_BYTES - 1)) {
            batch.add(read(LARGE_SNAPSHOT_FILE_BYTES - 1));
            assert!(!batch.is_full(PATIENT));
        }
        batch.add(read(LARGE_SNAPSHOT_FILE_BYTES - 1));
        assert!(batch.is_full(PATIENT), "{} bytes", batch.bytes);

        let mut batch = SettleBatch::default();
        batch.add(read(1));
        std::thread::sleep(BATCH_WAIT);
        assert!(batch.is_full(Duration::ZERO), "waited BATCH_WAIT");
        assert!(!batch.is_full(PATIENT), "waits longer after a slow settle");
    }
}
