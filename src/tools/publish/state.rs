//! The manifest's format 2 as publishers write it (`storage::manifest`):
//! each workspace's record, the key claims, and the root's journal; and
//! `migrate`, which turns a format-1 manifest into them. Every write is
//! conditional ([`Conditional`]), and publishers of different workspaces
//! share only the root, which stays small.

use std::time::{Duration, SystemTime};

use futures_util::{StreamExt, TryStreamExt};
use object_store::ObjectStoreExt;
use object_store::path::Path as ObjectPath;

use super::error::PublishError;
use super::update::{Conditional, Put, Updated, retry_delay};
use crate::tools::sign::Signer;
use portfolio_domain::store::claims::Conflict;
use portfolio_domain::store::time::utc_now;
use portfolio_wire::manifest::{
    self, KeyClaim, MANIFEST_NAME, Manifest, RECORDS_DIR, Root, Version, WorkspaceRecord,
    claim_path, record_path, short, v1,
};

/// A claim this young whose version is not yet in its holder's record
/// belongs to a publish still under way: it is not taken over.
const IN_FLIGHT: Duration = Duration::from_secs(300);

/// Attempts at one claim that keeps changing.
const CLAIM_ATTEMPTS: u32 = 30;

/// Records read at once by `versions`, `migrate` and `publish
/// --refresh-signatures`.
const CONCURRENT: usize = 32;

/// The keys of the deltas `record`'s versions name.
fn delta_keys(record: &WorkspaceRecord) -> Vec<String> {
    record
        .history
        .versions
        .iter()
        .filter_map(|v| Some(v.delta.as_ref()?.key.clone()))
        .collect()
}

/// The fleet's objects in storage: the root (`manifest.json`), the
/// workspace records and the key claims, read and written conditionally.
pub struct FleetObjects<'a> {
    pub objects: Conditional<'a>,
}

/// A change to announce: the workspace, its record's revision, the version
/// that serves now.
pub type Announced = (String, u64, Version);

impl FleetObjects<'_> {
    fn root_path(&self) -> ObjectPath {
        self.objects.path(MANIFEST_NAME)
    }

    /// `manifest.json` in either format, or `None` if there is none.
    pub async fn manifest(&self) -> Result<Option<Manifest>, PublishError> {
        let Some(read) = self.objects.read(&self.root_path()).await? else {
            return Ok(None);
        };
        // A broken manifest is not overwritten: its history would be lost.
        Manifest::parse(&read.bytes)
            .map(Some)
            .map_err(PublishError::BrokenManifest)
    }

    /// Refuses to publish over a format-1 manifest or a broken one.
    pub async fn writable(&self) -> Result<(), PublishError> {
        match self.manifest().await? {
            Some(Manifest::V1(_)) => Err(PublishError::Format1),
            _ => Ok(()),
        }
    }

    /// `workspace`'s record, if it has one.
    pub async fn record(&self, workspace: &str) -> Result<Option<WorkspaceRecord>, PublishError> {
        let path = record_path(self.objects.prefix, workspace);
        match self.objects.read(&path).await? {
            Some(read) => Ok(Some(WorkspaceRecord::parse(&read.bytes, path.as_ref())?)),
            None => Ok(None),
        }
    }

    /// The records of `only`, or of every workspace if `only` is empty.
    pub async fn records(&self, only: &[String]) -> Result<Vec<WorkspaceRecord>, PublishError> {
        let paths: Vec<ObjectPath> = if only.is_empty() {
            let dir: ObjectPath = self
                .objects
                .prefix
                .parts()
                .chain([RECORDS_DIR.into()])
                .collect();
            let listed: Vec<_> = self
                .objects
                .store
                .list(Some(&dir))
                .try_collect()
                .await
                .map_err(|source| PublishError::List {
                    dir: dir.clone(),
                    source,
                })?;
            listed
                .into_iter()
                .map(|m| m.location)
                .filter(|p| p.as_ref().ends_with(".json"))
                .collect()
        } else {
            only.iter()
                .map(|w| record_path(self.objects.prefix, w))
                .collect()
        };
        let reads = futures_util::stream::iter(paths)
            .map(|path| async move {
                let read = self.objects.read(&path).await?;
                let record = read.map(|r| WorkspaceRecord::parse(&r.bytes, path.as_ref()));
                Ok::<_, PublishError>(record.transpose()?)
            })
            .buffered(CONCURRENT);
        let mut records: Vec<WorkspaceRecord> = reads
            .try_filter_map(|r| async { Ok(r) })
            .try_collect()
            .await?;
        records.sort_by(|a, b| a.workspace.cmp(&b.workspace));
        Ok(records)
    }

    /// Makes `version` current in `workspace`'s record, keeping `keep`
    /// versions: the record and whether it changed. With a `signer`, the
    /// version is signed as current at the revision written: only known
    /// here, in the attempt that writes.
    pub async fn publish(
        &self,
        workspace: &str,
        version: &Version,
        keep: usize,
        signer: Option<&Signer>,
    ) -> Result<(Updated<WorkspaceRecord>, Vec<String>), PublishError> {
        let path = record_path(self.objects.prefix, workspace);
        // The deltas of the versions this write drops or replaces, as of
        // the attempt that wrote.
        let mut dropped = Vec::new();
        let updated = self
            .objects
            .update(&path, &mut |now| {
                dropped.clear();
                let Some(bytes) = now else {
                    let mut record = WorkspaceRecord {
                        workspace: workspace.to_owned(),
                        revision: 1,
                        updated_at: utc_now(),
                        history: manifest::History::first(Version {
                            delta: None,
                            ..version.clone()
                        }),
                    };
                    if let Some(signer) = signer {
                        signer.sign_current(&mut record, SystemTime::now())?;
                    }
                    return Ok((Some(record.to_json()), record));
                };
                let mut record = WorkspaceRecord::parse(bytes, path.as_ref())?;
                let before = delta_keys(&record);
                if !record.history.publish(version.clone(), keep) {
                    return Ok((None, record));
                }
                let after = delta_keys(&record);
                dropped.extend(before.into_iter().filter(|key| !after.contains(key)));
                record.revision += 1;
                record.updated_at = utc_now();
                if let Some(signer) = signer {
                    signer.sign_current(&mut record, SystemTime::now())?;
                }
                Ok((Some(record.to_json()), record))
            })
            .await?;
        Ok((updated, dropped))
    }

    /// Writes `record` (read by the caller, changed) if it is still at the
    /// revision below its own: false if another writer got there first.
    pub async fn replace(&self, record: &WorkspaceRecord) -> Result<bool, PublishError> {
        let path = record_path(self.objects.prefix, &record.workspace);
        let Some(read) = self.objects.read(&path).await? else {
            return Ok(false);
        };
        let now = WorkspaceRecord::parse(&read.bytes, path.as_ref())?;
        if now.revision + 1 != record.revision {
            return Ok(false);
        }
        let put = self
            .objects
            .put(&path, record.to_json(), Some(read.version))
            .await?;
        Ok(matches!(put, Put::Written))
    }

    /// Announces `changes` in the root's journal: the new revision.
    pub async fn announce(&self, changes: &[Announced]) -> Result<Updated<u64>, PublishError> {
        self.objects
            .update(&self.root_path(), &mut |now| {
                let mut root = match now.map(Manifest::parse).transpose()? {
                    None => Root::empty(),
                    Some(Manifest::V2(root)) => root,
                    Some(Manifest::V1(_)) => return Err(PublishError::Format1),
                };
                root.announce(changes, utc_now());
                Ok((Some(root.to_json()), root.revision))
            })
            .await
    }

    /// Claims each of `keys` (SHA-256, hex) for `workspace`'s `version`,
    /// refusing one that another workspace's current version holds, as the
    /// conflict rule would (`store::claims`: the version published first
    /// keeps it). `name` is what the message calls the claimant. Returns the
    /// claims it created, for [`FleetObjects::release`] if the publish fails.
    pub async fn claim(
        &self,
        workspace: &str,
        version: &Version,
        name: &str,
    ) -> Result<Vec<ObjectPath>, PublishError> {
        let mut created = Vec::new();
        for key in version.key_hashes.iter().flatten() {
            match self.claim_one(workspace, &version.sha256, key, name).await {
                Ok(true) => created.push(claim_path(self.objects.prefix, key)),
                Ok(false) => {}
                Err(e) => {
                    self.release(&created).await;
                    return Err(e);
                }
            }
        }
        Ok(created)
    }

    /// Takes back the claims a failed publish created.
    pub async fn release(&self, created: &[ObjectPath]) {
        for path in created {
            let _ = self.objects.store.delete(path).await;
        }
    }

    /// One claim: true if it created it.
    async fn claim_one(
        &self,
        workspace: &str,
        sha256: &str,
        key: &str,
        name: &str,
    ) -> Result<bool, PublishError> {
        let path = claim_path(self.objects.prefix, key);
        let mine = KeyClaim {
            workspace: workspace.to_owned(),
            sha256: sha256.to_owned(),
        };
        for attempt in 0..CLAIM_ATTEMPTS {
            let read = self.objects.read(&path).await?;
            let expected = match read {
                None => None,
                Some(read) => {
                    let claim: KeyClaim =
                        serde_json::from_slice(&read.bytes).map_err(|source| {
                            PublishError::NotAClaim {
                                path: path.clone(),
                                source,
                            }
                        })?;
                    if claim == mine {
                        return Ok(false);
                    }
                    if claim.workspace != workspace {
                        self.still_held(&claim, key, read.age, name).await?;
                    }
                    Some(read.version)
                }
            };
            let created = expected.is_none();
            let bytes = serde_json::to_vec(&mine).unwrap_or_default();
            match self.objects.put(&path, bytes, expected).await? {
                Put::Written => return Ok(created),
                Put::Lost => tokio::time::sleep(retry_delay(attempt.min(4))).await,
            }
        }
        Err(PublishError::ClaimKeepsChanging { path })
    }

    /// An error if `claim` (on `key`, of another workspace) still holds:
    /// its holder's current version has the key, or its publish is still
    /// under way.
    async fn still_held(
        &self,
        claim: &KeyClaim,
        key: &str,
        age: Duration,
        name: &str,
    ) -> Result<(), PublishError> {
        let record = self.record(&claim.workspace).await?;
        let current = record.as_ref().and_then(|r| r.history.current_version());
        if let Some(current) = current {
            let holds = current.sha256 == claim.sha256
                || current
                    .key_hashes
                    .as_ref()
                    .is_some_and(|keys| keys.iter().any(|k| k == key));
            if holds {
                return Err(PublishError::KeyHeld(Conflict::Key {
                    name: name.to_owned(),
                    workspace: claim.workspace.clone(),
                    holder: format!(
                        "its published version {} ({})",
                        current.version,
                        short(&current.sha256)
                    ),
                }));
            }
        }
        let recorded = record
            .as_ref()
            .is_some_and(|r| r.history.versions.iter().any(|v| v.sha256 == claim.sha256));
        if !recorded && age < IN_FLIGHT {
            return Err(PublishError::ClaimInFlight {
                name: name.to_owned(),
                workspace: claim.workspace.clone(),
                age,
                wait: IN_FLIGHT.saturating_sub(age),
            });
        }
        Ok(())
    }

    /// `migrate`: writes a record and key claims for each workspace of a
    /// format-1 manifest, then replaces it with a format-2 root (only if it
    /// is still the manifest read, so a format-1 publisher that wrote
    /// meanwhile is not lost: run it again). Returns the workspaces moved.
    pub async fn migrate(&self) -> Result<usize, PublishError> {
        let path = self.root_path();
        let Some(read) = self.objects.read(&path).await? else {
            return Err(PublishError::NothingToMigrate { path });
        };
        let old = match Manifest::parse(&read.bytes)? {
            Manifest::V1(old) => old,
            Manifest::V2(_) => return Err(PublishError::AlreadyMigrated { path }),
        };
        let moves = futures_util::stream::iter(&old.workspaces)
            .map(|(name, history)| self.migrate_one(&old, name, history))
            .buffer_unordered(CONCURRENT);
        moves.try_collect::<Vec<()>>().await?;
        let mut root = Root::empty();
        root.revision = old.revision;
        root.restart(utc_now());
        match self
            .objects
            .put(&path, root.to_json(), Some(read.version))
            .await?
        {
            Put::Written => Ok(old.workspaces.len()),
            Put::Lost => Err(PublishError::ChangedDuringMigration { path }),
        }
    }

    async fn migrate_one(
        &self,
        old: &v1::ManifestV1,
        name: &str,
        history: &manifest::History,
    ) -> Result<(), PublishError> {
        let record = WorkspaceRecord {
            workspace: name.to_owned(),
            revision: 1,
            updated_at: old.updated_at.clone(),
            history: history.clone(),
        };
        let path = record_path(self.objects.prefix, name);
        // A record written by an earlier, interrupted migration is kept.
        self.objects.put(&path, record.to_json(), None).await?;
        if let Some(current) = history.current_version() {
            for key in current.key_hashes.iter().flatten() {
                let claim = KeyClaim {
                    workspace: name.to_owned(),
                    sha256: current.sha256.clone(),
                };
                let bytes = serde_json::to_vec(&claim).unwrap_or_default();
                let path = claim_path(self.objects.prefix, key);
                self.objects.put(&path, bytes, None).await?;
            }
        }
        Ok(())
    }
}
