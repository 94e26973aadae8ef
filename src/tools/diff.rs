//! `portfolio-replica diff OLD NEW`: what changed between two snapshots,
//! per collection: the records added, changed and removed (by id) and how
//! many are unchanged. Records are matched by id, and a record whose bytes
//! are the same in both is unchanged ([`portfolio_domain::snapshot::digests`](mod@portfolio_domain::snapshot::digests): 128
//! bits of SHA-256 of its bytes). `publish` prints the same summary against
//! the version that serves (`crate::tools::publish`, which also resolves `diff
//! --to`'s published versions and hands them here).
//!
//! Each file is first checked as `check` checks it, with its messages: a
//! diff of a file the server would refuse would only mislead.

use std::io::Write;
use std::path::Path;

use rustc_hash::FxHashMap;
use serde_json::{Value, json};

use crate::storage::SnapshotFile;
use crate::tools::check;
use portfolio_domain::snapshot::{self, Digests};
use portfolio_domain::store::Collection;
use portfolio_domain::store::id::format_id;

/// One side of a diff: what it is called, and its records.
pub struct Side {
    /// How the summary names it: a file name, or a published version.
    pub name: String,
    pub digests: Digests,
}

/// What changed in one collection. Ids are in file order: the new file's
/// for added and changed records, the old one's for removed ones.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Changed {
    pub added: Vec<u128>,
    pub changed: Vec<u128>,
    pub removed: Vec<u128>,
    pub unchanged: usize,
}

/// What changed in each collection, in [`Collection::ALL`] order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SnapshotChanges {
    pub collections: [Changed; Collection::COUNT],
}

impl SnapshotChanges {
    /// The four counts over every collection.
    pub fn total(&self) -> [usize; 4] {
        self.collections.iter().fold([0; 4], |sum, c| {
            let [a, b, r, u] = c.counts();
            [sum[0] + a, sum[1] + b, sum[2] + r, sum[3] + u]
        })
    }
}

impl Changed {
    /// Added, changed, removed, unchanged.
    pub fn counts(&self) -> [usize; 4] {
        [
            self.added.len(),
            self.changed.len(),
            self.removed.len(),
            self.unchanged,
        ]
    }
}

/// Compares two snapshots' records, collection by collection. Ids are
/// unique within a collection of a valid snapshot (a load refuses a
/// repeated one), so each record has at most one counterpart.
pub fn compare(old: &Digests, new: &Digests) -> SnapshotChanges {
    let mut changes = SnapshotChanges::default();
    for collection in Collection::ALL {
        let out = &mut changes.collections[collection.index()];
        let mut before: FxHashMap<u128, _> = old
            .of(collection)
            .iter()
            .map(|r| (r.id, r.digest))
            .collect();
        for record in new.of(collection) {
            match before.remove(&record.id) {
                None => out.added.push(record.id),
                Some(digest) if digest == record.digest => out.unchanged += 1,
                Some(_) => out.changed.push(record.id),
            }
        }
        // What is left was removed; listed in the old file's order.
        out.removed = old
            .of(collection)
            .iter()
            .filter(|r| before.contains_key(&r.id))
            .map(|r| r.id)
            .collect();
    }
    changes
}

/// The summary as text: a line naming both sides, then a row of counts per
/// collection and their total.
pub fn render(old: &Side, new: &Side, changes: &SnapshotChanges) -> String {
    let mut text = format!(
        "changes from {} to {}:\n  {:<16}{:>9}{:>9}{:>9}{:>11}\n",
        label(old),
        label(new),
        "collection",
        "added",
        "changed",
        "removed",
        "unchanged"
    );
    let rows = Collection::ALL
        .iter()
        .map(|c| (c.name(), changes.collections[c.index()].counts()))
        .chain([("total", changes.total())]);
    for (name, [added, changed, removed, unchanged]) in rows {
        text.push_str(&format!(
            "  {name:<16}{added:>9}{changed:>9}{removed:>9}{unchanged:>11}\n"
        ));
    }
    text
}

/// `workspace version (name)`; a side without records or workspace is the
/// nothing a first publish starts from.
fn label(side: &Side) -> String {
    if side.digests.workspace_id.is_empty() {
        return side.name.clone();
    }
    format!(
        "{} {} ({})",
        side.digests.workspace_id, side.digests.version, side.name
    )
}

/// The summary as JSON, with the ids of the records added, changed and
/// removed (docs/operations.md#diff).
pub fn to_json(old: &Side, new: &Side, changes: &SnapshotChanges) -> Value {
    let side = |s: &Side| {
        json!({
            "name": s.name,
            "workspace": s.digests.workspace_id,
            "version": s.digests.version,
            "records": s.digests.total(),
        })
    };
    let ids = |ids: &[u128]| ids.iter().map(|&id| format_id(id)).collect::<Vec<_>>();
    let counts = |[added, changed, removed, unchanged]: [usize; 4]| json!({"added": added, "changed": changed, "removed": removed, "unchanged": unchanged});
    let collections: serde_json::Map<String, Value> = Collection::ALL
        .iter()
        .map(|c| {
            let changed = &changes.collections[c.index()];
            let mut entry = counts(changed.counts());
            entry["ids"] = json!({
                "added": ids(&changed.added),
                "changed": ids(&changed.changed),
                "removed": ids(&changed.removed),
            });
            (c.name().to_owned(), entry)
        })
        .collect();
    json!({
        "old": side(old),
        "new": side(new),
        "collections": collections,
        "total": counts(changes.total()),
    })
}

/// Prints the comparison of `old` and `new`, as text or JSON.
pub fn print(old: &Side, new: &Side, json: bool, out: &mut impl Write) {
    let changes = compare(&old.digests, &new.digests);
    if json {
        let mut text = serde_json::to_vec_pretty(&to_json(old, new, &changes)).unwrap_or_default();
        text.push(b'\n');
        let _ = out.write_all(&text);
    } else {
        let _ = write!(out, "{}", render(old, new, &changes));
    }
}

/// `portfolio-replica diff OLD NEW` on two files: each checked as `check`
/// checks it (its messages on `err`), then compared. Returns false if
/// either is rejected.
pub fn files(
    old: &Path,
    new: &Path,
    json: bool,
    out: &mut impl Write,
    err: &mut impl Write,
) -> bool {
    // Both read, so that a problem with each is said at once.
    let (old, new) = (read(old, err), read(new, err));
    let (Some(old), Some(new)) = (old, new) else {
        return false;
    };
    print(&old, &new, json, out);
    true
}

/// One file, checked and hashed record by record. The two passes run at
/// once: the check loads the file as `check` does (a large one on every
/// core), and the scan beside it holds only its window, so the peak memory
/// stays that of `check`.
fn read(path: &Path, err: &mut impl Write) -> Option<Side> {
    let name = path.display().to_string();
    if path.is_dir() {
        let _ = writeln!(
            err,
            "error: {name}: is a directory; diff compares two snapshot files"
        );
        return None;
    }
    let (checked, digests) = std::thread::scope(|scope| {
        let checking = scope.spawn(|| {
            let mut messages = Vec::new();
            // `check`'s lines for a good file (and its warnings) are not
            // the diff's.
            let ok = check::check(&[path.to_owned()], &mut std::io::sink(), &mut messages);
            (ok.is_some(), messages)
        });
        let digests = snapshot::digests(&name, &SnapshotFile::new(path));
        (checking.join(), digests)
    });
    let Ok((true, _)) = checked else {
        // `check`'s messages, exactly (none if it panicked: say so).
        let messages = checked.map_or_else(
            |_| format!("error: {name}: the check failed unexpectedly\n").into_bytes(),
            |(_, messages)| messages,
        );
        let _ = err.write_all(&messages);
        return None;
    };
    match digests {
        Ok(digests) => Some(Side { name, digests }),
        Err(e) => {
            let _ = writeln!(err, "error: {e}");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Digests of a snapshot with these companies (id text, name).
    fn digests(companies: &[(&str, &str)]) -> Digests {
        let records: Vec<String> = companies
            .iter()
            .map(|(id, name)| format!(r#"{{"id":"{id}","attributes":{{"name":"{name}"}}}}"#))
            .collect();
        let text = format!(
            r#"{{"format_version":1,"version":"v","workspace":{{"id":"ws"}},"companies":[{}]}}"#,
            records.join(",")
        );
        snapshot::digests("t.json", text.as_bytes()).unwrap()
    }

    const A: &str = "0190a3a4-1111-7abc-8def-00000000000a";
    const B: &str = "0190a3a4-1111-7abc-8def-00000000000b";
    const C: &str = "0190a3a4-1111-7abc-8def-00000000000c";
    const D: &str = "0190a3a4-1111-7abc-8def-00000000000d";

    fn id(text: &str) -> u128 {
        portfolio_domain::store::id::parse_id(text).unwrap()
    }

    #[test]
    fn records_are_added_changed_removed_or_unchanged_by_id_and_bytes() {
        let old = digests(&[(A, "a"), (B, "b"), (C, "c")]);
        let new = digests(&[(D, "d"), (C, "c"), (B, "β"), (A, "a")]);
        let changes = compare(&old, &new);
        let companies = &changes.collections[Collection::Companies.index()];
        assert_eq!(companies.added, vec![id(D)]);
        assert_eq!(companies.changed, vec![id(B)]);
        assert!(companies.removed.is_empty());
        assert_eq!(companies.unchanged, 2, "moved records are unchanged");
        let back = compare(&new, &old);
        assert_eq!(
            back.collections[Collection::Companies.index()].removed,
            vec![id(D)]
        );
        assert_eq!(changes.total(), [1, 1, 0, 2]);
        assert_eq!(compare(&Digests::default(), &old).total(), [3, 0, 0, 0]);
    }

    #[test]
    fn the_text_and_json_summaries_list_every_collection() {
        let old = Side {
            name: "old.json".into(),
            digests: digests(&[(A, "a"), (B, "b")]),
        };
        let new = Side {
            name: "new.json".into(),
            digests: digests(&[(A, "a2")]),
        };
        let changes = compare(&old.digests, &new.digests);
        let text = render(&old, &new, &changes);
        assert!(text.starts_with("changes from ws v (old.json) to ws v (new.json):\n"));
        assert_eq!(text.lines().count(), 2 + Collection::COUNT + 1);
        assert!(text.contains("\n  companies               0        1        1          0\n"));
        let json = to_json(&old, &new, &changes);
        assert_eq!(json["collections"]["companies"]["ids"]["removed"][0], B);
        assert_eq!(json["collections"]["companies"]["ids"]["changed"][0], A);
        assert_eq!(json["total"]["changed"], 1);
        assert_eq!(json["old"]["records"], 2);
    }
}
