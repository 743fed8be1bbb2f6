//! The axum application: state, routes, authentication (gateway keys and the per-key request
//! limit, see [`crate::auth`] and [`crate::limits`]) and fallbacks. [`app`] builds the whole
//! router, for `main` and for tests alike. Every error answer is OpenAI's JSON, the router's
//! own included ([`json_errors`]).

pub mod json_errors;

use std::sync::Arc;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::header;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use tokio::sync::watch;
use tower_http::decompression::RequestDecompressionLayer;

use crate::auth::KeyResolver;
use crate::config::Config;
use crate::error::GatewayError;
use crate::limits::Limits;
use crate::seal::AeadSealer;
use crate::sessions::EventBus;
use crate::upstream::Upstreams;
use crate::{compact, conversations, models, responses, sessions, stored};
use toolbridge_core::reasoning::Sealer;
use toolbridge_store::{CaptureStore, KeyStore, ResponseStore, SqlStore};

/// Shared, read-only state of the application.
#[derive(Clone)]
pub struct AppState {
    pub config: Arc<Config>,
    pub upstreams: Arc<Upstreams>,
    /// Turns true when in-flight streams must end now (the shutdown grace period ran out).
    pub shutdown: watch::Receiver<bool>,
    /// Seals and opens reasoning blobs.
    pub sealer: Arc<dyn Sealer>,
    /// Stored responses; `None` when storage is off.
    pub store: Option<Arc<dyn ResponseStore>>,
    /// Background runs of this process, so a cancel landing here stops them at once (a cancel
    /// landing on another process still wins through the store).
    pub running: Arc<std::sync::Mutex<std::collections::HashMap<String, tokio::task::AbortHandle>>>,
    /// Stored responses in flight here (foreground and background), so a cancel stops them.
    pub in_flight: Arc<crate::inflight::InFlight>,
    /// Streams being finished after their clients left; shutdown waits for them.
    pub drains: Arc<crate::inflight::Drains>,
    /// Gateway keys: config keys and store keys through a cache.
    pub keys: Arc<KeyResolver>,
    /// Store keys and their token ledger; `None` when storage is off.
    pub key_store: Option<Arc<dyn KeyStore>>,
    /// Requests and tokens per minute, per key and per provider.
    pub limits: Arc<Limits>,
    /// Session side-channel events (`GET /v1/sessions/{id}/events`): in-process or Redis.
    pub sessions: EventBus,
    /// Request captures (`[capture]`); `None` when storage is off.
    pub captures: Option<Arc<dyn CaptureStore>>,
    /// Compiled tool checks shared by every request (kept across reloads: they depend only on
    /// the tools a request declares).
    pub schema_cache: Arc<toolbridge_core::repair::SchemaCache>,
}

impl AppState {
    /// State for `config`; the returned sender forces in-flight streams to end.
    pub async fn new(config: Config) -> Result<(Self, watch::Sender<bool>), String> {
        let mut key_store: Option<Arc<dyn KeyStore>> = None;
        let mut captures: Option<Arc<dyn CaptureStore>> = None;
        let store: Option<Arc<dyn ResponseStore>> = match &config.store_url {
            None => None,
            Some(url) => {
                let store = SqlStore::open_with(url, config.store_options)
                    .await
                    .map_err(|e| format!("cannot open the response store: {e}"))?;
                // Responses a dead process left running will never finish: say so.
                let now = crate::time::now();
                store
                    .heartbeat(now)
                    .await
                    .map_err(|e| format!("cannot open the response store: {e}"))?;
                let failed = store
                    .fail_interrupted(now)
                    .await
                    .map_err(|e| format!("cannot open the response store: {e}"))?;
                if failed > 0 {
                    tracing::warn!(
                        failed,
                        "marked responses interrupted by a restart as failed"
                    );
                }
                key_store = Some(Arc::new(store.clone()));
                captures = Some(Arc::new(store.clone()));
                Some(Arc::new(store))
            }
        };
        let keys = KeyResolver::new(
            config.keys.clone(),
            config.require_keys,
            key_store.clone(),
            config.key_cache,
        );
        let limits = Limits::new(config.limits.clone())?;
        if let Some(tools) = &config.gateway_tools {
            tools.connect_configured().await;
        }
        let upstreams = Upstreams::new(&config).map_err(|e| e.to_string())?;
        let sealer = if config.reasoning_keys.is_empty() {
            tracing::warn!(
                "no reasoning_keys configured: reasoning sealed into encrypted_content will not survive a restart or work across gateway processes"
            );
            AeadSealer::random()?
        } else {
            AeadSealer::new(&config.reasoning_keys)?
        };
        let sessions = EventBus::from_config(&config.sessions).await?;
        crate::ops::metrics::set_enabled(config.ops.metrics.enabled);
        let (tx, rx) = watch::channel(false);
        Ok((
            Self {
                config: Arc::new(config),
                upstreams: Arc::new(upstreams),
                shutdown: rx,
                sealer: Arc::new(sealer),
                store,
                running: Arc::default(),
                in_flight: Arc::default(),
                drains: Arc::default(),
                keys: Arc::new(keys),
                key_store,
                limits: Arc::new(limits),
                sessions,
                captures,
                schema_cache: Arc::default(),
            },
            tx,
        ))
    }

    /// The state after a config reload: a new config, upstream clients, key resolver and
    /// reasoning keys; the store, limits, session channels and shutdown signal carry over.
    pub fn reloaded(&self, config: Config) -> Result<Self, String> {
        let old = &self.config;
        for (changed, what) in [
            (old.listen != config.listen, "listen"),
            (old.store_url != config.store_url, "store_url"),
            (
                old.store_options != config.store_options,
                "store timeouts and circuit",
            ),
            (old.sessions != config.sessions, "[sessions]"),
            (old.server != config.server, "[server]"),
            (old.ops.log_format != config.ops.log_format, "[logging]"),
            (old.ops.telemetry != config.ops.telemetry, "[telemetry]"),
        ] {
            if changed {
                tracing::warn!("`{what}` changed: it applies at the next restart");
            }
        }
        let upstreams = Upstreams::new(&config).map_err(|e| e.to_string())?;
        let keys = KeyResolver::new(
            config.keys.clone(),
            config.require_keys,
            self.key_store.clone(),
            config.key_cache,
        );
        let sealer: Arc<dyn Sealer> = if config.reasoning_keys.is_empty() {
            self.sealer.clone()
        } else {
            Arc::new(AeadSealer::new(&config.reasoning_keys)?)
        };
        crate::ops::metrics::set_enabled(config.ops.metrics.enabled);
        Ok(Self {
            config: Arc::new(config),
            upstreams: Arc::new(upstreams),
            sealer,
            keys: Arc::new(keys),
            ..self.clone()
        })
    }
}

/// The whole router.
pub fn app(state: AppState) -> Router {
    let api = Router::new()
        .route("/responses", post(responses::create))
        .route("/responses/compact", post(compact::compact))
        .route("/responses/{id}", get(stored::get).delete(stored::delete))
        .route("/responses/{id}/input_items", get(stored::input_items))
        .route("/responses/{id}/cancel", post(stored::cancel))
        .route("/conversations", post(conversations::create))
        .route(
            "/conversations/{id}",
            get(conversations::get).delete(conversations::delete),
        )
        .route(
            "/conversations/{id}/items",
            get(conversations::list_items).post(conversations::add_items),
        )
        .route("/models", get(models::list))
        .route("/sessions/{session_id}/events", get(sessions::events))
        .route_layer(middleware::from_fn_with_state(state.clone(), authenticate));
    // Layers run bottom-up: an unknown Content-Encoding is refused in OpenAI's shape, known ones
    // are decoded, and the body limit applies to the decoded bytes (a compression bomb is a 413).
    let mut router = Router::new()
        .nest("/v1", api)
        .route("/healthz", get(healthz));
    let metrics = &state.config.ops.metrics;
    if metrics.enabled {
        router = router.route(&metrics.path, get(crate::ops::metrics_handler));
    }
    // The observer sees every route (request id, span, metrics, overhead header, capture).
    // Outermost, a declared length over the body limit is refused before anything reads the
    // body (the observer does, for a capture).
    router
        .fallback(not_found)
        .layer(middleware::from_fn_with_state(
            state.clone(),
            json_errors::json_errors,
        ))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            crate::ops::observe::observe,
        ))
        .layer(DefaultBodyLimit::max(state.config.body_limit))
        .layer(RequestDecompressionLayer::new())
        .layer(middleware::from_fn(known_encoding))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            crate::serve::limits::refuse_oversized,
        ))
        .with_state(state)
}

/// Request body encodings the gateway decodes.
const ENCODINGS: &[&str] = &["gzip", "x-gzip", "br", "zstd", "deflate", "identity"];

async fn known_encoding(request: Request, next: Next) -> Response {
    let unknown = request
        .headers()
        .get_all(header::CONTENT_ENCODING)
        .iter()
        .flat_map(|v| v.to_str().unwrap_or("?").split(','))
        .map(|e| e.trim().to_ascii_lowercase())
        .find(|e| !e.is_empty() && !ENCODINGS.contains(&e.as_str()));
    match unknown {
        Some(encoding) => GatewayError::UnsupportedEncoding(encoding).into_response(),
        None => next.run(request).await,
    }
}

/// Liveness and readiness. `GET /healthz` is always `200 ok` while the process serves (a store
/// outage must not get a gateway restarted: requests that need no store still pass), with the
/// store's circuit state in `x-toolbridge-store` (`ok`, `degraded`, `unavailable`, `off`).
/// `GET /healthz?ready` asks the store (bounded by its timeout) and answers JSON
/// `{"status": "ready"|"not_ready", "store": …}`: 200 when ready, 503 when the store cannot
/// answer.
async fn healthz(
    State(state): State<AppState>,
    axum::extract::RawQuery(query): axum::extract::RawQuery,
) -> Response {
    let ready = query.as_deref().is_some_and(|q| {
        q.split('&')
            .any(|p| p == "ready" || p.starts_with("ready="))
    });
    let Some(store) = &state.store else {
        return health_answer(ready, "off", true);
    };
    if !ready {
        return health_answer(false, store.health().as_str(), true);
    }
    match store.ping().await {
        Ok(()) => health_answer(true, "ok", true),
        Err(e) => {
            tracing::warn!(code = e.code(), "readiness: the store did not answer: {e}");
            health_answer(true, store.health().as_str(), false)
        }
    }
}

fn health_answer(ready_asked: bool, store: &'static str, ready: bool) -> Response {
    let store = if ready { store } else { "unavailable" };
    let header = [(
        axum::http::HeaderName::from_static("x-toolbridge-store"),
        axum::http::HeaderValue::from_static(store),
    )];
    if !ready_asked {
        return (header, "ok").into_response();
    }
    let body = serde_json::json!({
        "status": if ready { "ready" } else { "not_ready" },
        "store": store,
    });
    let status = if ready {
        axum::http::StatusCode::OK
    } else {
        axum::http::StatusCode::SERVICE_UNAVAILABLE
    };
    (status, header, axum::Json(body)).into_response()
}

async fn not_found(request: Request) -> Response {
    GatewayError::RouteNotFound(format!("{} {}", request.method(), request.uri().path()))
        .into_response()
}

/// The token of an `Authorization: Bearer <token>` value; the scheme is case-insensitive
/// (RFC 9110), so `bearer` and `BEARER` work too.
fn bearer_token(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim_start().split_once([' ', '\t'])?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then_some(token.trim())
}

/// Resolves the gateway key (401 when one is required and missing, unknown or revoked), counts
/// the request against the key's limit (429), and hands the key to the handler: as an
/// [`crate::auth::Authenticated`] in the request's extensions and through
/// [`crate::auth::current`].
pub async fn authenticate(
    State(state): State<AppState>,
    mut request: Request,
    next: Next,
) -> Response {
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(bearer_token);
    let auth = match state.keys.resolve(presented).await {
        Ok(auth) => auth,
        Err(e) => return e.into_response(),
    };
    let key = auth
        .as_ref()
        .map_or(crate::limits::ANONYMOUS, |a| a.key_id.as_str());
    if let Err(e) = state.limits.check_request(key).await {
        return e.into_response();
    }
    if let Some(ctx) = crate::ops::observe::current() {
        ctx.set_tenant(crate::auth::tenant_of(auth.as_ref()));
    }
    if let Some(auth) = &auth {
        request.extensions_mut().insert(auth.clone());
    }
    crate::auth::scoped(auth, next.run(request)).await
}
