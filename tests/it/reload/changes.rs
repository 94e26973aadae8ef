//! (c) to (h) Deletion, polling, gzip, ConfigMap volumes, SIGHUP, conflicts;
//! (i) readiness; (j) scans only when something changed.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::Value;

use super::*;
use crate::util::*;

/// A server of two workspaces: acme at v1 and another at o1.
async fn acme_and_other() -> TestServer {
    let dir = tempdir();
    write_json(dir.path(), "acme.json", &acme("v1"));
    write_json(
        dir.path(),
        "other.json",
        &tagged_snapshot("ws-other", OTHER_KEY, "o1", 3),
    );
    let server = TestServer::start_in(dir, |_| {}).await;
    assert_serving(&server, KEY, "v1").await;
    server
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_file_unloads_its_workspace_and_no_other() {
    let server = acme_and_other().await;
    assert_serving(&server, OTHER_KEY, "o1").await;

    let stop = Arc::new(AtomicBool::new(false));
    let _stop_on_failure = StopOnDrop(Arc::clone(&stop));
    let other = tokio::spawn(keep_asking(server.api, OTHER_KEY, "o1", Arc::clone(&stop)));
    std::fs::remove_file(server.dir().join("acme.json")).expect("remove acme.json");
    wait_unauthorized(&server, KEY).await;
    // The other workspace is asked a little longer after the unload.
    tokio::time::sleep(Duration::from_millis(100)).await;
    stop.store(true, Ordering::Relaxed);
    let (requests, failures) = other.await.expect("the other client panicked");
    assert!(requests > 0, "the other workspace was never asked");
    assert!(
        failures.is_empty(),
        "{} of {requests} requests of the other workspace failed; the first ones:\n{}",
        failures.len(),
        failures[..failures.len().min(20)].join("\n")
    );
    assert_serving(&server, OTHER_KEY, "o1").await;
    wait_clean(&server, "other.json", "o1").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn polling_picks_up_a_create_a_replace_a_rewrite_and_a_delete() {
    let server = TestServer::start_in(tempdir(), |c| {
        c.poll_interval = Some(Duration::from_millis(50));
    })
    .await;
    server
        .get("/portfolio", Some(KEY))
        .await
        .assert_error(401, "before any file");

    write_json(server.dir(), "acme.json", &acme("v1"));
    wait_serving(&server, KEY, "v1").await;
    replace_json(server.dir(), "acme.json", &acme("v2"));
    wait_serving(&server, KEY, "v2").await;
    // A rewrite in place keeps the inode; the content still changes.
    write_json(server.dir(), "acme.json", &acme("v3"));
    wait_serving(&server, KEY, "v3").await;
    wait_clean(&server, "acme.json", "v3").await;
    std::fs::remove_file(server.dir().join("acme.json")).expect("remove acme.json");
    wait_unauthorized(&server, KEY).await;
}

/// Writes `value` gzipped to `dir/name.tmp` and renames it over `dir/name`.
fn replace_gzip(dir: &Path, name: &str, value: &Value) {
    replace_bytes(
        dir,
        name,
        &gzip(&serde_json::to_vec(value).expect("serialize")),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gzip_replacements_load_and_a_change_of_ending_keeps_the_workspace() {
    let dir = tempdir();
    write_json(dir.path(), "acme.json", &acme("v1"));
    let server = TestServer::start_in(dir, |_| {}).await;
    assert_serving(&server, KEY, "v1").await;

    // `acme.json` gives way to `acme.json.gz`: one is deleted, the other created.
    std::fs::remove_file(server.dir().join("acme.json")).expect("remove acme.json");
    replace_gzip(server.dir(), "acme.json.gz", &acme("v2"));
    wait_serving(&server, KEY, "v2").await;
    wait_clean(&server, "acme.json.gz", "v2").await;

    // A gzip file replaced by a rename.
    replace_gzip(server.dir(), "acme.json.gz", &acme("v3"));
    wait_serving(&server, KEY, "v3").await;
    wait_clean(&server, "acme.json.gz", "v3").await;

    // Back to `acme.json`, the other way round: the new file arrives first
    // and is refused while `acme.json.gz` serves, then takes over when
    // `acme.json.gz` goes.
    replace_json(server.dir(), "acme.json", &acme("v4"));
    let entry = server.wait_error("acme.json").await;
    assert_mentions(
        entry["error"].as_str().unwrap_or_default(),
        &["acme.json", "acme.json.gz"],
        "/snapshots of the second file of ws-acme",
    );
    assert_serving(&server, KEY, "v3").await;
    std::fs::remove_file(server.dir().join("acme.json.gz")).expect("remove acme.json.gz");
    wait_serving(&server, KEY, "v4").await;
    wait_clean(&server, "acme.json", "v4").await;
}

/// Publishes `value` as `acme.json` in the Kubernetes ConfigMap volume `dir`
/// the way the kubelet does: a new timestamped directory, a `..data_tmp`
/// symlink to it renamed over `..data`, and the previous directory removed.
fn configmap_update(dir: &Path, stamp: &str, value: &Value, previous: Option<&str>) {
    let data_dir = format!("..{stamp}");
    std::fs::create_dir(dir.join(&data_dir)).expect("create the data directory");
    write_json(&dir.join(&data_dir), "acme.json", value);
    std::os::unix::fs::symlink(&data_dir, dir.join("..data_tmp")).expect("symlink ..data_tmp");
    std::fs::rename(dir.join("..data_tmp"), dir.join("..data")).expect("rename over ..data");
    if let Some(previous) = previous {
        std::fs::remove_dir_all(dir.join(format!("..{previous}")))
            .expect("remove the previous data directory");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kubernetes_configmap_update_is_served() {
    let dir = tempdir();
    configmap_update(dir.path(), "2026_11_22_a", &acme("v1"), None);
    std::os::unix::fs::symlink("..data/acme.json", dir.path().join("acme.json"))
        .expect("symlink acme.json");
    let server = TestServer::start_in(dir, |_| {}).await;
    assert_serving(&server, KEY, "v1").await;

    configmap_update(
        server.dir(),
        "2026_11_22_b",
        &acme("v2"),
        Some("2026_11_22_a"),
    );
    wait_serving(&server, KEY, "v2").await;
    configmap_update(
        server.dir(),
        "2026_11_22_c",
        &acme("v3"),
        Some("2026_11_22_b"),
    );
    wait_serving(&server, KEY, "v3").await;
    wait_clean(&server, "acme.json", "v3").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_rescans_and_sigterm_exits_0() {
    let dir = tempdir();
    write_json(dir.path(), "acme.json", &acme("v1"));
    // The poll interval is an hour, and polling mode watches no file events:
    // within this test only SIGHUP makes the server look at the directory.
    // `Binary::start` returns once `/readyz` answers 200.
    let mut bin = Binary::start(dir.path(), &["--poll-interval", "3600000"], &[]).await;
    let api = bin.api;

    let version = async |path: &str| -> Result<String, String> {
        let resp = get_from(api, path, Some(KEY)).await?;
        match resp.header("x-snapshot-version") {
            Some(v) if resp.status == 200 => Ok(v.to_owned()),
            _ => Err(format!("status {}, body {}", resp.status, resp.text())),
        }
    };
    assert_eq!(version("/portfolio").await.as_deref(), Ok("v1"));

    replace_json(dir.path(), "acme.json", &acme("v2"));
    bin.signal("HUP");
    eventually("SIGHUP loads v2", async || {
        if let Some(status) = bin.exited() {
            panic!(
                "portfolio-replica exited with {status}:\n{}",
                bin.stderr_text()
            );
        }
        match version("/portfolio").await? {
            v if v == "v2" => Ok(()),
            v => Err(format!("version {v}")),
        }
    })
    .await;
    for path in ["/tasks", "/feed"] {
        assert_eq!(version(path).await.as_deref(), Ok("v2"), "GET {path}");
    }

    bin.signal("TERM");
    let status = bin.wait_exit(Duration::from_secs(10)).await;
    assert_eq!(
        status.code(),
        Some(0),
        "exit status after SIGTERM: {status}\n{}",
        bin.stderr_text()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_file_of_a_served_workspace_is_rejected_while_the_first_serves() {
    let dir = tempdir();
    write_json(dir.path(), "acme.json", &acme("v1"));
    let server = TestServer::start_in(dir, |_| {}).await;
    assert_serving(&server, KEY, "v1").await;

    let stop = Arc::new(AtomicBool::new(false));
    let _stop_on_failure = StopOnDrop(Arc::clone(&stop));
    let client = tokio::spawn(keep_asking(server.api, KEY, "v1", Arc::clone(&stop)));
    // The newcomer sorts before `acme.json` (`-` is below `.`), so "the
    // first file by name wins" would wrongly let it take over.
    replace_json(server.dir(), "acme-copy.json", &acme("v2"));
    let entry = server.wait_error("acme-copy.json").await;
    assert_mentions(
        entry["error"].as_str().unwrap_or_default(),
        &["acme.json", "acme-copy.json"],
        "/snapshots of the second file of ws-acme",
    );
    wait_clean(&server, "acme.json", "v1").await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    stop.store(true, Ordering::Relaxed);
    let (requests, failures) = client.await.expect("the client panicked");
    assert!(
        failures.is_empty(),
        "{} of {requests} requests did not get v1 while the second file arrived; the first ones:\n{}",
        failures.len(),
        failures[..failures.len().min(20)].join("\n")
    );
    assert_serving(&server, KEY, "v1").await;

    // With the first file gone, the second one no longer conflicts and serves.
    std::fs::remove_file(server.dir().join("acme.json")).expect("remove acme.json");
    wait_serving(&server, KEY, "v2").await;
    wait_clean(&server, "acme-copy.json", "v2").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_and_the_api_answer_503_until_the_first_scan_has_finished() {
    // A writer keeps `acme.json` growing (whitespace, which JSON allows
    // before a value) until told to finish it. The first scan cannot judge a
    // file still being written, so it cannot finish before the writer does.
    let dir = tempdir();
    let writer = SlowWriter::start(
        &dir.path().join("acme.json"),
        &acme("v1"),
        Duration::from_secs(30),
    );
    let mut server = TestServer::spawn_in(dir, |_| {}).await;

    // The listener answers at once; the data does not.
    let health = server.get("/healthz", None).await;
    assert_eq!(health.status, 200, "/healthz: {}", health.text());
    for round in 0..3 {
        let ready = server.get("/readyz", None).await;
        assert_eq!(
            ready.status,
            503,
            "/readyz (round {round}) before the first scan finished: {}",
            ready.text()
        );
        for path in ["/portfolio", "/tasks", "/feed"] {
            server.get(path, Some(KEY)).await.assert_error(
                503,
                &format!("GET {path} (round {round}) before the first scan finished"),
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    writer.finish();
    server.wait_ready().await;
    assert_serving(&server, KEY, "v1").await;
    wait_clean(&server, "acme.json", "v1").await;
}

/// (j) An idle replica watching its directory does not scan (its own
/// reading of the directory is a file event too, which once made it scan
/// about ten times a second, starving the precompression of thousands of
/// workspaces on one core), and a file renamed into place is served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_replica_does_not_scan_and_a_rename_is_scanned() {
    const SCANS: &str = "portfolio_replica_snapshot_scans_total";
    let server = acme_and_other().await;
    let idle = metric_at(server.admin, SCANS).await;
    assert!(idle >= 1.0, "the first scan is counted: {idle}");
    // Requests and /snapshots read what the scans made, and start none.
    for _ in 0..5 {
        assert_serving(&server, OTHER_KEY, "o1").await;
        get_from(server.admin, "/snapshots", None)
            .await
            .expect("/snapshots");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    assert_eq!(
        metric_at(server.admin, SCANS).await,
        idle,
        "an idle replica scanned"
    );

    // Written just now elsewhere and renamed into place.
    write_json(server.dir(), ".acme.json.tmp", &acme("v2"));
    std::fs::rename(
        server.dir().join(".acme.json.tmp"),
        server.dir().join("acme.json"),
    )
    .expect("rename");
    wait_serving(&server, KEY, "v2").await;
    assert!(metric_at(server.admin, SCANS).await > idle);
}
