//! Compression: large bodies are gzipped when the client accepts gzip (with
//! its own strong ETag, `Vary: Accept-Encoding` and 304s), refused gzip
//! (`q=0`, `identity`, other codings) gets the identity body, small bodies
//! and error or health answers are never compressed, and `--compression off`
//! turns it off whatever the client accepts.

use serde_json::Value;

use crate::util::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_bodies_are_gzipped_when_asked_and_decompress_to_the_identity_body() {
    let snap = tasks_snapshot("ws-gzip", KEY, "v1", 100, 200);
    let server = TestServer::start(&[("gzip.json", snap)]).await;
    let auth = format!("Bearer {KEY}");
    let path = "/tasks?limit=100";

    let plain = server.get(path, Some(KEY)).await;
    plain.assert_ok("identity");
    assert!(plain.body.len() > 10_000, "the body is large");
    assert_eq!(plain.header("content-encoding"), None, "no Accept-Encoding");
    let plain_tag = strong_etag(&plain, "identity");

    for accept in [
        "gzip",
        "gzip, deflate, br",
        "br;q=1.0, gzip;q=0.5",
        "GZIP",
        "*",
    ] {
        let resp = server
            .request(
                "GET",
                path,
                &[("Authorization", &auth), ("Accept-Encoding", accept)],
            )
            .await;
        assert_eq!(resp.status, 200, "Accept-Encoding: {accept}");
        assert_eq!(
            resp.header("content-encoding"),
            Some("gzip"),
            "Accept-Encoding: {accept}"
        );
        assert!(
            resp.body.len() < plain.body.len() / 2,
            "Accept-Encoding: {accept}: {} compressed bytes of {}",
            resp.body.len(),
            plain.body.len()
        );
        assert_eq!(
            gunzip(&resp.body),
            plain.body,
            "Accept-Encoding: {accept}: the body does not decompress to the identity body"
        );
        assert_eq!(resp.header("content-type"), Some("application/json"));
        assert_eq!(resp.header("x-snapshot-version"), Some("v1"));
        assert_cache_headers(&resp, &format!("Accept-Encoding: {accept}"));
        assert!(
            lists(&resp, "vary", "Accept-Encoding"),
            "a response chosen by Accept-Encoding must say Vary: Accept-Encoding, got {:?}",
            resp.header("vary")
        );
        let gz_tag = strong_etag(&resp, "gzip");
        assert_ne!(
            gz_tag, plain_tag,
            "the gzip representation shares the identity ETag"
        );

        // Revalidating the gzip representation.
        let cond = server
            .request(
                "GET",
                path,
                &[
                    ("Authorization", &auth),
                    ("Accept-Encoding", accept),
                    ("If-None-Match", &gz_tag),
                ],
            )
            .await;
        assert_eq!(cond.status, 304, "If-None-Match with the gzip ETag");
        assert_eq!(cond.header("etag"), Some(gz_tag.as_str()));
    }

    for accept in ["gzip;q=0", "gzip; q=0.0, br", "identity", "br, deflate"] {
        let resp = server
            .request(
                "GET",
                path,
                &[("Authorization", &auth), ("Accept-Encoding", accept)],
            )
            .await;
        assert_eq!(resp.status, 200, "Accept-Encoding: {accept}");
        assert_eq!(
            resp.header("content-encoding"),
            None,
            "Accept-Encoding: {accept} refuses gzip"
        );
        assert_eq!(resp.body, plain.body, "Accept-Encoding: {accept}");
        assert_eq!(resp.header("etag"), Some(plain_tag.as_str()));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn small_bodies_are_not_compressed() {
    let server = TestServer::start(&[("acme.json", etag_snapshot("ws-acme"))]).await;
    let auth = format!("Bearer {KEY}");
    let gz = ("Accept-Encoding", "gzip");
    let record = format!("/tasks/{}", uuid(2));
    let plain = server.get(&record, Some(KEY)).await;
    plain.assert_ok(&record);
    assert!(plain.body.len() < 1024, "a single task is under 1 KiB");

    let resp = server
        .request("GET", &record, &[("Authorization", &auth), gz])
        .await;
    assert_eq!(resp.status, 200);
    assert_eq!(resp.header("content-encoding"), None, "GET {record}");
    assert_eq!(resp.body, plain.body);
    assert_eq!(
        resp.header("etag"),
        plain.header("etag"),
        "an uncompressed answer is the identity representation, with its tag"
    );

    for (path, auth) in [
        ("/healthz", None),
        ("/readyz", None),
        ("/tasks", None),
        ("/tasks/not-a-uuid", Some(auth.as_str())),
    ] {
        let mut headers = vec![gz];
        if let Some(a) = auth {
            headers.push(("Authorization", a));
        }
        let resp = server.request("GET", path, &headers).await;
        assert_eq!(resp.header("content-encoding"), None, "GET {path}");
        assert!(
            serde_json::from_slice::<Value>(&resp.body).is_ok(),
            "GET {path}: not plain JSON"
        );
    }
}

/// `--compression off` (for a proxy that compresses) sends bodies as they
/// are, whatever the client accepts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compression_can_be_turned_off() {
    let mut snap = snapshot("ws-a", &[KEY]);
    add(&mut snap, "companies", [company(1, "A")]);
    add(
        &mut snap,
        "tasks",
        (0..60).map(|i| task(100 + i, 1, "2026-03-01T10:00:00Z")),
    );
    for (compression, expected) in [(true, Some("gzip")), (false, None)] {
        let dir = tempdir();
        write_json(dir.path(), "a.json", &snap);
        let server = TestServer::start_in(dir, |c| c.compression = compression).await;
        let auth = format!("Bearer {KEY}");
        let resp = server
            .request(
                "GET",
                "/tasks?limit=60",
                &[("Authorization", &auth), ("Accept-Encoding", "gzip")],
            )
            .await;
        assert_eq!(resp.status, 200);
        assert_eq!(
            resp.header("content-encoding"),
            expected,
            "compression {compression}"
        );
    }
}
