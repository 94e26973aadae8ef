//! [`Copies`]: a directory whose files are loaded from private copies, so
//! that the bytes a version was validated from stay where a load on demand
//! finds them (`--memory-budget`). Without a budget nothing needs them: a
//! dataset holds its records, and a later bad file never replaces it. With
//! one, a workspace that is not resident is loaded again from its last good
//! bytes, and the file in the snapshot directory may by then be a bad
//! version, a half-written one, or gone.
//!
//! Each fetch copies the file (`copy_file_range`: a reflink where the file
//! system can, else an in-kernel copy) and the load reads the copy, so what
//! was validated is exactly what is kept. A copy that loaded becomes its
//! entry's current one; the one before it is kept too (it serves again if
//! the new content loses a conflict) and older ones are deleted. A copy
//! whose load failed is deleted at once. The copies live in
//! `<cache-dir>/copies`, or in a private temporary directory removed when
//! the server stops (or by the next one, if it was killed:
//! `storage/private_dirs.rs`). In `--cache-dir` each current copy has a
//! memory of what it validated, and under `--trust-key` of the signature
//! it was accepted with (`remembered.rs`): a restart recalls it rather
//! than reading the file again.
//! They take as much disk as the snapshots, up to twice that once every
//! file has been replaced (the copy before each current one is kept).
//!
//! A copy that cannot be made (a full disk) does not keep the file from
//! serving: it loads from the file itself and stays in memory whatever the
//! budget, with nothing to load it from again. Each listing after that
//! tries the copy again (after 5 s, then twice as long each time it fails,
//! up to 5 minutes), without reading the file otherwise; once a copy is
//! made, that entry is read again from it, and hollowed like any other.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::Directory;
use super::remembered::{self, Remembered};
use crate::storage::bookkeeping::ScanBookkeeping;
use crate::storage::error::ListError;
use crate::storage::listing::{EntryStamp, Fetch, FetchedFile, Listing};
use crate::storage::snapshot_file::OpenFile;
use crate::storage::source::SnapshotSource;

/// Copies kept per entry: the current one and the one before it.
const KEPT: usize = 2;

/// How long after a copy failed it is tried again, at first and at most.
const RETRY: (Duration, Duration) = (Duration::from_secs(5), Duration::from_secs(300));

/// An entry whose copy failed: when to try again, and how long to wait
/// after that if it fails again.
struct Uncopied {
    due: Instant,
    backoff: Duration,
}

/// A [`Directory`] read through private copies.
pub struct Copies {
    inner: Directory,
    dir: PathBuf,
    /// A private temporary directory, removed on drop.
    temporary: bool,
    copies: AtomicU64,
    /// Each entry's good copies, oldest first.
    kept: Mutex<HashMap<String, Vec<PathBuf>>>,
    /// Whether what a copy validated is remembered beside it: in
    /// `--cache-dir`.
    remembers: bool,
    /// What a restart recalled, until the first listing hands it to the
    /// scan.
    recalled: Mutex<HashMap<String, Remembered>>,
    /// Entries serving from their file itself, their copy failed.
    uncopied: Mutex<HashMap<String, Uncopied>>,
    /// Copies made by a listing's retry, for the fetch that follows.
    made: Mutex<HashMap<String, PathBuf>>,
}

impl Copies {
    /// `inner` read through copies in `cache_dir/copies`, or in a private
    /// temporary directory. What an earlier process left in `cache_dir` is
    /// recalled where it remembered what it validated, and deleted
    /// otherwise (under `--trust-key`, a recalled version serves only if
    /// its signature is accepted again: `serve::loader::fetch::recalled`).
    pub fn new(inner: Directory, cache_dir: Option<&Path>) -> std::io::Result<Copies> {
        let (dir, temporary) = match cache_dir {
            Some(dir) => (dir.join("copies"), false),
            None => (
                crate::storage::private_dirs::private_dir("portfolio-replica-copies")?,
                true,
            ),
        };
        let remembers = !temporary;
        let (mut recalled, mut next) = (HashMap::new(), 0);
        if remembers {
            crate::storage::private_dirs::ensure(&dir)?;
            (recalled, next) = remembered::recall(&dir)?;
        }
        tracing::info!(dir = %dir.display(), recalled = recalled.len(), "a memory budget: the last good version of each snapshot is kept here for loads on demand");
        let kept = recalled
            .iter()
            .map(|(name, (copy, _))| (name.clone(), vec![copy.clone()]))
            .collect();
        let recalled = recalled
            .into_iter()
            .map(|(name, (_, memory))| (name, memory))
            .collect();
        Ok(Copies {
            inner,
            dir,
            temporary,
            copies: AtomicU64::new(next),
            kept: Mutex::new(kept),
            remembers,
            recalled: Mutex::new(recalled),
            uncopied: Mutex::default(),
            made: Mutex::default(),
        })
    }

    fn kept_copies(&self) -> MutexGuard<'_, HashMap<String, Vec<PathBuf>>> {
        lock(&self.kept)
    }

    /// A fresh private path for a copy of `name`.
    fn new_copy_path(&self, name: &str) -> PathBuf {
        // A temporary directory, or the cache directory, may have been
        // removed under us.
        let _ = crate::storage::private_dirs::ensure(&self.dir);
        let n = self.copies.fetch_add(1, Ordering::Relaxed);
        let ending = if name.ends_with(".gz") {
            ".json.gz"
        } else {
            ".json"
        };
        self.dir.join(format!("{n}{ending}"))
    }

    /// Copies `local` (the file where it lies) to a fresh private path, or
    /// takes the copy a listing's retry made of it.
    fn copy(&self, name: &str, local: FetchedFile) -> Fetch {
        let made = lock(&self.made).remove(name);
        let (copy, copied) = match made {
            Some(copy) => {
                let len = std::fs::metadata(&copy).map(|m| m.len());
                (copy, len)
            }
            None => {
                let copy = self.new_copy_path(name);
                // From the file the directory opened (a regular file, never
                // a FIFO), and the load reads the copy as opened once
                // copied: under --trust-key the bytes it hashes as it reads
                // are the copy's.
                let copied = match &local.file {
                    Some(file) => file.copy_to(&copy),
                    None => std::fs::copy(&local.path, &copy),
                };
                (copy, copied)
            }
        };
        let opened = copied.and_then(|len| Ok((len, OpenFile::open(&copy)?)));
        match opened {
            Ok((len, file)) => {
                lock(&self.uncopied).remove(name);
                Fetch::Ready(FetchedFile {
                    path: copy,
                    len,
                    download: true,
                    file: Some(std::sync::Arc::new(file)),
                    ..local
                })
            }
            // Gone since the listing: the next scan sees it gone.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !local.path.exists() => {
                Fetch::Settling
            }
            Err(e) => {
                let _ = std::fs::remove_file(&copy);
                self.copy_failed(name, &copy, &e);
                // The file itself, as the directory opened it.
                Fetch::Ready(local)
            }
        }
    }

    /// Says why `name` has no copy (once, until a copy is made), and when
    /// its copy is tried again.
    fn copy_failed(&self, name: &str, copy: &Path, error: &std::io::Error) {
        let mut uncopied = lock(&self.uncopied);
        match uncopied.get_mut(name) {
            Some(retry) => {
                retry.backoff = (retry.backoff * 2).min(RETRY.1);
                retry.due = Instant::now() + retry.backoff;
            }
            None => {
                tracing::warn!(file = %name, error = %error, copy = %copy.display(), "cannot keep a private copy of a snapshot (a full disk?): it loads from the file itself and stays in memory whatever the budget, and the copy is tried again");
                uncopied.insert(
                    name.to_owned(),
                    Uncopied {
                        due: Instant::now() + RETRY.0,
                        backoff: RETRY.0,
                    },
                );
            }
        }
    }

    /// The names whose copy failed and is due: each is copied now, and
    /// those copied are to be read again (from the copy made).
    fn retry_copies(&self, listing: &Listing) -> Vec<String> {
        let due: Vec<String> = lock(&self.uncopied)
            .iter()
            .filter(|(_, retry)| retry.due <= Instant::now())
            .map(|(name, _)| name.clone())
            .collect();
        let mut copied = Vec::new();
        for name in due {
            if !matches!(listing.entries.get(&name), Some(Ok(_))) {
                lock(&self.uncopied).remove(&name);
                continue;
            }
            let file = self.inner.dir.join(&name);
            let copy = self.new_copy_path(&name);
            match std::fs::copy(&file, &copy) {
                Ok(_) => {
                    lock(&self.made).insert(name.clone(), copy);
                    copied.push(name);
                }
                Err(error) => {
                    let _ = std::fs::remove_file(&copy);
                    self.copy_failed(&name, &copy, &error);
                }
            }
        }
        copied
    }
}

impl SnapshotSource for Copies {
    fn describe(&self) -> String {
        self.inner.describe()
    }

    fn directory(&self) -> Option<&Path> {
        self.inner.directory()
    }

    fn list(&self) -> Result<Listing, ListError> {
        let mut listing = self.inner.list()?;
        listing.read_again = self.retry_copies(&listing);
        // Once: after the first scan the entries are the scan's own.
        let recalled = std::mem::take(&mut *lock(&self.recalled));
        listing.recalled = recalled
            .into_iter()
            .filter(|(name, memory)| {
                matches!(listing.entries.get(name), Some(Ok(stamp)) if memory.holds(stamp))
            })
            .collect();
        Ok(listing)
    }

    fn fetch(&self, name: &str, stamp: &EntryStamp, plain: Option<&str>) -> Fetch {
        match self.inner.fetch(name, stamp, plain) {
            Fetch::Ready(local) => self.copy(name, local),
            other => other,
        }
    }
}

impl ScanBookkeeping for Copies {
    fn unchanged(&self, name: &str, stamp: &EntryStamp) -> bool {
        self.inner.unchanged(name, stamp)
    }

    fn renamed_into_place(&self, name: &str) {
        self.inner.renamed_into_place(name);
    }

    fn loaded(&self, name: &str, local: FetchedFile, ok: bool) {
        if !local.path.starts_with(&self.dir) {
            // Loaded from the file itself, its copy failed: the copies of
            // earlier versions must not stand for this one.
            if ok {
                self.forgotten(name);
            }
            return;
        }
        if !ok {
            let _ = std::fs::remove_file(&local.path);
            return;
        }
        let mut kept = self.kept_copies();
        let copies = kept.entry(name.to_owned()).or_default();
        copies.push(local.path);
        while copies.len() > KEPT {
            delete(&copies.remove(0));
        }
    }

    fn forgotten(&self, name: &str) {
        for copy in self.kept_copies().remove(name).unwrap_or_default() {
            delete(&copy);
        }
    }

    fn remember(&self, copy: &Path, memory: &Remembered) {
        let kept = self.kept_copies();
        let current = kept.get(&memory.file).and_then(|copies| copies.last());
        if !self.remembers || current.map(PathBuf::as_path) != Some(copy) {
            return;
        }
        if let Err(error) = memory.write(copy) {
            // It only costs a read of the file at the next start.
            tracing::debug!(copy = %copy.display(), %error, "cannot remember what a copy validated");
        }
    }

    fn kept(&self, name: &str) -> Option<PathBuf> {
        self.kept_copies().get(name)?.last().cloned()
    }

    fn kept_instead(&self, name: &str, gone: &Path, copy: FetchedFile) -> bool {
        let mut kept = self.kept_copies();
        let slot = kept
            .get_mut(name)
            .and_then(|copies| copies.iter_mut().find(|c| c.as_path() == gone));
        match slot {
            Some(slot) => {
                // Its memory is written anew (`remember`): the old one may
                // be gone with it.
                let _ = std::fs::remove_file(remembered::memory_of(slot));
                *slot = copy.path;
                true
            }
            None => {
                let _ = std::fs::remove_file(&copy.path);
                false
            }
        }
    }
}

/// Deletes a copy and what was remembered of it.
fn delete(copy: &Path) {
    let _ = std::fs::remove_file(remembered::memory_of(copy));
    let _ = std::fs::remove_file(copy);
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

impl Drop for Copies {
    fn drop(&mut self) {
        if self.temporary {
            crate::storage::private_dirs::remove(&self.dir);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stamp(copies: &Copies, name: &str) -> EntryStamp {
        let listing = copies.list().expect("listed");
        listing.entries[name].as_ref().expect("readable").clone()
    }

    fn fetched(copies: &Copies, name: &str) -> FetchedFile {
        match copies.fetch(name, &stamp(copies, name), None) {
            Fetch::Ready(local) => local,
            _ => panic!("not fetched"),
        }
    }

    /// What a load validated stays, whatever the directory's file becomes;
    /// a failed load leaves no copy; two good copies at most per entry.
    #[test]
    fn a_good_copy_outlives_its_file() {
        let snapshots = tempfile::tempdir().unwrap();
        let cache = tempfile::tempdir().unwrap();
        let file = snapshots.path().join("a.json");
        let write = |text: &str| {
            std::fs::write(&file, text).unwrap();
            // Older than SETTLE, so that the fetch takes it.
            let old = std::time::SystemTime::now() - std::time::Duration::from_secs(5);
            std::fs::File::options()
                .write(true)
                .open(&file)
                .unwrap()
                .set_modified(old)
                .unwrap();
        };
        let copies = Copies::new(
            Directory::open(snapshots.path()).unwrap(),
            Some(cache.path()),
        )
        .unwrap();

        write("good one");
        let first = fetched(&copies, "a.json");
        assert_ne!(first.path, file, "loaded from a copy");
        copies.loaded("a.json", first, true);
        let good = copies.kept("a.json").expect("kept");

        write("bad");
        let bad = fetched(&copies, "a.json");
        let bad_path = bad.path.clone();
        copies.loaded("a.json", bad, false);
        assert!(!bad_path.exists(), "a rejected copy is deleted");
        std::fs::remove_file(&file).unwrap();
        assert_eq!(copies.kept("a.json").as_ref(), Some(&good));
        assert_eq!(std::fs::read_to_string(&good).unwrap(), "good one");

        for text in ["two", "three"] {
            write(text);
            let local = fetched(&copies, "a.json");
            copies.loaded("a.json", local, true);
        }
        assert!(!good.exists(), "the third good copy deletes the first");
        let names = std::fs::read_dir(cache.path().join("copies"))
            .unwrap()
            .count();
        assert_eq!(names, 2, "the current copy and the one before it");
        copies.forgotten("a.json");
        assert_eq!(copies.kept("a.json"), None);
        let names = std::fs::read_dir(cache.path().join("copies"))
            .unwrap()
            .count();
        assert_eq!(names, 0);
    }
}
