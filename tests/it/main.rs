//! The black-box integration tests of portfolio-replica.
//!
//! One test binary with a module per area, as ripgrep does it. Every test
//! starts its own server (in-process, or the `portfolio-replica` binary as a
//! child process) on loopback ports over its own temporary snapshot
//! directory (or its own moto server, for object storage), so the tests run
//! in parallel and each is bounded in time by the timeouts in `util`.

mod auth;
mod budget;
mod budget_loads;
mod budget_objstore;
mod budget_restart;
mod caching;
mod cli;
mod company_meetings;
mod compression;
mod conflicts;
mod deltas;
mod diff;
mod edges;
mod fair;
mod feed;
mod fuzz_seeds;
mod fuzz_snapshots;
mod gzip_pages;
mod isolation;
mod layers;
mod limits;
mod logs;
mod manifest_format;
mod many_workspaces;
mod meetings;
mod metrics;
mod metrics_format;
mod objstore;
mod objstore_faults;
mod openapi;
mod operator;
mod pagination;
mod prometheus;
mod props;
mod readme;
mod records;
mod reload;
mod replica_client;
mod routing;
mod security;
mod shutdown;
mod signed;
mod snapshots;
mod status_filters;
mod util;
