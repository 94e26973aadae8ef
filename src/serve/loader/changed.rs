//! Step 2 of a scan, what changed: the entries that left the listing (they
//! are forgotten, unless a listed name may succeed them), the entries whose
//! content differs from what was last read (to fetch and load), and the
//! names that cannot be read at all (rejected here). Plain functions of the
//! files' state and the listing: no IO.

use std::collections::HashMap;
use std::sync::Arc;

use super::files::{FileEntry, Files, log_rejected};
use crate::storage::{EntryStamp, Listing};
use portfolio_domain::store::Dataset;

/// The entries that left the listing but may have a successor in it, by
/// name, with the workspace they serve ([`successors`]).
pub type Successors = HashMap<String, String>;

/// What the listing changed.
pub struct ListingChanges {
    /// Entries forgotten: gone, with no listed name that may succeed them.
    pub removed: Removed,
    /// Names listed that cannot be read (already rejected in their entry).
    pub unreadable: Vec<String>,
    /// Entries whose content changed since it was last read.
    pub to_read: Vec<(String, EntryStamp)>,
    /// Entries gone that serve on until their successor loads.
    pub successors: Successors,
}

impl ListingChanges {
    /// Nothing left, nothing new to read, no name newly unreadable: what
    /// serves stays as it is.
    pub fn is_idle(&self) -> bool {
        self.removed.names.is_empty()
            && self.unreadable.is_empty()
            && self.to_read.is_empty()
            && self.successors.is_empty()
    }
}

/// Entries forgotten, and the datasets they served.
#[derive(Default)]
pub struct Removed {
    pub names: Vec<String>,
    pub retired: Vec<Arc<Dataset>>,
}

/// Compares the listing with what was read before: forgets the entries
/// gone (but those that may have a successor), rejects the names that
/// cannot be read, and says what to read.
pub fn what_changed(files: &mut Files, present: &Listing) -> ListingChanges {
    let successors = successors(files, present);
    let removed = forget(files, |name| {
        present.contains(name) || successors.contains_key(name)
    });
    let (to_read, unreadable) = changed_files(files, present);
    ListingChanges {
        removed,
        unreadable,
        to_read,
        successors,
    }
}

/// The entries whose successor just loaded (one that serves a workspace
/// in `loaded`) leave now, so that they leave in the same swap as it
/// arrives; `successors` keeps those still awaited.
pub fn succeeded<'a>(
    files: &mut Files,
    loaded: impl IntoIterator<Item = &'a str>,
    successors: &mut Successors,
) -> Removed {
    let mut gone = Vec::new();
    for workspace in loaded {
        successors.retain(|old, successor| {
            let replaced = successor == workspace;
            if replaced {
                gone.push(old.clone());
            }
            !replaced
        });
    }
    forget(files, |name| !gone.iter().any(|old| old == name))
}

/// At the end of a scan, the entries whose successor did not load leave.
pub fn unsucceeded(files: &mut Files, successors: &Successors) -> Removed {
    forget(files, |name| !successors.contains_key(name))
}

/// Forgets the files that are gone (`present` says which are not). Files
/// rejected for a conflict are read again, since the file they conflicted
/// with may be the one gone.
fn forget(files: &mut Files, present: impl Fn(&str) -> bool) -> Removed {
    let gone: Vec<String> = files
        .keys()
        .filter(|name| !present(name))
        .cloned()
        .collect();
    let mut removed = Removed::default();
    for name in gone {
        let served = files.remove(&name).and_then(FileEntry::into_dataset);
        match served {
            Some(dataset) => {
                tracing::info!(
                    file = %name,
                    workspace = %dataset.workspace_id,
                    version = %dataset.version,
                    "snapshot file removed; its workspace is unloaded"
                );
                removed.retired.push(dataset);
            }
            None => tracing::info!(
                file = %name,
                "snapshot file removed; it served no workspace, so nothing is unloaded"
            ),
        }
        removed.names.push(name);
    }
    if !removed.names.is_empty() {
        for entry in files.values_mut().filter(|e| e.conflict()) {
            entry.read_again();
        }
    }
    removed
}

/// The files whose content changed since they were last read (or that
/// their source asks to read again), and the
/// names that look like a snapshot but cannot be read (a dangling symlink,
/// a directory, no permission): those are rejected here, once, and the
/// previous version, if any, keeps serving.
fn changed_files(files: &mut Files, present: &Listing) -> (Vec<(String, EntryStamp)>, Vec<String>) {
    let mut to_read = Vec::new();
    let mut unreadable = Vec::new();
    for (name, fingerprint) in &present.entries {
        match fingerprint {
            Ok(fp)
                if files.get(name).is_none_or(|e| e.fingerprint() != Some(fp))
                    || present.read_again.contains(name) =>
            {
                to_read.push((name.clone(), fp.clone()));
            }
            Ok(_) => {}
            Err(reason) => {
                let entry = files
                    .entry(name.clone())
                    .or_insert_with(|| FileEntry::new(name));
                entry.read_again();
                let message = format!("{name}: cannot read the file: {reason}");
                if entry.status.error.as_deref() != Some(message.as_str()) {
                    log_rejected(name, entry, &message);
                    entry.status.fail(message);
                    unreadable.push(name.clone());
                }
            }
        }
    }
    (to_read, unreadable)
}

/// The entries that left the listing but may have a successor in it, by
/// name, with the workspace they serve. They keep serving until the
/// successor's new version is published, in the same swap, so a workspace
/// that moves from one name to another is never unloaded in between: in
/// manifest mode when a listed name is their workspace (a prefix switching
/// to a manifest), in a directory or prefix when a name appeared that has
/// never been read (`acme-1.json` renamed to `acme-2.json`). An entry whose
/// successor does not load leaves at the end of the scan.
fn successors(files: &Files, present: &Listing) -> Successors {
    let new_names = present.entries.keys().any(|name| !files.contains_key(name));
    files
        .iter()
        .filter(|(name, _)| !present.contains(name))
        .filter_map(|(name, entry)| {
            let workspace = &entry.dataset()?.workspace_id;
            let may_succeed = if present.names_are_workspaces {
                present.contains(workspace)
            } else {
                new_names
            };
            may_succeed.then(|| (name.clone(), workspace.clone()))
        })
        .collect()
}
