//! Why a publisher's step failed: one type for the `publish`, `rollback`,
//! `versions`, `migrate` and `diff --to` commands, whose steps (`update`,
//! `state`, `upload`, `deltas`, `changes`) hand their errors up to the
//! command, which writes `error: {it}`. Each variant carries what its
//! message names; the messages are the ones users have always seen, which
//! the command-line tests compare.
//!
//! No caller matches on a kind yet (a step either worked or the command
//! stops, saying why); the type is here so that the steps' boundaries say
//! what can go wrong instead of passing text, and so that a caller that
//! comes to decide on a kind can.

use std::path::PathBuf;
use std::time::Duration;

use object_store::path::Path as ObjectPath;

use crate::storage::{DownloadError, LocationError, OpenError};
use crate::tools::sign::SignError;
use portfolio_domain::snapshot::SnapshotError;
use portfolio_domain::store::claims::Conflict;
use portfolio_wire::manifest::{ManifestError, VersionError};

#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    // Opening the target.
    /// The `--to` text names no object store (`config` refuses it before
    /// a command runs; a library caller may not have).
    #[error(transparent)]
    Location(#[from] LocationError),
    /// The store `--to` names cannot be opened.
    #[error(transparent)]
    Open(#[from] OpenError),
    #[error("cannot start the object store client: {0}")]
    Runtime(#[source] std::io::Error),

    // Objects read and written conditionally (`update`).
    #[error("cannot read {key}: {source}")]
    Read {
        key: ObjectPath,
        source: object_store::Error,
    },
    #[error("cannot write {key}: {source}")]
    Write {
        key: ObjectPath,
        source: object_store::Error,
    },
    /// Other publishers won every attempt.
    #[error("{key} changed under every one of {attempts} attempts to write it; try again")]
    KeepsChanging { key: ObjectPath, attempts: u32 },
    /// A `file://` target's lock object, held past every attempt.
    #[error("{lock} is held by another publisher; try again")]
    Locked { lock: ObjectPath },
    #[error("cannot take {lock}: {source}")]
    Lock {
        lock: ObjectPath,
        source: object_store::Error,
    },

    // The manifest and the records (`state`).
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    /// A `manifest.json` that cannot be read is not written over: its
    /// history would be lost.
    #[error("{0}; fix it (or delete it to start over) before publishing")]
    BrokenManifest(#[source] ManifestError),
    #[error(
        "manifest.json is in format 1, which this build reads but no longer writes; run `portfolio-replica migrate --to URL` once (after upgrading the replicas; docs/object-storage.md#upgrading)"
    )]
    Format1,
    /// `prefix` is the target as shown, ending in `/`.
    #[error("{prefix}manifest.json does not exist: nothing was published there")]
    NoManifest { prefix: String },
    #[error("the manifest has no workspace {workspace:?}")]
    NoWorkspace { workspace: String },
    #[error("cannot list {dir}: {source}")]
    List {
        dir: ObjectPath,
        source: object_store::Error,
    },
    #[error(transparent)]
    Version(#[from] VersionError),
    /// A version that cannot be signed (`--sign-key`).
    #[error(transparent)]
    Sign(#[from] SignError),

    // Key claims (`state`).
    #[error("{path} is not a key claim: {source}; delete it")]
    NotAClaim {
        path: ObjectPath,
        source: serde_json::Error,
    },
    #[error("{path} changed under every attempt to claim it; try again")]
    ClaimKeepsChanging { path: ObjectPath },
    /// Another workspace's current version holds one of the keys.
    #[error("{0}")]
    KeyHeld(Conflict),
    /// Another workspace's publish claimed one of the keys `age` ago and
    /// has not finished; `wait` is how long until its claim can be taken.
    #[error(
        "an api_keys entry of {name} was claimed {}s ago by a publish of workspace {workspace:?} that has not finished (or failed); one key must not open two workspaces, so {name} is rejected; if that publish failed, try again after {}s",
        .age.as_secs(),
        .wait.as_secs()
    )]
    ClaimInFlight {
        name: String,
        workspace: String,
        age: Duration,
        wait: Duration,
    },

    // `migrate`.
    #[error("{path} does not exist: nothing to migrate")]
    NothingToMigrate { path: ObjectPath },
    #[error("{path} is in format 2 already")]
    AlreadyMigrated { path: ObjectPath },
    #[error(
        "{path} changed during the migration (is a publisher of an older build still running?); nothing is lost: stop it and run migrate again"
    )]
    ChangedDuringMigration { path: ObjectPath },

    // Files and objects (`upload`, `deltas`, `changes`).
    #[error(transparent)]
    Snapshot(#[from] SnapshotError),
    #[error("{}: cannot prepare the upload: {source}", .path.display())]
    Prepare {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A local file (a prepared upload) that cannot be read.
    #[error("{}: {source}", .path.display())]
    Local {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot look for {key}: {source}")]
    Look {
        key: ObjectPath,
        source: object_store::Error,
    },
    #[error("cannot start uploading {key}: {source}")]
    StartUpload {
        key: ObjectPath,
        source: object_store::Error,
    },
    #[error("cannot upload {key}: {source}")]
    Upload {
        key: ObjectPath,
        source: object_store::Error,
    },
    /// The base or the new snapshot of a delta cannot be opened.
    #[error("cannot make the delta: {0}")]
    DeltaSource(#[source] SnapshotError),
    /// Reading the base or writing the delta failed.
    #[error("cannot make the delta: {0}")]
    DeltaIo(#[source] std::io::Error),
    /// `diff --to` was given something other than WORKSPACE@VERSION.
    #[error(
        "{}: with --to, give a published version as WORKSPACE@VERSION (a snapshot version, 8+ digits of its sha256, or `current`)",
        .spec.display()
    )]
    NotAVersionSpec { spec: PathBuf },
    /// A version's key that is not a valid object path.
    #[error("{key}: {source}")]
    ObjectKey {
        key: String,
        source: object_store::path::Error,
    },
    #[error("cannot download {key}: {}", describe(.why))]
    Download { key: ObjectPath, why: DownloadError },
}

fn describe(e: &DownloadError) -> String {
    match e {
        DownloadError::Replaced => "it was replaced meanwhile".to_owned(),
        DownloadError::Request(e) | DownloadError::Body(e, _) => e.to_string(),
        DownloadError::Length { got, expected } => {
            format!("{got} bytes instead of {expected}")
        }
        DownloadError::Digest { got, expected } => {
            format!("its sha256 is {got}, not {expected} as the manifest says")
        }
        DownloadError::Disk(e) => format!("cannot write the temporary file: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each message as the publisher wrote it when its errors were text
    /// (most have no command-line test that reaches them).
    fn check(error: PublishError, expected: &str) {
        assert_eq!(error.to_string(), expected);
    }

    #[test]
    fn messages_are_the_ones_users_saw_before() {
        let key = ObjectPath::from("p/workspaces/ws.json");
        let store = || object_store::Error::Generic {
            store: "S3",
            source: "boom".into(),
        };
        check(
            PublishError::Read {
                key: key.clone(),
                source: store(),
            },
            &format!("cannot read p/workspaces/ws.json: {}", store()),
        );
        check(
            PublishError::KeepsChanging {
                key: key.clone(),
                attempts: 30,
            },
            "p/workspaces/ws.json changed under every one of 30 attempts to write it; try again",
        );
        check(
            PublishError::Locked {
                lock: ObjectPath::from("p/manifest.json.lock"),
            },
            "p/manifest.json.lock is held by another publisher; try again",
        );
        check(
            PublishError::BrokenManifest(ManifestError::UnknownFormat(3)),
            "manifest.json has manifest_version 3; this build reads versions 1 and 2 (upgrade the replicas before the publishers; until then they serve what they have); fix it (or delete it to start over) before publishing",
        );
        check(
            PublishError::NoManifest {
                prefix: "s3://b/p/".into(),
            },
            "s3://b/p/manifest.json does not exist: nothing was published there",
        );
        check(
            PublishError::NoWorkspace {
                workspace: "ws".into(),
            },
            "the manifest has no workspace \"ws\"",
        );
        check(
            PublishError::ClaimInFlight {
                name: "b.json".into(),
                workspace: "ws".into(),
                age: Duration::from_millis(12_900),
                wait: Duration::from_secs(287),
            },
            "an api_keys entry of b.json was claimed 12s ago by a publish of workspace \"ws\" that has not finished (or failed); one key must not open two workspaces, so b.json is rejected; if that publish failed, try again after 287s",
        );
        check(
            PublishError::ChangedDuringMigration {
                path: ObjectPath::from("p/manifest.json"),
            },
            "p/manifest.json changed during the migration (is a publisher of an older build still running?); nothing is lost: stop it and run migrate again",
        );
        check(
            PublishError::Prepare {
                path: PathBuf::from("/in/a.json"),
                source: std::io::Error::other("disk"),
            },
            "/in/a.json: cannot prepare the upload: disk",
        );
        check(
            PublishError::DeltaIo(std::io::Error::other("disk")),
            "cannot make the delta: disk",
        );
        check(
            PublishError::NotAVersionSpec {
                spec: PathBuf::from("ws"),
            },
            "ws: with --to, give a published version as WORKSPACE@VERSION (a snapshot version, 8+ digits of its sha256, or `current`)",
        );
        check(
            PublishError::Download {
                key,
                why: DownloadError::Length {
                    got: 1,
                    expected: 2,
                },
            },
            "cannot download p/workspaces/ws.json: 1 bytes instead of 2",
        );
        check(
            PublishError::Version(VersionError::NoCurrent {
                workspace: "ws".into(),
            }),
            "workspace \"ws\" has no current version",
        );
    }
}
