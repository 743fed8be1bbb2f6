//! Codex's remote compaction on `/v1/responses` (`remote_compaction_v2`): a request whose input
//! ends with a `compaction_trigger` item asks for the conversation condensed, and is answered by
//! a response whose one output item is an opaque `compaction` item. The gateway answers it as
//! `/v1/responses/compact` does: the route's model writes a summary (`compact::summarize`, the
//! route looked up with `request_kind = compaction` unless the request names another kind), and
//! the item seals it (`compact::compaction_item`); sent back in a later request's input, it is
//! expanded into the summary by the prepare stage, whatever the provider.
//!
//! Streamed (`response.created`, `response.in_progress`, `response.output_item.added`/`done`,
//! `response.completed`, in the request's framing) or whole. The response is not stored: the
//! compaction item carries everything a later request needs.
//!
//! Not here: the summary request itself (`compact`).

use axum::Json;
use axum::body::{Body, Bytes};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use toolbridge_core::assemble::{ResponseMeta, skeleton};
use toolbridge_wire::responses::{CreateResponse, Input, InputItem, ResponseStatus};

use super::{INSTRUCTION, compaction_item, compaction_signals, summarize, user};
use crate::config::RouteSignals;
use crate::error::GatewayError;
use crate::http::responses::{Caller, expand};
use crate::platform::{ids, time};
use crate::state::AppState;

/// The input item that asks for a compaction.
const TRIGGER: &str = "compaction_trigger";

/// Whether `req` asks for a compaction: its last input item is a `compaction_trigger`.
pub(in crate::http::responses) fn is_trigger(req: &CreateResponse) -> bool {
    match &req.input {
        Some(Input::Items(items)) => items.last().is_some_and(is_trigger_item),
        _ => false,
    }
}

fn is_trigger_item(item: &InputItem) -> bool {
    matches!(item, InputItem::Other(map)
        if map.get("type").and_then(Value::as_str) == Some(TRIGGER))
}

/// Answers a compaction request with one sealed `compaction` item.
pub(in crate::http::responses) async fn answer(
    state: &AppState,
    mut req: CreateResponse,
    caller: &Caller,
) -> Result<Response, GatewayError> {
    if let Some(Input::Items(items)) = &mut req.input {
        items.retain(|item| !is_trigger_item(item));
    }
    let tenant = crate::platform::auth::tenant_of(caller.key.as_ref());
    let (_, mut diagnostics) = expand(state, &tenant, &mut req, false).await?;
    let Some(model) = req.model.clone().filter(|m| !m.is_empty()) else {
        return Err(GatewayError::Request(
            toolbridge_core::Error::MissingParameter {
                param: "model".to_owned(),
            },
        ));
    };
    let signals = compaction_signals(&RouteSignals::of_request(&req.extra, &caller.signals));
    let mut summary_req = req.clone();
    let mut items = match summary_req.input.take() {
        Some(Input::Items(items)) => items,
        Some(Input::Text(text)) => vec![user(text)],
        None => Vec::new(),
    };
    items.push(user(INSTRUCTION.to_owned()));
    summary_req.input = Some(Input::Items(items));
    let summary = summarize(state, &model, &summary_req, &signals, &mut diagnostics).await?;
    let item = compaction_item(state, &summary.text)?;
    let usage = summary.usage.unwrap_or_else(|| {
        crate::http::responses::emit::usage::estimate(&summary.payload, &summary.text)
    });
    crate::http::responses::admission::charge(
        state,
        caller.key.as_ref(),
        &summary.provider,
        usage.total_tokens,
    )
    .await;

    let meta = ResponseMeta {
        id: ids::new("resp"),
        created_at: time::now(),
        stored: false,
    };
    let mut response = skeleton(&req, &meta);
    let started = serde_json::to_value(&response).unwrap_or_default();
    response.status = ResponseStatus::Completed;
    response.completed_at = Some(time::now());
    response.usage = Some(usage);
    let mut done = serde_json::to_value(&response).unwrap_or_default();
    if let Some(obj) = done.as_object_mut() {
        obj.insert("output".to_owned(), json!([item]));
        if !diagnostics.is_empty() {
            obj.insert("toolbridge_diagnostics".to_owned(), json!(diagnostics));
        }
    }
    if req.stream != Some(true) {
        return Ok(Json(done).into_response());
    }
    let events = [
        json!({"type": "response.created", "response": started}),
        json!({"type": "response.in_progress", "response": started}),
        json!({"type": "response.output_item.added", "output_index": 0, "item": item}),
        json!({"type": "response.output_item.done", "output_index": 0, "item": item}),
        json!({"type": "response.completed", "response": done}),
    ];
    let frames: Vec<Result<Bytes, std::convert::Infallible>> = events
        .into_iter()
        .enumerate()
        .map(|(n, mut event)| {
            event["sequence_number"] = json!(n);
            let name = event["type"].as_str().unwrap_or_default().to_owned();
            Ok(caller.framing.event(&name, &event))
        })
        .collect();
    Ok(crate::http::responses::emit::sse::sse_response(
        Body::from_stream(futures::stream::iter(frames)),
    ))
}
