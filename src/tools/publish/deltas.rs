//! A publish's delta (docs/object-storage.md#deltas): made from the version
//! its workspace's record names as current, which the summary of changes
//! (`changes.rs`) has downloaded and hashed record by record already, so
//! the publisher stays stateless and reads the base once. Uploaded next to
//! the object under its own content address,
//! `deltas/<workspace>/<sha256>.delta.gz`, and named in the new version's
//! entry, unless it would not pay: a delta over half the object's size is
//! not sent.

use std::path::Path;

use object_store::path::Path as ObjectPath;

use super::Target;
use super::error::PublishError;
use super::upload::{self, Prepared};
use crate::storage::SnapshotFile;
use portfolio_domain::snapshot::{RecordSpan, Source};
use portfolio_wire::delta::{self, DeltaHeader, Encoded, Layout};
use portfolio_wire::manifest::{DeltaRef, Version, short};

/// Where deltas go, under the prefix.
pub const DELTAS_DIR: &str = "deltas";

/// A delta made, not yet sent.
pub struct Made {
    pub file: Prepared,
    /// The object it applies to.
    pub base: String,
    pub encoded: Encoded,
}

/// The delta from `base` (its object downloaded to `base_file`, its
/// records at `base_spans`) to the snapshot file `new` with records at
/// `new_spans`.
pub fn make(
    base: &Version,
    base_file: &Path,
    base_spans: &[RecordSpan],
    new: &Path,
    new_spans: &[RecordSpan],
) -> Result<Made, PublishError> {
    let base_source = SnapshotFile::new(base_file);
    let base_reader = base_source.open().map_err(PublishError::DeltaSource)?;
    let layout = Layout::read(base_spans, base_reader).map_err(PublishError::DeltaIo)?;
    let header = DeltaHeader {
        delta_format: delta::FORMAT,
        base: base.sha256.clone(),
        base_len: layout.len,
        base_sha256: layout.sha256.clone(),
    };
    let new_source = SnapshotFile::new(new);
    let reader = new_source.open().map_err(PublishError::DeltaSource)?;
    let name = format!("{}.delta.gz", short(&base.sha256));
    let (file, encoded) = upload::gzip_to_temporary(&name, |out| {
        delta::encode(&header, &layout, new_spans, reader, out)
    })
    .map_err(PublishError::DeltaIo)?;
    Ok(Made {
        file,
        base: base.sha256.clone(),
        encoded,
    })
}

/// Sends `made` for `workspace` if it pays against an object of
/// `object_size` bytes: the entry naming it (if sent), and the line that
/// says what happened.
pub async fn send(
    target: &Target,
    workspace: &str,
    made: &Made,
    object_size: u64,
) -> Result<(Option<DeltaRef>, String), PublishError> {
    let size = made.file.size;
    if size.saturating_mul(2) > object_size {
        return Ok((
            None,
            format!(
                "no delta: {workspace}'s delta from {} would be {size} bytes, over half the object's {object_size}; replicas download the object",
                short(&made.base)
            ),
        ));
    }
    let relative = ObjectPath::from_iter([
        DELTAS_DIR,
        workspace,
        &format!("{}.delta.gz", made.file.sha256),
    ]);
    let key = ObjectPath::from_iter(target.prefix.parts().chain(relative.parts()));
    let sent = upload::upload(target.store.as_ref(), &key, &made.file).await?;
    let line = format!(
        "delta: {key} ({size} bytes, {:.1}% of the object; {} bytes copied from {}, {} sent){}",
        size as f64 * 100.0 / object_size.max(1) as f64,
        made.encoded.copied,
        short(&made.base),
        made.encoded.inserted,
        if sent { "" } else { ", already there" }
    );
    Ok((
        Some(DeltaRef {
            base: made.base.clone(),
            key: relative.to_string(),
            size,
            sha256: made.file.sha256.clone(),
        }),
        line,
    ))
}

/// Deletes the delta objects at `keys` (relative to the prefix), those of
/// versions `--keep` dropped or replaced: a line per delta that could not
/// be deleted (it is only storage wasted).
pub async fn delete(target: &Target, keys: &[String]) -> Vec<String> {
    use object_store::ObjectStoreExt;
    let mut problems = Vec::new();
    for key in keys {
        let path = ObjectPath::from_iter(
            target
                .prefix
                .parts()
                .chain(ObjectPath::from(key.as_str()).parts()),
        );
        match target.store.delete(&path).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
            Err(e) => problems.push(format!("cannot delete the old delta {path}: {e}")),
        }
    }
    problems
}
