//! The manifest that does not grow with the fleet
//! (docs/object-storage.md#the-manifest), against a real S3 protocol
//! server: a publish writes a small root whatever the number of
//! workspaces, a replica follows its journal and reads the workspace
//! records when it starts; a format-1 manifest still serves and `migrate`
//! carries it over; and a format this build does not know keeps a replica
//! serving what it has, saying why.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};

use crate::util::*;

const POLL_EVERY: Duration = Duration::from_millis(100);

/// The most a publish may write, and a replica read, of shared state.
const SHARED_BYTES: usize = 64 << 10;

fn versioned(workspace: &str, key: &str, version: &str) -> Value {
    let mut snap = fixture(workspace, &[key], 1);
    snap["version"] = json!(version);
    snap
}

async fn publish(s3: &S3, prefix: &str, files: &[PathBuf]) -> CliOutput {
    publish_to(&s3.url(prefix), files, &s3.env()).await
}

/// Publishes `version` of `workspace` (opened by `key`) and expects it to pass.
async fn publish_one(s3: &S3, prefix: &str, workspace: &str, key: &str, version: &str) {
    let files = tempdir();
    let path = write_json(
        files.path(),
        &format!("{workspace}.json"),
        &versioned(workspace, key, version),
    );
    let out = publish(s3, prefix, &[path]).await;
    assert_eq!(out.code, Some(0), "{out:?}");
}

async fn replica(s3: &S3, prefix: &str) -> TestServer {
    TestServer::start_in(tempdir(), |c| s3.configure(c, prefix, POLL_EVERY)).await
}

#[tokio::test]
async fn a_publish_writes_a_small_root_and_replicas_read_records_only_when_they_must() {
    let s3 = S3::start().await;
    let files = tempdir();
    // More workspaces in one publish than the root's journal keeps.
    let count = 150;
    let paths: Vec<PathBuf> = (0..count)
        .map(|n| {
            write_json(
                files.path(),
                &format!("ws{n}.json"),
                &versioned(&format!("ws-{n}"), &format!("cura_ws_{n}"), "v1"),
            )
        })
        .collect();
    let out = publish(&s3, "p", &paths).await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let root = s3.get("p/manifest.json").await.expect("a root");
    assert!(root.len() <= SHARED_BYTES, "{} bytes", root.len());

    // A replica that starts now reads every record: the journal no longer
    // reaches back to the first publish.
    let server = replica(&s3, "p").await;
    for n in [0, 77, count - 1] {
        server
            .wait_version("/portfolio", &format!("cura_ws_{n}"), "v1")
            .await;
    }
    let summary = server.admin_get("/snapshots").await.json();
    assert_eq!(
        summary["summary"]["serving"], count,
        "{}",
        summary["summary"]
    );

    // Following one more publish costs the root and the object: no listing
    // and no record read, and the root is as small as before.
    let before = s3.proxy.counts();
    publish_one(&s3, "p", "ws-5", "cura_ws_5", "v2").await;
    server.wait_version("/portfolio", "cura_ws_5", "v2").await;
    let after = s3.proxy.counts();
    let delta = |kind| after.get(kind).unwrap_or(&0) - before.get(kind).unwrap_or(&0);
    assert_eq!(delta("list"), 0, "{before:?} -> {after:?}");
    let root = s3.get("p/manifest.json").await.expect("a root");
    assert!(root.len() <= SHARED_BYTES, "{} bytes", root.len());
}

#[tokio::test]
async fn ten_publishers_of_different_workspaces_all_land() {
    // Through a proxy that passes requests one at a time: moto's own check
    // of a conditional write is not atomic across its threads.
    let s3 = S3::start_with(true).await;
    let files = tempdir();
    let server = replica(&s3, "ten").await;
    let runs = (0..10).map(|n| {
        let path = write_json(
            files.path(),
            &format!("ws{n}.json"),
            &versioned(&format!("ws-{n}"), &format!("cura_ten_{n}"), "v1"),
        );
        let s3 = &s3;
        async move { publish(s3, "ten", &[path]).await }
    });
    for out in futures_util::future::join_all(runs).await {
        assert_eq!(out.code, Some(0), "{out:?}");
    }
    let view = s3.versions("ten").await.expect("a manifest");
    assert_eq!(view["manifest"]["revision"], 10, "{view}");
    assert_eq!(view["workspaces"].as_object().unwrap().len(), 10, "{view}");
    for n in 0..10 {
        server
            .wait_version("/portfolio", &format!("cura_ten_{n}"), "v1")
            .await;
    }
}

#[tokio::test]
async fn a_format_1_manifest_still_serves_and_migrate_carries_it_over() {
    let s3 = S3::start().await;
    let env = s3.env();
    let url = s3.url("old");
    publish_one(&s3, "old", "ws-a", KEY, "a1").await;
    publish_one(&s3, "old", "ws-a", KEY, "a2").await;
    publish_one(&s3, "old", "ws-b", OTHER_KEY, "b1").await;
    // The same fleet as an older build wrote it: one document.
    let view = s3.versions("old").await.expect("a manifest");
    for key in [s3.keys("old/workspaces").await, s3.keys("old/keys").await].concat() {
        s3.delete(&key).await;
    }
    let format_1 = json!({"manifest_version": 1, "revision": 3,
        "updated_at": "2026-11-20T10:00:00.000Z", "workspaces": view["workspaces"]});
    s3.put_json("old/manifest.json", &format_1).await;

    let server = replica(&s3, "old").await;
    server.wait_version("/portfolio", KEY, "a2").await;
    server.wait_version("/portfolio", OTHER_KEY, "b1").await;
    let out = cli_env(&["versions", "--to", &url], &env).await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(
        out.stdout.contains("format 1") && out.stdout.contains(" a1 "),
        "{out:?}"
    );

    // This build does not write format 1: it says what to run.
    let files = tempdir();
    let a3 = write_json(files.path(), "a3.json", &versioned("ws-a", KEY, "a3"));
    let out = publish(&s3, "old", std::slice::from_ref(&a3)).await;
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(out.stderr.contains("portfolio-replica migrate"), "{out:?}");

    let out = cli_env(&["migrate", "--to", &url], &env).await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(out.stdout.contains("2 workspace record(s)"), "{out:?}");
    let migrated = s3.versions("old").await.expect("a manifest");
    assert_eq!(migrated["manifest"]["manifest_version"], 2, "{migrated}");
    assert_eq!(migrated["workspaces"], view["workspaces"], "history kept");
    let out = cli_env(&["migrate", "--to", &url], &env).await;
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(out.stderr.contains("format 2 already"), "{out:?}");

    // The replica keeps serving through the migration and follows on.
    let out = publish(&s3, "old", &[a3]).await;
    assert_eq!(out.code, Some(0), "{out:?}");
    server.wait_version("/portfolio", KEY, "a3").await;
    assert_eq!(
        server.get("/portfolio", Some(OTHER_KEY)).await.status,
        200,
        "ws-b serves throughout"
    );
    let out = cli_env(&["rollback", "ws-a", "--to", &url, "--version", "a1"], &env).await;
    assert_eq!(out.code, Some(0), "{out:?}");
    server.wait_version("/portfolio", KEY, "a1").await;

    // Publishing the content that serves (a1, brought back by the
    // rollback) changes nothing: no new revision, the history's order kept.
    let before = s3.versions("old").await.expect("a manifest");
    let a1 = write_json(files.path(), "a1.json", &versioned("ws-a", KEY, "a1"));
    let out = publish(&s3, "old", &[a1]).await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(out.stdout.contains("unchanged: ws-a serves a1"), "{out:?}");
    assert!(out.stdout.contains("manifest unchanged"), "{out:?}");
    assert_eq!(s3.versions("old").await, Some(before));
}

#[tokio::test]
async fn a_manifest_format_it_does_not_know_keeps_a_replica_serving_and_says_why() {
    let s3 = S3::start().await;
    publish_one(&s3, "new", "ws-a", KEY, "a1").await;
    let server = replica(&s3, "new").await;
    server.wait_version("/portfolio", KEY, "a1").await;
    let good = s3.get("new/manifest.json").await.unwrap();

    s3.put_json(
        "new/manifest.json",
        &json!({"manifest_version": 3, "shards": []}),
    )
    .await;
    let mut body = Value::Null;
    eventually("/snapshots reports the unknown format", async || {
        body = server.admin_get("/snapshots").await.json();
        match body["source"]["error"].as_str() {
            Some(e) if e.contains("manifest_version 3") => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    let error = body["source"]["error"].as_str().unwrap();
    assert!(error.contains("upgrade the replicas"), "{error}");
    assert_eq!(body["source"]["error_kind"], "manifest", "{body}");
    let answer = server.get("/portfolio", Some(KEY)).await;
    assert_eq!(answer.status, 200, "still serving");
    assert_eq!(answer.header("x-snapshot-version"), Some("a1"));

    // A manifest it knows again: it follows on.
    s3.put("new/manifest.json", good).await;
    publish_one(&s3, "new", "ws-a", KEY, "a2").await;
    server.wait_version("/portfolio", KEY, "a2").await;
}
