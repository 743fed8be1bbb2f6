//! One `response.create` frame: given its lane (`lanes`), read (leniently: Codex sends
//! `stream: true`), expanded from the connection's `store: false` chains, and started as a
//! running response (`running`) in its own observed context (a span, the request id, the
//! capture): answered by the gateway when it is a prewarm (`generate: false`), else run through
//! the response stages with JSON framing. When it ends, what it made is kept for the chain, and
//! a continuation that failed or was cancelled evicts the response it would have extended.
//!
//! Not here: the socket's life (`websocket`), the bounds (`chains`, `lanes`).

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::http::header;
use axum::response::Response;
use futures::FutureExt;
use metrics::counter;
use serde_json::{Value, json};
use toolbridge_core::assemble::{ResponseMeta, skeleton};
use toolbridge_wire::responses::{CreateResponse, InputItem, ResponseStatus, Tool};

use super::caps::ResponsePass;
use super::chains::{Kept, continue_chain, input_items};
use super::lanes::{Arrival, Lane, lane_of};
use super::running::{Ended, Outcome, Started, running};
use super::{Connection, error_event, frame_error, key_name};
use crate::error::GatewayError;
use crate::http::responses::admission::{admit, release};
use crate::http::responses::framing::Framing;
use crate::http::responses::{Caller, parse_request, respond};
use crate::platform::auth::Authenticated;
use crate::platform::ops::metrics::names;
use crate::platform::ops::observe;
use crate::platform::{ids, time};
use crate::state::AppState;

/// What a response's chain keeps when it ends.
pub(super) struct Pending {
    /// The kept response it continues (only when the connection's chains expanded it).
    parent: Option<String>,
    /// Its history so far, for a response not stored (a stored one chains through the store).
    keep: Option<ToKeep>,
    /// Its place under the key's cap of responses in flight, given back when it ends.
    pass: Option<ResponsePass>,
}

struct ToKeep {
    history: Vec<InputItem>,
    tools: Option<Vec<Tool>>,
    instructions: Option<String>,
    /// The frame bytes of the chain so far.
    bytes: usize,
}

impl Connection {
    /// A text frame arrived: started on its lane, queued behind it, or refused. `Err` only when
    /// the socket is gone.
    pub(super) async fn arrive(&mut self, text: Bytes) -> Result<(), axum::Error> {
        let lane = match lane_of(&text) {
            Ok(lane) => lane,
            Err(message) => {
                let error = error_event(
                    400,
                    "invalid_request_error",
                    "invalid_stream_id",
                    message,
                    Some("stream_id"),
                );
                return self.send_json(&error).await;
            }
        };
        match self.lanes.arrive(&lane, text.clone()) {
            Arrival::Start => {
                self.start(lane, text);
                Ok(())
            }
            Arrival::Queued => Ok(()),
            Arrival::Refused(code, message) => {
                let mut error = frame_error(code, message);
                if let Some(id) = lane {
                    error["stream_id"] = json!(id);
                }
                self.send_json(&error).await
            }
        }
    }

    /// A response ended: its chain is kept (or its parent evicted), and its lane's next frame
    /// starts, if one waits.
    pub(super) fn ended(&mut self, ended: Ended) {
        let Ended {
            lane,
            outcome,
            mut pending,
        } = ended;
        // Given back before the lane's next frame starts.
        drop(pending.pass.take());
        match outcome {
            Outcome::Done { id, output, bytes } => {
                if let Some(keep) = pending.keep {
                    let mut history = keep.history;
                    history.extend(
                        output
                            .into_iter()
                            .filter_map(|v| serde_json::from_value::<InputItem>(v).ok()),
                    );
                    let kept = Kept {
                        history: Arc::new(history),
                        tools: keep.tools,
                        instructions: keep.instructions,
                        bytes: keep.bytes + bytes,
                    };
                    self.chains.keep(id, kept);
                }
            }
            Outcome::Failed => {
                if let Some(parent) = pending.parent {
                    self.chains.evict(&parent);
                }
            }
        }
        if let Some(next) = self.lanes.next(&lane) {
            self.start(lane, next);
        }
    }

    /// Starts the response of `text` on `lane`, whose turn it is.
    fn start(&mut self, lane: Lane, text: Bytes) {
        self.frames += 1;
        // The upgrade counted against the per-key request limit for the first frame.
        let limited = self.frames > 1;
        let request_id = ids::new("req");
        let pass = self.state.websocket_caps.start_response(
            &self.state.config.server,
            key_name(self.key.as_ref()),
            crate::platform::auth::tenant_of(self.key.as_ref()).name(),
        );
        let refused = |error, status| {
            let pending = Pending {
                parent: None,
                keep: None,
                pass: None,
            };
            (refused_event(error, status).boxed(), pending, false)
        };
        let (start, mut pending, prewarm) = match (read(&text), &pass) {
            (Err(error), _) => refused(error, 400),
            (Ok(_), Err(message)) => {
                counter!(names::WEBSOCKETS_REFUSED, "what" => "response").increment(1);
                let mut error = error_event(
                    429,
                    "rate_limit_error",
                    "rate_limit_exceeded",
                    message,
                    None,
                );
                if let Some(id) = &lane {
                    error["stream_id"] = json!(id);
                }
                refused(error, 429)
            }
            (Ok(req), Ok(_)) => self.prepare(req, &text, limited, &request_id),
        };
        pending.pass = pass.ok();
        let span = tracing::info_span!(
            "websocket_response",
            request_id = request_id.as_str(),
            prewarm,
            stream_id = lane.as_deref(),
        );
        let observer = observe::Observer {
            config: self.state.config.clone(),
            captures: self.state.captures.clone(),
            journal: self.state.journal.clone(),
        };
        let tenant = crate::platform::auth::tenant_of(self.key.as_ref());
        let ctx = observe::message_ctx(&observer, ROUTE, request_id, &text, span, tenant);
        let response = running(lane, start, pending);
        self.running
            .push(Box::pin(observe::Scoped::new(ctx, response)));
    }

    /// A read frame's start and what its chain keeps.
    fn prepare(
        &self,
        mut req: CreateResponse,
        text: &Bytes,
        limited: bool,
        request_id: &str,
    ) -> (futures::future::BoxFuture<'static, Started>, Pending, bool) {
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
        let pending = Pending {
            pass: None,
            parent: parent.filter(|_| extends.is_some()),
            keep: (!stored).then(|| ToKeep {
                history: input_items(&req),
                tools: req.tools.clone(),
                instructions: req.instructions.clone(),
                bytes: extends.as_ref().map_or(0, |k| k.bytes) + text.len(),
            }),
        };
        let state = self.state.clone();
        let prewarm = generate == Some(Value::Bool(false));
        let who = Who {
            key: self.key.clone(),
            session: self.session.clone(),
            limited,
        };
        let start = if prewarm {
            answer_prewarm(state, who, req).boxed()
        } else {
            run_stages(state, who, req, request_id.to_owned()).boxed()
        };
        (start, pending, prewarm)
    }
}

/// The route a WebSocket response is captured and labelled under.
const ROUTE: &str = "/v1/responses";

/// Whose response it is.
struct Who {
    key: Option<Authenticated>,
    session: Option<String>,
    /// Whether this frame counts against the per-key request limit.
    limited: bool,
}

/// The refusal of a frame past the per-key request limit.
async fn over_limit(state: &AppState, who: &Who) -> Option<Started> {
    if !who.limited {
        return None;
    }
    let key = who
        .key
        .as_ref()
        .map_or(crate::platform::limits::ANONYMOUS, |a| a.key_id.as_str());
    match state.limits.check_request(key).await {
        Ok(()) => None,
        Err(e) => Some(refused(&e).await),
    }
}

/// A prewarm: `response.created` and `response.completed` with no output, no upstream call.
async fn answer_prewarm(state: AppState, who: Who, req: CreateResponse) -> Started {
    if let Some(refusal) = over_limit(&state, &who).await {
        return refusal;
    }
    let key = match admit(&state, &req).await {
        Ok(key) => key,
        Err(e) => return refused(&e).await,
    };
    release(&state, key.as_ref()).await;
    let meta = ResponseMeta {
        id: ids::new("resp"),
        created_at: time::now(),
        stored: false,
    };
    let mut response = skeleton(&req, &meta);
    // `to_value`, not `json!` (which unwraps it): a tool schema is kept as its raw text, which
    // serde_json may not read back as a `Value` (a number past `f64`'s range, nesting past its
    // limit). A prewarm is not normalised, so nothing refused such a schema before.
    let created = match serde_json::to_value(&response) {
        Ok(created) => created,
        Err(e) => return refused(&unreadable_tools(&e)).await,
    };
    response.status = ResponseStatus::Completed;
    response.completed_at = Some(time::now());
    let completed = serde_json::to_value(&response).unwrap_or_default();
    let created = json!({"type": "response.created", "sequence_number": 0, "response": created});
    let completed =
        json!({"type": "response.completed", "sequence_number": 1, "response": completed});
    if let Some(ctx) = observe::current() {
        ctx.write_capture(Some(&completed["response"]), 200).await;
    }
    tracing::info!(
        response_id = meta.id.as_str(),
        "prewarm answered without an upstream call"
    );
    Started::Events(vec![created, completed])
}

/// The refusal of a prewarm whose tools cannot be echoed: a schema serde_json cannot read.
fn unreadable_tools(e: &serde_json::Error) -> GatewayError {
    GatewayError::Request(toolbridge_core::Error::InvalidJson {
        param: Some("tools".to_owned()),
        message: format!("invalid request body at `tools`: a tool's schema cannot be read: {e}"),
    })
}

/// A response through the stages.
async fn run_stages(state: AppState, who: Who, req: CreateResponse, request_id: String) -> Started {
    if let Some(refusal) = over_limit(&state, &who).await {
        return refusal;
    }
    let key = match admit(&state, &req).await {
        Ok(key) => key,
        Err(e) => return refused(&e).await,
    };
    let caller = Caller {
        key: key.clone(),
        session: who.session,
        framing: Framing::Json,
        // A frame says its kind in its own `client_metadata` (read by `prepare`).
        signals: crate::config::RouteSignals::default(),
    };
    match respond(&state, req, &request_id, None, None, caller).await {
        Ok(response) => answered(response).await,
        Err(e) => {
            release(&state, key.as_ref()).await;
            refused(&e).await
        }
    }
}

/// The pipeline's answer as a running response's events.
async fn answered(response: Response) -> Started {
    let streamed = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
    let status = response.status();
    let body = response.into_body().into_data_stream();
    if streamed {
        return Started::Stream(body);
    }
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
    if let Some(ctx) = observe::current() {
        ctx.write_capture(None, status.as_u16()).await;
    }
    Started::Events(vec![event])
}

/// `error` as the one event of a refused response (logged: over HTTP the status line says it;
/// here nothing else would, and `previous_response_not_found` is how a client recovers).
async fn refused(error: &GatewayError) -> Started {
    tracing::info!(code = error.code(), "response refused: {error}");
    let body = serde_json::to_value(error.body()).unwrap_or_default();
    let event = json!({
        "type": "error",
        "status": error.status().as_u16(),
        "error": body.get("error").cloned().unwrap_or_default(),
    });
    refused_event(event, error.status().as_u16()).await
}

/// `event` (an `error`) as the one event of a refused response.
async fn refused_event(event: Value, status: u16) -> Started {
    if let Some(ctx) = observe::current() {
        ctx.write_capture(None, status).await;
    }
    Started::Events(vec![event])
}

/// Reads a frame: a `response.create` event whose other fields are a create request.
fn read(text: &[u8]) -> Result<CreateResponse, Value> {
    let mut req = parse_request(text).map_err(|e| {
        let error = GatewayError::Request(e);
        let body = serde_json::to_value(error.body()).unwrap_or_default();
        json!({"type": "error", "status": 400, "error": body.get("error")})
    })?;
    req.extra.remove("stream_id");
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
