//! Signing what replicas serve (docs/object-storage.md#signing), the
//! publisher's side: its key ([`Signer`]), `keygen`, which makes one, and
//! `sign`, which signs the snapshot files of a directory (`FILE.sig`
//! beside each). `publish`, `rollback` and `publish --refresh-signatures`
//! sign a record's current version through [`Signer::sign_current`],
//! inside their conditional writes, where the record's revision is known.
//! The format is `portfolio_wire::signed`'s, shared with the replicas.

mod keygen;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use sha2::{Digest, Sha256};

use crate::storage::is_snapshot_name;
use crate::tools::check;
pub use keygen::{KeyFiles, KeygenError, keygen};
use portfolio_domain::store::key;
use portfolio_wire::manifest::{Version, WorkspaceRecord};
use portfolio_wire::signed::{
    Envelope, KeyError, MAX_SIGNATURE_BYTES, Named, Refusal, SIGNATURE_SUFFIX, SecretKey,
    Statement, TrustedKeys,
};

/// The largest key file read: a secret key file is a few lines.
const MAX_KEY_BYTES: u64 = 64 << 10;

/// A publisher's signing key, and how long its signatures are valid.
/// (`Debug` shows the key id only, as `SecretKey` does.)
#[derive(Debug)]
pub struct Signer {
    key: SecretKey,
    /// This key alone: what a signature found in a record is checked with,
    /// to tell one of ours from another key's.
    own: TrustedKeys,
    valid_for: Duration,
}

/// Why a signature was not made; each names the file or workspace.
#[derive(Debug, thiserror::Error)]
pub enum SignError {
    #[error("cannot read the signing key {} (--sign-key): {source}", .path.display())]
    ReadKey {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Key(#[from] KeyError),
    #[error("{workspace}'s record names no current version to sign")]
    NoCurrent { workspace: String },
    #[error(
        "{workspace}'s version {version} records no key hashes (it was published by an older build), so no signature can name its keys; publish its file again to sign it"
    )]
    NoKeyHashes { workspace: String, version: String },
}

impl Signer {
    pub fn new(key: SecretKey, valid_for: Duration) -> Signer {
        let mut own = TrustedKeys::default();
        own.add(key.public());
        Signer {
            key,
            own,
            valid_for,
        }
    }

    /// Reads the secret key file `path` (`--sign-key`). A file that others
    /// can read is used, with a warning on `err`: Kubernetes mounts a
    /// secret 0644 unless told otherwise, and refusing would only teach
    /// people to copy the key somewhere worse.
    pub fn load(
        path: &Path,
        valid_for: Duration,
        err: &mut impl Write,
    ) -> Result<Signer, SignError> {
        let unreadable = |source| SignError::ReadKey {
            path: path.to_owned(),
            source,
        };
        let mut text = String::new();
        std::fs::File::open(path)
            .and_then(|file| file.take(MAX_KEY_BYTES).read_to_string(&mut text))
            .map_err(unreadable)?;
        let key = SecretKey::parse(&text, &format!("{} (--sign-key)", path.display()))?;
        if let Some(mode) = readable_by_others(path) {
            let _ = writeln!(
                err,
                "warning: the signing key {} can be read by other users (mode {mode:04o}): \
                 `chmod 600` it (in Kubernetes, give the secret volume defaultMode: 0400)",
                path.display()
            );
        }
        Ok(Signer::new(key, valid_for))
    }

    /// The key's id, as signatures name it.
    pub fn id(&self) -> &str {
        &self.key.id
    }

    pub fn valid_for(&self) -> Duration {
        self.valid_for
    }

    /// Signs `record`'s current version as current at the record's
    /// revision (the caller has set it to the one it writes), valid from
    /// `now`; the signature is stored in the version and returned.
    pub fn sign_current(
        &self,
        record: &mut WorkspaceRecord,
        now: SystemTime,
    ) -> Result<Envelope, SignError> {
        let (workspace, revision) = (record.workspace.as_str(), record.revision);
        let history = &mut record.history;
        let Some(version) = history
            .versions
            .iter_mut()
            .find(|v| v.sha256 == history.current)
        else {
            return Err(SignError::NoCurrent {
                workspace: workspace.to_owned(),
            });
        };
        let Some(keys) = version.key_hashes.as_deref() else {
            return Err(SignError::NoKeyHashes {
                workspace: workspace.to_owned(),
                version: version.version.clone(),
            });
        };
        let named = named(workspace, version, revision);
        let mut statement = Statement::new(&named, keys, revision, now, self.valid_for);
        // What a delta must rebuild, for replicas that use one, and the
        // limits a replica applies before it reads the snapshot.
        statement.plain_sha256 = version.plain_sha256.clone();
        statement.limits = version.limits;
        let envelope = statement.sign(&self.key);
        version.signature = Some(envelope.clone());
        Ok(envelope)
    }

    /// When `version`'s signature by this key expires (RFC 3339), if it
    /// has one.
    pub fn expiry(&self, version: &Version) -> Option<String> {
        let verified = self.own.verify(version.signature.as_ref()?).ok()?;
        Some(verified.statement.expires_at)
    }

    /// Why `record`'s current version should be signed anew at `now`, or
    /// `None` while its signature is this key's, covers it at the record's
    /// revision, and has at least half of `valid_for` left: refreshing at
    /// half-life leaves the other half to notice a refresh that stopped.
    pub fn stale(&self, record: &WorkspaceRecord, now: SystemTime) -> Option<String> {
        let Some(version) = record.history.current_version() else {
            return Some("no current version".to_owned());
        };
        let Some(envelope) = &version.signature else {
            return Some("unsigned".to_owned());
        };
        let verified = match self.own.verify(envelope) {
            Ok(verified) => verified,
            Err(Refusal::Unsigned) => return Some("unsigned".to_owned()),
            Err(Refusal::Untrusted(id)) => return Some(format!("signed by another key, {id}")),
            Err(refusal) => return Some(refusal.to_string()),
        };
        let statement = verified.statement;
        let named = named(&record.workspace, version, record.revision);
        if let Err(refusal) = statement.covers(&named) {
            return Some(refusal.to_string());
        }
        if statement.plain_sha256 != version.plain_sha256 {
            return Some("its signature does not name the uncompressed content".to_owned());
        }
        if statement.limits != version.limits {
            return Some("its signature does not name the workspace's limits".to_owned());
        }
        let left = statement
            .expires()
            .and_then(|at| at.duration_since(now).ok())
            .unwrap_or_default();
        (left < self.valid_for / 2).then(|| {
            let verb = if left.is_zero() { "expired" } else { "expires" };
            format!("its signature {verb} at {}", statement.expires_at)
        })
    }
}

/// What a signature over `version` as current at `revision` names.
fn named<'a>(workspace: &'a str, version: &'a Version, revision: u64) -> Named<'a> {
    Named {
        workspace,
        version: &version.version,
        sha256: &version.sha256,
        key_hashes: version.key_hashes.as_deref(),
        revision: Some(revision),
    }
}

/// The mode of `path` if its group or others may read it.
fn readable_by_others(path: &Path) -> Option<u32> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(path).ok()?.permissions().mode() & 0o7777;
        (mode & 0o044 != 0).then_some(mode)
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        None
    }
}

/// `portfolio-replica sign FILE|DIR... --sign-key KEY`: for a replica that
/// reads a directory. Each snapshot file (a directory: the files the
/// server would read in it) is checked on its own as `check` does (its
/// messages) and, if it passes, gets its signature beside it as
/// `FILE.sig`, written atomically. A file that fails gets nothing, and
/// the others are still signed. Returns whether every file was signed.
pub fn sign(
    paths: &[PathBuf],
    signer: &Signer,
    out: &mut impl Write,
    err: &mut impl Write,
) -> bool {
    let mut ok = true;
    let mut files = Vec::new();
    for path in paths {
        if path.is_dir() {
            match snapshot_files(path) {
                Ok(found) if found.is_empty() => {
                    let _ = writeln!(
                        out,
                        "warning: {}: no snapshot files to sign",
                        path.display()
                    );
                }
                Ok(found) => files.extend(found),
                Err(e) => {
                    ok = false;
                    let _ = writeln!(
                        err,
                        "error: {}: cannot read the directory: {e}",
                        path.display()
                    );
                }
            }
        } else {
            files.push(path.clone());
        }
    }
    for file in files {
        match sign_file(&file, signer, SystemTime::now(), out, err) {
            Ok(line) => {
                let _ = writeln!(out, "{line}");
            }
            Err(why) => {
                ok = false;
                let _ = writeln!(err, "error: {}: not signed: {why}", file.display());
            }
        }
    }
    ok
}

/// The files of `dir` the server would read, in name order.
fn snapshot_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        if name.to_str().is_some_and(is_snapshot_name) && entry.path().is_file() {
            files.push(entry.path());
        }
    }
    files.sort();
    Ok(files)
}

/// The signature file of `file`: `acme.json.sig`.
pub fn signature_path(file: &Path) -> PathBuf {
    let mut path = file.as_os_str().to_owned();
    path.push(SIGNATURE_SUFFIX);
    PathBuf::from(path)
}

/// Checks and signs one file at `now`: the line that says so, or why not.
fn sign_file(
    path: &Path,
    signer: &Signer,
    now: SystemTime,
    out: &mut impl Write,
    err: &mut impl Write,
) -> Result<String, String> {
    // The bytes as on disk (a .json.gz file's gzip bytes), as a replica
    // hashes them; hashed again after the check, so that what is signed is
    // what was checked even if a writer replaces the file meanwhile.
    let sha256 = file_sha256(path).map_err(|e| format!("cannot read it: {e}"))?;
    let checked =
        check::check(&[path.to_owned()], out, err).ok_or("it does not pass the checks (above)")?;
    let [checked] = checked.as_slice() else {
        return Err("not one snapshot file".to_owned());
    };
    if file_sha256(path).ok().as_ref() != Some(&sha256) {
        return Err("it changed while it was checked; run sign again".to_owned());
    }
    let sig_path = signature_path(path);
    let revision = since_epoch_ms(now).max(previous_revision(&sig_path, signer) + 1);
    let keys: Vec<String> = checked.key_hashes.iter().map(key::to_hex).collect();
    let named = Named {
        workspace: &checked.workspace,
        version: &checked.version,
        sha256: &sha256,
        key_hashes: None,
        revision: None,
    };
    let statement = Statement::new(&named, &keys, revision, now, signer.valid_for);
    write_atomically(&sig_path, &statement.sign(&signer.key).to_json())
        .map_err(|e| format!("cannot write {}: {e}", sig_path.display()))?;
    Ok(format!(
        "signed: {}: workspace {}, version {}, key {}, revision {}, expires {}",
        sig_path.display(),
        checked.workspace,
        checked.version,
        signer.id(),
        crate::storage::signatures::file_revision(revision),
        statement.expires_at
    ))
}

/// The revision of the signature this key wrote in `sig_path` before, or
/// 0: a new one is always above it, so that a clock set back (or another
/// host's, behind) never makes replicas take it for a replay.
fn previous_revision(sig_path: &Path, signer: &Signer) -> u64 {
    let Ok(file) = std::fs::File::open(sig_path) else {
        return 0;
    };
    let mut bytes = Vec::new();
    if file
        .take(MAX_SIGNATURE_BYTES)
        .read_to_end(&mut bytes)
        .is_err()
    {
        return 0;
    }
    Envelope::parse(&bytes)
        .and_then(|envelope| signer.own.verify(&envelope))
        .map_or(0, |verified| verified.statement.revision)
}

/// Milliseconds since the Unix epoch: a directory signature's revision.
fn since_epoch_ms(now: SystemTime) -> u64 {
    now.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Lower-case hex SHA-256 of the file's bytes.
fn file_sha256(path: &Path) -> std::io::Result<String> {
    let mut hasher = Sha256::new();
    std::io::copy(&mut std::fs::File::open(path)?, &mut hasher)?;
    Ok(key::to_hex(&hasher.finalize().into()))
}

/// Writes `bytes` to `path` through a temporary file in its directory
/// (a dot-name, which the server ignores), synced and renamed into place:
/// a replica reads the old signature or the new one, never part of one.
fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let temp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let written = std::fs::File::create(&temp).and_then(|mut file| {
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&temp, path)
    });
    if written.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    written?;
    // The rename itself is durable once the directory is synced.
    #[cfg(unix)]
    std::fs::File::open(dir)?.sync_all()?;
    Ok(())
}

#[cfg(test)]
mod tests;
