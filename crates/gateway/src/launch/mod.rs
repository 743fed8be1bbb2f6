//! Running the server, where the layers are put together: build the state and the router,
//! bind, serve through the accept loop, reload on SIGHUP ([`reload`]) and shut down gracefully.
//!
//! On SIGTERM or SIGINT the listener closes and in-flight requests may finish; when the grace
//! period runs out, streams still open end with `response.failed` (`server_shutting_down`) so
//! that every client sees a terminal event.
//!
//! The connections themselves (the cap, header, idle and body timeouts, hyper) are the accept
//! loop's, in [`crate::platform::serve::accept`]; the limits and their config are in
//! [`crate::platform::serve::limits`].

pub(crate) mod reload;

use std::future::Future;
use std::net::SocketAddr;

use tokio::net::TcpListener;

use crate::config::Config;
use crate::state::AppState;
use reload::{Live, Loader};

/// How old an unfinished response of this process must be before the sweep may call it an
/// orphan: the moments between a background run's `queued` record and its registration here
/// are far shorter.
const ORPHAN_AGE_SECS: i64 = 30;

/// Serves `config` on an already bound listener until `shutdown` resolves.
pub async fn serve_on(
    listener: TcpListener,
    config: Config,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    serve_reloadable(listener, config, None, shutdown).await
}

/// Serves like [`serve_on`]; with a `loader`, SIGHUP reloads the config (see
/// [`reload`]).
/// Logs one purge of expired rows: how many `what` went, or why it failed.
fn purged(what: &str, result: Result<u64, toolbridge_store::StoreError>) {
    match result {
        Ok(0) => {}
        Ok(n) => tracing::info!(purged = n, "expired {what} deleted"),
        Err(e) => tracing::warn!("purging expired {what} failed: {e}"),
    }
}

pub(crate) async fn serve_reloadable(
    listener: TcpListener,
    config: Config,
    loader: Option<Loader>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let grace = config.shutdown_grace;
    let server = config.server;
    let routes = config.routes.len();
    let (state, force) = AppState::new(config).await.map_err(std::io::Error::other)?;
    // Announced only once the store is open: a client that reads this line can use the gateway.
    // Tests and scripts read it to find the port when listening on port 0.
    let addr: SocketAddr = listener.local_addr()?;
    eprintln!("toolbridge listening on http://{addr}");
    tracing::info!(%addr, routes, "listening");
    // Histogram buffers are drained periodically, or their memory grows.
    tokio::spawn(crate::platform::ops::metrics::upkeep(
        std::time::Duration::from_secs(5),
    ));
    if let Some(store) = state.store.clone() {
        spawn_sweeps(&state, store);
    }
    let (stopping_tx, mut stopping_rx) = tokio::sync::watch::channel(false);
    let signal = async move {
        shutdown.await;
        tracing::info!("shutting down; in-flight requests have {grace:?} to finish");
        let _ = stopping_tx.send(true);
    };
    // Once shutdown starts, give in-flight streams the grace period, then force them to end.
    tokio::spawn(async move {
        if stopping_rx.wait_for(|s| *s).await.is_ok() {
            tokio::time::sleep(grace).await;
            let _ = force.send(true);
        }
    });
    let drains = state.drains.clone();
    let live = Live::new(state);
    if let Some(loader) = loader {
        tokio::spawn(reload::on_sighup(live.clone(), loader));
    }
    // Streams end when the grace period runs out; their connections get a few more seconds
    // to send that last event and close.
    let drain = grace + std::time::Duration::from_secs(5);
    crate::platform::serve::accept::serve_connections(
        listener,
        live.dispatcher(),
        server,
        drain,
        signal,
    )
    .await?;
    // Streams whose clients left are still being finished: they end by the forced stop at the
    // latest (stored as failed), so this wait is bounded by the grace period.
    if drains.running() > 0 {
        tracing::info!(
            running = drains.running(),
            "waiting for streams whose clients left to end"
        );
        if !drains
            .idle(grace + std::time::Duration::from_secs(10))
            .await
        {
            tracing::warn!("streams whose clients left did not end in time");
        }
    }
    Ok(())
}

/// Binds `addr`, logs the address, and serves until SIGTERM or SIGINT; SIGHUP reloads the
/// config through `loader`.
pub(crate) async fn run(config: Config, loader: Option<Loader>) -> std::io::Result<()> {
    let listener = TcpListener::bind(config.listen).await?;
    serve_reloadable(listener, config, loader, shutdown_signal()).await
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = terminate => {},
    }
}

/// The store's background work: late final writes and budget charges, and every heartbeat
/// period the heartbeat, failing runs that dead processes left behind and this one's own
/// orphans, and (every 20th) deleting what expired.
fn spawn_sweeps(state: &AppState, store: std::sync::Arc<dyn toolbridge_store::ResponseStore>) {
    let captures = state.captures.clone();
    let cache_turns = state.cache_turns.clone();
    let provider_states = state.provider_states.clone();
    // Final writes the store refused while down, written once it is back.
    tokio::spawn(state.late_finals.clone().drain(store.clone()));
    // Budget charges refused the same way, written once it is back.
    if let Some(keys) = state.key_store.clone() {
        tokio::spawn(state.late_charges.clone().drain(keys));
    }
    let in_flight = state.in_flight.clone();
    let late = state.late_finals.clone();
    // In the background: a heartbeat (so other processes know this one's runs are alive),
    // failing runs that dead processes left behind and this one's own orphans, and
    // deleting expired responses.
    tokio::spawn(async move {
        let secs = toolbridge_store::HEARTBEAT_SECS.unsigned_abs();
        // The first beat is a period away: opening the store already beat and failed what
        // dead processes left.
        let period = std::time::Duration::from_secs(secs);
        let mut every = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
        let mut ticks: u64 = 0;
        loop {
            every.tick().await;
            ticks += 1;
            let now = crate::platform::time::now();
            if let Err(e) = store.heartbeat(now).await {
                tracing::warn!("store heartbeat failed: {e}");
            }
            match store.fail_interrupted(now).await {
                Ok(0) => {}
                Ok(n) => tracing::warn!(
                    failed = n,
                    "responses left by a stopped process marked failed"
                ),
                Err(e) => tracing::warn!("failing interrupted responses failed: {e}"),
            }
            // Unfinished here but no longer running here, nor waiting for a late write
            // (checked in that order: a response leaves the registry only after its final
            // write was tried, and was kept for later by then).
            let live = |id: &str| in_flight.holds(id) || late.holds(id);
            match store.fail_orphans(now - ORPHAN_AGE_SECS, &live).await {
                Ok(0) => {}
                Ok(n) => tracing::warn!(
                    failed = n,
                    "responses whose end could not be stored marked failed"
                ),
                Err(e) => tracing::warn!("failing orphaned responses failed: {e}"),
            }
            if ticks % 20 == 1 {
                purged("stored responses", store.purge_expired(now).await);
                if let Some(states) = &provider_states {
                    purged("provider states", states.purge_provider_states(now).await);
                }
                if let Some(captures) = &captures {
                    purged("request captures", captures.purge_captures(now).await);
                }
                if let Some(turns) = &cache_turns {
                    purged("cache ledger turns", turns.purge_cache_turns(now).await);
                }
            }
        }
    });
}
