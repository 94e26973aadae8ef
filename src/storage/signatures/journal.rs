//! What a replica accepted, on disk under `<cache-dir>/accepted/`: a
//! journal of batches, one file per scan that accepted anything
//! (`journal-<seq>.json`, the batch's [`Accepted`] entries), each written to
//! a temporary name, synced and renamed, then the directory synced: one
//! `fsync` per batch before the catalog swap that serves it, whatever the
//! number of workspaces (a first scan of ten thousand accepts ten
//! thousand). Read back at start, the highest revision per workspace wins;
//! the journal is then compacted into one file, and again every
//! [`COMPACT_EVERY`] batches. Files of one entry each (`<sha256>.json`, as
//! earlier builds wrote) are read too. An unreadable file is not
//! remembered, and said so: stopping every start would leave deleting the
//! directory, and with it every entry, as the way out.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::{Accepted, TrustError};

/// Batches written before the journal is compacted into one file.
const COMPACT_EVERY: u64 = 64;

const JOURNAL: &str = "journal-";

/// The journal of accepted versions in one directory.
#[derive(Debug)]
pub(super) struct AcceptedJournal {
    dir: PathBuf,
    /// The next batch's number.
    next: AtomicU64,
    /// Batches written since the last compaction.
    written: AtomicU64,
}

impl AcceptedJournal {
    /// The journal in `dir`, and what it remembers; compacted into one
    /// file if it had several.
    pub fn open(dir: &Path) -> Result<(AcceptedJournal, HashMap<String, Accepted>), TrustError> {
        let mut accepted = HashMap::new();
        let mut files = Vec::new();
        let mut last = 0;
        let entries = match std::fs::read_dir(dir) {
            Ok(entries) => Some(entries),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => {
                return Err(TrustError::Journal {
                    path: dir.to_owned(),
                    why: e.to_string(),
                });
            }
        };
        for entry in entries.into_iter().flatten().filter_map(Result::ok) {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if !name.ends_with(".json") {
                // A write cut short: the rename never happened.
                let _ = std::fs::remove_file(&path);
                continue;
            }
            if let Some(seq) = batch_number(&name) {
                last = last.max(seq);
            }
            match read(&path, name.starts_with(JOURNAL)) {
                Ok(batch) => {
                    for one in batch {
                        remember(&mut accepted, one);
                    }
                }
                Err(why) => tracing::warn!(
                    file = %path.display(),
                    error = %why,
                    "cannot read what was accepted before: what it held is not remembered, so those workspaces may accept an older signed version until it expires; each is remembered again once it next loads"
                ),
            }
            files.push(path);
        }
        let journal = AcceptedJournal {
            dir: dir.to_owned(),
            next: AtomicU64::new(last + 1),
            written: AtomicU64::new(0),
        };
        if files.len() > 1 {
            journal.compact(accepted.values(), &files);
        }
        Ok((journal, accepted))
    }

    /// Writes `batch` durably; every [`COMPACT_EVERY`] batches, the journal
    /// is rewritten as one file of `all`.
    pub fn append(
        &self,
        batch: &[Accepted],
        all: impl FnOnce() -> Vec<Accepted>,
    ) -> std::io::Result<()> {
        let path = self.write(batch.iter())?;
        if self.written.fetch_add(1, Ordering::Relaxed) + 1 >= COMPACT_EVERY {
            let older = self.files_but(&path);
            let all = all();
            self.compact(all.iter(), &older);
        }
        Ok(())
    }

    /// Writes one journal file of `entries` (temporary, synced, renamed,
    /// the directory synced); its path.
    fn write<'a>(&self, entries: impl Iterator<Item = &'a Accepted>) -> std::io::Result<PathBuf> {
        std::fs::create_dir_all(&self.dir)?;
        let seq = self.next.fetch_add(1, Ordering::Relaxed);
        let path = self.dir.join(format!("{JOURNAL}{seq:020}.json"));
        let temporary = path.with_extension("json.tmp");
        let entries: Vec<&Accepted> = entries.collect();
        let mut file = std::fs::File::create(&temporary)?;
        file.write_all(&serde_json::to_vec(&entries)?)?;
        file.sync_all()?;
        std::fs::rename(&temporary, &path)?;
        std::fs::File::open(&self.dir)?.sync_all()?;
        Ok(path)
    }

    /// Rewrites the journal as one file of `entries`, then removes `older`.
    fn compact<'a>(&self, entries: impl Iterator<Item = &'a Accepted>, older: &[PathBuf]) {
        match self.write(entries) {
            Ok(_) => {
                for path in older {
                    let _ = std::fs::remove_file(path);
                }
                self.written.store(0, Ordering::Relaxed);
            }
            Err(error) => tracing::warn!(
                dir = %self.dir.display(),
                error = %error,
                "cannot compact what was accepted; its journal stays as it is"
            ),
        }
    }

    /// The journal's files but `keep`.
    fn files_but(&self, keep: &Path) -> Vec<PathBuf> {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p != keep && p.extension().is_some_and(|e| e == "json"))
            .collect()
    }
}

/// Keeps `one` unless a higher revision of its workspace is kept.
fn remember(accepted: &mut HashMap<String, Accepted>, one: Accepted) {
    let newer = accepted
        .get(&one.workspace)
        .is_none_or(|had| one.revision > had.revision);
    if newer {
        accepted.insert(one.workspace.clone(), one);
    }
}

/// A journal file's batch number.
fn batch_number(name: &str) -> Option<u64> {
    name.strip_prefix(JOURNAL)?
        .strip_suffix(".json")?
        .parse()
        .ok()
}

/// The entries of one file: a journal's batch, or one entry.
fn read(path: &Path, journal: bool) -> Result<Vec<Accepted>, String> {
    let bytes = std::fs::read(path).map_err(|e| e.to_string())?;
    if journal {
        serde_json::from_slice(&bytes).map_err(|e| e.to_string())
    } else {
        serde_json::from_slice(&bytes)
            .map(|one| vec![one])
            .map_err(|e| e.to_string())
    }
}
