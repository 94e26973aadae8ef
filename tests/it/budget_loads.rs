//! What a load on demand counts against, through the real binary: a
//! workspace heavier than the cache keeps by itself is held, loaded once
//! and counted in the resident bytes within the documented ceiling; a
//! memory limit under a budget counts hollow workspaces at their catalog
//! cost and refuses at start a budget it cannot hold; a load survives the
//! clients that hang up on it; requests waiting for a load do not count
//! against `--max-in-flight`; and reloads under a budget never answer a
//! reader of a resident workspace with a 503 (docs/operations.md, "What a
//! load counts against").

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::util::*;

async fn loads(bin: &Binary) -> f64 {
    metric_at(
        bin.admin,
        "portfolio_replica_demand_loads_total{outcome=\"ok\"}",
    )
    .await
}

async fn hits(bin: &Binary) -> f64 {
    metric_at(
        bin.admin,
        "portfolio_replica_resident_lookups_total{result=\"hit\"}",
    )
    .await
}

async fn resident_bytes(bin: &Binary) -> f64 {
    metric_at(bin.admin, "portfolio_replica_resident_bytes").await
}

async fn status_of(bin: &Binary, path: &str, key: &str) -> u16 {
    get_from(bin.api, path, Some(key)).await.expect(path).status
}

/// Writes `heavy.json`, one workspace of `n` tasks with long titles, for
/// `KEY`.
fn write_heavy(dir: &Path, n: u64, title_len: usize) {
    write_json(
        dir,
        "heavy.json",
        &tasks_snapshot("ws-heavy", KEY, "v1", n, title_len),
    );
}

/// The heavy workspace beside 8 small ones, served under a budget of
/// `num / den` times what the budget counts the heavy one at (its
/// weight): the directory, the small ones' files and keys, the weight, the
/// budget and the replica.
async fn heavy_beside_a_fleet(num: u64, den: u64) -> Heavy {
    let dir = tempdir();
    write_heavy(dir.path(), 2_000, 200);
    let small = generate_fleet(dir.path(), "micro", 8).await;
    let weight = weight_of_heavy(dir.path()).await;
    let budget = weight * num / den;
    let bin = Binary::start(dir.path(), &["--memory-budget", &format!("{budget}B")], &[]).await;
    (dir, small, weight, budget, bin)
}

/// What [`heavy_beside_a_fleet`] serves.
type Heavy = (
    tempfile::TempDir,
    BTreeMap<String, String>,
    u64,
    u64,
    Binary,
);

/// What the budget counts `heavy.json` at: the resident bytes of a replica
/// with room for it, once it is loaded.
async fn weight_of_heavy(dir: &Path) -> u64 {
    let roomy = Binary::start(dir, &["--memory-budget", "256MiB"], &[]).await;
    assert_eq!(status_of(&roomy, "/roles", KEY).await, 200);
    let weight = resident_bytes(&roomy).await as u64;
    assert!(weight > 0, "the heavy workspace is resident");
    weight
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workspace_of_three_quarters_of_the_budget_loads_once_and_stays() {
    let (_dir, small, _, budget, bin) = heavy_beside_a_fleet(4, 3).await;

    assert_eq!(status_of(&bin, "/roles", KEY).await, 200);
    let hits_before = hits(&bin).await;
    assert_eq!(status_of(&bin, "/tasks?limit=3", KEY).await, 200);
    assert_eq!(loads(&bin).await, 1.0, "asked twice, loaded once");
    assert_eq!(
        hits(&bin).await,
        hits_before + 1.0,
        "the second request hit"
    );

    // The small workspaces share what it leaves, and it stays.
    for key in small.values() {
        assert_eq!(status_of(&bin, "/roles", key).await, 200);
        let held = resident_bytes(&bin).await;
        assert!(
            held <= budget as f64,
            "resident bytes {held} within the budget {budget}"
        );
    }
    let before = loads(&bin).await;
    assert_eq!(status_of(&bin, "/roles", KEY).await, 200);
    assert_eq!(loads(&bin).await, before, "the heavy workspace stayed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workspace_heavier_than_the_budget_is_held_and_counted_alone() {
    let (_dir, small, weight, budget, bin) = heavy_beside_a_fleet(2, 3).await;
    assert_eq!(status_of(&bin, "/roles", KEY).await, 200);
    for key in small.values() {
        assert_eq!(status_of(&bin, "/roles", key).await, 200);
        let held = resident_bytes(&bin).await;
        assert!(
            held <= weight.max(budget) as f64,
            "resident bytes {held} within max(budget {budget}, heavy {weight})"
        );
    }
    let before = loads(&bin).await;
    assert_eq!(status_of(&bin, "/roles", KEY).await, 200);
    assert_eq!(loads(&bin).await, before, "the heavy workspace is held");
    assert!(
        bin.stderr_text().contains("heavier than"),
        "the heavy workspace is logged"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_a_budget_a_limit_below_the_data_still_serves_every_key() {
    let dir = tempdir();
    let keys = generate_fleet(dir.path(), "micro", 400).await;
    let data: u64 = keys
        .keys()
        .map(|f| std::fs::metadata(dir.path().join(f)).unwrap().len())
        .sum();
    // The process's 32 MiB, the budget and its loads in flight, the
    // catalog, and less than the data's own estimate.
    let room = 7 << 19;
    let limit = (32 << 20) + room;
    assert!(data > room, "the data ({data} bytes) is more than the room");
    let limit = limit.to_string();
    let args = ["--memory-budget", "256KiB", "--memory-limit", &limit];
    let bin = Binary::start(dir.path(), &args, &[]).await;
    let mut refused = Vec::new();
    for (file, key) in &keys {
        let status = status_of(&bin, "/roles", key).await;
        if status != 200 {
            refused.push(format!("{file}: {status}"));
        }
    }
    assert!(
        refused.is_empty(),
        "{} of {} keys not answered: {:?}",
        refused.len(),
        keys.len(),
        &refused[..refused.len().min(5)]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_budget_the_memory_limit_cannot_hold_is_refused_at_start() {
    let dir = tempdir();
    let logs = tempdir();
    let stderr = logs.path().join("stderr.log");
    let mut child = binary()
        .arg("--snapshots")
        .arg(dir.path())
        .args(["--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"])
        .args(["--memory-limit", "100M", "--memory-budget", "68M"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&stderr).unwrap())
        .spawn()
        .expect("start portfolio-replica");
    let deadline = Instant::now() + CHANGE_TIMEOUT;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "it started: {}",
                std::fs::read_to_string(&stderr).unwrap_or_default()
            );
        }
        tokio::time::sleep(POLL).await;
    };
    let log = std::fs::read_to_string(&stderr).unwrap();
    assert!(!status.success(), "{log}");
    assert!(
        log.contains("--memory-budget") && log.contains("--memory-limit"),
        "the message names both flags: {log}"
    );
}

/// A workspace of several megabytes: its load takes long enough for
/// requests to meet it under way.
fn write_large(dir: &Path) {
    write_heavy(dir, 3_000, 3_000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_that_hang_up_mid_load_leave_one_load_that_stays() {
    let dir = tempdir();
    write_large(dir.path());
    let bin = Binary::start(dir.path(), &["--memory-budget", "256MiB"], &[]).await;
    let auth = format!("Bearer {KEY}");
    for _ in 0..4 {
        let conn = Conn::open(bin.api).await;
        conn.send_get("/tasks?limit=1", &[("Authorization", &auth)])
            .await;
        tokio::time::sleep(Duration::from_millis(5)).await;
        drop(conn);
    }
    eventually("the load they started ends", async || {
        let done = loads(&bin).await;
        (done >= 1.0).then_some(()).ok_or(format!("{done} loads"))
    })
    .await;
    let hits_before = hits(&bin).await;
    assert_eq!(status_of(&bin, "/tasks?limit=1", KEY).await, 200);
    assert_eq!(loads(&bin).await, 1.0, "one load for every client");
    assert_eq!(hits(&bin).await, hits_before + 1.0, "the request after hit");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_waiting_for_a_load_do_not_count_against_max_in_flight() {
    let dir = tempdir();
    write_large(dir.path());
    let args = ["--memory-budget", "256MiB", "--max-in-flight", "2"];
    let bin = Binary::start(dir.path(), &args, &[]).await;
    let requests: Vec<_> = (0..6)
        .map(|_| {
            let api = bin.api;
            tokio::spawn(async move { get_from(api, "/tasks?limit=1", Some(KEY)).await })
        })
        .collect();
    let mut statuses = Vec::new();
    for request in requests {
        statuses.push(request.await.unwrap().expect("answered").status);
    }
    assert_eq!(statuses, [200; 6], "six requests on a cold workspace");
    assert_eq!(loads(&bin).await, 1.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_of_resident_workspaces_get_no_503_during_reloads_under_a_budget() {
    let dir = tempdir();
    let keys = generate_fleet(dir.path(), "micro", 40).await;
    let args = ["--memory-budget", "4MiB", "--poll-interval", "50ms"];
    let bin = Binary::start(dir.path(), &args, &[]).await;
    for key in keys.values() {
        assert_eq!(status_of(&bin, "/roles", key).await, 200);
    }
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (api, keys, stop) = (bin.api, keys.clone(), stop.clone());
            tokio::spawn(async move {
                let mut answers = std::collections::BTreeMap::<u16, u64>::new();
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    for key in keys.values() {
                        let status = get_from(api, "/roles", Some(key)).await.unwrap().status;
                        *answers.entry(status).or_default() += 1;
                    }
                }
                answers
            })
        })
        .collect();
    for round in 0..8 {
        let version = format!("round-{round}");
        for file in keys.keys() {
            let path = dir.path().join(file);
            let mut snapshot: Value =
                serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
            snapshot["version"] = Value::from(version.as_str());
            replace_json(dir.path(), file, &snapshot);
        }
        let (_, key) = keys.iter().last().unwrap();
        eventually("the round's versions serve", async || {
            let resp = get_from(bin.api, "/roles", Some(key)).await?;
            (resp.header("x-snapshot-version") == Some(version.as_str()))
                .then_some(())
                .ok_or(format!("{:?}", resp.header("x-snapshot-version")))
        })
        .await;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut answers = std::collections::BTreeMap::<u16, u64>::new();
    for reader in readers {
        for (status, n) in reader.await.unwrap() {
            *answers.entry(status).or_default() += n;
        }
    }
    assert_eq!(
        answers.keys().copied().collect::<Vec<_>>(),
        [200],
        "{answers:?}"
    );
}

/// The private copies under `cache`, by path.
fn copies_in(cache: &Path) -> Vec<std::path::PathBuf> {
    let mut copies: Vec<_> = std::fs::read_dir(cache.join("copies"))
        .expect("the copies directory")
        .map(|e| e.expect("an entry").path())
        // What each copy validated is remembered beside it.
        .filter(|p| !p.to_string_lossy().ends_with(".facts"))
        .collect();
    copies.sort();
    copies
}

/// A private copy deleted under the server (a cleaner of temporary
/// files): the workspace loads from the snapshot directory's file, still
/// the same version, and is copied again; the log names the copy that was
/// gone. A copy that cannot be read is named in the 503's reason
/// (`/snapshots`), not the intact snapshot file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_private_copy_is_made_again_from_the_same_version() {
    let dir = tempdir();
    let snapshot = fixture("ws-copied", &["cura_copied"], 0);
    let version = snapshot["version"].as_str().unwrap().to_owned();
    write_json(dir.path(), "copied.json", &snapshot);
    let cache = tempdir();
    let cache_dir = cache.path().to_str().unwrap();
    let args = ["--memory-budget", "64MiB", "--cache-dir", cache_dir];
    let bin = Binary::start(dir.path(), &args, &[]).await;

    let gone = copies_in(cache.path());
    assert_eq!(gone.len(), 1, "one private copy: {gone:?}");
    std::fs::remove_file(&gone[0]).unwrap();
    let response = get_from(bin.api, "/portfolio", Some("cura_copied"))
        .await
        .expect("/portfolio");
    assert_eq!(response.status, 200, "{}", response.text());
    assert_eq!(
        response.header("x-snapshot-version"),
        Some(version.as_str())
    );
    let log = bin.stderr_text();
    let line = log
        .lines()
        .find(|l| l.contains("private copy of a snapshot was deleted"))
        .unwrap_or_else(|| panic!("no line on the copy gone:\n{log}"));
    assert!(line.contains(&*gone[0].to_string_lossy()), "{line}");
    let again = copies_in(cache.path());
    assert_eq!(again.len(), 1, "copied again: {again:?}");
    assert_ne!(again, gone);

    // Evicted by a restart's budget, then its copy made unreadable: the
    // reason names the copy.
    drop(bin);
    let bin = Binary::start(dir.path(), &args, &[]).await;
    let copy = copies_in(cache.path()).remove(0);
    std::fs::remove_file(&copy).unwrap();
    std::fs::create_dir(&copy).unwrap();
    let response = get_from(bin.api, "/portfolio", Some("cura_copied"))
        .await
        .expect("/portfolio");
    assert_eq!(response.status, 503, "{}", response.text());
    let status: Value = get_from(bin.admin, "/snapshots", None)
        .await
        .expect("/snapshots")
        .json();
    let error = status["files"][0]["error"].as_str().unwrap_or_default();
    assert!(error.contains(&*copy.to_string_lossy()), "{status}");
    assert!(error.contains("private copy"), "{status}");
}
