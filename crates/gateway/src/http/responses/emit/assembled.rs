//! An answer through the assembler: the assembler and the rounds of the gateway's own (echoed
//! builtins, the tool loop, repair re-asks) built from the route, then the answer streamed (the
//! pump, `sse`) or whole (`sync`), stored and metered. Not here: the response's identity, meter
//! and storing (set up by the parent).

use std::sync::Arc;

use axum::response::Response;
use toolbridge_core::assemble::{AssembleOptions, Assembler, ResponseMeta, skeleton};
use toolbridge_core::plan::NameMap;
use toolbridge_providers::dialect::Outgoing;
use toolbridge_providers::dialect::Provenance;
use toolbridge_store::ResponseText;
use toolbridge_wire::responses::{CreateResponse, OutputItem, ResponseStatus};

use super::pump::{Ending, Identity, Phase, Pump, Round};
use super::sse::stream_response;
use super::sync::{Resend, sync_response};
use super::transport::wait_for;
use super::{Setup, output_json};
use crate::error::GatewayError;
use crate::http::responses::dispatch::decode;
use crate::http::responses::meter::Meter;
use crate::http::responses::rounds::Rounds;
use crate::http::responses::rounds::echo::{EchoRounds, MAX_ECHO_ROUNDS};
use crate::http::responses::rounds::repair::{RepairRounds, record_repairs};
use crate::http::responses::rounds::tool_loop::{Continuation, ToolRounds};
use crate::http::responses::route::with_note;
use crate::http::responses::{Answer, Dispatched, GatewayStage, Prepared, Routed};
use crate::state::AppState;

/// An answer through the assembler, with the rounds of the gateway's own.
pub(super) async fn assemble(
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
    // Each way boxed, as in the parent's `answer`.
    match answer {
        Answer::Stream(upstream) => {
            Box::pin(stream(state, upstream, assembled, setup, request_id)).await
        }
        Answer::Whole(upstream) => {
            Box::pin(whole(state, upstream, assembled, setup, req, request_id)).await
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
            canonical: with_note(prepared.canonical, routed.note.as_deref()),
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
    upstream: crate::http::responses::dispatch::chunks::UpstreamSse,
    assembled: Assembled<'_>,
    mut setup: Setup,
    request_id: &str,
) -> Result<Response, GatewayError> {
    let provider = assembled.provider;
    let decoder = decode::decoder(
        provider.dialect,
        &assembled.profile,
        Provenance {
            origin: &provider.name,
            sealer: &state.sealer,
        },
    );
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
        round: Round {
            upstream,
            decoder,
            profile: assembled.profile,
            usage_basis: assembled.usage_basis,
            pending: Vec::new(),
            diagnostics: Vec::new(),
        },
        phase: Phase::Reading(assembled.assembler),
        rounds: assembled.rounds,
        limits,
        framing: setup.framing,
        ending: Ending {
            meter: Some(setup.meter),
            persist: setup.persist,
            states: setup.states,
            used: None,
        },
        identity: Identity {
            provider_name: provider.name.clone(),
            upstream_model: assembled.upstream_model,
            request_id: request_id.to_owned(),
            span: None,
            _registration: setup.flight.registration,
        },
    };
    Ok(stream_response(
        pump,
        assembled.prelude,
        &skeleton_text,
        setup.detach,
    ))
}

/// A whole answer; a cancel ends it at once (the upstream request is dropped).
async fn whole(
    state: &AppState,
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
            &profile,
            usage_basis,
            rounds,
            Resend { upstreams: &upstreams, provider, model: &upstream_model, payload, affinity },
            &state.sealer,
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
    Ok(super::json_ok(body))
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
