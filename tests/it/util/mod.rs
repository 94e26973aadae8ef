//! Helpers shared by every test module: the keys, the time bounds, a polling
//! loop, and (in the submodules, all re-exported here) the one HTTP/1.1
//! client, the in-process server harness, the snapshot builders, the
//! Prometheus text parser, the runners of the `portfolio-replica` binary, and
//! the object storage harness (moto behind a fault-injecting proxy).
//!
//! The tests treat the server as a black box. They only use the public
//! `serve` entry point, the `portfolio-replica` binary and HTTP on loopback.

use std::time::{Duration, Instant};

mod http;
mod moto;
mod objstore;
mod process;
mod prometheus;
mod proxy;
mod server;
mod snapshots;

pub use http::*;
pub use moto::*;
pub use objstore::*;
pub use process::*;
pub use prometheus::*;
pub use proxy::*;
pub use server::*;
pub use snapshots::*;

/// The key most tests authenticate with; it carries the default `cura` prefix.
pub const KEY: &str = "cura_test_key";

/// A second key, used where a second workspace is needed.
pub const OTHER_KEY: &str = "cura_other_key";

/// The exact body of every 401 response (docs/api.md#authentication).
pub const UNAUTHORIZED_BODY: &str = r#"{"error":"Invalid or missing API key"}"#;

/// How long one HTTP exchange may take before the test fails, whether a
/// one-shot request or one answer on a hand-driven connection.
pub const IO_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a server may take to answer `GET /readyz` with 200.
const READY_TIMEOUT: Duration = Duration::from_secs(10);

/// How long one run of the command-line tool may take.
const CLI_TIMEOUT: Duration = Duration::from_secs(60);

/// How long a change (a reload, a counter, a process exit) may take to show.
pub const CHANGE_TIMEOUT: Duration = Duration::from_secs(10);

/// How long to wait between two looks at the server.
pub const POLL: Duration = Duration::from_millis(20);

/// Polls `check` every `POLL` until it returns `Ok`, failing with its last
/// complaint when `what` has not happened within `CHANGE_TIMEOUT`.
pub async fn eventually(what: &str, check: impl AsyncFnMut() -> Result<(), String>) {
    eventually_within(what, CHANGE_TIMEOUT, check).await;
}

/// `eventually` with a bound of its own, for changes that may legitimately
/// take longer (a replica backing off from a failing store).
pub async fn eventually_within(
    what: &str,
    within: Duration,
    mut check: impl AsyncFnMut() -> Result<(), String>,
) {
    let deadline = Instant::now() + within;
    loop {
        match check().await {
            Ok(()) => return,
            Err(last) => assert!(
                Instant::now() < deadline,
                "{what}: not within {within:?}; last: {last}"
            ),
        }
        tokio::time::sleep(POLL).await;
    }
}
