//! `portfolio-replica check`: snapshot files validated together, as the
//! server would load them: each file's own checks, then conflicts between
//! them by the one rule (`portfolio_domain::store::claims`). `publish` checks what it
//! is given through the same function.

use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::storage::signatures::{self, Refusal, Trust, loaded_as_signed, read_file_signature};
use crate::storage::{SnapshotFile, is_snapshot_name};
use portfolio_domain::snapshot::{self, SnapshotError};
use portfolio_domain::store::claims::{self, Claim, Holders};
use portfolio_domain::store::key::{KeyHash, to_hex};

/// What the server reads of a directory, for the messages about names.
const SNAPSHOT_NAMES: &str = "only *.json and *.json.gz that do not start with '.'";

/// Validates snapshot files as the server would, and prints one line per
/// file to `out` (valid, with its warnings) or `err` (rejected). A directory
/// stands for the files the server would read in it, by name. The files are
/// checked together: two naming one workspace, or sharing a key hash, are a
/// conflict decided by the server's rule (`store::claims`: the older file
/// wins, then the first name), and the other one is rejected. Returns the
/// files, or `None` if any was rejected.
pub fn check(
    paths: &[PathBuf],
    out: &mut impl Write,
    err: &mut impl Write,
) -> Option<Vec<Checked>> {
    check_with(paths, false, out, err)
}

/// [`check`], saying of a directory's `<file>.sig` names that they are
/// read, not ignored, when `signatures` (`check --trust-key`: a replica
/// with `--trust-key` reads them).
pub fn check_with(
    paths: &[PathBuf],
    signatures: bool,
    out: &mut impl Write,
    err: &mut impl Write,
) -> Option<Vec<Checked>> {
    let mut checker = Checker {
        signatures,
        ..Checker::default()
    };
    for path in paths {
        if path.is_dir() {
            checker.dir(path, out, err);
        } else {
            checker.file(path, true, out, err);
        }
    }
    checker.finish(out, err)
}

/// `check --trust-key`: what a replica trusting those keys would say of
/// each valid file's signature (`<file>.sig`), one line each. It has no
/// memory of revisions accepted before, so it cannot tell a replay; a
/// replica with `--cache-dir` can. Returns false if any would be refused.
pub fn signatures(
    checked: &[Checked],
    trust: &Trust,
    out: &mut impl Write,
    err: &mut impl Write,
) -> bool {
    let mut ok = true;
    for file in checked {
        let keys: Vec<String> = file.key_hashes.iter().map(to_hex).collect();
        let verdict = read_file_signature(&file.path)
            .map_err(|e| Refusal::Malformed(format!("cannot read {}: {e}", file.name)))
            .and_then(|signed| {
                let judged = trust.judge(signatures::Candidate::File(&signed), SystemTime::now());
                judged.unwrap_or(Err(Refusal::Unsigned))
            })
            .and_then(|signed| {
                loaded_as_signed(&signed, &file.workspace, &file.version, &keys).map(|()| signed)
            });
        match verdict {
            Ok(signed) => {
                let statement = signed.statement();
                let _ = writeln!(
                    out,
                    "{}: signed by key {}, revision {}, expires {}",
                    file.name,
                    signed.verified.key_id,
                    signatures::file_revision(statement.revision),
                    statement.expires_at
                );
            }
            Err(refusal) => {
                ok = false;
                let _ = writeln!(
                    err,
                    "error: {}: a replica with --trust-key would refuse it: signature refused ({}): {refusal}",
                    file.name,
                    refusal.kind()
                );
            }
        }
    }
    ok
}

/// The files checked so far, and what they claim.
struct Checker {
    ok: bool,
    /// The files that loaded, in the order checked.
    valid: Vec<Valid>,
    /// Files already checked (a directory and one of its files both given).
    seen: HashSet<PathBuf>,
    /// Signature files are read beside the snapshots (`--trust-key`).
    signatures: bool,
}

/// A file that loaded: what it claims, and what `check` says of it once
/// conflicts are decided.
struct Valid {
    checked: Checked,
    written: SystemTime,
    lines: Vec<String>,
}

/// A file that passed every check.
#[derive(Clone, Debug)]
pub struct Checked {
    pub path: PathBuf,
    /// As messages name it: the path as given.
    pub name: String,
    pub workspace: String,
    pub version: String,
    pub records: u64,
    pub key_hashes: Vec<KeyHash>,
    /// The workspace's own limits, if the snapshot sets them.
    pub limits: Option<portfolio_domain::store::limits::WorkspaceLimits>,
}

impl Default for Checker {
    fn default() -> Checker {
        Checker {
            ok: true,
            valid: Vec::new(),
            seen: HashSet::new(),
            signatures: false,
        }
    }
}

impl Checker {
    /// Checks the files of `dir` that the server would read, in name order
    /// (the server's order at startup), after a line saying what it skips.
    fn dir(&mut self, dir: &Path, out: &mut impl Write, err: &mut impl Write) {
        let shown = dir.display();
        let entries = match std::fs::read_dir(dir) {
            Ok(entries) => entries,
            Err(e) => {
                self.ok = false;
                let _ = writeln!(err, "error: {shown}: cannot read the directory: {e}");
                return;
            }
        };
        let mut snapshots = Vec::new();
        let mut ignored = Vec::new();
        for entry in entries {
            match entry {
                Ok(entry) => match entry.file_name().to_str() {
                    Some(name) if is_snapshot_name(name) => snapshots.push(name.to_owned()),
                    Some(name) => ignored.push(name.to_owned()),
                    None => ignored.push(entry.file_name().to_string_lossy().into_owned()),
                },
                Err(e) => {
                    self.ok = false;
                    let _ = writeln!(err, "error: {shown}: cannot read the directory: {e}");
                    return;
                }
            }
        }
        snapshots.sort();
        ignored.sort();
        // With --trust-key, a snapshot's `<name>.sig` is read with it, as a
        // replica verifying signatures reads it: not an ignored name.
        let mut signatures = 0;
        if self.signatures {
            let before = ignored.len();
            ignored.retain(|name| {
                !name
                    .strip_suffix(signatures::SIGNATURE_SUFFIX)
                    .is_some_and(|file| {
                        snapshots.binary_search_by(|s| s.as_str().cmp(file)).is_ok()
                    })
            });
            signatures = before - ignored.len();
        }
        let mut line = format!("{shown}: {} snapshot name(s) to check; ", snapshots.len());
        if self.signatures {
            line.push_str(&format!(
                "{signatures} signature(s) (<name>.sig) read with them (--trust-key); "
            ));
        }
        line.push_str(&format!(
            "{} other name(s) ignored, as the server ignores them ({SNAPSHOT_NAMES})",
            ignored.len()
        ));
        if !ignored.is_empty() {
            const LISTED: usize = 10;
            line.push_str(": ");
            line.push_str(&ignored[..ignored.len().min(LISTED)].join(", "));
            if ignored.len() > LISTED {
                line.push_str(&format!(", … ({} more)", ignored.len() - LISTED));
            }
        }
        let _ = writeln!(out, "{line}");
        if snapshots.is_empty() {
            let _ = writeln!(
                out,
                "warning: {shown}: no snapshot files: the server would serve no workspace from it"
            );
        }
        for name in snapshots {
            self.file(&dir.join(name), false, out, err);
        }
    }

    /// Checks one file. `given`: named on the command line, so its name may
    /// be one the server ignores (said as a warning; the content is checked).
    fn file(&mut self, path: &Path, given: bool, out: &mut impl Write, err: &mut impl Write) {
        if !self
            .seen
            .insert(path.canonicalize().unwrap_or_else(|_| path.to_owned()))
        {
            return;
        }
        let name = path.display().to_string();
        let file_name = path.file_name().map(|n| n.to_string_lossy());
        if given && !file_name.as_deref().is_some_and(is_snapshot_name) {
            let _ = writeln!(
                out,
                "warning: {name}: the server ignores this name ({SNAPSHOT_NAMES})"
            );
        }
        // In a directory, what the server's listing says of a name that is
        // not a readable regular file (a dangling link, a directory).
        let unreadable = match std::fs::metadata(path) {
            _ if given => None,
            Ok(meta) if meta.is_file() => None,
            Ok(_) => Some("not a regular file".to_owned()),
            Err(e) => Some(e.to_string()),
        };
        let result = match unreadable {
            Some(reason) => Err(SnapshotError::new(
                &name,
                format!("cannot read the file: {reason}"),
            )),
            None => snapshot::load_from(
                &name,
                &SnapshotFile::new(path),
                &crate::threads::Cores,
                &mut |_, _| {},
            ),
        };
        let loaded = match result {
            Ok(loaded) => loaded,
            Err(e) => {
                self.ok = false;
                let _ = writeln!(err, "error: {e}");
                return;
            }
        };
        let ds = &loaded.dataset;
        let mut lines = vec![format!(
            "ok: {name}: workspace {}, version {}, {} records, {} warning(s){}",
            ds.workspace_id,
            ds.version,
            ds.counts.total(),
            loaded.warnings.len(),
            ds.limits.as_ref().map(limits_text).unwrap_or_default()
        )];
        lines.extend(
            loaded
                .warnings
                .iter()
                .map(|w| format!("warning: {name}: {w}")),
        );
        let written = std::fs::metadata(path).and_then(|m| m.modified());
        self.valid.push(Valid {
            checked: Checked {
                path: path.to_owned(),
                name,
                workspace: ds.workspace_id.clone(),
                version: ds.version.clone(),
                records: ds.counts.total() as u64,
                key_hashes: ds.key_hashes.clone(),
                limits: ds.limits,
            },
            written: written.unwrap_or(SystemTime::UNIX_EPOCH),
            lines,
        });
    }

    /// Decides conflicts between the files that loaded, prints what each
    /// gave, and returns them if nothing was rejected.
    fn finish(self, out: &mut impl Write, err: &mut impl Write) -> Option<Vec<Checked>> {
        let claims: Vec<Claim> = self
            .valid
            .iter()
            .map(|v| Claim {
                name: &v.checked.name,
                written: v.written,
                workspace: &v.checked.workspace,
                keys: &v.checked.key_hashes,
            })
            .collect();
        let verdicts = claims::resolve(&claims, &mut Holders::default());
        let mut ok = self.ok;
        for (valid, verdict) in self.valid.iter().zip(verdicts) {
            match verdict {
                Ok(()) => {
                    for line in &valid.lines {
                        let _ = writeln!(out, "{line}");
                    }
                }
                Err(conflict) => {
                    ok = false;
                    let _ = writeln!(err, "error: {}: {conflict}", valid.checked.name);
                }
            }
        }
        ok.then(|| self.valid.into_iter().map(|v| v.checked).collect())
    }
}

/// A snapshot's own `limits`, as the end of its `ok:` line: what its
/// workspace is held to over the replica's flags, member by member.
fn limits_text(limits: &portfolio_domain::store::limits::WorkspaceLimits) -> String {
    let mut parts = Vec::new();
    if let Some(rate) = limits.rate_per_second {
        parts.push(format!("rate {rate}/s"));
    }
    if let Some(burst) = limits.burst {
        parts.push(format!("burst {burst}"));
    }
    if let Some(cap) = limits.max_in_flight {
        parts.push(format!("max in flight {cap}"));
    }
    match parts.is_empty() {
        true => "; its own limits: none set (the replica's flags hold)".to_owned(),
        false => format!("; its own limits: {}", parts.join(", ")),
    }
}
