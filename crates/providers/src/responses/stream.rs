//! A native Responses answer (streamed or whole) decoded into neutral events, as every dialect's.
//!
//! The upstream already speaks the client's vocabulary, so most of it is carried, not decoded:
//! its items (messages, reasoning, hosted calls, item types the gateway does not know) and their
//! events become [`UpstreamEvent::Relayed`], which the assembler shows as they came (unknown
//! event types and fields included) with its own `output_index` and `sequence_number`. What the
//! gateway acts on is decoded: a `function_call` becomes [`UpstreamEvent::ToolCall`] fragments
//! and, at its `output_item.done`, [`UpstreamEvent::CallComplete`] (unless it names its
//! namespace: a namespace taken natively, already the client's form), so the assembler restores a degraded tool's call to the item the client declared (a `custom`
//! tool's `custom_tool_call`, a namespace member, a shell or patch call) as it does for every
//! dialect; the terminal event becomes [`UpstreamEvent::Usage`], the fields of the response
//! object the gateway has no field for ([`UpstreamEvent::ResponseFields`]) and the
//! [`UpstreamEvent::Finish`] its status says. An `error` event is the upstream's error.
//!
//! The response-level events (`response.created`, `.in_progress`, `.queued`) are the gateway's
//! to send: the assembler sends its own with the gateway's identity. An item the terminal
//! response lists that the stream never completed (a sparse server) is shown then.
//!
//! Plaintext reasoning an endpoint wants back is sealed into the item's `encrypted_content` as
//! it completes ([`Sealing`]), so a stateless client carries it to the next turn.
//!
//! States: `Open` (items and their events) → `Ended` (the terminal event or an `error` came:
//! anything later is ignored).

use std::collections::HashSet;

use serde_json::{Map, Value, json};
use toolbridge_core::diagnostics::{CHUNK_SKIPPED, diag};
use toolbridge_core::events::{FinishReason, ToolCallDelta, UpstreamEvent};
use toolbridge_wire::responses::{Diagnostic, Response, Usage};

use super::reasoning::Sealing;
use crate::dialect::Flow;
use crate::error::Error;

/// At most this many skipped events are reported.
const MAX_SKIP_REPORTS: usize = 3;

/// The decoder of one Responses answer.
#[derive(Debug, Default)]
pub struct ResponsesDecoder {
    /// Function calls by the upstream's `output_index`, with the bytes of arguments given.
    calls: Vec<Call>,
    /// Ids of the items completed, so that the terminal response's items are shown once.
    seen: HashSet<String>,
    /// Items completed without an id.
    seen_anonymous: usize,
    /// Plaintext reasoning sealed for the client to carry back (`None`: passed as it is).
    sealing: Option<Sealing>,
    skipped: usize,
    ended: bool,
}

#[derive(Debug)]
struct Call {
    index: u64,
    /// Bytes of the arguments given so far.
    given: usize,
}

impl ResponsesDecoder {
    /// A decoder that seals plaintext reasoning with `sealing` (`None`: reasoning passes as it
    /// is).
    pub fn new(sealing: Option<Sealing>) -> Self {
        Self {
            sealing,
            ..Self::default()
        }
    }

    /// A fresh decoder for the next round's stream, sealing as this one does.
    pub fn restarted(&self) -> Self {
        Self::new(self.sealing.clone())
    }

    /// Decodes one stream event (`name` its `event:` line, `data` its payload).
    pub fn on_event(
        &mut self,
        name: Option<&str>,
        data: &str,
        out: &mut Vec<UpstreamEvent>,
        diagnostics: &mut Vec<Diagnostic>,
    ) -> Result<Flow, Error> {
        if self.ended {
            return Ok(Flow::Done);
        }
        let Ok(Value::Object(mut event)) = serde_json::from_str::<Value>(data) else {
            self.skip(name, data, diagnostics);
            return Ok(Flow::Continue);
        };
        let kind = match event.get("type").and_then(Value::as_str) {
            Some(kind) => kind.to_owned(),
            None => {
                let Some(name) = name.filter(|n| !n.is_empty() && *n != "message") else {
                    self.skip(name, data, diagnostics);
                    return Ok(Flow::Continue);
                };
                event.insert("type".to_owned(), json!(name));
                name.to_owned()
            }
        };
        match kind.as_str() {
            "response.created" | "response.in_progress" | "response.queued" => {}
            "response.completed" | "response.incomplete" | "response.failed" => {
                let status = kind.trim_start_matches("response.");
                let response = match event.remove("response") {
                    Some(Value::Object(response)) => response,
                    _ => Map::new(),
                };
                self.terminal(status, response, out, diagnostics);
                return Ok(Flow::Done);
            }
            "error" => {
                self.ended = true;
                let error = match event.get("error") {
                    Some(error) if error.is_object() => error.clone(),
                    _ => Value::Object(event),
                };
                let mapped = crate::chat::errors::from_stream_error(&error);
                return Err(Error::Upstream(Box::new(mapped)));
            }
            _ => self.item_event(&kind, event, out, diagnostics),
        }
        Ok(Flow::Continue)
    }

    /// An event about one item: a function call's decoded, any other's relayed.
    fn item_event(
        &mut self,
        kind: &str,
        mut event: Map<String, Value>,
        out: &mut Vec<UpstreamEvent>,
        diagnostics: &mut Vec<Diagnostic>,
    ) {
        let index = event.get("output_index").and_then(Value::as_u64);
        let about_item = matches!(
            kind,
            "response.output_item.added" | "response.output_item.done"
        );
        if about_item && !event.get("item").is_some_and(Value::is_object) {
            self.skip(
                Some(kind),
                "an output item event without its item",
                diagnostics,
            );
            return;
        }
        let is_call = event.get("item").is_some_and(decoded_call);
        match kind {
            "response.output_item.added" | "response.output_item.done" if is_call => {
                let item = event.remove("item").unwrap_or_default();
                let index = index.unwrap_or(0);
                self.call(index, &item, out);
                if kind == "response.output_item.done" {
                    self.mark_seen(&item);
                    if let Ok(index) = u32::try_from(index) {
                        out.push(UpstreamEvent::CallComplete(index));
                    }
                }
            }
            "response.function_call_arguments.delta" => {
                let delta = event.get("delta").and_then(Value::as_str).unwrap_or("");
                if let Some(call) = self.call_at(index) {
                    call.given += delta.len();
                    out.push(arguments(call.index, delta.to_owned()));
                }
            }
            "response.function_call_arguments.done" => {
                if let Some(item) = event.get("arguments").map(|a| json!({"arguments": a})) {
                    self.call_rest(index, &item, out);
                }
            }
            _ if index.is_some() && self.call_at(index).is_some() => {
                // Any other event of a decoded call (a future one): the assembler makes its own.
            }
            _ => {
                if kind == "response.output_item.done"
                    && let Some(item) = event.get_mut("item")
                {
                    if let Some(sealing) = &mut self.sealing
                        && let Some(unsealed) = sealing.seal_item(item)
                    {
                        diagnostics.push(unsealed);
                    }
                    let item = item.clone();
                    self.mark_seen(&item);
                }
                out.push(UpstreamEvent::Relayed(event));
            }
        }
    }

    /// A function call item (added or done): its first fragment, or the arguments not yet given.
    fn call(&mut self, index: u64, item: &Value, out: &mut Vec<UpstreamEvent>) {
        if self.call_at(Some(index)).is_some() {
            self.call_rest(Some(index), item, out);
            return;
        }
        let given = item["arguments"].as_str().unwrap_or("");
        self.calls.push(Call {
            index,
            given: given.len(),
        });
        out.push(UpstreamEvent::ToolCall(ToolCallDelta {
            index: u32::try_from(index).ok(),
            id: item["call_id"].as_str().map(str::to_owned),
            name: item["name"].as_str().map(str::to_owned),
            arguments: given.to_owned(),
            item_id: item["id"].as_str().map(str::to_owned),
        }));
    }

    /// What `item`'s whole `arguments` has beyond what was given as deltas.
    fn call_rest(&mut self, index: Option<u64>, item: &Value, out: &mut Vec<UpstreamEvent>) {
        let Some(whole) = item["arguments"].as_str() else {
            return;
        };
        let Some(call) = self.call_at(index) else {
            return;
        };
        if let Some(rest) = whole.get(call.given..).filter(|r| !r.is_empty()) {
            call.given = whole.len();
            out.push(arguments(call.index, rest.to_owned()));
        }
    }

    fn call_at(&mut self, index: Option<u64>) -> Option<&mut Call> {
        let index = index?;
        self.calls.iter_mut().find(|c| c.index == index)
    }

    fn mark_seen(&mut self, item: &Value) {
        match item["id"].as_str() {
            Some(id) => {
                self.seen.insert(id.to_owned());
            }
            None => self.seen_anonymous += 1,
        }
    }

    /// The terminal response (`status` as its event says): the items it lists that the stream
    /// never completed, its usage, its own fields and why it ended.
    fn terminal(
        &mut self,
        status: &str,
        mut response: Map<String, Value>,
        out: &mut Vec<UpstreamEvent>,
        diagnostics: &mut Vec<Diagnostic>,
    ) {
        self.ended = true;
        let status = response
            .get("status")
            .and_then(Value::as_str)
            .unwrap_or(status)
            .to_owned();
        let items = match response.remove("output") {
            Some(Value::Array(items)) => items,
            _ => Vec::new(),
        };
        let mut anonymous = 0;
        for (index, mut item) in items.into_iter().enumerate() {
            if !item.is_object() {
                self.skip(Some("output"), &item.to_string(), diagnostics);
                continue;
            }
            let shown = match item["id"].as_str() {
                Some(id) => self.seen.contains(id),
                None => {
                    anonymous += 1;
                    anonymous <= self.seen_anonymous
                }
            };
            if shown {
                continue;
            }
            let index = json!(index);
            if decoded_call(&item) {
                let index = index.as_u64().unwrap_or(0);
                self.call(index, &item, out);
                if let Ok(index) = u32::try_from(index) {
                    out.push(UpstreamEvent::CallComplete(index));
                }
                continue;
            }
            if let Some(sealing) = &mut self.sealing
                && let Some(unsealed) = sealing.seal_item(&mut item)
            {
                diagnostics.push(unsealed);
            }
            for kind in ["response.output_item.added", "response.output_item.done"] {
                let mut event = Map::new();
                event.insert("type".to_owned(), json!(kind));
                event.insert("output_index".to_owned(), index.clone());
                event.insert("item".to_owned(), item.clone());
                out.push(UpstreamEvent::Relayed(event));
            }
        }
        if let Some(usage) = response
            .get("usage")
            .filter(|u| u.is_object())
            .and_then(|u| serde_json::from_value::<Usage>(u.clone()).ok())
        {
            out.push(UpstreamEvent::Usage(usage));
        }
        let own: Map<String, Value> = response
            .iter()
            .filter(|(key, _)| !Response::FIELDS.contains(&key.as_str()))
            .map(|(key, value)| (key.clone(), value.clone()))
            .collect();
        if !own.is_empty() {
            out.push(UpstreamEvent::ResponseFields(own));
        }
        if let Some(reason) = self.finish_reason(&status, &response) {
            out.push(UpstreamEvent::Finish(reason));
        }
    }

    /// Why the answer ended, from its status; `None` for a status that is not final (the
    /// answer was cut off).
    fn finish_reason(&self, status: &str, response: &Map<String, Value>) -> Option<FinishReason> {
        Some(match status {
            "completed" if self.calls.is_empty() => FinishReason::Stop,
            "completed" => FinishReason::ToolCalls,
            "incomplete" => match response
                .get("incomplete_details")
                .and_then(|d| d["reason"].as_str())
            {
                Some("content_filter") => FinishReason::ContentFilter,
                Some(reason) if reason != "max_output_tokens" => {
                    FinishReason::Incomplete(reason.to_owned())
                }
                _ => FinishReason::Length,
            },
            "failed" | "cancelled" => {
                let error = response.get("error").cloned().unwrap_or_else(
                    || json!({"message": format!("the upstream ended the response {status}")}),
                );
                let mapped = crate::chat::errors::from_stream_error(&error);
                FinishReason::Error {
                    code: mapped.code,
                    message: mapped.message,
                }
            }
            _ => return None,
        })
    }

    fn skip(&mut self, name: Option<&str>, data: &str, diagnostics: &mut Vec<Diagnostic>) {
        self.skipped += 1;
        if self.skipped <= MAX_SKIP_REPORTS {
            let mut shown: String = data.chars().take(120).collect();
            if shown.len() < data.len() {
                shown.push('…');
            }
            diagnostics.push(diag(
                CHUNK_SKIPPED,
                None,
                format!(
                    "an upstream event ({}) was not a Responses event and was skipped: {shown}",
                    name.unwrap_or("unnamed")
                ),
            ));
        }
    }
}

/// Whether `item` is a call the gateway decodes: a `function_call`, unless it already names its
/// namespace (a namespace the upstream took natively: the call is in the client's form, carried
/// as it came).
fn decoded_call(item: &Value) -> bool {
    item["type"] == "function_call" && item.get("namespace").is_none()
}

/// Arguments of the call at `index`.
fn arguments(index: u64, arguments: String) -> UpstreamEvent {
    UpstreamEvent::ToolCall(ToolCallDelta {
        index: u32::try_from(index).ok(),
        arguments,
        ..ToolCallDelta::default()
    })
}

/// A whole (non-streamed) answer as neutral events: every item it lists, its usage, its own
/// fields and why it ended. An answer whose status is not final has no finish reason: it was
/// cut off. A `failed` answer is the upstream's error.
pub fn decode_whole(
    answer: Value,
    sealing: Option<Sealing>,
    diagnostics: &mut Vec<Diagnostic>,
) -> Result<Vec<UpstreamEvent>, Error> {
    let Value::Object(answer) = answer else {
        return Err(not_responses());
    };
    if !answer.get("output").is_some_and(Value::is_array) {
        return Err(not_responses());
    }
    if answer.get("status").and_then(Value::as_str) == Some("failed") {
        let error = answer.get("error").cloned().unwrap_or_default();
        return Err(Error::Upstream(Box::new(
            crate::chat::errors::from_stream_error(&error),
        )));
    }
    let status = answer
        .get("status")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let mut out = Vec::new();
    ResponsesDecoder::new(sealing).terminal(&status, answer, &mut out, diagnostics);
    Ok(out)
}

fn not_responses() -> Error {
    Error::Decode {
        message: "not a Responses response: no `output` array".to_owned(),
    }
}
