//! The byte bound of loads on demand in flight (`--memory-budget`).
//!
//! A load on demand builds a whole dataset beside the resident ones before
//! the cache counts it, so without a bound a burst of first requests for
//! many cold workspaces would build them all at once, each its full peak,
//! on top of the budget. Each load takes its estimate (its kept file's
//! length, as `--memory-limit` estimates a build) out of a semaphore of
//! [`share`] of the budget until its dataset is built; a load bigger than
//! the whole bound takes all of it, so it waits for the others and runs
//! alone rather than never. The bound is reserved in the memory limit's
//! ledger beside the budget (`limit.rs`), so the limit always has room
//! for the loads it lets run.

use tokio::sync::{Semaphore, SemaphorePermit};

use super::demand::KeptCopy;
use crate::storage::EntryStamp;

/// The share of the budget that loads in flight may take at once: a
/// quarter lets a few workspaces of a tenth of the budget load side by
/// side, which a cold start with many clients needs, while the limit
/// needs only a quarter more than the budget for them.
const SHARE: (u64, u64) = (1, 4);

/// The semaphore counts in KiB, so that one acquisition (a `u32`) covers
/// any file up to 4 TiB.
const UNIT: u64 = 1 << 10;

/// The bytes loads on demand in flight may take under `budget`.
pub fn share(budget: u64) -> u64 {
    (budget / SHARE.1 * SHARE.0).max(UNIT)
}

/// Loads on demand in flight, bounded by bytes.
pub struct LoadBound {
    permits: Semaphore,
    units: u32,
}

impl LoadBound {
    /// A bound of [`share`] of `budget`.
    pub fn of_budget(budget: u64) -> LoadBound {
        let units = (share(budget) / UNIT).clamp(1, u64::from(u32::MAX)) as u32;
        LoadBound {
            permits: Semaphore::new(units as usize),
            units,
        }
    }

    /// Waits until a load estimated at `bytes` fits beside the loads in
    /// flight; its share is given back when the permit drops. One bigger
    /// than the bound waits for all of it.
    pub async fn admit(&self, bytes: u64) -> SemaphorePermit<'_> {
        let units = bytes.div_ceil(UNIT).clamp(1, u64::from(self.units)) as u32;
        self.permits
            .acquire_many(units)
            .await
            .expect("the semaphore is never closed")
    }
}

/// What building the version kept at `kept` takes at its peak, estimated
/// from its length on disk as `--memory-limit` estimates a scan's build
/// (the gzip fragments come later, in the background, and are the
/// budget's); 0 when the length cannot be had.
pub fn estimate(kept: &KeptCopy) -> u64 {
    let (len, name) = match kept {
        KeptCopy::File { path, .. } => (
            std::fs::metadata(path).map_or(0, |m| m.len()),
            path.to_string_lossy().into_owned(),
        ),
        KeptCopy::Listed {
            name, fingerprint, ..
        } => {
            let len = match fingerprint {
                EntryStamp::File(file) => file.len,
                EntryStamp::Object(object) => object.size,
            };
            (len, name.clone())
        }
    };
    crate::serve::build::estimate(len, name.ends_with(".gz"))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;

    /// Loads whose estimates add up to more than the bound wait for each
    /// other; a load bigger than the whole bound still runs, alone.
    #[tokio::test]
    async fn loads_wait_for_room_and_a_big_one_runs_alone() {
        let bound = Arc::new(LoadBound::of_budget(4 << 20));
        assert_eq!(share(4 << 20), 1 << 20);
        let first = bound.admit(600 << 10).await;
        let waits = tokio::time::timeout(Duration::from_millis(50), bound.admit(600 << 10)).await;
        assert!(waits.is_err(), "two loads of 600 KiB do not fit in 1 MiB");
        let small = tokio::time::timeout(Duration::from_millis(50), bound.admit(300 << 10))
            .await
            .expect("300 KiB fits beside 600 KiB");
        drop((first, small));
        let big = tokio::time::timeout(Duration::from_millis(50), bound.admit(64 << 20))
            .await
            .expect("a load bigger than the bound runs when it is alone");
        let beside = tokio::time::timeout(Duration::from_millis(50), bound.admit(1)).await;
        assert!(beside.is_err(), "nothing runs beside it");
        drop(big);
    }
}
