//! The snapshot directory on disk as a [`SnapshotSource`]: which names are
//! snapshots, what identifies a file's content without reading it, and when
//! a file is settled enough to be read (at once if it was renamed into
//! place). Files are read where they lie, so no bytes are kept for a load
//! on demand (`kept` is `None`; under a memory budget, `copies.rs` keeps
//! them), though a large file that loaded is held open while it serves;
//! and the file watcher, not polling, says when to look again:
//! [`ScanBookkeeping`]'s defaults for polling do nothing.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

pub(super) mod copies;
pub(super) mod remembered;

use crate::storage::bookkeeping::ScanBookkeeping;
use crate::storage::error::{ErrorKind, ListError, OpenError, StorageError};
use crate::storage::listing::{EntryStamp, Fetch, FetchedFile, FileStamp, Listing, SignatureStamp};
use crate::storage::signatures::{FileSigned, SIGNATURE_SUFFIX, read_signature};
use crate::storage::snapshot_file::{LARGE_SNAPSHOT_FILE_BYTES, OpenFile, is_snapshot_name};
use crate::storage::source::SnapshotSource;

/// How long a file must have been left alone before it is read: a writer
/// that rewrites in place is given this long to finish.
const SETTLE: Duration = Duration::from_millis(150);

/// At most this many files held open: each is a descriptor, and the
/// connections need theirs (a directory of hundreds of large workspaces
/// is not the common case; past this, renames over them wait as before).
const HELD_AT_MOST: usize = 64;

/// A directory of snapshot files, one per workspace.
pub struct Directory {
    dir: PathBuf,
    /// Files renamed into place, with what they held then: whole, so read
    /// without waiting for them to settle, if they still hold it.
    renamed: Mutex<HashMap<String, FileStamp>>,
    /// Large files that loaded, held open: files of
    /// [`LARGE_SNAPSHOT_FILE_BYTES`] or more are, while their content
    /// serves, so that a writer renaming a new version over one does not
    /// wait inside its rename for the kernel to drop the old content's page
    /// cache (about 45 ms for 200 MB); they are let go once the new version
    /// has loaded, off the scan.
    held: Mutex<HashMap<String, std::fs::File>>,
    /// `--trust-key`: each file is read with its signature file and hashed
    /// when fetched, and a new signature is a change.
    verify: bool,
}

impl Directory {
    /// The directory `dir`, which must exist and be a directory: a
    /// misspelled one would serve nothing.
    pub fn open(dir: &Path) -> Result<Directory, OpenError> {
        let meta = std::fs::metadata(dir).map_err(|source| OpenError::DirectoryUnreadable {
            dir: dir.to_owned(),
            source,
        })?;
        if !meta.is_dir() {
            return Err(OpenError::NotADirectory(dir.to_owned()));
        }
        Ok(Directory {
            dir: dir.to_owned(),
            renamed: Mutex::default(),
            held: Mutex::default(),
            verify: false,
        })
    }

    /// This directory with its files' signatures read (`--trust-key`).
    pub fn verifying(self, verify: bool) -> Directory {
        Directory { verify, ..self }
    }

    /// Whether each file is judged against its signature (`--trust-key`).
    pub fn verifies(&self) -> bool {
        self.verify
    }

    fn stamp(&self, path: &Path) -> std::io::Result<FileStamp> {
        file_stamp(path, self.verify)
    }
}

impl SnapshotSource for Directory {
    fn describe(&self) -> String {
        self.dir.display().to_string()
    }

    fn directory(&self) -> Option<&Path> {
        Some(&self.dir)
    }

    fn list(&self) -> Result<Listing, ListError> {
        list_snapshot_files(&self.dir, self.verify).map_err(ListError::Io)
    }

    fn fetch(&self, name: &str, stamp: &EntryStamp, _plain: Option<&str>) -> Fetch {
        match stamp {
            EntryStamp::File(fp) => {
                let renamed = self
                    .renamed
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(name);
                match fetch(&self.dir, name, fp, renamed.as_ref() == Some(fp)) {
                    Fetch::Ready(local) if self.verify => signed(local),
                    other => other,
                }
            }
            EntryStamp::Object(_) => Fetch::Failed(StorageError::new(
                ErrorKind::Other,
                "a fingerprint of another kind of source",
            )),
        }
    }
}

impl ScanBookkeeping for Directory {
    fn renamed_into_place(&self, name: &str) {
        let signed = name.strip_suffix(SIGNATURE_SUFFIX).filter(|_| self.verify);
        let whole: Vec<String> = if is_snapshot_name(name) {
            vec![name.to_owned()]
        } else if let Some(snapshot) = signed.filter(|n| is_snapshot_name(n)) {
            // A signature renamed into place: its file may be read at once
            // if it has not changed.
            vec![snapshot.to_owned()]
        } else if self.dir.join(name).is_symlink() && self.dir.join(name).is_dir() {
            // A link to a directory renamed into place (a Kubernetes
            // volume's `..data`, flipped to a directory written whole):
            // every snapshot seen through a link is whole too.
            self.snapshot_links()
        } else {
            return;
        };
        let mut renamed = self.renamed.lock().unwrap_or_else(|p| p.into_inner());
        for name in whole {
            // What it holds now: a write in place after the rename changes
            // it, and then the file settles as any other.
            if let Ok(fp) = self.stamp(&self.dir.join(&name)) {
                renamed.insert(name, fp);
            }
        }
    }

    fn loaded(&self, name: &str, local: FetchedFile, ok: bool) {
        if !ok || local.len < LARGE_SNAPSHOT_FILE_BYTES {
            return;
        }
        // The content that serves now (a rename after the load only
        // makes this one the last to go).
        let Ok(file) = std::fs::File::open(&local.path) else {
            return;
        };
        let mut held = self.held();
        if held.len() >= HELD_AT_MOST && !held.contains_key(name) {
            return;
        }
        let before = held.insert(name.to_owned(), file);
        drop(held);
        let_go(before);
    }

    fn forgotten(&self, name: &str) {
        let held = self.held().remove(name);
        let_go(held);
    }

    /// A file rewritten while it was read has another stamp now.
    fn unchanged(&self, name: &str, stamp: &EntryStamp) -> bool {
        match stamp {
            EntryStamp::File(fp) => self.stamp(&self.dir.join(name)).ok().as_ref() == Some(fp),
            EntryStamp::Object(_) => true,
        }
    }
}

impl Directory {
    /// The snapshot names in the directory that are symbolic links.
    fn snapshot_links(&self) -> Vec<String> {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        entries
            .filter_map(Result::ok)
            .filter(|e| e.file_type().is_ok_and(|t| t.is_symlink()))
            .filter_map(|e| e.file_name().to_str().map(str::to_owned))
            .filter(|n| is_snapshot_name(n))
            .collect()
    }

    fn held(&self) -> std::sync::MutexGuard<'_, HashMap<String, std::fs::File>> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Closes a file held open on a thread of its own: the last close of a
/// file renamed over drops its page cache, tens of milliseconds for a
/// large one, which the scan need not wait for.
fn let_go(file: Option<std::fs::File>) {
    if let Some(file) = file {
        let spawned = std::thread::Builder::new()
            .name("snapshot-close".to_owned())
            .spawn(move || drop(file));
        // No thread: closed here (the file came back with the error).
        drop(spawned);
    }
}

/// The snapshot files in `dir` by name, each with its stamp or the
/// reason it cannot be read; and how many other names the directory holds.
fn list_snapshot_files(dir: &Path, verify: bool) -> std::io::Result<Listing> {
    let mut out = BTreeMap::new();
    let mut ignored = 0;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let Some(name) = entry
            .file_name()
            .to_str()
            .map(str::to_owned)
            .filter(|n| is_snapshot_name(n))
        else {
            ignored += 1;
            continue;
        };
        let stamp = match file_stamp(&entry.path(), verify) {
            // Deleted between the listing and the stat: it is simply gone.
            // (A symlink to nothing, though, is a broken snapshot.)
            Err(e)
                if e.kind() == std::io::ErrorKind::NotFound
                    && !entry.file_type().is_ok_and(|t| t.is_symlink()) =>
            {
                continue;
            }
            result => result.map(EntryStamp::File),
        };
        out.insert(name, stamp);
    }
    Ok(Listing {
        entries: out,
        ignored,
        names_are_workspaces: false,
        fresh: false,
        facts: BTreeMap::new(),
        recalled: BTreeMap::new(),
        read_again: Vec::new(),
        signed: BTreeMap::new(),
    })
}

/// A fetched file with its signature file read. Its bytes are hashed as
/// the load reads them from the file opened here (`SnapshotFile`), and
/// checked against what the signature names once loaded.
fn signed(mut local: FetchedFile) -> Fetch {
    local.signed = Some(FileSigned {
        envelope: read_signature(&local.path),
        sha256: None,
    });
    Fetch::Ready(local)
}

/// A file is read where it lies, once it has settled: one modified too
/// recently may still be being written, and is left for a later scan,
/// unless it was renamed into place (`whole`) and holds what it held then.
fn fetch(dir: &Path, name: &str, stamp: &FileStamp, whole: bool) -> Fetch {
    if !whole
        && stamp
            .modified
            .is_some_and(|m| m.elapsed().is_ok_and(|age| age < SETTLE))
    {
        return Fetch::Settling;
    }
    let path = dir.join(name);
    // Opened once, here: what loads is this open file, whatever the name
    // points at later (a symlink flipped, a file renamed over it).
    let file = match OpenFile::open(&path) {
        Ok(file) => file,
        // Gone since the listing: the next scan sees it gone.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Fetch::Settling,
        Err(e) => {
            return Fetch::Failed(StorageError::new(
                ErrorKind::Other,
                format!("cannot open {}: {e}", path.display()),
            ));
        }
    };
    Fetch::Ready(FetchedFile {
        path,
        label: name.to_owned(),
        len: file.len(),
        source: None,
        download: false,
        written: stamp.modified,
        plain: None,
        signed: None,
        file: Some(std::sync::Arc::new(file)),
    })
}

/// The stamp of a regular file, following symlinks (a Kubernetes
/// volume is symlinks into `..data/`); with `signature`, its signature
/// file's too.
fn file_stamp(path: &Path, signature: bool) -> std::io::Result<FileStamp> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path)?;
    if !meta.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    Ok(FileStamp {
        len: meta.len(),
        modified: meta.modified().ok(),
        changed: (meta.ctime(), meta.ctime_nsec()),
        inode: (meta.dev(), meta.ino()),
        signature: signature.then(|| signature_stamp(path)).flatten(),
    })
}

/// The stamp of `<path>.sig`, if it is a file.
fn signature_stamp(path: &Path) -> Option<SignatureStamp> {
    use std::os::unix::fs::MetadataExt;
    let mut name = path.as_os_str().to_owned();
    name.push(SIGNATURE_SUFFIX);
    let meta = std::fs::metadata(name).ok().filter(|m| m.is_file())?;
    Some(SignatureStamp {
        len: meta.len(),
        changed: (meta.ctime(), meta.ctime_nsec()),
        inode: (meta.dev(), meta.ino()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fetch_now(source: &Directory, name: &str) -> Fetch {
        let listing = source.list().expect("lists");
        let stamp = listing.entries[name].as_ref().expect("readable");
        source.fetch(name, stamp, None)
    }

    #[test]
    fn a_file_renamed_into_place_is_read_at_once_and_one_written_in_place_settles_first() {
        let dir = tempfile::tempdir().unwrap();
        let source = Directory::open(dir.path()).unwrap();
        // Written in place just now: it may still be being written.
        std::fs::write(dir.path().join("a.json"), "{}").unwrap();
        assert!(matches!(fetch_now(&source, "a.json"), Fetch::Settling));
        // Written elsewhere and renamed over it: whole.
        std::fs::write(dir.path().join(".a.tmp"), "{ }").unwrap();
        std::fs::rename(dir.path().join(".a.tmp"), dir.path().join("a.json")).unwrap();
        source.renamed_into_place("a.json");
        assert!(matches!(fetch_now(&source, "a.json"), Fetch::Ready(_)));
        // Once only: a later write in place settles again.
        std::fs::write(dir.path().join("a.json"), "{  }").unwrap();
        assert!(matches!(fetch_now(&source, "a.json"), Fetch::Settling));
        // Renamed, then written in place before the scan: not the content
        // the rename brought, so it settles.
        std::fs::write(dir.path().join(".a.tmp"), "{ }").unwrap();
        std::fs::rename(dir.path().join(".a.tmp"), dir.path().join("a.json")).unwrap();
        source.renamed_into_place("a.json");
        std::fs::write(dir.path().join("a.json"), "{   }").unwrap();
        assert!(matches!(fetch_now(&source, "a.json"), Fetch::Settling));
    }

    #[test]
    fn files_seen_through_a_flipped_kubernetes_data_link_are_read_at_once() {
        use std::os::unix::fs::symlink;
        let dir = tempfile::tempdir().unwrap();
        let at = |p: &str| dir.path().join(p);
        let source = Directory::open(dir.path()).unwrap();
        std::fs::create_dir(at("..v1")).unwrap();
        std::fs::write(at("..v1/acme.json"), "{}").unwrap();
        symlink("..v1", at("..data")).unwrap();
        symlink("..data/acme.json", at("acme.json")).unwrap();
        // Just written: it settles first.
        assert!(matches!(fetch_now(&source, "acme.json"), Fetch::Settling));
        // The volume's next version, written whole, then the link flipped.
        std::fs::create_dir(at("..v2")).unwrap();
        std::fs::write(at("..v2/acme.json"), "{ }").unwrap();
        symlink("..v2", at("..data_tmp")).unwrap();
        std::fs::rename(at("..data_tmp"), at("..data")).unwrap();
        source.renamed_into_place("..data");
        assert!(matches!(fetch_now(&source, "acme.json"), Fetch::Ready(_)));
        // A rename of some other name that is no link to a directory
        // makes nothing whole.
        std::fs::write(at("..v2/acme.json"), "{  }").unwrap();
        std::fs::write(at(".tmp"), "x").unwrap();
        std::fs::rename(at(".tmp"), at(".tmp2")).unwrap();
        source.renamed_into_place(".tmp2");
        assert!(matches!(fetch_now(&source, "acme.json"), Fetch::Settling));
    }

    #[test]
    fn large_files_that_loaded_are_held_open_until_replaced_or_forgotten_up_to_a_cap() {
        let dir = tempfile::tempdir().unwrap();
        let source = Directory::open(dir.path()).unwrap();
        // The length the scan gives counts, not the file's: small files do.
        let local = |name: &str, len: u64| {
            std::fs::write(dir.path().join(name), "{}").unwrap();
            FetchedFile {
                path: dir.path().join(name),
                label: name.to_owned(),
                len,
                source: None,
                download: false,
                written: None,
                plain: None,
                signed: None,
                file: None,
            }
        };
        let held = |name: &str| source.held().contains_key(name);
        source.loaded("a.json", local("a.json", LARGE_SNAPSHOT_FILE_BYTES), true);
        source.loaded(
            "small.json",
            local("small.json", LARGE_SNAPSHOT_FILE_BYTES - 1),
            true,
        );
        source.loaded(
            "bad.json",
            local("bad.json", LARGE_SNAPSHOT_FILE_BYTES),
            false,
        );
        assert!(held("a.json") && !held("small.json") && !held("bad.json"));
        // Its next version replaces it; leaving the listing lets it go.
        source.loaded("a.json", local("a.json", LARGE_SNAPSHOT_FILE_BYTES), true);
        assert_eq!(source.held().len(), 1);
        source.forgotten("a.json");
        assert!(!held("a.json"));
        for n in 0..HELD_AT_MOST + 5 {
            let name = format!("w{n}.json");
            source.loaded(&name, local(&name, LARGE_SNAPSHOT_FILE_BYTES), true);
        }
        assert_eq!(source.held().len(), HELD_AT_MOST);
        // One held already is still replaced at the cap.
        source.loaded("w0.json", local("w0.json", LARGE_SNAPSHOT_FILE_BYTES), true);
        assert!(held("w0.json"));
    }
}
