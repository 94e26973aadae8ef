//! The one-shot subcommands: `check` and `hash-key`.

use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;

use crate::loader::read::SnapshotFile;
use crate::snapshot;

/// Validates each file as the server would; prints one line per file to
/// `out` (valid) or `err` (rejected). Returns whether all were valid.
/// Two files naming the same workspace are a conflict, as in the server.
pub fn check(files: &[PathBuf], out: &mut impl Write, err: &mut impl Write) -> bool {
    let mut ok = true;
    let mut owners: HashMap<String, String> = HashMap::new();
    for path in files {
        let name = path.display().to_string();
        let result = snapshot::load_from(&name, &SnapshotFile::new(path), &mut |_, _| {});
        match result {
            Ok(loaded) => {
                let ds = &loaded.dataset;
                if let Some(owner) = owners.get(&ds.workspace_id) {
                    ok = false;
                    let _ = writeln!(
                        err,
                        "error: {name}: workspace {:?} is already named by {owner}; {name} names it too and is rejected",
                        ds.workspace_id
                    );
                    continue;
                }
                owners.insert(ds.workspace_id.clone(), name.clone());
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
            Err(e) => {
                ok = false;
                let _ = writeln!(err, "error: {e}");
            }
        }
    }
    ok
}
