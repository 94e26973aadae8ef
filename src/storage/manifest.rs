//! The fleet manifest (docs/object-storage.md#the-manifest): `manifest.json`
//! under the prefix names, per workspace, the immutable object that serves
//! and the versions published before it. Replicas read it
//! (`objects.rs`); `portfolio-replica publish` and `rollback` write it
//! (`crate::publish`). Pure: text in, text out, no IO.

use std::collections::BTreeMap;

use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use crate::store::claims::{Claim, Holders};
use crate::store::key::{self, KeyHash};
use crate::store::time::Instant;

/// The manifest's object name, directly under the prefix. In prefix mode it
/// is never a snapshot, whatever its ending says.
pub const MANIFEST_NAME: &str = "manifest.json";

/// The manifest format this build writes and reads. Fields may be added
/// without changing it (readers ignore fields they do not know); a change
/// that older readers would misread raises it, and they refuse the manifest
/// rather than misread it.
pub const MANIFEST_VERSION: u32 = 1;

/// The largest manifest a replica reads: a bigger one is refused, not
/// buffered (a few hundred bytes per version, so thousands of workspaces).
pub const MAX_MANIFEST_BYTES: usize = 16 << 20;

/// How many versions of a workspace the manifest keeps by default.
pub const DEFAULT_KEEP: usize = 10;

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// The format: [`MANIFEST_VERSION`].
    pub manifest_version: u32,
    /// Counts the writes of this manifest: every publish or rollback adds 1.
    pub revision: u64,
    /// When it was last written (RFC 3339, UTC).
    pub updated_at: String,
    pub workspaces: BTreeMap<String, Workspace>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Workspace {
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
}

impl Manifest {
    /// An empty manifest, before the first publish.
    pub fn empty() -> Manifest {
        Manifest {
            manifest_version: MANIFEST_VERSION,
            ..Manifest::default()
        }
    }

    /// Reads a manifest, refusing one that is not valid JSON, is of a newer
    /// format, or contradicts itself (a `current` that is not among the
    /// versions, a key outside the prefix, a malformed SHA-256).
    pub fn parse(bytes: &[u8]) -> Result<Manifest, String> {
        let manifest: Manifest = serde_json::from_slice(bytes)
            .map_err(|e| format!("manifest.json is not a valid manifest: {e}"))?;
        if manifest.manifest_version != MANIFEST_VERSION {
            return Err(format!(
                "manifest.json has manifest_version {}; this build reads version {MANIFEST_VERSION} (upgrade the replicas before the publisher)",
                manifest.manifest_version
            ));
        }
        for (name, workspace) in &manifest.workspaces {
            if name.is_empty() {
                return Err("manifest.json names a workspace with an empty id".into());
            }
            for version in &workspace.versions {
                check_version(name, version)?;
            }
            if workspace.current_version().is_none() {
                return Err(format!(
                    "manifest.json: workspace {name:?} is current at {}, which is not among its versions",
                    workspace.current
                ));
            }
        }
        Ok(manifest)
    }

    /// The manifest as written: pretty-printed, so that people can read it.
    pub fn to_json(&self) -> Vec<u8> {
        let mut text = serde_json::to_vec_pretty(self).unwrap_or_default();
        text.push(b'\n');
        text
    }

    /// Makes `version` current for `workspace`, first in its list (moving it
    /// there if it was published before), keeping at most `keep` versions
    /// (never dropping the current one). Returns whether anything changed.
    pub fn publish(&mut self, workspace: &str, version: Version, keep: usize) -> bool {
        let entry = self
            .workspaces
            .entry(workspace.to_owned())
            .or_insert_with(|| Workspace {
                current: version.sha256.clone(),
                versions: Vec::new(),
            });
        if entry.current == version.sha256
            && entry.versions.first().map(|v| &v.sha256) == Some(&version.sha256)
        {
            return false;
        }
        entry.versions.retain(|v| v.sha256 != version.sha256);
        entry.current = version.sha256.clone();
        entry.versions.insert(0, version);
        entry.versions.truncate(keep.max(1));
        true
    }

    /// Points `workspace` at an earlier version: `to` (a snapshot version,
    /// or a prefix of a SHA-256 of at least 8 digits), or by default the
    /// version published just before the current one. Returns the versions
    /// it moves from and to.
    pub fn rollback(
        &mut self,
        workspace: &str,
        to: Option<&str>,
    ) -> Result<(Version, Version), String> {
        let entry = self.workspaces.get_mut(workspace).ok_or_else(|| {
            format!(
                "the manifest has no workspace {workspace:?} (see `portfolio-replica versions`)"
            )
        })?;
        let from = entry
            .current_version()
            .cloned()
            .ok_or_else(|| format!("workspace {workspace:?} has no current version"))?;
        let target = match to {
            Some(wanted) => entry.find(wanted)?.clone(),
            None => {
                let at = entry
                    .versions
                    .iter()
                    .position(|v| v.sha256 == entry.current)
                    .unwrap_or(0);
                entry.versions.get(at + 1).cloned().ok_or_else(|| {
                    format!(
                        "workspace {workspace:?} has no version older than the current one ({}) to roll back to",
                        from.version
                    )
                })?
            }
        };
        if target.sha256 == from.sha256 {
            return Err(format!(
                "workspace {workspace:?} already serves {} ({})",
                target.version,
                short(&target.sha256)
            ));
        }
        entry.current = target.sha256.clone();
        Ok((from, target))
    }
}

/// What the workspaces of a manifest hold, for conflict checks.
pub struct Held {
    /// (workspace, what messages call its version, published, keys).
    claims: Vec<(String, String, SystemTime, Vec<KeyHash>)>,
    /// Workspaces whose current version records no key hashes.
    pub unknown: Vec<String>,
}

impl Held {
    /// Every current version's workspace and keys but those of `except`
    /// (the workspaces a publish replaces).
    pub fn of(manifest: &Manifest, except: &[&str]) -> Held {
        let mut held = Held {
            claims: Vec::new(),
            unknown: Vec::new(),
        };
        for (name, workspace) in &manifest.workspaces {
            if except.contains(&name.as_str()) {
                continue;
            }
            let Some(current) = workspace.current_version() else {
                continue;
            };
            let keys = current.key_hashes();
            if keys.is_none() {
                held.unknown.push(name.clone());
            }
            let label = format!(
                "its published version {} ({})",
                current.version,
                short(&current.sha256)
            );
            held.claims.push((
                name.clone(),
                label,
                current.written(),
                keys.unwrap_or_default(),
            ));
        }
        held
    }

    /// Takes each `(workspace, keys)` against what the manifest holds:
    /// the first conflict, as a message, if any.
    pub fn check(&self, wanted: &[Claim<'_>]) -> Result<(), String> {
        let mut holders = Holders::default();
        for (workspace, label, written, keys) in &self.claims {
            // Two of them conflicting is a manifest from before key hashes
            // were recorded; the replicas decide it, not this publish.
            let _ = holders.take(&Claim {
                name: label,
                written: *written,
                workspace,
                keys,
            });
        }
        for claim in wanted {
            holders.take(claim).map_err(|c| c.to_string())?;
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
}

impl Workspace {
    /// The version that serves.
    pub fn current_version(&self) -> Option<&Version> {
        self.versions.iter().find(|v| v.sha256 == self.current)
    }

    /// The version named by `wanted`: its snapshot version exactly, or a
    /// prefix (8 hex digits or more) of its SHA-256.
    fn find(&self, wanted: &str) -> Result<&Version, String> {
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
            [] => Err(format!(
                "no kept version is {wanted:?} (give a snapshot version or 8+ digits of a sha256; see `portfolio-replica versions`)"
            )),
            _ => Err(format!(
                "{wanted:?} names {} versions; give more digits of the sha256",
                matches.len()
            )),
        }
    }
}

fn check_version(workspace: &str, version: &Version) -> Result<(), String> {
    let hex = version.sha256.len() == 64
        && version
            .sha256
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    if !hex {
        return Err(format!(
            "manifest.json: workspace {workspace:?} has a version whose sha256 {:?} is not 64 lower-case hex digits",
            version.sha256
        ));
    }
    let key = &version.key;
    let outside = key.is_empty()
        || key.starts_with('/')
        || key
            .split('/')
            .any(|part| part.is_empty() || part == "." || part == "..");
    if outside || !super::file::is_snapshot_name(key.rsplit('/').next().unwrap_or("")) {
        return Err(format!(
            "manifest.json: workspace {workspace:?} names the key {key:?}, which is not a snapshot object under the prefix"
        ));
    }
    Ok(())
}

/// The first 12 digits of a SHA-256, as people read them.
pub fn short(sha256: &str) -> &str {
    &sha256[..sha256.len().min(12)]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn version(n: u8, name: &str) -> Version {
        let sha256 = format!("{n:02x}").repeat(32);
        Version {
            key: format!("objects/ws/{sha256}.json.gz"),
            sha256,
            size: 100 + u64::from(n),
            version: name.to_owned(),
            published_at: "2026-11-23T10:00:00.000Z".to_owned(),
            file: "ws.json".to_owned(),
            records: 1,
            key_hashes: None,
        }
    }

    #[test]
    fn publish_puts_the_version_first_and_keeps_a_bounded_history() {
        let mut m = Manifest::empty();
        for n in 1..=4 {
            assert!(m.publish("ws", version(n, &format!("v{n}")), 3));
        }
        let ws = &m.workspaces["ws"];
        let names: Vec<&str> = ws.versions.iter().map(|v| v.version.as_str()).collect();
        assert_eq!(names, ["v4", "v3", "v2"]);
        assert_eq!(ws.current, version(4, "v4").sha256);
        // The same content again changes nothing.
        assert!(!m.publish("ws", version(4, "v4"), 3));
        // Publishing an older content again brings it to the front.
        assert!(m.publish("ws", version(2, "v2"), 3));
        let names: Vec<&str> = m.workspaces["ws"]
            .versions
            .iter()
            .map(|v| v.version.as_str())
            .collect();
        assert_eq!(names, ["v2", "v4", "v3"]);
    }

    #[test]
    fn rollback_goes_to_the_previous_version_or_the_one_named() {
        let mut m = Manifest::empty();
        for n in 1..=3 {
            m.publish("ws", version(n, &format!("v{n}")), 10);
        }
        let (from, to) = m.rollback("ws", None).unwrap();
        assert_eq!((from.version.as_str(), to.version.as_str()), ("v3", "v2"));
        let (_, to) = m.rollback("ws", None).unwrap();
        assert_eq!(to.version, "v1");
        assert!(
            m.rollback("ws", None)
                .unwrap_err()
                .contains("no version older")
        );
        let (_, to) = m.rollback("ws", Some("v3")).unwrap();
        assert_eq!(to.version, "v3");
        let sha = version(2, "").sha256;
        let (_, to) = m.rollback("ws", Some(&sha[..10])).unwrap();
        assert_eq!(to.version, "v2");
        assert!(
            m.rollback("ws", Some("v2"))
                .unwrap_err()
                .contains("already serves")
        );
        assert!(
            m.rollback("ws", Some("v9"))
                .unwrap_err()
                .contains("no kept version")
        );
        assert!(
            m.rollback("nope", None)
                .unwrap_err()
                .contains("no workspace")
        );
    }

    #[test]
    fn parse_refuses_what_it_cannot_follow() {
        let mut m = Manifest::empty();
        m.publish("ws", version(1, "v1"), 10);
        assert_eq!(Manifest::parse(&m.to_json()).unwrap(), m);

        assert!(
            Manifest::parse(b"{not json")
                .unwrap_err()
                .contains("not a valid manifest")
        );
        let mut newer = m.clone();
        newer.manifest_version = 2;
        assert!(
            Manifest::parse(&newer.to_json())
                .unwrap_err()
                .contains("manifest_version 2")
        );
        let mut dangling = m.clone();
        dangling.workspaces.get_mut("ws").unwrap().current = "ab".repeat(32);
        assert!(
            Manifest::parse(&dangling.to_json())
                .unwrap_err()
                .contains("not among")
        );
        for key in [
            "../x.json",
            "/x.json",
            "objects//x.json",
            "objects/x.txt",
            "",
        ] {
            let mut bad = m.clone();
            bad.workspaces.get_mut("ws").unwrap().versions[0].key = key.to_owned();
            assert!(Manifest::parse(&bad.to_json()).is_err(), "{key:?}");
        }
        // Fields this build does not know are ignored.
        let mut text: serde_json::Value = serde_json::from_slice(&m.to_json()).unwrap();
        text["future_field"] = serde_json::json!(true);
        assert!(Manifest::parse(text.to_string().as_bytes()).is_ok());
    }
}
