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

use std::sync::Arc;

use rustc_hash::FxHashSet;

use super::files::Files;
use super::settle::Settled;
use crate::serve::build::warming::Repacks;
use crate::serve::residency::{KeptCopy, Resident};
use crate::storage::StorageOrigin;
use portfolio_domain::store::Dataset;

/// Hollows out what `settled` loaded; the ones that stay resident start
/// warming here (their small changes' repacks returned, to run once
/// published).
pub fn hollow_loaded(
    files: &mut Files,
    settled: &Settled,
    resident: &Resident,
    origin: &StorageOrigin,
    precompress: bool,
) -> Repacks {
    let mut repacks = Repacks::default();
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
        let label = entry
            .status
            .source
            .as_ref()
            .map_or_else(|| name.clone(), |s| s.key.clone());
        let Some(full) = entry.dataset_mut() else {
            continue;
        };
        if full.is_hollow() {
            // Listed from a manifest, not read: fetched on its first load.
            if let Some(fingerprint) = fingerprint {
                let kept = KeptCopy::Listed {
                    name: name.clone(),
                    fingerprint,
                    signed,
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
            repacks.add(crate::serve::build::warming::start(dataset, precompress));
        }
        resident.loaded(full, kept, stays);
        *full = hollow;
    }
    repacks
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
