//! The HTTP face of the gateway: [`app`] builds the whole router, for `main` and for tests
//! alike, from one router per route module (`responses`, `stored`, `conversations`, `models`,
//! `search`, `sessions`, `cache`) under `/v1`, behind authentication (gateway keys and the per-key request limit,
//! see [`crate::platform::auth`] and [`crate::platform::limits`]), plus `/healthz`, the
//! metrics route and, when enabled, the console (`console`, which resolves its own key). Every error answer is OpenAI's JSON, the router's own included
//! ([`json_errors`]).
//!
//! Who imports from `http`: `launch` (the router), `cli` (`toolbridge plan` and `providers`
//! build their bodies with `responses::translate`) and, against the layering, the application
//! state ([`crate::state`] holds `responses::LateFinals` and `responses::SocketCaps`), so `http`
//! and `state` import each other. ARCHITECTURE.md's import table of `crates/gateway/src` is
//! checked against the code.

mod cache;
mod console;
pub(crate) mod conversations;
mod health;
pub(crate) mod json_errors;
pub(crate) mod matrix;
mod models;
pub(crate) mod responses;
mod search;
mod sessions;
pub(crate) mod stored;

use axum::Router;
use axum::body::Body;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::header;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tower_http::decompression::{DecompressionBody, RequestDecompressionLayer};

use crate::error::GatewayError;
use crate::platform::ops::observe::{Observer, observe};
use crate::platform::serve::limits::refuse_oversized;
use crate::state::AppState;

/// The whole router.
pub fn app(state: AppState) -> Router {
    let api = Router::new()
        .merge(responses::router())
        .merge(stored::router())
        .merge(conversations::router())
        .merge(models::router())
        .merge(search::router())
        .merge(sessions::router())
        .merge(cache::router())
        .route_layer(middleware::from_fn_with_state(state.clone(), authenticate));
    // Codex's base URL may lack `/v1`: the WebSocket mode answers there too, behind the same key.
    let websocket = responses::websocket_router()
        .route_layer(middleware::from_fn_with_state(state.clone(), authenticate));
    // Each API route is declared with its `/v1` (merged, not nested: a nested router rebuilt
    // every request's URI without the prefix, about 2 K instructions a request).
    let mut router = Router::new()
        .merge(api)
        .merge(websocket)
        .merge(console::router(&state))
        .route("/healthz", get(health::healthz));
    let metrics = &state.config.ops.metrics;
    if metrics.enabled {
        router = router.route(&metrics.path, get(crate::platform::ops::metrics_handler));
    }
    let observer = Observer {
        config: state.config.clone(),
        captures: state.captures.clone(),
        journal: state.journal.clone(),
    };
    // Outermost first: a declared length over the body limit and an unknown Content-Encoding
    // are refused before anything reads the body (the observer does, for a capture); known
    // encodings are decoded, and the body limit applies to the decoded bytes (a compression
    // bomb is a 413); the observer sees every route (request id, span, metrics, overhead
    // header, capture) and every error answer in OpenAI's shape. Grouped by what they read
    // (the raw body, the decoded body) and one middleware where the order allows: each
    // middleware clones the routes' service and boxes a future for every request, and each
    // `Router::layer` call boxes every route once more.
    let outer = middleware::from_fn_with_state(state.config.body_limit, admit);
    let inner = tower::ServiceBuilder::new()
        .layer(RequestDecompressionLayer::new())
        .map_request(|request: Request<DecompressionBody<Body>>| request.map(Body::new))
        .layer(DefaultBodyLimit::max(state.config.body_limit))
        .layer(middleware::from_fn_with_state(observer, observed));
    router
        .fallback(not_found)
        .layer(inner)
        .layer(outer)
        .with_state(state)
}

/// The observer's work around the request ([`observe`]), with every error answer below it
/// rewritten into OpenAI's shape ([`json_errors::json_errors`]).
async fn observed(State(observer): State<Observer>, request: Request, next: Next) -> Response {
    let limit = observer.config.body_limit;
    observe(&observer, request, |request| {
        json_errors::json_errors(limit, request, next)
    })
    .await
}

/// Refuses, before any of the body is read, a declared length over the body limit (413,
/// [`refuse_oversized`]) and a Content-Encoding the gateway does not decode.
async fn admit(State(limit): State<usize>, request: Request, next: Next) -> Response {
    if let Some(error) = refuse_oversized(request.headers(), limit) {
        return error.into_response();
    }
    known_encoding(request, next).await
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
/// [`crate::platform::auth::Authenticated`] in the request's extensions and through
/// [`crate::platform::auth::current`].
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
        .map_or(crate::platform::limits::ANONYMOUS, |a| a.key_id.as_str());
    if let Err(e) = state.limits.check_request(key).await {
        return e.into_response();
    }
    if let Some(ctx) = crate::platform::ops::observe::current() {
        ctx.set_tenant(crate::platform::auth::tenant_of(auth.as_ref()));
    }
    if let Some(auth) = &auth {
        request.extensions_mut().insert(auth.clone());
    }
    crate::platform::auth::scoped(auth, next.run(request)).await
}
