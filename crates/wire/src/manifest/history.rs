//! One workspace's published versions: which one serves and the ones kept
//! for rollback. Both manifest formats hold this per workspace (format 1
//! all of them in `manifest.json`, format 2 one object per workspace), so
//! publishing, rolling back and naming a version are written once, here.

use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use super::error::{ManifestError, VersionError};

use crate::store::key::{self, KeyHash};
use crate::store::time::Instant;

/// A workspace's versions, the one that serves marked.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct History {
    /// The SHA-256 of the version that serves, one of `versions`.
    pub current: String,
    /// The versions kept, the most recently published first.
    pub versions: Vec<Version>,
}

/// One immutable snapshot object.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Version {
    /// SHA-256 of the object's bytes (lower-case hex): its identity, the
    /// last part of its key, and what a replica checks the download against.
    pub sha256: String,
    /// The object's key relative to the prefix, e.g.
    /// `objects/ws-acme/<sha256>.json.gz`.
    pub key: String,
    /// The object's size in bytes.
    pub size: u64,
    /// The snapshot's own version (`X-Snapshot-Version`).
    pub version: String,
    /// When it was published (RFC 3339, UTC).
    pub published_at: String,
    /// The file name it was published from.
    pub file: String,
    /// Records in the snapshot, all collections together.
    pub records: u64,
    /// The SHA-256 of each of its API keys (lower-case hex), so that a
    /// publish or rollback can refuse a key that another workspace's
    /// current version holds. Absent from versions published by builds
    /// before it was recorded: their keys are not known without
    /// downloading them (docs/object-storage.md#keys-and-conflicts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_hashes: Option<Vec<String>>,
    /// A delta from the version that served before it
    /// (docs/object-storage.md#deltas), which a replica serving that
    /// version applies instead of downloading this object. Absent when
    /// the publish made none; readers of older builds ignore it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delta: Option<DeltaRef>,
    /// The publisher's signature over this version as current at its
    /// record's revision (docs/object-storage.md#signed-snapshots): only
    /// the current version's is checked, and a rollback signs the version
    /// it brings back anew. Absent when the publish did not sign.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<crate::signed::Envelope>,
    /// SHA-256 of the snapshot's JSON uncompressed (what a delta rebuilds),
    /// which a signature of this version covers too. Absent from versions
    /// published by builds before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plain_sha256: Option<String>,
    /// The workspace's own limits (the snapshot's `limits` member), so that
    /// a replica holds them before it reads the snapshot (a hollow
    /// workspace under a memory budget).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<crate::store::limits::WorkspaceLimits>,
}

/// Where a version's delta is, and what it applies to.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DeltaRef {
    /// The SHA-256 of the object it applies to: the version that served
    /// when this one was published.
    pub base: String,
    /// The delta object's key relative to the prefix
    /// (`deltas/<workspace>/<sha256>.delta.gz`), its size and SHA-256.
    pub key: String,
    pub size: u64,
    pub sha256: String,
}

impl History {
    /// A workspace's first version.
    pub fn first(version: Version) -> History {
        History {
            current: version.sha256.clone(),
            versions: vec![version],
        }
    }

    /// The version that serves.
    pub fn current_version(&self) -> Option<&Version> {
        self.versions.iter().find(|v| v.sha256 == self.current)
    }

    /// Makes `version` current, first in the list (moving it there if it
    /// was published before), keeping at most `keep` versions (never
    /// dropping the current one). Returns whether anything changed:
    /// publishing the content that serves changes nothing, even after a
    /// rollback put it there.
    ///
    /// A delta is kept only if its base is the version that served until
    /// now: a chain of deltas never skips a version (another publisher may
    /// have made one current since the delta was made).
    pub fn publish(&mut self, mut version: Version, keep: usize) -> bool {
        if self.current == version.sha256 {
            return false;
        }
        if version
            .delta
            .as_ref()
            .is_some_and(|d| d.base != self.current)
        {
            version.delta = None;
        }
        self.versions.retain(|v| v.sha256 != version.sha256);
        self.current = version.sha256.clone();
        self.versions.insert(0, version);
        self.versions.truncate(keep.max(1));
        true
    }

    /// Points the workspace at an earlier version: `to` (a snapshot
    /// version, or a prefix of a SHA-256 of at least 8 digits), or by
    /// default the version published just before the current one. Returns
    /// the versions it moves from and to.
    pub fn rollback(
        &mut self,
        workspace: &str,
        to: Option<&str>,
    ) -> Result<(Version, Version), VersionError> {
        let from = self
            .current_version()
            .cloned()
            .ok_or_else(|| VersionError::NoCurrent {
                workspace: workspace.to_owned(),
            })?;
        let target = match to {
            Some(wanted) => self.find(wanted)?.clone(),
            None => {
                let at = self
                    .versions
                    .iter()
                    .position(|v| v.sha256 == self.current)
                    .unwrap_or(0);
                self.versions
                    .get(at + 1)
                    .cloned()
                    .ok_or_else(|| VersionError::NothingOlder {
                        workspace: workspace.to_owned(),
                        current: from.version.clone(),
                    })?
            }
        };
        if target.sha256 == from.sha256 {
            return Err(VersionError::AlreadyServes {
                workspace: workspace.to_owned(),
                version: target.version,
                sha256: target.sha256,
            });
        }
        self.current = target.sha256.clone();
        Ok((from, target))
    }

    /// The version named by `wanted`: its snapshot version exactly, or a
    /// prefix (8 hex digits or more) of its SHA-256.
    pub fn find(&self, wanted: &str) -> Result<&Version, VersionError> {
        let by_version: Vec<&Version> = self
            .versions
            .iter()
            .filter(|v| v.version == wanted)
            .collect();
        let matches = if by_version.is_empty()
            && wanted.len() >= 8
            && wanted.bytes().all(|b| b.is_ascii_hexdigit())
        {
            let wanted = wanted.to_ascii_lowercase();
            self.versions
                .iter()
                .filter(|v| v.sha256.starts_with(&wanted))
                .collect()
        } else {
            by_version
        };
        match matches.as_slice() {
            [one] => Ok(one),
            [] => Err(VersionError::NotKept {
                wanted: wanted.to_owned(),
            }),
            _ => Err(VersionError::Ambiguous {
                wanted: wanted.to_owned(),
                count: matches.len(),
            }),
        }
    }

    /// Refuses a history that contradicts itself: a malformed version, or
    /// a `current` that is not among the versions.
    pub fn check(&self, what: &str, workspace: &str) -> Result<(), ManifestError> {
        if workspace.is_empty() {
            return Err(ManifestError::EmptyWorkspace {
                what: what.to_owned(),
            });
        }
        for version in &self.versions {
            version.check(what, workspace)?;
        }
        if self.current_version().is_none() {
            return Err(ManifestError::CurrentNotKept {
                what: what.to_owned(),
                workspace: workspace.to_owned(),
                current: self.current.clone(),
            });
        }
        Ok(())
    }
}

impl Version {
    /// Its key hashes, if it records them.
    pub fn key_hashes(&self) -> Option<Vec<KeyHash>> {
        let hashes = self.key_hashes.as_ref()?;
        Some(hashes.iter().filter_map(|h| key::from_hex(h)).collect())
    }

    /// When it was published.
    pub fn written(&self) -> SystemTime {
        Instant::parse_rfc3339(&self.published_at)
            .map_or(SystemTime::UNIX_EPOCH, Instant::to_system_time)
    }

    /// Refuses a malformed SHA-256, or a key outside the prefix or not
    /// naming a snapshot; `what` names the object it was read from.
    pub fn check(&self, what: &str, workspace: &str) -> Result<(), ManifestError> {
        let hex = self.sha256.len() == 64
            && self
                .sha256
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        if !hex {
            return Err(ManifestError::BadSha256 {
                what: what.to_owned(),
                workspace: workspace.to_owned(),
                sha256: self.sha256.clone(),
            });
        }
        let key = &self.key;
        let outside = key.is_empty()
            || key.starts_with('/')
            || key
                .split('/')
                .any(|part| part.is_empty() || part == "." || part == "..");
        let name = key.rsplit('/').next().unwrap_or("");
        if outside || !crate::snapshot::is_snapshot_name(name) {
            return Err(ManifestError::KeyOutsidePrefix {
                what: what.to_owned(),
                workspace: workspace.to_owned(),
                key: key.clone(),
            });
        }
        Ok(())
    }
}

/// Versions made by hand, for the tests of this crate and of the crates
/// that use it (`features = ["test-support"]` in their dev-dependencies).
#[cfg(any(test, feature = "test-support"))]
impl Version {
    /// A version for tests (here and in the crates that read manifests):
    /// `workspace`'s object of SHA-256 `n` written 32 times, named `name`,
    /// of one record and 1 byte, published at no time from
    /// `<workspace>.json`, with none of the optional parts.
    pub fn for_tests(n: u8, workspace: &str, name: &str) -> Version {
        let sha256 = format!("{n:02x}").repeat(32);
        Version {
            key: format!("objects/{workspace}/{sha256}.json.gz"),
            sha256,
            size: 1,
            version: name.to_owned(),
            published_at: String::new(),
            file: format!("{workspace}.json"),
            records: 1,
            key_hashes: None,
            delta: None,
            signature: None,
            plain_sha256: None,
            limits: None,
        }
    }
}

/// The first 12 digits of a SHA-256, as people read them.
pub fn short(sha256: &str) -> &str {
    &sha256[..sha256.len().min(12)]
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    pub fn version(n: u8, name: &str) -> Version {
        Version {
            size: 100 + u64::from(n),
            published_at: "2026-11-23T10:00:00.000Z".to_owned(),
            ..Version::for_tests(n, "ws", name)
        }
    }

    fn names(history: &History) -> Vec<&str> {
        history
            .versions
            .iter()
            .map(|v| v.version.as_str())
            .collect()
    }

    #[test]
    fn publish_puts_the_version_first_and_keeps_a_bounded_history() {
        let mut h = History::first(version(1, "v1"));
        for n in 2..=4 {
            assert!(h.publish(version(n, &format!("v{n}")), 3));
        }
        assert_eq!(names(&h), ["v4", "v3", "v2"]);
        assert_eq!(h.current, version(4, "v4").sha256);
        // The same content again changes nothing.
        assert!(!h.publish(version(4, "v4"), 3));
        // Publishing an older content again brings it to the front.
        assert!(h.publish(version(2, "v2"), 3));
        assert_eq!(names(&h), ["v2", "v4", "v3"]);
    }

    #[test]
    fn a_delta_is_kept_only_against_the_version_that_served() {
        let mut h = History::first(version(1, "v1"));
        let with_delta = |n: u8, base: &str| Version {
            delta: Some(DeltaRef {
                base: base.to_owned(),
                key: format!("deltas/ws/{n:02x}.delta.gz"),
                size: 10,
                sha256: "cd".repeat(32),
            }),
            ..version(n, &format!("v{n}"))
        };
        h.publish(with_delta(2, &version(1, "").sha256), 10);
        assert!(h.current_version().unwrap().delta.is_some());
        // Made against v1, but v2 serves now: no delta.
        h.publish(with_delta(3, &version(1, "").sha256), 10);
        assert!(h.current_version().unwrap().delta.is_none());
        let text = serde_json::to_string(&h).unwrap();
        assert_eq!(text.matches("\"delta\"").count(), 1, "{text}");
    }

    #[test]
    fn publishing_what_serves_after_a_rollback_changes_nothing() {
        let mut h = History::first(version(1, "v1"));
        h.publish(version(2, "v2"), 10);
        h.publish(version(3, "v3"), 10);
        h.rollback("ws", Some("v2")).unwrap();
        assert!(!h.publish(version(2, "v2"), 10));
        assert_eq!(names(&h), ["v3", "v2", "v1"]);
        assert_eq!(h.current_version().unwrap().version, "v2");
    }

    #[test]
    fn rollback_goes_to_the_previous_version_or_the_one_named() {
        let mut h = History::first(version(1, "v1"));
        for n in 2..=3 {
            h.publish(version(n, &format!("v{n}")), 10);
        }
        let (from, to) = h.rollback("ws", None).unwrap();
        assert_eq!((from.version.as_str(), to.version.as_str()), ("v3", "v2"));
        let (_, to) = h.rollback("ws", None).unwrap();
        assert_eq!(to.version, "v1");
        let err = h.rollback("ws", None).unwrap_err();
        assert!(matches!(err, VersionError::NothingOlder { .. }), "{err}");
        assert!(err.to_string().contains("no version older"), "{err}");
        let (_, to) = h.rollback("ws", Some("v3")).unwrap();
        assert_eq!(to.version, "v3");
        let sha = version(2, "").sha256;
        let (_, to) = h.rollback("ws", Some(&sha[..10])).unwrap();
        assert_eq!(to.version, "v2");
        let err = h.rollback("ws", Some("v2")).unwrap_err();
        assert!(matches!(err, VersionError::AlreadyServes { .. }), "{err}");
        let err = h.rollback("ws", Some("v9")).unwrap_err();
        assert!(matches!(err, VersionError::NotKept { .. }), "{err}");
        assert!(err.to_string().contains("no kept version"), "{err}");
    }

    #[test]
    fn check_refuses_keys_outside_the_prefix_and_a_dangling_current() {
        let h = History::first(version(1, "v1"));
        assert!(h.check("m", "ws").is_ok());
        assert!(matches!(
            h.check("m", ""),
            Err(ManifestError::EmptyWorkspace { .. })
        ));
        for key in [
            "../x.json",
            "/x.json",
            "objects//x.json",
            "objects/x.txt",
            "",
        ] {
            let mut bad = h.clone();
            bad.versions[0].key = key.to_owned();
            assert!(bad.check("m", "ws").is_err(), "{key:?}");
        }
        let mut dangling = h.clone();
        dangling.current = "ab".repeat(32);
        let err = dangling.check("m", "ws").unwrap_err();
        assert!(matches!(err, ManifestError::CurrentNotKept { .. }), "{err}");
        assert!(err.to_string().contains("not among"), "{err}");
    }
}
