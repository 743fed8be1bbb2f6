//! A native Responses stream relayed to the client: the state machine of one response.
//!
//! Upstream events pass through as they are (unknown event types and fields included), with
//! three changes that make the stream the gateway's own:
//! - the response object carries the gateway's identity (`id`, `created_at`, `model`,
//!   `previous_response_id`, `store`, …): the client chains, fetches and stores by the gateway's id;
//!   a field the upstream left out (a sparse Responses server) takes the gateway's default, so
//!   the object has every field the spec requires;
//! - `sequence_number` is renumbered from 0, so it stays contiguous whatever is skipped;
//! - the stream has exactly one start (`response.created`, `response.in_progress`, sent by the
//!   gateway when the upstream accepts, like every dialect) and exactly one terminal event (an
//!   upstream `error` event or a broken stream become `response.failed`; a stream cut off
//!   before its terminal event, `response.incomplete` as `upstream_truncated`).
//!
//! States: `Open` (forwarding) → `Done` (terminal event sent; anything later is ignored).

use serde_json::{Map, Value, json};
use toolbridge_core::assemble::codes::UPSTREAM_TRUNCATED;
use toolbridge_core::diagnostics::{CHUNK_SKIPPED, UPSTREAM_UNTERMINATED, diag};
use toolbridge_wire::responses::Diagnostic;

use super::reasoning::Sealing;
use super::restore::Restorer;
use crate::error::Error;

/// Fields of the response object that are the gateway's, not the upstream's.
const IDENTITY: &[&str] = &[
    "id",
    "created_at",
    "model",
    "previous_response_id",
    "store",
    "background",
    "conversation",
];

/// The code of an answer with nothing in it, as every dialect reports it.
const EMPTY: &str = "empty_upstream_response";
const EMPTY_MESSAGE: &str = "the upstream answered without producing any output";

/// A response that says it completed and has no output item: nothing was produced, which every
/// dialect reports as a failure (`empty_upstream_response`), streamed or whole.
fn is_empty(response: &Value) -> bool {
    response["status"] == "completed"
        && response["output"]
            .as_array()
            .is_none_or(std::vec::Vec::is_empty)
}

/// At most this many skipped events are reported.
const MAX_SKIP_REPORTS: usize = 3;

/// What the pump does after an event (`Done`: the terminal event went out): the one flow type
/// of every dialect's stream.
pub use crate::dialect::Flow;

/// The relay of one streamed response.
#[derive(Debug)]
pub struct Relay {
    identity: Map<String, Value>,
    /// The gateway's response object, whose fields fill any the upstream left out.
    defaults: Map<String, Value>,
    /// The latest response object: the gateway's skeleton, then each one the upstream sends.
    latest: Value,
    diagnostics: Vec<Diagnostic>,
    /// Items the upstream completed (`response.output_item.done`), by output index: a response
    /// that fails afterwards still lists them.
    done_items: std::collections::BTreeMap<u64, Value>,
    sequence: u64,
    /// Output events forwarded (anything but the start and the end).
    forwarded: usize,
    skipped: usize,
    done: bool,
    final_response: Option<Value>,
    /// The plan's degraded calls, restored as they pass (`None`: nothing to restore).
    restorer: Option<Restorer>,
    /// Plaintext reasoning sealed for the client to carry back (`None`: passed as it is).
    sealing: Option<Sealing>,
}

impl Relay {
    /// A relay for the response `skeleton` (the gateway's response object, `in_progress`), whose
    /// terminal response will carry `diagnostics`.
    pub fn new(skeleton: Value, diagnostics: Vec<Diagnostic>) -> Self {
        let identity = IDENTITY
            .iter()
            .filter_map(|k| skeleton.get(*k).map(|v| ((*k).to_owned(), v.clone())))
            .collect();
        let defaults = skeleton.as_object().cloned().unwrap_or_default();
        Self {
            identity,
            defaults,
            latest: skeleton,
            diagnostics,
            done_items: std::collections::BTreeMap::new(),
            sequence: 0,
            forwarded: 0,
            skipped: 0,
            done: false,
            final_response: None,
            restorer: None,
            sealing: None,
        }
    }

    /// This relay, restoring the plan's degraded calls as they pass.
    pub fn restoring(mut self, restorer: Option<Restorer>) -> Self {
        self.restorer = restorer;
        self
    }

    /// This relay, sealing the upstream's plaintext reasoning into `encrypted_content`.
    pub fn sealing(mut self, sealing: Option<Sealing>) -> Self {
        self.sealing = sealing;
        self
    }

    /// `response.created` and `response.in_progress`, when the upstream accepted the request.
    pub fn start(&mut self, out: &mut Vec<Value>) {
        let response = self.latest.clone();
        self.push(
            json!({"type": "response.created", "response": response}),
            out,
        );
        let response = self.latest.clone();
        self.push(
            json!({"type": "response.in_progress", "response": response}),
            out,
        );
    }

    /// A diagnostic for the terminal response.
    pub fn add_diagnostic(&mut self, diagnostic: Diagnostic) {
        self.diagnostics.push(diagnostic);
    }

    /// The response object as it ended, once the terminal event went out.
    pub fn final_response(&self) -> Option<&Value> {
        self.final_response.as_ref()
    }

    /// Whether the terminal event went out.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Relays one upstream event (`name` its `event:` line, `data` its payload).
    pub fn on_event(
        &mut self,
        name: Option<&str>,
        data: &str,
        out: &mut Vec<Value>,
    ) -> Result<Flow, Error> {
        if self.done {
            return Ok(Flow::Done);
        }
        let Ok(Value::Object(mut event)) = serde_json::from_str::<Value>(data) else {
            self.skip(name, data);
            return Ok(Flow::Continue);
        };
        let kind = match event.get("type").and_then(Value::as_str) {
            Some(kind) => kind.to_owned(),
            None => {
                let Some(name) = name.filter(|n| !n.is_empty() && *n != "message") else {
                    self.skip(name, data);
                    return Ok(Flow::Continue);
                };
                event.insert("type".to_owned(), json!(name));
                name.to_owned()
            }
        };
        match kind.as_str() {
            // The gateway sent its own start; the upstream's refreshes the latest response.
            "response.created" | "response.in_progress" | "response.queued" => {
                if let Some(response) = event.get("response").filter(|r| r.is_object()) {
                    self.latest = self.owned(response.clone());
                }
                Ok(Flow::Continue)
            }
            "response.completed" | "response.incomplete" | "response.failed" => {
                let mut response = event
                    .get("response")
                    .filter(|r| r.is_object())
                    .cloned()
                    .unwrap_or_else(|| self.latest.clone());
                if kind == "response.completed" && self.forwarded == 0 && is_empty(&response) {
                    self.latest = response;
                    self.fail(EMPTY, EMPTY_MESSAGE.to_owned(), out);
                    return Ok(Flow::Done);
                }
                if let Some(map) = response.as_object_mut()
                    && !map.contains_key("status")
                {
                    let status = kind.trim_start_matches("response.");
                    map.insert("status".to_owned(), json!(status));
                }
                let response = self.terminal(response);
                event.insert("response".to_owned(), response);
                self.push(Value::Object(event), out);
                Ok(Flow::Done)
            }
            "error" => {
                let error = if event.contains_key("error") {
                    event["error"].clone()
                } else {
                    Value::Object(event.clone())
                };
                let mapped = crate::chat::errors::from_stream_error(&error);
                self.fail(&mapped.code, mapped.message, out);
                Ok(Flow::Done)
            }
            _ => {
                let events = match &mut self.restorer {
                    Some(restorer) => restorer.on_event(&kind, event),
                    None => vec![event],
                };
                for mut event in events {
                    if event.get("type").and_then(Value::as_str)
                        == Some("response.output_item.done")
                        && let (Some(index), Some(item)) = (
                            event.get("output_index").and_then(Value::as_u64),
                            event.get_mut("item"),
                        )
                    {
                        if let Some(sealing) = &mut self.sealing
                            && let Some(unsealed) = sealing.seal_item(item)
                        {
                            self.diagnostics.push(unsealed);
                        }
                        self.done_items.insert(index, item.clone());
                    }
                    self.forwarded += 1;
                    self.push(Value::Object(event), out);
                }
                Ok(Flow::Continue)
            }
        }
    }

    /// The upstream stream ended (its connection closed) without a terminal event: nothing
    /// forwarded is `empty_upstream_response`; else the answer was cut off and ends
    /// `response.incomplete` (reason `upstream_truncated`, the items the upstream completed),
    /// the rule of every dialect. `tolerated` (the profile's `tolerate_unterminated`) completes it
    /// instead. Either way an `upstream_unterminated` diagnostic says so.
    pub fn finish(&mut self, out: &mut Vec<Value>, tolerated: bool) {
        if self.done {
            return;
        }
        if self.forwarded == 0 {
            self.fail(EMPTY, EMPTY_MESSAGE.to_owned(), out);
            return;
        }
        self.diagnostics.push(diag(
            UPSTREAM_UNTERMINATED,
            None,
            "the upstream stream ended before its terminal event; the output may be cut short",
        ));
        let mut response = self.latest.clone();
        let kind = if tolerated { "completed" } else { "incomplete" };
        if let Some(map) = response.as_object_mut() {
            map.insert("status".to_owned(), json!(kind));
            let done: Vec<Value> = self.done_items.values().cloned().collect();
            map.insert("output".to_owned(), Value::Array(done));
            if !tolerated {
                map.insert(
                    "incomplete_details".to_owned(),
                    json!({"reason": UPSTREAM_TRUNCATED}),
                );
            }
        }
        let response = self.terminal(response);
        self.push(
            json!({"type": format!("response.{kind}"), "response": response}),
            out,
        );
    }

    /// Ends the response `cancelled` (the protocol has no cancelled event: a client still
    /// reading hears `response.failed`), with the items the upstream completed.
    pub fn cancel(&mut self, out: &mut Vec<Value>) {
        if self.done {
            return;
        }
        let mut response = self.latest.clone();
        if let Some(map) = response.as_object_mut() {
            map.insert("status".to_owned(), json!("cancelled"));
            let done: Vec<Value> = self.done_items.values().cloned().collect();
            map.insert("output".to_owned(), Value::Array(done));
        }
        let response = self.terminal(response);
        self.push(
            json!({"type": "response.failed", "response": response}),
            out,
        );
    }

    /// Ends the response with `response.failed`: `error.code` is the documented code for `code`
    /// (`codes::public_code`), with `code` itself in `toolbridge_code` when they differ.
    pub fn fail(&mut self, code: &str, message: String, out: &mut Vec<Value>) {
        if self.done {
            return;
        }
        let mut response = self.latest.clone();
        if let Some(map) = response.as_object_mut() {
            map.insert("status".to_owned(), json!("failed"));
            let done: Vec<Value> = self.done_items.values().cloned().collect();
            map.insert("output".to_owned(), Value::Array(done));
            let error = toolbridge_core::assemble::codes::response_error(code, message);
            map.insert(
                "error".to_owned(),
                serde_json::to_value(error).unwrap_or_default(),
            );
        }
        let response = self.terminal(response);
        self.push(
            json!({"type": "response.failed", "response": response}),
            out,
        );
    }

    fn terminal(&mut self, response: Value) -> Value {
        let mut response = self.owned(response);
        if let Some(restorer) = &self.restorer {
            restorer.restore_output(&mut response);
        }
        if let Some(sealing) = &mut self.sealing {
            let unsealed = sealing.seal_output(&mut response);
            self.diagnostics.extend(unsealed);
        }
        if !self.diagnostics.is_empty()
            && let Some(map) = response.as_object_mut()
        {
            map.insert(
                "toolbridge_diagnostics".to_owned(),
                serde_json::to_value(&self.diagnostics).unwrap_or_default(),
            );
        }
        self.done = true;
        self.latest = response.clone();
        self.final_response = Some(response.clone());
        response
    }

    /// `response` with the gateway's identity, and its defaults where the upstream left a field
    /// out.
    fn owned(&self, mut response: Value) -> Value {
        if let Some(map) = response.as_object_mut() {
            for (key, value) in &self.identity {
                map.insert(key.clone(), value.clone());
            }
            for (key, value) in &self.defaults {
                if !map.contains_key(key) {
                    map.insert(key.clone(), value.clone());
                }
            }
        }
        response
    }

    fn push(&mut self, mut event: Value, out: &mut Vec<Value>) {
        if let Some(map) = event.as_object_mut() {
            map.insert("sequence_number".to_owned(), json!(self.sequence));
        }
        self.sequence += 1;
        out.push(event);
    }

    fn skip(&mut self, name: Option<&str>, data: &str) {
        self.skipped += 1;
        if self.skipped <= MAX_SKIP_REPORTS {
            let mut shown: String = data.chars().take(120).collect();
            if shown.len() < data.len() {
                shown.push('…');
            }
            self.diagnostics.push(diag(
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

/// The error an `error` event reports (`None` for any other event), mapped as a Chat stream's
/// error is: checked on a stream's first event, while it can still be an HTTP error.
pub fn error_event(data: &str) -> Option<crate::UpstreamError> {
    let event: Value = serde_json::from_str(data).ok()?;
    if event["type"] != "error" {
        return None;
    }
    let error = if event.get("error").is_some_and(Value::is_object) {
        &event["error"]
    } else {
        &event
    };
    Some(crate::chat::errors::from_stream_error(error))
}

/// A whole (non-streamed) answer made the gateway's: its identity, and `diagnostics`. An answer
/// whose status is not final (`in_progress`, or none) is a cut answer, as a stream without its
/// terminal event is: `incomplete` as `upstream_truncated`, unless `tolerated` (the profile's
/// `tolerate_unterminated`), which completes it; either way with an `upstream_unterminated`
/// diagnostic.
pub fn whole(
    answer: Value,
    skeleton: &Value,
    diagnostics: &[Diagnostic],
    tolerated: bool,
) -> Result<Value, Error> {
    whole_restored(answer, skeleton, diagnostics, tolerated, None, None)
}

/// [`whole`], with the plan's degraded calls restored (`restorer`) and plaintext reasoning
/// sealed (`sealing`).
pub fn whole_restored(
    mut answer: Value,
    skeleton: &Value,
    diagnostics: &[Diagnostic],
    tolerated: bool,
    restorer: Option<Restorer>,
    sealing: Option<Sealing>,
) -> Result<Value, Error> {
    if !answer.is_object() || !answer["output"].is_array() {
        return Err(Error::Decode {
            message: "not a Responses response: no `output` array".to_owned(),
        });
    }
    let mut relay = Relay::new(skeleton.clone(), diagnostics.to_vec())
        .restoring(restorer)
        .sealing(sealing);
    let final_status = ["completed", "incomplete", "failed", "cancelled"];
    if !final_status.iter().any(|s| answer["status"] == *s)
        && let Some(map) = answer.as_object_mut()
    {
        relay.diagnostics.push(diag(
            UPSTREAM_UNTERMINATED,
            None,
            "the upstream answer was not final; the output may be cut short",
        ));
        if tolerated {
            map.insert("status".to_owned(), json!("completed"));
        } else {
            map.insert("status".to_owned(), json!("incomplete"));
            map.insert(
                "incomplete_details".to_owned(),
                json!({"reason": UPSTREAM_TRUNCATED}),
            );
        }
    }
    if is_empty(&answer) {
        relay.latest = answer;
        relay.fail(EMPTY, EMPTY_MESSAGE.to_owned(), &mut Vec::new());
        return Ok(relay.latest);
    }
    Ok(relay.terminal(answer))
}
