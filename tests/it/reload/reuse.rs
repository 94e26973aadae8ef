//! (j) A change costs what changed: a replaced file's unchanged records are
//! taken over from the version it replaces, and what serves is exactly what
//! a fresh load of the same file serves.
//!
//! One server follows a workspace through a chain of edits (a title with
//! escapes and non-ASCII text, a record inserted, one deleted, two
//! swapped, a newer metric value, a company renamed, a dangling reference,
//! a repeated id that is rejected); after each edit, a second server loads
//! the same file fresh, and every endpoint (pages, filters, offsets, by id,
//! plain and gzip) answers both alike: status, body, ETag and version.
//! `/snapshots` shows how many records were taken over.

use serde_json::{Value, json};

use super::*;
use crate::util::*;

/// Text that makes the tasks weigh what a workspace must for its records
/// to be kept for the next version (4 MiB of records).
const FILLER: &str = "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor \
    incididunt ut labore et dolore magna aliqua. Ut enim ad minim veniam, quis nostrud exercitation \
    ullamco laboris nisi ut aliquip ex ea commodo consequat.";

/// A workspace with enough records of every kind that pages, filters and
/// the latest metric per name mean something, and tasks and feed entries
/// enough to be precompressed and kept (so that gzip answers come from fragments
/// copied from the version before); text with escapes and non-ASCII.
fn world(version: &str) -> Value {
    let mut snap = snapshot(ACME, &[KEY]);
    snap["version"] = json!(version);
    let statuses = ["open", "done", "blocked"];
    let companies = (0..6).map(|c| company(100 + c, &format!("Société n°{c} \"ß\" \\ ✓")));
    add(&mut snap, "companies", companies);
    let tasks = (0..12_000).map(|t| {
        let mut rec = task(1000 + t, 100 + t % 6, &at(t % 50));
        rec["attributes"]["title"] = json!(format!("Tâche {t}: «quoted» \"x\"\n\ttab {FILLER}"));
        rec["attributes"]["status"] = json!(statuses[t as usize % 3]);
        rec["attributes"]["priority"] = json!(["high", "low"][t as usize % 2]);
        rec
    });
    add(&mut snap, "tasks", tasks);
    add(
        &mut snap,
        "roles",
        (0..12).map(|r| role(2000 + r, 100 + r % 6, &at(r))),
    );
    add(
        &mut snap,
        "feed",
        (0..200).map(|f| feed_entry(3000 + f, 100 + f % 6, &at(f))),
    );
    add(
        &mut snap,
        "notes",
        (0..15).map(|n| note(4000 + n, 100 + n % 6, &at(n))),
    );
    let names = ["arr", "burn", "headcount"];
    let metrics =
        (0..36).map(|m| metric(5000 + m, 100 + m % 6, names[(m / 6) as usize % 3], &at(m)));
    add(&mut snap, "metrics", metrics);
    add(
        &mut snap,
        "meetings",
        (0..5).map(|m| meeting(6000 + m, 100 + m % 6, &at(m))),
    );
    add(
        &mut snap,
        "meeting_notes",
        (0..7).map(|n| meeting_note(7000 + n, 6000 + n % 5, &at(n))),
    );
    snap
}

/// Every path to compare: each list at several offsets and filters, and
/// every record by id.
fn paths(snap: &Value) -> Vec<String> {
    let mut paths = vec!["/portfolio".to_owned(), "/roles".to_owned()];
    for list in ["/tasks", "/feed"] {
        for query in [
            "",
            "?limit=7",
            "?limit=5&offset=13",
            "?offset=70",
            "?limit=100&offset=150",
            "?limit=50&offset=11980",
        ] {
            paths.push(format!("{list}{query}"));
        }
    }
    for query in [
        "status=open",
        "priority=low",
        "status=done&priority=high",
        "type=news",
    ] {
        let list = if query.starts_with("type") {
            "/feed"
        } else {
            "/tasks"
        };
        paths.push(format!("{list}?{query}&limit=9"));
    }
    let ids = |collection: &str| record_ids(snap, collection);
    for c in ids("companies") {
        for sub in COMPANY_PATHS {
            paths.push(format!("/portfolio/{c}{sub}"));
        }
    }
    paths.extend(
        ids("tasks")
            .iter()
            .step_by(997)
            .map(|t| format!("/tasks/{t}")),
    );
    paths.extend(ids("notes").iter().map(|n| format!("/notes/{n}")));
    for m in ids("meetings") {
        paths.push(format!("/meetings/{m}"));
        paths.push(format!("/meetings/{m}?include=notes"));
    }
    paths
}

/// What a client sees of one answer, gzip decoded.
async fn seen(server: &TestServer, path: &str, gzip: bool) -> String {
    let auth = format!("Bearer {KEY}");
    let mut headers = vec![("Authorization", auth.as_str())];
    if gzip {
        headers.push(("Accept-Encoding", "gzip"));
    }
    let resp = server.request("GET", path, &headers).await;
    let body = match resp.header("content-encoding") {
        Some("gzip") => gunzip(&resp.body),
        _ => resp.body.clone(),
    };
    format!(
        "{} etag={:?} version={:?}\n{}",
        resp.status,
        resp.header("etag"),
        resp.header("x-snapshot-version"),
        String::from_utf8_lossy(&body)
    )
}

/// Fails unless `followed` answers every path of `snap` as a server that
/// loads `snap` fresh does.
async fn assert_same_as_fresh(followed: &TestServer, snap: &Value, step: &str) {
    let dir = tempdir();
    write_json(dir.path(), "acme.json", snap);
    let mut fresh = TestServer::start_in(dir, |_| {}).await;
    fresh.wait_ready().await;
    for path in paths(snap) {
        for gzip in [false, true] {
            let (a, b) = (
                seen(followed, &path, gzip).await,
                seen(&fresh, &path, gzip).await,
            );
            assert_eq!(
                a, b,
                "{step}: GET {path} (gzip: {gzip}) differs from a fresh load"
            );
        }
    }
}

/// Replaces acme.json with `snap` and waits until it serves.
async fn change_to(server: &TestServer, snap: &Value) -> Value {
    let version = snap["version"].as_str().unwrap();
    replace_json(server.dir(), "acme.json", snap);
    wait_serving_version(server, version).await;
    server
        .snapshot_status("acme.json")
        .await
        .expect("acme.json is listed")
}

async fn wait_serving_version(server: &TestServer, version: &str) {
    server.wait_version("/portfolio", KEY, version).await;
}

fn tasks(snap: &mut Value) -> &mut Vec<Value> {
    snap["tasks"].as_array_mut().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chain_of_edits_serves_what_a_fresh_load_serves_and_reuses_the_rest() {
    let mut snap = world("e0");
    let dir = tempdir();
    write_json(dir.path(), "acme.json", &snap);
    let server = TestServer::start_in(dir, |_| {}).await;
    wait_serving_version(&server, "e0").await;
    let first = server.snapshot_status("acme.json").await.unwrap();
    assert_eq!(
        first["records_reused"],
        json!(0),
        "a first load reuses nothing"
    );

    // Each edit: its name, the change, and how many records it touches at
    // most (a record changed, inserted or made new counts once).
    type Edit = (&'static str, fn(&mut Value), u64);
    let edits: [Edit; 7] = [
        (
            "a title with escapes and non-ASCII",
            |s| {
                tasks(s)[17]["attributes"]["title"] = json!("Nouveau «titre» \"é\" \\ \u{1F600}\n");
            },
            1,
        ),
        (
            "a task inserted in the middle",
            |s| {
                let mut rec = task(99_999, 101, &at(49));
                rec["attributes"]["status"] = json!("open");
                tasks(s).insert(40, rec);
            },
            1,
        ),
        (
            "a task deleted, two swapped",
            |s| {
                tasks(s).remove(3);
                tasks(s).swap(10, 60);
            },
            0,
        ),
        (
            "a newer metric value",
            |s| {
                let m = metric(5999, 102, "burn", &at(59));
                s["metrics"].as_array_mut().unwrap().push(m);
            },
            1,
        ),
        (
            "a company renamed (the portfolio's order changes)",
            |s| {
                s["companies"][2]["attributes"]["name"] = json!("AAA first now");
            },
            1,
        ),
        (
            "a note pointing at a company the snapshot does not hold",
            |s| {
                s["notes"][4]["attributes"]["company_id"] = json!(uuid(999));
            },
            1,
        ),
        ("nothing but the version", |_| {}, 0),
    ];
    for (n, (what, edit, touched)) in edits.iter().enumerate() {
        edit(&mut snap);
        let version = format!("e{}", n + 1);
        snap["version"] = json!(version);
        let status = change_to(&server, &snap).await;
        let reused = status["records_reused"]
            .as_u64()
            .expect("records_reused is a number");
        let now: u64 = COLLECTIONS
            .iter()
            .map(|c| snap[*c].as_array().unwrap().len() as u64)
            .sum();
        // Metric values the previous version did not serve (all but the
        // latest of each of the 18 company and name pairs) are not kept,
        // so they are parsed again.
        let history = snap["metrics"].as_array().unwrap().len() as u64 - 18;
        assert!(
            reused + touched + history >= now && reused <= now - touched,
            "{what}: {reused} of {now} records reused, {touched} changed ({status})"
        );
        assert_same_as_fresh(&server, &snap, what).await;
    }

    // A repeated id is rejected, as in a fresh load, and the last version
    // keeps serving.
    let mut bad = snap.clone();
    let copy = tasks(&mut bad)[5].clone();
    tasks(&mut bad).push(copy);
    bad["version"] = json!("bad");
    replace_json(server.dir(), "acme.json", &bad);
    let error = server.wait_error("acme.json").await;
    assert_mentions(
        error["error"].as_str().unwrap_or_default(),
        &["tasks", "id"],
        "repeat",
    );
    assert_same_as_fresh(&server, &snap, "after a rejected repeat").await;
}

/// A replacement that changes most records lets the serving version's
/// gzip fragments go while it loads (they would sit next to the new
/// records at the peak of the reload). When that replacement is then
/// rejected, the version that keeps serving has its fragments made again:
/// its answers, plain and gzip, stay what they were throughout. The real
/// binary, whose log says both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejected_replacement_of_most_records_leaves_gzip_as_it_was() {
    let snap = world("whole");
    let dir = tempdir();
    write_json(dir.path(), "acme.json", &snap);
    let bin = Binary::start(dir.path(), &[], &[]).await;
    let precompressed = || bin.stderr_text().matches("records precompressed").count();
    assert_eq!(precompressed(), 1, "ready means precompressed");

    let probes = ["/tasks?limit=50&offset=300", "/feed?limit=20", "/tasks"];
    let answers = async || {
        let mut seen = Vec::new();
        for path in probes {
            let (plain, gz) = plain_and_gzip(bin.api, path, KEY).await;
            assert_eq!(
                gunzip(&gz.body),
                plain.body,
                "{path}: gzip decodes to plain"
            );
            seen.push((
                plain.status,
                plain.header("etag").map(str::to_owned),
                plain.body,
            ));
        }
        seen
    };
    let before = answers().await;

    // Every task's title changed, and the last task's id repeated: the
    // file is rejected only once it has been read whole.
    let mut bad = snap.clone();
    for t in tasks(&mut bad).iter_mut() {
        let title = t["attributes"]["title"].as_str().unwrap().to_owned();
        t["attributes"]["title"] = json!(format!("Rewritten: {title}"));
    }
    let copy = tasks(&mut bad)[0].clone();
    tasks(&mut bad).push(copy);
    bad["version"] = json!("rejected");
    replace_json(dir.path(), "acme.json", &bad);

    eventually("the rejection and the fragments made again", async || {
        let log = bin.stderr_text();
        match (
            log.contains("gzip fragments are let go"),
            log.contains("snapshot rejected"),
            precompressed(),
        ) {
            (true, true, 2) => Ok(()),
            seen => Err(format!("let go, rejected, precompressed: {seen:?}\n{log}")),
        }
    })
    .await;
    assert_eq!(
        answers().await,
        before,
        "the serving version answers as before"
    );
}
