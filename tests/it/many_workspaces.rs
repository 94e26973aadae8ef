//! Many small workspaces in one replica, through the real binary, at a scale
//! CI affords: the first scan (small files loaded on every core, published
//! in batches) serves every workspace with its own key before /readyz says
//! ready, and a burst of rewrites serves every new version, none older.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use serde_json::Value;

use crate::util::*;

const N: usize = 240;

/// `generate --scale micro --workspaces N` into `dir`: file name → key.
async fn fleet(dir: &Path) -> BTreeMap<String, String> {
    generate_fleet(dir, "micro", N).await
}

async fn version(bin: &Binary, key: &str) -> Option<String> {
    let answer = get_from(bin.api, "/portfolio", Some(key)).await.ok()?;
    if answer.status != 200 {
        return None;
    }
    answer.header("x-snapshot-version").map(str::to_owned)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_workspace_serves_once_ready_and_a_burst_of_rewrites_lands_whole() {
    let dir = tempdir();
    let keys = fleet(dir.path()).await;
    assert_eq!(keys.len(), N);
    let bin = Binary::start(dir.path(), &["--poll-interval", "100ms"], &[]).await;

    let status: Value = get_from(bin.admin, "/snapshots", None)
        .await
        .expect("/snapshots")
        .json();
    assert_eq!(
        status["summary"]["serving"], N,
        "ready means every file judged: {}",
        status["summary"]
    );
    for (file, key) in &keys {
        let snapshot: Value =
            serde_json::from_slice(&std::fs::read(dir.path().join(file)).expect("read"))
                .expect("JSON");
        let served = version(&bin, key).await;
        assert_eq!(served.as_deref(), snapshot["version"].as_str(), "{file}");
    }

    // A tenth of the files rewritten at once: every one serves its new
    // version, and no answer ever goes back to an old one.
    let burst: Vec<(&String, &String)> = keys.iter().take(N / 10).collect();
    for (file, _) in &burst {
        let path = dir.path().join(file);
        let mut snapshot: Value =
            serde_json::from_slice(&std::fs::read(&path).expect("read")).expect("JSON");
        snapshot["version"] = Value::from(format!("burst-{file}"));
        replace_json(dir.path(), file, &snapshot);
    }
    let mut seen_new: HashMap<&str, bool> = HashMap::new();
    eventually(
        "every rewritten workspace serves its new version",
        async || {
            let mut pending = 0;
            for (file, key) in &burst {
                let served = version(&bin, key).await.unwrap_or_default();
                let is_new = served == format!("burst-{file}");
                let was_new = seen_new.insert(file.as_str(), is_new).unwrap_or(false);
                assert!(is_new || !was_new, "{file} went back to {served}");
                pending += usize::from(!is_new);
            }
            if pending == 0 {
                Ok(())
            } else {
                Err(format!("{pending} still old"))
            }
        },
    )
    .await;
}
