//! Storage: where snapshot bytes come from and where `publish` puts them.
//! A directory on disk or a prefix of an object store (S3, GCS, Azure,
//! `file://`), each a [`Source`] (the one trait, as quickwit-storage has
//! one), held by the scan as an [`Origin`]: a [`Listing`] of names with
//! fingerprints, and a [`Local`] file on disk for each changed entry.
//! It owns listing and fetching, downloads verified against the manifest,
//! `--cache-dir`, backoff and jitter, the object store client and its
//! error kinds, the manifest format, and reading one snapshot file as a
//! stream ([`SnapshotFile`]).
//!
//! It knows nothing of the scan (`crate::serve::loader`) that decides what to
//! load, nor of conflicts or publishing a catalog. `crate::tools::publish` writes
//! through it.

mod backoff;
mod bookkeeping;
mod cache;
mod cached;
mod client;
mod copies;
mod dir;
mod download;
mod error;
mod file;
mod follow;
mod listing;
pub mod location;
mod objects;
mod open;
mod origin;
mod rebuild;
mod scratch;
mod source;
pub mod trust;

pub use backoff::after_conflict;
pub use bookkeeping::ScanBookkeeping;
pub use dir::Directory;
pub use download::{DownloadError, Downloaded, Expect, download};
pub use error::{ErrorKind, ListError, LocationError, OpenError, StorageError};
pub use file::{OpenFile, SnapshotFile, is_snapshot_name};
pub use follow::RESYNC_EVERY;
pub use listing::{
    Claims, Fetch, FileFingerprint, Fingerprint, Listing, Local, ObjectVersion, SignatureStamp,
};
pub use location::{Location, StorageOptions};
pub use origin::Origin;
pub use portfolio_wire::status::{OriginStatus, SourceStatus};
pub use portfolio_wire::{delta, manifest};
pub use scratch::remove_all as scratch_remove_all;
pub use source::SnapshotSource;
pub use trust::Trust;
