//! Caching: every 200 of the API carries a strong ETag that is stable for
//! one representation and changes with it (another query, page or snapshot
//! version, other records under the same version label), `If-None-Match`
//! with a matching tag (among several, weak, or `*`) answers 304, errors
//! never carry a tag nor answer 304, two replicas of one snapshot agree on
//! their tags, and cacheable answers say `Cache-Control: private, no-cache`
//! and `Vary: Authorization`.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::json;

use crate::util::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_200_of_every_endpoint_has_a_strong_stable_etag_and_answers_304_to_it() {
    let server = TestServer::start(&[("acme.json", etag_snapshot("ws-acme"))]).await;
    let mut tags: BTreeMap<String, String> = BTreeMap::new();
    for path in Fixture::ids(0).endpoints() {
        let first = server.get(&path, Some(KEY)).await;
        first.assert_ok(&format!("GET {path}"));
        let tag = strong_etag(&first, &format!("GET {path}"));
        assert_cache_headers(&first, &format!("GET {path}"));

        let again = server.get(&path, Some(KEY)).await;
        assert_eq!(again.status, 200, "GET {path} again");
        assert_eq!(
            again.header("etag"),
            Some(tag.as_str()),
            "GET {path} twice: the ETag changed"
        );
        assert_eq!(again.body, first.body, "GET {path} twice: the body changed");

        let auth = format!("Bearer {KEY}");
        let head = server
            .request("HEAD", &path, &[("Authorization", &auth)])
            .await;
        assert_eq!(head.status, 200, "HEAD {path}");
        assert_eq!(head.header("etag"), Some(tag.as_str()), "HEAD {path}: ETag");

        let cond = server
            .request(
                "GET",
                &path,
                &[("Authorization", &auth), ("If-None-Match", &tag)],
            )
            .await;
        assert_eq!(
            cond.status,
            304,
            "GET {path} with If-None-Match: {tag}: body {}",
            cond.text()
        );
        assert!(
            cond.body.is_empty(),
            "GET {path}: 304 with a body {:?}",
            cond.text()
        );
        assert_eq!(
            cond.header("etag"),
            Some(tag.as_str()),
            "GET {path}: ETag of the 304"
        );
        assert_cache_headers(&cond, &format!("GET {path} (304)"));
        assert!(
            cond.header("content-length").is_none_or(|l| l == "0"),
            "GET {path}: 304 with content-length {:?}",
            cond.header("content-length")
        );

        if let Some(other) = tags.insert(tag.clone(), path.clone()) {
            panic!("GET {path} and GET {other} share the ETag {tag}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_query_or_page_has_another_etag() {
    let server = TestServer::start(&[("acme.json", etag_snapshot("ws-acme"))]).await;
    let first_feed = server.get_ok("/feed?limit=2", KEY).await;
    let cursor = first_feed["pagination"]["nextCursor"]
        .as_str()
        .expect("a second feed page")
        .to_owned();
    let paths = [
        "/tasks".to_owned(),
        "/tasks?limit=1".to_owned(),
        "/tasks?limit=2".to_owned(),
        "/tasks?limit=1&offset=1".to_owned(),
        "/tasks?limit=1&offset=2".to_owned(),
        "/tasks?filter[status]=triage".to_owned(),
        "/feed".to_owned(),
        "/feed?limit=2".to_owned(),
        format!("/feed?limit=2&cursor={}", enc(&cursor)),
        format!("/meetings/{}", uuid(7)),
        format!("/meetings/{}?include=notes", uuid(7)),
    ];
    let mut seen: BTreeMap<String, &str> = BTreeMap::new();
    let mut bodies = BTreeSet::new();
    for path in &paths {
        let resp = server.get(path, Some(KEY)).await;
        resp.assert_ok(&format!("GET {path}"));
        bodies.insert(resp.body.clone());
        let tag = strong_etag(&resp, &format!("GET {path}"));
        if let Some(other) = seen.insert(tag.clone(), path) {
            panic!("GET {path} and GET {other} share the ETag {tag}");
        }
        // The tag of one page does not validate another page.
        for (other_tag, other_path) in &seen {
            if other_tag != &tag {
                let auth = format!("Bearer {KEY}");
                let resp = server
                    .request(
                        "GET",
                        path,
                        &[("Authorization", &auth), ("If-None-Match", other_tag)],
                    )
                    .await;
                assert_eq!(
                    resp.status, 200,
                    "GET {path} with the ETag of GET {other_path}"
                );
            }
        }
    }
    // The pages really differ (else a shared tag would be no bug).
    assert_eq!(
        bodies.len(),
        paths.len(),
        "the pages' bodies are not all different"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_snapshot_version_changes_the_etag_of_the_same_request() {
    let mut v1 = etag_snapshot("ws-acme");
    v1["version"] = json!("v1");
    let server = TestServer::start(&[("acme.json", v1.clone())]).await;
    let paths = [
        "/tasks".to_owned(),
        "/portfolio".to_owned(),
        format!("/tasks/{}", uuid(2)),
    ];
    let mut old = Vec::new();
    for path in &paths {
        let resp = server.get(path, Some(KEY)).await;
        resp.assert_ok(path);
        old.push(strong_etag(&resp, path));
    }
    // The same records under a new version: the request is the same, the
    // representation is (here) byte-identical, yet a new version is a new tag.
    let mut v2 = v1.clone();
    v2["version"] = json!("v2");
    replace_json(server.dir(), "acme.json", &v2);
    server.wait_version("/tasks", KEY, "v2").await;
    for (path, old_tag) in paths.iter().zip(&old) {
        let resp = server.get(path, Some(KEY)).await;
        let tag = strong_etag(&resp, path);
        assert_ne!(&tag, old_tag, "GET {path}: the ETag survived a new version");
        let auth = format!("Bearer {KEY}");
        let cond = server
            .request(
                "GET",
                path,
                &[("Authorization", &auth), ("If-None-Match", old_tag)],
            )
            .await;
        assert_eq!(cond.status, 200, "GET {path} with the ETag of v1");
        assert_eq!(cond.header("etag"), Some(tag.as_str()));
    }
}

/// A strong ETag must change whenever the representation does (RFC 9110
/// §8.8.1). A file rewritten with other records but the same `version`
/// label is served (the loader reloads it), so its answers must not be
/// validated by the old tags.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changed_records_under_an_unchanged_version_label_change_the_etag() {
    let mut v1 = etag_snapshot("ws-acme");
    v1["version"] = json!("same-label");
    let server = TestServer::start(&[("acme.json", v1.clone())]).await;
    let before = server.get("/tasks", Some(KEY)).await;
    before.assert_ok("GET /tasks");
    let old_tag = strong_etag(&before, "GET /tasks");

    let mut v2 = v1.clone();
    add(&mut v2, "tasks", [task(90, 1, "2026-05-01T10:00:00Z")]);
    replace_json(server.dir(), "acme.json", &v2);
    eventually("the rewritten file is served", async || {
        let resp = server.get("/tasks", Some(KEY)).await;
        if resp.status == 200 && resp.ids().contains(&uuid(90)) {
            Ok(())
        } else {
            Err(format!("status {}, body {}", resp.status, resp.text()))
        }
    })
    .await;
    let after = server.get("/tasks", Some(KEY)).await;
    assert_ne!(after.body, before.body);
    let new_tag = strong_etag(&after, "GET /tasks");
    assert_ne!(
        new_tag, old_tag,
        "GET /tasks: another body under the same strong ETag"
    );
    let auth = format!("Bearer {KEY}");
    let cond = server
        .request(
            "GET",
            "/tasks",
            &[("Authorization", &auth), ("If-None-Match", &old_tag)],
        )
        .await;
    assert_eq!(
        cond.status, 200,
        "a client holding the old body was told 304 Not Modified"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn if_none_match_lists_weak_tags_and_stale_tags() {
    let server = TestServer::start(&[("acme.json", etag_snapshot("ws-acme"))]).await;
    let path = "/tasks?limit=3";
    let resp = server.get(path, Some(KEY)).await;
    resp.assert_ok(path);
    let tag = strong_etag(&resp, path);
    let auth = format!("Bearer {KEY}");
    let cases = [
        (tag.clone(), 304),
        (format!("\"stale-1\", {tag}"), 304),
        (format!("{tag},\"stale-2\""), 304),
        (format!("\"a\",  {tag} , \"b\""), 304),
        (format!("W/{tag}"), 304),
        (format!("\"stale-1\", W/{tag}"), 304),
        ("*".to_owned(), 304),
        ("\"0000000000000000-0000000000000000\"".to_owned(), 200),
        ("\"stale-1\", \"stale-2\"".to_owned(), 200),
        (format!("W/\"{}\"", &tag[2..tag.len() - 1]), 200),
        (tag.trim_matches('"').to_owned(), 200),
    ];
    let mut failures = Vec::new();
    for (value, want) in &cases {
        let resp = server
            .request(
                "GET",
                path,
                &[("Authorization", &auth), ("If-None-Match", value)],
            )
            .await;
        let problem = if resp.status != *want {
            Some(format!("status {}", resp.status))
        } else if *want == 304 && !resp.body.is_empty() {
            Some(format!("304 with body {:?}", resp.text()))
        } else if resp.header("etag") != Some(tag.as_str()) {
            Some(format!("ETag {:?}", resp.header("etag")))
        } else {
            None
        };
        if let Some(problem) = problem {
            failures.push(format!(
                "If-None-Match: {value} (expected {want}): {problem}"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_carry_no_etag_and_are_never_304() {
    let server = TestServer::start(&[("acme.json", etag_snapshot("ws-acme"))]).await;
    let tasks_tag = strong_etag(&server.get("/tasks", Some(KEY)).await, "GET /tasks");
    let good = format!("Bearer {KEY}");
    let good = good.as_str();
    let wrong = "Bearer cura_not_a_known_key";
    // (method, path, authorization, status)
    let cases: Vec<(&str, String, Option<&str>, u16)> = vec![
        ("GET", "/tasks".into(), None, 401),
        ("GET", "/tasks".into(), Some(wrong), 401),
        ("GET", format!("/tasks/{}", uuid(2)), None, 401),
        ("GET", "/tasks?limit=0".into(), Some(good), 400),
        ("GET", "/tasks/not-a-uuid".into(), Some(good), 400),
        ("GET", format!("/tasks/{}", uuid(999)), Some(good), 404),
        (
            "GET",
            format!("/portfolio/{}/tasks", uuid(999)),
            Some(good),
            404,
        ),
        ("GET", "/no/such/path".into(), Some(good), 404),
        ("POST", "/tasks".into(), Some(good), 405),
    ];
    let mut failures = Vec::new();
    for (method, path, auth, want) in &cases {
        for inm in ["*", tasks_tag.as_str(), "W/\"x\""] {
            let mut headers = vec![("If-None-Match", inm)];
            if let Some(a) = auth {
                headers.push(("Authorization", a));
            }
            let resp = server.request(method, path, &headers).await;
            if let Some(problem) = resp.error_problem(*want) {
                failures.push(format!("{method} {path} If-None-Match {inm}: {problem}"));
            } else if let Some(tag) = resp.header("etag") {
                failures.push(format!(
                    "{method} {path} If-None-Match {inm}: a {want} with ETag {tag}"
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_of_the_same_snapshot_give_the_same_etags() {
    let snap = etag_snapshot("ws-acme");
    let a = TestServer::start(&[("acme.json", snap.clone())]).await;
    let b = TestServer::start(&[("acme.json", snap)]).await;
    let auth = format!("Bearer {KEY}");
    let mut paths = Fixture::ids(0).endpoints();
    paths.push("/tasks?limit=2&offset=1".into());
    for path in paths {
        let ra = a.get(&path, Some(KEY)).await;
        let rb = b.get(&path, Some(KEY)).await;
        let ta = strong_etag(&ra, &format!("replica A: GET {path}"));
        let tb = strong_etag(&rb, &format!("replica B: GET {path}"));
        assert_eq!(ra.body, rb.body, "GET {path}: the replicas' bodies differ");
        assert_eq!(ta, tb, "GET {path}: the replicas' ETags differ");
        // A client moved by the balancer to another replica revalidates.
        let cond = b
            .request(
                "GET",
                &path,
                &[("Authorization", &auth), ("If-None-Match", &ta)],
            )
            .await;
        assert_eq!(cond.status, 304, "GET {path} on B with A's ETag");
    }
}
