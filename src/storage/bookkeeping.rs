//! [`ScanBookkeeping`]: what the scan tells a source of what became of
//! what it fetched, and asks of it between polls: a rename seen, a load
//! done or refused, a name gone, where the last good bytes lie, when to
//! poll next, what `/snapshots` shows. The data operations themselves are
//! [`super::SnapshotSource`].

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::Remembered;
use super::listing::{EntryStamp, FetchedFile};
use portfolio_wire::status::OriginStatus;

/// The scan's bookkeeping with a source. The scan calls from one thread at
/// a time (the reloader), but `status` is asked by the admin listener
/// meanwhile, and under a memory budget a request's load on demand says
/// what it loaded and asks what is kept, hence `Sync`.
///
/// What some kinds of storage do not need has a default that does nothing:
/// a directory keeps no download to settle, no poll state and no status.
pub trait ScanBookkeeping: Send + Sync {
    /// Called when the file watcher saw `name` arrive by a rename, which is
    /// atomic: the content there now is whole, and need not be given time
    /// to settle as a file written in place is.
    fn renamed_into_place(&self, _name: &str) {}

    /// Whether `name` still has the content at `stamp` after it was
    /// loaded: a file rewritten during the read must be read again. By
    /// default it has: a download is a copy of one immutable version.
    fn unchanged(&self, _name: &str, _stamp: &EntryStamp) -> bool {
        true
    }

    /// Called once `local` has been loaded (`ok`) or rejected: a source
    /// that downloaded it keeps or deletes it.
    fn loaded(&self, _name: &str, _local: FetchedFile, _ok: bool) {}

    /// Records whether the poll that just ended had trouble that calls for
    /// backing off.
    fn polled(&self, _trouble: bool) {}

    /// Called when `name` has left the listing.
    fn forgotten(&self, _name: &str) {}

    /// Where the bytes of `name`'s last good content lie, for a load on
    /// demand (`--memory-budget`): called once it has loaded. `None` where
    /// nothing is kept (a directory read in place).
    fn kept(&self, _name: &str) -> Option<PathBuf> {
        None
    }

    /// Under a budget, once `name`'s content validated from the kept bytes
    /// at `copy` has gone hollow: what a restart with the same cache
    /// directory may recall of it without reading it again
    /// (`directory/remembered.rs`). By default nothing is remembered.
    fn remember(&self, _copy: &Path, _memory: &Remembered) {}

    /// Under a budget, once the kept bytes at `gone` were found deleted
    /// under the server and `copy` was fetched afresh from the entry and
    /// loaded as the same version: `copy` is kept in their place. False
    /// (and `copy` not kept) where nothing is kept, or where `gone` no
    /// longer stands for `name`'s content (a newer version took its
    /// place meanwhile: `copy` would then be taken for it).
    fn kept_instead(&self, _name: &str, _gone: &Path, _copy: FetchedFile) -> bool {
        false
    }

    /// How long to wait before the next poll, for a poll interval of
    /// `interval`: by default exactly that.
    fn next_poll(&self, interval: Duration) -> Duration {
        interval
    }

    /// The state `/snapshots` shows of the source; `None` for a directory,
    /// whose files' own statuses say it all.
    fn status(&self) -> Option<OriginStatus> {
        None
    }
}
