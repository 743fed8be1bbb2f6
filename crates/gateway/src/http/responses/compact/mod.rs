//! `POST /v1/responses/compact` (Open Responses): the upstream model condenses a conversation;
//! the answer keeps the user's messages and adds a `compaction` item whose `encrypted_content`
//! seals the summary. A later request sends that item back as input, and the prepare stage
//! expands it into a developer message carrying the summary (`prepare/compactions`).
//!
//! A client of the response stages, not a copy: the history and compactions are expanded by
//! the prepare stage's `expand`, the route is the route stage's `lookup`, the body is built by
//! `responses::translate` and the answer read by `decode_whole`. What is its own: the summary
//! request (no tools, the route's primary only, not streamed) and the answer's shape.
//!
//! The route is looked up with the request's Codex signals, a `request_kind` of `compaction`
//! when it names none, so a route for compaction serves it. Codex's inline form (a
//! `compaction_trigger` input item on `/v1/responses`) is `trigger`'s (beside this file), with
//! the same summary.

pub(super) mod trigger;

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use toolbridge_core::events::UpstreamEvent;
use toolbridge_core::request::{Limits, normalize};
use toolbridge_providers::dialect::Provenance;
use toolbridge_providers::dialect::Source;
use toolbridge_wire::responses::{
    ContentPart, CreateResponse, Diagnostic, Input, InputItem, MessageContent, MessageItem, Usage,
};

use crate::error::GatewayError;
use crate::http::responses::prepare::compactions::MARK;
use crate::http::responses::{decode_whole, expand, lookup, sealed_by_gateway, translate};
use crate::platform::{ids, time};
use crate::state::AppState;

pub(super) const INSTRUCTION: &str = "Summarize the conversation so far so that you can continue it later from the summary alone: keep the goals, decisions, facts, names of files and tools, results that matter and open tasks. Answer with the summary only.";

/// The request body.
#[derive(Debug, Deserialize)]
pub(crate) struct CompactRequest {
    model: Option<String>,
    input: Option<Input>,
    previous_response_id: Option<String>,
    instructions: Option<String>,
    prompt_cache_key: Option<String>,
}

/// The handler.
pub(crate) async fn compact(
    State(state): State<AppState>,
    headers: axum::http::HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let signals = super::signals_from_headers(&headers);
    let result = match body {
        Ok(body) => run(&state, &body, &signals).await,
        Err(r) => Err(GatewayError::from_body_rejection(
            &r,
            state.config.body_limit,
        )),
    };
    match result {
        Ok(body) => Json(body).into_response(),
        Err(e) => e.into_response(),
    }
}

async fn run(
    state: &AppState,
    body: &[u8],
    signals: &crate::config::RouteSignals,
) -> Result<Value, GatewayError> {
    let request: CompactRequest = serde_json::from_slice(body).map_err(|e| {
        GatewayError::Request(toolbridge_core::Error::InvalidJson {
            param: None,
            message: format!("the request body is not a compact request: {e}"),
        })
    })?;
    let Some(model) = request.model.filter(|m| !m.is_empty()) else {
        return Err(GatewayError::Request(
            toolbridge_core::Error::MissingParameter {
                param: "model".to_owned(),
            },
        ));
    };
    let mut req = CreateResponse {
        model: Some(model.clone()),
        input: request.input,
        previous_response_id: request.previous_response_id,
        instructions: request.instructions,
        prompt_cache_key: request.prompt_cache_key,
        ..CreateResponse::default()
    };
    // The same key scopes and budget as a response, and the same expansion of its history
    // and compactions (the prepare stage's).
    crate::http::responses::admission::admit(state, &req).await?;
    let tenant = crate::platform::auth::current_tenant();
    let (_, mut diagnostics) = expand(state, &tenant, &mut req, false).await?;
    let kept_users: Vec<Value> = match &req.input {
        Some(Input::Items(items)) => items
            .iter()
            .filter_map(|i| match i {
                InputItem::Message(m) if m.role == "user" => Some(kept_message(m)),
                _ => None,
            })
            .collect(),
        Some(Input::Text(text)) => vec![kept_message(&MessageItem {
            id: None,
            role: "user".to_owned(),
            content: MessageContent::Text(text.clone()),
            status: None,
            extra: Map::new(),
        })],
        None => Vec::new(),
    };
    // The summary request: the conversation, then the instruction as the last user turn.
    let mut items = match req.input.take() {
        Some(Input::Items(items)) => items,
        Some(Input::Text(text)) => vec![user(text)],
        None => Vec::new(),
    };
    items.push(user(INSTRUCTION.to_owned()));
    req.input = Some(Input::Items(items));
    let signals = compaction_signals(signals);
    let summary = summarize(state, &model, &req, &signals, &mut diagnostics).await?;
    let mut output = kept_users;
    output.push(compaction_item(state, &summary.text)?);
    let usage = summary.usage.unwrap_or_else(|| {
        crate::http::responses::emit::usage::estimate(&summary.payload, &summary.text)
    });
    let mut body = json!({
        "id": ids::new("resp"),
        "object": "response.compaction",
        "created_at": time::now(),
        "output": output,
        "usage": usage_json(&usage),
    });
    if !diagnostics.is_empty()
        && let Some(obj) = body.as_object_mut()
    {
        obj.insert("toolbridge_diagnostics".to_owned(), json!(diagnostics));
    }
    Ok(body)
}

/// The signals a compaction is routed with: the request's, its kind `compaction` unless it
/// names one.
pub(super) fn compaction_signals(
    signals: &crate::config::RouteSignals,
) -> crate::config::RouteSignals {
    let mut signals = signals.clone();
    signals
        .request_kind
        .get_or_insert_with(|| "compaction".to_owned());
    signals
}

/// The `compaction` output item sealing `summary`; an empty summary is the upstream's failure.
pub(super) fn compaction_item(state: &AppState, summary: &str) -> Result<Value, GatewayError> {
    if summary.trim().is_empty() {
        return Err(GatewayError::Upstream(
            toolbridge_providers::Error::Decode {
                message: "the upstream returned an empty summary".to_owned(),
            },
        ));
    }
    let sealed = state
        .sealer
        .seal(&format!("{MARK}{summary}"))
        .ok_or_else(|| GatewayError::Store("the summary could not be sealed".to_owned()))?;
    Ok(json!({"id": ids::new("cmp"), "type": "compaction", "encrypted_content": sealed}))
}

/// What the summary request brought back.
pub(super) struct Summary {
    pub(super) text: String,
    pub(super) usage: Option<Usage>,
    /// The body sent, for a usage estimate.
    pub(super) payload: Bytes,
    /// The provider that wrote it.
    pub(super) provider: String,
}

/// Sends the summary request to the route's primary provider (no tools, not streamed) and
/// reads its text and usage.
pub(super) async fn summarize(
    state: &AppState,
    model: &str,
    req: &CreateResponse,
    signals: &crate::config::RouteSignals,
    diagnostics: &mut Vec<Diagnostic>,
) -> Result<Summary, GatewayError> {
    let mut canonical = normalize(req, &Limits::default())?;
    canonical.stream = false;
    // The summary goes without tools: Codex's compaction request declares them all.
    canonical.tools.clear();
    canonical.tool_choice = None;
    let targets = lookup(state, model, signals).ok_or_else(|| GatewayError::ModelNotFound {
        model: model.to_owned(),
        known: String::new(),
    })?;
    let target = targets
        .first()
        .ok_or_else(|| GatewayError::UpstreamUnreachable("no provider".to_owned()))?;
    let profile = target.provider.profile_for(&target.upstream_model);
    let plan = toolbridge_core::plan::ToolPlan::default();
    let dialect = target.provider.dialect;
    let payload = Bytes::from(
        translate(
            dialect,
            &Source {
                req,
                raw: None,
                canonical: &canonical,
                stored: false,
                sealed_by_gateway: &sealed_by_gateway,
                provenance: Some(Provenance {
                    origin: &target.provider.name,
                    sealer: &state.sealer,
                }),
            },
            &plan,
            &profile,
            &target.upstream_model,
            diagnostics,
        )
        .payload(),
    );
    // The session's key, as its turns send (a compaction is one of its requests).
    let affinity = crate::upstream::session_key(req.prompt_cache_key.as_deref(), None, None)
        .map_or_else(
            crate::upstream::Affinity::spread,
            crate::upstream::Affinity::of,
        );
    let upstream = state
        .upstreams
        .send(
            target.provider,
            &target.upstream_model,
            &payload,
            false,
            affinity,
        )
        .await?;
    let body = state
        .upstreams
        .read_whole(
            upstream,
            target.provider,
            &target.upstream_model,
            &payload,
            affinity,
        )
        .await?;
    let events = decode_whole(dialect, &profile, &body, None, diagnostics)?;
    let mut summary = String::new();
    let mut usage = None;
    for event in events {
        match event {
            UpstreamEvent::Usage(u) => usage = Some(u),
            other => summary.push_str(&other.text().unwrap_or_default()),
        }
    }
    Ok(Summary {
        text: summary,
        usage,
        payload,
        provider: target.provider.name.clone(),
    })
}

fn usage_json(usage: &Usage) -> Value {
    serde_json::to_value(usage).unwrap_or_default()
}

/// A kept user message as an output item of the Responses item schema: an id, the
/// content-part array form (a string becomes one `input_text` part) and its status.
fn kept_message(m: &MessageItem) -> Value {
    let content = match &m.content {
        MessageContent::Text(text) => json!([{"type": "input_text", "text": text}]),
        MessageContent::Parts(parts) => serde_json::to_value(parts).unwrap_or_else(|_| json!([])),
    };
    json!({
        "id": m.id.clone().unwrap_or_else(|| ids::new("msg")),
        "type": "message",
        "status": "completed",
        "role": m.role,
        "content": content,
    })
}

pub(super) fn user(text: String) -> InputItem {
    InputItem::Message(MessageItem {
        id: None,
        role: "user".to_owned(),
        content: MessageContent::Parts(vec![ContentPart::InputText {
            text,
            prompt_cache_breakpoint: None,
        }]),
        status: None,
        extra: Map::new(),
    })
}
