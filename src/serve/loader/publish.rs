//! Step 7 of a scan, publish: one new catalog of every dataset that
//! serves, swapped in at once, and everything that watches the swap told
//! of it: the log (each file loaded), the metrics (loaded, rejected,
//! unloaded workspaces) and storage (entries it may forget).

use super::files::Files;
use super::settle::Settled;
use crate::metrics::Metrics;
use crate::storage::StorageOrigin;
use portfolio_domain::store::{Catalog, Store};

/// Publishes what serves after `settled`.
pub fn publish(
    files: &Files,
    settled: &Settled,
    store: &Store,
    metrics: &Metrics,
    origin: &StorageOrigin,
) {
    log_loaded(files, &settled.loaded, metrics);
    let catalog = Catalog::new(files.values().filter_map(|e| e.dataset().cloned()));
    // A workspace that no longer serves was served by a dataset retired
    // now (a replaced one's workspace serves on).
    for retired in &settled.retired {
        if catalog.workspace(&retired.workspace_id).is_none() {
            metrics.unloaded(&retired.workspace_id);
        }
    }
    store.publish(catalog);

    for (name, _) in &settled.loaded {
        if let Some(ds) = files.get(name).and_then(|e| e.dataset()) {
            metrics.loaded(name, &ds.workspace_id, &ds.counts);
        }
    }
    for name in &settled.rejected {
        metrics.rejected(name);
    }
    for name in &settled.removed {
        origin.forgotten(name);
    }
}

/// Logs the files that loaded and serve (after conflicts).
/// (Under a memory budget, what a manifest listed or a restart recalled,
/// nothing read, is said in one line: a first scan has thousands.)
fn log_loaded(files: &Files, loaded: &[(String, Option<u64>)], metrics: &Metrics) {
    let (mut listed, mut recalled) = (0, 0);
    for (name, read_in) in loaded {
        let Some(entry) = files.get(name) else {
            continue;
        };
        let Some(dataset) = entry.dataset() else {
            continue;
        };
        let Some(elapsed_ms) = read_in else {
            // A manifest's records do not count records; a memory does.
            match entry.status.records {
                None => listed += 1,
                Some(_) => recalled += 1,
            }
            continue;
        };
        tracing::info!(
            file = %name,
            workspace = %dataset.workspace_id,
            version = %dataset.version,
            records = dataset.counts.total(),
            warnings = entry.status.warnings.len(),
            elapsed_ms,
            "snapshot loaded"
        );
        for warning in &entry.status.warnings {
            tracing::warn!(file = %name, workspace = %dataset.workspace_id, warning = %warning, "snapshot warning");
        }
    }
    if recalled > 0 {
        metrics.recalled(recalled);
        tracing::info!(
            workspaces = recalled,
            "recalled from --cache-dir, their files not read again: each loads from its private copy when a request needs it"
        );
    }
    if listed > 0 {
        tracing::info!(
            workspaces = listed,
            "listed from the manifest: each is downloaded and loaded when a request needs it"
        );
    }
}
