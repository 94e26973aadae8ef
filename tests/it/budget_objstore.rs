//! A memory budget over a manifest in object storage (a real S3 protocol
//! server, moto, on loopback): the replica is ready once it has read the
//! manifest's records, without downloading a snapshot; every key answers
//! as on a replica that downloaded everything; an object that fails its
//! checks on its first load answers 503 and shows as failing, while the
//! other workspaces serve.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value;

use crate::util::*;

const POLL_EVERY: Duration = Duration::from_millis(100);

/// A counter of `/metrics`, 0 when absent.
async fn counter(server: &TestServer, series: &str) -> f64 {
    let text = server.admin_get("/metrics").await.text();
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .map_or(0.0, |value| value.trim().parse().expect("a number"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manifest_catalog_serves_without_downloading_until_asked() {
    let s3 = S3::start().await;
    let (url, env) = (s3.url("m"), s3.env());
    let dir = tempdir();
    let out = cli(&[
        "generate",
        "--out",
        &dir.path().display().to_string(),
        "--scale",
        "micro",
        "--workspaces",
        "12",
    ])
    .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let keys: BTreeMap<String, String> = std::fs::read_to_string(dir.path().join("keys.tsv"))
        .expect("keys.tsv")
        .lines()
        .skip(1)
        .map(|line| {
            let fields: Vec<&str> = line.split('\t').collect();
            (fields[0].to_owned(), fields[2].to_owned())
        })
        .collect();
    let files: Vec<_> = keys
        .keys()
        .map(|ws| {
            dir.path()
                .join(format!("{}.json", ws.trim_start_matches("ws-")))
        })
        .collect();
    let out = publish_to(&url, &files, &env).await;
    assert_eq!(out.code, Some(0), "{out:?}");

    let all = TestServer::start_in(tempdir(), |c| s3.configure(c, "m", POLL_EVERY)).await;
    let budget = TestServer::start_in(tempdir(), |c| {
        s3.configure(c, "m", POLL_EVERY);
        c.memory_budget = Some(64 << 10);
    })
    .await;
    // Both read the manifest and its records; only the one without a
    // budget downloaded the snapshots.
    let mut objects_bytes = 0;
    for object in s3.keys("m/objects/").await {
        objects_bytes += s3.get(&object).await.expect("an object").len();
    }
    let fetched = "portfolio_replica_source_bytes_fetched_total";
    let (by_budget, by_all) = (
        counter(&budget, fetched).await,
        counter(&all, fetched).await,
    );
    assert!(
        by_budget + objects_bytes as f64 <= by_all,
        "ready without downloading a snapshot: {by_budget} bytes against {by_all}, {objects_bytes} of them snapshots"
    );
    assert_eq!(
        counter(
            &budget,
            "portfolio_replica_demand_loads_total{outcome=\"ok\"}"
        )
        .await,
        0.0
    );
    let status: Value = budget.admin_get("/snapshots").await.json();
    let serving = status["files"].as_array().expect("files");
    assert_eq!(serving.len(), keys.len());
    assert!(
        serving
            .iter()
            .all(|f| f["residency"] == "not_resident" && f["error"].is_null())
    );

    // One workspace's object damaged in storage before anyone asked for it.
    let (damaged_ws, damaged_key) = keys.iter().next().unwrap();
    let objects = s3.keys(&format!("m/objects/{damaged_ws}")).await;
    assert_eq!(objects.len(), 1, "{objects:?}");
    s3.put(&objects[0], b"{\"not\": \"the published bytes\"}".to_vec())
        .await;

    for (ws, key) in keys.iter().skip(1) {
        for path in ["/portfolio?limit=3", "/feed?limit=2", "/roles"] {
            let expected = all.get(path, Some(key)).await;
            let got = budget.get(path, Some(key)).await;
            assert_eq!(got.status, 200, "{ws} {path}: {}", got.text());
            assert_eq!(got.body, expected.body, "{ws} {path}");
            assert_eq!(
                got.header("x-snapshot-version"),
                expected.header("x-snapshot-version")
            );
        }
    }
    assert!(
        counter(&budget, fetched).await > by_budget,
        "downloaded when asked"
    );

    let resp = budget.get("/portfolio", Some(damaged_key)).await;
    assert_eq!(resp.status, 503, "{}", resp.text());
    assert!(resp.header("retry-after").is_some());
    let entry = budget
        .snapshot_status(damaged_ws)
        .await
        .expect("the damaged workspace is listed");
    assert!(
        entry["error"].as_str().is_some_and(|e| !e.is_empty()),
        "shown as failing: {entry}"
    );
    let failed = counter(
        &budget,
        "portfolio_replica_demand_loads_total{outcome=\"failed\"}",
    )
    .await;
    assert!(failed >= 1.0);
}
