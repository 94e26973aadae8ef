//! Any bytes as a snapshot file: `load_snapshot` never panics; a rejection
//! names the file; a loaded dataset answers every list with JSON, and its
//! feed pages end.

#![no_main]

use libfuzzer_sys::fuzz_target;
use portfolio_domain::snapshot::load as load_snapshot;
use portfolio_domain::store::{Cursor, FeedQuery, OffsetPage};
use serde_json::Value;

fn json(body: &[u8]) -> Value {
    serde_json::from_slice(body).expect("every served body is JSON")
}

fuzz_target!(|data: &[u8]| {
    let loaded = match load_snapshot("fuzz.json", data) {
        Ok(loaded) => loaded,
        Err(e) => {
            assert!(e.to_string().starts_with("fuzz.json: "), "{e}");
            return;
        }
    };
    let ds = &loaded.dataset;
    let page = OffsetPage {
        limit: 100,
        offset: 0,
    };
    let portfolio = json(&ds.portfolio(None, page));
    json(&ds.tasks(None, None, page));
    json(&ds.roles());
    for company in portfolio["data"].as_array().into_iter().flatten() {
        let id = company["id"]
            .as_str()
            .and_then(portfolio_domain::store::id::parse_id);
        let id = id.expect("a served company id is an id");
        json(&ds.company_tasks(id, page).expect("a served company"));
        json(&ds.company_notes(id, page).expect("a served company"));
        json(&ds.company_metrics(id).expect("a served company"));
        json(&ds.company_roles(id).expect("a served company"));
    }
    let mut cursor = None;
    let mut seen = 0;
    loop {
        let body = json(&ds.feed(FeedQuery {
            limit: 7,
            cursor,
            kind: None,
        }));
        seen += body["data"].as_array().map_or(0, Vec::len);
        match body["pagination"]["nextCursor"].as_str() {
            None => break,
            Some(text) => cursor = Some(Cursor::parse(text).expect("nextCursor parses")),
        }
        assert!(seen <= ds.counts.feed, "the feed repeats entries");
    }
    assert_eq!(seen, ds.counts.feed, "the feed pages skip entries");
});
