//! The emit stage: the answer, what the client gets from the upstream that took the request. A
//! native Responses upstream's answer is relayed (`passthrough`); any other goes through the
//! assembler, streamed (`sse`) or whole (`sync`), with the rounds of the gateway's own (echoed
//! builtins, the tool loop, repair re-asks: `rounds`). The response's identity, its meter, its
//! storing and its place in flight are set up here; beside this file are the transport loop the
//! streamed answers wait in (`transport`), what is charged (`meter`, `abandoned`, `usage`) and
//! the tracking of a stream whose client left (`detach`). Not here: choosing the upstream
//! (`dispatch`), the store's side (`stored`).

mod abandoned;
mod detach;
pub(super) mod meter;
mod passthrough;
pub(super) mod sse;
mod sync;
pub(super) mod transport;
pub(super) mod usage;

use std::sync::Arc;

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use toolbridge_core::assemble::{AssembleOptions, Assembler, ResponseMeta, skeleton};
use toolbridge_core::plan::NameMap;
use toolbridge_providers::dialect::Outgoing;
use toolbridge_store::ResponseText;
use toolbridge_wire::responses::{CreateResponse, OutputItem, ResponseStatus};

use self::detach::{Detach, Flight};
use self::meter::Meter;
use self::passthrough::Passthrough;
use self::sse::{Pump, stream_response};
use self::sync::{Resend, sync_response};
use self::transport::{Framing, wait_for};
use super::dispatch::decode;
use super::rounds::Rounds;
use super::rounds::echo::{EchoRounds, MAX_ECHO_ROUNDS};
use super::rounds::repair::{RepairRounds, record_repairs};
use super::rounds::tool_loop::{Continuation, ToolRounds};
use super::stored::persist::Persist;
use super::stored::provider_state::StateSink;
use super::{
    Answer, BackgroundRun, Caller, DIAGNOSTICS_HEADER, Dispatched, GatewayStage, Prepared, Routed,
    diagnostics_header,
};
use crate::error::GatewayError;
use crate::platform::{ids, time};
use crate::state::AppState;
use toolbridge_providers::profile::ReasoningReplay;
use toolbridge_providers::responses::reasoning::Sealing;

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
    // Each way boxed: the future of this one is then as large as the way taken, not the
    // largest of them (and the request's future, boxed and copied whole, smaller).
    let mut response = if dispatched.routed.provider.dialect.passes_through() {
        Box::pin(relay(state, &prepared, dispatched, setup, request_id)).await?
    } else {
        assemble(state, prepared, dispatched, setup, request_id).await?
    };
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

/// A native Responses upstream's answer, relayed.
async fn relay(
    state: &AppState,
    prepared: &Prepared<'_>,
    dispatched: Dispatched<'_>,
    setup: Setup,
    request_id: &str,
) -> Result<Response, GatewayError> {
    let Dispatched { routed, answer } = dispatched;
    let limits = setup.flight.limits(state, routed.provider);
    let relay = Passthrough {
        skeleton: skeleton(&prepared.req, &setup.meta),
        diagnostics: routed.diagnostics,
        persist: setup.persist,
        meter: setup.meter,
        request_id: request_id.to_owned(),
        tolerate_unterminated: routed.profile.tolerate_unterminated,
        registration: setup.flight.registration,
        framing: setup.framing,
        restorer: toolbridge_providers::responses::restore::Restorer::new(&routed.plan),
        // An endpoint that wants its plaintext reasoning back gets it from a stateless client
        // too: sealed, with its provenance, into the items' `encrypted_content`.
        sealing: (routed.profile.reasoning_replay != ReasoningReplay::Never)
            .then(|| Sealing::new(state.sealer.clone(), &routed.provider.name)),
    };
    Ok(match answer {
        Answer::Stream(upstream) => relay.stream(upstream, limits, setup.detach).await,
        Answer::Whole(upstream) => {
            relay
                .whole(upstream, setup.flight.cancel.subscribe())
                .await?
        }
    })
}

/// An answer through the assembler, with the rounds of the gateway's own.
async fn assemble(
    state: &AppState,
    prepared: Box<Prepared<'_>>,
    dispatched: Dispatched<'_>,
    setup: Setup,
    request_id: &str,
) -> Result<Response, GatewayError> {
    let Dispatched { routed, answer } = dispatched;
    // Built outside the future: what is left of the request and the route is dropped before
    // the answer is awaited, instead of kept in the future's state.
    let (assembled, req) = assembled(state, *prepared, *routed, &setup);
    // Each way boxed, as in [`answer`].
    match answer {
        Answer::Stream(upstream) => {
            Box::pin(stream(state, upstream, assembled, setup, request_id)).await
        }
        Answer::Whole(upstream) => {
            Box::pin(whole(upstream, assembled, setup, req, request_id)).await
        }
    }
}

/// The response's skeleton. It echoes the request's tools; when they are the tools the checks
/// were keyed by (no tools from the conversation, none added since), the text serialised for
/// that key (`tools_text`) is written instead of serialising them again.
fn skeleton_with_tools(
    prepared: &Prepared<'_>,
    tools_text: Option<toolbridge_wire::raw::RawJson>,
    meta: &ResponseMeta,
) -> toolbridge_wire::responses::Response {
    let mut response = skeleton(&prepared.req, meta);
    if let Some(text) = tools_text
        && prepared.canonical.context_tools.is_empty()
        && *response.tools == prepared.canonical.tools
    {
        let tools = std::mem::take(&mut *response.tools);
        response.tools = toolbridge_wire::responses::EchoedTools::with_json(tools, text);
    }
    response
}

/// The assembler and its rounds for the request's answer, and the request (shared with them).
fn assembled<'a>(
    state: &AppState,
    prepared: Prepared<'a>,
    routed: Routed<'a>,
    setup: &Setup,
) -> (Assembled<'a>, Arc<CreateResponse>) {
    let provider = routed.provider;
    // Provider builtin calls answered by echoing them back (Kimi's `$web_search`) are a
    // Chat round trip; for other dialects such calls stay ordinary function calls.
    let (echo_tools, echo) =
        if !routed.plan.echo_tools.is_empty() && routed.outgoing.echoes_builtins() {
            let rounds = echo_rounds(
                state,
                provider,
                routed.affinity,
                &routed.upstream_model,
                routed.outgoing,
            );
            (routed.plan.echo_tools.clone(), Some(rounds))
        } else {
            (Vec::new(), None)
        };
    let tools = match (&state.config.gateway_tools, routed.stage) {
        (Some(tools), Some(stage)) if routed.gateway_tools_offered => Some(tool_rounds(
            tools,
            stage,
            &routed.plan.names,
            &prepared,
            &setup.meter,
        )),
        _ => None,
    };
    let repair = routed
        .repair_checks
        .is_some()
        .then(|| RepairRounds::new(provider.repair));
    // Rounds of the gateway's own (the tool loop, a re-ask) continue the same conversation.
    let reasks =
        routed.repairs && provider.repair.invalid_calls == crate::config::InvalidCalls::Reask;
    let skeleton_response = skeleton_with_tools(&prepared, routed.tools_text, &setup.meta);
    let contract = prepared.canonical.output.clone();
    let names = Arc::new(routed.plan.names.clone());
    let req = Arc::new(prepared.req);
    // Moved, not copied: a continuation is made for most requests (a re-ask is the default
    // for invalid calls) and used by few.
    let continuation = (tools.is_some() || reasks).then(|| {
        Box::new(Continuation {
            upstreams: state.upstreams.clone(),
            provider: provider.clone(),
            affinity: routed.affinity,
            profile: routed.profile.clone(),
            upstream_model: routed.upstream_model.clone(),
            req: Arc::clone(&req),
            canonical: super::route::with_note(prepared.canonical, routed.note.as_deref()),
            plan: routed.plan,
            offer: routed.offer,
        })
    });
    // Boxed, like the rounds: it moves through the transport's future.
    let mut assembler = Box::new(Assembler::new(
        skeleton_response,
        AssembleOptions {
            contract,
            diagnostics: routed.diagnostics,
            names,
            reasoning: prepared.display,
            sealer: Some(state.sealer.clone()),
            echo_tools,
            repair: routed.repair_checks,
        },
    ));
    // Both transports write the final response's one serialisation into the terminal event.
    assembler.splice_terminal();
    // Listings of the request's MCP servers come first in the output.
    let prelude: Vec<OutputItem> = if listed_shown(state) {
        prepared.listings
    } else {
        Vec::new()
    };
    let rounds = Rounds {
        echo,
        tools,
        continuation,
        repair,
    };
    let assembled = Assembled {
        assembler,
        prelude,
        rounds,
        profile: routed.profile,
        usage_basis: routed.usage_basis,
        provider,
        upstream_model: routed.upstream_model,
        payload: routed.payload,
        upstreams: state.upstreams.clone(),
        affinity: routed.affinity,
    };
    (assembled, req)
}

/// The rounds that answer the provider's builtin calls by echoing them back, sending
/// `outgoing` again to `provider`'s `upstream_model`.
fn echo_rounds(
    state: &AppState,
    provider: &crate::config::Provider,
    affinity: crate::upstream::Affinity,
    upstream_model: &str,
    outgoing: Outgoing,
) -> Box<EchoRounds> {
    Box::new(EchoRounds {
        upstreams: state.upstreams.clone(),
        provider: provider.clone(),
        affinity,
        upstream_model: upstream_model.to_owned(),
        outgoing,
        left: MAX_ECHO_ROUNDS,
    })
}

/// The tool loop's rounds: the gateway's `tools` as the route's `stage` selected them, with the
/// request's limits, MCP servers, deferred tools and images.
fn tool_rounds(
    tools: &Arc<crate::tools::GatewayTools>,
    stage: GatewayStage,
    names: &NameMap,
    prepared: &Prepared<'_>,
    meter: &Meter,
) -> Box<ToolRounds> {
    Box::new(ToolRounds {
        tools: tools.clone(),
        transport: stage.source.transport(stage.selection, names),
        source: stage.source,
        steps_left: tools.limits.max_steps,
        calls_left: prepared.req.max_tool_calls,
        deadline: tokio::time::Instant::now() + tools.limits.time_budget,
        meter: meter.clone(),
        step: 0,
        listed: prepared.listed.clone(),
        deferred: Arc::new(crate::tools::Deferred::from_tools(
            &prepared.canonical.tools,
        )),
        searches_left: crate::tools::MAX_SEARCHES,
        image_options: crate::tools::images::ImageOptions::declared(&prepared.canonical.tools)
            .unwrap_or_default(),
        earlier: crate::tools::images::EarlierImages::from_input(prepared.req.input.as_ref()),
    })
}

/// The assembler and what its rounds need, for either transport.
struct Assembled<'a> {
    assembler: Box<Assembler>,
    prelude: Vec<OutputItem>,
    rounds: Rounds,
    profile: toolbridge_providers::profile::Profile,
    usage_basis: Option<axum::body::Bytes>,
    provider: &'a crate::config::Provider,
    upstream_model: String,
    /// The request as sent, to send again when a whole answer breaks off mid-body.
    payload: axum::body::Bytes,
    upstreams: Arc<crate::upstream::Upstreams>,
    affinity: crate::upstream::Affinity,
}

/// A streamed answer: the pump, its first snapshot stored first.
async fn stream(
    state: &AppState,
    upstream: super::dispatch::chunks::UpstreamSse,
    assembled: Assembled<'_>,
    mut setup: Setup,
    request_id: &str,
) -> Result<Response, GatewayError> {
    let provider = assembled.provider;
    let decoder = decode::decoder(provider.dialect, &assembled.profile).ok_or_else(|| {
        GatewayError::UpstreamUnreachable(format!(
            "the {} dialect has no stream decoder",
            provider.dialect.as_str()
        ))
    })?;
    // The response as it starts, serialised once: the start events carry this text, and a
    // stored response's `in_progress` record keeps it (its outline noted on the way).
    let keep = setup.persist.as_ref().is_some_and(|p| p.keep_response);
    let skeleton = ResponseText::serialize(assembled.assembler.current(), keep);
    let skeleton_text = Arc::clone(skeleton.text());
    if let Some(persist) = &mut setup.persist {
        persist.save_started_text(skeleton, request_id);
    }
    let limits = setup.flight.limits(state, provider);
    let pump = Pump {
        upstream,
        decoder,
        profile: assembled.profile,
        assembler: Some(*assembled.assembler),
        limits,
        framing: setup.framing,
        usage_basis: assembled.usage_basis,
        rounds: assembled.rounds,
        provider_name: provider.name.clone(),
        upstream_model: assembled.upstream_model,
        pending_tools: None,
        running: None,
        prelude: assembled.prelude,
        meter: Some(setup.meter),
        persist: setup.persist,
        states: setup.states,
        final_response: None,
        terminal: None,
        used: None,
        pending: Vec::new(),
        diagnostics: Vec::new(),
        request_id: request_id.to_owned(),
        span: None,
        _registration: setup.flight.registration,
    };
    Ok(stream_response(pump, &skeleton_text, setup.detach))
}

/// A whole answer; a cancel ends it at once (the upstream request is dropped).
async fn whole(
    upstream: reqwest::Response,
    assembled: Assembled<'_>,
    setup: Setup,
    req: Arc<CreateResponse>,
    request_id: &str,
) -> Result<Response, GatewayError> {
    let Assembled {
        mut assembler,
        prelude,
        rounds,
        profile,
        usage_basis,
        provider,
        upstream_model,
        payload,
        upstreams,
        affinity,
    } = assembled;
    for item in prelude {
        assembler.gateway_item(item, &mut Vec::new());
    }
    let mut cancel = setup.flight.cancel.subscribe();
    let mut response = tokio::select! {
        biased;
        () = wait_for(&mut cancel) => {
            // Built only when needed: most requests are not cancelled.
            let mut cancelled = skeleton(&req, &setup.meta);
            cancelled.status = ResponseStatus::Cancelled;
            cancelled
        }
        response = sync_response(
            upstream,
            assembler,
            provider.dialect,
            &profile,
            usage_basis,
            rounds,
            Resend { upstreams: &upstreams, provider, model: &upstream_model, payload, affinity },
        ) => response?,
    };
    record_repairs(
        &provider.name,
        &upstream_model,
        &response.toolbridge_diagnostics,
    );
    if let Some(states) = &setup.states {
        states.save(&response, request_id).await;
    }
    // The one serialisation: the store keeps this text (its record noted while it is
    // written), the client is sent it, the capture reads it.
    // Noted only for a response the store keeps (a conversation alone takes the items as JSON).
    let keeps = setup.persist.as_ref().is_some_and(|p| p.keep_response);
    let serialized = ResponseText::serialize(&response, keeps);
    let mut text = Arc::clone(serialized.text());
    if let Some(persist) = setup.persist
        && let Err(unsaved) = persist
            .save_text(|| output_json(&response), serialized, request_id)
            .await
    {
        unsaved.mark(&mut response);
        text = serde_json::to_string(&response).unwrap_or_default().into();
    }
    setup.meter.finish_response(&response, &text, None).await;
    let body = bytes::Bytes::from_owner(JsonText(text));
    Ok((
        StatusCode::OK,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        body,
    )
        .into_response())
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

/// A response's JSON text as an HTTP body, shared with the store without a copy.
struct JsonText(std::sync::Arc<str>);

impl AsRef<[u8]> for JsonText {
    fn as_ref(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

/// Whether gateway-run tools are shown as hosted items.
fn listed_shown(state: &AppState) -> bool {
    state.config.gateway_tools.as_ref().is_some_and(|t| t.show)
}
