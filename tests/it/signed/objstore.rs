//! Manifest mode against a real S3 protocol server (moto): versions
//! published with `--sign-key`, then the bucket changed as someone with
//! write access but no key would change it. A replica with `--trust-key`
//! keeps serving the signed version and names each refusal; one without
//! serves what the forger wrote.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use portfolio_replica::storage::Trust;
use portfolio_wire::manifest::Version;
use portfolio_wire::signed::{Named, PAYLOAD_TYPE, SecretKey, Statement};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::{DAY, hex, key, trusting};
use crate::util::*;

pub const POLL: Duration = Duration::from_millis(100);

/// `key`'s secret and public key files in `dir`, as `keygen` writes them.
pub fn key_files(dir: &std::path::Path, key: &SecretKey, name: &str) -> (PathBuf, PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    let (secret, public) = (
        dir.join(format!("{name}.key")),
        dir.join(format!("{name}.pub")),
    );
    std::fs::write(&secret, key.to_text()).unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::write(&public, key.public().to_text()).unwrap();
    (secret, public)
}

/// `publish FILE... --to URL --sign-key SECRET` through the binary.
pub async fn publish_signed(
    s3: &S3,
    prefix: &str,
    files: &[PathBuf],
    secret: &std::path::Path,
) -> CliOutput {
    let mut args: Vec<String> = vec!["publish".into()];
    args.extend(files.iter().map(|f| f.display().to_string()));
    args.extend(["--to".into(), s3.url(prefix), "--sign-key".into()]);
    args.push(secret.display().to_string());
    // Straight to moto: a test may hold the replicas' requests meanwhile.
    let out = cli_env(&args, &s3.direct_env()).await;
    assert_eq!(out.code, Some(0), "{out:?}");
    out
}

/// A replica of `prefix`, verifying with `trust` if given.
pub async fn replica(
    s3: &S3,
    prefix: &str,
    trust: Option<Arc<Trust>>,
    cache: Option<PathBuf>,
) -> TestServer {
    TestServer::start_in(tempdir(), |c| {
        s3.configure(c, prefix, POLL);
        c.storage.cache_dir = cache;
        if let Some(trust) = trust {
            c.storage.trust = trust;
        }
    })
    .await
}

fn versioned(workspace: &str, key: &str, version: &str) -> Value {
    let mut snap = fixture(workspace, &[key], 1);
    snap["version"] = json!(version);
    snap
}

/// What someone who can write to the bucket, but holds no key, does to
/// make a change current: `workspace`'s record rewritten at the next
/// revision with its current version changed by `change` (given that
/// revision), and the change announced in `manifest.json`.
async fn forge(s3: &S3, prefix: &str, workspace: &str, change: impl FnOnce(&mut Value, u64)) {
    let path = format!("{prefix}/workspaces/{workspace}.json");
    let mut record: Value = serde_json::from_slice(&s3.get(&path).await.unwrap()).unwrap();
    let revision = record["revision"].as_u64().unwrap() + 1;
    record["revision"] = json!(revision);
    let current = record["current"].clone();
    let versions = record["versions"].as_array_mut().unwrap();
    let at = versions
        .iter()
        .position(|v| v["sha256"] == current)
        .unwrap();
    change(&mut versions[at], revision);
    let version = versions[at].clone();
    record["current"] = version["sha256"].clone();
    s3.put_json(&path, &record).await;
    let root_path = format!("{prefix}/manifest.json");
    let mut root: Value = serde_json::from_slice(&s3.get(&root_path).await.unwrap()).unwrap();
    let root_revision = root["revision"].as_u64().unwrap() + 1;
    root["revision"] = json!(root_revision);
    root["changes"].as_array_mut().unwrap().push(json!({
        "revision": root_revision,
        "workspace": workspace,
        "workspace_revision": revision,
        "current": version,
    }));
    s3.put_json(&root_path, &root).await;
}

/// A statement of `version` of `workspace` as current at `revision`,
/// signed by `key` at `at`.
fn signature(
    workspace: &str,
    version: &Value,
    revision: u64,
    key: &SecretKey,
    at: SystemTime,
) -> Value {
    let version: Version = serde_json::from_value(version.clone()).unwrap();
    let keys = version.key_hashes.clone().unwrap_or_default();
    let named = Named {
        workspace,
        version: &version.version,
        sha256: &version.sha256,
        key_hashes: Some(&keys),
        revision: Some(revision),
    };
    let mut statement = Statement::new(&named, &keys, revision, at, 7 * DAY);
    statement.plain_sha256 = version.plain_sha256.clone();
    serde_json::to_value(statement.sign(key)).unwrap()
}

/// The `refused` kind a replica shows for `workspace`, once it shows one.
async fn refused(server: &TestServer, workspace: &str) -> String {
    server.wait_error(workspace).await["refused"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_changes_in_the_bucket_keep_the_signed_version_serving() {
    let s3 = S3::start().await;
    let dir = tempdir();
    let (signer, stranger) = (key(11), key(12));
    let (secret, _) = key_files(dir.path(), &signer, "publisher");
    let cases = [
        ("object", "mismatch"),
        ("keys", "mismatch"),
        ("stripped", "unsigned"),
        ("stranger", "untrusted"),
        ("borrowed", "mismatch"),
        ("expired", "expired"),
        ("garbage", "malformed"),
    ];
    let ws = |case: &str| (format!("ws-{case}"), format!("cura_{case}"));
    let files: Vec<PathBuf> = cases
        .iter()
        .map(|(case, _)| {
            let (workspace, api_key) = ws(case);
            write_json(
                dir.path(),
                &format!("{case}.json"),
                &versioned(&workspace, &api_key, "v1"),
            )
        })
        .collect();
    publish_signed(&s3, "p", &files, &secret).await;
    let verifying = replica(&s3, "p", Some(trusting(&[&signer], None)), None).await;
    let unverified = replica(&s3, "p", None, None).await;
    for (case, _) in &cases {
        let (_, api_key) = ws(case);
        verifying.wait_version("/portfolio", &api_key, "v1").await;
        unverified.wait_version("/portfolio", &api_key, "v1").await;
    }
    let status = verifying.snapshot_status("ws-object").await.unwrap();
    assert_eq!(
        status["signature"]["key_id"],
        signer.id.as_str(),
        "{status}"
    );
    let record: Value =
        serde_json::from_slice(&s3.get("p/workspaces/ws-object.json").await.unwrap()).unwrap();
    let borrowed = record["versions"][0]["signature"].clone();

    // A forged snapshot object made current under the old signature.
    let forged = serde_json::to_vec(&versioned("ws-object", "cura_object", "forged")).unwrap();
    let gz = gzip(&forged);
    let sha = hex(&Sha256::digest(&gz));
    let object = format!("objects/ws-object/{sha}.json.gz");
    s3.put(&format!("p/{object}"), gz.clone()).await;
    forge(&s3, "p", "ws-object", |v, _| {
        v["sha256"] = json!(sha);
        v["key"] = json!(object);
        v["size"] = json!(gz.len());
        v["version"] = json!("forged");
        v["plain_sha256"] = json!(hex(&Sha256::digest(&forged)));
    })
    .await;
    // Another workspace's key claimed.
    forge(&s3, "p", "ws-keys", |v, _| {
        v["key_hashes"] = json!([key_hash("cura_object")]);
    })
    .await;
    forge(&s3, "p", "ws-stripped", |v, _| {
        v.as_object_mut().unwrap().remove("signature");
    })
    .await;
    forge(&s3, "p", "ws-stranger", |v, revision| {
        v["signature"] = signature("ws-stranger", v, revision, &stranger, SystemTime::now());
    })
    .await;
    // A genuine signature, of another workspace's version.
    forge(&s3, "p", "ws-borrowed", |v, _| v["signature"] = borrowed).await;
    forge(&s3, "p", "ws-expired", |v, revision| {
        let long_ago = SystemTime::now() - 8 * DAY;
        v["signature"] = signature("ws-expired", v, revision, &signer, long_ago);
    })
    .await;
    forge(&s3, "p", "ws-garbage", |v, _| {
        v["signature"] = json!({
            "payload": "%%% not base64",
            "payloadType": PAYLOAD_TYPE,
            "signatures": [{"keyid": signer.id, "sig": "AAAA"}],
        });
    })
    .await;

    for (case, kind) in &cases {
        let (workspace, api_key) = ws(case);
        assert_eq!(&refused(&verifying, &workspace).await, kind, "{case}");
        let answer = verifying.get("/portfolio", Some(&api_key)).await;
        assert_eq!(answer.header("x-snapshot-version"), Some("v1"), "{case}");
    }
    // Without verification, the forged object serves.
    unverified
        .wait_version("/portfolio", "cura_object", "forged")
        .await;
    let metrics = verifying.admin_get("/metrics").await.text();
    for kind in ["mismatch", "unsigned", "untrusted", "expired", "malformed"] {
        let series = format!("portfolio_replica_signature_refusals_total{{reason=\"{kind}\"}} ");
        let count: u64 = metrics
            .lines()
            .find_map(|l| l.strip_prefix(&series))
            .map_or(0, |v| v.trim().parse().unwrap());
        assert!(count >= 1, "{series} in\n{metrics}");
    }
    // The forged object was downloaded once: by the replica that serves
    // it. The verifying one refused it from the manifest alone.
    let gets = s3
        .moto
        .log_text()
        .matches(&format!("GET /{BUCKET}/p/{object}"))
        .count();
    assert_eq!(gets, 1, "{}", s3.moto.log_text());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_old_record_put_back_is_refused_by_a_replica_that_remembers() {
    let s3 = S3::start().await;
    let dir = tempdir();
    let cache = tempdir();
    let signer = key(13);
    let (secret, _) = key_files(dir.path(), &signer, "publisher");
    let file = write_json(dir.path(), "r.json", &versioned("ws-r", KEY, "v1"));
    publish_signed(&s3, "p", &[file], &secret).await;
    let old_record = s3.get("p/workspaces/ws-r.json").await.unwrap();
    let file = write_json(dir.path(), "r.json", &versioned("ws-r", KEY, "v2"));
    publish_signed(&s3, "p", &[file], &secret).await;
    let trust = trusting(&[&signer], Some(cache.path()));
    let server = replica(&s3, "p", Some(trust), Some(cache.path().into())).await;
    server.wait_version("/portfolio", KEY, "v2").await;
    drop(server);

    // The first record, signed then and valid still, put back, and the
    // journal's later change of it dropped.
    s3.put("p/workspaces/ws-r.json", old_record).await;
    let mut root: Value =
        serde_json::from_slice(&s3.get("p/manifest.json").await.unwrap()).unwrap();
    root["changes"]
        .as_array_mut()
        .unwrap()
        .retain(|c| c["workspace_revision"].as_u64() < Some(2));
    s3.put_json("p/manifest.json", &root).await;

    let trust = trusting(&[&signer], Some(cache.path()));
    let restarted = replica(&s3, "p", Some(trust), Some(cache.path().into())).await;
    assert_eq!(refused(&restarted, "ws-r").await, "replayed");
    // Its key is one the authentic statement names: unavailable, not wrong.
    let answer = restarted.get("/portfolio", Some(KEY)).await;
    assert_eq!(answer.status, 503, "{}", answer.text());
    assert_eq!(answer.header("retry-after"), Some("30"));
    let listed = restarted
        .admin_get("/snapshots?workspace=ws-r")
        .await
        .json();
    assert_eq!(listed["files"][0]["refused"], "replayed", "{listed}");
    // What a replica that remembers nothing cannot tell: it takes the
    // old version, whose signature has not expired.
    let forgetful = replica(&s3, "p", Some(trusting(&[&signer], None)), None).await;
    forgetful.wait_version("/portfolio", KEY, "v1").await;
}
