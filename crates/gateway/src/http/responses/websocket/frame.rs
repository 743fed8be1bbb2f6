//! One `response.create` frame: read (leniently: Codex sends `stream: true`), expanded from the
//! connection's `store: false` chains, answered by the gateway when it is a prewarm
//! (`generate: false`), else run through the response stages with JSON framing, its events
//! relayed as text frames while the socket is watched (a frame that arrives meanwhile waits its
//! turn; a client that leaves drops the response's body, which ends it as on HTTP).
//!
//! What the chain keeps comes from the events themselves: a response's terminal event carries
//! its output, which with the expanded input is the history a continuation starts from. A
//! continuation that fails or is cancelled evicts the response it would have extended.
//!
//! Not here: the socket's life (`websocket`), the bounds (`chains`).

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::ws::Message;
use axum::http::header;
use axum::response::Response;
use futures::{SinkExt, StreamExt};
use serde::Deserialize;
use serde_json::{Value, json};
use toolbridge_core::assemble::{ResponseMeta, skeleton};
use toolbridge_wire::responses::{CreateResponse, Input, InputItem, ResponseStatus};
use tracing::Instrument;

use super::chains::Kept;
use super::{Connection, MAX_QUEUED, frame_error};
use crate::error::GatewayError;
use crate::http::responses::admission::{admit, release};
use crate::http::responses::transport::Framing;
use crate::http::responses::{Caller, parse_request, respond};
use crate::platform::{ids, time};

/// How a response's events ended, as the connection saw them.
enum Outcome {
    /// A terminal event with a response the chain can continue from.
    Done {
        id: String,
        output: Vec<Value>,
        /// The terminal event's size: the output's share of the chain's bytes.
        bytes: usize,
    },
    /// Failed, cancelled or refused: nothing to continue from.
    Failed,
}

/// The parts of an event the connection reads.
#[derive(Deserialize)]
struct Head {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    response: Option<HeadResponse>,
}

#[derive(Deserialize)]
struct HeadResponse {
    id: String,
    #[serde(default)]
    output: Vec<Value>,
}

impl Connection {
    /// Answers one frame. `Err` only when the socket is gone.
    pub(super) async fn frame(&mut self, text: Bytes) -> Result<(), axum::Error> {
        self.frames += 1;
        if self.frames > 1 {
            let key = self
                .key
                .as_ref()
                .map_or(crate::platform::limits::ANONYMOUS, |a| a.key_id.as_str());
            if let Err(e) = self.state.limits.check_request(key).await {
                return self.send_error(&e).await;
            }
        }
        let mut req = match read(&text) {
            Ok(req) => req,
            Err(error) => return self.send_json(&error).await,
        };
        let generate = req.extra.remove("generate");
        let parent = req.previous_response_id.clone();
        let extends = parent
            .as_deref()
            .and_then(|id| self.chains.get(id))
            .cloned();
        if let Some(kept) = &extends {
            continue_chain(&mut req, kept);
        }
        let stored = req.store.unwrap_or(true) && self.state.store.is_some();
        // Only an unstored response's history is kept; a stored one chains through the store.
        let history: Option<Vec<InputItem>> = (!stored).then(|| input_items(&req));
        let base = extends.as_ref().map_or(0, |k| k.bytes) + text.len();
        let tools = req.tools.clone();
        let instructions = req.instructions.clone();
        let request_id = crate::platform::ops::observe::request_id();
        let is_prewarm = generate == Some(Value::Bool(false));
        let span = tracing::info_span!(
            "websocket_response",
            request_id = request_id.as_str(),
            prewarm = is_prewarm,
        );
        let outcome = if is_prewarm {
            self.prewarm(req).instrument(span).await?
        } else {
            self.respond(req, &request_id).instrument(span).await?
        };
        match outcome {
            Outcome::Done { id, output, bytes } => {
                if let Some(mut history) = history {
                    history.extend(
                        output
                            .into_iter()
                            .filter_map(|v| serde_json::from_value::<InputItem>(v).ok()),
                    );
                    let kept = Kept {
                        history: Arc::new(history),
                        tools,
                        instructions,
                        bytes: base + bytes,
                    };
                    self.chains.keep(id, kept);
                }
            }
            Outcome::Failed => {
                if let Some(parent) = parent.filter(|_| extends.is_some()) {
                    self.chains.evict(&parent);
                }
            }
        }
        Ok(())
    }

    /// A prewarm: `response.created` and `response.completed` with no output, no upstream call.
    async fn prewarm(&mut self, req: CreateResponse) -> Result<Outcome, axum::Error> {
        let key = match admit(&self.state, &req).await {
            Ok(key) => key,
            Err(e) => {
                self.send_error(&e).await?;
                return Ok(Outcome::Failed);
            }
        };
        release(&self.state, key.as_ref()).await;
        let meta = ResponseMeta {
            id: ids::new("resp"),
            created_at: time::now(),
            stored: false,
        };
        let mut response = skeleton(&req, &meta);
        let created =
            json!({"type": "response.created", "sequence_number": 0, "response": &response});
        self.send_json(&created).await?;
        response.status = ResponseStatus::Completed;
        response.completed_at = Some(time::now());
        let completed =
            json!({"type": "response.completed", "sequence_number": 1, "response": &response});
        self.send_json(&completed).await?;
        Ok(Outcome::Done {
            id: meta.id,
            output: Vec::new(),
            bytes: 0,
        })
    }

    /// A response through the stages, its events relayed.
    async fn respond(
        &mut self,
        req: CreateResponse,
        request_id: &str,
    ) -> Result<Outcome, axum::Error> {
        let key = match admit(&self.state, &req).await {
            Ok(key) => key,
            Err(e) => {
                self.send_error(&e).await?;
                return Ok(Outcome::Failed);
            }
        };
        let caller = Caller {
            key: key.clone(),
            session: self.session.clone(),
            framing: Framing::Json,
            // A frame says its kind in its own `client_metadata` (read by `prepare`).
            signals: crate::config::RouteSignals::default(),
        };
        let state = self.state.clone();
        match respond(&state, req, request_id, None, None, caller).await {
            Ok(response) => self.relay(response).await,
            Err(e) => {
                release(&self.state, key.as_ref()).await;
                self.send_error(&e).await?;
                Ok(Outcome::Failed)
            }
        }
    }

    /// Relays a response's events; a frame that arrives meanwhile waits its turn.
    async fn relay(&mut self, response: Response) -> Result<Outcome, axum::Error> {
        let streamed = response
            .headers()
            .get(header::CONTENT_TYPE)
            .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
        let status = response.status();
        let mut body = response.into_body().into_data_stream();
        if !streamed {
            // A whole answer (an error the pipeline made after admission): one event.
            let bytes = axum::body::to_bytes(Body::from_stream(body), usize::MAX)
                .await
                .unwrap_or_default();
            let body: Value = serde_json::from_slice(&bytes).unwrap_or_default();
            let event = if status.is_success() {
                json!({"type": "response.completed", "response": body})
            } else {
                json!({"type": "error", "status": status.as_u16(), "error": body.get("error")})
            };
            self.send_json(&event).await?;
            return Ok(outcome(&event, bytes.len()));
        }
        let mut outcome = Outcome::Failed;
        loop {
            tokio::select! {
                biased;
                frame = body.next() => match frame {
                    Some(Ok(bytes)) if bytes.is_empty() => {
                        self.tx.send(Message::Ping(Bytes::new())).await?;
                    }
                    Some(Ok(bytes)) => {
                        if let Some(ended) = terminal(&bytes) {
                            outcome = ended;
                        }
                        self.send_text(bytes).await?;
                    }
                    Some(Err(_)) | None => return Ok(outcome),
                },
                message = self.rx.next() => match message {
                    None | Some(Err(_)) | Some(Ok(Message::Close(_))) => {
                        return Err(axum::Error::new("the client closed the socket"));
                    }
                    Some(Ok(Message::Text(text))) if self.queued.len() < MAX_QUEUED => {
                        self.queued.push_back(Bytes::from(text));
                    }
                    Some(Ok(Message::Text(_))) => {
                        let error = frame_error(
                            "too_many_queued_frames",
                            "too many frames sent while a response is in flight",
                        );
                        self.send_json(&error).await?;
                    }
                    Some(Ok(_)) => {}
                },
            }
        }
    }
}

/// Reads a frame: a `response.create` event whose other fields are a create request.
fn read(text: &[u8]) -> Result<CreateResponse, Value> {
    let mut req = parse_request(text).map_err(|e| {
        let error = GatewayError::Request(e);
        let body = serde_json::to_value(error.body()).unwrap_or_default();
        json!({"type": "error", "status": 400, "error": body.get("error")})
    })?;
    match req.extra.remove("type") {
        Some(Value::String(kind)) if kind == "response.create" => {}
        Some(other) => {
            let message = format!("unknown event type {other}; send `response.create`");
            return Err(frame_error("unknown_event_type", &message));
        }
        None => {
            return Err(frame_error(
                "missing_event_type",
                "a frame needs `type`: `response.create`",
            ));
        }
    }
    if req.background == Some(true) {
        return Err(frame_error(
            "unsupported_parameter",
            "`background` is not supported over WebSocket; use HTTP",
        ));
    }
    // Lenient where Codex departs from the schema: every response on a socket streams.
    req.stream = Some(true);
    Ok(req)
}

/// Prepends the kept history to the frame's new items, unless a compaction item starts a new
/// chain; tools and instructions the frame leaves out are the chain's.
fn continue_chain(req: &mut CreateResponse, kept: &Kept) {
    req.previous_response_id = None;
    let new = take_items(req);
    let compacted = new.iter().any(
        |item| matches!(item, InputItem::Other(map) if map.get("type").and_then(Value::as_str) == Some("compaction")),
    );
    let mut items = if compacted {
        Vec::with_capacity(new.len())
    } else {
        let mut items = Vec::with_capacity(kept.history.len() + new.len());
        items.extend(kept.history.iter().cloned());
        items
    };
    items.extend(new);
    req.input = Some(Input::Items(items));
    if req.tools.is_none() {
        req.tools.clone_from(&kept.tools);
    }
    if req.instructions.is_none() {
        req.instructions.clone_from(&kept.instructions);
    }
}

/// The request's input as items (a text input is one user message).
fn take_items(req: &mut CreateResponse) -> Vec<InputItem> {
    match req.input.take() {
        None => Vec::new(),
        Some(Input::Items(items)) => items,
        Some(Input::Text(text)) => vec![user_message(text)],
    }
}

/// A copy of the request's input as items.
fn input_items(req: &CreateResponse) -> Vec<InputItem> {
    match &req.input {
        None => Vec::new(),
        Some(Input::Items(items)) => items.clone(),
        Some(Input::Text(text)) => vec![user_message(text.clone())],
    }
}

fn user_message(text: String) -> InputItem {
    InputItem::Message(toolbridge_wire::responses::MessageItem {
        id: None,
        role: "user".to_owned(),
        content: toolbridge_wire::responses::MessageContent::Text(text),
        status: None,
        extra: serde_json::Map::new(),
    })
}

/// The outcome a terminal event stands for; `None` for any other event. Only events whose
/// opening names a terminal type are parsed whole.
fn terminal(frame: &[u8]) -> Option<Outcome> {
    let head = &frame[..frame.len().min(64)];
    let names_terminal = [
        &b"response.completed"[..],
        b"response.incomplete",
        b"response.failed",
        b"response.cancelled",
        b"\"error\"",
    ]
    .iter()
    .any(|name| head.windows(name.len()).any(|w| w == *name));
    if !names_terminal {
        return None;
    }
    let event: Value = serde_json::from_slice(frame).ok()?;
    let kind = event.get("type").and_then(Value::as_str)?;
    matches!(
        kind,
        "response.completed"
            | "response.incomplete"
            | "response.failed"
            | "response.cancelled"
            | "error"
    )
    .then(|| outcome(&event, frame.len()))
}

/// The outcome of a terminal event.
fn outcome(event: &Value, bytes: usize) -> Outcome {
    let head: Option<Head> = serde_json::from_value(event.clone()).ok();
    match head {
        Some(Head {
            kind,
            response: Some(response),
        }) if kind == "response.completed" || kind == "response.incomplete" => Outcome::Done {
            id: response.id,
            output: response.output,
            bytes,
        },
        _ => Outcome::Failed,
    }
}
