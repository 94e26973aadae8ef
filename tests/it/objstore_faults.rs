//! Replicas survive their storage (docs/object-storage.md#when-storage-fails):
//! throttling, server errors, a timeout, a body cut short, an object deleted
//! between the listing and the download, a manifest that is not JSON or
//! names a missing object, storage gone while serving, and storage down at
//! startup with a warm cache. Each is shown in /snapshots and counted, is
//! logged once, and unloads nothing. Faults come from the proxy of
//! `util::proxy` in front of moto, or from stopping moto itself.

use std::time::Duration;

use serde_json::{Value, json};

use crate::util::*;

const POLL_EVERY: Duration = Duration::from_millis(100);

fn versioned(workspace: &str, key: &str, version: &str) -> Value {
    let mut snap = fixture(workspace, &[key], 1);
    snap["version"] = json!(version);
    snap
}

/// Publishes `version` of ws-acme to `prefix`, straight to moto (around
/// the proxy and its faults).
async fn publish(s3: &S3, prefix: &str, version: &str) {
    let files = tempdir();
    let path = write_json(
        files.path(),
        "acme.json",
        &versioned("ws-acme", KEY, version),
    );
    let url = s3.url(prefix);
    let out = publish_to(&url, &[&path], &s3.direct_env()).await;
    assert_eq!(out.code, Some(0), "{out:?}");
}

async fn replica(s3: &S3, prefix: &str) -> TestServer {
    TestServer::start_in(tempdir(), |c| s3.configure(c, prefix, POLL_EVERY)).await
}

/// Waits until the source (`entry: None`) or the entry `name` of
/// /snapshots reports an error of `kind`; returns the whole body.
async fn wait_kind(server: &TestServer, entry: Option<&str>, kind: &str) -> Value {
    let mut body = Value::Null;
    eventually(&format!("/snapshots reports {kind}"), async || {
        body = server.admin_get("/snapshots").await.json();
        let seen = match entry {
            None => body["source"]["error_kind"].clone(),
            Some(name) => body["files"]
                .as_array()
                .and_then(|f| f.iter().find(|e| e["file"] == name))
                .map_or(Value::Null, |e| e["source_error_kind"].clone()),
        };
        if seen == kind {
            Ok(())
        } else {
            Err(format!("{body}"))
        }
    })
    .await;
    body
}

/// The served version, which must be a 200.
async fn serving(server: &TestServer) -> String {
    let resp = server.get("/portfolio", Some(KEY)).await;
    assert_eq!(resp.status, 200, "{}", resp.text());
    resp.header("x-snapshot-version").unwrap().to_owned()
}

/// Waits for `version` once a fault that backs polling off is gone: the
/// next poll is at most the backoff's cap (30 s, +20%) away.
async fn wait_after_outage(server: &TestServer, version: &str) {
    eventually_within(
        &format!("{version} after the outage"),
        Duration::from_secs(45),
        async || match server
            .get("/portfolio", Some(KEY))
            .await
            .header("x-snapshot-version")
        {
            Some(v) if v == version => Ok(()),
            other => Err(format!(
                "{other:?}; /snapshots: {}",
                server.admin_get("/snapshots").await.text()
            )),
        },
    )
    .await;
}

async fn errors_of(server: &TestServer, kind: &str) -> f64 {
    let (_, samples) = scrape(server).await;
    value_of(
        &samples,
        "portfolio_replica_source_errors_total",
        &[("kind", kind)],
    )
    .unwrap_or(0.0)
}

#[tokio::test]
async fn throttling_and_server_errors_unload_nothing() {
    let s3 = S3::start().await;
    publish(&s3, "t", "v1").await;
    let server = replica(&s3, "t").await;
    server.wait_version("/portfolio", KEY, "v1").await;

    // 503 SlowDown on every request: the poll fails, v1 serves.
    s3.proxy.set(Fault::Status(503, "SlowDown"), Scope::All);
    publish(&s3, "t", "v2").await;
    let body = wait_kind(&server, None, "throttling").await;
    assert!(
        body["source"]["error"].as_str().unwrap().contains("503"),
        "{body}"
    );
    assert_eq!(serving(&server).await, "v1");
    assert!(errors_of(&server, "throttling").await >= 1.0);
    s3.proxy.clear();
    wait_after_outage(&server, "v2").await;
    eventually("the source error clears", async || {
        let body = server.admin_get("/snapshots").await.json();
        if body["source"]["error"].is_null() {
            Ok(())
        } else {
            Err(body.to_string())
        }
    })
    .await;

    // 500 on the download only: the manifest is read, the object is not.
    s3.proxy
        .set(Fault::Status(500, "InternalError"), Scope::Objects);
    publish(&s3, "t", "v3").await;
    let body = wait_kind(&server, Some("ws-acme"), "server_error").await;
    assert_eq!(body["files"][0]["serving_version"], "v2", "{body}");
    assert_eq!(serving(&server).await, "v2");
    s3.proxy.clear();
    wait_after_outage(&server, "v3").await;
    let body = server.admin_get("/snapshots").await.json();
    assert_eq!(body["files"][0]["source_error"], Value::Null, "{body}");
}

#[tokio::test]
async fn a_request_that_never_answers_times_out() {
    let s3 = S3::start().await;
    publish(&s3, "s", "v1").await;
    let server = replica(&s3, "s").await;
    server.wait_version("/portfolio", KEY, "v1").await;
    s3.proxy.set(Fault::Stall, Scope::All);
    let body = wait_kind(&server, None, "timeout").await;
    assert!(body["source"]["consecutive_failures"].as_u64().unwrap() >= 1);
    assert_eq!(serving(&server).await, "v1");
    s3.proxy.clear();
    publish(&s3, "s", "v2").await;
    wait_after_outage(&server, "v2").await;
}

#[tokio::test]
async fn a_body_shorter_than_its_length_is_not_loaded() {
    let s3 = S3::start().await;
    s3.put_json("b/acme.json", &versioned("ws-acme", KEY, "a1"))
        .await;
    let server = replica(&s3, "b").await;
    server.wait_version("/portfolio", KEY, "a1").await;
    s3.proxy.set(Fault::Truncate, Scope::Objects);
    s3.put_json("b/acme.json", &versioned("ws-acme", KEY, "a2"))
        .await;
    let body = wait_kind(&server, Some("acme.json"), "incomplete").await;
    let entry = &body["files"][0];
    assert!(
        entry["source_error"]
            .as_str()
            .unwrap()
            .contains("broke off"),
        "{entry}"
    );
    assert_eq!(
        entry["error"],
        Value::Null,
        "a download problem is not a rejection"
    );
    assert_eq!(serving(&server).await, "a1");
    let (_, samples) = scrape(&server).await;
    assert_eq!(
        value_of(
            &samples,
            "portfolio_replica_snapshot_load_failures_total",
            &[]
        ),
        Some(0.0),
        "nothing was rejected"
    );
    s3.proxy.clear();
    wait_after_outage(&server, "a2").await;
}

#[tokio::test]
async fn an_object_deleted_between_list_and_get_unloads_only_when_listed_gone() {
    let s3 = S3::start().await;
    s3.put_json("d/acme.json", &versioned("ws-acme", KEY, "a1"))
        .await;
    let mut env = s3.env();
    env.push(("RUST_LOG", "info".to_owned()));
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    // Polls only on SIGHUP, so each step is one poll.
    let bin = Binary::start(s3.url("d"), &["--poll-interval", "1h"], &env).await;
    let version = async || {
        get_from(bin.api, "/portfolio", Some(KEY))
            .await
            .map(|r| (r.status, r.header("x-snapshot-version").map(str::to_owned)))
    };
    assert_eq!(version().await, Ok((200, Some("a1".to_owned()))));

    s3.put_json("d/acme.json", &versioned("ws-acme", KEY, "a2"))
        .await;
    s3.proxy.set(Fault::DeleteFirst, Scope::Objects);
    bin.signal("HUP");
    eventually("the failed download is reported", async || {
        let body = get_from(bin.admin, "/snapshots", None).await?.json();
        match body["files"][0]["source_error_kind"].as_str() {
            Some("not_found") => Ok(()),
            _ => Err(body.to_string()),
        }
    })
    .await;
    assert!(
        s3.get("d/acme.json").await.is_none(),
        "the proxy deleted it"
    );
    assert_eq!(version().await, Ok((200, Some("a1".to_owned()))));
    let body = get_from(bin.admin, "/snapshots", None)
        .await
        .unwrap()
        .json();
    assert!(
        body["files"][0]["source_error"]
            .as_str()
            .unwrap()
            .contains("deleted between the listing and the download"),
        "{body}"
    );

    // The next poll lists it gone: now it unloads, as a deleted file does.
    s3.proxy.clear();
    bin.signal("HUP");
    eventually("ws-acme unloaded", async || match version().await {
        Ok((401, _)) => Ok(()),
        other => Err(format!("{other:?}")),
    })
    .await;
    let log = bin.stderr_text();
    assert_eq!(
        log.matches("cannot download the new snapshot").count(),
        1,
        "{log}"
    );
}

#[tokio::test]
async fn a_bad_manifest_or_a_missing_object_unloads_nothing() {
    let s3 = S3::start().await;
    publish(&s3, "bm", "v1").await;
    let good = s3.get("bm/manifest.json").await.unwrap();
    let server = replica(&s3, "bm").await;
    server.wait_version("/portfolio", KEY, "v1").await;

    s3.put(
        "bm/manifest.json",
        b"{\"manifest_version\": 1, \"workspa".to_vec(),
    )
    .await;
    let body = wait_kind(&server, None, "manifest").await;
    assert!(
        body["source"]["error"]
            .as_str()
            .unwrap()
            .contains("not a valid manifest"),
        "{body}"
    );
    assert_eq!(serving(&server).await, "v1");
    assert!(errors_of(&server, "manifest").await >= 1.0);

    // A workspace record naming an object nobody uploaded, announced.
    s3.put("bm/manifest.json", good.clone()).await;
    let mut record: Value =
        serde_json::from_slice(&s3.get("bm/workspaces/ws-acme.json").await.unwrap()).unwrap();
    let sha = "ab".repeat(32);
    let versions = record["versions"].as_array_mut().unwrap();
    let mut missing = versions[0].clone();
    missing["sha256"] = json!(sha);
    missing["key"] = json!(format!("objects/ws-acme/{sha}.json.gz"));
    missing["version"] = json!("v9");
    versions.insert(0, missing.clone());
    record["current"] = json!(sha);
    record["revision"] = json!(9);
    s3.put_json("bm/workspaces/ws-acme.json", &record).await;
    let mut root: Value = serde_json::from_slice(&good).unwrap();
    root["revision"] = json!(9);
    root["changes"].as_array_mut().unwrap().push(json!({
        "revision": 9, "workspace": "ws-acme", "workspace_revision": 9, "current": missing,
    }));
    s3.put_json("bm/manifest.json", &root).await;
    let body = wait_kind(&server, Some("ws-acme"), "not_found").await;
    assert!(
        body["files"][0]["source_error"]
            .as_str()
            .unwrap()
            .contains("which does not exist"),
        "{body}"
    );
    assert_eq!(
        body["source"]["error"],
        Value::Null,
        "the manifest itself is fine: {body}"
    );
    assert_eq!(serving(&server).await, "v1");

    publish(&s3, "bm", "v2").await;
    server.wait_version("/portfolio", KEY, "v2").await;
}

#[tokio::test]
async fn storage_gone_while_serving_is_retried_with_backoff() {
    let s3 = S3::start().await;
    publish(&s3, "g", "v1").await;
    let server = replica(&s3, "g").await;
    server.wait_version("/portfolio", KEY, "v1").await;

    s3.proxy.set(Fault::Down, Scope::All);
    wait_kind(&server, None, "network").await;
    let before = s3.proxy.counts().values().sum::<u64>();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let during = s3.proxy.counts().values().sum::<u64>() - before;
    // Polling every 100 ms would be 20 polls of 3 requests each (object_store
    // retries twice); backing off (doubling from 200 ms) it is a handful.
    assert!(during <= 15, "{during} requests in 2 s of outage");
    let body = server.admin_get("/snapshots").await.json();
    assert!(
        body["source"]["consecutive_failures"].as_u64().unwrap() >= 2,
        "{body}"
    );
    assert!(
        body["source"]["stale_seconds"].as_f64().unwrap() >= 2.0,
        "{body}"
    );
    assert_eq!(serving(&server).await, "v1");

    // Back: the next poll, at most the backoff's cap (30 s, +20%) away,
    // finds v2.
    s3.proxy.clear();
    publish(&s3, "g", "v2").await;
    wait_after_outage(&server, "v2").await;
}

#[tokio::test]
async fn storage_down_at_startup_serves_the_warm_cache() {
    let mut s3 = S3::start().await;
    publish(&s3, "w", "v1").await;
    let cache = tempdir();
    let cache_dir = cache.path().to_str().unwrap().to_owned();
    let mut env = s3.env();
    env.push(("RUST_LOG", "info".to_owned()));
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let args = [
        "--poll-interval",
        "200ms",
        "--cache-dir",
        &cache_dir,
        "--storage-timeout",
        "2",
    ];
    {
        let first = Binary::start(s3.url("w"), &args, &env).await;
        let resp = get_from(first.api, "/portfolio", Some(KEY)).await.unwrap();
        assert_eq!(resp.header("x-snapshot-version"), Some("v1"));
    }

    // Storage stops; a replica starts anyway, from the cache.
    s3.moto.stop();
    let bin = Binary::start(s3.url("w"), &args, &env).await;
    let resp = get_from(bin.api, "/portfolio", Some(KEY)).await.unwrap();
    assert_eq!(
        resp.header("x-snapshot-version"),
        Some("v1"),
        "ready and serving the cache"
    );
    let body = get_from(bin.admin, "/snapshots", None)
        .await
        .unwrap()
        .json();
    assert_eq!(body["source"]["serving_from_cache"], true, "{body}");
    assert_eq!(body["source"]["error_kind"], "network", "{body}");
    assert_eq!(body["files"][0]["source"]["from_cache"], true, "{body}");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let log = bin.stderr_text();
    assert_eq!(
        log.matches("serving the last good objects from the cache")
            .count(),
        1,
        "{log}"
    );
    assert_eq!(
        log.matches("cannot poll the object store").count(),
        1,
        "logged once: {log}"
    );

    // Storage comes back (empty: moto keeps nothing) and is published to.
    s3.restart_moto().await;
    publish(&s3, "w", "v2").await;
    bin.signal("HUP");
    eventually("v2 from the restored storage", async || {
        let resp = get_from(bin.api, "/portfolio", Some(KEY)).await?;
        match resp.header("x-snapshot-version") {
            Some("v2") => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    let body = get_from(bin.admin, "/snapshots", None)
        .await
        .unwrap()
        .json();
    assert_eq!(body["source"]["serving_from_cache"], false, "{body}");
    assert_eq!(body["source"]["error"], Value::Null, "{body}");
    let log = bin.stderr_text();
    assert!(log.contains("object store readable again"), "{log}");
    assert!(
        !log.contains("test-secret-never-logged"),
        "a secret in the log: {log}"
    );
}
