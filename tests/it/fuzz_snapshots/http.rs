//! Over HTTP: a mutated replacement of a serving file never stops the old
//! version serving, and no response mixes two versions.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

use super::encoding::BIG;
use super::judge::*;
use super::structure::{huge_string, nested};
use crate::util::*;

/// A snapshot of `ws-acme` whose companies, tasks and feed entries carry
/// `version` as the first word of their name or title.
fn tagged(version: &str) -> Value {
    let mut snap = snapshot("ws-acme", &[KEY]);
    snap["version"] = json!(version);
    let at = |i: u64| format!("2026-03-01T10:{i:02}:00Z");
    add(
        &mut snap,
        "companies",
        (1..=4).map(|i| company(i, &format!("{version} company {i}"))),
    );
    add(
        &mut snap,
        "tasks",
        (1..=4).map(|i| {
            with(
                task(100 + i, i, &at(i)),
                json!({ "title": format!("{version} task {i}") }),
            )
        }),
    );
    add(
        &mut snap,
        "feed",
        (1..=4).map(|i| {
            with(
                feed_entry(200 + i, i, &at(i)),
                json!({ "title": format!("{version} feed {i}") }),
            )
        }),
    );
    let mut value = metric(300, 1, "Annualized Revenue", &at(1));
    value["attributes"]["value_numeric"] = json!(7);
    add(&mut snap, "metrics", [value]);
    snap
}

/// How many times the server has rejected a file (admin `/metrics`; the
/// tests here serve one file, so these are all `file`'s).
async fn failures_of(server: &TestServer) -> f64 {
    let (_, samples) = scrape(server).await;
    value_of(
        &samples,
        "portfolio_replica_snapshot_load_failures_total",
        &[],
    )
    .unwrap_or(0.0)
}

/// Keeps asking for every list until `stop`; returns the number of answers
/// and every answer that is not a whole 200 of an allowed version.
async fn watch(
    api: SocketAddr,
    allowed: Arc<Mutex<BTreeSet<String>>>,
    stop: Arc<AtomicBool>,
) -> (usize, Vec<String>) {
    let mut answers = 0;
    let mut problems = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        for (path, field) in [
            ("/portfolio", "name"),
            ("/tasks", "title"),
            ("/feed", "title"),
        ] {
            answers += 1;
            let resp = match get_from(api, path, Some(KEY)).await {
                Ok(resp) => resp,
                Err(e) => {
                    problems.push(format!("GET {path}: {e}"));
                    continue;
                }
            };
            let version = resp
                .header("x-snapshot-version")
                .unwrap_or_default()
                .to_owned();
            if resp.status != 200 || !allowed.lock().expect("lock").contains(&version) {
                problems.push(format!(
                    "GET {path}: status {}, version {version:?}: {}",
                    resp.status,
                    short(&resp.text())
                ));
                continue;
            }
            let body: Value = serde_json::from_slice(&resp.body).unwrap_or_default();
            let data = body["data"].as_array().cloned().unwrap_or_default();
            if data.len() != 4 {
                problems.push(format!(
                    "GET {path}: {} records in version {version}",
                    data.len()
                ));
            }
            for record in data {
                let text = record["attributes"][field].as_str().unwrap_or_default();
                if text.split(' ').next() != Some(version.as_str()) {
                    problems.push(format!(
                        "GET {path}: {field} {text:?} in a response of version {version}"
                    ));
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    (answers, problems)
}

/// Every mutation kind applied to the serving file `acme.json`: each one is
/// rejected (counted and reported for `acme.json`) while v1 keeps serving
/// whole; then a valid v2 with a large finite number is served as written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutated_replacements_never_stop_the_old_version_nor_mix_versions() {
    let dir = tempdir();
    write_json(dir.path(), "acme.json", &tagged("v1"));
    let server = TestServer::start_in(dir, |_| {}).await;
    server.wait_version("/portfolio", KEY, "v1").await;

    let allowed = Arc::new(Mutex::new(BTreeSet::from(["v1".to_owned()])));
    let stop = Arc::new(AtomicBool::new(false));
    let watcher = tokio::spawn(watch(server.api, Arc::clone(&allowed), Arc::clone(&stop)));

    let full = serde_json::to_vec_pretty(&tagged("m-cut")).expect("serialize");
    let name = "companies[0].attributes.name";
    let dup_id = format!("\"id\":\"{}\"", uuid(999));
    let top = serde_json::to_string(&tagged("m-top")).expect("serialize");
    let mutants: Vec<(&str, Vec<u8>)> = vec![
        ("a truncated file", full[..full.len() * 2 / 3].to_vec()),
        ("an empty file", Vec::new()),
        (
            "invalid UTF-8",
            raw_at(&tagged("m-utf8"), name, b"\"m-utf8 \xff\xfe\""),
        ),
        (
            "a wrong type",
            raw_at(&tagged("m-type"), "tasks[1].attributes.created_at", b"42"),
        ),
        (
            "deep nesting",
            raw_at(&tagged("m-deep"), name, &nested(10_000, "[", "", "]")),
        ),
        (
            "a duplicate id",
            member_at(&tagged("m-dup"), "tasks[2]", &dup_id),
        ),
        (
            "1e400",
            raw_at(
                &tagged("m-range"),
                "metrics[0].attributes.value_numeric",
                b"1e400",
            ),
        ),
        (
            "a 5 MB version",
            raw_at(&tagged("m-huge"), "version", &huge_string(5 << 20, 0)),
        ),
        (
            "a duplicate top-level key",
            format!("{},\"companies\":[]}}", &top[..top.len() - 1]).into_bytes(),
        ),
    ];

    for (what, bytes) in &mutants {
        let before = failures_of(&server).await;
        replace_backdated(server.dir(), "acme.json", bytes);
        eventually(
            &format!("{what}: the replacement is rejected"),
            async || match failures_of(&server).await {
                now if now > before => Ok(()),
                now => Err(format!("{now} failures, as before")),
            },
        )
        .await;
        let entry = server
            .snapshot_status("acme.json")
            .await
            .expect("/snapshots lists acme.json");
        let error = entry["error"].as_str().unwrap_or_default();
        assert!(
            error.contains("acme.json"),
            "{what}: /snapshots error does not name the file: {}",
            short(error)
        );
        server.wait_version("/portfolio", KEY, "v1").await;
    }

    allowed.lock().expect("lock").insert("v2".to_owned());
    let good = tagged("v2");
    let good = raw_at(&good, "metrics[0].attributes.value_numeric", BIG.as_bytes());
    replace_backdated(server.dir(), "acme.json", &good);
    server.wait_version("/portfolio", KEY, "v2").await;
    let metrics = server
        .get(&format!("/portfolio/{}/metrics", uuid(1)), Some(KEY))
        .await;
    assert_eq!(metrics.status, 200, "{}", metrics.text());
    assert!(
        metrics.text().contains(&format!("\"value_numeric\":{BIG}")),
        "the large number is not served as written: {}",
        metrics.text()
    );

    stop.store(true, Ordering::Relaxed);
    let (answers, problems) = watcher.await.expect("the watcher");
    assert!(
        answers > mutants.len(),
        "only {answers} answers were checked"
    );
    assert!(
        problems.is_empty(),
        "{} of {answers} answers went wrong:\n{}",
        problems.len(),
        problems.join("\n")
    );
}
