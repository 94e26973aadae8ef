//! The clock of a collection: hands out the timestamps its records are
//! ordered by, with ties on purpose.

use std::ops::Range;

use super::rng::Rng;
use super::timestamp::{RANGE_END, RANGE_START, SHARED_INSTANT, Style, Ts};

/// Hands out ordering timestamps for one collection, with deliberate ties.
///
/// With [`Clock::with_shared_first`] (tasks, feed and notes), records 0, 1
/// and 2 of a collection share [`SHARED_INSTANT`], written as `Z`, `+02:00`
/// and `-05:00`; with [`Clock::with_run`] (the feed), the records in `run`
/// share one more instant; and about `tie_per_mille` of the others reuse
/// one of a pool of instants.
pub(super) struct Clock {
    /// How many records the collection holds: one stamp each.
    records: usize,
    lo: i64,
    hi: i64,
    anchors: Vec<(i64, u32)>,
    tie_per_mille: u64,
    shared_first: bool,
    run: Range<usize>,
}

impl Clock {
    /// Creates a clock for `records` records between `lo` and `hi`.
    pub(super) fn new(rng: &mut Rng, lo: i64, hi: i64, records: usize, tie_per_mille: u64) -> Self {
        let count = 2 + records / 300;
        let anchors = (0..count)
            .map(|_| {
                let secs = rng.between_i64(lo, hi - 1);
                let micros = if rng.percent(50) {
                    0
                } else {
                    rng.below(1_000) as u32 * 1_000
                };
                (secs, micros)
            })
            .collect();
        Self {
            records,
            lo,
            hi,
            anchors,
            tie_per_mille,
            shared_first: false,
            run: 0..0,
        }
    }

    /// The clock of tasks, feed and notes: `records` stamps over the whole
    /// range, 4% of them ties, records 0 to 2 sharing [`SHARED_INSTANT`].
    pub(super) fn whole_range_shared_first(rng: &mut Rng, records: usize) -> Self {
        Clock::new(rng, RANGE_START, RANGE_END, records, 40).with_shared_first()
    }

    /// Makes records 0 to 2 share [`SHARED_INSTANT`].
    pub(super) fn with_shared_first(mut self) -> Self {
        self.shared_first = true;
        self
    }

    /// Makes the `len` records starting at `start` share one instant.
    pub(super) fn with_run(mut self, start: usize, len: usize) -> Self {
        self.run = start..start + len;
        self
    }

    /// How many records the collection holds.
    pub(super) fn records(&self) -> usize {
        self.records
    }

    /// Returns the timestamp of record `index`.
    pub(super) fn stamp(&self, rng: &mut Rng, index: usize) -> Ts {
        if self.shared_first && index < 3 {
            let (offset_minutes, zulu, digits) =
                [(0, true, 3), (120, false, 3), (-300, false, 0)][index];
            return Ts {
                secs: SHARED_INSTANT,
                micros: 0,
                style: Style {
                    offset_minutes,
                    zulu,
                    digits,
                },
            };
        }
        let anchor = if self.run.contains(&index) {
            Some(self.anchors[0])
        } else if rng.per_mille(self.tie_per_mille) {
            Some(*rng.pick(&self.anchors))
        } else {
            None
        };
        match anchor {
            Some((secs, micros)) => Ts {
                secs,
                micros,
                style: Style::random_for(rng, micros),
            },
            None => Ts::random(rng, self.lo, self.hi),
        }
    }
}
