//! Manifest format 2's shared state: `manifest.json` as a bounded journal
//! of the latest changes. Each workspace's versions live in an object of
//! their own (`super::WorkspaceRecord`); the root only says that they
//! changed, so a publish writes, and a replica's poll reads, an amount
//! that does not depend on the number of workspaces.

use serde::{Deserialize, Serialize};

use super::error::ManifestError;
use super::history::Version;

/// The format this module reads and writes.
pub const FORMAT: u32 = 2;

/// Changes the root keeps: a replica that polls at least once per this
/// many changes reads only the root; one further behind lists the
/// workspaces' records again.
pub const MAX_CHANGES: usize = 128;

/// The largest the root is written: older changes are dropped first, so
/// that long workspace ids cannot make it grow past this.
pub const MAX_ROOT_BYTES: usize = 48 << 10;

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Root {
    /// The format: [`MANIFEST_VERSION`](super::MANIFEST_VERSION), 2.
    pub manifest_version: u32,
    /// Counts the writes of the root: each publish or rollback adds 1.
    pub revision: u64,
    /// When it was last written (RFC 3339, UTC).
    pub updated_at: String,
    /// `changes` holds every change of a revision above this one: a replica
    /// that has followed up to here needs only them; one behind must read
    /// the records.
    pub complete_after: u64,
    /// The latest changes, oldest first.
    pub changes: Vec<WorkspaceChange>,
}

/// One workspace made to serve another version.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WorkspaceChange {
    /// The root's revision that announced it.
    pub revision: u64,
    pub workspace: String,
    /// The workspace record's revision that holds it: a replica applies a
    /// change only if it is newer than what it has, so two publishers that
    /// announce out of order cannot turn a workspace back.
    pub workspace_revision: u64,
    /// The version that serves now (without its key hashes).
    pub current: Version,
}

impl Root {
    /// The root a migration or the first publish writes.
    pub fn empty() -> Root {
        Root {
            manifest_version: FORMAT,
            ..Root::default()
        }
    }

    /// Reads a format-2 root, refusing one whose changes name keys outside
    /// the prefix or malformed digests.
    pub fn parse(bytes: &[u8]) -> Result<Root, ManifestError> {
        let root: Root = serde_json::from_slice(bytes).map_err(ManifestError::NotAManifest)?;
        for change in &root.changes {
            change.current.check("manifest.json", &change.workspace)?;
        }
        Ok(root)
    }

    /// Compact, unlike the records: every replica downloads it on every
    /// change, so its bytes are the fleet's polling cost.
    pub fn to_json(&self) -> Vec<u8> {
        let mut text = serde_json::to_vec(self).unwrap_or_default();
        text.push(b'\n');
        text
    }

    /// A new revision announcing `changes` (workspace, its record's
    /// revision, the version that serves), dropping the oldest changes past
    /// [`MAX_CHANGES`] or `MAX_ROOT_BYTES` (48 KiB).
    pub fn announce(&mut self, changes: &[(String, u64, Version)], now: String) {
        self.manifest_version = FORMAT;
        self.revision += 1;
        self.updated_at = now;
        for (workspace, workspace_revision, current) in changes {
            self.changes.push(WorkspaceChange {
                revision: self.revision,
                workspace: workspace.clone(),
                workspace_revision: *workspace_revision,
                current: Version {
                    key_hashes: None,
                    ..current.clone()
                },
            });
        }
        let mut drop = self.changes.len().saturating_sub(MAX_CHANGES);
        while drop < self.changes.len() && self.bytes_without(drop) > MAX_ROOT_BYTES {
            drop += 1;
        }
        for dropped in self.changes.drain(..drop) {
            self.complete_after = self.complete_after.max(dropped.revision);
        }
    }

    /// Starts the journal over at this revision: every replica reads the
    /// records again (a migration, or records repaired by hand).
    pub fn restart(&mut self, now: String) {
        self.announce(&[], now);
        self.changes.clear();
        self.complete_after = self.revision;
    }

    /// The changes after `revision`, or `None` if some of them are no
    /// longer kept (the reader must read the records).
    pub fn since(&self, revision: u64) -> Option<&[WorkspaceChange]> {
        if revision < self.complete_after {
            return None;
        }
        let first = self.changes.partition_point(|c| c.revision <= revision);
        Some(&self.changes[first..])
    }

    /// The size of the root with its first `drop` changes left out.
    fn bytes_without(&self, drop: usize) -> usize {
        let kept = Root {
            changes: self.changes[drop..].to_vec(),
            ..Root {
                manifest_version: self.manifest_version,
                revision: self.revision,
                updated_at: self.updated_at.clone(),
                complete_after: self.complete_after,
                changes: Vec::new(),
            }
        };
        kept.to_json().len()
    }
}

#[cfg(test)]
mod tests {
    use super::super::history::tests::version;
    use super::*;

    fn announce(root: &mut Root, workspace: &str, n: u8) {
        let mut v = version(n, &format!("v{n}"));
        v.key_hashes = Some(vec!["00".repeat(32)]);
        root.announce(&[(workspace.to_owned(), u64::from(n), v)], "now".into());
    }

    #[test]
    fn a_reader_gets_what_changed_since_its_revision_or_is_told_to_read_the_records() {
        let mut root = Root::empty();
        for n in 1..=3 {
            announce(&mut root, "ws", n);
        }
        assert_eq!(root.revision, 3);
        assert_eq!(root.since(0).unwrap().len(), 3);
        let since = root.since(1).unwrap();
        assert_eq!(since.len(), 2);
        assert_eq!(since[0].current.version, "v2");
        assert!(root.since(3).unwrap().is_empty());
        // Key hashes stay in the records; the journal is kept small.
        assert!(root.changes.iter().all(|c| c.current.key_hashes.is_none()));
        assert_eq!(Root::parse(&root.to_json()).unwrap(), root);

        for n in 4..=200u8 {
            announce(&mut root, "ws", n);
        }
        assert!(root.changes.len() <= MAX_CHANGES);
        assert!(root.to_json().len() <= MAX_ROOT_BYTES);
        // Whole revisions are dropped, oldest first, and said so.
        assert_eq!(root.complete_after, root.changes[0].revision - 1);
        assert!(root.changes.len() >= 100, "{} kept", root.changes.len());
        assert!(
            root.since(3).is_none(),
            "a reader that far behind must resync"
        );
        assert_eq!(root.since(199).unwrap().len(), 1);

        root.restart("later".into());
        assert_eq!((root.revision, root.complete_after), (201, 201));
        assert!(root.since(200).is_none());
        assert_eq!(root.since(201).map(<[WorkspaceChange]>::len), Some(0));
    }

    #[test]
    fn long_workspace_ids_cannot_grow_the_root_past_its_bound() {
        let mut root = Root::empty();
        for n in 0..MAX_CHANGES as u8 {
            let workspace = format!("{n}-{}", "w".repeat(2000));
            announce(&mut root, &workspace, n);
        }
        assert!(root.to_json().len() <= MAX_ROOT_BYTES);
        assert!(root.changes.len() < MAX_CHANGES);
        let first_kept = root.changes[0].revision;
        assert_eq!(root.complete_after, first_kept - 1);
    }

    #[test]
    fn parse_refuses_a_change_outside_the_prefix() {
        let mut root = Root::empty();
        announce(&mut root, "ws", 1);
        root.changes[0].current.key = "../elsewhere.json".into();
        assert!(Root::parse(&root.to_json()).is_err());
    }
}
