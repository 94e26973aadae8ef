//! Property tests (proptest): the parsers of untrusted text, and page
//! assembly against a naive model.
//!
//! - Query strings: whatever the client sends, `offset_page`, `feed`,
//!   `filter` and `include_notes` return a bounded value or a 400, and agree
//!   with a reference decoder written here from the WHATWG
//!   `application/x-www-form-urlencoded` rules.
//! - Ids: `parse_id` accepts exactly the pattern of docs/api.md#ids, checked
//!   against a hand-written matcher of that regex.
//! - Timestamps and cursors: `Instant`'s `Display` reads back with
//!   `parse_expanded` and agrees with chrono; `parse_rfc3339` of a timestamp
//!   built from random components (any offset, any number of fraction digits,
//!   out-of-range fields, leap seconds) gives the instant chrono computes, or
//!   nothing when a component is out of range; `Cursor` `Display` round trips.
//! - Pages: random snapshots (many tied instants written in different UTC
//!   offsets, ids in both cases, filters that hit and miss, dangling parents)
//!   are loaded with `load_snapshot` and every list page, and every feed
//!   traversal, is compared with a model that sorts the input records here.
//! - HTTP: random paths and query strings on every endpoint of a running
//!   server: never a 5xx, always a JSON body, and the status the model
//!   predicts.
//!
//! Each property sets its case count explicitly and persists no failures.
//!
//! One module per suite: `query`, `ids`, `instants`, `pages`, `http`.

mod http;
mod ids;
mod instants;
mod pages;
mod query;

use proptest::prelude::*;

/// A proptest configuration with `cases` cases and no regression files.
fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// The largest `offset` of the API (2^53 - 1).
const MAX_OFFSET: u64 = 9_007_199_254_740_991;
