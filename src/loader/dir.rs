//! The snapshot directory on disk: which names are snapshots, and what
//! identifies a file's content without reading it.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::SystemTime;

use super::read::is_snapshot_name;

/// What identifies a file's content without reading it: a rename into place
/// changes the inode, a rewrite the size or the change time, a Kubernetes
/// `..data` flip the inode behind the symlink.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fingerprint {
    pub len: u64,
    pub modified: Option<SystemTime>,
    pub changed: (i64, i64),
    pub inode: (u64, u64),
}

/// Each snapshot file in a directory listing: its fingerprint, or why it
/// cannot be read.
pub type Listing = BTreeMap<String, Result<Fingerprint, String>>;

/// The snapshot files in `dir` by name, each with its fingerprint or the
/// reason it cannot be read; and how many other names the directory holds.
pub fn list_snapshot_files(dir: &Path) -> std::io::Result<(Listing, usize)> {
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
            result => result.map_err(|e| e.to_string()),
        };
        out.insert(name, fingerprint);
    }
    Ok((out, ignored))
}

/// The fingerprint of a regular file, following symlinks (a Kubernetes
/// volume is symlinks into `..data/`).
pub fn file_fingerprint(path: &Path) -> std::io::Result<Fingerprint> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path)?;
    if !meta.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    Ok(Fingerprint {
        len: meta.len(),
        modified: meta.modified().ok(),
        changed: (meta.ctime(), meta.ctime_nsec()),
        inode: (meta.dev(), meta.ino()),
    })
}
