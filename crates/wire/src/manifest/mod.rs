//! The fleet manifest (docs/object-storage.md#the-manifest): what
//! `portfolio-replica publish` and `rollback` write under the prefix and
//! replicas follow. Pure: text in, text out, object names; no IO.
//!
//! Format 2, written by this build:
//! - `manifest.json`, the [`Root`]: a revision and a bounded journal of the
//!   latest changes, the one object every replica polls;
//! - `workspaces/<id>.json`, one [`WorkspaceRecord`] per workspace: the
//!   version that serves and those kept for rollback, written by the
//!   publishers of that workspace only;
//! - `keys/<sha256 of a key>.json`, one [`KeyClaim`] per API key: which
//!   workspace holds it, so that a publish checks its keys without reading
//!   every workspace;
//! - `objects/<id>/<sha256>.json.gz`, the immutable snapshots.
//!
//! Format 1 ([`v1`]), one `manifest.json` holding every workspace's
//! versions, is still read, and `migrate` turns it into format 2.

mod error;
mod history;
mod root;
pub mod v1;

use object_store::path::{Path as ObjectPath, PathPart};
use serde::{Deserialize, Serialize};

pub use error::{ManifestError, VersionError};
pub use history::{DeltaRef, History, Version, short};
pub use root::{MAX_CHANGES, Root, WorkspaceChange};

/// The manifest's object name, directly under the prefix. In prefix mode it
/// is never a snapshot, whatever its ending says.
pub const MANIFEST_NAME: &str = "manifest.json";

/// The manifest format this build writes. Fields may be added without
/// changing it (readers ignore fields they do not know); a change that
/// older readers would misread raises it, and they refuse the manifest
/// rather than misread it, serving what they have.
pub const MANIFEST_VERSION: u32 = root::FORMAT;

/// The largest manifest a replica reads: a bigger one is refused, not
/// buffered. A format-2 root stays under 48 KiB; format 1 grew with the
/// fleet (a few hundred bytes per version).
pub const MAX_MANIFEST_BYTES: usize = 16 << 20;

/// The largest workspace record or key claim a reader takes.
pub const MAX_RECORD_BYTES: usize = 4 << 20;

/// How many versions of a workspace are kept by default.
pub const DEFAULT_KEEP: usize = 10;

/// Where the records live, under the prefix.
pub const RECORDS_DIR: &str = "workspaces";

/// Where the key claims live, under the prefix.
pub const CLAIMS_DIR: &str = "keys";

/// `manifest.json` read: either format this build knows.
#[derive(Debug)]
pub enum Manifest {
    V1(v1::ManifestV1),
    V2(Root),
}

impl Manifest {
    /// Reads `manifest.json` in whichever format it says it is, refusing a
    /// format this build does not know with a message that says what to do.
    pub fn parse(bytes: &[u8]) -> Result<Manifest, ManifestError> {
        #[derive(Deserialize)]
        struct Format {
            manifest_version: u32,
        }
        let format: Format = serde_json::from_slice(bytes).map_err(ManifestError::NotAManifest)?;
        match format.manifest_version {
            v1::FORMAT => v1::ManifestV1::parse(bytes).map(Manifest::V1),
            root::FORMAT => Root::parse(bytes).map(Manifest::V2),
            other => Err(ManifestError::UnknownFormat(other)),
        }
    }
}

/// One workspace's versions in format 2: `workspaces/<id>.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WorkspaceRecord {
    pub workspace: String,
    /// Counts the writes of this record: each publish or rollback of the
    /// workspace adds 1. The root's changes carry it.
    pub revision: u64,
    /// When it was last written (RFC 3339, UTC).
    pub updated_at: String,
    #[serde(flatten)]
    pub history: History,
}

impl WorkspaceRecord {
    pub fn parse(bytes: &[u8], what: &str) -> Result<WorkspaceRecord, ManifestError> {
        let record: WorkspaceRecord =
            serde_json::from_slice(bytes).map_err(|source| ManifestError::NotARecord {
                what: what.to_owned(),
                source,
            })?;
        record.history.check(what, &record.workspace)?;
        Ok(record)
    }

    pub fn to_json(&self) -> Vec<u8> {
        let mut text = serde_json::to_vec_pretty(self).unwrap_or_default();
        text.push(b'\n');
        text
    }
}

/// Which workspace holds an API key: `keys/<sha256 of the key>.json`,
/// written by the publish or rollback that makes a version holding the key
/// current. A publish checks a claim against the holder's record: a
/// holder whose current version no longer has the key has let it go.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KeyClaim {
    pub workspace: String,
    /// The SHA-256 of the version that claimed it.
    pub sha256: String,
}

/// The object name of `workspace`'s record under `prefix`. The id is one
/// path segment, escaped as the store escapes it, so any id is safe.
pub fn record_path(prefix: &ObjectPath, workspace: &str) -> ObjectPath {
    json_object(prefix, RECORDS_DIR, workspace)
}

/// The object name of the claim on the key whose SHA-256 is `key_hex`.
pub fn claim_path(prefix: &ObjectPath, key_hex: &str) -> ObjectPath {
    json_object(prefix, CLAIMS_DIR, key_hex)
}

/// `<prefix>/<dir>/<stem>.json`, the last part one escaped path segment.
fn json_object(prefix: &ObjectPath, dir: &str, stem: &str) -> ObjectPath {
    let name = format!("{stem}.json");
    prefix
        .parts()
        .chain([PathPart::from(dir), PathPart::from(name.as_str())])
        .collect()
}

#[cfg(test)]
mod tests {
    use super::history::tests::version;
    use super::*;

    #[test]
    fn parse_reads_both_formats_and_refuses_a_newer_one_saying_what_to_do() {
        let mut old = v1::ManifestV1::empty();
        old.publish("ws", version(1, "v1"), 10);
        assert!(matches!(
            Manifest::parse(&old.to_json()),
            Ok(Manifest::V1(_))
        ));
        assert!(matches!(
            Manifest::parse(&Root::empty().to_json()),
            Ok(Manifest::V2(_))
        ));
        let err = Manifest::parse(br#"{"manifest_version": 3}"#).unwrap_err();
        assert!(matches!(err, ManifestError::UnknownFormat(3)), "{err}");
        let err = err.to_string();
        assert!(err.contains("manifest_version 3"), "{err}");
        assert!(err.contains("upgrade the replicas"), "{err}");
        let err = Manifest::parse(b"[]").unwrap_err();
        assert!(matches!(err, ManifestError::NotAManifest(_)), "{err}");
        assert!(err.to_string().contains("not a valid manifest"));
    }

    #[test]
    fn records_round_trip_and_any_id_stays_one_segment() {
        let record = WorkspaceRecord {
            workspace: "ws/../ä b".into(),
            revision: 3,
            updated_at: "now".into(),
            history: History::first(version(1, "v1")),
        };
        let read = WorkspaceRecord::parse(&record.to_json(), "r").unwrap();
        assert_eq!(read, record);
        let path = record_path(&ObjectPath::from("fleet"), &record.workspace);
        assert_eq!(path.parts().count(), 3, "{path}");
        assert!(path.as_ref().starts_with("fleet/workspaces/"), "{path}");
        let root = record_path(&ObjectPath::default(), "ws");
        assert_eq!(root.as_ref(), "workspaces/ws.json");
        assert_eq!(
            claim_path(&ObjectPath::from("p"), "ab").as_ref(),
            "p/keys/ab.json"
        );
    }
}
