//! Hot reload (docs/reload.md): files replaced, rewritten, deleted and added
//! while the server runs, seen through file events, polling, SIGHUP and a
//! Kubernetes ConfigMap volume. Every response comes from one snapshot
//! version even while the file churns; a rejected replacement keeps the
//! previous version serving and is reported on `/snapshots` (§6) until a good
//! file replaces it; `/readyz` and the API answer 503 until the first scan.
//!
//! Every snapshot here tags its records with its `version`: company names,
//! task titles and feed titles all start with it, so a response that mixes
//! two versions, or that disagrees with its `X-Snapshot-Version`, shows.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::util::*;

/// The workspace of `acme.json`, the file most tests change.
const ACME: &str = "ws-acme";

// ---------------------------------------------------------------------------
// Snapshots tagged with their version.
// ---------------------------------------------------------------------------

/// Returns the timestamp of the `i`th record of a kind: a greater `i` is newer.
fn at(i: u64) -> String {
    format!("2026-03-01T10:{:02}:{:02}Z", i / 60, i % 60)
}

/// Returns a snapshot of `workspace`, readable with `key`, whose `version` is
/// `version` and whose `count` companies, tasks and feed entries carry that
/// version as the first word of their name or title.
fn tagged_snapshot(workspace: &str, key: &str, version: &str, count: u64) -> Value {
    let mut snap = snapshot(workspace, &[key]);
    snap["version"] = json!(version);
    add(
        &mut snap,
        "companies",
        (1..=count).map(|i| company(i, &format!("{version} company {i:02}"))),
    );
    add(
        &mut snap,
        "tasks",
        (1..=count).map(|i| {
            with(
                task(100 + i, i, &at(i)),
                json!({ "title": format!("{version} task {i:02}") }),
            )
        }),
    );
    add(
        &mut snap,
        "feed",
        (1..=count).map(|i| {
            with(
                feed_entry(200 + i, i, &at(i)),
                json!({ "title": format!("{version} feed {i:02}") }),
            )
        }),
    );
    snap
}

/// Returns a snapshot of `ws-acme`, readable with `KEY`, of three records of
/// each kind tagged with `version`.
fn acme(version: &str) -> Value {
    tagged_snapshot(ACME, KEY, version, 3)
}

/// Returns why some record of the list `body` does not carry `version` as the
/// first word of its `field`, if one does not.
fn untagged(body: &Value, field: &str, version: &str) -> Option<String> {
    let Some(data) = body["data"].as_array() else {
        return Some(format!("no data array in {body}"));
    };
    data.iter().find_map(|rec| {
        let text = rec["attributes"][field].as_str().unwrap_or_default();
        (text.split(' ').next() != Some(version)).then(|| {
            format!(
                "record {} has {field} {text:?} in a response of version {version}",
                rec["id"]
            )
        })
    })
}

/// Returns why `GET path` with `key` is not a 200 of `version` whose records
/// all carry `version` in `field`, if it is not.
async fn version_problem(
    server: &TestServer,
    key: &str,
    path: &str,
    field: &str,
    version: &str,
) -> Option<String> {
    let resp = server.get(path, Some(key)).await;
    if resp.status != 200 {
        return Some(format!(
            "GET {path}: status {}, body {}",
            resp.status,
            resp.text()
        ));
    }
    let served = resp.header("x-snapshot-version");
    if served != Some(version) {
        return Some(format!(
            "GET {path}: X-Snapshot-Version {served:?} instead of {version:?}"
        ));
    }
    let body = resp.json();
    if body["data"].as_array().is_none_or(Vec::is_empty) {
        return Some(format!("GET {path}: no records in {body}"));
    }
    untagged(&body, field, version).map(|p| format!("GET {path}: {p}"))
}

/// Returns why the lists of the workspace of `key` are not all served from
/// `version`, if they are not.
async fn serving_problem(server: &TestServer, key: &str, version: &str) -> Option<String> {
    for (path, field) in [
        ("/portfolio", "name"),
        ("/tasks", "title"),
        ("/feed", "title"),
    ] {
        if let Some(problem) = version_problem(server, key, path, field, version).await {
            return Some(problem);
        }
    }
    None
}

/// Fails unless the workspace of `key` is served from `version` right now.
async fn assert_serving(server: &TestServer, key: &str, version: &str) {
    if let Some(problem) = serving_problem(server, key, version).await {
        panic!("version {version} is not served: {problem}");
    }
}

/// Waits until the workspace of `key` is served from `version`.
async fn wait_serving(server: &TestServer, key: &str, version: &str) {
    eventually(&format!("version {version} is served"), async || {
        serving_problem(server, key, version)
            .await
            .map_or(Ok(()), Err)
    })
    .await;
}

/// Waits until the workspace of `key` answers 401, and checks the answer.
async fn wait_unauthorized(server: &TestServer, key: &str) {
    eventually("the key is refused", async || {
        let resp = server.get("/portfolio", Some(key)).await;
        match resp.status {
            401 => Ok(()),
            status => Err(format!("status {status}, body {}", resp.text())),
        }
    })
    .await;
    for path in ["/portfolio", "/tasks", "/feed"] {
        server
            .get(path, Some(key))
            .await
            .assert_error(401, &format!("GET {path} of an unloaded workspace"));
    }
}

/// Waits until admin `/snapshots` lists `file` as serving `version`, without error.
async fn wait_clean(server: &TestServer, file: &str, version: &str) {
    eventually(
        &format!("/snapshots shows {file} serving {version} without error"),
        async || match server.snapshot_status(file).await {
            Some(entry) if entry["error"].is_null() && entry["version"] == json!(version) => {
                if entry["workspace"].is_string() {
                    Ok(())
                } else {
                    Err(format!("no workspace in {entry}"))
                }
            }
            other => Err(format!("entry {other:?}")),
        },
    )
    .await;
}

/// Fails unless `error` mentions every word of `words`.
fn assert_mentions(error: &str, words: &[&str], context: &str) {
    let missing: Vec<&&str> = words.iter().filter(|w| !error.contains(**w)).collect();
    assert!(
        missing.is_empty(),
        "{context}: the error does not mention {missing:?}: {error}"
    );
}

/// Renames a new symlink to `target` over `dir/name`.
fn replace_by_symlink(dir: &Path, name: &str, target: &str) {
    let tmp = dir.join(format!("{name}.tmp"));
    std::os::unix::fs::symlink(target, &tmp).expect("create a symlink");
    std::fs::rename(&tmp, dir.join(name)).expect("rename a symlink into place");
}

/// Sets `stop` when dropped, so that a failing test stops its helpers.
struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Sends `GET /portfolio` with `key` to `api` until `stop` is set and
/// returns how many requests were sent and every answer that was not a 200
/// of `version`.
async fn keep_asking(
    api: SocketAddr,
    key: &'static str,
    version: &'static str,
    stop: Arc<AtomicBool>,
) -> (usize, Vec<String>) {
    let mut requests = 0;
    let mut failures = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        requests += 1;
        match get_from(api, "/portfolio", Some(key)).await {
            Ok(resp)
                if resp.status == 200 && resp.header("x-snapshot-version") == Some(version) => {}
            Ok(resp) => failures.push(format!(
                "status {}, version {:?}, body {}",
                resp.status,
                resp.header("x-snapshot-version"),
                resp.text()
            )),
            Err(e) => failures.push(e),
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    (requests, failures)
}

// ---------------------------------------------------------------------------
// (a) Consistency under churn.
// ---------------------------------------------------------------------------

/// The page size of the churn clients: every list takes several pages.
const PAGE: usize = 7;

/// The records of each kind in an `A-n` and in a `B-n` snapshot.
const A_COUNT: u64 = 30;
const B_COUNT: u64 = 23;

/// Returns how many records of each kind the snapshot `version` holds.
fn count_of(version: &str) -> Option<usize> {
    if version.starts_with("A-") {
        Some(A_COUNT as usize)
    } else if version.starts_with("B-") {
        Some(B_COUNT as usize)
    } else {
        None
    }
}

/// What one paging client saw.
#[derive(Default)]
struct Seen {
    requests: usize,
    traversals: usize,
    failures: Vec<String>,
}

/// Sends `GET url`, records a failure unless it is a 200 with a version
/// whose records all carry that version in `field`, and returns the body and
/// the version of a 200.
async fn fetch_page(
    api: SocketAddr,
    url: &str,
    field: &str,
    seen: &mut Seen,
    versions: &Mutex<BTreeSet<String>>,
) -> Option<(Value, String)> {
    seen.requests += 1;
    let resp = match get_from(api, url, Some(KEY)).await {
        Ok(resp) => resp,
        Err(e) => {
            seen.failures.push(format!("GET {url}: {e}"));
            return None;
        }
    };
    if resp.status != 200 {
        seen.failures.push(format!(
            "GET {url}: status {}, body {}",
            resp.status,
            resp.text()
        ));
        return None;
    }
    let Some(version) = resp.header("x-snapshot-version").map(str::to_owned) else {
        seen.failures
            .push(format!("GET {url}: 200 without X-Snapshot-Version"));
        return None;
    };
    versions.lock().expect("versions").insert(version.clone());
    let body = resp.json();
    if let Some(problem) = untagged(&body, field, &version) {
        seen.failures.push(format!("GET {url}: {problem}"));
    }
    Some((body, version))
}

/// Pages through an offset list with `PAGE` records a page, checking that
/// every page agrees with the record count of its own version.
async fn traverse_offset_list(
    api: SocketAddr,
    path: &str,
    field: &str,
    seen: &mut Seen,
    versions: &Mutex<BTreeSet<String>>,
) {
    let mut offset = 0;
    while offset <= A_COUNT as usize {
        let url = format!("{path}?limit={PAGE}&offset={offset}");
        let Some((body, version)) = fetch_page(api, &url, field, seen, versions).await else {
            return;
        };
        let Some(count) = count_of(&version) else {
            seen.failures
                .push(format!("GET {url}: unexpected version {version}"));
            return;
        };
        let len = body["data"].as_array().map_or(0, Vec::len);
        let want_len = count.saturating_sub(offset).min(PAGE);
        let has_more = body["pagination"]["hasMore"].as_bool();
        if len != want_len || has_more != Some(offset + len < count) {
            seen.failures.push(format!(
                "GET {url}: {len} records and hasMore {has_more:?}, but version {version} \
                 holds {count}: {}",
                body["pagination"]
            ));
        }
        if has_more != Some(true) {
            return;
        }
        offset += PAGE;
    }
    seen.failures
        .push(format!("{path}: hasMore stayed true past every record"));
}

/// Pages through `/feed` with `PAGE` entries a page, following `nextCursor`.
/// Every version holds the entries `1..=count` at the same instants, the
/// oldest being number 1, so each page can be checked on its own.
async fn traverse_feed(api: SocketAddr, seen: &mut Seen, versions: &Mutex<BTreeSet<String>>) {
    let mut cursor: Option<String> = None;
    for _ in 0..=A_COUNT as usize / PAGE + 1 {
        let url = match &cursor {
            Some(c) => format!("/feed?limit={PAGE}&cursor={}", enc(c)),
            None => format!("/feed?limit={PAGE}"),
        };
        let Some((body, version)) = fetch_page(api, &url, "title", seen, versions).await else {
            return;
        };
        let data = body["data"].as_array().cloned().unwrap_or_default();
        let published: Vec<&str> = data
            .iter()
            .map(|e| e["attributes"]["published_at"].as_str().unwrap_or_default())
            .collect();
        if published.windows(2).any(|w| w[0] <= w[1]) {
            seen.failures
                .push(format!("GET {url}: not newest first: {published:?}"));
        }
        let next = body["pagination"]["nextCursor"].clone();
        let reached_oldest = data.last().is_none_or(|e| {
            e["attributes"]["title"]
                .as_str()
                .is_some_and(|t| t.ends_with(" feed 01"))
        });
        if reached_oldest != next.is_null() || (!next.is_null() && data.len() != PAGE) {
            seen.failures.push(format!(
                "GET {url} (version {version}): {} entries, the last {:?}, nextCursor {next}",
                data.len(),
                data.last().map(|e| &e["attributes"]["title"])
            ));
            return;
        }
        match next.as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => return,
        }
    }
    seen.failures
        .push("/feed: nextCursor stayed set past every entry".to_string());
}

/// Traverses `/portfolio`, `/tasks` and `/feed` again and again until `stop` is set.
async fn churn_client(
    api: SocketAddr,
    stop: Arc<AtomicBool>,
    versions: Arc<Mutex<BTreeSet<String>>>,
) -> Seen {
    let mut seen = Seen::default();
    while !stop.load(Ordering::Relaxed) {
        traverse_offset_list(api, "/portfolio", "name", &mut seen, &versions).await;
        traverse_offset_list(api, "/tasks", "title", &mut seen, &versions).await;
        traverse_feed(api, &mut seen, &versions).await;
        seen.traversals += 1;
    }
    seen
}

/// How many versions the churn clients must see: the reloads they page through.
const VERSIONS_SEEN: usize = 8;

/// Whether `versions` holds `VERSIONS_SEEN` versions, among them a reloaded
/// `A-n` (n > 0) and a `B-n`.
fn enough_versions_seen(versions: &BTreeSet<String>) -> bool {
    versions.len() >= VERSIONS_SEEN
        && versions.iter().any(|v| v.starts_with("A-") && v != "A-0")
        && versions.iter().any(|v| v.starts_with("B-"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_response_comes_from_one_version_while_the_file_churns() {
    let dir = tempdir();
    write_json(
        dir.path(),
        "acme.json",
        &tagged_snapshot(ACME, KEY, "A-0", A_COUNT),
    );
    let server = TestServer::start_in(dir, |_| {}).await;
    let stop = Arc::new(AtomicBool::new(false));
    let _stop_on_failure = StopOnDrop(Arc::clone(&stop));
    let versions = Arc::new(Mutex::new(BTreeSet::new()));
    let clients: Vec<_> = (0..4)
        .map(|_| {
            tokio::spawn(churn_client(
                server.api,
                Arc::clone(&stop),
                Arc::clone(&versions),
            ))
        })
        .collect();

    // The writer alternates A and B at least 50 times, a few milliseconds
    // apart, and goes on until the clients have paged through several
    // versions of both.
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut writes = 0u64;
    let last = loop {
        writes += 1;
        let (version, count) = if writes % 2 == 1 {
            (format!("B-{writes}"), B_COUNT)
        } else {
            (format!("A-{writes}"), A_COUNT)
        };
        // Backdated, so that the server reloads many times during the churn
        // instead of once after it.
        let snap = tagged_snapshot(ACME, KEY, &version, count);
        replace_backdated(
            server.dir(),
            "acme.json",
            &serde_json::to_vec(&snap).expect("serialize"),
        );
        if writes >= 50 && enough_versions_seen(&versions.lock().expect("versions")) {
            break version;
        }
        assert!(
            Instant::now() < deadline,
            "after {writes} replacements the clients saw only {:?}",
            versions.lock().expect("versions")
        );
        tokio::time::sleep(Duration::from_millis(4)).await;
    };
    // The last replacement is served in the end.
    eventually(&format!("the last version {last} is served"), async || {
        let resp = server.get("/portfolio", Some(KEY)).await;
        match resp.header("x-snapshot-version") {
            Some(v) if resp.status == 200 && v == last => Ok(()),
            v => Err(format!("status {}, version {v:?}", resp.status)),
        }
    })
    .await;
    stop.store(true, Ordering::Relaxed);

    let mut failures = Vec::new();
    let mut requests = 0;
    for client in clients {
        let seen = client.await.expect("a client panicked");
        assert!(
            seen.traversals > 0,
            "a client finished no traversal in {} requests",
            seen.requests
        );
        requests += seen.requests;
        failures.extend(seen.failures);
    }
    let versions = versions.lock().expect("versions").clone();
    assert!(
        failures.is_empty(),
        "{} of {requests} responses were wrong during {writes} replacements; the first ones:\n{}",
        failures.len(),
        failures[..failures.len().min(20)].join("\n")
    );
    assert!(
        enough_versions_seen(&versions),
        "the clients saw too few versions: {versions:?}"
    );
}

// ---------------------------------------------------------------------------
// (b) A rejected replacement keeps the previous version serving.
// ---------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------
// (c) to (h) Deletion, polling, gzip, ConfigMap volumes, SIGHUP, conflicts.
// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_file_unloads_its_workspace_and_no_other() {
    let dir = tempdir();
    write_json(dir.path(), "acme.json", &acme("v1"));
    write_json(
        dir.path(),
        "other.json",
        &tagged_snapshot("ws-other", OTHER_KEY, "o1", 3),
    );
    let server = TestServer::start_in(dir, |_| {}).await;
    assert_serving(&server, KEY, "v1").await;
    assert_serving(&server, OTHER_KEY, "o1").await;

    let stop = Arc::new(AtomicBool::new(false));
    let _stop_on_failure = StopOnDrop(Arc::clone(&stop));
    let other = tokio::spawn(keep_asking(server.api, OTHER_KEY, "o1", Arc::clone(&stop)));
    std::fs::remove_file(server.dir().join("acme.json")).expect("remove acme.json");
    wait_unauthorized(&server, KEY).await;
    // The other workspace is asked a little longer after the unload.
    tokio::time::sleep(Duration::from_millis(100)).await;
    stop.store(true, Ordering::Relaxed);
    let (requests, failures) = other.await.expect("the other client panicked");
    assert!(requests > 0, "the other workspace was never asked");
    assert!(
        failures.is_empty(),
        "{} of {requests} requests of the other workspace failed; the first ones:\n{}",
        failures.len(),
        failures[..failures.len().min(20)].join("\n")
    );
    assert_serving(&server, OTHER_KEY, "o1").await;
    wait_clean(&server, "other.json", "o1").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn polling_picks_up_a_create_a_replace_a_rewrite_and_a_delete() {
    let server = TestServer::start_in(tempdir(), |c| {
        c.poll_interval = Some(Duration::from_millis(50));
    })
    .await;
    server
        .get("/portfolio", Some(KEY))
        .await
        .assert_error(401, "before any file");

    write_json(server.dir(), "acme.json", &acme("v1"));
    wait_serving(&server, KEY, "v1").await;
    replace_json(server.dir(), "acme.json", &acme("v2"));
    wait_serving(&server, KEY, "v2").await;
    // A rewrite in place keeps the inode; the content still changes.
    write_json(server.dir(), "acme.json", &acme("v3"));
    wait_serving(&server, KEY, "v3").await;
    wait_clean(&server, "acme.json", "v3").await;
    std::fs::remove_file(server.dir().join("acme.json")).expect("remove acme.json");
    wait_unauthorized(&server, KEY).await;
}

/// Writes `value` gzipped to `dir/name.tmp` and renames it over `dir/name`.
fn replace_gzip(dir: &Path, name: &str, value: &Value) {
    replace_bytes(
        dir,
        name,
        &gzip(&serde_json::to_vec(value).expect("serialize")),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gzip_replacements_load_and_a_change_of_ending_keeps_the_workspace() {
    let dir = tempdir();
    write_json(dir.path(), "acme.json", &acme("v1"));
    let server = TestServer::start_in(dir, |_| {}).await;
    assert_serving(&server, KEY, "v1").await;

    // `acme.json` gives way to `acme.json.gz`: one is deleted, the other created.
    std::fs::remove_file(server.dir().join("acme.json")).expect("remove acme.json");
    replace_gzip(server.dir(), "acme.json.gz", &acme("v2"));
    wait_serving(&server, KEY, "v2").await;
    wait_clean(&server, "acme.json.gz", "v2").await;

    // A gzip file replaced by a rename.
    replace_gzip(server.dir(), "acme.json.gz", &acme("v3"));
    wait_serving(&server, KEY, "v3").await;
    wait_clean(&server, "acme.json.gz", "v3").await;

    // Back to `acme.json`, the other way round: the new file arrives first
    // and is refused while `acme.json.gz` serves, then takes over when
    // `acme.json.gz` goes.
    replace_json(server.dir(), "acme.json", &acme("v4"));
    let entry = server.wait_error("acme.json").await;
    assert_mentions(
        entry["error"].as_str().unwrap_or_default(),
        &["acme.json", "acme.json.gz"],
        "/snapshots of the second file of ws-acme",
    );
    assert_serving(&server, KEY, "v3").await;
    std::fs::remove_file(server.dir().join("acme.json.gz")).expect("remove acme.json.gz");
    wait_serving(&server, KEY, "v4").await;
    wait_clean(&server, "acme.json", "v4").await;
}

/// Publishes `value` as `acme.json` in the Kubernetes ConfigMap volume `dir`
/// the way the kubelet does: a new timestamped directory, a `..data_tmp`
/// symlink to it renamed over `..data`, and the previous directory removed.
fn configmap_update(dir: &Path, stamp: &str, value: &Value, previous: Option<&str>) {
    let data_dir = format!("..{stamp}");
    std::fs::create_dir(dir.join(&data_dir)).expect("create the data directory");
    write_json(&dir.join(&data_dir), "acme.json", value);
    std::os::unix::fs::symlink(&data_dir, dir.join("..data_tmp")).expect("symlink ..data_tmp");
    std::fs::rename(dir.join("..data_tmp"), dir.join("..data")).expect("rename over ..data");
    if let Some(previous) = previous {
        std::fs::remove_dir_all(dir.join(format!("..{previous}")))
            .expect("remove the previous data directory");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kubernetes_configmap_update_is_served() {
    let dir = tempdir();
    configmap_update(dir.path(), "2026_11_22_a", &acme("v1"), None);
    std::os::unix::fs::symlink("..data/acme.json", dir.path().join("acme.json"))
        .expect("symlink acme.json");
    let server = TestServer::start_in(dir, |_| {}).await;
    assert_serving(&server, KEY, "v1").await;

    configmap_update(
        server.dir(),
        "2026_11_22_b",
        &acme("v2"),
        Some("2026_11_22_a"),
    );
    wait_serving(&server, KEY, "v2").await;
    configmap_update(
        server.dir(),
        "2026_11_22_c",
        &acme("v3"),
        Some("2026_11_22_b"),
    );
    wait_serving(&server, KEY, "v3").await;
    wait_clean(&server, "acme.json", "v3").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_rescans_and_sigterm_exits_0() {
    let dir = tempdir();
    write_json(dir.path(), "acme.json", &acme("v1"));
    // The poll interval is an hour, and polling mode watches no file events:
    // within this test only SIGHUP makes the server look at the directory.
    // `Binary::start` returns once `/readyz` answers 200.
    let mut bin = Binary::start(dir.path(), &["--poll-interval", "3600000"], &[]).await;
    let api = bin.api;

    let version = async |path: &str| -> Result<String, String> {
        let resp = get_from(api, path, Some(KEY)).await?;
        match resp.header("x-snapshot-version") {
            Some(v) if resp.status == 200 => Ok(v.to_owned()),
            _ => Err(format!("status {}, body {}", resp.status, resp.text())),
        }
    };
    assert_eq!(version("/portfolio").await.as_deref(), Ok("v1"));

    replace_json(dir.path(), "acme.json", &acme("v2"));
    bin.signal("HUP");
    eventually("SIGHUP loads v2", async || {
        if let Some(status) = bin.exited() {
            panic!(
                "portfolio-replica exited with {status}:\n{}",
                bin.stderr_text()
            );
        }
        match version("/portfolio").await? {
            v if v == "v2" => Ok(()),
            v => Err(format!("version {v}")),
        }
    })
    .await;
    for path in ["/tasks", "/feed"] {
        assert_eq!(version(path).await.as_deref(), Ok("v2"), "GET {path}");
    }

    bin.signal("TERM");
    let status = bin.wait_exit(Duration::from_secs(10)).await;
    assert_eq!(
        status.code(),
        Some(0),
        "exit status after SIGTERM: {status}\n{}",
        bin.stderr_text()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_file_of_a_served_workspace_is_rejected_while_the_first_serves() {
    let dir = tempdir();
    write_json(dir.path(), "acme.json", &acme("v1"));
    let server = TestServer::start_in(dir, |_| {}).await;
    assert_serving(&server, KEY, "v1").await;

    let stop = Arc::new(AtomicBool::new(false));
    let _stop_on_failure = StopOnDrop(Arc::clone(&stop));
    let client = tokio::spawn(keep_asking(server.api, KEY, "v1", Arc::clone(&stop)));
    // The newcomer sorts before `acme.json` (`-` is below `.`), so "the
    // first file by name wins" would wrongly let it take over.
    replace_json(server.dir(), "acme-copy.json", &acme("v2"));
    let entry = server.wait_error("acme-copy.json").await;
    assert_mentions(
        entry["error"].as_str().unwrap_or_default(),
        &["acme.json", "acme-copy.json"],
        "/snapshots of the second file of ws-acme",
    );
    wait_clean(&server, "acme.json", "v1").await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    stop.store(true, Ordering::Relaxed);
    let (requests, failures) = client.await.expect("the client panicked");
    assert!(
        failures.is_empty(),
        "{} of {requests} requests did not get v1 while the second file arrived; the first ones:\n{}",
        failures.len(),
        failures[..failures.len().min(20)].join("\n")
    );
    assert_serving(&server, KEY, "v1").await;

    // With the first file gone, the second one no longer conflicts and serves.
    std::fs::remove_file(server.dir().join("acme.json")).expect("remove acme.json");
    wait_serving(&server, KEY, "v2").await;
    wait_clean(&server, "acme-copy.json", "v2").await;
}

// ---------------------------------------------------------------------------
// (i) Readiness.
// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_and_the_api_answer_503_until_the_first_scan_has_finished() {
    // A writer keeps `acme.json` growing (whitespace, which JSON allows
    // before a value) until told to finish it. The first scan cannot judge a
    // file still being written, so it cannot finish before the writer does.
    let dir = tempdir();
    let writer = SlowWriter::start(
        &dir.path().join("acme.json"),
        &acme("v1"),
        Duration::from_secs(30),
    );
    let mut server = TestServer::spawn_in(dir, |_| {}).await;

    // The listener answers at once; the data does not.
    let health = server.get("/healthz", None).await;
    assert_eq!(health.status, 200, "/healthz: {}", health.text());
    for round in 0..3 {
        let ready = server.get("/readyz", None).await;
        assert_eq!(
            ready.status,
            503,
            "/readyz (round {round}) before the first scan finished: {}",
            ready.text()
        );
        for path in ["/portfolio", "/tasks", "/feed"] {
            server.get(path, Some(KEY)).await.assert_error(
                503,
                &format!("GET {path} (round {round}) before the first scan finished"),
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    writer.finish();
    server.wait_ready().await;
    assert_serving(&server, KEY, "v1").await;
    wait_clean(&server, "acme.json", "v1").await;
}
