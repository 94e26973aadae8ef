//! The OpenAPI document, `src/serve/api/openapi.json`, kept true to the server.
//!
//! One test checks that `GET /openapi.json` serves exactly that file, without
//! a key. The other sends a broad set of real requests to every documented
//! path (pages, filters, cursors, `include=notes`, conditional and compressed
//! requests, and every kind of error, while the server is starting and once it
//! is ready) over realistic data (the `generate` snapshots plus a workspace of
//! edge cases: omitted and `null` attributes, meetings with and without
//! notes, attendees without names, segments without optional fields) and
//! checks each answer against the document: its status must be documented
//! for that path, its headers and body must match what the document declares
//! (`$ref`s resolved, formats checked, defaults echoed), the declared
//! parameter schemas must predict exactly which requests are 400, and by the
//! end every documented path and status must have been seen.
//!
//! Layout: this file holds the two tests and the ids of the edge workspace;
//! `checker` judges each answer against the document, `requests` says what
//! is sent, `data` builds the snapshots.

mod checker;
mod data;
mod requests;

use std::time::{Duration, Instant};

use portfolio_generate::{Scale, generate};
use serde_json::Value;

use crate::util::*;
use checker::*;
use data::*;
use requests::*;

/// The document, as the server embeds it.
const DOC: &str = include_str!("../../../src/serve/api/openapi.json");

const WS: &str = "ws-openapi";
/// Company with only a name.
const BARE_COMPANY: u64 = 1;
/// Company with every attribute set (one explicitly `null`).
const FULL_COMPANY: u64 = 2;
/// Company record without `attributes`.
const EMPTY_COMPANY: u64 = 3;
/// Company whose attributes are explicit `null`s and empty lists.
const NULL_COMPANY: u64 = 4;
/// A company and a meeting that the snapshot does not hold.
const LOST: u64 = 999;
const TASK: u64 = 10;
const ROLE: u64 = 30;
const FEED: u64 = 40;
const NOTE: u64 = 70;
const METRIC: u64 = 80;
/// A meeting with notes.
const MEETING: u64 = 90;
/// A meeting without notes, attendees or end time.
const QUIET_MEETING: u64 = 91;
/// A meeting of an unknown company, its id written in upper case.
const UPPER_MEETING: u64 = 0xabc;
const MEETING_NOTE: u64 = 100;

/// Ids that match the pattern but name no record.
const UNKNOWN_IDS: &[&str] = &[
    "00000000-0000-0000-0000-000000000000",
    "ffffffff-ffff-ffff-ffff-ffffffffffff",
    "6f1c2d3e-4b5a-4c6d-8e7f-0a1b2c3d4e5f",
    "6F1C2D3E-4B5A-1C6D-BE7F-0A1B2C3D4E5F",
    "6f1c2d3e-4b5a-8c6d-9e7f-0a1b2c3d4e5f",
];

/// Ids that do not match the pattern.
const MALFORMED_IDS: &[&str] = &[
    "FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF",
    "6f1c2d3e-4b5a-0c6d-8e7f-0a1b2c3d4e5f",
    "6f1c2d3e-4b5a-9c6d-8e7f-0a1b2c3d4e5f",
    "6f1c2d3e-4b5a-4c6d-ce7f-0a1b2c3d4e5f",
    "6f1c2d3e-4b5a-4c6d-7e7f-0a1b2c3d4e5f",
    "6f1c2d3e-4b5a-4c6d-8e7f-0a1b2c3d4e5",
    "6f1c2d3e-4b5a-4c6d-8e7f-0a1b2c3d4e5f0",
    "6f1c2d3e4b5a4c6d8e7f0a1b2c3d4e5f",
    "6f1c2d3g-4b5a-4c6d-8e7f-0a1b2c3d4e5f",
    "not-a-uuid",
    "1",
];

/// Cursor texts, some well formed and some not; the document decides which.
const CURSORS: &[&str] = &[
    "2026-05-01T00:00:00.000Z",
    "2026-05-01T02:00:00+02:00",
    "2026-05-01T02:00:00 02:00",
    "2026-04-30T19:00:00.123456789-05:00",
    "2026-05-01t00:00:00z",
    "2026-03-01T10:00:00.000Z~00000000-0000-4000-8000-00000000002f",
    "2026-03-01T10:00:00Z~6F1C2D3E-4B5A-4C6D-8E7F-0A1B2C3D4E5F",
    "2026-05-01",
    "2026-05-01T00:00:00",
    "2026-05-01T00:00:00.Z",
    "2026-05-01T00:00:00.000Z~",
    "2026-05-01T00:00:00.000Z~xyz",
    "~6f1c2d3e-4b5a-4c6d-8e7f-0a1b2c3d4e5f",
    "abc",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_served_document_is_the_file_and_needs_no_key() {
    let server = TestServer::start(&[("edge.json", edge_snapshot())]).await;
    for key in [None, Some("cura_not_a_key")] {
        let resp = server.get("/openapi.json", key).await;
        let context = format!("GET /openapi.json with key {key:?}");
        assert_eq!(resp.status, 200, "{context}: {}", resp.text());
        assert_eq!(
            resp.header("content-type"),
            Some("application/json"),
            "{context}: content-type"
        );
        assert!(
            resp.body == DOC.as_bytes(),
            "{context}: the served document is not src/serve/api/openapi.json ({} bytes served, {} in the file)",
            resp.body.len(),
            DOC.len()
        );
    }
    let doc: Value = serde_json::from_str(DOC).expect("the document is JSON");
    assert_eq!(doc["openapi"], "3.1.0");
    assert_eq!(doc["info"]["version"], "1.0.0");
    assert_eq!(doc["info"]["title"], "Portfolio API (portfolio-replica)");

    // One path per route the server answers, and nothing else.
    let paths: std::collections::BTreeSet<&str> = doc["paths"]
        .as_object()
        .expect("paths")
        .keys()
        .map(String::as_str)
        .collect();
    let routes: std::collections::BTreeSet<&str> = portfolio_replica::serve::api::Route::LABELS
        .into_iter()
        .filter(|&label| label != "other")
        .collect();
    assert_eq!(
        paths, routes,
        "the document's paths are the server's routes"
    );
    for (path, item) in doc["paths"].as_object().expect("paths") {
        let op = &item["get"];
        // Only the extension is marked as one, with a description.
        let extension = path == "/portfolio/{id}/meetings";
        assert_eq!(op["x-extension"] == true, extension, "{path}: x-extension");
        if extension {
            assert!(
                op["description"]
                    .as_str()
                    .is_some_and(|d| d.contains("extension"))
            );
        }
        // Every secured operation documents its 429 and a 503, each with
        // Retry-After.
        if op["security"] == serde_json::json!([]) {
            continue;
        }
        for status in ["429", "503"] {
            let reference = op["responses"][status]["$ref"]
                .as_str()
                .unwrap_or_else(|| panic!("{path}: no {status}"));
            let name = reference.rsplit('/').next().expect("a name");
            let response = &doc["components"]["responses"][name];
            assert!(
                response["headers"]["Retry-After"].is_object(),
                "{path}: {status} without Retry-After"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_answer_matches_the_document() {
    let started = Instant::now();
    let doc: Value = serde_json::from_str(DOC).expect("src/serve/api/openapi.json is JSON");
    let mut c = Checker::new(&doc);

    // The generated demo workspaces, and the edge cases in a file that keeps
    // growing (whitespace) until told to finish, so the server stays starting.
    let dir = tempdir();
    let generated = generate(dir.path(), Scale::Small, 42).expect("generate snapshots");
    let edge = edge_snapshot();
    let writer = SlowWriter::start(
        &dir.path().join("edge.json"),
        &edge,
        Duration::from_secs(60),
    );
    let mut server = TestServer::spawn_in(dir, |_| {}).await;

    // While starting: every path once, with and without a key.
    let templates: Vec<String> = doc["paths"]
        .as_object()
        .expect("paths")
        .keys()
        .cloned()
        .collect();
    for template in &templates {
        let path = edge_path(template);
        let expect = match template.as_str() {
            "/healthz" | "/openapi.json" => 200,
            _ => 503,
        };
        c.run(&server, Case::new(&path, Some(KEY), expect)).await;
        c.run(&server, Case::new(&path, None, expect)).await;
        if template.contains("{id}") {
            let malformed = template.replace("{id}", "nope");
            c.run(&server, Case::new(&malformed, Some(KEY), expect))
                .await;
        }
    }
    writer.finish();
    server.wait_ready().await;
    c.ready = true;

    for path in ["/healthz", "/readyz", "/openapi.json"] {
        c.run(&server, Case::new(path, None, 200)).await;
        c.run(&server, Case::new(&format!("{path}?limit=0"), None, 200))
            .await;
    }

    // Every API operation: auth, conditional requests, every id and every
    // query value the document's parameter schemas have an opinion on.
    let query_names = c.query_parameter_names();
    let foreign = read_snapshot(&generated[0].path);
    let foreign_id = foreign["companies"][0]["id"]
        .as_str()
        .expect("an id")
        .to_owned();
    for template in &templates {
        if c.secured(template) {
            check_operation(&mut c, &server, template, &query_names, &foreign_id).await;
        }
    }

    // Real traffic over every workspace: every page of every list, filters,
    // cursors, records by id, meetings with and without notes.
    let mut workspaces = vec![(KEY.to_owned(), edge)];
    for file in &generated {
        workspaces.push((file.api_key.clone(), read_snapshot(&file.path)));
    }
    for (key, snap) in &workspaces {
        traffic(&mut c, &server, key, snap).await;
    }

    // Explicit cases the generated ones do not reach.
    let full = uuid(FULL_COMPANY);
    for (path, expect) in [
        // Percent-encoded parameter names are the same parameters.
        ("/feed?filter%5Btype%5D=product-update".to_owned(), 200),
        ("/feed?filter%5Btype%5D=a&filter[type]=b".to_owned(), 400),
        (format!("/portfolio/{full}/tasks?limit=1&limit=2"), 400),
        // A sub-resource of an unknown company.
        (format!("/portfolio/{}/metrics", uuid(LOST)), 404),
        // The meeting whose id the snapshot wrote in upper case.
        (
            format!("/meetings/{}?include=notes", uuid(UPPER_MEETING)),
            200,
        ),
    ] {
        c.run(&server, Case::new(&path, Some(KEY), expect)).await;
    }
    // Cursors of the documented syntax naming impossible instants are 400,
    // as the parameter's description says; no pattern can tell.
    for cursor in ["2026-02-30T00:00:00Z", "2026-05-01T24:00:00Z"] {
        let path = format!("/feed?cursor={}", enc(cursor));
        c.run(&server, Case::new(&path, Some(KEY), 400).lenient())
            .await;
    }

    // Compressed answers are the same documents.
    let mut compressed = 0;
    for path in ["/tasks?limit=100", "/roles", "/feed?limit=50"] {
        for key in [KEY, generated[0].api_key.as_str()] {
            let case = Case::new(path, Some(key), 200).header("Accept-Encoding", "gzip");
            let (resp, _) = c.run(&server, case).await;
            if resp.header("content-encoding") == Some("gzip") {
                compressed += 1;
            }
        }
    }
    assert!(compressed > 0, "no answer was gzip-compressed");

    // Over a workspace's limits: every secured operation answers 429.
    let limited_dir = tempdir();
    let mut limited = read_snapshot(&dir_edge_path(&server));
    limited["limits"] = serde_json::json!({"rate_per_second": 1, "burst": 1});
    write_json(limited_dir.path(), "edge.json", &limited);
    let limited = TestServer::start_in(limited_dir, |_| {}).await;
    for template in &templates {
        if c.secured(template) {
            let path = edge_path(template);
            // The one request its burst allows, then the one refused.
            let _ = limited.get(&path, Some(KEY)).await;
            c.run(&limited, Case::new(&path, Some(KEY), 429)).await;
        }
    }

    c.assert_everything_seen();
    c.assert_no_failures();
    eprintln!(
        "openapi: {} requests checked against the document in {:?}",
        c.requests,
        started.elapsed()
    );
}

/// The edge snapshot as `server` serves it, from its directory.
fn dir_edge_path(server: &TestServer) -> std::path::PathBuf {
    server.dir().join("edge.json")
}
