//! A memory budget (`--memory-budget`) and limit, through the real binary: a replica
//! holding a few workspaces at a time answers every key exactly as a
//! replica holding all of them (conflicts included), evicts and loads
//! again, serves new versions whether resident or not (gzip decoding to
//! plain), never serves a rejected version, shares one load between
//! concurrent first requests, and answers a load that fails with a 503;
//! a memory limit refuses the same files at every start, answers their
//! keys with 503, and loads them once memory frees.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value;

use crate::util::*;

/// Workspaces of about 10 KB; a budget of 256 KiB holds about a tenth.
const N: usize = 300;
const BUDGET: &str = "256KiB";

/// A counter or gauge of `/metrics`, 0 when absent.
async fn metric(bin: &Binary, series: &str) -> f64 {
    metric_at(bin.admin, series).await
}

async fn loads(bin: &Binary) -> f64 {
    metric(bin, "portfolio_replica_demand_loads_total{outcome=\"ok\"}").await
}

/// Status, version and body of `path` for `key`.
async fn answer(bin: &Binary, path: &str, key: &str) -> (u16, Option<String>, Vec<u8>) {
    let resp = get_from(bin.api, path, Some(key)).await.expect(path);
    let version = resp.header("x-snapshot-version").map(str::to_owned);
    (resp.status, version, resp.body)
}

const PATHS: [&str; 4] = [
    "/portfolio?limit=5",
    "/tasks?limit=3",
    "/feed?limit=2",
    "/roles",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_budget_answers_every_key_as_a_replica_holding_everything() {
    let dir = tempdir();
    let keys = generate_fleet(dir.path(), "micro", N).await;
    // A file that claims the key of the first workspace under another
    // workspace id: the conflict rule decides between them, the same way
    // with and without a budget.
    let first_file = keys.keys().next().expect("a workspace");
    let mut claimant: Value =
        serde_json::from_slice(&std::fs::read(dir.path().join(first_file)).unwrap()).unwrap();
    claimant["workspace_id"] = Value::from("ws-claimant");
    std::fs::write(
        dir.path().join("zz-claimant.json"),
        serde_json::to_vec(&claimant).unwrap(),
    )
    .unwrap();

    let all = Binary::start(dir.path(), &[], &[]).await;
    let budget = Binary::start(dir.path(), &["--memory-budget", BUDGET], &[]).await;
    let status: Value = get_from(budget.admin, "/snapshots", None)
        .await
        .expect("/snapshots")
        .json();
    let resident = status["files"]
        .as_array()
        .expect("files")
        .iter()
        .filter(|f| f["residency"] == "resident")
        .count();
    assert_eq!(resident, 0, "ready before any workspace is resident");

    // Twice over every key: the second round finds most evicted again.
    for round in 0..2 {
        for (file, key) in &keys {
            for path in PATHS {
                let expected = answer(&all, path, key).await;
                let got = answer(&budget, path, key).await;
                assert_eq!(expected.0, 200, "{file} {path}");
                assert_eq!(got, expected, "round {round}: {file} {path}");
            }
        }
    }
    let loaded = loads(&budget).await;
    assert!(
        loaded > N as f64 * 1.5,
        "evicted workspaces load again: {loaded} loads for {N} workspaces twice"
    );
    let evictions = metric(&budget, "portfolio_replica_evictions_total").await;
    assert!(evictions > 0.0, "the budget evicts");
    let held = metric(&budget, "portfolio_replica_resident_bytes").await;
    assert!(
        held > 0.0 && held <= 256.0 * 1024.0,
        "resident bytes {held} within the budget"
    );
    let hits = metric(
        &budget,
        "portfolio_replica_resident_lookups_total{result=\"hit\"}",
    )
    .await;
    assert!(hits > 0.0, "requests after a load hit");
}

/// `n` workspaces of about 10 KB under a budget of about six of them,
/// polled every 100 ms: the directory, file name → key, the replica.
async fn small_budget(n: usize) -> (tempfile::TempDir, BTreeMap<String, String>, Binary) {
    let dir = tempdir();
    let keys = generate_fleet(dir.path(), "micro", n).await;
    let args = ["--memory-budget", "64KiB", "--poll-interval", "100ms"];
    let bin = Binary::start(dir.path(), &args, &[]).await;
    (dir, keys, bin)
}

/// A workspace file and its key.
type Workspace<'a> = (&'a String, &'a String);

/// The first two workspaces of `keys`, one the test keeps resident (hot)
/// and one it does not (cold), and the others after them.
fn hot_cold_rest(
    keys: &BTreeMap<String, String>,
) -> (
    Workspace<'_>,
    Workspace<'_>,
    std::collections::btree_map::Iter<'_, String, String>,
) {
    let mut files = keys.iter();
    let hot = files.next().expect("a first workspace");
    let cold = files.next().expect("a second workspace");
    (hot, cold, files)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejected_version_never_serves_resident_or_not() {
    let (dir, keys, bin) = small_budget(40).await;
    let ((hot_file, hot_key), (cold_file, cold_key), files) = hot_cold_rest(&keys);
    let (_, hot_version, _) = answer(&bin, "/roles", hot_key).await;
    let (_, cold_version, _) = answer(&bin, "/roles", cold_key).await;
    // Used again, so that the hot one is resident when its file goes bad;
    // the cold one is pushed out by the others.
    answer(&bin, "/roles", hot_key).await;
    for (_, key) in files.clone().take(20) {
        answer(&bin, "/roles", key).await;
        answer(&bin, "/roles", hot_key).await;
    }

    for file in [hot_file, cold_file] {
        replace_bytes(dir.path(), file, b"{\"workspace_id\": \"broken\", ");
    }
    for file in [hot_file, cold_file] {
        let status = eventually_status(&bin, file).await;
        assert!(status["error"].is_string(), "{file}: {status}");
    }
    // The copies of the good versions serve, loaded again when needed.
    for round in 0..3 {
        for (key, version) in [(hot_key, &hot_version), (cold_key, &cold_version)] {
            let (status, served, _) = answer(&bin, "/portfolio", key).await;
            assert_eq!(status, 200, "round {round}");
            assert_eq!(&served, version, "round {round}: the good version serves");
        }
        for (_, key) in files.clone().take(20) {
            answer(&bin, "/roles", key).await;
        }
    }
}

/// The status of `file` once its current content has been judged as an error.
async fn eventually_status(bin: &Binary, file: &str) -> Value {
    let mut found = Value::Null;
    eventually("the bad file rejected", async || {
        let status: Value = get_from(bin.admin, "/snapshots", None).await?.json();
        let entry = status["files"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|f| f["file"] == file)
            .cloned()
            .ok_or("not listed")?;
        if entry["error"].is_null() {
            return Err(format!("not rejected yet: {entry}"));
        }
        found = entry;
        Ok(())
    })
    .await;
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_concurrent_first_requests_share_one_load() {
    let dir = tempdir();
    // Two workspaces of a few hundred kilobytes: a load takes long enough
    // for the fifty requests to meet it under way.
    let out = cli(&["generate", "--out", &dir.path().display().to_string()]).await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let key = "cura_demo_acme_key".to_owned();
    let bin = Binary::start(dir.path(), &["--memory-budget", "64MiB"], &[]).await;
    assert_eq!(loads(&bin).await, 0.0, "nothing loaded before a request");

    let requests = (0..50).map(|_| {
        let key = key.clone();
        let api = bin.api;
        tokio::spawn(async move { get_from(api, "/tasks?limit=100", Some(&key)).await })
    });
    let mut bodies = Vec::new();
    for request in requests {
        let resp = request.await.expect("joined").expect("answered");
        assert_eq!(resp.status, 200, "{}", resp.text());
        bodies.push(resp.body);
    }
    assert!(bodies.windows(2).all(|w| w[0] == w[1]), "identical bodies");
    assert_eq!(loads(&bin).await, 1.0, "one load for fifty first requests");
    let misses = metric(
        &bin,
        "portfolio_replica_resident_lookups_total{result=\"miss\"}",
    )
    .await;
    assert!(misses >= 1.0, "the first request missed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_load_on_demand_is_a_503_and_a_later_request_tries_again() {
    let dir = tempdir();
    let cache = tempdir();
    let keys = generate_fleet(dir.path(), "micro", 3).await;
    let bin = Binary::start(
        dir.path(),
        &[
            "--memory-budget",
            "1MiB",
            "--cache-dir",
            &cache.path().display().to_string(),
        ],
        &[],
    )
    .await;
    let copies = cache.path().join("copies");
    let aside = tempdir();
    let names: Vec<_> = std::fs::read_dir(&copies)
        .expect("the copies are under --cache-dir")
        .map(|e| e.unwrap().file_name())
        // What each copy validated is remembered beside it.
        .filter(|name| !name.to_string_lossy().ends_with(".facts"))
        .collect();
    assert_eq!(names.len(), keys.len(), "one copy per snapshot");
    // Moved aside, something unreadable in their place (a copy merely
    // gone is made again from the snapshot file: budget_loads.rs).
    for name in &names {
        std::fs::rename(copies.join(name), aside.path().join(name)).unwrap();
        std::fs::create_dir(copies.join(name)).unwrap();
    }
    let key = keys.values().next().unwrap();
    let resp = get_from(bin.api, "/portfolio", Some(key)).await.unwrap();
    assert_eq!(resp.status, 503, "{}", resp.text());
    assert_eq!(resp.header("retry-after"), Some("1"));
    let message = resp.json()["error"].as_str().unwrap_or_default().to_owned();
    assert!(message.contains("cannot be loaded"), "{message}");
    // A bad id is still a 400, before any load.
    let bad = get_from(bin.api, "/portfolio/not-a-uuid", Some(key))
        .await
        .unwrap();
    assert_eq!(bad.status, 400, "{}", bad.text());
    let failed = metric(
        &bin,
        "portfolio_replica_demand_loads_total{outcome=\"failed\"}",
    )
    .await;
    assert_eq!(failed, 1.0);
    assert!(bin.stderr_text().contains("load on demand failed"));

    for name in &names {
        std::fs::remove_dir(copies.join(name)).unwrap();
        std::fs::rename(aside.path().join(name), copies.join(name)).unwrap();
    }
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let resp = get_from(bin.api, "/portfolio", Some(key)).await.unwrap();
    assert_eq!(
        resp.status,
        200,
        "a later request loads it: {}",
        resp.text()
    );
}

/// The files of `/snapshots` refused for memory, by name.
async fn refused(bin: &Binary) -> Vec<String> {
    let status: Value = get_from(bin.admin, "/snapshots", None)
        .await
        .expect("/snapshots")
        .json();
    let mut names: Vec<String> = status["files"]
        .as_array()
        .expect("files")
        .iter()
        .filter(|f| {
            f["error"]
                .as_str()
                .is_some_and(|e| e.contains("memory limit"))
        })
        .map(|f| f["file"].as_str().unwrap().to_owned())
        .collect();
    names.sort();
    names
}

/// `--memory-limit` without a budget: the same files and limit refuse the
/// same workspaces at every start; a refused workspace's key gets a 503
/// with Retry-After, not the 401 of a wrong key; and refused workspaces
/// load once others leave and free their share.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_memory_limit_refuses_the_same_files_every_time_and_loads_them_when_memory_frees() {
    let dir = tempdir();
    let keys = generate_fleet(dir.path(), "micro", 200).await;
    // The process's own 32 MiB, and about a megabyte for workspaces.
    let args = ["--memory-limit", "33M", "--poll-interval", "100ms"];
    let first = Binary::start(dir.path(), &args, &[]).await;
    let refused_first = refused(&first).await;
    drop(first);
    let bin = Binary::start(dir.path(), &args, &[]).await;
    let refused_now = refused(&bin).await;
    assert!(
        !refused_now.is_empty() && refused_now.len() < keys.len(),
        "some refused, some served: {}",
        refused_now.len()
    );
    assert_eq!(
        refused_now, refused_first,
        "the same files refused at every start"
    );
    assert!(
        bin.stderr_text().contains("snapshot refused"),
        "the refusals are logged"
    );

    let refused_key = &keys[&refused_now[0]];
    let resp = get_from(bin.api, "/portfolio", Some(refused_key))
        .await
        .unwrap();
    assert_eq!(resp.status, 503, "{}", resp.text());
    assert!(resp.header("retry-after").is_some());
    // Why is the operator's (the log, /snapshots), not the client's.
    assert!(resp.text().contains("not available"), "{}", resp.text());
    let wrong = get_from(bin.api, "/portfolio", Some("cura_not_a_key_of_any"))
        .await
        .unwrap();
    assert_eq!(wrong.status, 401);

    // Served workspaces leave: the refused ones take their place.
    let served: Vec<&String> = keys.keys().filter(|f| !refused_now.contains(f)).collect();
    for file in served.iter().take(served.len() / 2) {
        std::fs::remove_file(dir.path().join(file)).unwrap();
    }
    eventually("a refused workspace loads once memory frees", async || {
        let resp = get_from(bin.api, "/portfolio", Some(refused_key)).await?;
        (resp.status == 200)
            .then_some(())
            .ok_or(format!("status {}", resp.status))
    })
    .await;
    let still = refused(&bin).await;
    assert!(
        still.len() < refused_now.len(),
        "{} still refused",
        still.len()
    );
}

/// New versions under a budget: a resident workspace's new version
/// replaces it, a non-resident one's is what its next request loads; and
/// a gzip answer of a workspace just loaded (its fragments not made yet)
/// decodes to the plain one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_versions_serve_resident_or_not_and_gzip_decodes_to_plain() {
    let (dir, keys, bin) = small_budget(30).await;
    let ((hot_file, hot_key), (cold_file, cold_key), others) = hot_cold_rest(&keys);
    // The hot one is asked for last, so that it is resident; the cold one
    // never was.
    answer(&bin, "/roles", hot_key).await;
    for (file, key) in [(hot_file, hot_key), (cold_file, cold_key)] {
        let path = dir.path().join(file);
        let mut snapshot: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        snapshot["version"] = Value::from(format!("new-{file}"));
        replace_json(dir.path(), file, &snapshot);
        let expected = format!("new-{file}");
        eventually("the new version serves", async || {
            let (status, version, _) = answer(&bin, "/portfolio", key).await;
            (status == 200 && version.as_deref() == Some(expected.as_str()))
                .then_some(())
                .ok_or(format!("{status} {version:?}"))
        })
        .await;
    }
    for (_, key) in others {
        let (plain, gz) = plain_and_gzip(bin.api, "/tasks?limit=100", key).await;
        assert_eq!(plain.status, 200);
        assert_eq!(
            gunzip(&gz.body),
            plain.body,
            "gzip decodes to the plain answer"
        );
    }
}

/// A file refused by `--memory-limit` at the first scan, its JSON larger
/// than what is free: its claims are read a value at a time, so its key
/// gets the 503 with `Retry-After: 30` that a refused workspace gets, not
/// the 401 of a wrong key, and `/snapshots` lists it under its workspace;
/// the refusal's advice fits whether a budget is set or not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_larger_than_the_free_memory_is_refused_with_its_keys_known() {
    let mut big = snapshot("ws-big", &["cura_big"]);
    add(&mut big, "companies", [company(1, "A")]);
    // About 5 MiB of JSON, a few hundred bytes a record.
    let tasks = (0..20_000).map(|i| task(100 + i, 1, "2026-03-01T10:00:00Z"));
    add(&mut big, "tasks", tasks);
    let bytes = serde_json::to_vec(&big).unwrap().len();
    assert!(bytes > 2 << 20, "larger than what is free: {bytes}");
    // The process's own 32 MiB and 1 MiB besides; with a budget of 1 MiB
    // (and a quarter of it for loads in flight), about as little is free.
    let limits: [(u64, Option<u64>, &str); 2] = [
        (33 << 20, None, "set --memory-budget"),
        (35 << 20, Some(1 << 20), "lower --memory-budget"),
    ];
    for (limit, budget, advice) in limits {
        let dir = tempdir();
        write_json(dir.path(), "big.json", &big);
        let server = TestServer::start_in(dir, |c| {
            c.memory_limit = Some(limit);
            c.memory_budget = budget;
        })
        .await;
        let resp = server.get("/portfolio", Some("cura_big")).await;
        assert_eq!(resp.status, 503, "budget {budget:?}: {}", resp.text());
        assert_eq!(resp.header("retry-after"), Some("30"), "budget {budget:?}");
        assert!(resp.text().contains("not available"), "{}", resp.text());
        let wrong = server.get("/portfolio", Some("cura_not_a_key")).await;
        assert_eq!(wrong.status, 401);

        let listed = server.admin_get("/snapshots?workspace=ws-big").await.json();
        let entry = &listed["files"][0];
        assert_eq!(entry["file"], "big.json", "{listed}");
        assert_eq!(entry["residency"], "not_resident", "{listed}");
        let error = entry["error"].as_str().unwrap_or_default();
        assert!(error.contains("memory limit"), "{error}");
        assert!(error.contains(advice), "budget {budget:?}: {error}");
        // Its keys are known, but it serves nothing.
        let series = "portfolio_replica_workspaces{state=\"serving\"}";
        assert_eq!(metric_at(server.admin, series).await, 0.0);
    }
}
