//! What the resident set keeps: a load on demand that ends after its
//! version stopped serving keeps nothing (no cache entry, no heavy one, no
//! failure, no kept path); the heavy one makes the others room, and is let
//! go once idle.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::json;

use super::*;
use crate::storage::{Location, StorageOptions};

const BUDGET: u64 = 64 << 20;

/// A budget a workspace of 50 tasks is heavier than: its load makes it the
/// heavy one, heavier than the whole budget.
const SMALL_BUDGET: u64 = 4 << 10;

/// Writes `name`, a snapshot of `workspace` with `tasks` tasks.
fn write_snapshot(dir: &Path, name: &str, workspace: &str, tasks: usize) -> PathBuf {
    let company = "00000000-0000-4000-8000-100000000000";
    let tasks: Vec<_> = (0..tasks)
        .map(|i| {
            json!({"id": format!("00000000-0000-4000-8000-{i:012x}"),
                   "attributes": {"company_id": company, "created_at": "2026-01-01T00:00:00Z"}})
        })
        .collect();
    let snapshot = json!({
        "format_version": 1,
        "version": "v1",
        "workspace": {"id": workspace},
        "api_keys": [{"sha256": format!("{:0>64}", workspace.len()), "label": "test"}],
        "companies": [{"id": company, "attributes": {"name": "c"}}],
        "tasks": tasks,
    });
    let path = dir.join(name);
    std::fs::write(&path, serde_json::to_vec(&snapshot).unwrap()).unwrap();
    path
}

/// Resident workspaces of `budget` over `dir`, started `age` ago.
fn resident(dir: &Path, budget: u64, age: Duration) -> Arc<Resident> {
    let metrics = Arc::new(Metrics::new(&["other"]).with_budget(budget));
    let location = Location::Directory(dir.to_owned());
    let options = StorageOptions::default();
    let origin = StorageOrigin::open(&location, &options, Arc::clone(&metrics), false).unwrap();
    let mut resident = Resident::new(budget, false, metrics, Arc::new(origin));
    resident.started -= age;
    Arc::new(resident)
}

/// The scan's part: `name` (a snapshot of `tasks` tasks) serves, its bytes
/// kept at `kept` (its own path if `None`), resident if it `stays`; its
/// hollow dataset.
fn serves(
    resident: &Resident,
    dir: &Path,
    name: &str,
    tasks: usize,
    kept: Option<PathBuf>,
    stays: bool,
) -> Arc<Dataset> {
    let path = write_snapshot(dir, name, &format!("ws-{name}"), tasks);
    let loaded = crate::serve::build::from_file(name, &path, None, &resident.metrics).unwrap();
    let full = Arc::new(loaded.dataset);
    let kept = KeptCopy::File {
        path: kept.unwrap_or(path),
        label: name.to_owned(),
        listed: false,
        signed: None,
        copied_from: None,
    };
    resident.loaded(&full, kept, stays);
    Arc::new(full.hollow())
}

/// Starts a load of `hollow` and lets it run until it waits for room
/// under the byte bound, which this takes all of; then forgets its
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
    let resident = resident(dir.path(), SMALL_BUDGET, Duration::ZERO);
    let hollow = serves(&resident, dir.path(), "a.json", 50, None, false);
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
    let resident = resident(dir.path(), BUDGET, Duration::ZERO);
    let missing = Some(dir.path().join("gone.json"));
    let hollow = serves(&resident, dir.path(), "a.json", 50, missing, false);
    let loaded = forgotten_mid_load(&resident, &hollow).await;
    assert!(loaded.is_err(), "the kept bytes are gone");
    assert!(lock(&resident.failed).is_empty(), "no failure remembered");
    assert!(lock(&resident.kept).is_empty());
}

/// A heavy one heavier than the budget stays, alone: what comes after it
/// does not stay beside it, until it has been idle for a while.
#[test]
fn the_heavy_one_stays_alone_until_it_is_idle() {
    let dir = tempfile::tempdir().unwrap();
    let resident = resident(dir.path(), SMALL_BUDGET, Duration::from_secs(120));
    let heavy = serves(&resident, dir.path(), "heavy.json", 50, None, true);
    let weight = resident.datasets.weight();
    assert!(weight > SMALL_BUDGET, "heavier than the budget: {weight}");
    assert!(resident.is_resident(&heavy));
    let small = serves(&resident, dir.path(), "small.json", 0, None, true);
    assert!(resident.is_resident(&heavy), "the heavy one stays");
    assert!(!resident.is_resident(&small), "nothing stays beside it");
    assert_eq!(
        resident.datasets.weight(),
        weight,
        "resident bytes: it alone"
    );

    // No request for it since it was loaded, two minutes ago.
    let held = lock(&resident.heavy)
        .as_ref()
        .unwrap()
        .held
        .upgrade()
        .unwrap();
    held.marked_ms.store(0, Ordering::Relaxed);
    drop(held);
    let small = serves(&resident, dir.path(), "small-2.json", 0, None, true);
    assert!(resident.is_resident(&small), "an idle heavy one makes room");
    assert!(!resident.is_resident(&heavy));
    assert!(resident.datasets.weight() <= SMALL_BUDGET);
}

/// The cache is keyed by fingerprint, a hash: a hollow dataset of another
/// workspace that shares a resident one's fingerprint never gets its
/// records.
#[test]
fn a_fingerprint_shared_with_another_workspace_finds_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let resident = resident(dir.path(), BUDGET, Duration::ZERO);
    let acme = serves(&resident, dir.path(), "acme.json", 5, None, true);
    assert!(resident.get(&acme).is_some(), "resident");
    let mut other = acme.hollow();
    other.workspace_id = "ws-other".into();
    assert!(resident.get(&other).is_none());
    let mut older = acme.hollow();
    older.version = "v0".into();
    assert!(resident.get(&older).is_none());
}
