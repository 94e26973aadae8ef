//! Fair sharing (docs/api.md#rate-limits): a workspace over its rate gets
//! 429 with the API's error body, `Retry-After` and the `RateLimit-Policy`
//! / `RateLimit` fields, while another workspace is answered; an unknown
//! key is a 401 whatever the limits; a snapshot's own limits hold without
//! flags, change with a reload, and, published, hold before the snapshot
//! is read.

use std::num::NonZeroU32;

use serde_json::json;

use crate::util::*;

fn nz(n: u32) -> NonZeroU32 {
    NonZeroU32::new(n).unwrap()
}

#[tokio::test]
async fn a_workspace_over_its_rate_gets_429_with_the_limit_and_when_to_retry() {
    let dir = tempdir();
    write_json(dir.path(), "a.json", &fixture("ws-a", &[KEY], 1));
    write_json(dir.path(), "b.json", &fixture("ws-b", &[OTHER_KEY], 100));
    let server = TestServer::start_in(dir, |c| {
        c.workspace_limits =
            portfolio_replica::serve::api::limits::Policy::of(Some(nz(1)), Some(nz(3)), None);
    })
    .await;
    for _ in 0..3 {
        assert_eq!(server.get("/portfolio", Some(KEY)).await.status, 200);
    }
    let refused = server.get("/portfolio", Some(KEY)).await;
    assert_eq!(refused.status, 429, "{}", refused.text());
    assert_eq!(
        refused.json(),
        json!({"error": "Too many requests: this workspace may send 1 per second"})
    );
    assert_eq!(refused.header("retry-after"), Some("1"));
    assert_eq!(
        refused.header("ratelimit-policy"),
        Some("\"default\";q=1;w=1, \"burst\";q=3"),
        "the rate, and its burst as a policy of its own"
    );
    assert_eq!(refused.header("ratelimit"), Some("\"default\";r=0;t=1"));
    let metrics = server.admin_get("/metrics").await.text();
    assert!(
        metrics.contains("portfolio_replica_throttled_requests_total{reason=\"rate\"} 1"),
        "{metrics}"
    );
    // 429s have a status of their own in the request counter.
    assert!(
        metrics.contains(
            "portfolio_replica_http_requests_total{route=\"/portfolio\",status=\"429\"} 1\n"
        ),
        "{metrics}"
    );
    assert!(
        !metrics.contains("route=\"/portfolio\",status=\"other\"} 1"),
        "{metrics}"
    );
    // Another workspace has its own rate; an unknown key is a 401.
    assert_eq!(server.get("/portfolio", Some(OTHER_KEY)).await.status, 200);
    assert_eq!(
        server.get("/portfolio", Some("cura_nobody")).await.status,
        401
    );
    // HEAD counts too, and the rate recovers.
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let head = server
        .request(
            "HEAD",
            "/portfolio",
            &[("Authorization", &format!("Bearer {KEY}"))],
        )
        .await;
    assert_eq!(head.status, 200);
}

#[tokio::test]
async fn a_snapshots_own_limits_hold_without_flags_and_change_with_a_reload() {
    let dir = tempdir();
    let mut snap = fixture("ws-a", &[KEY], 1);
    snap["limits"] = json!({"rate_per_second": 1, "burst": 2});
    write_json(dir.path(), "a.json", &snap);
    write_json(dir.path(), "b.json", &fixture("ws-b", &[OTHER_KEY], 100));
    let server = TestServer::start_in(dir, |_| {}).await;
    let admitted = async |n: usize| {
        let mut ok = 0;
        for _ in 0..n {
            if server.get("/portfolio", Some(KEY)).await.status == 200 {
                ok += 1;
            }
        }
        ok
    };
    assert_eq!(admitted(5).await, 2);
    // A workspace that sets none has none.
    for _ in 0..20 {
        assert_eq!(server.get("/portfolio", Some(OTHER_KEY)).await.status, 200);
    }
    // A publish changes them.
    snap["limits"] = json!({"rate_per_second": 1, "burst": 10});
    snap["version"] = json!("v2");
    write_json(server.dir(), "a.json.tmp", &snap);
    std::fs::rename(server.dir().join("a.json.tmp"), server.dir().join("a.json")).unwrap();
    eventually("the new limits hold", async || {
        let answer = server.get("/portfolio", Some(KEY)).await;
        match answer.header("x-snapshot-version") {
            Some("v2") => Ok(()),
            other => Err(format!("{} {other:?}", answer.status)),
        }
    })
    .await;
    assert!(admitted(9).await >= 8, "the burst of 10 holds");
}

#[tokio::test]
async fn a_limits_member_a_replica_cannot_enforce_rejects_the_snapshot() {
    let dir = tempdir();
    let mut snap = fixture("ws-a", &[KEY], 1);
    snap["limits"] = json!({"rate_per_second": 0});
    write_json(dir.path(), "a.json", &snap);
    let file = dir.path().join("a.json");
    let out = cli(&["check", file.to_str().unwrap()]).await;
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(
        out.stderr
            .contains("limits.rate_per_second must be a whole number from 1 to 1000000"),
        "{}",
        out.stderr
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_published_workspaces_limits_hold_before_its_snapshot_is_read() {
    let s3 = S3::start().await;
    let dir = tempdir();
    let mut snap = fixture("ws-a", &[KEY], 1);
    snap["limits"] = json!({"rate_per_second": 1, "burst": 2});
    let file = write_json(dir.path(), "a.json", &snap);
    let url = s3.url("m");
    assert_eq!(publish_to(&url, &[&file], &s3.env()).await.code, Some(0));
    let record = s3.get("m/workspaces/ws-a.json").await.unwrap();
    let record: serde_json::Value = serde_json::from_slice(&record).unwrap();
    assert_eq!(
        record["versions"][0]["limits"],
        json!({"rate_per_second": 1, "burst": 2})
    );
    // Under a budget, the workspace serves hollow from its record until a
    // request loads it: its limits are already the snapshot's.
    let server = TestServer::start_in(tempdir(), |c| {
        s3.configure(c, "m", std::time::Duration::from_millis(100));
        c.memory_budget = Some(64 << 10);
    })
    .await;
    let statuses = [
        server.get("/portfolio", Some(KEY)).await.status,
        server.get("/portfolio", Some(KEY)).await.status,
        server.get("/portfolio", Some(KEY)).await.status,
    ];
    assert_eq!(statuses, [200, 200, 429]);
}

#[tokio::test]
async fn a_snapshots_own_limits_win_over_the_flags() {
    let dir = tempdir();
    let mut snap = fixture("ws-a", &[KEY], 1);
    snap["limits"] = json!({"rate_per_second": 1, "burst": 2});
    write_json(dir.path(), "a.json", &snap);
    write_json(dir.path(), "b.json", &fixture("ws-b", &[OTHER_KEY], 100));
    let server = TestServer::start_in(dir, |c| {
        c.workspace_limits =
            portfolio_replica::serve::api::limits::Policy::of(Some(nz(1000)), None, None);
    })
    .await;
    let mut statuses = Vec::new();
    for _ in 0..3 {
        statuses.push(server.get("/portfolio", Some(KEY)).await.status);
    }
    assert_eq!(
        statuses,
        [200, 200, 429],
        "the snapshot's burst of 2, not the flag's 1000"
    );
    let refused = server.get("/portfolio", Some(KEY)).await;
    assert_eq!(
        refused.header("ratelimit-policy"),
        Some("\"default\";q=1;w=1, \"burst\";q=2")
    );
    // The other workspace has the flag's rate.
    for _ in 0..20 {
        assert_eq!(server.get("/portfolio", Some(OTHER_KEY)).await.status, 200);
    }
}

#[tokio::test]
async fn a_browser_script_may_read_a_429s_retry_after_and_limits() {
    let origin = "https://app.example.com";
    let dir = tempdir();
    let mut snap = fixture("ws-a", &[KEY], 1);
    snap["limits"] = json!({"rate_per_second": 1, "burst": 1});
    write_json(dir.path(), "a.json", &snap);
    let server = TestServer::start_in(dir, |c| {
        c.cors = Some(portfolio_replica::serve::api::Cors::parse(origin).expect("an origin"));
    })
    .await;
    let auth = format!("Bearer {KEY}");
    let headers = [("Authorization", auth.as_str()), ("Origin", origin)];
    assert_eq!(
        server.request("GET", "/portfolio", &headers).await.status,
        200
    );
    let refused = server.request("GET", "/portfolio", &headers).await;
    assert_eq!(refused.status, 429, "{}", refused.text());
    assert_eq!(refused.header("access-control-allow-origin"), Some(origin));
    for exposed in ["Retry-After", "RateLimit", "RateLimit-Policy", "ETag"] {
        assert!(
            lists(&refused, "access-control-expose-headers", exposed),
            "{exposed} must be exposed: {:?}",
            refused.headers
        );
        assert!(
            exposed == "ETag" || refused.header(exposed).is_some(),
            "the 429 carries {exposed}"
        );
    }
}
