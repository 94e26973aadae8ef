//! Object storage as the fleet's source of truth (docs/object-storage.md),
//! against a real S3 protocol server (moto, on loopback): prefix mode
//! follows the bucket like a directory; publish, versions and rollback
//! drive manifest mode; concurrent publishers lose no update; replicas
//! converge on one version; the idle cost is one conditional GET per poll.
//! Faults are in objstore_faults.rs.

use std::time::Duration;

use serde_json::{Value, json};

use crate::util::*;

/// How often the replicas of these tests poll.
const POLL_EVERY: Duration = Duration::from_millis(100);

/// A snapshot of `workspace` readable with `key`, at `version`.
fn versioned(workspace: &str, key: &str, version: &str) -> Value {
    let mut snap = fixture(workspace, &[key], 1);
    snap["version"] = json!(version);
    snap
}

async fn replica(s3: &S3, prefix: &str) -> TestServer {
    TestServer::start_in(tempdir(), |c| s3.configure(c, prefix, POLL_EVERY)).await
}

async fn status_of(server: &TestServer) -> Value {
    server.admin_get("/snapshots").await.json()
}

#[tokio::test]
async fn prefix_mode_follows_the_bucket_like_a_directory() {
    let s3 = S3::start().await;
    s3.put_json("p/acme.json", &versioned("ws-acme", KEY, "a1"))
        .await;
    // Not snapshots: a dot-name, other endings, an object below the prefix.
    for ignored in [
        "p/.acme.json",
        "p/acme.json.tmp",
        "p/notes.txt",
        "p/deeper/x.json",
    ] {
        s3.put_json(ignored, &versioned("ws-other", OTHER_KEY, "x1"))
            .await;
    }
    let server = replica(&s3, "p").await;
    server.wait_version("/portfolio", KEY, "a1").await;
    assert_eq!(server.get("/portfolio", Some(OTHER_KEY)).await.status, 401);

    // Replacing the object is a hot reload; a new one adds a workspace.
    s3.put_json("p/acme.json", &versioned("ws-acme", KEY, "a2"))
        .await;
    server.wait_version("/portfolio", KEY, "a2").await;
    let gz = gzip(&serde_json::to_vec(&versioned("ws-other", OTHER_KEY, "o1")).unwrap());
    s3.put("p/other.json.gz", gz).await;
    server.wait_version("/portfolio", OTHER_KEY, "o1").await;

    // Deleting it unloads the workspace, as deleting a file does.
    s3.delete("p/acme.json").await;
    eventually("ws-acme unloaded", async || {
        match server.get("/portfolio", Some(KEY)).await.status {
            401 => Ok(()),
            other => Err(format!("status {other}")),
        }
    })
    .await;

    let body = status_of(&server).await;
    let files = body["files"].as_array().unwrap();
    assert_eq!(files.len(), 1, "{body}");
    let entry = &files[0];
    assert_eq!(entry["file"], "other.json.gz");
    assert_eq!(entry["source"]["key"], "p/other.json.gz");
    assert!(entry["source"]["etag"].as_str().is_some(), "{entry}");
    assert_eq!(entry["source"]["sha256"], Value::Null);
    assert!(entry["stale_seconds"].as_f64().unwrap() < 5.0, "{entry}");
    assert!(
        entry["source"]["fetched_at"]
            .as_str()
            .unwrap()
            .ends_with('Z')
    );
    assert_eq!(body["source"]["mode"], "prefix", "{body}");
    assert_eq!(body["source"]["url"], "s3://fleet/p/");
    assert_eq!(body["source"]["error"], Value::Null);

    // Idle, a replica in prefix mode lists once per poll and fetches nothing.
    let before = s3.proxy.counts();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after = s3.proxy.counts();
    let delta = |kind| after.get(kind).unwrap_or(&0) - before.get(kind).unwrap_or(&0);
    assert!((5..=15).contains(&delta("list")), "{before:?} -> {after:?}");
    assert_eq!(
        delta("get") + delta("conditional_get"),
        0,
        "{before:?} -> {after:?}"
    );
}

#[tokio::test]
async fn publish_versions_and_rollback_drive_the_fleet() {
    let s3 = S3::start().await;
    let url = s3.url("m");
    let env = s3.env();
    let files = tempdir();
    let v1 = write_json(files.path(), "acme.json", &versioned("ws-acme", KEY, "v1"));

    let out = publish_to(&url, &[&v1], &env).await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(
        out.stdout.contains("ok: "),
        "the checks of `check`: {out:?}"
    );
    assert!(
        out.stdout.contains("published: ws-acme serves v1"),
        "{out:?}"
    );

    let server = replica(&s3, "m").await;
    server.wait_version("/portfolio", KEY, "v1").await;

    let v2 = write_json(files.path(), "acme.json", &versioned("ws-acme", KEY, "v2"));
    let out = publish_to(&url, &[&v2], &env).await;
    assert_eq!(out.code, Some(0), "{out:?}");
    server.wait_version("/portfolio", KEY, "v2").await;

    // Immutable, content-addressed, gzipped objects; a versioned manifest.
    let objects = s3.keys("m/objects/ws-acme").await;
    assert_eq!(objects.len(), 2, "{objects:?}");
    for key in &objects {
        let name = key.rsplit('/').next().unwrap();
        let hex = name.strip_suffix(".json.gz").expect("a .json.gz object");
        assert!(
            hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()),
            "{key}"
        );
    }
    let manifest = s3.versions("m").await.expect("a manifest");
    assert_eq!(manifest["manifest"]["manifest_version"], 2);
    assert_eq!(manifest["manifest"]["revision"], 2);
    assert_eq!(
        manifest["workspaces"]["ws-acme"]["versions"][0]["version"],
        "v2"
    );

    let out = cli_env(&["versions", "--to", &url], &env).await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let current: Vec<&str> = out
        .stdout
        .lines()
        .filter(|l| l.trim_start().starts_with('*'))
        .collect();
    assert_eq!(current.len(), 1, "{}", out.stdout);
    assert!(current[0].contains("v2"), "{}", out.stdout);
    assert!(out.stdout.contains(" v1 "), "{}", out.stdout);

    // /snapshots names the object, its sha256 and the manifest's revision.
    let body = status_of(&server).await;
    let entry = &body["files"][0];
    assert_eq!(entry["file"], "ws-acme");
    assert_eq!(entry["source"]["manifest_revision"], 2, "{entry}");
    assert_eq!(entry["source"]["workspace_revision"], 2, "{entry}");
    assert_eq!(
        entry["source"]["key"],
        format!(
            "m/{}",
            manifest["workspaces"]["ws-acme"]["versions"][0]["key"]
                .as_str()
                .unwrap()
        )
    );
    assert_eq!(body["source"]["mode"], "manifest");

    // Roll back to the previous version, then forward by name.
    let out = cli_env(&["rollback", "ws-acme", "--to", &url], &env).await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(
        out.stdout.contains("serves v1") && out.stdout.contains("instead of v2"),
        "{out:?}"
    );
    server.wait_version("/portfolio", KEY, "v1").await;
    let out = cli_env(
        &["rollback", "ws-acme", "--to", &url, "--version", "v2"],
        &env,
    )
    .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    server.wait_version("/portfolio", KEY, "v2").await;
    let out = cli_env(&["rollback", "ws-nope", "--to", &url], &env).await;
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(out.stderr.contains("no workspace \"ws-nope\""), "{out:?}");

    // A file `check` rejects is refused with the same message; nothing moves.
    let bad = write_bytes(files.path(), "bad.json", b"{\"format_version\": 1,");
    let checked = cli(&["check".as_ref(), bad.as_os_str()]).await;
    let out = publish_to(&url, &[&v1, &bad], &env).await;
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(
        out.stderr.contains(checked.stderr.trim()),
        "{out:?} vs {checked:?}"
    );
    assert!(out.stderr.contains("nothing published"), "{out:?}");
    let manifest = s3.versions("m").await.expect("a manifest");
    assert_eq!(manifest["manifest"]["revision"], 4, "{manifest}");

    // Idle, a replica in manifest mode sends one conditional GET per poll.
    let before = s3.proxy.counts();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after = s3.proxy.counts();
    let delta = |kind| after.get(kind).unwrap_or(&0) - before.get(kind).unwrap_or(&0);
    assert!(
        (5..=15).contains(&delta("conditional_get")),
        "{before:?} -> {after:?}"
    );
    assert_eq!(
        delta("list") + delta("get") + delta("head"),
        0,
        "{before:?} -> {after:?}"
    );
    let (_, samples) = scrape(&server).await;
    let gets = value_of(
        &samples,
        "portfolio_replica_source_requests_total",
        &[("request", "conditional_get")],
    )
    .expect("the replica counts its requests");
    assert!(gets >= delta("conditional_get") as f64, "{gets}");
}

#[tokio::test]
async fn concurrent_publishers_lose_no_update() {
    // Through a proxy that passes requests one at a time: moto's own check
    // of a conditional write is not atomic across its threads.
    let s3 = S3::start_with(true).await;
    let url = s3.url("c");
    let env = s3.env();
    let files = tempdir();
    let mut runs = Vec::new();
    for n in 0..10 {
        let key = format!("cura_publisher_{n}");
        let path = write_json(
            files.path(),
            &format!("ws{n}.json"),
            &versioned(&format!("ws-{n}"), &key, "v1"),
        );
        runs.push(cli_env_owned(
            vec![
                "publish".into(),
                path.into(),
                "--to".into(),
                url.clone().into(),
            ],
            env.clone(),
        ));
    }
    // Three versions of one workspace at once as well.
    for n in 0..3 {
        let path = write_json(
            files.path(),
            &format!("shared{n}.json"),
            &versioned("ws-shared", "cura_shared", &format!("s{n}")),
        );
        runs.push(cli_env_owned(
            vec![
                "publish".into(),
                path.into(),
                "--to".into(),
                url.clone().into(),
            ],
            env.clone(),
        ));
    }
    let outputs = futures_util::future::join_all(runs).await;
    for out in &outputs {
        assert_eq!(out.code, Some(0), "{out:?}");
    }
    let manifest = s3.versions("c").await.expect("a manifest");
    assert_eq!(
        manifest["manifest"]["revision"], 13,
        "every publish is one revision: {manifest}"
    );
    let workspaces = manifest["workspaces"].as_object().unwrap();
    assert_eq!(workspaces.len(), 11, "{manifest}");
    let mut shared: Vec<&str> = manifest["workspaces"]["ws-shared"]["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["version"].as_str().unwrap())
        .collect();
    shared.sort_unstable();
    assert_eq!(
        shared,
        ["s0", "s1", "s2"],
        "no version was lost: {manifest}"
    );
}

/// `cli_env` for a future that owns its arguments.
async fn cli_env_owned(
    args: Vec<std::ffi::OsString>,
    env: Vec<(&'static str, String)>,
) -> CliOutput {
    cli_env(&args, &env).await
}

#[tokio::test]
async fn two_replicas_converge_on_every_publish_and_rollback() {
    let s3 = S3::start().await;
    let url = s3.url("two");
    let env = s3.env();
    let files = tempdir();
    let publish = async |version: &str| {
        let path = write_json(
            files.path(),
            "acme.json",
            &versioned("ws-acme", KEY, version),
        );
        let out = publish_to(&url, &[&path], &env).await;
        assert_eq!(out.code, Some(0), "{out:?}");
    };
    publish("v1").await;
    let (a, b) = (replica(&s3, "two").await, replica(&s3, "two").await);
    for version in ["v1", "v2", "v3"] {
        if version != "v1" {
            publish(version).await;
        }
        a.wait_version("/portfolio", KEY, version).await;
        b.wait_version("/portfolio", KEY, version).await;
        let (ra, rb) = (
            a.get("/portfolio", Some(KEY)).await,
            b.get("/portfolio", Some(KEY)).await,
        );
        assert_eq!(
            ra.header("etag"),
            rb.header("etag"),
            "same version, same ETag"
        );
    }
    let out = cli_env(&["rollback", "ws-acme", "--to", &url], &env).await;
    assert_eq!(out.code, Some(0), "{out:?}");
    a.wait_version("/portfolio", KEY, "v2").await;
    b.wait_version("/portfolio", KEY, "v2").await;

    // One command shows what each replica serves against the manifest.
    let (ra, rb) = (a.admin.to_string(), b.admin.to_string());
    let out = cli_env(
        &["versions", "--to", &url, "--replica", &ra, "--replica", &rb],
        &env,
    )
    .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    for admin in [&ra, &rb] {
        assert!(
            out.stdout.contains(&format!(
                "{admin}  ws-acme  v2 (current)  workspace revision 4"
            )),
            "{}",
            out.stdout
        );
    }
}

#[tokio::test]
async fn a_file_url_is_read_through_the_same_code_path() {
    let root = tempdir();
    let url = format!("file://{}/fleet/", root.path().display());
    let files = tempdir();
    let v1 = write_json(files.path(), "acme.json", &versioned("ws-acme", KEY, "v1"));
    let out = publish_to(&url, &[&v1], &[]).await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let server = TestServer::start_in(tempdir(), |c| {
        c.snapshots = portfolio_replica::storage::Location::parse(&url).expect("a file:// URL");
        c.poll_interval = Some(POLL_EVERY);
    })
    .await;
    server.wait_version("/portfolio", KEY, "v1").await;
    let v2 = write_json(files.path(), "acme.json", &versioned("ws-acme", KEY, "v2"));
    let out = publish_to(&url, &[&v2], &[]).await;
    assert_eq!(out.code, Some(0), "{out:?}");
    server.wait_version("/portfolio", KEY, "v2").await;
    let out = cli(&["rollback", "ws-acme", "--to", &url]).await;
    assert_eq!(out.code, Some(0), "{out:?}");
    server.wait_version("/portfolio", KEY, "v1").await;
}

/// Replicas may start before the first publish: an S3 prefix with no
/// objects is an empty fleet, ready and serving nothing, not an error
/// (unlike a `file://` prefix whose directory is missing, tests/it/cli/locations.rs).
#[tokio::test]
async fn a_replica_starts_ready_on_an_empty_prefix_and_serves_the_first_publish() {
    let s3 = S3::start().await;
    let server = replica(&s3, "empty").await;
    assert_eq!(server.get("/readyz", None).await.status, 200);
    let body = status_of(&server).await;
    assert_eq!(body["files"], json!([]), "{body}");
    assert_eq!(body["source"]["error"], Value::Null, "{body}");

    let files = tempdir();
    let v1 = write_json(files.path(), "acme.json", &versioned("ws-acme", KEY, "v1"));
    let out = publish_to(&s3.url("empty"), &[&v1], &s3.env()).await;
    assert_eq!(out.code, Some(0), "{out:?}");
    server.wait_version("/portfolio", KEY, "v1").await;
}
