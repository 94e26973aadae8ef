//! The snapshot file format (docs/snapshot-format.md): the wire types,
//! parsing and validation, and rendering records as the API serves them.
//!
//! Pure: bytes in, a [`Loaded`] dataset or one [`SnapshotError`] out. The
//! parse streams: each record is checked and handed to the store's
//! [`Builder`] as soon as it is read. Reading files (and everything else
//! that touches the disk) is the loader's.

mod diagnose;
pub mod error;
pub mod format;
mod header;
mod parse;
mod records;
pub mod render;

use sha2::{Digest, Sha256};

use crate::store::{Builder, Dataset, Meta, RepeatedId};
pub use error::{Location, SnapshotError};
pub use header::FORMAT_VERSION;
pub use parse::{Header, parse};

/// A dataset built from one snapshot, with what the load noticed.
pub struct Loaded {
    pub dataset: Dataset,
    pub warnings: Vec<String>,
}

/// Parses, validates, indexes and renders one snapshot. `file` only names
/// the file in errors.
pub fn load(file: &str, bytes: &[u8]) -> Result<Loaded, SnapshotError> {
    let mut builder = Builder::default();
    let header = parse(file, bytes, &mut builder)?;
    let meta = Meta {
        version: header.version.unwrap_or_else(|| derive_version(bytes)),
        workspace_id: header.workspace_id,
        workspace_name: header.workspace_name,
        key_hashes: header.key_hashes,
        content_hash: content_hash(bytes),
    };
    let mut built = builder
        .finish(meta)
        .map_err(|err| repeated_id(file, &err))?;
    built.warnings.extend(header.warnings);
    Ok(Loaded {
        dataset: built.dataset,
        warnings: built.warnings,
    })
}

/// A fast hash of the snapshot's bytes, for ETags. FxHash has no
/// per-process seed, so replicas agree.
fn content_hash(bytes: &[u8]) -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = rustc_hash::FxBuildHasher.build_hasher();
    hasher.write(bytes);
    hasher.finish()
}

/// The version of a snapshot that names none: its content's SHA-256.
fn derive_version(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// The rejection of a record whose id an earlier record of its collection has.
fn repeated_id(file: &str, err: &RepeatedId) -> SnapshotError {
    SnapshotError::at(
        file,
        Location {
            collection: err.collection.name().to_owned(),
            index: Some(err.index),
            id: Some(crate::store::id::format_id(err.id)),
            field: Some("id".to_owned()),
        },
        err.to_string(),
    )
}
