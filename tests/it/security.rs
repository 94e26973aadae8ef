//! Security: a failed key reveals nothing about why it failed, and no id of
//! another workspace is ever found, whichever id is tried.

use serde_json::Value;

use crate::util::*;

/// The response minus what varies by the moment (`Date`).
fn fingerprint(resp: &Response) -> (u16, Vec<(String, String)>, Vec<u8>) {
    let mut headers: Vec<(String, String)> = resp
        .headers
        .iter()
        .filter(|(name, _)| name != "date")
        .cloned()
        .collect();
    headers.sort();
    (resp.status, headers, resp.body.clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_prefix_a_wrong_secret_and_no_key_look_the_same() {
    let server = TestServer::start(&[("a.json", fixture("ws-a", &[KEY], 1))]).await;
    let ids = Fixture::ids(1);
    for path in [
        "/portfolio",
        "/tasks?limit=5",
        "/feed",
        "/roles",
        &format!("/tasks/{}", ids.task),
        "/nope",
    ] {
        let variants = [
            vec![],
            vec![("Authorization", "Bearer cura_not_a_key_of_anyone")],
            vec![("Authorization", "Bearer other_test_key")],
            vec![("Authorization", "Bearer cura_test_ke")],
            vec![("Authorization", "Basic Y3VyYTp0ZXN0")],
            vec![("Authorization", "Bearer")],
        ];
        let mut seen = Vec::new();
        for headers in &variants {
            let resp = server.request("GET", path, headers).await;
            assert_eq!(resp.status, 401, "{path} with {headers:?}");
            seen.push((headers.clone(), fingerprint(&resp)));
        }
        let first = &seen[0].1;
        for (headers, print) in &seen[1..] {
            assert_eq!(
                print, first,
                "{path}: {headers:?} answers differently from no key"
            );
        }
    }
}

/// Every id of the other workspace, on every by-id endpoint, is a 404 with
/// this workspace's key, and the same ids are found with their own key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_id_of_another_workspace_is_found() {
    let dir = tempdir();
    let files =
        portfolio_generate::generate(dir.path(), portfolio_generate::Scale::Small, 7).unwrap();
    let globex: Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("globex.json")).unwrap()).unwrap();
    let key_of = |ws: &str| {
        files
            .iter()
            .find(|f| f.workspace_id == ws)
            .map(|f| f.api_key.clone())
            .unwrap()
    };
    let (acme, globex_key) = (key_of("ws-acme"), key_of("ws-globex"));
    let server = TestServer::start_in(dir, |_| {}).await;

    let ids = |collection: &str| record_ids(&globex, collection);
    let mut cases = Vec::new();
    for id in ids("companies") {
        for suffix in COMPANY_PATHS {
            cases.push(format!("/portfolio/{id}{suffix}"));
        }
    }
    cases.extend(
        ids("tasks")
            .into_iter()
            .step_by(7)
            .map(|id| format!("/tasks/{id}")),
    );
    cases.extend(
        ids("notes")
            .into_iter()
            .step_by(3)
            .map(|id| format!("/notes/{id}")),
    );
    cases.extend(
        ids("meetings")
            .into_iter()
            .map(|id| format!("/meetings/{id}?include=notes")),
    );
    assert!(cases.len() > 100, "enough ids to try: {}", cases.len());
    for path in &cases {
        let theirs = server.get(path, Some(&globex_key)).await;
        assert_eq!(theirs.status, 200, "{path} must exist in its own workspace");
        let ours = server.get(path, Some(&acme)).await;
        assert_eq!(
            ours.status,
            404,
            "{path} must not be found with another workspace's key: {}",
            ours.text()
        );
    }
}
