//! Workspace isolation: a key reads only its own workspace. Every by-id
//! endpoint answers 404 for the other workspace's ids, lists never show the
//! other workspace's records, and an id present in both workspaces names a
//! different record in each (spec Authentication).

use serde_json::{Value, json};

use crate::util::*;

const ACME: &str = "ws-acme";
const GLOBEX: &str = "ws-globex";
const ACME_BASE: u64 = 0;
const GLOBEX_BASE: u64 = 1000;
/// An id used by a company and a task of both workspaces.
const SHARED: u64 = 5000;

fn workspace(name: &str, key: &str, base: u64) -> Value {
    let mut snap = fixture(name, &[key], base);
    add(
        &mut snap,
        "companies",
        [company(SHARED, &format!("Shared of {name}"))],
    );
    add(
        &mut snap,
        "tasks",
        [with(
            task(SHARED, SHARED, "2026-03-01T09:00:00Z"),
            json!({ "title": format!("Task of {name}") }),
        )],
    );
    snap
}

async fn server() -> TestServer {
    TestServer::start(&[
        ("acme.json", workspace(ACME, KEY, ACME_BASE)),
        ("globex.json", workspace(GLOBEX, OTHER_KEY, GLOBEX_BASE)),
    ])
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_other_workspaces_ids_are_404_on_every_by_id_endpoint() {
    let server = server().await;
    for (key, own, other) in [
        (KEY, ACME_BASE, GLOBEX_BASE),
        (OTHER_KEY, GLOBEX_BASE, ACME_BASE),
    ] {
        let found: Vec<(String, u16)> = Fixture::ids(own)
            .by_id_endpoints()
            .into_iter()
            .map(|p| (p, 200))
            .collect();
        server.check_statuses(Some(key), &found).await;
        let hidden: Vec<(String, u16)> = Fixture::ids(other)
            .by_id_endpoints()
            .into_iter()
            .map(|p| (p, 404))
            .collect();
        server.check_statuses(Some(key), &hidden).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_show_only_the_keys_workspace() {
    let server = server().await;
    for (key, base) in [(KEY, ACME_BASE), (OTHER_KEY, GLOBEX_BASE)] {
        let ids = Fixture::ids(base);
        let shared = uuid(SHARED);
        // Each case is a list and the ids it must hold.
        let cases: Vec<(&str, Vec<String>)> = vec![
            ("/portfolio", vec![ids.company.clone(), shared.clone()]),
            ("/tasks", vec![ids.task.clone(), shared.clone()]),
            ("/roles", vec![ids.role.clone()]),
            ("/feed", vec![ids.feed.clone()]),
        ];
        for (path, want) in cases {
            let mut got = server.get(path, Some(key)).await.ids();
            got.sort();
            assert_eq!(got, want, "{path} with the key of base {base}");
        }
        let metrics = server
            .get(&format!("/portfolio/{}/metrics", ids.company), Some(key))
            .await;
        assert_eq!(
            metrics.ids(),
            vec![ids.metric.clone()],
            "metrics with the key of base {base}"
        );
        let notes = server
            .get_ok(&format!("/meetings/{}?include=notes", ids.meeting), key)
            .await;
        assert_eq!(
            notes["data"]["notes"].as_array().map(Vec::len),
            Some(1),
            "meeting notes with the key of base {base}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_id_in_both_workspaces_names_each_workspaces_own_record() {
    let server = server().await;
    let shared = uuid(SHARED);
    for (key, ws) in [(KEY, ACME), (OTHER_KEY, GLOBEX)] {
        let company = server.get(&format!("/portfolio/{shared}"), Some(key)).await;
        assert_eq!(
            company.json()["data"]["attributes"]["name"],
            json!(format!("Shared of {ws}"))
        );
        assert_eq!(
            company.header("x-snapshot-version"),
            Some(version_of(ws).as_str())
        );
        let task = server.get_ok(&format!("/tasks/{shared}"), key).await;
        assert_eq!(
            task["data"]["attributes"]["title"],
            json!(format!("Task of {ws}"))
        );
        let tasks = server
            .get(&format!("/portfolio/{shared}/tasks"), Some(key))
            .await;
        assert_eq!(tasks.ids(), vec![shared.clone()]);
    }
}
