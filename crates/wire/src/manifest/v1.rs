//! Manifest format 1: one `manifest.json` listing every workspace with all
//! its kept versions. It grows with the fleet (about 530 bytes a version)
//! and every publish rewrites all of it, so this build only reads it:
//! replicas follow it as before, `versions` lists it, and `migrate` turns
//! it into format 2 (`super::root`). `publish` and `rollback` refuse it
//! and say to migrate.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::error::ManifestError;
use super::history::{History, Version};

/// The format this module reads.
pub const FORMAT: u32 = 1;

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ManifestV1 {
    /// The format: [`FORMAT`].
    pub manifest_version: u32,
    /// Counts the writes of this manifest: every publish or rollback added 1.
    pub revision: u64,
    /// When it was last written (RFC 3339, UTC).
    pub updated_at: String,
    pub workspaces: BTreeMap<String, History>,
}

impl ManifestV1 {
    /// An empty manifest, as the first publish of a format-1 build found.
    pub fn empty() -> ManifestV1 {
        ManifestV1 {
            manifest_version: FORMAT,
            ..ManifestV1::default()
        }
    }

    /// Reads a format-1 manifest, refusing one that contradicts itself (a
    /// `current` that is not among the versions, a key outside the prefix,
    /// a malformed SHA-256).
    pub fn parse(bytes: &[u8]) -> Result<ManifestV1, ManifestError> {
        let manifest: ManifestV1 =
            serde_json::from_slice(bytes).map_err(ManifestError::NotAManifest)?;
        for (name, workspace) in &manifest.workspaces {
            workspace.check("manifest.json", name)?;
        }
        Ok(manifest)
    }

    /// The manifest as a format-1 build wrote it: pretty-printed.
    pub fn to_json(&self) -> Vec<u8> {
        let mut text = serde_json::to_vec_pretty(self).unwrap_or_default();
        text.push(b'\n');
        text
    }

    /// What a format-1 publish did: makes `version` current for
    /// `workspace`. Tests write format-1 manifests with it, to show that
    /// replicas still follow them and that `migrate` carries them over.
    pub fn publish(&mut self, workspace: &str, version: Version, keep: usize) -> bool {
        match self.workspaces.get_mut(workspace) {
            Some(history) => history.publish(version, keep),
            None => {
                self.workspaces
                    .insert(workspace.to_owned(), History::first(version));
                true
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::history::tests::version;
    use super::*;

    #[test]
    fn parse_reads_what_a_format_1_build_wrote_and_refuses_contradictions() {
        let mut m = ManifestV1::empty();
        m.publish("ws", version(1, "v1"), 10);
        assert_eq!(ManifestV1::parse(&m.to_json()).unwrap(), m);
        assert!(matches!(
            ManifestV1::parse(b"{not json"),
            Err(ManifestError::NotAManifest(_))
        ));
        let mut dangling = m.clone();
        dangling.workspaces.get_mut("ws").unwrap().current = "ab".repeat(32);
        assert!(matches!(
            ManifestV1::parse(&dangling.to_json()),
            Err(ManifestError::CurrentNotKept { .. })
        ));
        // Fields this build does not know are ignored.
        let mut text: serde_json::Value = serde_json::from_slice(&m.to_json()).unwrap();
        text["future_field"] = serde_json::json!(true);
        assert!(ManifestV1::parse(text.to_string().as_bytes()).is_ok());
    }
}
