//! The server: what `portfolio-replica serve` runs, wired in [`run`].
//!
//! - [`loader`]: the scan, on the reloader thread: what changed, reading
//!   and loading it, conflicts, warming, publishing the catalog, each
//!   file's status.
//! - [`reload`]: the reloader thread: file events (debounced), polling and
//!   SIGHUP trigger scans.
//! - [`api`]: the Portfolio API: its hyper service, auth, query parsing,
//!   routing, error replies.
//! - [`ops`]: the operators' listener (`/metrics`, `/snapshots`).
//! - [`server`]: the accept loop around hyper: connection cap, header
//!   limits and timeouts, graceful shutdown with a grace period.
//! - [`reply`]: the JSON replies both listeners share.
//!
//! With [`crate::storage`] (where snapshots come from) and
//! [`crate::metrics`], that is the whole server; the command line's other
//! tools are in [`crate::tools`].

pub mod api;
pub mod build;
pub mod loader;
pub mod ops;
pub mod reload;
pub mod reply;
pub mod residency;
pub mod server;

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use anyhow::Context;
use tokio::net::TcpListener;

/// Runs the server until `shutdown` completes.
///
/// `api` serves the Portfolio API plus `/healthz` and `/readyz`; `admin`
/// serves the operators' endpoints. The first scan of the snapshots (a
/// directory or an object store) runs in the background on the reloader
/// thread: `/readyz` answers 503 until it has judged every entry, then
/// until the datasets it loaded are warmed (their gzip fragments, with
/// `--precompress on`), and, with `--require-workspaces N`, while fewer
/// than N workspaces serve (docs/reload.md#readiness). On shutdown both
/// listeners stop accepting and in-flight requests finish.
pub async fn run(
    config: crate::config::ServeConfig,
    api: TcpListener,
    admin: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let store = Arc::new(portfolio_domain::store::Store::default());
    let mut metrics =
        crate::metrics::Metrics::with_options(&api::Route::LABELS, config.metrics_per_workspace);
    if let crate::storage::Location::Url(_) = config.snapshots {
        metrics = metrics.with_object_store();
    }
    if let Some(budget) = config.memory_budget {
        metrics = metrics.with_budget(budget);
    }
    if config.storage.trust.enabled() {
        metrics = metrics.with_signatures(&crate::storage::signatures::Refusal::KINDS);
        let trust = &config.storage.trust;
        tracing::info!(
            trusted_keys = %trust.key_ids().join(","),
            remembered = trust.remembers(),
            "verifying signatures: only versions signed by a trusted key load"
        );
    }
    let metrics = Arc::new(metrics);
    let memory = loader::MemoryLimit::given_or_cgroup(config.memory_limit);
    // The one formula of a budget under a limit (docs/operations.md, "What
    // a load counts against"): the process, the budget and its loads on
    // demand in flight must fit, with room left for the catalog, which the
    // scan counts as it reads it (about 4 KiB a workspace).
    if let (Some(budget), Some(limit)) = (config.memory_budget, memory.bytes()) {
        let in_flight = residency::in_flight_bound(budget);
        let needs = loader::PROCESS_BYTES + budget + in_flight;
        if needs >= limit {
            anyhow::bail!(
                "--memory-budget {} MiB does not fit in --memory-limit {} MiB (or the cgroup's limit): the process's own {} MiB, the budget and its loads on demand in flight ({} MiB, a quarter of the budget) need {} MiB, and the catalog needs room besides (about 4 KiB a workspace); lower --memory-budget to at most {} MiB less the catalog, or raise --memory-limit",
                budget >> 20,
                limit >> 20,
                loader::PROCESS_BYTES >> 20,
                in_flight >> 20,
                needs.div_ceil(1 << 20),
                (limit.saturating_sub(loader::PROCESS_BYTES) * 4 / 5) >> 20,
            );
        }
    }
    let origin = crate::storage::StorageOrigin::open(
        &config.snapshots,
        &config.storage,
        Arc::clone(&metrics),
        config.memory_budget.is_some(),
    )
    // As a message: it names its cause already, and the `{:#}`
    // that prints a fatal error would name it twice.
    .map_err(|e| anyhow::Error::msg(e.to_string()))?;
    let origin = Arc::new(origin);
    let resident = config.memory_budget.map(|budget| {
        Arc::new(residency::Resident::new(
            budget,
            config.precompress,
            Arc::clone(&metrics),
            Arc::clone(&origin),
        ))
    });
    let snapshots = Arc::new(loader::Snapshots::new(
        origin,
        Arc::clone(&store),
        Arc::clone(&metrics),
        memory,
        config.precompress,
        resident.clone(),
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
        resident,
        // Always: a snapshot's own limits hold whatever the flags say.
        limits: Arc::new(api::limits::Limits::new(config.workspace_limits)),
    });
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    {
        // Every minute: the workspaces throttled meanwhile are logged, and
        // idle workspaces' limiter state dropped.
        let limits = Arc::clone(&state.limits);
        let mut stop = stop_rx.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(api::limits::LOOK_EVERY);
            loop {
                tokio::select! {
                    _ = tick.tick() => limits.look(),
                    _ = stop.changed() => return,
                }
            }
        });
    }
    let limits = config.limits;
    log_limits(&config, memory);
    // Said once everything that can fail at startup has not.
    tracing::info!(
        listen = %api.local_addr()?,
        admin_listen = %admin.local_addr()?,
        snapshots = %config.snapshots,
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

/// One line at start with every limit in force, whichever set it, so that an
/// operator reads them in the log rather than working them out from the
/// flags, the variables and the cgroup. Every field is always there (`none`
/// when off), in words: it is read by people, and its fields stay the same
/// from one start to the next.
fn log_limits(config: &crate::config::ServeConfig, memory: loader::MemoryLimit) {
    let size = |bytes: u64| match bytes % (1 << 20) {
        0 => format!("{} MiB", bytes >> 20),
        _ => format!("{bytes} bytes"),
    };
    let or_none = |value: Option<String>| value.unwrap_or_else(|| "none".to_owned());
    let memory_limit_from = match (config.memory_limit, memory.bytes()) {
        (Some(_), _) => "--memory-limit",
        (None, Some(_)) => "cgroup",
        (None, None) => "none",
    };
    let policy = config.workspace_limits.as_ref();
    let rate = policy.and_then(|p| p.rate);
    tracing::info!(
        memory_budget = %or_none(config.memory_budget.map(size)),
        memory_limit = %or_none(memory.bytes().map(size)),
        memory_limit_from,
        rate_limit = %or_none(rate.map(|(per_second, _)| format!("{per_second}/s"))),
        rate_burst = %or_none(rate.map(|(_, burst)| burst.to_string())),
        max_in_flight = %or_none(policy.and_then(|p| p.max_in_flight).map(|n| n.to_string())),
        trusted_key_count = config.storage.trust.key_ids().len(),
        "limits in force (a snapshot's own limits hold for its workspace, member by member)"
    );
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
