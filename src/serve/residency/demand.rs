//! One load on demand (`mod.rs` decides when): the version a hollow
//! dataset names, built from where its bytes are kept, and warming
//! started (its gzip fragments follow in the background, as after a
//! reload). Anything but exactly that version is refused.
//!
//! Where the bytes are ([`KeptCopy`]): a file kept when the scan validated the
//! version (a directory's private copy, an object store's last good
//! download), or, for a version the scan only listed from a manifest, the
//! object itself: fetched through the source on its first load (storage
//! checks it against the manifest's SHA-256, the load validates it) and
//! kept from then on.
//!
//! Under `--trust-key` each [`KeptCopy`] carries the signature the scan
//! accepted for its version, and a load on demand is held to it as a scan's
//! load is: a delta is applied only to rebuild the content that signature
//! names, and the bytes the load reads are hashed as it reads them and must
//! be that content (`serve::build::signed::read`), whatever the manifest says by then.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::metrics::Metrics;
use crate::serve::build;
use crate::storage::signatures::Signed;
use crate::storage::{EntryStamp, Fetch, OpenFile, Remembered, StorageOrigin};
use portfolio_domain::snapshot::Loaded;
use portfolio_domain::store::Dataset;

/// Where the bytes of a version lie, for a load on demand.
#[derive(Clone, Debug)]
pub enum KeptCopy {
    /// A file on local disk, validated when the scan read it.
    File {
        path: PathBuf,
        /// The name load errors give: the file name, or the object's key.
        label: String,
        /// Its version was listed before it was read (the hollow dataset
        /// was made from a manifest, not from these bytes).
        listed: bool,
        /// Under `--trust-key`: the signature its version was accepted with.
        signed: Option<Signed>,
        /// A directory's private copy: the entry and fingerprint it was
        /// copied from, to copy again should the copy be deleted under the
        /// server (`None` elsewhere: nothing to fall back to).
        copied_from: Option<(String, EntryStamp)>,
    },
    /// Not read yet: the entry `name` of the source at `fingerprint`, as a
    /// manifest lists it.
    Listed {
        name: String,
        fingerprint: EntryStamp,
        /// Under `--trust-key`: the signature its version was accepted with.
        signed: Option<Signed>,
    },
}

impl KeptCopy {
    /// The signature its version was accepted with, under `--trust-key`.
    pub fn signed(&self) -> Option<&Signed> {
        match self {
            KeptCopy::File { signed, .. } | KeptCopy::Listed { signed, .. } => signed.as_ref(),
        }
    }
}

/// Why a workspace's data cannot be had now: answered with a 503.
#[derive(Clone, Debug, thiserror::Error)]
#[error("{0}")]
pub struct Unavailable(pub String);

/// What a load on demand gave: the dataset, and where its bytes are kept
/// from now on if that changed (an object fetched the first time).
pub struct Demanded {
    pub dataset: Arc<Dataset>,
    pub kept: Option<KeptCopy>,
}

/// Loads the version `hollow` names from `kept`.
pub fn load(
    kept: &KeptCopy,
    hollow: &Dataset,
    origin: &StorageOrigin,
    precompress: bool,
    metrics: &Metrics,
) -> Result<Demanded, Unavailable> {
    let (workspace, version) = (&hollow.workspace_id, &hollow.version);
    let cannot = |why: String| {
        Unavailable(format!(
            "cannot load workspace {workspace} at version {version}: {why}"
        ))
    };
    let signed = kept.signed();
    if origin.trust().enabled() && signed.is_none() {
        // Never accepted: nothing of it may serve.
        return Err(cannot("no accepted signature for it".into()));
    }
    let (loaded, now_kept) = match kept {
        KeptCopy::File {
            path,
            label,
            copied_from,
            ..
        } => {
            let from_copy = match OpenFile::open(path) {
                Ok(file) => build::from_opened(label, Arc::new(file), path, signed, metrics)
                    .map_err(|e| {
                        // Not what was validated: changed in the cache
                        // directory, where nothing else may write.
                        format!(
                            "its private copy {} of {label} does not load ({e})",
                            path.display()
                        )
                    }),
                // Deleted under the server (a cleaner of temporary files, an
                // operator).
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(format!(
                    "its private copy {} of {label} is gone ({e})",
                    path.display()
                )),
                Err(e) => {
                    return Err(cannot(format!(
                        "its private copy {} of {label} cannot be read: {e}",
                        path.display()
                    )));
                }
            };
            match (from_copy, copied_from) {
                (Ok(loaded), _) => (loaded, None),
                (Err(why), None) => return Err(cannot(why)),
                // The snapshot directory's file may still be that version,
                // and a load from it is checked to be exactly that.
                (Err(why), Some((name, fingerprint))) => {
                    tracing::warn!(workspace = %workspace, version = %version, reason = %why, "a private copy of a snapshot cannot stand for its version: copying it again from the snapshot directory");
                    copy_again(name, fingerprint, path, hollow, origin, signed, metrics).map_err(
                        |again| cannot(format!("{why}, and {name} cannot stand in: {again}")),
                    )?
                }
            }
        }
        KeptCopy::Listed {
            name, fingerprint, ..
        } => {
            let plain = signed.and_then(|s| s.statement().plain_sha256.as_deref());
            let local = match origin.fetch(name, fingerprint, plain) {
                Fetch::Ready(local) => local,
                Fetch::Settling => return Err(cannot("the object is being replaced".into())),
                Fetch::Failed(error) => return Err(cannot(error.message)),
            };
            let label = local.label.clone();
            let loaded = build::from_file(&label, &local.path, signed, metrics);
            let ok = loaded.as_ref().is_ok_and(|l| {
                l.dataset.workspace_id == *workspace && l.dataset.version == *version
            });
            origin.loaded(name, local, ok);
            let loaded = loaded.map_err(|e| cannot(e.to_string()))?;
            let kept = origin.kept(name).map(|path| KeptCopy::File {
                path,
                label,
                listed: true,
                signed: signed.cloned(),
                copied_from: None,
            });
            (loaded, kept)
        }
    };
    let dataset = loaded.dataset;
    // A listed version's hollow dataset was made from the manifest, so its
    // fingerprint is not the content's: it is checked by what it claims.
    let same = match kept {
        KeptCopy::File { listed: false, .. } => dataset.fingerprint == hollow.fingerprint,
        KeptCopy::File { listed: true, .. } | KeptCopy::Listed { .. } => {
            dataset.workspace_id == hollow.workspace_id
                && dataset.version == hollow.version
                && dataset.key_hashes == hollow.key_hashes
        }
    };
    if !same {
        return Err(cannot(format!(
            "its bytes hold another version ({} of {}) than the one listed; the next scan reads it again",
            dataset.version, dataset.workspace_id
        )));
    }
    Ok(Demanded {
        dataset: build::warming::start_on_demand(dataset, precompress),
        kept: now_kept,
    })
}

/// A directory's file copied again, for a version whose private copy
/// `gone` was deleted or does not load: loaded (hashed against `signed` under
/// `--trust-key`), and, if it is the very version `hollow` names, kept in
/// the place of the copy that is gone. Returns what loaded and where the
/// version is kept from now on; or why the file cannot stand in (another
/// version by now, gone too, being written).
fn copy_again(
    name: &str,
    fingerprint: &EntryStamp,
    gone: &Path,
    hollow: &Dataset,
    origin: &StorageOrigin,
    signed: Option<&Signed>,
    metrics: &Metrics,
) -> Result<(Loaded, Option<KeptCopy>), String> {
    let local = match origin.fetch(name, fingerprint, None) {
        Fetch::Ready(local) => local,
        Fetch::Settling => return Err("it is gone or being written".into()),
        Fetch::Failed(error) => return Err(error.message),
    };
    let label = local.label.clone();
    let file = match build::opened(&local) {
        Ok(file) => file,
        Err(error) => {
            origin.loaded(name, local, false);
            return Err(error.to_string());
        }
    };
    let loaded = build::from_opened(&label, file, &local.path, signed, metrics);
    let loaded = match loaded {
        Ok(loaded) if loaded.dataset.fingerprint == hollow.fingerprint => loaded,
        Ok(loaded) => {
            origin.loaded(name, local, false);
            return Err(format!(
                "it holds another version by now ({}); the next scan reads it",
                loaded.dataset.version
            ));
        }
        Err(error) => {
            origin.loaded(name, local, false);
            return Err(error.to_string());
        }
    };
    let path = local.path.clone();
    if origin.kept_instead(name, gone, local) {
        // A copy that did not load is not kept beside its replacement.
        let _ = std::fs::remove_file(gone);
        // What a restart recalls of it (`--cache-dir`).
        let memory = Remembered::of(name, fingerprint, &loaded.dataset, &loaded.warnings, signed);
        if let Some(memory) = memory {
            origin.remember(&path, &memory);
        }
    } else {
        // Loaded, but a newer version took the copy's place meanwhile:
        // this one serves from memory until evicted, and is forgotten.
        tracing::warn!(
            file = %name,
            gone = %gone.display(),
            workspace = %hollow.workspace_id,
            version = %hollow.version,
            "the private copy of a snapshot was deleted or changed under the server: loaded from the snapshot directory's file, the same version, not copied again (a newer version replaced it meanwhile)"
        );
        return Ok((loaded, None));
    }
    metrics.copy_remade();
    tracing::warn!(
        file = %name,
        gone = %gone.display(),
        copy = %path.display(),
        workspace = %hollow.workspace_id,
        version = %hollow.version,
        "the private copy of a snapshot was deleted or changed under the server: loaded from the snapshot directory's file, the same version, and copied again"
    );
    let kept = KeptCopy::File {
        path,
        label,
        listed: false,
        signed: signed.cloned(),
        copied_from: Some((name.to_owned(), fingerprint.clone())),
    };
    Ok((loaded, Some(kept)))
}
