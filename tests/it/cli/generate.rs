//! `generate`: the snapshots it writes pass `check` and are served with
//! the keys it prints.

use std::ffi::OsStr;

use serde_json::{Value, json};

use crate::util::*;

/// Fails listing every record of `body["data"]` (one record or a list) that
/// is not exactly `{ id, attributes }`.
fn assert_records(body: &Value, context: &str) {
    let records: Vec<&Value> = match &body["data"] {
        Value::Array(list) => list.iter().collect(),
        one => vec![one],
    };
    for r in records {
        assert_keys(r, &["id", "attributes"], context);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generated_snapshots_pass_check_and_are_served() {
    let dir = tempdir();
    let out = cli(&[
        OsStr::new("generate"),
        OsStr::new("--out"),
        dir.path().as_os_str(),
        OsStr::new("--scale"),
        OsStr::new("small"),
        OsStr::new("--seed"),
        OsStr::new("42"),
    ])
    .await;
    assert_eq!(out.code, Some(0), "generate: {}", out.stderr);
    let acme = dir.path().join("acme.json");
    let globex = dir.path().join("globex.json");
    assert!(
        acme.is_file() && globex.is_file(),
        "generate writes acme.json and globex.json"
    );
    let checked = cli(&[OsStr::new("check"), acme.as_os_str(), globex.as_os_str()]).await;
    assert_eq!(
        checked.code,
        Some(0),
        "check of the generated files: {}",
        checked.stderr
    );

    let acme_snap: Value = serde_json::from_slice(&std::fs::read(&acme).expect("read acme.json"))
        .expect("acme.json is JSON");
    let hashes: Vec<&Value> = acme_snap["api_keys"]
        .as_array()
        .expect("api_keys")
        .iter()
        .map(|k| &k["sha256"])
        .collect();
    assert!(
        hashes.contains(&&json!(key_hash("cura_demo_acme_key"))),
        "acme.json lists the demo key's hash"
    );

    let server = TestServer::start_in(dir, |_| {}).await;
    for (key, file) in [
        ("cura_demo_acme_key", &acme),
        ("cura_demo_globex_key", &globex),
    ] {
        let snap: Value =
            serde_json::from_slice(&std::fs::read(file).expect("read a generated file"))
                .expect("a generated file is JSON");
        let mut want: Vec<String> = snap["companies"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| c["id"].as_str().expect("a company id").to_string())
            .collect();
        want.sort();
        assert!(!want.is_empty(), "{key}: the generated portfolio is empty");
        // The key's portfolio, paged to its end, is exactly the companies of its file.
        let mut got = Vec::new();
        for page in 0.. {
            assert!(
                page * 100 <= want.len(),
                "{key}: /portfolio pages past the file's companies"
            );
            let resp = server
                .get(
                    &format!("/portfolio?limit=100&offset={}", page * 100),
                    Some(key),
                )
                .await;
            let body = resp.assert_ok(key);
            assert_records(&body, "/portfolio");
            got.extend(resp.ids());
            if body["pagination"]["hasMore"] != json!(true) {
                break;
            }
        }
        got.sort();
        assert_eq!(
            got, want,
            "{key}: /portfolio and the file's companies differ"
        );
        let c = &want[0];
        for path in [
            format!("/portfolio/{c}"),
            format!("/portfolio/{c}/tasks"),
            format!("/portfolio/{c}/roles"),
            format!("/portfolio/{c}/notes"),
            format!("/portfolio/{c}/metrics"),
            "/tasks".to_string(),
            "/roles".to_string(),
            "/feed".to_string(),
        ] {
            let body = server.get_ok(&path, key).await;
            assert_records(&body, &format!("{key} {path}"));
        }
    }

    // Every meeting of the generated acme workspace is served with its notes.
    let version = acme_snap["version"].as_str();
    for m in acme_snap["meetings"]
        .as_array()
        .into_iter()
        .flatten()
        .take(5)
    {
        let id = m["id"].as_str().expect("a meeting id");
        let resp = server
            .get(
                &format!("/meetings/{id}?include=notes"),
                Some("cura_demo_acme_key"),
            )
            .await;
        let body = resp.assert_ok(&format!("meeting {id}"));
        assert_keys(
            &body["data"],
            &["id", "attributes", "notes"],
            "a generated meeting",
        );
        if let Some(version) = version {
            assert_eq!(resp.header("x-snapshot-version"), Some(version));
        }
    }
}
