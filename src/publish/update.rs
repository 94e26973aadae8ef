//! Reading and writing the manifest so that two publishers at once never
//! lose an update: read it with its ETag, change it, and write it only if
//! it is still that version (`PutMode::Update`, an `If-Match` write; the
//! first one with `PutMode::Create`, `If-None-Match: *`). A write that finds
//! the manifest changed meanwhile reads it again and applies the change to
//! the new one. The local filesystem store has no conditional update: for a
//! `file://` target, writers take a lock object instead.

use std::time::Duration;

use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload, UpdateVersion};

use crate::storage::manifest::{MANIFEST_NAME, MANIFEST_VERSION, Manifest};

/// Attempts before a publisher gives up on a manifest that keeps changing.
const ATTEMPTS: u32 = 30;

/// A lock older than this was left by a publisher that died: it is broken.
const STALE_LOCK: Duration = Duration::from_secs(60);

/// Where the manifest is, and how writes to it are made safe.
pub struct ManifestStore<'a> {
    pub store: &'a dyn ObjectStore,
    pub prefix: &'a ObjectPath,
    /// The store cannot update conditionally (the local filesystem).
    pub locking: bool,
}

/// What an update did.
pub struct Updated {
    pub manifest: Manifest,
    /// False when the change found nothing to change.
    pub written: bool,
    /// Writes that found the manifest changed by someone else first.
    pub conflicts: u32,
}

impl ManifestStore<'_> {
    fn key(&self) -> ObjectPath {
        self.prefix.clone().join(MANIFEST_NAME)
    }

    /// The manifest and its version; an empty one if there is none yet.
    pub async fn read(&self) -> Result<(Manifest, Option<UpdateVersion>), String> {
        let key = self.key();
        let result = match self.store.get(&key).await {
            Ok(result) => result,
            Err(object_store::Error::NotFound { .. }) => return Ok((Manifest::empty(), None)),
            Err(e) => return Err(format!("cannot read {key}: {e}")),
        };
        let version = UpdateVersion {
            e_tag: result.meta.e_tag.clone(),
            version: result.meta.version.clone(),
        };
        let bytes = result
            .bytes()
            .await
            .map_err(|e| format!("cannot read {key}: {e}"))?;
        // A broken manifest is not overwritten: its history would be lost.
        let manifest = Manifest::parse(&bytes)
            .map_err(|e| format!("{e}; fix it (or delete it to start over) before publishing"))?;
        Ok((manifest, Some(version)))
    }

    /// Applies `change` to the current manifest and writes it, retrying on
    /// conflict. `change` returns whether it changed anything; it may run
    /// more than once, on newer manifests.
    pub async fn update(
        &self,
        change: &mut (dyn FnMut(&mut Manifest) -> Result<bool, String> + Send),
    ) -> Result<Updated, String> {
        if self.locking {
            return self.update_locked(change).await;
        }
        let key = self.key();
        let mut conflicts = 0;
        for attempt in 0..ATTEMPTS {
            let (mut manifest, version) = self.read().await?;
            if !change(&mut manifest)? {
                return Ok(Updated {
                    manifest,
                    written: false,
                    conflicts,
                });
            }
            stamp(&mut manifest);
            let mode = match version {
                Some(version) => PutMode::Update(version),
                None => PutMode::Create,
            };
            let options = PutOptions {
                mode,
                ..PutOptions::default()
            };
            match self
                .store
                .put_opts(&key, PutPayload::from(manifest.to_json()), options)
                .await
            {
                Ok(_) => {
                    return Ok(Updated {
                        manifest,
                        written: true,
                        conflicts,
                    });
                }
                Err(
                    object_store::Error::Precondition { .. }
                    | object_store::Error::AlreadyExists { .. },
                ) => {
                    conflicts += 1;
                    tokio::time::sleep(retry_delay(attempt)).await;
                }
                Err(e) => return Err(format!("cannot write {key}: {e}")),
            }
        }
        Err(format!(
            "{key} changed under every one of {ATTEMPTS} attempts to write it; try again"
        ))
    }

    /// The same under a lock object, for stores without conditional update.
    async fn update_locked(
        &self,
        change: &mut (dyn FnMut(&mut Manifest) -> Result<bool, String> + Send),
    ) -> Result<Updated, String> {
        let lock = self.prefix.clone().join(format!("{MANIFEST_NAME}.lock"));
        let mut conflicts = 0;
        let mut attempt = 0;
        loop {
            let options = PutOptions {
                mode: PutMode::Create,
                ..PutOptions::default()
            };
            match self
                .store
                .put_opts(&lock, PutPayload::from_static(b"locked\n"), options)
                .await
            {
                Ok(_) => break,
                Err(object_store::Error::AlreadyExists { .. }) => {
                    conflicts += 1;
                    if let Ok(meta) = self.store.head(&lock).await
                        && (chrono::Utc::now() - meta.last_modified)
                            .to_std()
                            .is_ok_and(|age| age > STALE_LOCK)
                    {
                        let _ = self.store.delete(&lock).await;
                        continue;
                    }
                    attempt += 1;
                    if attempt >= ATTEMPTS * 10 {
                        return Err(format!("{lock} is held by another publisher; try again"));
                    }
                    tokio::time::sleep(retry_delay(attempt.min(4))).await;
                }
                Err(e) => return Err(format!("cannot take {lock}: {e}")),
            }
        }
        let result: Result<(Manifest, bool), String> = async {
            let (mut manifest, _) = self.read().await?;
            if !change(&mut manifest)? {
                return Ok((manifest, false));
            }
            stamp(&mut manifest);
            self.store
                .put(&self.key(), PutPayload::from(manifest.to_json()))
                .await
                .map_err(|e| format!("cannot write {}: {e}", self.key()))?;
            Ok((manifest, true))
        }
        .await;
        let _ = self.store.delete(&lock).await;
        let (manifest, written) = result?;
        Ok(Updated {
            manifest,
            written,
            conflicts,
        })
    }
}

/// A new revision of the manifest, now.
fn stamp(manifest: &mut Manifest) {
    manifest.manifest_version = MANIFEST_VERSION;
    manifest.revision += 1;
    manifest.updated_at = crate::store::time::utc_now();
}

/// 50 ms doubling to 1.6 s, with up to 50% more at random, so that
/// publishers that collided do not collide again in step.
fn retry_delay(attempt: u32) -> Duration {
    let base = Duration::from_millis(50) * (1 << attempt.min(5));
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    base + base.mul_f64(f64::from(nanos % 1000) / 2000.0)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use object_store::memory::InMemory;

    use super::*;
    use crate::storage::manifest::Version;

    fn version(n: u32) -> Version {
        let sha256 = format!("{n:064x}");
        Version {
            key: format!("objects/ws/{sha256}.json.gz"),
            sha256,
            size: 1,
            version: format!("v{n}"),
            published_at: String::new(),
            file: "f.json".to_owned(),
            records: 0,
            key_hashes: None,
        }
    }

    /// Many publishers at once, each adding its own workspace: every one of
    /// them is in the final manifest, and each write made one revision.
    async fn no_update_is_lost(store: Arc<dyn ObjectStore>, locking: bool) {
        let prefix = ObjectPath::from("fleet");
        let mut tasks = Vec::new();
        for n in 0..16u32 {
            let store = Arc::clone(&store);
            let prefix = prefix.clone();
            tasks.push(tokio::spawn(async move {
                let target = ManifestStore {
                    store: store.as_ref(),
                    prefix: &prefix,
                    locking,
                };
                target
                    .update(&mut |m| Ok(m.publish(&format!("ws-{n}"), version(n), 10)))
                    .await
                    .map(|u| u.written)
            }));
        }
        for task in tasks {
            assert_eq!(task.await.unwrap(), Ok(true));
        }
        let target = ManifestStore {
            store: store.as_ref(),
            prefix: &prefix,
            locking,
        };
        let (manifest, _) = target.read().await.unwrap();
        assert_eq!(manifest.workspaces.len(), 16);
        assert_eq!(manifest.revision, 16);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_conditional_updates_lose_nothing() {
        no_update_is_lost(Arc::new(InMemory::new()), false).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_locked_updates_lose_nothing() {
        let dir = std::env::temp_dir().join(format!("locked-update-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let store = object_store::local::LocalFileSystem::new_with_prefix(&dir).unwrap();
        no_update_is_lost(Arc::new(store), true).await;
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
