//! Directory mode: each snapshot's signature in `<file>.sig`.

use std::time::{Duration, SystemTime};

use serde_json::{Value, json};

use super::{DAY, key, replace, sign_file, trusting};
use crate::util::{TestServer, cli, eventually, snapshot, tempdir};

fn write(dir: &std::path::Path, name: &str, value: &Value) -> std::path::PathBuf {
    let path = dir.join(name);
    replace(&path, &serde_json::to_vec(value).unwrap());
    path
}

fn versioned(workspace: &str, key: &str, version: &str) -> Value {
    let mut value = snapshot(workspace, &[key]);
    value["version"] = json!(version);
    value
}

/// The `refused` kind `/snapshots` shows for `file`, once it shows one.
async fn refused(server: &TestServer, file: &str) -> String {
    let entry = server.wait_error(file).await;
    entry["refused"].as_str().unwrap_or_default().to_owned()
}

#[tokio::test]
async fn only_versions_a_trusted_key_signed_for_exactly_their_bytes_serve() {
    let dir = tempdir();
    let (trusted, stranger) = (key(1), key(2));
    let now = SystemTime::now();
    let ws = |n: &str| (format!("ws-{n}"), format!("cura_key_{n}"));
    let mut cases = Vec::new();
    for (name, expect) in [
        ("good", ""),
        ("unsigned", "unsigned"),
        ("stranger", "untrusted"),
        ("garbage", "malformed"),
        ("expired", "expired"),
        ("altered", "mismatch"),
        ("elsewhere", "mismatch"),
        ("keys", "mismatch"),
    ] {
        let (workspace, api_key) = ws(name);
        let value = snapshot(&workspace, &[&api_key]);
        let file = write(dir.path(), &format!("{name}.json"), &value);
        let sign = |key, at, valid| sign_file(&file, &value, key, 1, at, valid);
        match name {
            "good" => sign(&trusted, now, DAY),
            "stranger" => sign(&stranger, now, DAY),
            "garbage" => replace(&dir.path().join("garbage.json.sig"), b"{\"payload\": 1"),
            "expired" => sign(&trusted, now - 2 * DAY, DAY),
            "altered" => {
                sign(&trusted, now, DAY);
                let mut forged = value.clone();
                forged["workspace"]["name"] = json!("Forged after signing");
                write(dir.path(), "altered.json", &forged);
            }
            "elsewhere" => {
                // Its bytes, signed as another workspace's: a key moved.
                let mut other = value.clone();
                other["workspace"]["id"] = json!("ws-good");
                sign_file(&file, &other, &trusted, 1, now, DAY);
            }
            "keys" => {
                let mut other = value.clone();
                other["api_keys"][0]["sha256"] = json!("ab".repeat(32));
                sign_file(&file, &other, &trusted, 1, now, DAY);
            }
            _ => {}
        }
        cases.push((name, api_key, expect));
    }
    let trust = trusting(&[&trusted], None);
    let server = TestServer::start_in(dir, |c| c.storage.trust = trust).await;
    for (name, api_key, expect) in &cases {
        let status = server.get("/portfolio", Some(api_key)).await.status;
        if expect.is_empty() {
            assert_eq!(status, 200, "{name}");
            let entry = server
                .snapshot_status(&format!("{name}.json"))
                .await
                .unwrap();
            assert_eq!(entry["signature"]["key_id"], trusted.id.as_str(), "{entry}");
            assert_eq!(entry["signature"]["expired"], false, "{entry}");
        } else {
            // An expired statement is authentic and names these keys: they
            // are told the data is unavailable (503), not that they are
            // wrong; no other refusal vouches for its keys.
            let unavailable = if *expect == "expired" { 503 } else { 401 };
            assert_eq!(status, unavailable, "{name} must not serve");
            assert_eq!(
                &refused(&server, &format!("{name}.json")).await,
                expect,
                "{name}"
            );
        }
    }
    let status = server.admin_get("/snapshots").await.json();
    assert_eq!(status["signatures"]["enabled"], true, "{status}");
    assert_eq!(
        status["signatures"]["trusted_keys"],
        json!([trusted.id]),
        "{status}"
    );
    assert_eq!(status["signatures"]["refused"], cases.len() - 1, "{status}");
    let metrics = server.admin_get("/metrics").await.text();
    for (name, _, expect) in &cases[1..] {
        let line = format!("portfolio_replica_signature_refusals_total{{reason=\"{expect}\"}}");
        assert!(metrics.contains(&line), "{name}: no {line} in\n{metrics}");
    }

    // Without --trust-key, the same directory serves every one of them:
    // each refusal above is verification's doing.
    let dir = server.dir().to_owned();
    let copy = tempdir();
    for entry in std::fs::read_dir(&dir).unwrap().filter_map(Result::ok) {
        std::fs::copy(entry.path(), copy.path().join(entry.file_name())).unwrap();
    }
    drop(server);
    let unverified = TestServer::start_in(copy, |_| {}).await;
    for (name, api_key, _) in &cases {
        let status = unverified.get("/portfolio", Some(api_key)).await.status;
        assert_eq!(status, 200, "{name} serves unverified");
    }
    let status = unverified.admin_get("/snapshots").await.json();
    assert_eq!(status["signatures"]["enabled"], false, "{status}");
}

#[tokio::test]
async fn a_forged_stripped_or_replayed_replacement_keeps_the_signed_version_serving() {
    let dir = tempdir();
    let cache = tempdir();
    let signer = key(1);
    let now = SystemTime::now();
    let api_key = "cura_replay";
    let v1 = versioned("ws-r", api_key, "v1");
    let file = write(dir.path(), "r.json", &v1);
    sign_file(&file, &v1, &signer, 1_000, now, DAY);
    let old_sig = std::fs::read(dir.path().join("r.json.sig")).unwrap();
    let old_file = std::fs::read(&file).unwrap();
    let trust = trusting(&[&signer], Some(cache.path()));
    let server = TestServer::start_in(dir, |c| c.storage.trust = trust).await;
    server.wait_version("/portfolio", api_key, "v1").await;

    // Forged: new bytes under the old signature.
    let v2 = versioned("ws-r", api_key, "v2");
    write(server.dir(), "r.json", &v2);
    assert_eq!(refused(&server, "r.json").await, "mismatch");
    server.wait_version("/portfolio", api_key, "v1").await;

    // Signed: serves.
    let file = server.dir().join("r.json");
    sign_file(&file, &v2, &signer, 2_000, now, DAY);
    server.wait_version("/portfolio", api_key, "v2").await;

    // Stripped: the signature removed.
    std::fs::remove_file(server.dir().join("r.json.sig")).unwrap();
    assert_eq!(refused(&server, "r.json").await, "unsigned");
    server.wait_version("/portfolio", api_key, "v2").await;

    // Replayed: the old file with its old, valid signature.
    replace(&server.dir().join("r.json.sig"), &old_sig);
    replace(&file, &old_file);
    eventually("the replay is refused", async || {
        match server.snapshot_status("r.json").await {
            Some(e) if e["refused"] == "replayed" => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    server.wait_version("/portfolio", api_key, "v2").await;
    let copy = tempdir();
    for name in ["r.json", "r.json.sig"] {
        std::fs::copy(server.dir().join(name), copy.path().join(name)).unwrap();
    }
    drop(server);

    // A restart remembers what it accepted (--cache-dir): still a replay.
    let trust = trusting(&[&signer], Some(cache.path()));
    let restarted = TestServer::start_in(copy, |c| c.storage.trust = trust).await;
    assert_eq!(refused(&restarted, "r.json").await, "replayed");
    // Its key is right, its workspace's data unavailable: a 503 to retry,
    // not the 401 of a wrong key (the statement, authentic, names the
    // key); why is for the operator, in /snapshots under its workspace.
    let answer = restarted.get("/portfolio", Some(api_key)).await;
    assert_eq!(answer.status, 503, "{}", answer.text());
    assert_eq!(answer.header("retry-after"), Some("30"));
    assert!(!answer.text().contains("replay"), "{}", answer.text());
    let listed = restarted
        .admin_get("/snapshots?workspace=ws-r")
        .await
        .json();
    let entry = &listed["files"][0];
    assert_eq!(entry["file"], "r.json", "{listed}");
    assert_eq!(entry["refused"], "replayed", "{listed}");
    assert_eq!(entry["residency"], "not_resident", "{listed}");

    // A writer of the directory adds a key to the file under the replayed
    // signature: keys the statement does not name are not believed, and
    // none of the file's claims count.
    let mut forged = versioned("ws-r", api_key, "v1");
    forged["api_keys"]
        .as_array_mut()
        .unwrap()
        .push(json!({ "sha256": crate::util::key_hash("cura_intruder"), "label": "x" }));
    write(restarted.dir(), "r.json", &forged);
    eventually("the forged claims count for nothing", async || {
        let (ours, theirs) = (
            restarted.get("/portfolio", Some(api_key)).await.status,
            restarted
                .get("/portfolio", Some("cura_intruder"))
                .await
                .status,
        );
        match (ours, theirs) {
            (401, 401) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
}

#[tokio::test]
async fn a_version_accepted_while_valid_keeps_serving_after_it_expires_and_says_so() {
    let dir = tempdir();
    let signer = key(3);
    let api_key = "cura_expiring";
    let value = versioned("ws-x", api_key, "v1");
    let file = write(dir.path(), "x.json", &value);
    sign_file(
        &file,
        &value,
        &signer,
        1,
        SystemTime::now(),
        Duration::from_secs(2),
    );
    let trust = trusting(&[&signer], None);
    let server = TestServer::start_in(dir, |c| c.storage.trust = trust).await;
    server.wait_version("/portfolio", api_key, "v1").await;
    eventually_expired(&server).await;
    assert_eq!(server.get("/portfolio", Some(api_key)).await.status, 200);
    let metrics = server.admin_get("/metrics").await.text();
    assert!(
        metrics.contains("portfolio_replica_signatures_expired 1"),
        "{metrics}"
    );
}

async fn eventually_expired(server: &TestServer) {
    crate::util::eventually_within(
        "the signature shows as expired",
        Duration::from_secs(10),
        async || match server.snapshot_status("x.json").await {
            Some(e) if e["signature"]["expired"] == true => Ok(()),
            other => Err(format!("{other:?}")),
        },
    )
    .await;
}

#[tokio::test]
async fn a_trusted_key_file_that_is_not_a_key_stops_the_start() {
    let dir = tempdir();
    let keys = tempdir();
    let bad = keys.path().join("fleet.pub");
    std::fs::write(&bad, "# our key\nssh-ed25519 AAAAC3Nza me@host\n").unwrap();
    let snapshots = dir.path().display().to_string();
    let out = cli(&[
        "--snapshots",
        &snapshots,
        "--listen",
        "127.0.0.1:0",
        "--admin-listen",
        "127.0.0.1:0",
        "--trust-key",
        &bad.display().to_string(),
    ])
    .await;
    assert_eq!(out.code, Some(1), "{out:?}");
    let expected = format!(
        "--trust-key: {}, line 2: expected `portfolio-replica-ed25519",
        bad.display()
    );
    assert!(out.stderr.contains("cannot serve"), "{}", out.stderr);
    assert!(out.stderr.contains(&expected), "{}", out.stderr);
}

#[tokio::test]
async fn check_says_what_a_replica_with_the_key_would_say() {
    let dir = tempdir();
    let signer = key(4);
    let public = dir.path().join("fleet.pub");
    std::fs::write(&public, signer.public().to_text()).unwrap();
    let value = snapshot("ws-check", &["cura_check"]);
    let file = write(dir.path(), "c.json", &value);
    let args = |file: &std::path::Path| {
        vec![
            "check".to_owned(),
            file.display().to_string(),
            "--trust-key".to_owned(),
            public.display().to_string(),
        ]
    };
    let out = cli(&args(&file)).await;
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(
        out.stderr.contains(
            "c.json: a replica with --trust-key would refuse it: signature refused (unsigned)"
        ),
        "{}",
        out.stderr
    );
    sign_file(&file, &value, &signer, 7, SystemTime::now(), DAY);
    let out = cli(&args(&file)).await;
    assert_eq!(out.code, Some(0), "{out:?}");
    // Revision 7 as this test signed it, shown as the time it stands for.
    let line = format!(
        "c.json: signed by key {}, revision 7 (1970-01-01T00:00:00.007Z), expires ",
        signer.id
    );
    assert!(out.stdout.contains(&line), "{}", out.stdout);
}

/// Under a budget, a private copy deleted under the server is made again
/// from the snapshot file only if what that file holds is the signed
/// content: the same records with blanks after them (the same version and
/// fingerprint, other bytes) fail the fallback's hash, and its key gets a
/// 503 rather than an answer from unsigned bytes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_private_copy_is_made_again_only_from_the_signed_bytes() {
    let dir = tempdir();
    let cache = tempdir();
    let signer = key(1);
    let mut written = Vec::new();
    for name in ["c", "d"] {
        // Records, so that each weighs more than the budget.
        let key = format!("cura_copy_{name}");
        let mut value = crate::util::fixture(&format!("ws-{name}"), &[&key], 0);
        value["version"] = json!("v1");
        let file = write(dir.path(), &format!("{name}.json"), &value);
        sign_file(&file, &value, &signer, 1, SystemTime::now(), DAY);
        written.push(value);
    }
    let trust = trusting(&[&signer], Some(cache.path()));
    let cache_dir = cache.path().to_owned();
    // A budget smaller than either: the one loaded last is held alone.
    let server = TestServer::start_in(dir, |c| {
        c.storage.trust = trust;
        c.storage.cache_dir = Some(cache_dir.clone());
        c.memory_budget = Some(1);
    })
    .await;
    let delete_copies = || {
        for copy in std::fs::read_dir(cache_dir.join("copies")).expect("copies") {
            std::fs::remove_file(copy.unwrap().path()).unwrap();
        }
    };
    let status = async |key: &str| server.get("/portfolio", Some(key)).await.status;

    delete_copies();
    server.wait_version("/portfolio", "cura_copy_c", "v1").await;

    // The same content with blanks after it: the same version and
    // fingerprint (layout is not content), other bytes than signed;
    // refused by the scan, and v1 keeps serving, from memory.
    let mut padded = serde_json::to_vec(&written[0]).unwrap();
    padded.extend_from_slice(b"\n\n  \n");
    replace(&server.dir().join("c.json"), &padded);
    assert_eq!(refused(&server, "c.json").await, "mismatch");
    assert_eq!(status("cura_copy_c").await, 200);
    // Its copy gone, and evicted by the other: its next load falls back
    // to the file, whose bytes fail the signature's hash.
    delete_copies();
    assert_eq!(status("cura_copy_d").await, 200, "made again from d.json");
    let answer = server.get("/portfolio", Some("cura_copy_c")).await;
    assert_eq!(answer.status, 503, "{}", answer.text());
}
