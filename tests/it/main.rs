//! The black-box integration tests of portfolio-replica.
//!
//! One test binary with a module per area, as ripgrep does it. Every test
//! starts its own server on loopback ports over its own temporary snapshot
//! directory, so the tests run in parallel and each is bounded in time by the
//! timeouts in `util`.

mod auth;
mod cli;
mod edges;
mod feed;
mod fuzz_snapshots;
mod isolation;
mod layers;
mod meetings;
mod metrics;
mod openapi;
mod pagination;
mod production;
mod prometheus;
mod props;
mod records;
mod reload;
mod routing;
mod security;
mod snapshots;
mod util;
