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
    let summary = serde_json::json!({"files": 6, "serving": 5, "error": 1, "stale": 0});
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
        ("?page=2", "workspace and state"),
    ] {
        let (status, body) = get(query).await;
        assert_eq!(status, 400, "{query}: {body}");
        let error = body["error"].as_str().unwrap_or_default();
        assert!(error.contains(says), "{query}: {error}");
    }
}
