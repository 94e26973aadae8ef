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

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use super::Directory;
use super::remembered::{self, Remembered};
use crate::storage::bookkeeping::ScanBookkeeping;
use crate::storage::error::ListError;
use crate::storage::error::{ErrorKind, StorageError};
use crate::storage::listing::{EntryStamp, Fetch, FetchedFile, Listing};
use crate::storage::snapshot_file::OpenFile;
use crate::storage::source::SnapshotSource;

/// Copies kept per entry: the current one and the one before it.
const KEPT: usize = 2;

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
        })
    }

    fn kept_copies(&self) -> MutexGuard<'_, HashMap<String, Vec<PathBuf>>> {
        lock(&self.kept)
    }

    /// Copies `local` (the file where it lies) to a fresh private path.
    fn copy(&self, name: &str, local: FetchedFile) -> Fetch {
        // A temporary directory may have been cleaned up under us.
        let _ = crate::storage::private_dirs::ensure(&self.dir);
        let n = self.copies.fetch_add(1, Ordering::Relaxed);
        let ending = if name.ends_with(".gz") {
            ".json.gz"
        } else {
            ".json"
        };
        let copy = self.dir.join(format!("{n}{ending}"));
        // From the file the directory opened (a regular file, never a FIFO),
        // and the load reads the copy as opened once copied: under
        // --trust-key the bytes it hashes as it reads are the copy's.
        let copied = match &local.file {
            Some(file) => file.copy_to(&copy),
            None => std::fs::copy(&local.path, &copy),
        };
        let opened = copied.and_then(|len| Ok((len, OpenFile::open(&copy)?)));
        match opened {
            Ok((len, file)) => Fetch::Ready(FetchedFile {
                path: copy,
                len,
                download: true,
                file: Some(std::sync::Arc::new(file)),
                ..local
            }),
            // Gone since the listing: the next scan sees it gone.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Fetch::Settling,
            Err(e) => {
                let _ = std::fs::remove_file(&copy);
                Fetch::Failed(StorageError::new(
                    ErrorKind::Other,
                    format!(
                        "cannot copy {} to {} for loads on demand: {e}",
                        local.path.display(),
                        copy.display()
                    ),
                ))
            }
        }
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
                // What was remembered of the copy gone holds for this one.
                let _ = std::fs::rename(
                    remembered::memory_of(slot),
                    remembered::memory_of(&copy.path),
                );
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
