//! Signed snapshots on a replica (`--trust-key`): the keys it trusts, the
//! highest signed revision it has accepted per workspace, and the verdict
//! on a version before it is loaded (docs/object-storage.md#signed-snapshots).
//!
//! A version is accepted only if a trusted key signed a statement that
//! names exactly it (workspace, version, SHA-256 of its bytes, its keys,
//! and in manifest mode its record's revision), whose revision is not
//! below the one accepted before for that workspace (nor equal with other
//! content), and which has not expired, unless it is the very version
//! accepted before: a version keeps serving past its expiry, it is only
//! never newly accepted. What was accepted is remembered in
//! `--cache-dir` (one small file per workspace, under `accepted/`), so a
//! restart cannot be fooled into an older version either.
//!
//! Storage gives what a version says it is (the manifest's entry, or a file
//! and its `.sig`); the scan asks for the verdict, and tells what it
//! published.

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::storage::snapshot_file::OpenFile;

use portfolio_wire::manifest::short;
pub use portfolio_wire::signed::{
    Envelope, KeyError, MAX_SIGNATURE_BYTES, Named, Refusal, SIGNATURE_SUFFIX, Statement,
    TrustedKeys, Verified, keys_digest,
};

/// The directory under `--cache-dir` that remembers what was accepted.
const ACCEPTED_DIR: &str = "accepted";

/// What a manifest says of a workspace's current version, and its
/// signature if it has one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listed {
    pub envelope: Option<Envelope>,
    pub workspace: String,
    pub version: String,
    pub sha256: String,
    pub key_hashes: Option<Vec<String>>,
    pub revision: Option<u64>,
}

impl Listed {
    /// What a signature of it must name.
    pub fn named(&self) -> Named<'_> {
        Named {
            workspace: &self.workspace,
            version: &self.version,
            sha256: &self.sha256,
            key_hashes: self.key_hashes.as_deref(),
            revision: self.revision,
        }
    }
}

/// What a directory's file says it is: its signature file as read, and the
/// SHA-256 of its bytes where it was hashed before its load (`check`);
/// `None` where the load hashes what it reads, and the digest is checked
/// once it is loaded (`serve::loader::verify::read`).
#[derive(Clone, Debug)]
pub struct FileSigned {
    pub envelope: Result<Envelope, Refusal>,
    pub sha256: Option<String>,
}

/// A version up for the verdict: what it says it is, from either kind of
/// source.
pub enum Candidate<'a> {
    Listed(&'a Listed),
    File(&'a FileSigned),
}

/// A version whose signature was accepted: what it says, the key that
/// made it, and the envelope itself (remembered, and shown).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Signed {
    pub verified: Verified,
    pub envelope: Envelope,
}

impl Signed {
    pub fn statement(&self) -> &Statement {
        &self.verified.statement
    }
}

/// A version accepted before, as remembered.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Accepted {
    workspace: String,
    version: String,
    revision: u64,
    sha256: String,
    /// The signature it was accepted with: a restart that finds storage
    /// unreachable serves the cached version on it.
    envelope: Envelope,
}

/// The keys trusted, or none: then nothing is verified, as before.
pub struct Trust {
    keys: Option<TrustedKeys>,
    accepted: Mutex<HashMap<String, Accepted>>,
    /// Accepted, not yet written to `journal`.
    unwritten: Mutex<Vec<Accepted>>,
    /// `<cache-dir>/accepted`, where accepted versions are remembered.
    journal: Option<journal::AcceptedJournal>,
}

impl Default for Trust {
    fn default() -> Trust {
        Trust::off()
    }
}

impl std::fmt::Debug for Trust {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Trust")
            .field("keys", &self.key_ids())
            .field("journal", &self.journal)
            .finish()
    }
}

/// A directory signature's revision as people read it: the number, and the
/// signing time it is (`sign` makes it of the time in milliseconds since
/// the Unix epoch): `1795428000412 (2026-11-23T10:00:00.412Z)`. Machine
/// output (`/snapshots`) keeps the number alone.
pub fn file_revision(revision: u64) -> String {
    // Past the year 9999 no time is written in RFC 3339 (and none was
    // signed): the number alone.
    const LAST_MS: u64 = 253_402_300_799_999;
    match revision {
        0..=LAST_MS => {
            let at = SystemTime::UNIX_EPOCH + std::time::Duration::from_millis(revision);
            format!(
                "{revision} ({})",
                portfolio_domain::store::time::utc_millis(at)
            )
        }
        _ => revision.to_string(),
    }
}

/// Why verification cannot start: a key file, or what was accepted before.
#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    #[error("cannot read --trust-key {path}: {source}")]
    Unreadable {
        path: PathBuf,
        source: std::io::Error,
    },
    /// (Not its `source`: the message says it already, and a fatal error
    /// prints its causes too.)
    #[error("--trust-key: {0}")]
    Key(KeyError),
    #[error(
        "cannot read what was accepted before from {path}: {why} (it guards against replayed versions)"
    )]
    Journal { path: PathBuf, why: String },
}

impl Trust {
    /// No verification.
    pub fn off() -> Trust {
        Trust {
            keys: None,
            accepted: Mutex::default(),
            unwritten: Mutex::default(),
            journal: None,
        }
    }

    /// Verification with the keys of `key_files` (each may hold several),
    /// remembering what it accepts under `cache_dir` if given.
    pub fn from_files(
        key_files: &[PathBuf],
        cache_dir: Option<&Path>,
    ) -> Result<Trust, TrustError> {
        let mut keys = TrustedKeys::default();
        for path in key_files {
            let text = std::fs::read_to_string(path).map_err(|source| TrustError::Unreadable {
                path: path.clone(),
                source,
            })?;
            let read = TrustedKeys::parse(&text, &path.display().to_string());
            keys.extend(read.map_err(TrustError::Key)?);
        }
        Trust::new(keys, cache_dir)
    }

    /// Verification with `keys`, remembering under `cache_dir` if given.
    pub fn new(keys: TrustedKeys, cache_dir: Option<&Path>) -> Result<Trust, TrustError> {
        let (journal, accepted) = match cache_dir {
            Some(dir) => {
                let (journal, accepted) = journal::AcceptedJournal::open(&dir.join(ACCEPTED_DIR))?;
                (Some(journal), accepted)
            }
            None => (None, HashMap::new()),
        };
        Ok(Trust {
            keys: Some(keys),
            accepted: Mutex::new(accepted),
            unwritten: Mutex::default(),
            journal,
        })
    }

    pub fn enabled(&self) -> bool {
        self.keys.is_some()
    }

    /// Whether what it accepts outlives the process (`--cache-dir`).
    pub fn remembers(&self) -> bool {
        self.journal.is_some()
    }

    pub fn key_ids(&self) -> Vec<String> {
        self.keys.as_ref().map(TrustedKeys::ids).unwrap_or_default()
    }

    fn accepted(&self) -> MutexGuard<'_, HashMap<String, Accepted>> {
        self.accepted.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn unwritten(&self) -> MutexGuard<'_, Vec<Accepted>> {
        self.unwritten.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The verdict on `candidate`, with `now` for its
    /// expiry; `None` when nothing is verified.
    pub fn judge(
        &self,
        candidate: Candidate<'_>,
        now: SystemTime,
    ) -> Option<Result<Signed, Refusal>> {
        let keys = self.keys.as_ref()?;
        Some(self.verdict(keys, candidate, now))
    }

    /// The statement of a candidate that a trusted key signed, whatever the
    /// verdict on it: a replayed or expired version's statement is
    /// authentic (only its revision or expiry is refused), so what it
    /// names (a workspace, the digest of its keys) may be believed of it.
    /// `None` when nothing is verified, or when no trusted key signed it.
    pub fn authentic(&self, candidate: Candidate<'_>) -> Option<Statement> {
        let keys = self.keys.as_ref()?;
        let verified = keys.verify(envelope_of(&candidate).ok()?).ok()?;
        Some(verified.statement)
    }

    fn verdict(
        &self,
        keys: &TrustedKeys,
        candidate: Candidate<'_>,
        now: SystemTime,
    ) -> Result<Signed, Refusal> {
        let envelope = envelope_of(&candidate)?;
        let verified = keys.verify(envelope)?;
        let statement = &verified.statement;
        statement.covers(&match &candidate {
            Candidate::Listed(listed) => listed.named(),
            // A file's workspace and version are checked once it is loaded
            // (`loaded_as_signed`), and so are its bytes where they were
            // not hashed before.
            Candidate::File(file) => Named {
                workspace: &statement.workspace,
                version: &statement.version,
                sha256: file.sha256.as_deref().unwrap_or(&statement.sha256),
                key_hashes: None,
                revision: None,
            },
        })?;
        // A file's revision is a signing time, shown as one; a record's
        // is the manifest's counter.
        let shown = |revision: u64| match &candidate {
            Candidate::File(_) => file_revision(revision),
            Candidate::Listed(_) => revision.to_string(),
        };
        if let Some(before) = self.accepted().get(&statement.workspace) {
            if statement.revision < before.revision {
                return Err(Refusal::Replayed(format!(
                    "signed revision {} is older than revision {} accepted before for workspace {:?}",
                    shown(statement.revision),
                    shown(before.revision),
                    statement.workspace
                )));
            }
            if statement.revision == before.revision {
                if statement.sha256 != before.sha256 {
                    return Err(Refusal::Replayed(format!(
                        "signed revision {} of workspace {:?} was accepted before with other content ({})",
                        shown(statement.revision),
                        statement.workspace,
                        short(&before.sha256)
                    )));
                }
                // The very version accepted before: expired or not, it
                // keeps serving.
                return Ok(Signed {
                    verified,
                    envelope: envelope.clone(),
                });
            }
        }
        if statement.expired(now) {
            return Err(Refusal::Expired(statement.expires_at.clone()));
        }
        Ok(Signed {
            verified,
            envelope: envelope.clone(),
        })
    }

    /// What a workspace's version was accepted as, if it is `sha256`:
    /// a version restored from the cache (storage unreachable at startup)
    /// is judged on it.
    pub fn accepted_as(&self, workspace: &str, sha256: &str) -> Option<Listed> {
        let accepted = self.accepted();
        let before = accepted.get(workspace).filter(|a| a.sha256 == sha256)?;
        Some(Listed {
            envelope: Some(before.envelope.clone()),
            workspace: before.workspace.clone(),
            version: before.version.clone(),
            sha256: before.sha256.clone(),
            key_hashes: None,
            revision: Some(before.revision),
        })
    }

    /// Remembers that these versions serve now, each with the signature it
    /// was accepted with; a revision below one remembered changes nothing.
    /// What it remembers on disk is written by [`Trust::persist`], which the
    /// scan calls once it has let go of its locks.
    pub fn published<'a>(&self, versions: impl IntoIterator<Item = &'a Signed>) {
        let mut changed = Vec::new();
        let mut accepted = self.accepted();
        for signed in versions {
            let statement = signed.statement();
            let newer = accepted
                .get(&statement.workspace)
                .is_none_or(|a| statement.revision > a.revision);
            if newer {
                let now = Accepted {
                    workspace: statement.workspace.clone(),
                    version: statement.version.clone(),
                    revision: statement.revision,
                    sha256: statement.sha256.clone(),
                    envelope: signed.envelope.clone(),
                };
                changed.push(now.clone());
                accepted.insert(statement.workspace.clone(), now);
            }
        }
        drop(accepted);
        if self.journal.is_some() {
            self.unwritten().extend(changed);
        }
    }

    /// Writes what [`Trust::published`] accepted since the last call into
    /// `--cache-dir`, durably, as one batch of its journal (one `fsync`,
    /// however many workspaces: `journal.rs`). The scan calls it before the
    /// catalog swap that serves them.
    pub fn persist(&self) {
        let Some(journal) = &self.journal else {
            return;
        };
        let changed = std::mem::take(&mut *self.unwritten());
        if changed.is_empty() {
            return;
        }
        let all = || self.accepted().values().cloned().collect();
        if let Err(error) = journal.append(&changed, all) {
            tracing::warn!(
                workspaces = changed.len(),
                error = %error,
                "cannot remember the accepted revisions; after a restart, this replica may accept an older signed version of these workspaces until it expires"
            );
        }
    }
}

/// The envelope a candidate carries, or why it has none to verify.
fn envelope_of<'a>(candidate: &Candidate<'a>) -> Result<&'a Envelope, Refusal> {
    match candidate {
        Candidate::Listed(listed) => listed.envelope.as_ref().ok_or(Refusal::Unsigned),
        Candidate::File(file) => file.envelope.as_ref().map_err(Clone::clone),
    }
}

/// Checks that what loaded is what its signature names: the workspace,
/// the version and the keys (the bytes were checked before the load).
pub fn loaded_as_signed(
    signed: &Signed,
    workspace: &str,
    version: &str,
    key_hashes: &[String],
) -> Result<(), Refusal> {
    let statement = signed.statement();
    statement.covers(&Named {
        workspace,
        version,
        sha256: &statement.sha256,
        key_hashes: Some(key_hashes),
        revision: None,
    })
}

/// What a snapshot file's signature says, and the SHA-256 of its bytes:
/// `<path>.sig` read ([`read_signature`]), the file hashed.
pub fn read_file_signature(path: &Path) -> std::io::Result<FileSigned> {
    let envelope = read_signature(path);
    let sha256 = Some(sha256_file(path)?);
    Ok(FileSigned { envelope, sha256 })
}

/// The envelope in `<path>.sig`: opened without blocking, only if it is a
/// regular file (a FIFO named like a signature cannot stall the scan), read
/// up to [`MAX_SIGNATURE_BYTES`].
pub fn read_signature(path: &Path) -> Result<Envelope, Refusal> {
    let mut name = path.as_os_str().to_owned();
    name.push(SIGNATURE_SUFFIX);
    let sig_path = PathBuf::from(name);
    let cannot =
        |e: std::io::Error| Refusal::Malformed(format!("cannot read {}: {e}", sig_path.display()));
    let file = match OpenFile::open(&sig_path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(Refusal::Unsigned),
        Err(e) => return Err(cannot(e)),
    };
    let mut bytes = Vec::new();
    file.reader(0)
        .take(MAX_SIGNATURE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(cannot)?;
    if bytes.len() as u64 > MAX_SIGNATURE_BYTES {
        return Err(Refusal::Malformed(format!(
            "{} is larger than {MAX_SIGNATURE_BYTES} bytes",
            sig_path.display()
        )));
    }
    Envelope::parse(&bytes)
}

/// The SHA-256 of a file's bytes, lower-case hex (opened as
/// [`OpenFile::open`] opens). The read buffer is kept per thread: a fresh
/// one zeroed per file cost more than hashing a small workspace.
pub fn sha256_file(path: &Path) -> std::io::Result<String> {
    thread_local! {
        static BUFFER: std::cell::RefCell<Vec<u8>> = std::cell::RefCell::new(vec![0; 256 << 10]);
    }
    let opened = OpenFile::open(path)?;
    let mut file = opened.reader(0);
    let mut hasher = Sha256::new();
    BUFFER.with_borrow_mut(|buffer| -> std::io::Result<()> {
        loop {
            let n = file.read(buffer)?;
            if n == 0 {
                return Ok(());
            }
            hasher.update(&buffer[..n]);
        }
    })?;
    Ok(portfolio_domain::store::key::to_hex(
        &hasher.finalize().into(),
    ))
}

mod journal;

#[cfg(test)]
mod tests;
