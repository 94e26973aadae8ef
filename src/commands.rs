//! The one-shot subcommands: `check`, `hash-key` and `probe`.

use std::collections::{HashMap, HashSet};
use std::io::{BufRead, Read, Write};
use std::path::{Path, PathBuf};

use crate::http_client::{self, HttpUrl};
use crate::loader::read::{SnapshotFile, is_snapshot_name};
use crate::snapshot::{self, SnapshotError};
use crate::store::key::{self, KeyHash};

/// What the server reads of a directory, for the messages about names.
const SNAPSHOT_NAMES: &str = "only *.json and *.json.gz that do not start with '.'";

/// Validates snapshot files as the server would, and prints one line per
/// file to `out` (valid, with its warnings) or `err` (rejected). A directory
/// stands for the files the server would read in it, by name. The files are
/// checked together: two naming one workspace, or sharing a key hash, are a
/// conflict as in the server, and the later one is rejected. Returns whether
/// nothing was rejected.
pub fn check(paths: &[PathBuf], out: &mut impl Write, err: &mut impl Write) -> bool {
    let mut checker = Checker::default();
    for path in paths {
        if path.is_dir() {
            checker.dir(path, out, err);
        } else {
            checker.file(path, true, out, err);
        }
    }
    checker.ok
}

/// The files checked so far, and what they claimed.
struct Checker {
    ok: bool,
    /// Workspace id → the file that names it.
    workspaces: HashMap<String, String>,
    /// Key hash → (workspace, file).
    keys: HashMap<KeyHash, (String, String)>,
    /// Files already checked (a directory and one of its files both given).
    seen: HashSet<PathBuf>,
}

impl Default for Checker {
    fn default() -> Checker {
        Checker {
            ok: true,
            workspaces: HashMap::new(),
            keys: HashMap::new(),
            seen: HashSet::new(),
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
        let mut line = format!(
            "{shown}: {} snapshot name(s) to check; {} other name(s) ignored, as the server ignores them ({SNAPSHOT_NAMES})",
            snapshots.len(),
            ignored.len()
        );
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
            None => snapshot::load_from(&name, &SnapshotFile::new(path), &mut |_, _| {}),
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
        if let Some(owner) = self.workspaces.get(&ds.workspace_id) {
            self.ok = false;
            let _ = writeln!(
                err,
                "error: {name}: workspace {:?} is already named by {owner}; {name} names it too and is rejected",
                ds.workspace_id
            );
            return;
        }
        if let Some((workspace, owner)) = ds.key_hashes.iter().find_map(|h| self.keys.get(h)) {
            self.ok = false;
            let _ = writeln!(
                err,
                "error: {name}: an api_keys entry of {name} is already a key of workspace {workspace:?} \
                 in {owner}; one key must not open two workspaces, so {name} is rejected"
            );
            return;
        }
        self.workspaces
            .insert(ds.workspace_id.clone(), name.clone());
        for hash in &ds.key_hashes {
            self.keys
                .insert(*hash, (ds.workspace_id.clone(), name.clone()));
        }
        let _ = writeln!(
            out,
            "ok: {name}: workspace {}, version {}, {} records, {} warning(s)",
            ds.workspace_id,
            ds.version,
            ds.counts.total(),
            loaded.warnings.len()
        );
        for warning in &loaded.warnings {
            let _ = writeln!(out, "warning: {name}: {warning}");
        }
    }
}

/// The longest key `hash-key` reads from stdin: far more than any key, and
/// a bound when stdin is something else by mistake.
const MAX_KEY_BYTES: u64 = 64 * 1024;

/// Reads a key from `input`: one line when `one_line` (a terminal), else the
/// whole input. One trailing newline (`\n` or `\r\n`) is not part of it.
pub fn read_key(mut input: impl BufRead, one_line: bool) -> std::io::Result<String> {
    let mut key = String::new();
    let mut limited = (&mut input).take(MAX_KEY_BYTES + 1);
    if one_line {
        limited.read_line(&mut key)?;
    } else {
        limited.read_to_string(&mut key)?;
    }
    if key.len() as u64 > MAX_KEY_BYTES {
        return Err(std::io::Error::other(format!(
            "more than {MAX_KEY_BYTES} bytes; a key is one line"
        )));
    }
    if key.ends_with('\n') {
        key.pop();
        if key.ends_with('\r') {
            key.pop();
        }
    }
    Ok(key)
}

/// The hex SHA-256 of `key` for `api_keys[].sha256`, or why no request
/// could ever authenticate with it under `prefix`. The reason never quotes
/// the key.
pub fn hash_key(key: &str, prefix: &str) -> Result<String, String> {
    if key.is_empty() {
        return Err("no key given: pass it as the argument, or on stdin \
                    (no argument, or `-`) to keep it out of shell history"
            .to_owned());
    }
    if !key.bytes().all(|b| b == b'\t' || (0x20..0x7f).contains(&b)) {
        return Err(
            "the key holds characters other than printable ASCII (a line break, \
                    a control character or non-ASCII text); an Authorization header \
                    cannot carry them, so no request could present this key"
                .to_owned(),
        );
    }
    if key.trim() != key {
        return Err(
            "the key starts or ends with a space or tab; the server trims those \
                    from the Authorization header, so no request could present this key"
                .to_owned(),
        );
    }
    if key::secret(key, prefix).is_none() {
        let with_underscore = format!("{prefix}_");
        return Err(if key == with_underscore {
            format!(
                "the key has nothing after \"{with_underscore}\": a key is \
                 {prefix}_<secret> with a non-empty secret"
            )
        } else {
            format!(
                "the key does not start with \"{with_underscore}\": keys are \
                 <prefix>_<secret> and the prefix is \"{prefix}\" \
                 (--key-prefix or PORTFOLIO_KEY_PREFIX, as given to the server)"
            )
        });
    }
    Ok(key::to_hex(&key::hash_key(key)))
}

/// GETs `url` and returns its status line if it is 200, within `timeout`
/// from start to status line; otherwise why not, in one line. Name
/// resolution is left to the system (it is not bounded by `timeout`).
pub fn probe(url: &HttpUrl, timeout: std::time::Duration) -> Result<String, String> {
    let answer = http_client::get(url, timeout, http_client::Read::Head)
        .map_err(|e| format!("{url}: {e}"))?;
    if answer.status.as_u16() == 200 {
        Ok(answer.status_line)
    } else {
        Err(format!("{url} answered {}, not 200", answer.status_line))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_key_drops_one_trailing_newline() {
        for (input, one_line, want) in [
            ("cura_a\n", false, "cura_a"),
            ("cura_a\r\n", false, "cura_a"),
            ("cura_a", false, "cura_a"),
            ("cura_a\n\n", false, "cura_a\n"),
            ("cura_a\nrest", true, "cura_a"),
            ("", false, ""),
        ] {
            assert_eq!(
                read_key(input.as_bytes(), one_line).unwrap(),
                want,
                "{input:?}"
            );
        }
        let long = "x".repeat(MAX_KEY_BYTES as usize + 1);
        assert!(read_key(long.as_bytes(), false).is_err());
    }

    #[test]
    fn hash_key_refuses_keys_that_cannot_authenticate() {
        assert_eq!(
            hash_key("cura_abc", "cura").unwrap(),
            key::to_hex(&key::hash_key("cura_abc"))
        );
        assert!(hash_key("other_abc", "other").is_ok());
        for (bad, says) in [
            ("", "no key given"),
            ("cura_", "nothing after \"cura_\""),
            ("cura", "does not start with \"cura_\""),
            ("abc", "does not start with \"cura_\""),
            ("Cura_abc", "does not start with"),
            ("cura_abc\n", "printable ASCII"),
            ("cura_ünï", "printable ASCII"),
            (" cura_abc", "space or tab"),
            ("cura_abc ", "space or tab"),
        ] {
            let err = hash_key(bad, "cura").unwrap_err();
            assert!(err.contains(says), "{bad:?}: {err}");
            assert!(!err.contains("abc"), "{bad:?} quoted: {err}");
        }
    }
}
