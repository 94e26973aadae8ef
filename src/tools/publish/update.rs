//! Conditional writes, so that publishers running at once never lose each
//! other's update: an object is read with its version and written only if
//! it is still that version (`PutMode::Update`, an `If-Match` write; a new
//! one with `PutMode::Create`, `If-None-Match: *`). A write that loses
//! reads again and applies its change to what won. The local filesystem
//! store has no conditional update: for a `file://` target, a writer takes
//! a lock object next to the object instead.

use std::time::Duration;

use bytes::Bytes;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload, UpdateVersion};

use super::error::PublishError;

/// Attempts before a publisher gives up on an object that keeps changing.
const ATTEMPTS: u32 = 30;

/// A lock older than this was left by a publisher that died: it is broken.
const STALE_LOCK: Duration = Duration::from_secs(60);

/// An object store prefix that publishers write to.
pub struct Conditional<'a> {
    pub store: &'a dyn ObjectStore,
    pub prefix: &'a ObjectPath,
    /// The store cannot update conditionally (the local filesystem).
    pub locking: bool,
}

/// An object as read: its bytes, the version a conditional write names,
/// and how long ago it was written.
pub struct StoredObject {
    pub bytes: Bytes,
    pub version: UpdateVersion,
    pub age: Duration,
}

/// What a write that may lose did.
pub enum Put {
    Written,
    /// Someone else wrote first: read again.
    Lost,
}

/// What [`Conditional::update`] asks of its caller: given the object's
/// bytes (`None`: no object yet), the bytes to write (`None`: leave it) and
/// the value to return.
pub type UpdateFn<'c, T> =
    dyn FnMut(Option<&[u8]>) -> Result<(Option<Vec<u8>>, T), PublishError> + Send + 'c;

/// What [`Conditional::update`] did.
pub struct Updated<T> {
    /// What the change made, as written (or found, if unchanged).
    pub value: T,
    /// False when the change found nothing to change.
    pub written: bool,
    /// Writes that found the object changed by someone else first.
    pub conflicts: u32,
}

impl Conditional<'_> {
    /// `name` under the prefix.
    pub fn path(&self, name: &str) -> ObjectPath {
        self.prefix.clone().join(name)
    }

    /// The object, or `None` if there is none.
    pub async fn read(&self, key: &ObjectPath) -> Result<Option<StoredObject>, PublishError> {
        let unreadable = |source| PublishError::Read {
            key: key.clone(),
            source,
        };
        let result = match self.store.get(key).await {
            Ok(result) => result,
            Err(object_store::Error::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(unreadable(e)),
        };
        let version = UpdateVersion {
            e_tag: result.meta.e_tag.clone(),
            version: result.meta.version.clone(),
        };
        let age = (chrono::Utc::now() - result.meta.last_modified)
            .to_std()
            .unwrap_or_default();
        let bytes = result.bytes().await.map_err(unreadable)?;
        Ok(Some(StoredObject {
            bytes,
            version,
            age,
        }))
    }

    /// Writes `bytes` if the object is still at `expected` (`None`: if it
    /// still does not exist).
    pub async fn put(
        &self,
        key: &ObjectPath,
        bytes: Vec<u8>,
        expected: Option<UpdateVersion>,
    ) -> Result<Put, PublishError> {
        if self.locking {
            return self.put_locked(key, bytes, expected).await;
        }
        let mode = match expected {
            Some(version) => PutMode::Update(version),
            None => PutMode::Create,
        };
        let options = PutOptions {
            mode,
            ..PutOptions::default()
        };
        match self
            .store
            .put_opts(key, PutPayload::from(bytes), options)
            .await
        {
            Ok(_) => Ok(Put::Written),
            Err(
                object_store::Error::Precondition { .. }
                | object_store::Error::AlreadyExists { .. },
            ) => Ok(Put::Lost),
            Err(source) => Err(PublishError::Write {
                key: key.clone(),
                source,
            }),
        }
    }

    /// Reads the object, applies `change` to it and writes the result,
    /// again on a newer one each time another writer wins. `change` gets
    /// the current bytes (`None`: no object yet) and returns what to
    /// write, or `None` to leave it as it is, with the value to return.
    pub async fn update<T>(
        &self,
        key: &ObjectPath,
        change: &mut UpdateFn<'_, T>,
    ) -> Result<Updated<T>, PublishError> {
        let mut conflicts = 0;
        for attempt in 0..ATTEMPTS {
            let read = self.read(key).await?;
            let (bytes, value) = change(read.as_ref().map(|r| r.bytes.as_ref()))?;
            let Some(bytes) = bytes else {
                return Ok(Updated {
                    value,
                    written: false,
                    conflicts,
                });
            };
            match self.put(key, bytes, read.map(|r| r.version)).await? {
                Put::Written => {
                    return Ok(Updated {
                        value,
                        written: true,
                        conflicts,
                    });
                }
                Put::Lost => {
                    conflicts += 1;
                    tokio::time::sleep(retry_delay(attempt)).await;
                }
            }
        }
        Err(PublishError::KeepsChanging {
            key: key.clone(),
            attempts: ATTEMPTS,
        })
    }

    /// [`Conditional::put`] under a lock object, for stores without
    /// conditional update: the version is compared while the lock is held.
    async fn put_locked(
        &self,
        key: &ObjectPath,
        bytes: Vec<u8>,
        expected: Option<UpdateVersion>,
    ) -> Result<Put, PublishError> {
        let lock = ObjectPath::from(format!("{key}.lock"));
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
                        return Err(PublishError::Locked { lock });
                    }
                    tokio::time::sleep(retry_delay(attempt.min(4))).await;
                }
                Err(source) => return Err(PublishError::Lock { lock, source }),
            }
        }
        let result = async {
            let now = match self.store.head(key).await {
                Ok(meta) => Some(meta.e_tag),
                Err(object_store::Error::NotFound { .. }) => None,
                Err(source) => {
                    return Err(PublishError::Read {
                        key: key.clone(),
                        source,
                    });
                }
            };
            if now != expected.map(|v| v.e_tag) {
                return Ok(Put::Lost);
            }
            self.store
                .put(key, PutPayload::from(bytes))
                .await
                .map_err(|source| PublishError::Write {
                    key: key.clone(),
                    source,
                })?;
            Ok(Put::Written)
        }
        .await;
        let _ = self.store.delete(&lock).await;
        result
    }
}

/// The wait before another attempt at a write that lost a race: the
/// storage layer's policy, kept with every other retry's
/// (`storage::backoff`).
pub use crate::storage::after_conflict as retry_delay;

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use object_store::memory::InMemory;

    use super::*;

    /// Many writers at once, each adding its own line to one object: every
    /// line is in it at the end.
    async fn no_update_is_lost(store: Arc<dyn ObjectStore>, locking: bool) {
        let prefix = ObjectPath::from("fleet");
        let mut tasks = Vec::new();
        for n in 0..16u32 {
            let store = Arc::clone(&store);
            let prefix = prefix.clone();
            tasks.push(tokio::spawn(async move {
                let target = Conditional {
                    store: store.as_ref(),
                    prefix: &prefix,
                    locking,
                };
                let key = target.path("shared");
                target
                    .update(&key, &mut |now| {
                        let mut text = now.map(<[u8]>::to_vec).unwrap_or_default();
                        text.extend_from_slice(format!("{n}\n").as_bytes());
                        Ok((Some(text), ()))
                    })
                    .await
                    .map(|u| u.written)
                    .map_err(|e| e.to_string())
            }));
        }
        for task in tasks {
            assert_eq!(task.await.unwrap(), Ok(true));
        }
        let target = Conditional {
            store: store.as_ref(),
            prefix: &prefix,
            locking,
        };
        let read = target.read(&target.path("shared")).await.unwrap().unwrap();
        let mut lines: Vec<u32> = std::str::from_utf8(&read.bytes)
            .unwrap()
            .lines()
            .map(|l| l.parse().unwrap())
            .collect();
        lines.sort_unstable();
        assert_eq!(lines, (0..16).collect::<Vec<_>>());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_conditional_updates_lose_nothing() {
        no_update_is_lost(Arc::new(InMemory::new()), false).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_locked_updates_lose_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let store = object_store::local::LocalFileSystem::new_with_prefix(dir.path()).unwrap();
        no_update_is_lost(Arc::new(store), true).await;
    }
}
