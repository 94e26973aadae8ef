//! What is sent: every documented operation with edge paths, sampled
//! parameter values and pages walked to their end.

use std::collections::BTreeSet;

use serde_json::Value;

use super::checker::*;
use super::*;
use crate::util::*;

/// A path of `template` that answers 200 in the edge workspace.
pub(super) fn edge_path(template: &str) -> String {
    let id = match template.split('/').nth(1) {
        Some("portfolio") => uuid(FULL_COMPANY),
        Some("tasks") => uuid(TASK + 1),
        Some("notes") => uuid(NOTE + 1),
        Some("meetings") => uuid(MEETING),
        _ => String::new(),
    };
    template.replace("{id}", &id)
}

/// Checks one secured operation of the edge workspace: keys, conditional
/// requests, ids, and every query value its parameter schemas judge.
pub(super) async fn check_operation(
    c: &mut Checker<'_>,
    server: &TestServer,
    template: &str,
    query_names: &BTreeSet<String>,
    foreign_id: &str,
) {
    let base = edge_path(template);

    // The key.
    let (resp, _) = c.run(server, Case::new(&base, Some(KEY), 200)).await;
    for (auth, expect) in [
        (None, 401),
        (Some(format!("bearer {KEY}")), 200),
        (Some(format!("BEARER  {KEY} ")), 200),
        (Some("Bearer cura_not_a_key".to_owned()), 401),
        (Some("Bearer cura_".to_owned()), 401),
        (
            Some(format!("Bearer {}", KEY.replacen("cura", "other", 1))),
            401,
        ),
        (Some(format!("Basic {KEY}")), 401),
        (Some(KEY.to_owned()), 401),
    ] {
        let case = Case::new(&base, None, expect);
        let case = match &auth {
            Some(value) => case.header("Authorization", value),
            None => case,
        };
        c.run(server, case).await;
    }

    // Conditional requests.
    let etag = resp.header("etag").unwrap_or("\"none\"").to_owned();
    for (value, expect) in [
        (etag.clone(), 304),
        (format!("W/{etag}"), 304),
        (format!("\"other\", {etag}"), 304),
        ("*".to_owned(), 304),
        ("\"other\"".to_owned(), 200),
    ] {
        c.run(
            server,
            Case::new(&base, Some(KEY), expect).header("If-None-Match", &value),
        )
        .await;
    }

    // Ids: the order of checks is key, then id, then lookup.
    if template.contains("{id}") {
        let id = base.split('/').nth(2).expect("an id segment").to_owned();
        let swap = |other: &str| base.replacen(&id, other, 1);
        c.run(server, Case::new(&swap(&id.to_uppercase()), Some(KEY), 200))
            .await;
        for unknown in UNKNOWN_IDS.iter().copied().chain([foreign_id]) {
            c.run(server, Case::new(&swap(unknown), Some(KEY), 404))
                .await;
            c.run(server, Case::new(&swap(unknown), None, 401)).await;
        }
        for malformed in MALFORMED_IDS {
            c.run(server, Case::new(&swap(malformed), Some(KEY), 400))
                .await;
            c.run(server, Case::new(&swap(malformed), None, 401)).await;
        }
    }

    // Query values, judged by the document.
    let sep = if base.contains('?') { '&' } else { '?' };
    let declared = c.query_parameters(template);
    for param in &declared {
        let name = param["name"].as_str().expect("a parameter name");
        let schema = &param["schema"];
        for value in sample_values(resolve(c.doc, schema)) {
            let expect = if c.value_is_valid(schema, &value) {
                200
            } else {
                400
            };
            let path = format!("{base}{sep}{name}={}", enc(&value));
            c.run(server, Case::new(&path, Some(KEY), expect)).await;
            if expect == 400 {
                c.run(server, Case::new(&path, None, 401)).await;
            } else {
                let encoded = format!("{base}{sep}{}={}", enc(name), enc(&value));
                c.run(server, Case::new(&encoded, Some(KEY), 200)).await;
                let twice = format!("{path}&{name}={}", enc(&value));
                c.run(server, Case::new(&twice, Some(KEY), 400)).await;
            }
        }
    }

    // Parameters the operation does not declare are ignored.
    for name in query_names {
        if declared.iter().any(|p| p["name"] == name.as_str()) {
            continue;
        }
        for value in ["", "0", "x"] {
            let path = format!("{base}{sep}{name}={value}");
            c.run(server, Case::new(&path, Some(KEY), 200)).await;
        }
    }
}

/// Values on both sides of every constraint of a parameter's schema.
fn sample_values(schema: &Value) -> Vec<String> {
    let mut values: Vec<String> = Vec::new();
    if schema["type"] == "integer" {
        let min = schema["minimum"].as_u64().unwrap_or(0);
        let max = schema["maximum"].as_u64().unwrap_or(1000);
        if min > 0 {
            values.push((min - 1).to_string());
        } else {
            values.push("-1".to_owned());
        }
        for n in [min, min + 1, max - 1, max, max + 1] {
            values.push(n.to_string());
        }
        values.push(format!("00{}", min + 1));
        for text in [
            "",
            "abc",
            "1.5",
            "+1",
            "1e1",
            " 1",
            "1 ",
            "0x10",
            "18446744073709551616",
        ] {
            values.push(text.to_owned());
        }
    } else {
        for text in [
            "",
            "x",
            "a b",
            "\u{dc}n\u{ef}c\u{f6}de",
            "high",
            "low",
            "done",
        ] {
            values.push(text.to_owned());
        }
        if let Some(allowed) = schema["enum"].as_array() {
            for v in allowed.iter().filter_map(Value::as_str) {
                values.push(v.to_owned());
                values.push(v.to_uppercase());
                values.push(format!("{v},x"));
            }
        }
        if schema.get("pattern").is_some() {
            values.extend(CURSORS.iter().map(|c| (*c).to_owned()));
        }
    }
    values
}

/// Every page of every list, filters, cursors and records by id of one workspace.
pub(super) async fn traffic(c: &mut Checker<'_>, server: &TestServer, key: &str, snap: &Value) {
    let ids = |collection: &str| record_ids(snap, collection);
    let distinct = |collection: &str, attribute: &str| -> BTreeSet<String> {
        snap[collection]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| r["attributes"][attribute].as_str().map(str::to_owned))
            .collect()
    };

    walk_offset(c, server, key, "/portfolio", None).await;
    walk_offset(c, server, key, "/portfolio", Some(5)).await;
    for priority in distinct("companies", "priority")
        .into_iter()
        .chain(["unknown".to_owned()])
    {
        let base = format!("/portfolio?filter[priority]={}", enc(&priority));
        walk_offset(c, server, key, &base, Some(2)).await;
    }
    for company in ids("companies") {
        c.run(
            server,
            Case::new(&format!("/portfolio/{company}"), Some(key), 200),
        )
        .await;
        for sub in ["roles", "metrics"] {
            let path = format!("/portfolio/{company}/{sub}");
            c.run(server, Case::new(&path, Some(key), 200)).await;
        }
        for sub in ["tasks", "notes", "meetings"] {
            let base = format!("/portfolio/{company}/{sub}");
            walk_offset(c, server, key, &base, None).await;
            walk_offset(c, server, key, &base, Some(7)).await;
        }
    }

    walk_offset(c, server, key, "/tasks", None).await;
    walk_offset(c, server, key, "/tasks", Some(100)).await;
    let mut statuses = distinct("tasks", "status");
    statuses.insert("unknown".to_owned());
    let priorities = distinct("tasks", "priority");
    for status in &statuses {
        let base = format!("/tasks?filter[status]={}", enc(status));
        walk_offset(c, server, key, &base, Some(20)).await;
        for priority in &priorities {
            let base = format!(
                "/tasks?filter[priority]={}&filter%5Bstatus%5D={}",
                enc(priority),
                enc(status)
            );
            walk_offset(c, server, key, &base, Some(30)).await;
        }
    }
    for priority in &priorities {
        let base = format!("/tasks?filter[priority]={}", enc(priority));
        walk_offset(c, server, key, &base, None).await;
    }
    for task in ids("tasks").iter().step_by(7) {
        c.run(server, Case::new(&format!("/tasks/{task}"), Some(key), 200))
            .await;
    }
    c.run(server, Case::new("/roles", Some(key), 200)).await;
    for note in ids("notes").iter().step_by(5) {
        c.run(server, Case::new(&format!("/notes/{note}"), Some(key), 200))
            .await;
    }

    walk_feed(c, server, key, "").await;
    walk_feed(c, server, key, "limit=7").await;
    walk_feed(c, server, key, "limit=1").await;
    walk_feed(c, server, key, "limit=50&cursor=2026-06-01T00:00:00.000Z").await;
    walk_feed(c, server, key, "cursor=2026-03-01T12%3A00%3A00%2B02%3A00").await;
    for kind in distinct("feed", "type")
        .into_iter()
        .chain(["unknown".to_owned()])
    {
        walk_feed(
            c,
            server,
            key,
            &format!("limit=5&filter[type]={}", enc(&kind)),
        )
        .await;
    }

    for meeting in ids("meetings") {
        for query in ["", "?include=notes"] {
            let path = format!("/meetings/{meeting}{query}");
            c.run(server, Case::new(&path, Some(key), 200)).await;
        }
    }
}

/// Pages through an offset list, `limit` at a time (the default if `None`).
async fn walk_offset(
    c: &mut Checker<'_>,
    server: &TestServer,
    key: &str,
    base: &str,
    limit: Option<u64>,
) {
    let sep = if base.contains('?') { '&' } else { '?' };
    let mut offset = 0;
    for _ in 0..1000 {
        let path = match (limit, offset) {
            (None, 0) => base.to_owned(),
            (None, offset) => format!("{base}{sep}offset={offset}"),
            (Some(limit), offset) => format!("{base}{sep}limit={limit}&offset={offset}"),
        };
        let (_, body) = c.run(server, Case::new(&path, Some(key), 200)).await;
        let Some(pagination) = body.as_ref().map(|b| &b["pagination"]) else {
            return;
        };
        if pagination["hasMore"] != true {
            return;
        }
        offset += pagination["limit"].as_u64().expect("pagination.limit");
    }
    panic!("GET {base}: hasMore did not end within 1000 pages");
}

/// Pages through the feed by `nextCursor`; `query` carries the first cursor, if any.
async fn walk_feed(c: &mut Checker<'_>, server: &TestServer, key: &str, query: &str) {
    let without_cursor: Vec<&str> = query
        .split('&')
        .filter(|p| !p.is_empty() && !p.starts_with("cursor="))
        .collect();
    let mut path = if query.is_empty() {
        "/feed".to_owned()
    } else {
        format!("/feed?{query}")
    };
    for _ in 0..1000 {
        let (_, body) = c.run(server, Case::new(&path, Some(key), 200)).await;
        let Some(cursor) = body
            .as_ref()
            .and_then(|b| b["pagination"]["nextCursor"].as_str())
        else {
            return;
        };
        let mut params = without_cursor.clone();
        let cursor = format!("cursor={}", enc(cursor));
        params.push(&cursor);
        path = format!("/feed?{}", params.join("&"));
    }
    panic!("GET /feed?{query}: nextCursor did not end within 1000 pages");
}
