//! What a publish changes, and `diff --to`: a published version's records
//! are read from storage (its object downloaded to a temporary file,
//! verified against its size and SHA-256, then hashed record by record by
//! `snapshot::digests`) and compared by `crate::tools::diff`. The publisher stays
//! stateless: a summary's base is whatever the workspace's record names as
//! current when the publish runs.

use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use object_store::path::Path as ObjectPath;

use super::deltas::{self, Made};
use super::error::PublishError;
use super::{Opening, Target, each, fail};
use crate::storage::location::StorageOptions;
use crate::storage::{Expect, SnapshotFile, download};
use crate::tools::check::Checked;
use crate::tools::diff::{self, Side};
use portfolio_domain::snapshot::{self, Digests};
use portfolio_wire::manifest::{History, Manifest, Version, VersionError, short};

/// Prints, for each checked file in order, what publishing it changes
/// against its workspace's current version. A summary that cannot be made
/// (the current object unreadable) is a warning: it does not stop a publish.
/// With `deltas`, also makes each file's delta from that version while its
/// object is at hand (`None` where the workspace has no version yet).
pub(super) fn print_summaries(
    target: &Target,
    checked: &[Checked],
    deltas: bool,
    out: &mut impl Write,
    err: &mut impl Write,
) -> Vec<Option<Result<Made, PublishError>>> {
    let summaries = target.block_on(each(checked, |item| summary(target, item, deltas)));
    let mut made = Vec::with_capacity(checked.len());
    for (item, summary) in checked.iter().zip(summaries) {
        match summary {
            Ok((text, delta)) => {
                let _ = write!(out, "{text}");
                made.push(delta);
            }
            Err(e) => {
                let _ = writeln!(
                    err,
                    "warning: {}: no summary of the changes: {e}",
                    item.name
                );
                made.push(Some(Err(e)));
            }
        }
    }
    made
}

/// One file's summary against its workspace's current version, or against
/// nothing if the workspace has none yet; and with `delta`, the delta from
/// that version.
async fn summary(
    target: &Target,
    item: &Checked,
    delta: bool,
) -> Result<(String, Option<Result<Made, PublishError>>), PublishError> {
    let new = Side {
        digests: snapshot::digests(&item.name, &SnapshotFile::new(&item.path))?,
        name: item.name.clone(),
    };
    let record = target.fleet().record(&item.workspace).await?;
    let (old, made) = match record.as_ref().and_then(|r| r.history.current_version()) {
        Some(current) => {
            let name = format!("current, {}", short(&current.sha256));
            let (old, file) = published(target, current, name).await?;
            let made = delta.then(|| {
                deltas::make(
                    current,
                    &file.0,
                    &old.digests.spans,
                    &item.path,
                    &new.digests.spans,
                )
            });
            (old, made)
        }
        None => (
            Side {
                name: format!("nothing ({} has no published version)", item.workspace),
                digests: Digests::default(),
            },
            None,
        ),
    };
    let changes = diff::compare(&old.digests, &new.digests);
    Ok((diff::render(&old, &new, &changes), made))
}

/// `portfolio-replica diff --to URL OLD NEW`, each WORKSPACE@VERSION.
pub fn diff_versions(
    to: &str,
    specs: [&std::path::Path; 2],
    json: bool,
    options: &StorageOptions,
    out: &mut impl Write,
    err: &mut impl Write,
) -> bool {
    Target::run(to, options, Opening::Read, err, |target, _, err| {
        let mut sides = Vec::new();
        for spec in specs {
            match target.block_on(named(target, spec)) {
                Ok(side) => sides.push(side),
                Err(e) => return fail(err, e),
            }
        }
        diff::print(&sides[0], &sides[1], json, out);
        true
    })
}

/// The version `spec` names (WORKSPACE@VERSION), read.
async fn named(target: &Target, spec: &std::path::Path) -> Result<Side, PublishError> {
    let (workspace, wanted) = spec
        .to_str()
        .and_then(|s| s.rsplit_once('@'))
        .filter(|(w, v)| !w.is_empty() && !v.is_empty())
        .ok_or_else(|| PublishError::NotAVersionSpec {
            spec: spec.to_owned(),
        })?;
    let history = history(target, workspace).await?;
    let version = if wanted == "current" {
        history
            .current_version()
            .ok_or_else(|| VersionError::NoCurrent {
                workspace: workspace.to_owned(),
            })?
    } else {
        history.find(wanted)?
    };
    let name = format!("published, {}", short(&version.sha256));
    Ok(published(target, version, name).await?.0)
}

/// `workspace`'s versions, from a manifest of either format.
async fn history(target: &Target, workspace: &str) -> Result<History, PublishError> {
    let fleet = target.fleet();
    let missing = || PublishError::NoWorkspace {
        workspace: workspace.to_owned(),
    };
    match fleet.manifest().await? {
        None => Err(PublishError::NoManifest {
            prefix: super::slash(&target.display),
        }),
        Some(Manifest::V1(old)) => old.workspaces.get(workspace).cloned().ok_or_else(missing),
        Some(Manifest::V2(_)) => fleet
            .record(workspace)
            .await?
            .map(|r| r.history)
            .ok_or_else(missing),
    }
}

/// Temporary downloads of one process get a number each.
static DOWNLOADS: AtomicUsize = AtomicUsize::new(0);

/// A downloaded object, deleted when dropped.
struct Temporary(PathBuf);

impl Drop for Temporary {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Downloads a published version (verified against its manifest entry) and
/// reads its records' digests; `name` is how the summary calls it. The
/// download is deleted when the file returned is dropped.
async fn published(
    target: &Target,
    version: &Version,
    name: String,
) -> Result<(Side, Temporary), PublishError> {
    let key = if target.prefix.as_ref().is_empty() {
        version.key.clone()
    } else {
        format!("{}/{}", target.prefix, version.key)
    };
    let key = ObjectPath::parse(&key).map_err(|source| PublishError::ObjectKey {
        key: version.key.clone(),
        source,
    })?;
    let file = Temporary(std::env::temp_dir().join(format!(
        "portfolio-replica-diff-{}-{}.json.gz",
        std::process::id(),
        DOWNLOADS.fetch_add(1, Ordering::Relaxed)
    )));
    let expect = Expect {
        size: version.size,
        sha256: Some(&version.sha256),
        if_match: None,
    };
    download(target.store.as_ref(), &key, expect, &file.0, &mut |_| {})
        .await
        .map_err(|why| PublishError::Download {
            key: key.clone(),
            why,
        })?;
    let shown = key.to_string();
    let digests = snapshot::digests(&shown, &SnapshotFile::named(&file.0, &shown))?;
    Ok((Side { name, digests }, file))
}
