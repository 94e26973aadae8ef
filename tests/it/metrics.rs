//! Company metrics: for each (company, name) the value with the greatest
//! `reported_at` compared as instants (ties: greatest id), listed by name in
//! code-point order, without the metric's `company_id` (docs/api.md#metric).

use serde_json::{Value, json};

use crate::util::*;

const A: u64 = 1;
const B: u64 = 2;
const EMPTY: u64 = 3;

/// Returns a metric value of `company` whose `value_text` names its id.
fn reported(id: u64, company: u64, name: &str, reported_at: &str) -> Value {
    let mut m = metric(id, company, name, reported_at);
    m["attributes"]["value_text"] = json!(format!("value {id}"));
    m
}

fn metrics_snapshot() -> Value {
    let mut snap = snapshot("ws-metrics", &[KEY]);
    add(
        &mut snap,
        "companies",
        [company(A, "A"), company(B, "B"), company(EMPTY, "Empty")],
    );
    add(
        &mut snap,
        "metrics",
        [
            // Latest by instant, not by text: 12 is 10:30Z, 11 is 09:00Z.
            reported(10, A, "ARR", "2026-03-01T10:00:00Z"),
            reported(12, A, "ARR", "2026-03-01T09:30:00-01:00"),
            reported(11, A, "ARR", "2026-03-01T11:00:00+02:00"),
            // One instant written three ways: the greatest id wins; an older value with a greater id does not.
            reported(21, A, "Burn", "2026-03-01T12:00:00+02:00"),
            reported(25, A, "Burn", "2026-03-01T10:00:00Z"),
            reported(23, A, "Burn", "2026-03-01T05:00:00.000-05:00"),
            reported(29, A, "Burn", "2026-03-01T09:59:59.999Z"),
            // Fractions of a second count.
            reported(31, A, "Headcount", "2026-03-01T10:00:00Z"),
            reported(30, A, "Headcount", "2026-03-01T10:00:00.5Z"),
            reported(32, A, "Headcount", "2026-03-01T10:00:00.499999999Z"),
            reported(40, A, "Runway", "2026-03-01T10:00:01Z"),
            reported(41, A, "Runway", "2026-03-01T10:00:00.999999999Z"),
            // Names are compared exactly: "arr" is another metric than "ARR".
            reported(50, A, "arr", "2026-01-01T00:00:00Z"),
            reported(70, A, "Annualized Revenue", "2026-01-01T00:00:00Z"),
            reported(71, A, "Zeta Metric", "2026-01-01T00:00:00Z"),
            reported(72, A, "apple", "2026-01-01T00:00:00Z"),
            reported(73, A, "Ärger", "2026-01-01T00:00:00Z"),
            reported(74, A, "\u{FF21}", "2026-01-01T00:00:00Z"),
            reported(75, A, "\u{1D49C}", "2026-01-01T00:00:00Z"),
            // Another company's newer values of the same name stay its own.
            reported(60, B, "ARR", "2027-01-01T00:00:00Z"),
            reported(61, B, "Burn", "2025-01-01T00:00:00Z"),
            // A value of a company the snapshot does not hold is kept but reachable nowhere.
            reported(80, 999, "ARR", "2028-01-01T00:00:00Z"),
        ],
    );
    snap
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_latest_value_of_each_metric_in_name_order() {
    let server = TestServer::start(&[("metrics.json", metrics_snapshot())]).await;
    // Each case is a company and the ids of the values it must list, in order.
    let cases: &[(u64, &[u64])] = &[
        (A, &[12, 70, 25, 30, 40, 71, 72, 50, 73, 74, 75]),
        (B, &[60, 61]),
        (EMPTY, &[]),
    ];
    let mut failures = Vec::new();
    for (company, want) in cases {
        let path = format!("/portfolio/{}/metrics", uuid(*company));
        let want: Vec<String> = want.iter().map(|id| uuid(*id)).collect();
        let resp = server.get(&path, Some(KEY)).await;
        if resp.status != 200 || resp.ids() != want {
            failures.push(format!(
                "{path}: status {}, body {}\n  expected ids {want:?}",
                resp.status,
                resp.text()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_served_metric_is_its_record_without_company_id() {
    let server = TestServer::start(&[("metrics.json", metrics_snapshot())]).await;
    let body = server
        .get_ok(&format!("/portfolio/{}/metrics", uuid(A)), KEY)
        .await;
    assert_keys(&body, &["data"], "metrics");
    assert_eq!(
        body["data"][0],
        json!({
            "id": uuid(12),
            "attributes": {
                "name": "ARR",
                "unit": null,
                "value_text": "value 12",
                "value_numeric": null,
                "value_currency": null,
                "period_label": null,
                "period_start": null,
                "period_end": null,
                "reported_at": "2026-03-01T09:30:00-01:00",
            },
        })
    );
}
