//! What a budgeted replica remembers, beside each private copy in
//! `--cache-dir`, of the version it validated from it: enough for the
//! catalog (workspace, version, content fingerprint, key hashes, limits,
//! counts, warnings) and the stamp of the snapshot file it was copied
//! from. A restart with the same `--cache-dir` recalls them: a file whose
//! stamp is still the remembered one serves at once, hollow, from what was
//! remembered, without being read or parsed; its records load from the
//! copy when a request needs them, checked to be that very content (the
//! fingerprint). A changed file is read again, as is one whose memory is
//! unreadable, corrupt or of another format.
//!
//! Each is `<copy>.facts`: one line of JSON, then the SHA-256 of that line
//! in hex. Written to a temporary name and renamed into place, without an
//! fsync: a memory lost or torn by a crash fails its checksum, and only
//! costs a read of the file.
//!
//! Under `--trust-key` a memory also holds the signature envelope the
//! version was accepted with, and the stamp of its `.sig` file. A restart
//! recalls it only if neither file changed and the envelope is accepted
//! again by the keys trusted now (`serve::loader::fetch::recalled`); the
//! copy's bytes are then hashed against that signature when a request
//! loads them, as every load under `--trust-key` is. A new `.sig`, a key
//! no longer trusted, or an expired signature not accepted before: the
//! file is read and verified again.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::storage::listing::{EntryStamp, FileStamp, SignatureStamp};
use crate::storage::signatures::Signed;
use portfolio_domain::store::limits::WorkspaceLimits;
use portfolio_domain::store::{Dataset, RecordCounts, key};
use portfolio_wire::signed::Envelope;

/// The format of a memory: one that is not this is read again.
const FORMAT: u32 = 2;

/// The ending of a copy's memory.
pub const ENDING: &str = ".facts";

/// What is remembered of the version validated from one copy.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Remembered {
    format: u32,
    /// The snapshot file's name in the directory.
    pub file: String,
    stamp: Stamp,
    /// The copy's length, checked before it is trusted.
    copy_len: u64,
    workspace_id: String,
    workspace_name: Option<String>,
    version: String,
    fingerprint: u64,
    key_hashes: Vec<String>,
    limits: Option<WorkspaceLimits>,
    counts: RecordCounts,
    pub warnings: Vec<String>,
    /// The envelope the version was accepted with under `--trust-key`.
    envelope: Option<Envelope>,
}

/// A [`FileStamp`] as written down.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Stamp {
    len: u64,
    modified_ns: Option<u128>,
    changed: (i64, i64),
    inode: (u64, u64),
    /// Its `.sig` file's, under `--trust-key`.
    signature: Option<SignatureStamp>,
}

impl Stamp {
    fn of(stamp: &FileStamp) -> Option<Stamp> {
        let modified_ns = match stamp.modified {
            Some(at) => Some(at.duration_since(std::time::UNIX_EPOCH).ok()?.as_nanos()),
            None => None,
        };
        Some(Stamp {
            len: stamp.len,
            modified_ns,
            changed: stamp.changed,
            inode: stamp.inode,
            signature: stamp.signature,
        })
    }
}

impl Remembered {
    /// What to remember of `dataset`, validated from a copy of `file` as
    /// `stamp` showed it (the copy is as long as the file), and accepted
    /// as `signed` under `--trust-key`; `None` for what cannot be (an
    /// object, a file with a `.sig` but no accepted signature).
    pub fn of(
        file: &str,
        stamp: &EntryStamp,
        dataset: &Dataset,
        warnings: &[String],
        signed: Option<&Signed>,
    ) -> Option<Remembered> {
        let EntryStamp::File(stamp) = stamp else {
            return None;
        };
        if stamp.signature.is_some() && signed.is_none() {
            return None;
        }
        Some(Remembered {
            format: FORMAT,
            file: file.to_owned(),
            stamp: Stamp::of(stamp)?,
            copy_len: stamp.len,
            workspace_id: dataset.workspace_id.clone(),
            workspace_name: dataset.workspace_name.clone(),
            version: dataset.version.clone(),
            fingerprint: dataset.fingerprint,
            key_hashes: dataset.key_hashes.iter().map(key::to_hex).collect(),
            limits: dataset.limits,
            counts: dataset.counts,
            warnings: warnings.to_vec(),
            envelope: signed.map(|signed| signed.envelope.clone()),
        })
    }

    /// Whether the file, listed with `stamp`, still holds what was
    /// remembered.
    pub fn holds(&self, stamp: &EntryStamp) -> bool {
        match stamp {
            EntryStamp::File(stamp) => Stamp::of(stamp) == Some(self.stamp),
            EntryStamp::Object(_) => false,
        }
    }

    /// The envelope it was accepted with under `--trust-key`.
    pub fn envelope(&self) -> Option<&Envelope> {
        self.envelope.as_ref()
    }

    /// The remembered version without its records, as the catalog holds it
    /// under a budget: the same fingerprint as when it was read, so that a
    /// load from the copy is checked to be that content, and ETags agree.
    pub fn hollow(&self) -> Option<Dataset> {
        let key_hashes = self
            .key_hashes
            .iter()
            .map(|hex| key::from_hex(hex))
            .collect::<Option<Vec<_>>>()?;
        let mut dataset = Dataset::hollow_of(portfolio_domain::store::Meta {
            workspace_id: self.workspace_id.clone(),
            workspace_name: self.workspace_name.clone(),
            version: self.version.clone(),
            key_hashes,
            limits: self.limits,
            content_hash: 0,
        });
        dataset.fingerprint = self.fingerprint;
        dataset.counts = self.counts;
        Some(dataset)
    }

    /// Writes this as `copy`'s memory.
    pub fn write(&self, copy: &Path) -> std::io::Result<()> {
        let line = serde_json::to_string(self).map_err(std::io::Error::other)?;
        let text = format!("{line}\n{:x}\n", Sha256::digest(line.as_bytes()));
        let path = memory_of(copy);
        let temporary = path.with_extension("facts.tmp");
        std::fs::write(&temporary, text)?;
        std::fs::rename(&temporary, &path)
    }

    /// `copy`'s memory, if it is whole, of this format, and `copy` is as
    /// long as it was.
    fn read(copy: &Path) -> Result<Remembered, String> {
        let text = std::fs::read_to_string(memory_of(copy)).map_err(|e| e.to_string())?;
        let (line, sum) = text.trim_end().split_once('\n').ok_or("no checksum line")?;
        if format!("{:x}", Sha256::digest(line.as_bytes())) != sum {
            return Err("its checksum does not match".into());
        }
        let remembered: Remembered = serde_json::from_str(line).map_err(|e| e.to_string())?;
        if remembered.format != FORMAT {
            return Err(format!(
                "format {} (this build reads {FORMAT})",
                remembered.format
            ));
        }
        let len = std::fs::metadata(copy).map_err(|e| e.to_string())?.len();
        if len != remembered.copy_len {
            return Err(format!(
                "the copy has {len} bytes, not {}",
                remembered.copy_len
            ));
        }
        Ok(remembered)
    }
}

/// Where `copy`'s memory is.
pub fn memory_of(copy: &Path) -> PathBuf {
    let mut path = copy.as_os_str().to_owned();
    path.push(ENDING);
    PathBuf::from(path)
}

/// Each file's current copy and what it validated, by file name.
pub type Recalled = HashMap<String, (PathBuf, Remembered)>;

/// What a restart recalls of `dir`, a cache directory's `copies/`: each
/// file's current copy and its memory, by file name. Everything else in
/// it is deleted (copies without a memory, the copies before the current
/// ones, unfinished writes), each memory that cannot be used said once in
/// the log. Also the largest copy number seen, for new copies to follow.
pub fn recall(dir: &Path) -> std::io::Result<(Recalled, u64)> {
    let mut recalled = Recalled::new();
    let mut others = Vec::new();
    let mut highest = 0;
    for item in std::fs::read_dir(dir)? {
        let path = item?.path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        let number = name.split('.').next().and_then(|n| n.parse::<u64>().ok());
        highest = highest.max(number.unwrap_or(0));
        let is_copy = number.is_some() && (name.ends_with(".json") || name.ends_with(".json.gz"));
        if !is_copy {
            if !name.ends_with(ENDING) {
                others.push(path);
            }
            continue;
        }
        match Remembered::read(&path) {
            Ok(remembered) => {
                // Two copies of one file: the later number is the current one.
                let later = recalled
                    .get(&remembered.file)
                    .is_none_or(|(had, _)| copy_number(had) < number);
                if later {
                    let file = remembered.file.clone();
                    if let Some((older, _)) = recalled.insert(file, (path, remembered)) {
                        others.push(older);
                    }
                } else {
                    others.push(path);
                }
            }
            Err(why) => {
                if memory_of(&path).exists() {
                    tracing::warn!(copy = %path.display(), reason = %why, "a remembered snapshot cannot be used: its file is read again");
                }
                others.push(path);
            }
        }
    }
    for path in others {
        let _ = std::fs::remove_file(memory_of(&path));
        let _ = std::fs::remove_file(&path);
    }
    // Memories whose copy is gone.
    let current: HashSet<PathBuf> = recalled.values().map(|(copy, _)| memory_of(copy)).collect();
    for item in std::fs::read_dir(dir)? {
        let path = item?.path();
        if path.to_str().is_some_and(|p| p.ends_with(ENDING)) && !current.contains(&path) {
            let _ = std::fs::remove_file(&path);
        }
    }
    Ok((recalled, highest + 1))
}

fn copy_number(path: &Path) -> Option<u64> {
    let name = path.file_name()?.to_str()?;
    name.split('.').next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::listing::FileStamp;
    use portfolio_domain::store::Meta;

    fn stamp(len: u64) -> EntryStamp {
        EntryStamp::File(FileStamp {
            len,
            modified: Some(
                std::time::UNIX_EPOCH + std::time::Duration::from_nanos(1_700_000_000_123_456_789),
            ),
            changed: (1_700_000_000, 5),
            inode: (42, 7),
            signature: None,
        })
    }

    fn remembered(file: &str) -> Remembered {
        let mut dataset = Dataset::hollow_of(Meta {
            workspace_id: "ws-a".into(),
            workspace_name: Some("Acme \u{e9}".into()),
            version: "v1".into(),
            key_hashes: vec![[7; 32]],
            limits: None,
            content_hash: 9,
        });
        dataset.counts.tasks = 3;
        Remembered::of(file, &stamp(11), &dataset, &["a warning".into()], None).unwrap()
    }

    /// A memory reads back as written; a flipped byte, a cut, another
    /// format or a copy of another length is refused with a reason; what
    /// `recall` cannot use is deleted, the rest kept.
    #[test]
    fn a_memory_is_recalled_only_whole_and_for_its_copy() {
        let dir = tempfile::tempdir().unwrap();
        let copy = dir.path().join("3.json");
        std::fs::write(&copy, "01234567890").unwrap();
        let memory = remembered("a.json");
        memory.write(&copy).unwrap();
        assert_eq!(Remembered::read(&copy).unwrap(), memory);
        assert!(memory.holds(&stamp(11)) && !memory.holds(&stamp(12)));
        // A `.sig` beside the file: another stamp, and nothing to remember
        // of a version not accepted with a signature.
        let EntryStamp::File(mut signed) = stamp(11) else {
            unreachable!()
        };
        signed.signature = Some(SignatureStamp {
            len: 300,
            changed: (1_700_000_001, 0),
            inode: (42, 8),
        });
        let signed = EntryStamp::File(signed);
        assert!(!memory.holds(&signed));
        let dataset = memory.hollow().unwrap();
        assert_eq!(Remembered::of("a.json", &signed, &dataset, &[], None), None);
        let hollow = memory.hollow().unwrap();
        assert_eq!(
            (hollow.fingerprint, hollow.counts.tasks),
            (memory.fingerprint, 3)
        );
        assert_eq!(hollow.key_hashes, vec![[7; 32]]);

        let path = memory_of(&copy);
        let good = std::fs::read(&path).unwrap();
        let refused = |bytes: &[u8]| {
            std::fs::write(&path, bytes).unwrap();
            Remembered::read(&copy).unwrap_err()
        };
        let mut flipped = good.clone();
        flipped[30] ^= 1;
        assert!(refused(&flipped).contains("checksum"));
        assert!(refused(&good[..good.len() / 2]).contains("checksum"));
        let other = Remembered {
            format: FORMAT + 1,
            ..memory.clone()
        };
        other.write(&copy).unwrap();
        assert!(Remembered::read(&copy).unwrap_err().contains("format"));
        memory.write(&copy).unwrap();
        std::fs::write(&copy, "short").unwrap();
        assert!(Remembered::read(&copy).unwrap_err().contains("5 bytes"));

        // recall: the whole one kept, the rest deleted.
        std::fs::write(&copy, "01234567890").unwrap();
        let older = dir.path().join("1.json");
        std::fs::write(&older, "01234567890").unwrap();
        memory.write(&older).unwrap();
        let orphan = dir.path().join("2.json");
        std::fs::write(&orphan, "no memory").unwrap();
        std::fs::write(dir.path().join("9.json.facts"), "no copy").unwrap();
        let (recalled, next) = recall(dir.path()).unwrap();
        assert_eq!(next, 10);
        assert_eq!(recalled.len(), 1);
        assert_eq!(
            recalled["a.json"].0, copy,
            "the later copy of a.json is current"
        );
        let mut left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        assert_eq!(left, ["3.json", "3.json.facts"]);
    }
}
