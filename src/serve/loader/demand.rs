//! One load on demand (`resident.rs` decides when): the version a hollow
//! dataset names, built from where its bytes are kept, and warming
//! started (its gzip fragments follow in the background, as after a
//! reload). Anything but exactly that version is refused.
//!
//! Where the bytes are ([`Kept`]): a file kept when the scan validated the
//! version (a directory's private copy, an object store's last good
//! download), or, for a version the scan only listed from a manifest, the
//! object itself: fetched through the source on its first load (storage
//! checks it against the manifest's SHA-256, the load validates it) and
//! kept from then on.
//!
//! Under `--trust-key` each [`Kept`] carries the signature the scan
//! accepted for its version, and a load on demand is held to it as a scan's
//! load is: a delta is applied only to rebuild the content that signature
//! names, and the bytes the load reads are hashed as it reads them and must
//! be that content (`verify::read`), whatever the manifest says by then.

use std::path::PathBuf;
use std::sync::Arc;

use super::load;
use crate::metrics::Metrics;
use crate::storage::trust::Signed;
use crate::storage::{Fetch, Fingerprint, Origin};
use crate::store::Dataset;

/// Where the bytes of a version lie, for a load on demand.
#[derive(Clone, Debug)]
pub enum Kept {
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
    },
    /// Not read yet: the entry `name` of the source at `fingerprint`, as a
    /// manifest lists it.
    Listed {
        name: String,
        fingerprint: Fingerprint,
        /// Under `--trust-key`: the signature its version was accepted with.
        signed: Option<Signed>,
    },
}

impl Kept {
    /// The signature its version was accepted with, under `--trust-key`.
    pub fn signed(&self) -> Option<&Signed> {
        match self {
            Kept::File { signed, .. } | Kept::Listed { signed, .. } => signed.as_ref(),
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
    pub kept: Option<Kept>,
}

/// Loads the version `hollow` names from `kept`.
pub fn load(
    kept: &Kept,
    hollow: &Dataset,
    origin: &Origin,
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
        Kept::File { path, label, .. } => {
            let loaded =
                load::on_demand(label, path, signed, metrics).map_err(|e| cannot(e.to_string()))?;
            (loaded, None)
        }
        Kept::Listed {
            name, fingerprint, ..
        } => {
            let plain = signed.and_then(|s| s.statement().plain_sha256.as_deref());
            let local = match origin.fetch(name, fingerprint, plain) {
                Fetch::Ready(local) => local,
                Fetch::Settling => return Err(cannot("the object is being replaced".into())),
                Fetch::Failed(error) => return Err(cannot(error.message)),
            };
            let label = local.label.clone();
            let loaded = load::on_demand(&label, &local.path, signed, metrics);
            let ok = loaded.as_ref().is_ok_and(|l| {
                l.dataset.workspace_id == *workspace && l.dataset.version == *version
            });
            origin.loaded(name, local, ok);
            let loaded = loaded.map_err(|e| cannot(e.to_string()))?;
            let kept = origin.kept(name).map(|path| Kept::File {
                path,
                label,
                listed: true,
                signed: signed.cloned(),
            });
            (loaded, kept)
        }
    };
    let dataset = loaded.dataset;
    // A listed version's hollow dataset was made from the manifest, so its
    // fingerprint is not the content's: it is checked by what it claims.
    let same = match kept {
        Kept::File { listed: false, .. } => dataset.fingerprint == hollow.fingerprint,
        Kept::File { listed: true, .. } | Kept::Listed { .. } => {
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
        dataset: super::warm::start_on_demand(dataset, precompress),
        kept: now_kept,
    })
}
