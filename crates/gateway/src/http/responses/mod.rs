//! `POST /v1/responses`: parse, normalise, route, translate, send, reconstruct, emit.
//!
//! The handler holds no translation logic: it strings together the pure steps of the core and
//! the provider dialect with the I/O of [`crate::upstream`]. Failures before the upstream
//! accepted the request are HTTP errors in OpenAI's shape; once SSE headers are out, every
//! failure ends the stream with `response.failed` and a specific code.
//!
//! The path is a pipeline of stages, one folder each (the stage itself in its `mod.rs`, its
//! helpers beside it), each taking the previous one's typed hand-off (the types are here):
//!
//! - `ingress/`: parse, admit the key (`admission`, which also charges the tokens at the
//!   end), split a background request off (`background/`); the WebSocket mode
//!   (`websocket/`) is a second ingress: each `response.create` frame runs through the same
//!   stages with JSON framing;
//! - `prepare/` → [`Prepared`]: history and compaction expansion (`prepare/compactions`), the
//!   request's MCP servers and approvals (`prepare/request_mcp`), normalisation, sealed reasoning opened, the route looked
//!   up — once per request, whatever the number of targets;
//! - `route/` → [`Routed`]: per target, the gateway tools offered, the plan, the tool checks and
//!   the translated body;
//! - `dispatch/` → [`Dispatched`]: per target in order, the provider's limits, the send, the
//!   first-event peek and the fallback to the next; the upstream's body read as events
//!   (`dispatch/chunks`) and decoded (`dispatch/decode`);
//! - `emit/`: the answer (its `mod.rs`), assembled (`emit/assembled`), streamed
//!   (`emit/sse`, waiting in the one transport loop, `emit/transport`, gateway calls run
//!   between rounds, `emit/tools_pump`) or whole (`emit/sync`), metered (`emit/abandoned`,
//!   `emit/usage`) and tracked in flight (`emit/detach`);
//! - `rounds/`: the one round driver both transports hand the end of every upstream round to:
//!   the gateway's own rounds, builtins echoed (`rounds/echo`), the tool loop
//!   (`rounds/tool_loop`, its tool search `rounds/found`) and repair re-asks (`rounds/repair`).
//!
//! A stage imports only the stages after it and the leaves beside them, never one that
//! imports it back. The leaves: `stored/`, the store's side shared by several stages (the
//! history a request extends, the provider state kept for it, the response written as it
//! runs); `admission` (admitted at ingress, charged by the meter, released by whoever refuses);
//! `meter` (one response's accounting and side channel, for emit and the tool loop); `framing`
//! (the caller's SSE or JSON framing). And the
//! clients of the stages: background runs (`background/`) and compaction (`compact/`:
//! `/v1/responses/compact`, the compaction items that `prepare` expands, and Codex's compaction
//! trigger on `/v1/responses`, `compact/trigger`).

use std::sync::Arc;
use std::time::Instant;

use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::HeaderValue;
use axum::response::{IntoResponse, Response};
use toolbridge_core::reasoning::ReasoningDisplay;
use toolbridge_core::repair::ToolSchemas;
use toolbridge_providers::dialect::{Dialect, Outgoing, Source};
use toolbridge_providers::profile::Profile;
use toolbridge_wire::responses::{CreateResponse, Diagnostic};

use crate::error::GatewayError;
use crate::state::AppState;

pub(crate) mod admission;
mod background;
mod compact;
mod dispatch;
mod emit;
mod framing;
pub(crate) mod ingress;
mod meter;
mod prepare;
mod rounds;
mod route;
pub(crate) mod stored;
mod websocket;

use axum::Router;
use axum::routing::post;
pub(crate) use dispatch::decode::decode_whole;
pub use emit::sse::frame;
use ingress::ingress;
pub use ingress::parse_request;
pub(crate) use ingress::resent::ResentInputs;
pub(crate) use prepare::expand;
pub(crate) use route::lookup;
pub(crate) use stored::late::LateFinals;
pub(crate) use stored::recent::RecentChains;
pub(crate) use websocket::caps::SocketCaps;

/// The routes that create responses: `POST /v1/responses` and `POST /v1/responses/compact`
/// (and the WebSocket mode's `GET /v1/responses`).
pub(crate) fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/responses", post(create).get(websocket::upgrade))
        .route("/v1/responses/compact", post(compact::compact))
}

/// The WebSocket mode alone, for base URLs without `/v1` (`GET /responses` upgraded).
pub(crate) fn websocket_router() -> Router<AppState> {
    Router::new().route("/responses", axum::routing::get(websocket::upgrade))
}

/// What the upstream accepted: a stream (its first event already read) or a whole answer.
enum Answer {
    Stream(dispatch::chunks::UpstreamSse),
    Whole(reqwest::Response),
}

/// The header listing the diagnostics known when the answer started.
pub(crate) const DIAGNOSTICS_HEADER: &str = "x-toolbridge-diagnostics";

/// Translates the request into `dialect`'s, in the `translate` span: every body the gateway
/// sends is built here (the first round, the gateway's own rounds, compaction), and so are the
/// CLI's plan and matrix. The catalog's probes (`catalog::derive`), which send nothing, call
/// `Dialect::build` themselves: the catalog sits below `http`.
pub(crate) fn translate(
    dialect: Dialect,
    source: &Source<'_>,
    plan: &toolbridge_core::plan::ToolPlan,
    profile: &Profile,
    upstream_model: &str,
    diagnostics: &mut Vec<Diagnostic>,
) -> Outgoing {
    let _span =
        crate::platform::ops::telemetry::stage_span!("translate", dialect = dialect.as_str())
            .entered();
    dialect.build(source, plan, profile, upstream_model, diagnostics)
}

/// The key of `id` among `tenant`'s entries in a process-wide map (the chains and the resent
/// requests held in memory); an entry keeps its tenant and id to be checked on a hit.
pub(crate) fn tenant_key(tenant: &toolbridge_store::Tenant, id: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    tenant.name().hash(&mut h);
    id.hash(&mut h);
    h.finish()
}

/// Whether an `encrypted_content` blob was sealed by this gateway (reasoning of another
/// provider, which a Responses upstream cannot open).
pub(crate) fn sealed_by_gateway(blob: &str) -> bool {
    blob.starts_with(crate::platform::seal::PREFIX)
}

/// The handler.
pub(crate) async fn create(
    State(state): State<AppState>,
    headers: axum::http::HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let request_id = crate::platform::ops::observe::request_id();
    let started = Instant::now();
    let session = crate::platform::sessions::session_id_from_headers(&headers);
    let signals = signals_from_headers(&headers);
    // Boxed once: the request's future is large (tens of kilobytes), and the handler's own
    // future is moved by the layers above it.
    let mut response = match Box::pin(ingress(&state, body, &request_id, session, signals)).await {
        Ok(response) => response,
        Err(error) => {
            tracing::info!(
                request_id,
                status = error.status().as_u16(),
                code = error.code(),
                elapsed_ms = started.elapsed().as_millis() as u64,
                "request refused: {error}"
            );
            error.into_response()
        }
    };
    if let Ok(v) = HeaderValue::from_str(&request_id) {
        response.headers_mut().insert("x-request-id", v);
    }
    response
}

/// The routing signals of Codex's `x-codex-turn-metadata` and `x-codex-routing-hint` headers.
pub(crate) fn signals_from_headers(headers: &axum::http::HeaderMap) -> crate::config::RouteSignals {
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let mut signals = text("x-codex-turn-metadata")
        .map(crate::config::RouteSignals::from_turn_metadata)
        .unwrap_or_default();
    signals.tier = text("x-codex-routing-hint").and_then(crate::config::RouteSignals::tier_of_hint);
    signals.turn_state = text("x-codex-turn-state")
        .filter(|v| v.len() <= 64)
        .map(str::to_owned);
    signals
}

/// Who asked: the gateway key (charged for the tokens) and the session whose side channel
/// shows the response's progress.
#[derive(Clone, Default)]
struct Caller {
    key: Option<crate::platform::auth::Authenticated>,
    session: Option<String>,
    /// How the answer's events are framed: SSE for HTTP, JSON texts for a WebSocket.
    framing: framing::Framing,
    /// What the request's headers say of it (Codex's `x-codex-turn-metadata`), for routing.
    signals: crate::config::RouteSignals,
}

/// A background run's identity, fixed before it starts.
#[derive(Debug, Clone)]
struct BackgroundRun {
    id: String,
    created_at: i64,
}

/// The prepare stage's hand-off: the request as every target sees it, and where it goes.
struct Prepared<'a> {
    /// The request with its history and compactions expanded and approved calls run (the
    /// response skeleton and the gateway's own rounds read it).
    req: CreateResponse,
    canonical: toolbridge_core::canonical::CanonicalRequest,
    /// The items this turn adds to the conversation, stored with the response.
    turn_items: Vec<serde_json::Value>,
    /// The `previous_response_id` chain continued, which a stored answer extends.
    chain: Option<Arc<stored::recent::Link>>,
    /// The request's own MCP servers the gateway serves, connected once.
    listed: Arc<Vec<crate::tools::McpServer>>,
    /// Every gateway tool this request could be offered, as the typed source (the gateway's
    /// and those of `listed`); `None` when the gateway runs no tools.
    gateway_source: Option<Arc<crate::tools::GatewaySource>>,
    /// Their `mcp_list_tools` items and the approved calls that ran, shown first.
    listings: Vec<toolbridge_wire::responses::OutputItem>,
    /// Whether the response is kept.
    stored: bool,
    tenant: toolbridge_store::Tenant,
    display: ReasoningDisplay,
    /// The route's provider, then its fallbacks (looked up once).
    targets: Vec<crate::config::Target<'a>>,
    /// Which of a provider's keys the request's session keeps (`upstream::affinity`).
    affinity: crate::upstream::Affinity,
    /// The request's session for the cache ledger: its `prompt_cache_key`, else its
    /// conversation or the first item of the `previous_response_id` chain it continues, else
    /// the client's session header.
    session: Option<String>,
}

/// The route stage's hand-off: the request for one target.
struct Routed<'a> {
    provider: &'a crate::config::Provider,
    /// Which of the provider's keys every round of the answer sends.
    affinity: crate::upstream::Affinity,
    upstream_model: String,
    profile: Profile,
    /// Whether the gateway offered tools of its own (then it runs the tool loop).
    gateway_tools_offered: bool,
    /// What the gateway runs itself for this request (a tool round that found tools replans
    /// with it).
    offer: toolbridge_core::plan::GatewayOffer,
    /// The offered gateway tools as the typed source's selection (the key's view).
    stage: Option<GatewayStage>,
    /// The system note naming those tools, when the request got one.
    note: Option<String>,
    plan: toolbridge_core::plan::ToolPlan,
    /// The request's diagnostics, the plan's and the checks'.
    diagnostics: Vec<Diagnostic>,
    outgoing: Outgoing,
    payload: Bytes,
    /// The payload again, when the dialect needs a usage estimate.
    usage_basis: Option<Bytes>,
    /// Whether calls are repaired (never for a native Responses upstream).
    repairs: bool,
    repair_checks: Option<Arc<ToolSchemas>>,
    /// The planned tools' JSON text, serialised once for the checks' key (see
    /// `emit::assembled`).
    tools_text: Option<toolbridge_wire::raw::RawJson>,
}

/// The gateway tools one target's tool loop may run: a selection of the request's typed source.
struct GatewayStage {
    source: Arc<crate::tools::GatewaySource>,
    selection: toolbridge_tools::typed::ToolSelection<crate::tools::Action>,
}

/// The dispatch stage's hand-off: the target that took the request, and its answer.
struct Dispatched<'a> {
    /// Boxed: it moves through the answer's stages (kilobytes each time, unboxed).
    routed: Box<Routed<'a>>,
    answer: Answer,
}

/// Serves one request (not a background start): the stages in order.
async fn respond(
    state: &AppState,
    req: CreateResponse,
    request_id: &str,
    run: Option<BackgroundRun>,
    body: Option<&Bytes>,
    caller: Caller,
) -> Result<Response, GatewayError> {
    if compact::trigger::is_trigger(&req) {
        // Boxed: a rare way, which should not make every request's future larger.
        return Box::pin(compact::trigger::answer(state, req, &caller)).await;
    }
    let stored = run.is_some() || (req.store.unwrap_or(true) && state.store.is_some());
    let (prepared, raw) = prepare::prepare(state, req, &caller, stored, body).await?;
    // Boxed: it moves through the answer's stages (kilobytes each time, unboxed).
    let prepared = Box::new(prepared);
    let dispatched = dispatch::dispatch(state, &prepared, raw, &caller, request_id).await?;
    emit::answer(
        state,
        prepared,
        dispatched,
        &caller,
        run.as_ref(),
        request_id,
    )
    .await
}

/// `code` or `code:param` for each diagnostic, comma-separated; `None` when there are none.
pub(crate) fn diagnostics_header(diagnostics: &[Diagnostic]) -> Option<String> {
    if diagnostics.is_empty() {
        return None;
    }
    let parts: Vec<String> = diagnostics
        .iter()
        .map(|d| match &d.param {
            Some(p) => format!("{}:{p}", d.code),
            None => d.code.clone(),
        })
        .collect();
    Some(parts.join(","))
}
