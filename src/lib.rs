//! portfolio-replica serves the read-only Portfolio API straight from memory,
//! fed by JSON snapshot files that operators drop into a directory.
//!
//! # Layout
//!
//! The flow of data is the flow of the modules (ARCHITECTURE.md has the
//! layer table that `tests/it/layers.rs` enforces):
//!
//! - [`storage`]: where bytes come from, a directory or a prefix of an
//!   object store: listing, fetching, the cache, the manifest format.
//! - [`loader`]: the scan: loads what changed, resolves conflicts,
//!   publishes the catalog, and keeps each file's status.
//! - [`snapshot`]: the file format (serde wire types), parsing and
//!   validation of one file: a readable source in, a validated dataset out;
//!   no file or network IO of its own (it may spread a large file's records
//!   over worker threads).
//! - [`store`]: the immutable dataset built from a validated document
//!   (pre-sorted, pre-rendered, indexed), page and cursor logic, the conflict
//!   rule, and the `ArcSwap` that publishes the catalog; no IO, no HTTP.
//! - [`api`]: its hyper service, auth, query parsing, routing, error replies: the
//!   Portfolio API.
//! - [`ops`]: the operators' listener (`/metrics`, `/snapshots`); with
//!   [`api`], [`reply`] and [`server`], the only modules that serve HTTP.
//! - [`reload`]: the reloader thread: file events (debounced), polling and
//!   SIGHUP trigger scans.
//! - [`server`]: the accept loop around hyper: connection cap, header
//!   limits and timeouts, graceful shutdown with a grace period.
//! - [`status`]: the `/snapshots` body, which `versions --replica` reads;
//!   [`http_client`]: the command line's HTTP client (`probe`,
//!   `versions --replica`).
//! - [`config`]: the command line; [`check`]: `check`; [`diff`]: what
//!   changed between two snapshots (`diff`, and `publish`'s summary);
//!   [`commands`]: `hash-key` and `probe`; [`generate`]: synthetic snapshots;
//!   [`publish`]: `publish`, `rollback` and `versions`, the fleet's
//!   publisher side of object storage.
//!
//! [`serve`] runs the whole server on listeners the caller bound, until a
//! shutdown future completes; tests bind `127.0.0.1:0` and stop it at will.

pub mod api;
pub mod check;
pub mod commands;
pub mod config;
pub mod diff;
pub mod generate;
pub mod http_client;
pub mod loader;
pub mod metrics;
pub mod ops;
pub mod os;
pub mod publish;
pub mod reload;
pub mod reply;
pub mod server;
pub mod snapshot;
pub mod status;
pub mod storage;
pub mod store;

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use anyhow::Context;
use tokio::net::TcpListener;

pub use config::ServeConfig;

/// Runs the server until `shutdown` completes.
///
/// `api` serves the Portfolio API plus `/healthz` and `/readyz`; `admin`
/// serves the operators' endpoints. The first scan of the snapshot directory
/// runs in the background: `/readyz` answers 503 until it has finished.
/// On shutdown both listeners stop accepting and in-flight requests finish.
pub async fn serve(
    config: ServeConfig,
    api: TcpListener,
    admin: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let store = Arc::new(store::Store::default());
    let location = storage::Location::parse(&config.snapshots.to_string_lossy())
        .map_err(anyhow::Error::msg)?;
    let mut metrics =
        metrics::Metrics::with_options(&api::Route::LABELS, config.metrics_per_workspace);
    if let storage::Location::Url(_) = location {
        metrics = metrics.with_object_store();
    }
    let metrics = Arc::new(metrics);
    let origin = storage::Origin::open(&location, &config.storage, Arc::clone(&metrics))
        .map_err(anyhow::Error::msg)?;
    let snapshots = Arc::new(loader::Snapshots::new(
        origin,
        Arc::clone(&store),
        Arc::clone(&metrics),
        loader::MemoryLimit::given_or_cgroup(config.memory_limit),
        config.precompress,
    ));
    let ready = Arc::new(AtomicBool::new(false));
    let draining = Arc::new(AtomicBool::new(false));

    let reloader = reload::Reloader::start(
        Arc::clone(&snapshots),
        config.poll_interval,
        Arc::clone(&ready),
    )
    .context("cannot start the snapshot reloader")?;
    let sighup = config
        .rescan_on_sighup
        .then(|| rescan_on_sighup(reloader.handle()))
        .transpose()?;

    let state = Arc::new(api::ApiState {
        store,
        key_prefix: config.key_prefix.clone(),
        ready,
        warm: AtomicBool::new(false),
        draining: Arc::clone(&draining),
        metrics: Arc::clone(&metrics),
        compression: config.compression,
        require_workspaces: config.require_workspaces,
        cors: config.cors.clone(),
    });
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let limits = config.limits;
    // Said once everything that can fail at startup has not.
    tracing::info!(
        listen = %api.local_addr()?,
        admin_listen = %admin.local_addr()?,
        snapshots = %config.snapshots.display(),
        "serving"
    );
    let api_task = tokio::spawn(server::serve_service(
        api,
        api::ApiService::new(state),
        limits,
        stop_rx.clone(),
    ));
    let admin_task = tokio::spawn(server::serve(
        admin,
        ops::routes(snapshots, metrics),
        limits,
        stop_rx,
    ));

    shutdown.await;
    tracing::info!(
        grace_ms = limits.shutdown_grace.as_millis() as u64,
        "shutting down: /readyz is 503, no new connections, finishing in-flight requests"
    );
    draining.store(true, std::sync::atomic::Ordering::Release);
    let _ = stop_tx.send(true);
    let _ = api_task.await;
    let _ = admin_task.await;
    if let Some(task) = sighup {
        task.abort();
    }
    drop(reloader);
    Ok(())
}

/// Forwards every SIGHUP to the reloader as a full rescan.
fn rescan_on_sighup(handle: reload::RescanHandle) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut hangups = signal(SignalKind::hangup()).context("cannot listen for SIGHUP")?;
    Ok(tokio::spawn(async move {
        while hangups.recv().await.is_some() {
            tracing::info!("SIGHUP: rescanning the snapshot directory");
            handle.rescan();
        }
    }))
}
