//! The snapshot directory on disk: which names are snapshots, what
//! identifies a file's content without reading it, and when a file is
//! settled enough to be read.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use super::file::is_snapshot_name;
use super::listing::{Fetch, FileFingerprint, Fingerprint, Listing, Local};

/// How long a file must have been left alone before it is read: a writer
/// that rewrites in place is given this long to finish.
const SETTLE: Duration = Duration::from_millis(150);

/// The snapshot files in `dir` by name, each with its fingerprint or the
/// reason it cannot be read; and how many other names the directory holds.
pub fn list_snapshot_files(dir: &Path) -> std::io::Result<Listing> {
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
        let fingerprint = match file_fingerprint(&entry.path()) {
            // Deleted between the listing and the stat: it is simply gone.
            // (A symlink to nothing, though, is a broken snapshot.)
            Err(e)
                if e.kind() == std::io::ErrorKind::NotFound
                    && !entry.file_type().is_ok_and(|t| t.is_symlink()) =>
            {
                continue;
            }
            result => result.map(Fingerprint::File).map_err(|e| e.to_string()),
        };
        out.insert(name, fingerprint);
    }
    Ok(Listing {
        entries: out,
        ignored,
        names_are_workspaces: false,
        fresh: false,
    })
}

/// A file is read where it lies, once it has settled: one modified too
/// recently may still be being written, and is left for a later scan.
pub fn fetch(dir: &Path, name: &str, fingerprint: &FileFingerprint) -> Fetch {
    if fingerprint
        .modified
        .is_some_and(|m| m.elapsed().is_ok_and(|age| age < SETTLE))
    {
        return Fetch::Settling;
    }
    Fetch::Ready(Local {
        path: dir.join(name),
        label: name.to_owned(),
        len: fingerprint.len,
        source: None,
        download: false,
        written: fingerprint.modified,
        plain: None,
    })
}

/// The fingerprint of a regular file, following symlinks (a Kubernetes
/// volume is symlinks into `..data/`).
pub fn file_fingerprint(path: &Path) -> std::io::Result<FileFingerprint> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path)?;
    if !meta.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    Ok(FileFingerprint {
        len: meta.len(),
        modified: meta.modified().ok(),
        changed: (meta.ctime(), meta.ctime_nsec()),
        inode: (meta.dev(), meta.ino()),
    })
}
