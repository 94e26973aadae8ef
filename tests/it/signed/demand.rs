//! A load on demand under `--trust-key` (manifest mode, `--memory-budget`)
//! that a delta would build: issue 37, C1. The version accepted is listed
//! from the manifest, hollow, and fetched on its first request; someone
//! who can write to the bucket but holds no key keeps its key, SHA-256 and
//! size (so the replica sees the same object) but replaces its envelope's
//! payload (signature left as it was, so it no longer verifies) with a
//! statement naming forged content, and points its delta at that content
//! built from the base the replica holds. The poll refuses the edited
//! entry; the first request, and a restart on the cache, serve the signed
//! records, never the forged ones.

use std::path::Path;
use std::sync::Arc;
use std::time::SystemTime;

use portfolio_replica::storage::Trust;
use portfolio_wire::manifest::Version;
use portfolio_wire::signed::{Named, Statement};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::fleet::delta_of;
use super::objstore::{POLL, key_files, publish_signed};
use super::{DAY, hex, key, trusting};
use crate::util::*;

/// Smaller than the workspace: it is held only while the last one loaded.
const BUDGET: u64 = 1 << 10;

/// A verifying replica of prefix `p` under a memory budget, keeping its
/// downloads (and what it accepted) in `cache`.
async fn budgeted(s3: &S3, trust: Arc<Trust>, cache: &Path) -> TestServer {
    TestServer::start_in(tempdir(), |c| {
        s3.configure(c, "p", POLL);
        c.storage.cache_dir = Some(cache.into());
        c.storage.trust = trust;
        c.memory_budget = Some(BUDGET);
    })
    .await
}

/// The current version in a workspace record, and its index.
fn current(record: &Value) -> (usize, Value) {
    let at = record["versions"]
        .as_array()
        .unwrap()
        .iter()
        .position(|v| v["sha256"] == record["current"])
        .expect("the current version is listed");
    (at, record["versions"][at].clone())
}

async fn record(s3: &S3, prefix: &str) -> Value {
    let path = format!("{prefix}/workspaces/ws-acme.json");
    serde_json::from_slice(&s3.get(&path).await.expect("the record")).unwrap()
}

/// Company 150 as `server` answers for it (status, name, version).
async fn company_150(server: &TestServer) -> (u16, String, Option<String>) {
    let resp = server
        .get(&format!("/portfolio/{}", uuid(150)), Some(KEY))
        .await;
    let name = if resp.status == 200 {
        resp.json()["data"]["attributes"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    } else {
        resp.text()
    };
    (
        resp.status,
        name,
        resp.header("x-snapshot-version").map(str::to_owned),
    )
}

/// Every answer `server` gives the workspace here holds nothing forged.
async fn nothing_forged(server: &TestServer, when: &str) {
    for path in [
        format!("/portfolio/{}", uuid(150)),
        "/portfolio?limit=100".to_owned(),
        "/portfolio?limit=100&offset=100".to_owned(),
        "/portfolio?limit=100&offset=200".to_owned(),
        "/portfolio?limit=100&offset=300".to_owned(),
        "/portfolio?limit=100&offset=400".to_owned(),
    ] {
        let resp = server.get(&path, Some(KEY)).await;
        assert!(
            !resp.text().contains("Forged"),
            "{when}: GET {path} served the forged records: {}",
            resp.text()
        );
    }
}

fn counter(metrics: &str, series: &str) -> u64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .map_or(0, |v| v.trim().parse::<f64>().unwrap() as u64)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_load_on_demand_never_takes_a_delta_or_digest_from_an_entry_whose_signature_fails() {
    let s3 = S3::start().await;
    let dir = tempdir();
    let cache = tempdir();
    let (signer, stranger) = (key(31), key(32));
    let (secret, _) = key_files(dir.path(), &signer, "publisher");
    let (forger, _) = key_files(dir.path(), &stranger, "forger");

    // v1 of ws-acme, signed.
    let acme = write_json(dir.path(), "acme.json", &companies_renamed("v1", 0));
    publish_signed(&s3, "p", std::slice::from_ref(&acme), &secret).await;
    // The forger's own prefix, from the same first version: where the
    // forged delta is made (signed with a key nobody trusts).
    publish_signed(&s3, "x", std::slice::from_ref(&acme), &forger).await;
    let v1 = current(&record(&s3, "p").await).1;
    assert_eq!(current(&record(&s3, "x").await).1["sha256"], v1["sha256"]);

    // v1 loaded on demand: its download is the cache's last good object of
    // ws-acme, the base of v2's delta.
    let trust = || trusting(&[&signer], Some(cache.path()));
    let first = budgeted(&s3, trust(), cache.path()).await;
    assert_eq!(
        company_150(&first).await,
        (200, "Company 150 ".to_owned(), Some("v1".to_owned()))
    );
    drop(first);
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;

    // v2, signed; publish sends it as a delta from v1.
    let acme = write_json(dir.path(), "acme.json", &companies_renamed("v2", 150));
    let genuine_delta = delta_of(&publish_signed(&s3, "p", &[acme], &secret).await);
    let v2 = current(&record(&s3, "p").await).1;
    assert_eq!(v2["version"], "v2");
    assert_eq!(v2["delta"]["base"], v1["sha256"], "{v2}");
    let v2_object = format!("p/{}", v2["key"].as_str().unwrap());
    // A replica on that cache reads the records (a version announced in
    // the journal carries no key hashes, and would be fetched by the
    // poll): v2 is accepted on its signature and listed hollow from its
    // claims, not fetched.
    let server = budgeted(&s3, trust(), cache.path()).await;
    eventually("v2 listed, hollow", async || {
        let entry = server.snapshot_status("ws-acme").await.unwrap();
        let hollow = entry["version"] == "v2"
            && entry["residency"] == "not_resident"
            && entry["records"].is_null()
            && entry["error"].is_null()
            && entry["signature"]["revision"] == 2;
        match hollow {
            true => Ok(()),
            false => Err(entry.to_string()),
        }
    })
    .await;

    // The forged content: v2's workspace, version and keys, company 150
    // renamed; its delta from v1, made in the forger's prefix.
    let mut forged = companies_renamed("v2", 150);
    for company in forged["companies"].as_array_mut().unwrap() {
        if company["id"] == uuid(150) {
            company["attributes"]["name"] = json!("Forged");
        }
    }
    let file = write_json(dir.path(), "forged.json", &forged);
    let forged_delta = s3
        .get(&delta_of(&publish_signed(&s3, "x", &[file], &forger).await))
        .await
        .unwrap();
    let made = current(&record(&s3, "x").await).1;
    assert_eq!(made["delta"]["base"], v1["sha256"], "{made}");
    let stored = s3
        .get(&format!("x/{}", made["key"].as_str().unwrap()))
        .await
        .unwrap();
    let plain = if made["key"].as_str().unwrap().ends_with(".gz") {
        gunzip(&stored)
    } else {
        stored
    };
    let forged_plain = hex(&Sha256::digest(&plain));
    assert!(String::from_utf8_lossy(&plain).contains("Forged"));
    let delta_sha = hex(&Sha256::digest(&forged_delta));
    let genuine_rel = v2["delta"]["key"].as_str().unwrap();
    let delta_key = format!(
        "{}/{delta_sha}.delta.gz",
        genuine_rel.rsplit_once('/').unwrap().0
    );
    s3.put(&format!("p/{delta_key}"), forged_delta.clone())
        .await;

    // The edit: v2's key, SHA-256 and size kept; its delta pointed at the
    // forged one; its envelope's payload a statement naming the forged
    // content, the signature bytes left as they were.
    let mut rec = record(&s3, "p").await;
    let revision = rec["revision"].as_u64().unwrap() + 1;
    rec["revision"] = json!(revision);
    let (at, mut version) = current(&rec);
    let parsed: Version = serde_json::from_value(version.clone()).unwrap();
    let keys = parsed.key_hashes.clone().unwrap_or_default();
    let named = Named {
        workspace: "ws-acme",
        version: &parsed.version,
        sha256: &parsed.sha256,
        key_hashes: Some(&keys),
        revision: Some(revision),
    };
    let mut statement = Statement::new(&named, &keys, revision, SystemTime::now(), 7 * DAY);
    statement.plain_sha256 = Some(forged_plain.clone());
    let payload = serde_json::to_value(statement.sign(&stranger)).unwrap()["payload"].clone();
    assert_ne!(version["signature"]["payload"], payload);
    version["signature"]["payload"] = payload;
    version["delta"]["key"] = json!(delta_key);
    version["delta"]["size"] = json!(forged_delta.len());
    version["delta"]["sha256"] = json!(delta_sha);
    assert_eq!(
        (&version["key"], &version["sha256"], &version["size"]),
        (&v2["key"], &v2["sha256"], &v2["size"])
    );
    rec["versions"][at] = version.clone();
    s3.put_json("p/workspaces/ws-acme.json", &rec).await;
    let mut root: Value =
        serde_json::from_slice(&s3.get("p/manifest.json").await.unwrap()).unwrap();
    let root_revision = root["revision"].as_u64().unwrap() + 1;
    root["revision"] = json!(root_revision);
    root["changes"].as_array_mut().unwrap().push(json!({
        "revision": root_revision,
        "workspace": "ws-acme",
        "workspace_revision": revision,
        "current": version,
    }));
    s3.put_json("p/manifest.json", &root).await;

    // The poll refuses the edited entry; v2 stays accepted, and nothing of
    // it was fetched yet.
    let entry = server.wait_error("ws-acme").await;
    assert_eq!(entry["refused"], "invalid", "{entry}");
    assert_eq!(entry["version"], "v2", "{entry}");
    assert_eq!(entry["residency"], "not_resident", "{entry}");
    let log = s3.moto.log_text();
    for key in [&v2_object, &genuine_delta, &format!("p/{delta_key}")] {
        assert!(
            !log.contains(&format!("GET /{BUCKET}/{key}")),
            "{key} fetched before the first request for v2:\n{log}"
        );
    }

    // The first request loads v2 on demand: the signed records.
    assert_eq!(
        company_150(&server).await,
        (200, "Company 150 v2".to_owned(), Some("v2".to_owned())),
        "the first request after the forged edit"
    );
    nothing_forged(&server, "on demand").await;
    let metrics = server.admin_get("/metrics").await.text();
    assert_eq!(
        counter(
            &metrics,
            "portfolio_replica_source_deltas_total{outcome=\"applied\"}"
        ),
        0,
        "{metrics}"
    );
    drop(server);
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;

    // A restart on the same cache while storage is down: what it kept of
    // v2, judged on the signature v2 was accepted with.
    s3.proxy.set(Fault::Down, Scope::All);
    let restarted = budgeted(&s3, trust(), cache.path()).await;
    assert_eq!(
        company_150(&restarted).await,
        (200, "Company 150 v2".to_owned(), Some("v2".to_owned())),
        "after a restart on the cache"
    );
    nothing_forged(&restarted, "restarted on the cache").await;
    // Storage back: the edited entry is refused again, v2 keeps serving.
    s3.proxy.clear();
    eventually("the edited entry refused again", async || {
        let entry = restarted.snapshot_status("ws-acme").await.unwrap();
        match entry["refused"].as_str() {
            Some("invalid") => Ok(()),
            _ => Err(entry.to_string()),
        }
    })
    .await;
    assert_eq!(
        company_150(&restarted).await,
        (200, "Company 150 v2".to_owned(), Some("v2".to_owned())),
        "after a restart, storage back"
    );
    nothing_forged(&restarted, "restarted, storage back").await;
}
