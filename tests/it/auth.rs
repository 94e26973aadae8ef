//! Authentication: the bearer scheme, the key form `<prefix>_<secret>`, key
//! hashes in snapshots, and the exact 401 reply (docs/api.md#authentication).

use crate::util::*;

/// Keys whose hashes are in the snapshot although they must never be accepted.
const WRONG_PREFIX_KEY: &str = "other_secret";
const NO_UNDERSCORE_KEY: &str = "curasecret";
const ACME_PREFIX_KEY: &str = "acme_secret";

/// Starts a server whose only workspace lists the valid key and the
/// well-hashed keys of the wrong form.
async fn server() -> TestServer {
    let snap = fixture(
        "ws-auth",
        &[KEY, WRONG_PREFIX_KEY, NO_UNDERSCORE_KEY, ACME_PREFIX_KEY],
        0,
    );
    TestServer::start(&[("auth.json", snap)]).await
}

/// Sends `GET /portfolio` once per `Authorization` header value (`None`: no
/// header) and fails listing every case whose answer differs from `status`.
async fn check(server: &TestServer, cases: &[(Option<&str>, u16)]) {
    let mut failures = Vec::new();
    for (auth, status) in cases {
        let headers: Vec<(&str, &str)> = auth.iter().map(|a| ("Authorization", *a)).collect();
        let resp = server.request("GET", "/portfolio", &headers).await;
        let problem = if *status == 200 {
            (resp.status != 200).then(|| format!("status {}, body {}", resp.status, resp.text()))
        } else {
            resp.error_problem(*status)
        };
        if let Some(problem) = problem {
            failures.push(format!("Authorization {auth:?}: {problem}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bearer_scheme_is_case_insensitive() {
    let server = server().await;
    check(
        &server,
        &[
            (Some("Bearer cura_test_key"), 200),
            (Some("bearer cura_test_key"), 200),
            (Some("BEARER cura_test_key"), 200),
            (Some("BeArEr cura_test_key"), 200),
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_or_invalid_keys_get_the_exact_401() {
    let server = server().await;
    check(
        &server,
        &[
            (None, 401),
            (Some(""), 401),
            (Some("Bearer"), 401),
            (Some("Bearer "), 401),
            (Some("cura_test_key"), 401),
            (Some("Token cura_test_key"), 401),
            (Some("Basic cura_test_key"), 401),
            (Some("Basic Y3VyYV90ZXN0X2tleTo="), 401),
            (Some("Bearer cura_unknown_secret"), 401),
            (Some("Bearer CURA_TEST_KEY"), 401),
            (Some("Bearer cura_test_key extra"), 401),
            (Some("Bearer cura_test_ke"), 401),
            (Some("Bearer cura_test_keyy"), 401),
            (Some(&format!("Bearer {}", key_hash(KEY))), 401),
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_of_the_wrong_form_are_refused_even_when_their_hash_is_listed() {
    let server = server().await;
    check(
        &server,
        &[
            (Some("Bearer other_secret"), 401),
            (Some("Bearer curasecret"), 401),
            (Some("Bearer acme_secret"), 401),
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_key_prefix_comes_from_the_configuration() {
    let dir = tempdir();
    write_json(
        dir.path(),
        "auth.json",
        &fixture("ws-auth", &[KEY, ACME_PREFIX_KEY], 0),
    );
    let server = TestServer::start_in(dir, |c| c.key_prefix = "acme".to_string()).await;
    check(
        &server,
        &[
            (Some("Bearer acme_secret"), 200),
            (Some("Bearer cura_test_key"), 401),
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_listed_key_of_a_workspace_is_accepted() {
    let snap = fixture("ws-auth", &["cura_first", "cura_second"], 0);
    let server = TestServer::start(&[("auth.json", snap)]).await;
    check(
        &server,
        &[
            (Some("Bearer cura_first"), 200),
            (Some("Bearer cura_second"), 200),
            (Some("Bearer cura_third"), 401),
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_authorization_header_name_is_case_insensitive() {
    let server = server().await;
    let req = format!(
        "GET /portfolio HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nauthorization: Bearer {KEY}\r\n\r\n",
        server.api
    );
    let resp = server.raw(req.as_bytes()).await;
    assert_eq!(resp.status, 200, "{}", resp.text());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn authentication_comes_before_every_other_check() {
    let server = server().await;
    let ids = Fixture::ids(0);
    let unknown = uuid(999_999);
    let mut paths = ids.endpoints();
    paths.extend([
        "/".to_string(),
        "/nope".to_string(),
        "/portfolio/not-a-uuid".to_string(),
        "/portfolio/not-a-uuid/tasks".to_string(),
        "/tasks/not-a-uuid".to_string(),
        "/notes/not-a-uuid".to_string(),
        "/meetings/not-a-uuid".to_string(),
        format!("/portfolio/{unknown}"),
        format!("/portfolio/{unknown}/tasks"),
        format!("/tasks/{unknown}"),
        format!("/meetings/{unknown}"),
        "/portfolio?limit=0".to_string(),
        "/portfolio?limit=1&limit=2".to_string(),
        "/tasks?filter[status]=".to_string(),
        "/feed?cursor=".to_string(),
        "/feed?cursor=garbage".to_string(),
        format!("/meetings/{}?include=other", ids.meeting),
    ]);
    let cases: Vec<(String, u16)> = paths.into_iter().map(|p| (p, 401)).collect();
    server.check_statuses(None, &cases).await;
    server
        .check_statuses(Some("cura_unknown_secret"), &cases)
        .await;
    server.check_statuses(Some("other_secret"), &cases).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workspace_without_keys_serves_no_one() {
    let server = TestServer::start(&[("auth.json", fixture("ws-auth", &[], 0))]).await;
    check(
        &server,
        &[
            (None, 401),
            (Some("Bearer cura_test_key"), 401),
            (Some("Bearer cura_"), 401),
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_directory_serves_only_401() {
    let server = TestServer::start_in(tempdir(), |_| {}).await;
    check(&server, &[(None, 401), (Some("Bearer cura_test_key"), 401)]).await;
}
