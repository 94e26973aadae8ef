//! HTTP: random paths and query strings on every endpoint of a running
//! server: never a 5xx, always a JSON body, and the status the model
//! predicts.

use std::collections::BTreeSet;

use portfolio_domain::store::id::parse_id;
use proptest::prelude::*;
use proptest::test_runner::TestRunner;
use serde_json::{Value, json};

use super::ids::*;
use super::query::*;
use super::*;
use crate::util::*;

/// The fixture's ids (`Fixture::ids(0)`) and the routes that take one.
#[derive(Clone, Copy, Debug)]
enum Route {
    Portfolio,
    Company,
    CompanyTasks,
    CompanyRoles,
    CompanyNotes,
    CompanyMetrics,
    CompanyMeetings,
    Tasks,
    Task,
    Roles,
    Note,
    Feed,
    Meeting,
}

const ROUTES: &[Route] = &[
    Route::Portfolio,
    Route::Company,
    Route::CompanyTasks,
    Route::CompanyRoles,
    Route::CompanyNotes,
    Route::CompanyMetrics,
    Route::CompanyMeetings,
    Route::Tasks,
    Route::Task,
    Route::Roles,
    Route::Note,
    Route::Feed,
    Route::Meeting,
];

impl Route {
    /// The path with `segment` as its id.
    fn path(self, segment: &str) -> String {
        match self {
            Route::Portfolio => "/portfolio".into(),
            Route::Company => format!("/portfolio/{segment}"),
            Route::CompanyTasks => format!("/portfolio/{segment}/tasks"),
            Route::CompanyRoles => format!("/portfolio/{segment}/roles"),
            Route::CompanyNotes => format!("/portfolio/{segment}/notes"),
            Route::CompanyMetrics => format!("/portfolio/{segment}/metrics"),
            Route::CompanyMeetings => format!("/portfolio/{segment}/meetings"),
            Route::Tasks => "/tasks".into(),
            Route::Task => format!("/tasks/{segment}"),
            Route::Roles => "/roles".into(),
            Route::Note => format!("/notes/{segment}"),
            Route::Feed => "/feed".into(),
            Route::Meeting => format!("/meetings/{segment}"),
        }
    }

    /// The id of the fixture's record this route finds, if it takes one.
    fn existing(self) -> Option<u128> {
        let n = match self {
            Route::Portfolio | Route::Tasks | Route::Roles | Route::Feed => return None,
            Route::Task => 2,
            Route::Note => 3,
            Route::Meeting => 7,
            _ => 1,
        };
        parse_id(&uuid(n))
    }

    /// `segment`, with `OWN` (`own`) read as the id of `existing` in upper
    /// (lower) case.
    fn own(self, segment: &str) -> String {
        let own = self
            .existing()
            .map_or_else(|| uuid(1), |id| id_string(id, false));
        match segment {
            "OWN" => own.to_uppercase(),
            "own" => own,
            other => other.to_owned(),
        }
    }

    /// The status the model predicts for `segment` and the decoded query.
    fn expected_status(self, segment: &str, pairs: &[(String, String)]) -> u16 {
        let query_ok = match self {
            Route::Portfolio => {
                model_filter(pairs, "filter[priority]").is_ok()
                    && model_offset_page(pairs, 100, 50).is_ok()
            }
            Route::CompanyTasks | Route::CompanyNotes | Route::CompanyMeetings => {
                model_offset_page(pairs, 100, 50).is_ok()
            }
            Route::Tasks => {
                model_filter(pairs, "filter[status]").is_ok()
                    && model_filter(pairs, "filter[priority]").is_ok()
                    && model_offset_page(pairs, 100, 50).is_ok()
            }
            Route::Feed => model_feed(pairs).is_ok(),
            Route::Meeting => model_include(pairs).is_ok(),
            _ => true,
        };
        let Some(existing) = self.existing() else {
            return if query_ok { 200 } else { 400 };
        };
        if segment.is_empty() {
            // `/tasks/` and `/portfolio//tasks` name no route.
            return 404;
        }
        if !matches_id_pattern(segment) || !query_ok {
            return 400;
        }
        let id = u128::from_str_radix(&segment.replace('-', ""), 16).expect("32 hex digits");
        if id == existing { 200 } else { 404 }
    }
}

/// A path segment: the fixture's ids (in both cases, percent-encoded),
/// unknown ids, the nil and max ids, near ids and garbage.
fn segment() -> BoxedStrategy<String> {
    prop_oneof![
        // The route's own record (see `Route::own`), in either case.
        3 => prop::sample::select(&["OWN", "own"][..]).prop_map(str::to_owned),
        2 => (1u64..=8, any::<bool>()).prop_map(|(n, upper)| if upper { uuid(n).to_uppercase() } else { uuid(n) }),
        1 => (1u64..=8).prop_map(|n| enc(&uuid(n)).replacen('0', "%30", 1)),
        2 => id_text().prop_map(|t| enc(&t)),
        1 => "[A-Za-z0-9._~!$&'()*+,;=:@%-]{0,40}",
        1 => prop::collection::vec(any::<u8>(), 0..40).prop_map(|bytes| {
            bytes.iter().map(|b| format!("%{b:02x}")).collect::<String>()
        }),
    ]
    .boxed()
}

/// Escapes what may not appear raw in an HTTP request target (RFC 3986;
/// `[` and `]` are left raw, as browsers send them). Hyper itself refuses a
/// raw `"`, `<`, `>`, DEL or a non-UTF-8 byte with an empty 400 before the
/// API sees the request, so those are always sent escaped here.
fn target_safe(text: &str) -> String {
    let mut out = String::new();
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=:@/?%[]".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The snapshot the HTTP property serves: the fixture plus a few more records.
fn http_snapshot() -> Value {
    let mut snap = fixture("ws-http", &[KEY], 0);
    add(
        &mut snap,
        "tasks",
        instant_records(100, |id, ts| {
            with(
                task(id, 1, ts),
                json!({ "status": "triage", "priority": "low" }),
            )
        }),
    );
    add(
        &mut snap,
        "feed",
        instant_records(200, |id, ts| feed_entry(id, 1, ts)),
    );
    add(
        &mut snap,
        "notes",
        instant_records(300, |id, ts| note(id, 1, ts)),
    );
    snap
}

/// Random paths and query strings on every endpoint: always JSON, never a
/// 5xx, and the status the model predicts (400 before 404).
#[test]
fn http_answers_are_json_with_the_predicted_status() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let server = runtime.block_on(TestServer::start(&[("ws.json", http_snapshot())]));
    let mut runner = TestRunner::new(config(250));
    let strategy = (
        prop::sample::select(ROUTES),
        segment(),
        query_string(),
        any::<bool>(),
    );
    let result = runner.run(&strategy, |(route, segment, query, with_query)| {
        let segment = route.own(&segment);
        let query = target_safe(&query);
        let mut target = route.path(&segment);
        if with_query {
            target.push('?');
            target.push_str(&query);
        }
        let resp = runtime.block_on(server.get(&target, Some(KEY)));
        let context = format!("GET {target}");
        prop_assert!(
            resp.status < 500,
            "{}: status {}, body {}",
            context,
            resp.status,
            resp.text()
        );
        prop_assert_eq!(
            resp.header("content-type"),
            Some("application/json"),
            "{}",
            context
        );
        let body: Value = serde_json::from_slice(&resp.body).map_err(|e| {
            TestCaseError::fail(format!(
                "{context}: body is not JSON ({e}): {}",
                resp.text()
            ))
        })?;
        let pairs = if with_query {
            form_pairs(&query)
        } else {
            Vec::new()
        };
        let mut expected = BTreeSet::from([route.expected_status(&segment, &pairs)]);
        if segment.contains('%') {
            // A percent-encoded id may be read raw (never an id) or decoded.
            expected.insert(route.expected_status(&form_decode(&segment), &pairs));
        }
        prop_assert!(
            expected.contains(&resp.status),
            "{}: status {} instead of {:?}, body {}",
            context,
            resp.status,
            expected,
            resp.text()
        );
        if resp.status == 200 {
            prop_assert!(
                body.get("data").is_some(),
                "{}: no data in {}",
                context,
                body
            );
        } else if let Some(problem) = resp.error_problem(resp.status) {
            return Err(TestCaseError::fail(format!("{context}: {problem}")));
        }
        Ok(())
    });
    drop(server);
    if let Err(e) = result {
        panic!("{e}");
    }
}
