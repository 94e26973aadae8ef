//! The order of a scan's steps: what changed, then fetch and load, cut
//! into [`Batch`]es, each of which settles, warms up and publishes once
//! (`Snapshots::settle`, steps 5 to 7). The scan is a loop over
//! [`Line::next`]; what a settle says to read again comes back through
//! [`Line::read_again`] and makes the next round of fetches.
//!
//! The batches, in the order they come:
//!
//! | batch | holds | why there |
//! | --- | --- | --- |
//! | what left | entries gone, names newly unreadable, a signature verdict changed | before anything is read: it frees memory and lets a file it conflicted with win in this scan |
//! | what a manifest describes, or a restart recalls (under a budget) | hollow versions made from the manifest's records, or from what a private copy remembered (`fetch::recalled`), nothing fetched | served at once; a request loads them |
//! | loads | what the loads gave, in the order they finish (`batch.rs`: 64 MiB or a moment's wait, a file of 16 MiB or more at once) | the entries they succeed leave in the same swap |
//! | what was not succeeded | entries gone whose successor did not load | last, unless a file that may succeed them is still being written |
//!
//! Each round of loads starts with what the last settles said to read
//! again (a file that lost a conflict and now wins it, one refused for
//! memory that fits now), until none is left.

use std::collections::{BTreeMap, HashSet};
use std::sync::Mutex;
use std::thread::Scope;
use std::time::Duration;

use super::batch::{SETTLE_SHARE, SettleBatch};
use super::changed::{ListingChanges, Removed, Successors};
use super::fetch;
use super::files::{self, Files};
use super::load::{self, EntryRead, Loading, ReadResult};
use crate::storage::{EntryStamp, Listing, ManifestFacts, StorageOrigin};

/// What settles together: one conflict decision, one warm-up, one swap.
pub struct Batch {
    /// The entries that leave in this batch's swap.
    pub leaving: Leaving,
    /// Names listed that cannot be read (already rejected in their entry).
    pub unreadable: Vec<String>,
    /// What the loads gave.
    pub read: Vec<ReadResult>,
}

/// Which entries leave with a batch.
pub enum Leaving {
    /// Those that left the listing (the first batch).
    Gone(Removed),
    /// Those whose successor is among the batch's loads.
    Succeeded,
    /// Those whose successor did not load (the last batch).
    Unsucceeded,
}

impl Batch {
    fn of_loads(read: Vec<ReadResult>) -> Batch {
        Batch {
            leaving: Leaving::Succeeded,
            unreadable: Vec::new(),
            read,
        }
    }
}

/// A scan from what changed to its last batch.
pub struct Line<'a> {
    present: &'a Listing,
    origin: &'a StorageOrigin,
    files: &'a Mutex<Files>,
    loading: &'a Loading<'a>,
    /// Under a budget, what a manifest describes is not fetched: its
    /// records make a hollow version (`fetch::listed`).
    manifest: Option<&'a BTreeMap<String, ManifestFacts>>,
    /// Under a budget, what a restart recalled is not fetched either
    /// (`fetch::recalled`).
    budgeted: bool,
    /// The first batch, while it has not been taken.
    first: Option<Batch>,
    /// The next round's entries.
    to_read: Vec<(String, EntryStamp)>,
    /// The round under way.
    loads: Option<Box<dyn Iterator<Item = EntryRead> + 'a>>,
    batch: SettleBatch,
    /// What the last settle took: a batch waits a few times as long, so
    /// that settling (which grows with the workspaces serving) stays a
    /// small share of a scan however many there are.
    settled_in: Duration,
    /// Entries gone that serve on until their successor loads.
    pub successors: Successors,
    /// Whether the last batch was given.
    ended: bool,
    /// Files still being written: left for a later scan.
    pub settling: Vec<String>,
    /// A download failed in a way that calls for backing off.
    pub source_failed: bool,
}

impl<'a> Line<'a> {
    /// The line of a scan that found `changes` in `present`; `reread`,
    /// entries to read besides (a signature accepted anew), and `resigned`,
    /// whether a signature's verdict changed what serves.
    pub fn new(
        present: &'a Listing,
        files: &'a Mutex<Files>,
        loading: &'a Loading<'a>,
        budgeted: bool,
        changes: ListingChanges,
        reread: Vec<String>,
        resigned: bool,
    ) -> Line<'a> {
        let ListingChanges {
            removed,
            unreadable,
            to_read,
            successors,
        } = changes;
        let first =
            (resigned || !removed.names.is_empty() || !unreadable.is_empty()).then(|| Batch {
                leaving: Leaving::Gone(removed),
                unreadable,
                read: Vec::new(),
            });
        let mut line = Line {
            present,
            origin: loading.origin,
            files,
            loading,
            manifest: (budgeted && !present.facts.is_empty()).then_some(&present.facts),
            budgeted,
            first,
            to_read,
            loads: None,
            batch: SettleBatch::default(),
            settled_in: Duration::ZERO,
            successors,
            ended: false,
            settling: Vec::new(),
            source_failed: false,
        };
        line.queue(reread);
        line
    }

    /// The next batch to settle: steps 3 (fetch) and 4 (load) run here,
    /// their loads' workers in `scope`. `None` once the scan is done.
    pub fn next<'scope>(&mut self, scope: &'scope Scope<'scope, 'a>) -> Option<Batch> {
        if let Some(first) = self.first.take() {
            return Some(first);
        }
        loop {
            if let Some(loads) = &mut self.loads {
                match loads.next() {
                    Some(EntryRead::Done(result)) => {
                        self.batch.add(*result);
                        if self.batch.is_full(SETTLE_SHARE * self.settled_in) {
                            return Some(Batch::of_loads(self.batch.take()));
                        }
                    }
                    Some(EntryRead::Settling(name)) => self.settling.push(name),
                    Some(EntryRead::Failed(name, error)) => {
                        self.source_failed |= error.kind.backs_off();
                        files::fetch_failed(&mut files::lock(self.files), &name, error);
                    }
                    None => self.loads = None,
                }
                continue;
            }
            // The round is done: what it loaded and has not settled.
            if !self.batch.is_empty() {
                return Some(Batch::of_loads(self.batch.take()));
            }
            if !self.to_read.is_empty() {
                if let Some(listed) = self.start_round(scope) {
                    return Some(listed);
                }
                continue;
            }
            // Entries whose successor did not load leave now, unless a file
            // that may succeed them is still being written: they go on
            // serving until a later scan has read it.
            if !self.ended && !self.successors.is_empty() && self.settling.is_empty() {
                self.ended = true;
                return Some(Batch {
                    leaving: Leaving::Unsucceeded,
                    unreadable: Vec::new(),
                    read: Vec::new(),
                });
            }
            return None;
        }
    }

    /// After a batch settled in `took`: the files it says to read again
    /// join the next round.
    pub fn read_again(&mut self, took: Duration, names: Vec<String>) {
        self.settled_in = took;
        self.queue(names);
    }

    /// Queues `names` for the next round, once each (a loser that a
    /// removal frees is both changed, its stamp forgotten, and read again).
    fn queue(&mut self, names: Vec<String>) {
        if names.is_empty() {
            return;
        }
        let queued: HashSet<&str> = self.to_read.iter().map(|(name, _)| name.as_str()).collect();
        let names: Vec<String> = names
            .into_iter()
            .filter(|name| !queued.contains(name.as_str()))
            .collect();
        let names = listed(self.present, names);
        self.to_read.extend(names);
    }

    /// Starts a round with what is to read; what a manifest describes
    /// comes back at once, as a batch of its own, before anything is
    /// fetched.
    fn start_round<'scope>(&mut self, scope: &'scope Scope<'scope, 'a>) -> Option<Batch> {
        let mut round = std::mem::take(&mut self.to_read);
        let mut listed = Vec::new();
        if let Some(facts) = self.manifest {
            (round, listed) = fetch::listed(round, facts, self.origin, &self.present.signed);
        }
        if self.budgeted && !self.present.recalled.is_empty() {
            let recalled;
            (round, recalled) = fetch::recalled(round, &self.present.recalled, self.origin.trust());
            listed.extend(recalled);
        }
        if !round.is_empty() {
            let fetched =
                fetch::fetch_in_order(self.origin, self.files, round, &self.present.signed);
            self.loads = Some(Box::new(load::load_on_cores(scope, fetched, self.loading)));
        }
        (!listed.is_empty()).then(|| Batch::of_loads(listed))
    }
}

/// The names of `names` that the listing holds, with their stamps. (A
/// file read again wins the claim it won before, so a scan ends.)
fn listed(present: &Listing, names: Vec<String>) -> Vec<(String, EntryStamp)> {
    names
        .into_iter()
        .filter_map(|name| match present.entries.get(&name) {
            Some(Ok(stamp)) => Some((name, stamp.clone())),
            _ => None,
        })
        .collect()
}
