//! One key opens one workspace, on every replica: `publish` and `rollback`
//! refuse a key that another workspace's current version holds (against a
//! real S3 protocol server), the manifest records each version's key
//! hashes, and replicas that reached the same files by different histories
//! agree on which workspace a key reads (docs/reload.md#conflicts).

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};

use crate::util::*;

fn versioned(workspace: &str, keys: &[&str], version: &str) -> Value {
    let mut snap = fixture(workspace, keys, 1);
    snap["version"] = json!(version);
    snap
}

async fn manifest(s3: &S3, prefix: &str) -> Option<Value> {
    s3.versions(prefix).await
}

/// ws-a holding KEY, and ws-b asking for it too.
fn two_files(dir: &Path) -> (PathBuf, PathBuf) {
    let a = write_json(dir, "a.json", &versioned("ws-a", &[KEY], "a1"));
    let b = write_json(dir, "b.json", &versioned("ws-b", &[OTHER_KEY, KEY], "b1"));
    (a, b)
}

#[tokio::test]
async fn publish_refuses_two_workspaces_sharing_a_key_in_one_call() {
    let s3 = S3::start().await;
    let env = s3.env();
    let files = tempdir();
    let (a, b) = two_files(files.path());
    let url = s3.url("one");
    let out = publish_to(&url, &[&a, &b], &env).await;
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(
        out.stderr.contains("one key must not open two workspaces")
            && out.stderr.contains("nothing published"),
        "{out:?}"
    );
    assert_eq!(manifest(&s3, "one").await, None, "nothing may be written");
}

#[tokio::test]
async fn publish_refuses_a_key_that_a_published_workspace_holds() {
    let s3 = S3::start().await;
    let env = s3.env();
    let files = tempdir();
    let (a, b) = two_files(files.path());
    let url = s3.url("two");
    let out = publish_to(&url, &[&a], &env).await;
    assert_eq!(out.code, Some(0), "{out:?}");
    let written = manifest(&s3, "two").await.expect("a manifest");
    assert_eq!(
        written["workspaces"]["ws-a"]["versions"][0]["key_hashes"],
        json!([key_hash(KEY)]),
        "each version records its key hashes: {written}"
    );
    let out = publish_to(&url, &[&b], &env).await;
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(
        out.stderr.contains("ws-a") && out.stderr.contains("b.json"),
        "the message names both workspaces' snapshots: {out:?}"
    );
    let after = manifest(&s3, "two").await.expect("a manifest");
    assert_eq!(
        after["manifest"]["revision"], written["manifest"]["revision"],
        "{after}"
    );
    assert!(after["workspaces"].get("ws-b").is_none(), "{after}");
}

/// ws-a's v1 held KEY; v2 gives it up and ws-b takes it; going back to v1
/// would give KEY to two workspaces.
#[tokio::test]
async fn rollback_refuses_a_version_whose_key_another_workspace_holds_now() {
    let s3 = S3::start().await;
    let env = s3.env();
    let files = tempdir();
    let dir = files.path();
    let (a, b) = two_files(dir);
    let url = s3.url("three");
    assert_eq!(publish_to(&url, &[&a], &env).await.code, Some(0));
    let a2 = write_json(dir, "a2.json", &versioned("ws-a", &["cura_a_second"], "a2"));
    assert_eq!(publish_to(&url, &[&a2], &env).await.code, Some(0));
    let out = publish_to(&url, &[&b], &env).await;
    assert_eq!(out.code, Some(0), "KEY is free once ws-a moved on: {out:?}");
    let before = manifest(&s3, "three").await.expect("a manifest");
    let out = cli_env(&["rollback", "ws-a", "--to", &url], &env).await;
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(
        out.stderr.contains("one key must not open two workspaces") && out.stderr.contains("ws-b"),
        "{out:?}"
    );
    assert_eq!(manifest(&s3, "three").await, Some(before));
}

/// Writes `value` to `dir/name`, dated `age` ago.
fn write_aged(dir: &Path, name: &str, value: &Value, age: Duration) {
    let path = write_json(dir, name, value);
    let file = std::fs::File::options()
        .write(true)
        .open(&path)
        .expect("open to date");
    file.set_modified(SystemTime::now() - age)
        .expect("set the modification time");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_with_different_histories_agree_on_which_workspace_a_key_reads() {
    let z = versioned("ws-z", &[KEY], "z1");
    let a = versioned("ws-a", &[OTHER_KEY, KEY], "a1");
    let hour = Duration::from_secs(3600);

    // The first replica served z.json before a.json arrived.
    let first = TestServer::start_in(tempdir(), |_| {}).await;
    write_aged(first.dir(), "z.json", &z, 2 * hour);
    first.wait_version("/portfolio", KEY, "z1").await;
    write_aged(first.dir(), "a.json", &a, hour);
    first.wait_error("a.json").await;

    // The second one starts on both files at once; a.json sorts first.
    let dir = tempdir();
    write_aged(dir.path(), "z.json", &z, 2 * hour);
    write_aged(dir.path(), "a.json", &a, hour);
    let second = TestServer::start_in(dir, |_| {}).await;

    for (name, server) in [("first", &first), ("second", &second)] {
        let answer = server.get("/portfolio", Some(KEY)).await;
        assert_eq!(answer.status, 200, "{name}: {}", answer.text());
        assert_eq!(
            answer.header("x-snapshot-version"),
            Some("z1"),
            "{name} replica: the older z.json holds KEY"
        );
        let status = server.snapshot_status("a.json").await.expect("a.json");
        assert!(
            status["error"]
                .as_str()
                .is_some_and(|e| e.contains("z.json")),
            "{name}: {status}"
        );
    }

    // Once z.json is older no more (rewritten now), a.json is the older
    // one: every replica gives KEY to ws-a, the first one too.
    write_aged(first.dir(), "z.json", &z, Duration::ZERO);
    first.wait_version("/portfolio", KEY, "a1").await;
    write_aged(second.dir(), "z.json", &z, Duration::ZERO);
    second.wait_version("/portfolio", KEY, "a1").await;
}
