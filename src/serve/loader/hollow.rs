//! Step 6 of a scan under a memory budget: what the scan loaded serves
//! hollow in the catalog (`Dataset::hollow`: ids, version, keys, counts),
//! its records left to [`Resident`]. A new version of a workspace that
//! was resident stays resident, as a reload swaps it in without a budget;
//! any other is dropped once validated, and loaded again from its kept
//! bytes when a request needs it. Versions that stopped serving are
//! forgotten only once the new catalog is published ([`forget_retired`]):
//! until then requests on the old catalog may still need their records,
//! as a replica without a budget would still answer them; a version
//! loaded again with the same content is not forgotten at all, and keeps
//! its place.

use std::path::PathBuf;
use std::sync::Arc;

use rustc_hash::FxHashSet;

use super::files::Files;
use super::settle::Settled;
use crate::serve::build::warming::Repacks;
use crate::serve::residency::{KeptCopy, Resident};
use crate::storage::{Remembered, StorageOrigin};
use portfolio_domain::store::Dataset;

/// What hollowing out left to do once the files lock is released.
#[derive(Default)]
pub struct Hollowed {
    /// The small changes' repacks of those that stay resident, to run
    /// once published.
    pub repacks: Repacks,
    /// What to remember beside each private copy (`Remembered`).
    pub memories: Vec<(PathBuf, Remembered)>,
}

/// Hollows out what `settled` loaded; the ones that stay resident start
/// warming here.
pub fn hollow_loaded(
    files: &mut Files,
    settled: &Settled,
    resident: &Resident,
    origin: &StorageOrigin,
    precompress: bool,
) -> Hollowed {
    let mut hollowed = Hollowed::default();
    let was_resident: FxHashSet<&str> = settled
        .retired
        .iter()
        .filter(|d| resident.is_resident(d))
        .map(|d| d.workspace_id.as_str())
        .collect();
    for (name, _) in &settled.loaded {
        let Some(entry) = files.get_mut(name) else {
            continue;
        };
        let fingerprint = entry.fingerprint().cloned();
        let signed = entry.signed.clone();
        let entry_warnings = entry.status.warnings.clone();
        let label = entry
            .status
            .source
            .as_ref()
            .map_or_else(|| name.clone(), |s| s.key.clone());
        let Some(full) = entry.dataset_mut() else {
            continue;
        };
        if full.is_hollow() {
            // Not read: listed from a manifest (fetched on its first load),
            // or recalled after a restart (loaded from its private copy,
            // which is checked to hold that very content).
            if let Some(fingerprint) = fingerprint {
                let kept = match origin.directory().and(origin.kept(name)) {
                    Some(path) => KeptCopy::File {
                        path,
                        label,
                        listed: false,
                        signed,
                        copied_from: Some((name.clone(), fingerprint)),
                    },
                    None => KeptCopy::Listed {
                        name: name.clone(),
                        fingerprint,
                        signed,
                    },
                };
                resident.listed(full, kept);
            }
            continue;
        }
        let Some(path) = origin.kept(name) else {
            // Nowhere to load it from again: it stays whole in the catalog,
            // beyond the budget, as without one.
            tracing::warn!(file = %name, "no kept copy of this snapshot: it stays in memory whatever the budget");
            continue;
        };
        if let Some(stamp) = &fingerprint
            && let Some(memory) =
                Remembered::of(name, stamp, full, &entry_warnings, signed.as_ref())
        {
            hollowed.memories.push((path.clone(), memory));
        }
        // A directory's file is its own private copy's fallback.
        let copied_from = origin
            .directory()
            .zip(fingerprint)
            .map(|(_, fingerprint)| (name.clone(), fingerprint));
        let kept = KeptCopy::File {
            path,
            label,
            listed: false,
            signed,
            copied_from,
        };
        let hollow = Arc::new(full.hollow());
        let stays = was_resident.contains(full.workspace_id.as_str());
        if stays && let Some(dataset) = Arc::get_mut(full) {
            // Not shared yet: the catalog shares the hollow one.
            hollowed
                .repacks
                .add(crate::serve::build::warming::start(dataset, precompress));
        }
        resident.loaded(full, kept, stays);
        *full = hollow;
    }
    hollowed
}

/// Once the catalog without them is published: forgets the versions
/// `settled` retired, but for those that serve again (the same content
/// loaded anew has the same fingerprint).
pub fn forget_retired(files: &Files, settled: &Settled, resident: &Resident) {
    if settled.retired.is_empty() {
        return;
    }
    let serving: FxHashSet<u64> = files
        .values()
        .filter_map(|e| e.dataset().map(|d| &**d))
        .map(|d: &Dataset| d.fingerprint)
        .collect();
    for retired in &settled.retired {
        if !serving.contains(&retired.fingerprint) {
            resident.forget(retired);
        }
    }
}
