//! Manifest mode on a replica: what it knows of the workspaces the manifest
//! serves, and how a poll brings that up to date.
//!
//! Format 2 (`manifest::Root`): the replica applies the root's journal of
//! changes since the revision it has followed, so a poll reads the root and
//! nothing else. It reads the workspace records instead (one LIST of
//! `workspaces/`, and a GET of each record whose ETag it has not read)
//! when it starts, when it has fallen further behind than the journal
//! reaches, and every [`RESYNC_EVERY`], which heals a publisher that died
//! between writing a record and announcing it. Format 1 is read whole, as
//! before.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt};

use super::download::read_small;
use crate::storage::error::{ErrorKind, StorageError};
use crate::storage::listing::{EntryStamp, Listing, ManifestFacts, ObjectVersion};
use crate::storage::signatures::{Envelope, Listed};
use portfolio_domain::store::time::Instant as At;
use portfolio_wire::manifest::{
    self, DeltaRef, MAX_RECORD_BYTES, RECORDS_DIR, Root, Version, WorkspaceRecord, v1,
};

/// How often a replica reads the records even when the journal says it is
/// up to date.
pub const RESYNC_EVERY: Duration = Duration::from_secs(300);

/// A root whose journal of changes starts after `revision`, the one
/// followed, while the records were not read: the changes in between are
/// lost to it. The next poll reads the records (`needs_records`).
#[derive(Debug, thiserror::Error)]
#[error(
    "manifest.json's changes no longer reach back to revision {revision}, and the workspace records were not read"
)]
pub struct JournalGap {
    pub revision: u64,
}

/// Like a broken manifest: nothing changes until it is followed again.
impl From<JournalGap> for StorageError {
    fn from(gap: JournalGap) -> StorageError {
        StorageError::new(ErrorKind::Manifest, gap.to_string())
    }
}

/// Records read at once when a replica reads them all.
const CONCURRENT_READS: usize = 32;

/// What a replica follows: each workspace and the object that serves it.
#[derive(Clone, Debug, Default)]
pub struct Followed {
    /// The manifest's format and the root revision applied.
    pub format: u32,
    pub revision: u64,
    pub entries: BTreeMap<String, Entry>,
    /// When the records were last read (format 2).
    pub records_read_at: Option<Instant>,
}

/// One workspace as followed.
#[derive(Clone, Debug)]
pub struct Entry {
    pub version: ObjectVersion,
    /// The revision of the workspace's record (format 2).
    pub workspace_revision: Option<u64>,
    /// The record's object name and ETag as last read, so that reading the
    /// records again downloads only those that changed.
    record: Option<(String, String)>,
    /// The version's delta from the one before it, its key from the root
    /// of the bucket.
    pub delta: Option<DeltaRef>,
    /// What the manifest records of the version, if it records its key
    /// hashes.
    pub facts: Option<ManifestFacts>,
    /// The snapshot's own version, its key hashes if recorded, and the
    /// publisher's signature of it as current, if it was signed.
    pub snapshot_version: String,
    pub key_hashes: Option<Vec<String>>,
    pub signature: Option<Envelope>,
}

/// Each workspace's entry by name: what reading the records gives, and
/// what [`Followed`] holds.
pub type WorkspaceEntries = BTreeMap<String, Entry>;

/// Records read before: by object name, the ETag, workspace and entry.
pub type Known = HashMap<String, (String, String, Entry)>;

/// What reading the records cost.
#[derive(Clone, Copy, Debug, Default)]
pub struct ReadCost {
    pub listed: usize,
    pub downloaded: usize,
    pub bytes: u64,
}

impl Followed {
    /// A format-1 manifest, read whole.
    pub fn from_v1(manifest: &v1::ManifestV1, prefix: &ObjectPath) -> Followed {
        let entries = manifest
            .workspaces
            .iter()
            .filter_map(|(name, history)| {
                let entry = Entry::of(prefix, history.current_version()?, None, None);
                Some((name.clone(), entry))
            })
            .collect();
        Followed {
            format: v1::FORMAT,
            revision: manifest.revision,
            entries,
            records_read_at: None,
        }
    }

    /// Whether bringing this up to `root` (or, with `None`, keeping it up
    /// to date while the root is unchanged) needs the records read.
    pub fn needs_records(followed: Option<&Followed>, root: Option<&Root>) -> bool {
        let Some(followed) = followed.filter(|f| f.format == manifest::MANIFEST_VERSION) else {
            return root.is_some();
        };
        let overdue = followed
            .records_read_at
            .is_none_or(|at| at.elapsed() >= RESYNC_EVERY);
        overdue || root.is_some_and(|root| root.since(followed.revision).is_none())
    }

    /// The records read before, by object name, for [`read_records`] to
    /// skip those whose ETag has not changed.
    pub fn known(&self) -> Known {
        self.entries
            .iter()
            .filter_map(|(name, e)| {
                let (path, etag) = e.record.clone()?;
                Some((path, (etag, name.clone(), e.clone())))
            })
            .collect()
    }

    /// Brings this up to `root`: the records just read if any (they replace
    /// what was followed), then the root's changes that are newer than what
    /// it holds. An error if the journal does not reach back far enough and
    /// no records were read.
    pub fn advance(
        mut self,
        root: &Root,
        records: Option<WorkspaceEntries>,
        prefix: &ObjectPath,
    ) -> Result<Followed, JournalGap> {
        let read_now = records.is_some();
        if let Some(records) = records {
            self.entries = records;
            self.records_read_at = Some(Instant::now());
        }
        let since = match root.since(self.revision) {
            Some(since) if read_now || self.format == manifest::MANIFEST_VERSION => since,
            // Records just read hold every change the journal dropped.
            None if read_now => &root.changes,
            _ => {
                return Err(JournalGap {
                    revision: self.revision,
                });
            }
        };
        self.format = manifest::MANIFEST_VERSION;
        for change in since {
            let newer = self
                .entries
                .get(&change.workspace)
                .and_then(|e| e.workspace_revision)
                .is_none_or(|had| change.workspace_revision > had);
            if newer {
                let record = self
                    .entries
                    .get(&change.workspace)
                    .and_then(|e| e.record.clone());
                let entry = Entry::of(
                    prefix,
                    &change.current,
                    Some(change.workspace_revision),
                    record,
                );
                self.entries.insert(change.workspace.clone(), entry);
            }
        }
        self.revision = root.revision;
        Ok(self)
    }

    /// The listing the scan reads: one entry per workspace.
    pub fn listing(&self) -> Listing {
        Listing {
            entries: self
                .entries
                .iter()
                .map(|(name, e)| (name.clone(), Ok(EntryStamp::Object(e.version.clone()))))
                .collect(),
            ignored: 0,
            names_are_workspaces: true,
            fresh: true,
            facts: self
                .entries
                .iter()
                .filter_map(|(name, e)| Some((name.clone(), e.facts.clone()?)))
                .collect(),
            recalled: BTreeMap::new(),
            read_again: Vec::new(),
            signed: self
                .entries
                .iter()
                .map(|(name, e)| (name.clone(), e.listed(name)))
                .collect(),
        }
    }

    /// The revisions `/snapshots` gives an entry that serves `version` of
    /// `name`: the root's, and the workspace record's.
    pub fn revisions(&self, name: &str, version: &ObjectVersion) -> Option<(u64, Option<u64>)> {
        let entry = self.entries.get(name).filter(|e| e.version == *version)?;
        Some((self.revision, entry.workspace_revision))
    }

    /// The delta that makes `version` of `name`, if the manifest names one.
    pub fn delta(&self, name: &str, version: &ObjectVersion) -> Option<DeltaRef> {
        let entry = self.entries.get(name).filter(|e| e.version == *version)?;
        entry.delta.clone()
    }
}

impl Entry {
    /// What the manifest says of this version, for its verdict.
    fn listed(&self, workspace: &str) -> Listed {
        Listed {
            envelope: self.signature.clone(),
            workspace: workspace.to_owned(),
            version: self.snapshot_version.clone(),
            sha256: self.version.tag.clone(),
            key_hashes: self.key_hashes.clone(),
            revision: self.workspace_revision,
        }
    }

    fn of(
        prefix: &ObjectPath,
        current: &Version,
        workspace_revision: Option<u64>,
        record: Option<(String, String)>,
    ) -> Entry {
        // Keys in the manifest are relative to the prefix.
        let under = |key: &str| {
            if prefix.is_root() {
                key.to_owned()
            } else {
                format!("{prefix}/{key}")
            }
        };
        let key = under(&current.key);
        let delta = current.delta.as_ref().map(|d| DeltaRef {
            key: under(&d.key),
            ..d.clone()
        });
        Entry {
            version: ObjectVersion {
                key,
                tag: current.sha256.clone(),
                size: current.size,
                written: At::parse_rfc3339(&current.published_at).map(At::to_system_time),
            },
            workspace_revision,
            record,
            delta,
            facts: current.key_hashes.as_ref().map(|keys| ManifestFacts {
                version: current.version.clone(),
                key_hashes: keys.clone(),
                limits: current.limits,
            }),
            snapshot_version: current.version.clone(),
            key_hashes: current.key_hashes.clone(),
            signature: current.signature.clone(),
        }
    }
}

/// Every workspace record under `prefix`: one LIST, and a GET of each
/// record whose ETag is not among `known`. A record that cannot be read as
/// one is an error that names it: nothing changes until it is fixed.
pub async fn read_records(
    store: &dyn ObjectStore,
    prefix: &ObjectPath,
    known: Known,
    timeout: Duration,
    error: &(dyn Fn(&object_store::Error, String) -> StorageError + Sync),
) -> Result<(WorkspaceEntries, ReadCost), StorageError> {
    let dir: ObjectPath = prefix.parts().chain([RECORDS_DIR.into()]).collect();
    // Each request must answer within `timeout`, not the whole reading:
    // ten thousand records take longer than one request may.
    let stalled = || {
        StorageError::new(
            ErrorKind::Timeout,
            format!("no answer from {dir} within {timeout:?}"),
        )
    };
    let mut listing = store.list(Some(&dir));
    let mut listed = Vec::new();
    while let Some(meta) = tokio::time::timeout(timeout, listing.next())
        .await
        .map_err(|_| stalled())?
    {
        listed.push(meta.map_err(|e| error(&e, format!("cannot list {dir}: {e}")))?);
    }
    let mut cost = ReadCost {
        listed: listed.len(),
        ..ReadCost::default()
    };
    let mut records = WorkspaceEntries::new();
    let mut to_read = Vec::new();
    for meta in listed {
        let path = meta.location.to_string();
        if !path.ends_with(".json") {
            continue;
        }
        let etag = meta.e_tag.clone().unwrap_or_default();
        match known.get(&path) {
            Some((had, name, entry)) if !etag.is_empty() && *had == etag => {
                records.insert(name.clone(), entry.clone());
            }
            _ => to_read.push(meta.location),
        }
    }
    cost.downloaded = to_read.len();
    let mut reads = futures_util::stream::iter(to_read)
        .map(|path| read_record(store, path, error))
        .buffer_unordered(CONCURRENT_READS);
    while let Some(read) = tokio::time::timeout(timeout, reads.next())
        .await
        .map_err(|_| stalled())?
    {
        if let Some((record, path, etag, bytes)) = read? {
            cost.bytes += bytes;
            let current = record.history.current_version().cloned();
            let Some(current) = current else { continue };
            let entry = Entry::of(prefix, &current, Some(record.revision), Some((path, etag)));
            records.insert(record.workspace, entry);
        }
    }
    Ok((records, cost))
}

/// One record, or `None` if it was deleted since the listing.
async fn read_record(
    store: &dyn ObjectStore,
    path: ObjectPath,
    error: &(dyn Fn(&object_store::Error, String) -> StorageError + Sync),
) -> Result<Option<(WorkspaceRecord, String, String, u64)>, StorageError> {
    let result = match store.get(&path).await {
        Ok(result) => result,
        Err(object_store::Error::NotFound { .. }) => return Ok(None),
        Err(e) => return Err(error(&e, format!("cannot read {path}: {e}"))),
    };
    let (bytes, etag) = read_small(result, &path, MAX_RECORD_BYTES, "a workspace record").await?;
    let etag = etag.unwrap_or_default();
    let what = path.to_string();
    let record = WorkspaceRecord::parse(&bytes, &what)?;
    Ok(Some((record, what, etag, bytes.len() as u64)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn version(n: u8) -> Version {
        Version::for_tests(n, "ws", &format!("v{n}"))
    }

    fn root_with(changes: &[(u64, u8)]) -> Root {
        let mut root = Root::empty();
        for (workspace_revision, n) in changes {
            root.announce(
                &[("ws".into(), *workspace_revision, version(*n))],
                "now".into(),
            );
        }
        root
    }

    #[test]
    fn applies_the_journal_and_refuses_to_skip_what_it_dropped() {
        let prefix = ObjectPath::from("p");
        let followed = Followed {
            format: manifest::MANIFEST_VERSION,
            ..Followed::default()
        };
        let root = root_with(&[(1, 1), (2, 2)]);
        let followed = followed.advance(&root, None, &prefix).unwrap();
        assert_eq!(followed.revision, 2);
        assert_eq!(followed.entries["ws"].version.tag, version(2).sha256);
        assert_eq!(
            followed.entries["ws"].version.key,
            format!("p/{}", version(2).key)
        );

        // A late announcement of an older record revision changes nothing.
        let mut root = root.clone();
        root.announce(&[("ws".into(), 1, version(1))], "now".into());
        let followed = followed.advance(&root, None, &prefix).unwrap();
        assert_eq!(followed.entries["ws"].version.tag, version(2).sha256);

        // Behind what the journal keeps: only records read will do.
        let mut restarted = root.clone();
        restarted.restart("now".into());
        let err = followed
            .clone()
            .advance(&restarted, None, &prefix)
            .unwrap_err();
        assert_eq!(err.revision, 3);
        assert_eq!(
            err.to_string(),
            "manifest.json's changes no longer reach back to revision 3, and the workspace records were not read"
        );
        let read = followed.entries.clone();
        let caught_up = followed.advance(&restarted, Some(read), &prefix).unwrap();
        assert_eq!(caught_up.revision, restarted.revision);
        assert!(!Followed::needs_records(Some(&caught_up), Some(&restarted)));
    }
}
