//! `GET /snapshots` at scale: a summary of every entry, and filters by
//! workspace and state, so that an operator with thousands of workspaces
//! finds the few that fail (docs/operations.md#snapshots).

use serde_json::Value;

use crate::util::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshots_filters_by_state_and_workspace_and_sums_up_every_entry() {
    let dir = tempdir();
    for i in 0..5 {
        let key = format!("cura_status_{i}");
        write_json(
            dir.path(),
            &format!("w{i}.json"),
            &fixture(&format!("ws-{i}"), &[&key], 1000 * i),
        );
    }
    write_bytes(dir.path(), "broken.json", b"{\"format_version\": 1,");
    let server = TestServer::start_in(dir, |_| {}).await;
    let get = async |query: &str| -> (u16, Value) {
        let response = server.admin_get(&format!("/snapshots{query}")).await;
        (response.status, response.json())
    };
    let names = |body: &Value| -> Vec<String> {
        body["files"]
            .as_array()
            .expect("files")
            .iter()
            .map(|f| f["file"].as_str().unwrap_or_default().to_owned())
            .collect()
    };

    let (status, all) = get("").await;
    assert_eq!(status, 200);
    assert_eq!(names(&all).len(), 6, "{all}");
    let summary =
        serde_json::json!({"files": 6, "serving": 5, "error": 1, "stale": 0, "resident": 5});
    assert_eq!(all["summary"], summary, "{all}");

    let (_, failing) = get("?state=error").await;
    assert_eq!(names(&failing), ["broken.json"], "{failing}");
    assert_eq!(
        failing["summary"], summary,
        "the summary counts every entry"
    );
    let (_, one) = get("?workspace=ws-3").await;
    assert_eq!(names(&one), ["w3.json"], "{one}");
    let (_, both) = get("?workspace=ws-3&state=error").await;
    assert_eq!(names(&both), Vec::<String>::new(), "{both}");
    let (_, serving) = get("?state=serving").await;
    assert_eq!(names(&serving).len(), 5, "{serving}");

    for (query, says) in [
        ("?state=broken", "serving, error, stale"),
        ("?page=2", "workspace, state and resident"),
        ("?resident=yes", "true, false"),
    ] {
        let (status, body) = get(query).await;
        assert_eq!(status, 400, "{query}: {body}");
        let error = body["error"].as_str().unwrap_or_default();
        assert!(error.contains(says), "{query}: {error}");
    }
}

/// Which workspaces are in memory: without a budget every one that serves
/// is; with one, none until a request loads it, then that one. The summary
/// counts them, `?resident=` lists them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshots_says_and_filters_what_is_resident() {
    let write = |dir: &std::path::Path| {
        for i in 0..3 {
            let key = format!("cura_resident_{i}");
            let name = format!("r{i}.json");
            write_json(dir, &name, &fixture(&format!("ws-{i}"), &[&key], 1000 * i));
        }
    };
    let names = |body: &Value| -> Vec<String> {
        let files = body["files"].as_array().expect("files");
        files
            .iter()
            .map(|f| f["file"].as_str().unwrap().to_owned())
            .collect()
    };

    let dir = tempdir();
    write(dir.path());
    let all = TestServer::start_in(dir, |_| {}).await;
    let body = all.admin_get("/snapshots").await.json();
    assert_eq!(body["summary"]["resident"], 3, "{body}");
    for file in body["files"].as_array().unwrap() {
        assert_eq!(file["residency"], "resident", "{file}");
    }
    let none = all.admin_get("/snapshots?resident=false").await.json();
    assert_eq!(names(&none), Vec::<String>::new(), "{none}");

    let dir = tempdir();
    write(dir.path());
    let budgeted = TestServer::start_in(dir, |c| c.memory_budget = Some(64 << 20)).await;
    let body = budgeted.admin_get("/snapshots").await.json();
    assert_eq!(body["summary"]["resident"], 0, "{body}");
    let cold = budgeted.admin_get("/snapshots?resident=false").await.json();
    assert_eq!(names(&cold).len(), 3, "{cold}");

    budgeted.get_ok("/portfolio", "cura_resident_1").await;
    let warm = budgeted.admin_get("/snapshots?resident=true").await.json();
    assert_eq!(names(&warm), ["r1.json"], "{warm}");
    assert_eq!(warm["files"][0]["residency"], "resident", "{warm}");
    assert_eq!(warm["summary"]["resident"], 1, "{warm}");
    let cold = budgeted
        .admin_get("/snapshots?resident=false&workspace=ws-2")
        .await
        .json();
    assert_eq!(names(&cold), ["r2.json"], "{cold}");
    assert_eq!(cold["files"][0]["residency"], "not_resident", "{cold}");
}
