//! (a) Consistency under churn: every response comes from one version
//! while the file is replaced again and again.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::*;
use crate::util::*;

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
