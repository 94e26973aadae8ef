//! Storage: where snapshot bytes come from and where `publish` puts them.
//! A directory on disk or a prefix of an object store (S3, GCS, Azure,
//! `file://`), each a [`SnapshotSource`] (its data: listing, fetching) that
//! keeps [`ScanBookkeeping`] (what the scan tells it and asks of it), held
//! by the scan as a [`StorageOrigin`]: a [`Listing`] of names with stamps,
//! and a [`FetchedFile`] on local disk for each changed entry.
//!
//! Its rooms:
//!
//! - `source.rs`, `bookkeeping.rs`: the two traits; `origin.rs`: the
//!   handle the scan holds; `open.rs`: the origins `--snapshots` names,
//!   made; `listing.rs`: what a listing and a fetch give;
//! - `directory/`: a snapshot directory, and (`copies.rs`) its files read
//!   through private copies under a memory budget;
//! - `objects/`: an object store prefix: its HTTP client (`client.rs`),
//!   downloads verified as they stream (`download.rs`), the download cache
//!   (`--cache-dir`, `download_cache.rs`) and the source wrapped in it
//!   (`cached.rs`), manifest mode (`follow_manifest.rs`) and rebuilding a
//!   version from a delta (`delta_rebuild.rs`);
//! - `signatures/`: the signature policy of `--trust-key` and its journal
//!   of what was accepted;
//! - `location.rs`: what `--snapshots` or `--to` names, and the
//!   object_store client for a URL; `backoff.rs`: every retry's wait;
//!   `error.rs`: storage trouble and its kinds; `snapshot_file.rs`: one
//!   snapshot file read as a stream ([`SnapshotFile`]); `private_dirs.rs`:
//!   private temporary directories.
//!
//! Two words mean one thing each here: a *stamp* ([`EntryStamp`]) is what a
//! listing gives to tell one content of an entry from another without
//! reading it (a file's metadata, an object's version), where a
//! *fingerprint* is the hash of a loaded dataset (`Dataset::fingerprint`);
//! *facts* ([`ManifestFacts`]) are what a manifest records of a version,
//! where *claims* are the domain's (`portfolio_domain::store::claims`,
//! `portfolio_domain::snapshot::claims`).
//!
//! The manifest and delta formats are `portfolio_wire`'s (re-exported here
//! as [`manifest`] and [`delta`]): storage reads them, it does not define
//! them. It knows nothing of the scan (`crate::serve::loader`) that decides
//! what to load, nor of conflicts or publishing a catalog.
//! `crate::tools::publish` writes through it.

mod backoff;
mod bookkeeping;
mod directory;
mod error;
mod listing;
pub mod location;
mod objects;
mod open;
mod origin;
mod private_dirs;
pub mod signatures;
mod snapshot_file;
mod source;

pub use backoff::after_conflict;
pub use bookkeeping::ScanBookkeeping;
pub use directory::Directory;
pub use directory::remembered::Remembered;
pub use error::{ErrorKind, ListError, LocationError, OpenError, StorageError};
pub use listing::{
    EntryStamp, Fetch, FetchedFile, FileStamp, Listing, ManifestFacts, ObjectVersion,
    SignatureStamp,
};
pub use location::{Location, StorageOptions};
pub use objects::download::{DownloadError, Downloaded, Expect, download};
pub use objects::follow_manifest::RESYNC_EVERY;
pub use origin::StorageOrigin;
pub use portfolio_wire::status::{OriginStatus, SourceStatus};
pub use portfolio_wire::{delta, manifest};
pub use private_dirs::remove_all as scratch_remove_all;
pub use signatures::Trust;
pub use snapshot_file::{LARGE_SNAPSHOT_FILE_BYTES, OpenFile, SnapshotFile, is_snapshot_name};
pub use source::SnapshotSource;
