//! Why a manifest, a workspace record or a request for one of its versions
//! is refused. Two kinds, because their readers act on them differently: a
//! [`ManifestError`] is an object in storage that this build cannot trust
//! (a replica keeps serving what it has, a publisher refuses to write over
//! it), a [`VersionError`] is a version asked for that the history does not
//! hold (the user names another). The messages are the ones users have
//! always seen: the tests of the command line compare them.

use super::MANIFEST_VERSION;
use super::history::short;

/// A manifest or record that cannot be read, or that contradicts itself.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// `manifest.json` is not JSON of a manifest's shape.
    #[error("manifest.json is not a valid manifest: {0}")]
    NotAManifest(#[source] serde_json::Error),
    /// A workspace record (`what` names its object) is not JSON of a
    /// record's shape.
    #[error("{what} is not a valid workspace record: {source}")]
    NotARecord {
        what: String,
        source: serde_json::Error,
    },
    /// A format newer than this build: refused rather than misread.
    #[error(
        "manifest.json has manifest_version {0}; this build reads versions 1 and {MANIFEST_VERSION} (upgrade the replicas before the publishers; until then they serve what they have)"
    )]
    UnknownFormat(u32),
    #[error("{what} names a workspace with an empty id")]
    EmptyWorkspace { what: String },
    #[error(
        "{what}: workspace {workspace:?} has a version whose sha256 {sha256:?} is not 64 lower-case hex digits"
    )]
    BadSha256 {
        what: String,
        workspace: String,
        sha256: String,
    },
    /// A key that would reach outside the prefix, or name no snapshot.
    #[error(
        "{what}: workspace {workspace:?} names the key {key:?}, which is not a snapshot object under the prefix"
    )]
    KeyOutsidePrefix {
        what: String,
        workspace: String,
        key: String,
    },
    #[error(
        "{what}: workspace {workspace:?} is current at {current}, which is not among its versions"
    )]
    CurrentNotKept {
        what: String,
        workspace: String,
        current: String,
    },
}

/// A version asked of a workspace's history that it cannot give.
#[derive(Debug, thiserror::Error)]
pub enum VersionError {
    #[error("workspace {workspace:?} has no current version")]
    NoCurrent { workspace: String },
    /// A rollback without `--version` from the oldest version kept.
    #[error(
        "workspace {workspace:?} has no version older than the current one ({current}) to roll back to"
    )]
    NothingOlder { workspace: String, current: String },
    #[error("workspace {workspace:?} already serves {version} ({})", short(.sha256))]
    AlreadyServes {
        workspace: String,
        version: String,
        sha256: String,
    },
    #[error(
        "no kept version is {wanted:?} (give a snapshot version or 8+ digits of a sha256; see `portfolio-replica versions`)"
    )]
    NotKept { wanted: String },
    /// A SHA-256 prefix that more than one kept version starts with.
    #[error("{wanted:?} names {count} versions; give more digits of the sha256")]
    Ambiguous { wanted: String, count: usize },
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Messages as they read when these errors were text.
    #[test]
    fn messages_are_the_ones_users_saw_before() {
        let sha = "ab".repeat(32);
        let cases: [(Box<dyn std::error::Error>, String); 4] = [
            (
                Box::new(VersionError::AlreadyServes {
                    workspace: "ws".into(),
                    version: "v2".into(),
                    sha256: sha.clone(),
                }),
                "workspace \"ws\" already serves v2 (abababababab)".into(),
            ),
            (
                Box::new(VersionError::Ambiguous {
                    wanted: "abababab".into(),
                    count: 2,
                }),
                "\"abababab\" names 2 versions; give more digits of the sha256".into(),
            ),
            (
                Box::new(ManifestError::BadSha256 {
                    what: "manifest.json".into(),
                    workspace: "ws".into(),
                    sha256: "x".into(),
                }),
                "manifest.json: workspace \"ws\" has a version whose sha256 \"x\" is not 64 lower-case hex digits".into(),
            ),
            (
                Box::new(ManifestError::KeyOutsidePrefix {
                    what: "workspaces/ws.json".into(),
                    workspace: "ws".into(),
                    key: "../x.json".into(),
                }),
                "workspaces/ws.json: workspace \"ws\" names the key \"../x.json\", which is not a snapshot object under the prefix".into(),
            ),
        ];
        for (error, expected) in cases {
            assert_eq!(error.to_string(), expected);
        }
    }
}
