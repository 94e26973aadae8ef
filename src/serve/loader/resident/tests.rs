//! A load on demand that ends after its version stopped serving keeps
//! nothing: no cache entry, no heavy one, no failure, no kept path.

use std::path::{Path, PathBuf};

use serde_json::json;

use super::*;
use crate::storage::{Location, StorageOptions};

const BUDGET: u64 = 64 << 20;

/// A budget `a.json` is heavier than: its load makes it the heavy one.
const SMALL_BUDGET: u64 = 4 << 10;

fn write_snapshot(dir: &Path) -> PathBuf {
    let company = "00000000-0000-4000-8000-100000000000";
    let tasks: Vec<_> = (0..50)
        .map(|i| {
            json!({"id": format!("00000000-0000-4000-8000-{i:012x}"),
                   "attributes": {"company_id": company, "created_at": "2026-01-01T00:00:00Z"}})
        })
        .collect();
    let snapshot = json!({
        "format_version": 1,
        "version": "v1",
        "workspace": {"id": "ws-a"},
        "api_keys": [{"sha256": "ab".repeat(32), "label": "test"}],
        "companies": [{"id": company, "attributes": {"name": "c"}}],
        "tasks": tasks,
    });
    let path = dir.join("a.json");
    std::fs::write(&path, serde_json::to_vec(&snapshot).unwrap()).unwrap();
    path
}

/// A resident set over `dir`, and the version of `a.json` it was told
/// serves (kept at `kept`), hollow.
fn serving(dir: &Path, kept: PathBuf, budget: u64) -> (Arc<Resident>, Arc<Dataset>) {
    let metrics = Arc::new(Metrics::new(&["other"]).with_budget(budget));
    let location = Location::Directory(dir.to_owned());
    let origin = Origin::open(
        &location,
        &StorageOptions::default(),
        Arc::clone(&metrics),
        false,
    )
    .unwrap();
    let resident = Arc::new(Resident::new(
        budget,
        false,
        Arc::clone(&metrics),
        Arc::new(origin),
    ));
    let path = write_snapshot(dir);
    let loaded = super::super::load::on_demand("a.json", &path, &metrics).unwrap();
    let full = Arc::new(loaded.dataset);
    let label = "a.json".to_owned();
    let kept = Kept::File {
        path: kept,
        label,
        listed: false,
    };
    resident.loaded(&full, kept, false);
    (resident, Arc::new(full.hollow()))
}

/// Starts a load of `hollow` and lets it run until it waits for room
/// under the byte bound, which `held` takes all of; then forgets its
/// version and lets the load end.
async fn forgotten_mid_load(
    resident: &Arc<Resident>,
    hollow: &Arc<Dataset>,
) -> Result<Arc<Dataset>, Unavailable> {
    let held = resident.bound.admit(u64::MAX).await;
    let loading = {
        let (resident, hollow) = (Arc::clone(resident), Arc::clone(hollow));
        tokio::spawn(async move { resident.load(&hollow).await })
    };
    // On this one-thread runtime each yield lets the load's tasks run
    // until they wait: it has read where the bytes are kept, and waits
    // for the bound.
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    resident.forget(hollow);
    drop(held);
    loading.await.unwrap()
}

#[tokio::test]
async fn a_load_that_ends_after_its_version_is_forgotten_keeps_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.json");
    let (resident, hollow) = serving(dir.path(), path, SMALL_BUDGET);
    let loaded = forgotten_mid_load(&resident, &hollow).await;
    assert!(loaded.is_ok(), "the load ran, and its waiter got it");
    assert!(!resident.is_resident(&hollow), "not kept in the cache");
    assert_eq!(resident.datasets.weight(), 0);
    assert!(lock(&resident.kept).is_empty());
    assert!(
        lock(&resident.heavy).is_none(),
        "not held as the heavy one either"
    );
}

#[tokio::test]
async fn a_load_that_fails_after_its_version_is_forgotten_leaves_no_failure() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("gone.json");
    let (resident, hollow) = serving(dir.path(), missing, BUDGET);
    let loaded = forgotten_mid_load(&resident, &hollow).await;
    assert!(loaded.is_err(), "the kept bytes are gone");
    assert!(lock(&resident.failed).is_empty(), "no failure remembered");
    assert!(lock(&resident.kept).is_empty());
}
