//! Hot reload (docs/reload.md): files replaced, rewritten, deleted and added
//! while the server runs, seen through file events, polling, SIGHUP and a
//! Kubernetes ConfigMap volume. Every response comes from one snapshot
//! version even while the file churns; a rejected replacement keeps the
//! previous version serving and is reported on `/snapshots` (§6) until a good
//! file replaces it; `/readyz` and the API answer 503 until the first scan.
//!
//! Every snapshot here tags its records with its `version`: company names,
//! task titles and feed titles all start with it, so a response that mixes
//! two versions, or that disagrees with its `X-Snapshot-Version`, shows.
//!
//! This file holds the tagged snapshots and the waits every test shares;
//! `churn` is (a), consistency under churn; `rejected` is (b), a rejected
//! replacement; `changes` is (c) to (h) and (i), deletion, polling, gzip,
//! ConfigMap volumes, SIGHUP, conflicts and readiness; `reuse` is (j), a
//! replaced file's unchanged records taken over.

mod changes;
mod churn;
mod rejected;
mod reuse;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::{Value, json};

use crate::util::*;

/// The workspace of `acme.json`, the file most tests change.
const ACME: &str = "ws-acme";

// ---------------------------------------------------------------------------
// Snapshots tagged with their version.
// ---------------------------------------------------------------------------

/// Returns the timestamp of the `i`th record of a kind: a greater `i` is newer.
fn at(i: u64) -> String {
    format!("2026-03-01T10:{:02}:{:02}Z", i / 60, i % 60)
}

/// Returns a snapshot of `workspace`, readable with `key`, whose `version` is
/// `version` and whose `count` companies, tasks and feed entries carry that
/// version as the first word of their name or title.
fn tagged_snapshot(workspace: &str, key: &str, version: &str, count: u64) -> Value {
    let mut snap = snapshot(workspace, &[key]);
    snap["version"] = json!(version);
    add(
        &mut snap,
        "companies",
        (1..=count).map(|i| company(i, &format!("{version} company {i:02}"))),
    );
    add(
        &mut snap,
        "tasks",
        (1..=count).map(|i| {
            with(
                task(100 + i, i, &at(i)),
                json!({ "title": format!("{version} task {i:02}") }),
            )
        }),
    );
    add(
        &mut snap,
        "feed",
        (1..=count).map(|i| {
            with(
                feed_entry(200 + i, i, &at(i)),
                json!({ "title": format!("{version} feed {i:02}") }),
            )
        }),
    );
    snap
}

/// Returns a snapshot of `ws-acme`, readable with `KEY`, of three records of
/// each kind tagged with `version`.
fn acme(version: &str) -> Value {
    tagged_snapshot(ACME, KEY, version, 3)
}

/// Returns why some record of the list `body` does not carry `version` as the
/// first word of its `field`, if one does not.
fn untagged(body: &Value, field: &str, version: &str) -> Option<String> {
    let Some(data) = body["data"].as_array() else {
        return Some(format!("no data array in {body}"));
    };
    data.iter().find_map(|rec| {
        let text = rec["attributes"][field].as_str().unwrap_or_default();
        (text.split(' ').next() != Some(version)).then(|| {
            format!(
                "record {} has {field} {text:?} in a response of version {version}",
                rec["id"]
            )
        })
    })
}

/// Returns why `GET path` with `key` is not a 200 of `version` whose records
/// all carry `version` in `field`, if it is not.
async fn version_problem(
    server: &TestServer,
    key: &str,
    path: &str,
    field: &str,
    version: &str,
) -> Option<String> {
    let resp = server.get(path, Some(key)).await;
    if resp.status != 200 {
        return Some(format!(
            "GET {path}: status {}, body {}",
            resp.status,
            resp.text()
        ));
    }
    let served = resp.header("x-snapshot-version");
    if served != Some(version) {
        return Some(format!(
            "GET {path}: X-Snapshot-Version {served:?} instead of {version:?}"
        ));
    }
    let body = resp.json();
    if body["data"].as_array().is_none_or(Vec::is_empty) {
        return Some(format!("GET {path}: no records in {body}"));
    }
    untagged(&body, field, version).map(|p| format!("GET {path}: {p}"))
}

/// Returns why the lists of the workspace of `key` are not all served from
/// `version`, if they are not.
async fn serving_problem(server: &TestServer, key: &str, version: &str) -> Option<String> {
    for (path, field) in [
        ("/portfolio", "name"),
        ("/tasks", "title"),
        ("/feed", "title"),
    ] {
        if let Some(problem) = version_problem(server, key, path, field, version).await {
            return Some(problem);
        }
    }
    None
}

/// Fails unless the workspace of `key` is served from `version` right now.
async fn assert_serving(server: &TestServer, key: &str, version: &str) {
    if let Some(problem) = serving_problem(server, key, version).await {
        panic!("version {version} is not served: {problem}");
    }
}

/// Waits until the workspace of `key` is served from `version`.
async fn wait_serving(server: &TestServer, key: &str, version: &str) {
    eventually(&format!("version {version} is served"), async || {
        serving_problem(server, key, version)
            .await
            .map_or(Ok(()), Err)
    })
    .await;
}

/// Waits until the workspace of `key` answers 401, and checks the answer.
async fn wait_unauthorized(server: &TestServer, key: &str) {
    eventually("the key is refused", async || {
        let resp = server.get("/portfolio", Some(key)).await;
        match resp.status {
            401 => Ok(()),
            status => Err(format!("status {status}, body {}", resp.text())),
        }
    })
    .await;
    for path in ["/portfolio", "/tasks", "/feed"] {
        server
            .get(path, Some(key))
            .await
            .assert_error(401, &format!("GET {path} of an unloaded workspace"));
    }
}

/// Waits until admin `/snapshots` lists `file` as serving `version`, without error.
async fn wait_clean(server: &TestServer, file: &str, version: &str) {
    eventually(
        &format!("/snapshots shows {file} serving {version} without error"),
        async || match server.snapshot_status(file).await {
            Some(entry) if entry["error"].is_null() && entry["version"] == json!(version) => {
                if entry["workspace"].is_string() {
                    Ok(())
                } else {
                    Err(format!("no workspace in {entry}"))
                }
            }
            other => Err(format!("entry {other:?}")),
        },
    )
    .await;
}

/// Fails unless `error` mentions every word of `words`.
fn assert_mentions(error: &str, words: &[&str], context: &str) {
    let missing: Vec<&&str> = words.iter().filter(|w| !error.contains(**w)).collect();
    assert!(
        missing.is_empty(),
        "{context}: the error does not mention {missing:?}: {error}"
    );
}

/// Renames a new symlink to `target` over `dir/name`.
fn replace_by_symlink(dir: &Path, name: &str, target: &str) {
    let tmp = dir.join(format!("{name}.tmp"));
    std::os::unix::fs::symlink(target, &tmp).expect("create a symlink");
    std::fs::rename(&tmp, dir.join(name)).expect("rename a symlink into place");
}

/// Sets `stop` when dropped, so that a failing test stops its helpers.
struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Sends `GET /portfolio` with `key` to `api` until `stop` is set and
/// returns how many requests were sent and every answer that was not a 200
/// of `version`.
async fn keep_asking(
    api: SocketAddr,
    key: &'static str,
    version: &'static str,
    stop: Arc<AtomicBool>,
) -> (usize, Vec<String>) {
    let mut requests = 0;
    let mut failures = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        requests += 1;
        match get_from(api, "/portfolio", Some(key)).await {
            Ok(resp)
                if resp.status == 200 && resp.header("x-snapshot-version") == Some(version) => {}
            Ok(resp) => failures.push(format!(
                "status {}, version {:?}, body {}",
                resp.status,
                resp.header("x-snapshot-version"),
                resp.text()
            )),
            Err(e) => failures.push(e),
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    (requests, failures)
}
