//! The emit stage: the answer, what the client gets from the upstream that took the request,
//! through the assembler (`assembled`), streamed (`sse`) or whole (`sync`), with the rounds of
//! the gateway's own (echoed builtins, the tool loop, repair re-asks: `rounds`, which the pump
//! drives through `tools_pump`). The response's identity, its meter, its storing and its place
//! in flight are set up here; beside this file are the transport loop the streamed answers wait
//! in (`transport`), what is charged (`abandoned`, `usage`) and the tracking of a stream whose
//! client left (`detach`). Not here: choosing the upstream (`dispatch`), the store's side
//! (`stored`), the meter itself (`meter`, beside the stages).

mod abandoned;
mod assembled;
mod detach;
mod pump;
pub(super) mod sse;
mod sse_end;
mod sync;
mod tools_pump;
pub(super) mod transport;
pub(super) mod usage;

use axum::http::HeaderValue;
use axum::response::Response;
use toolbridge_core::assemble::{ResponseMeta, skeleton};

use self::detach::{Detach, Flight};
use super::framing::Framing;
use super::meter::Meter;
use super::stored::persist::Persist;
use super::stored::provider_state::StateSink;
use super::{BackgroundRun, Caller, DIAGNOSTICS_HEADER, Dispatched, Prepared, diagnostics_header};
use crate::error::GatewayError;
use crate::platform::{ids, time};
use crate::state::AppState;

/// What the answer needs besides the request and the upstream: its identity, meter and store.
struct Setup {
    meta: ResponseMeta,
    meter: Meter,
    persist: Option<Persist>,
    /// Where the response's provider state is kept (`provider_state`).
    states: Option<StateSink>,
    flight: Flight,
    detach: Option<Detach>,
    /// The transport's framing of the events (SSE, or JSON texts for a WebSocket).
    framing: Framing,
}

/// Answers the client from the upstream that took the request.
pub(super) async fn answer(
    state: &AppState,
    mut prepared: Box<Prepared<'_>>,
    dispatched: Dispatched<'_>,
    caller: &Caller,
    run: Option<&BackgroundRun>,
    request_id: &str,
) -> Result<Response, GatewayError> {
    let setup = setup(state, &mut prepared, &dispatched, caller, run);
    let header = diagnostics_header(&dispatched.routed.diagnostics);
    let (served_model, turn_state) = served(&prepared, &dispatched);
    let mut response = assembled::assemble(state, prepared, dispatched, setup, request_id).await?;
    if let Some(v) = header.and_then(|h| HeaderValue::from_str(&h).ok()) {
        response.headers_mut().insert(DIAGNOSTICS_HEADER, v);
    }
    let headers = response.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&served_model) {
        headers.insert("openai-model", v);
    }
    if let Some(v) = turn_state.and_then(|t| HeaderValue::from_str(&t).ok()) {
        headers.insert("x-codex-turn-state", v);
    }
    if let Ok(v) = HeaderValue::from_str(state.catalog_etag()) {
        headers.insert("x-models-etag", v);
    }
    Ok(response)
}

/// The model that served the answer, for `openai-model` (Codex shows "model rerouted" when it
/// is not the one it asked for): the requested name when the route's own target served it,
/// the fallback's upstream model when a fallback did; and the turn state naming that target.
fn served(prepared: &Prepared<'_>, dispatched: &Dispatched<'_>) -> (String, Option<String>) {
    let routed = &dispatched.routed;
    let target = prepared.targets.iter().find(|t| {
        t.provider.name == routed.provider.name && t.upstream_model == routed.upstream_model
    });
    let model = match target {
        Some(t) if t.fallback => routed.upstream_model.clone(),
        _ => prepared.req.model.clone().unwrap_or_default(),
    };
    (model, target.map(crate::config::Target::turn_state))
}

/// The response's identity (a background run's is fixed before it starts), meter, storing and
/// place in flight. The turn's items move to the store's writer.
fn setup(
    state: &AppState,
    prepared: &mut Prepared<'_>,
    dispatched: &Dispatched<'_>,
    caller: &Caller,
    run: Option<&BackgroundRun>,
) -> Setup {
    let stored = prepared.stored;
    let meta = match run {
        Some(run) => ResponseMeta {
            id: run.id.clone(),
            created_at: run.created_at,
            stored,
        },
        None => ResponseMeta {
            id: ids::new("resp"),
            created_at: time::now(),
            stored,
        },
    };
    let conversation = toolbridge_core::assemble::conversation_id(&prepared.req);
    let cache_session = prepared
        .session
        .clone()
        .map(|key| (prepared.tenant.clone(), key));
    let provider = dispatched.routed.provider;
    // The session the ledger records the response under (its `prompt_cache_key`,
    // conversation, chain or Codex session): the console links to it, and the GenAI span names
    // it as the conversation.
    let conversation_key = prepared.session.as_deref();
    crate::platform::ops::observe::note(|entry| {
        entry.session = conversation_key.map(str::to_owned);
        entry.key_id = caller.key.as_ref().map(|k| k.key_id.clone());
    });
    let meter = Meter::start(
        state,
        caller.key.clone(),
        (&provider.name, &prepared.canonical.model),
        (caller.session.clone(), cache_session),
        &meta.id,
        &crate::platform::ops::genai::InferenceStart {
            provider: crate::platform::ops::genai::provider_name(
                &provider.profile.name,
                provider.dialect.as_str(),
            ),
            gateway_provider: &provider.name,
            model: &dispatched.routed.upstream_model,
            route: &prepared.canonical.model,
            base_url: &provider.base_url,
            conversation: conversation_key,
            request: &prepared.req,
            capture_content: state.config.ops.telemetry.capture_content,
        },
    );
    let persist = match &state.store {
        Some(store) if stored || conversation.is_some() => Some(Persist {
            store: store.clone(),
            tenant: prepared.tenant.clone(),
            input_items: std::mem::take(&mut prepared.turn_items),
            expires_at: meta.created_at + state.config.store_ttl.as_secs() as i64,
            // Every write is guarded: a cancel (of any response in progress) is never undone.
            guarded: true,
            max_bytes: state.config.store_max_bytes,
            keep_response: stored,
            conversation,
            started: None,
            late: state.late_finals.clone(),
            chain: stored.then(|| crate::http::responses::stored::recent::ChainSink {
                recent: state.recent_chains.clone(),
                previous: prepared.chain.take(),
            }),
        }),
        _ => None,
    };
    let stored_until = stored.then(|| meta.created_at + state.config.store_ttl.as_secs() as i64);
    let states = StateSink::new(state, &prepared.tenant, stored_until);
    let flight = Flight::start(
        state,
        persist.as_ref().is_some_and(|p| p.keep_response),
        || skeleton(&prepared.req, &meta),
        prepared.tenant.name().to_owned(),
    );
    let detach = flight.detach(state, persist.is_some());
    Setup {
        meta,
        meter,
        persist,
        states,
        flight,
        detach,
        framing: caller.framing,
    }
}

/// The output items of `response` as JSON, for a conversation.
pub(super) fn output_json(
    response: &toolbridge_wire::responses::Response,
) -> Vec<serde_json::Value> {
    response
        .output
        .iter()
        .map(|item| serde_json::to_value(item).unwrap_or_default())
        .collect()
}

/// A whole answer's `200` with its JSON body (the assembled response, a background run's
/// queued response).
pub(super) fn json_ok(body: impl Into<axum::body::Body>) -> Response {
    use axum::response::IntoResponse;
    (
        axum::http::StatusCode::OK,
        [(
            axum::http::header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        body.into(),
    )
        .into_response()
}
