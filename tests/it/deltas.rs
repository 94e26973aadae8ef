//! Deltas on the wire (docs/object-storage.md#deltas), against a real S3
//! protocol server (moto, on loopback): a replica that serves a version
//! rebuilds the next from a delta, and answers exactly as a fresh replica
//! that downloaded the whole object; a replica without the base and a
//! rollback download the whole object; a replica that missed a version
//! downloads the object, then takes the next delta; a tampered delta is
//! refused, the old version serving until the whole object loads;
//! `--keep` deletes the deltas of the versions it drops.

use std::time::Duration;

use serde_json::Value;

use crate::util::*;

const POLL_EVERY: Duration = Duration::from_millis(100);

fn workspace(version: &str, changed: u64) -> Value {
    companies_renamed(version, changed)
}

async fn replica(s3: &S3) -> TestServer {
    TestServer::start_in(tempdir(), |c| s3.configure(c, "d", POLL_EVERY)).await
}

/// A bucket holding v1 of the workspace, the directory its file was
/// written in, and a replica serving it.
async fn serving_v1() -> (S3, String, tempfile::TempDir, TestServer) {
    let s3 = S3::start().await;
    let url = s3.url("d");
    let files = tempdir();
    let file = write_json(files.path(), "acme.json", &workspace("v1", 0));
    assert_eq!(publish_to(&url, &[&file], &s3.env()).await.code, Some(0));
    let server = replica(&s3).await;
    server.wait_version("/portfolio", KEY, "v1").await;
    (s3, url, files, server)
}

/// `portfolio_replica_source_deltas_total{outcome}` on `server`.
async fn deltas(server: &TestServer, outcome: &str) -> u64 {
    let text = String::from_utf8(server.admin_get("/metrics").await.body).unwrap();
    let series = format!("portfolio_replica_source_deltas_total{{outcome=\"{outcome}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&series))
        .map_or(0, |v| v.trim().parse().unwrap())
}

async fn from_delta(server: &TestServer) -> Value {
    let body: Value = server.admin_get("/snapshots").await.json();
    body["files"][0]["source"]["from_delta"].clone()
}

/// Every answer of `a` and `b` on a few endpoints, plain and gzip, equal
/// (gzip once decoded).
async fn same_answers(a: &TestServer, b: &TestServer) {
    let auth = format!("Bearer {KEY}");
    for path in ["/portfolio", "/tasks", "/roles", "/feed?limit=5"] {
        for gzip in [false, true] {
            let mut headers = vec![("Authorization", auth.as_str())];
            if gzip {
                headers.push(("Accept-Encoding", "gzip"));
            }
            let (x, y) = (
                a.request("GET", path, &headers).await,
                b.request("GET", path, &headers).await,
            );
            assert_eq!(x.status, 200, "{path}");
            // gzip bytes depend on whether precompression has finished on
            // each replica; what they decode to may not.
            let decoded = |r: &Response| {
                if gzip && r.header("content-encoding") == Some("gzip") {
                    gunzip(&r.body)
                } else {
                    r.body.clone()
                }
            };
            assert!(decoded(&x) == decoded(&y), "{path} gzip={gzip}");
        }
    }
}

#[tokio::test]
async fn a_chain_of_small_publishes_is_rebuilt_from_deltas_exactly() {
    let s3 = S3::start().await;
    let (url, env) = (s3.url("d"), s3.env());
    let files = tempdir();
    let publish = async |version: &str, changed: u64| {
        let file = write_json(files.path(), "acme.json", &workspace(version, changed));
        let out = publish_to(&url, &[&file], &env).await;
        assert_eq!(out.code, Some(0), "{out:?}");
        out
    };
    let out = publish("v0", 0).await;
    assert!(
        !out.stdout.contains("delta"),
        "a first version has none: {out:?}"
    );
    let server = replica(&s3).await;
    server.wait_version("/portfolio", KEY, "v0").await;

    for n in 1..=5u64 {
        let version = format!("v{n}");
        let out = publish(&version, 100 + n).await;
        assert!(out.stdout.contains("delta: d/deltas/ws-acme/"), "{out:?}");
        server.wait_version("/portfolio", KEY, &version).await;
        assert_eq!(deltas(&server, "applied").await, n);
        assert!(from_delta(&server).await.is_string());
    }
    assert_eq!(deltas(&server, "failed").await, 0);

    // A fresh replica has no base: it downloads the object.
    let fresh = replica(&s3).await;
    fresh.wait_version("/portfolio", KEY, "v5").await;
    assert_eq!(deltas(&fresh, "applied").await, 0);
    assert_eq!(from_delta(&fresh).await, Value::Null);
    same_answers(&server, &fresh).await;

    // The fresh replica serves v5 now: v6's delta applies there too.
    publish("v6", 300).await;
    server.wait_version("/portfolio", KEY, "v6").await;
    fresh.wait_version("/portfolio", KEY, "v6").await;
    assert_eq!(deltas(&fresh, "applied").await, 1);
    same_answers(&server, &fresh).await;
    publish("v7", 301).await;
    server.wait_version("/portfolio", KEY, "v7").await;
    fresh.wait_version("/portfolio", KEY, "v7").await;

    // A rollback: v6 has no delta from v7, so the object is downloaded.
    let out = cli_env(&["rollback", "ws-acme", "--to", &url], &env).await;
    assert_eq!(out.code, Some(0), "{out:?}");
    server.wait_version("/portfolio", KEY, "v6").await;
    assert_eq!(from_delta(&server).await, Value::Null);
    assert!(deltas(&server, "no_base").await >= 1);
    fresh.wait_version("/portfolio", KEY, "v6").await;
    same_answers(&server, &fresh).await;
}

#[tokio::test]
async fn a_tampered_delta_keeps_the_old_version_then_the_object_loads() {
    let (s3, url, files, server) = serving_v1().await;
    // Publish v2 straight to moto, then tamper its delta before the
    // replica can poll: the proxy holds the replica's requests meanwhile.
    s3.proxy.set(Fault::Down, Scope::All);
    let file = write_json(files.path(), "acme.json", &workspace("v2", 150));
    let out = publish_to(&url, &[&file], &s3.direct_env()).await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let key = out
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("delta: ")?.split(' ').next())
        .unwrap()
        .to_owned();
    let mut bytes = s3.get(&key).await.unwrap();
    let last = bytes.len() - 3;
    bytes[last] ^= 0x55;
    s3.put(&key, bytes).await;
    assert_eq!(server.get("/portfolio", Some(KEY)).await.status, 200);
    s3.proxy.clear();
    server.wait_version("/portfolio", KEY, "v2").await;
    assert_eq!(deltas(&server, "failed").await, 1);
    assert_eq!(deltas(&server, "applied").await, 0);
    assert_eq!(from_delta(&server).await, Value::Null);
}

#[tokio::test]
async fn a_replica_that_missed_a_version_downloads_the_object_then_takes_deltas() {
    let (s3, url, files, server) = serving_v1().await;
    // The replica is cut off while v2 and v3 land (straight to moto): v3's
    // delta is from v2, which it never served.
    s3.proxy.set(Fault::Down, Scope::All);
    for (version, changed) in [("v2", 150), ("v3", 250)] {
        let file = write_json(files.path(), "acme.json", &workspace(version, changed));
        let out = publish_to(&url, &[&file], &s3.direct_env()).await;
        assert_eq!(out.code, Some(0), "{out:?}");
        assert!(out.stdout.contains("delta: d/deltas/ws-acme/"), "{out:?}");
    }
    assert_eq!(server.get("/portfolio", Some(KEY)).await.status, 200);
    s3.proxy.clear();
    server.wait_version("/portfolio", KEY, "v3").await;
    assert_eq!(deltas(&server, "applied").await, 0);
    assert_eq!(deltas(&server, "no_base").await, 1);
    assert_eq!(deltas(&server, "failed").await, 0);
    assert_eq!(from_delta(&server).await, Value::Null);
    let fresh = replica(&s3).await;
    fresh.wait_version("/portfolio", KEY, "v3").await;
    same_answers(&server, &fresh).await;

    // It serves v3 now, the base of v4's delta.
    let file = write_json(files.path(), "acme.json", &workspace("v4", 350));
    assert_eq!(publish_to(&url, &[&file], &s3.env()).await.code, Some(0));
    server.wait_version("/portfolio", KEY, "v4").await;
    assert_eq!(deltas(&server, "applied").await, 1);
    assert_eq!(deltas(&server, "no_base").await, 1);
    assert!(from_delta(&server).await.is_string());
}

#[tokio::test]
async fn keep_deletes_the_deltas_of_the_versions_it_drops() {
    let s3 = S3::start().await;
    let (url, env) = (s3.url("d"), s3.env());
    let files = tempdir();
    // Each publish's `delta:` line, by version.
    let mut sent: Vec<String> = Vec::new();
    for n in 0..5u64 {
        let version = format!("v{n}");
        let file = write_json(files.path(), "acme.json", &workspace(&version, 100 + n));
        let args = [
            "publish",
            file.to_str().unwrap(),
            "--to",
            &url,
            "--keep",
            "2",
        ];
        let out = cli_env(&args, &env).await;
        assert_eq!(out.code, Some(0), "{out:?}");
        let delta = out
            .stdout
            .lines()
            .find_map(|l| l.strip_prefix("delta: ")?.split(' ').next());
        assert_eq!(delta.is_some(), n > 0, "{out:?}");
        sent.extend(delta.map(str::to_owned));
        // v2 drops v0 (no delta); from v3 on, each publish drops the
        // version before the two it keeps, and its delta with it.
        let deleted = out
            .stdout
            .contains("deleted 1 delta(s) of versions no longer kept");
        assert_eq!(deleted, n >= 3, "{out:?}");
        assert!(!out.stdout.contains("deleted 0"), "{out:?}");
        // The bucket holds the deltas of the versions kept: the last two.
        let mut kept = sent[sent.len().saturating_sub(2)..].to_vec();
        kept.sort();
        assert_eq!(s3.keys("d/deltas/").await, kept, "after {version}");
    }
    // The full objects stay, for a lifecycle rule.
    assert_eq!(s3.keys("d/objects/ws-acme/").await.len(), 5);
}
