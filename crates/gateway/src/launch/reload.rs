//! Config reload on SIGHUP. The server dispatches every request to the current router, held in
//! an `ArcSwap`; a reload loads and validates the file again, builds a new state (config,
//! upstream clients, key resolver, reasoning keys) beside the old one and swaps the router.
//! A request keeps the router, state and config it started with until its stream ends, so open
//! streams are never dropped. A file that fails validation changes nothing: the old config
//! stays and the reason is logged.
//!
//! What lives across a reload: the store, rate-limit windows, session channels and the log and
//! trace setup; changing `listen`, `store_url`, `[limits]`, `[sessions]`, `[server]` (the
//! accept loop reads it once), `[logging]` or `[telemetry]` needs a restart (a reload says so
//! in the log).

use std::convert::Infallible;
use std::sync::Arc;

use arc_swap::ArcSwap;
use axum::Router;
use axum::extract::Request;
use tower::ServiceExt;

use crate::config::Config;
use crate::http::app;
use crate::state::AppState;

/// Loads the config again (the same file and overrides as at start).
pub(crate) type Loader = Arc<dyn Fn() -> Result<Config, String> + Send + Sync>;

/// The router requests go to now, and the state it was built from.
pub(crate) struct Live {
    current: ArcSwap<(AppState, Router)>,
}

impl Live {
    pub(crate) fn new(state: AppState) -> Arc<Self> {
        let router = app(state.clone());
        Arc::new(Self {
            current: ArcSwap::from_pointee((state, router)),
        })
    }

    /// A router that hands each request to the current router.
    pub(crate) fn dispatcher(self: &Arc<Self>) -> Router {
        let live = Arc::clone(self);
        Router::new().fallback_service(tower::service_fn(move |request: Request| {
            let router = live.current.load().1.clone();
            async move { Ok::<_, Infallible>(router.oneshot(request).await.into_response_ok()) }
        }))
    }

    /// Applies `config`: a new state and router for new requests.
    pub(crate) fn apply(&self, config: Config) -> Result<(), String> {
        let old = self.current.load_full();
        let state = old.0.reloaded(config)?;
        let router = app(state.clone());
        self.current.store(Arc::new((state, router)));
        Ok(())
    }

    /// Loads with `loader` and applies, or keeps the old config and logs why.
    pub(crate) fn reload(&self, loader: &Loader) {
        match loader().and_then(|config| self.apply(config)) {
            Ok(()) => {
                crate::platform::ops::metrics::reload("applied");
                tracing::info!("config reloaded; requests already running keep the old one");
            }
            Err(e) => {
                crate::platform::ops::metrics::reload("rejected");
                tracing::error!("config reload rejected, the old config stays: {e}");
            }
        }
    }
}

trait IntoResponseOk {
    fn into_response_ok(self) -> axum::response::Response;
}

impl IntoResponseOk for Result<axum::response::Response, Infallible> {
    fn into_response_ok(self) -> axum::response::Response {
        match self {
            Ok(response) => response,
            Err(never) => match never {},
        }
    }
}

/// Reloads on every SIGHUP, forever (Unix; elsewhere it waits forever).
pub(crate) async fn on_sighup(live: Arc<Live>, loader: Loader) {
    #[cfg(unix)]
    {
        let mut hangups =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) {
                Ok(s) => s,
                Err(e) => {
                    tracing::warn!("cannot listen for SIGHUP, config reload is off: {e}");
                    return;
                }
            };
        while hangups.recv().await.is_some() {
            tracing::info!("SIGHUP: reloading the config");
            live.reload(&loader);
        }
    }
    #[cfg(not(unix))]
    {
        let _ = (live, loader);
        std::future::pending::<()>().await;
    }
}
