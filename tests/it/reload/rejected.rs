//! (b) A rejected replacement keeps the previous version serving.

use std::path::Path;

use serde_json::{Value, json};

use super::*;
use crate::util::*;

/// Serves `v1` from `acme.json`, lets `spoil` replace it by something that
/// must be rejected, and checks that `/snapshots` reports an error for
/// `acme.json` mentioning `mentions` while `v1` keeps serving; then that a
/// good `v2` replaces it and the error is gone.
async fn a_bad_replacement_keeps_v1_serving(spoil: impl FnOnce(&Path), mentions: &[&str]) {
    let dir = tempdir();
    write_json(dir.path(), "acme.json", &acme("v1"));
    let server = TestServer::start_in(dir, |_| {}).await;
    assert_serving(&server, KEY, "v1").await;
    wait_clean(&server, "acme.json", "v1").await;

    spoil(server.dir());
    let entry = server.wait_error("acme.json").await;
    let error = entry["error"].as_str().unwrap_or_default();
    let mut words = vec!["acme.json"];
    words.extend_from_slice(mentions);
    assert_mentions(error, &words, "/snapshots of the rejected replacement");
    assert_serving(&server, KEY, "v1").await;

    // A good file ends the error; a directory must go before a file can take its name.
    let path = server.dir().join("acme.json");
    if std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir()) {
        std::fs::remove_dir_all(&path).expect("remove the directory");
    }
    replace_json(server.dir(), "acme.json", &acme("v2"));
    wait_serving(&server, KEY, "v2").await;
    wait_clean(&server, "acme.json", "v2").await;
}

/// Returns the JSON text of `acme(version)` changed by `change`.
fn acme_bytes(version: &str, change: impl FnOnce(&mut Value)) -> Vec<u8> {
    let mut snap = acme(version);
    change(&mut snap);
    serde_json::to_vec_pretty(&snap).expect("serialize")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_truncated_replacement_is_rejected_and_v1_keeps_serving() {
    a_bad_replacement_keeps_v1_serving(
        |dir| {
            let full = acme_bytes("v-truncated", |_| {});
            replace_bytes(dir, "acme.json", &full[..full.len() / 2]);
        },
        &[],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_replacement_is_rejected_and_v1_keeps_serving() {
    a_bad_replacement_keeps_v1_serving(|dir| replace_bytes(dir, "acme.json", b""), &[]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_json_replacement_is_rejected_and_v1_keeps_serving() {
    a_bad_replacement_keeps_v1_serving(
        |dir| {
            replace_bytes(
                dir,
                "acme.json",
                br#"{"format_version": 1, "version": "v-invalid",, "workspace": {"id": "ws-acme"}}"#,
            )
        },
        &[],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replacement_with_a_wrong_json_type_is_rejected_and_v1_keeps_serving() {
    let id = uuid(1);
    a_bad_replacement_keeps_v1_serving(
        |dir| {
            let bytes = acme_bytes("v-wrong-type", |s| {
                s["companies"][0]["attributes"]["name"] = json!(42);
            });
            replace_bytes(dir, "acme.json", &bytes);
        },
        &["companies", &id, "name"],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replacement_with_a_duplicate_id_is_rejected_and_v1_keeps_serving() {
    let id = uuid(101);
    a_bad_replacement_keeps_v1_serving(
        |dir| {
            let bytes = acme_bytes("v-duplicate", |s| {
                s["tasks"][1]["id"] = s["tasks"][0]["id"].clone();
            });
            replace_bytes(dir, "acme.json", &bytes);
        },
        &["tasks", &id],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replacement_with_an_unknown_format_version_is_rejected_and_v1_keeps_serving() {
    a_bad_replacement_keeps_v1_serving(
        |dir| {
            let bytes = acme_bytes("v-format-2", |s| s["format_version"] = json!(2));
            replace_bytes(dir, "acme.json", &bytes);
        },
        &["format_version"],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dangling_symlink_replacement_is_rejected_and_v1_keeps_serving() {
    a_bad_replacement_keeps_v1_serving(
        |dir| replace_by_symlink(dir, "acme.json", "missing-target"),
        &[],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_directory_in_place_of_the_file_is_rejected_and_v1_keeps_serving() {
    a_bad_replacement_keeps_v1_serving(
        |dir| {
            // A directory cannot be renamed over a file: the file goes first,
            // and the directory follows at once, well within the coalescing
            // of file events.
            let path = dir.join("acme.json");
            std::fs::remove_file(&path).expect("remove acme.json");
            std::fs::create_dir(&path).expect("create a directory named acme.json");
        },
        &[],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreadable_replacement_is_rejected_and_v1_keeps_serving() {
    // Permissions do not stop root, but no one can read `/proc/self/mem` from
    // offset 0: a regular file whose every read fails (EIO), for any user.
    assert!(
        std::fs::read("/proc/self/mem").is_err(),
        "/proc/self/mem is readable here"
    );
    a_bad_replacement_keeps_v1_serving(
        |dir| replace_by_symlink(dir, "acme.json", "/proc/self/mem"),
        &[],
    )
    .await;
}
