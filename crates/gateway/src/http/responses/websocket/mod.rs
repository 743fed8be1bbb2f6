//! The WebSocket mode of `/v1/responses` (and `/responses`): a second ingress on the response
//! pipeline, not a copy of it. `GET` upgraded, behind the same `authenticate` middleware as the
//! HTTP route (key, scopes, the per-key request limit, the tenant); each `response.create` text
//! frame runs one response through the same stages (`respond`) with [`Framing::Json`], and its
//! events go out as text frames, a keep-alive as a ping.
//!
//! - Responses run one after another on a socket; a frame sent while one is in flight waits
//!   its turn (a few at most: past [`MAX_QUEUED`] it is answered with an error event).
//! - A bad frame is answered with an `error` event in the spec's envelope
//!   (`{"type":"error","status":…,"error":{"type","code","message","param"}}`) and the socket
//!   stays usable.
//! - `store: false` chains are expanded from the connection's own state (`chains`); a prewarm
//!   (`generate: false`) is answered by the gateway and starts a chain (`frame`).
//! - The socket ends after [`CONNECTION_LIMIT`] (`websocket_connection_limit_reached`) and at
//!   shutdown (the response in flight ends with its terminal event first, then a close frame).
//!
//! Not here: what a response does (the stages), HTTP framing (`sse`).

mod chains;
mod frame;

use std::collections::VecDeque;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::http::{HeaderMap, HeaderValue, Uri, header};
use axum::response::{IntoResponse, Response};
use futures::stream::{SplitSink, SplitStream};
use futures::{SinkExt, StreamExt};
use metrics::{counter, gauge};
use serde_json::{Value, json};

use super::transport::wait_for;
use crate::error::GatewayError;
use crate::platform::auth::Authenticated;
use crate::platform::ops::metrics::names;
use crate::state::AppState;

/// How long one socket may stay open (the Open Responses limit).
pub(super) const CONNECTION_LIMIT: Duration = Duration::from_secs(60 * 60);

/// Frames held while a response is in flight; past this, a frame is refused.
pub(super) const MAX_QUEUED: usize = 4;

/// `GET /responses` with `Upgrade: websocket`. A plain `GET` is still the route's 405 (it
/// creates with `POST`); a broken upgrade is the extractor's rejection, in OpenAI's JSON.
pub(crate) async fn upgrade(
    State(state): State<AppState>,
    headers: HeaderMap,
    uri: Uri,
    ws: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Response {
    let ws = match ws {
        Ok(ws) => ws,
        Err(_) if !headers.contains_key(header::UPGRADE) => {
            let mut refused = GatewayError::MethodNotAllowed {
                method: "GET".to_owned(),
                path: uri.path().to_owned(),
                allowed: Some("POST".to_owned()),
            }
            .into_response();
            refused
                .headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static("POST"));
            return refused;
        }
        Err(rejection) => return rejection.into_response(),
    };
    let session = crate::platform::sessions::session_id_from_headers(&headers);
    let key = crate::platform::auth::current();
    let limit = state.config.body_limit;
    ws.max_message_size(limit)
        .max_frame_size(limit)
        .on_upgrade(move |socket| {
            let scope = key.clone();
            crate::platform::auth::scoped(scope, serve(state, key, session, socket))
        })
}

/// One socket, from its upgrade to its close.
async fn serve(
    state: AppState,
    key: Option<Authenticated>,
    session: Option<String>,
    socket: WebSocket,
) {
    gauge!(names::WEBSOCKETS).increment(1.0);
    let (tx, rx) = socket.split();
    let mut conn = Connection {
        chains: chains::Chains::new(state.config.body_limit * chains::BYTES_PER_BODY_LIMIT),
        state,
        key,
        session,
        tx,
        rx,
        queued: VecDeque::new(),
        frames: 0,
    };
    let end = conn.run().await;
    conn.close(end).await;
    gauge!(names::WEBSOCKETS).decrement(1.0);
}

/// Why a socket ends.
enum End {
    /// The client closed it or went away.
    Client,
    /// The connection limit ran out.
    Limit,
    /// The gateway is shutting down.
    Shutdown,
}

/// One socket's state.
struct Connection {
    state: AppState,
    /// The key that opened the socket: every response on it is that key's.
    key: Option<Authenticated>,
    session: Option<String>,
    tx: SplitSink<WebSocket, Message>,
    rx: SplitStream<WebSocket>,
    /// Frames that came while a response was in flight, in order.
    queued: VecDeque<Bytes>,
    chains: chains::Chains,
    /// Frames received, for the per-key request limit (the upgrade counted the first).
    frames: u64,
}

impl Connection {
    /// Reads frames and answers each in turn until the socket ends.
    async fn run(&mut self) -> End {
        let deadline = tokio::time::Instant::now() + CONNECTION_LIMIT;
        let mut shutdown = self.state.shutdown.clone();
        loop {
            let text = match self.queued.pop_front() {
                Some(text) => text,
                None => {
                    let message = tokio::select! {
                        biased;
                        () = wait_for(&mut shutdown) => return End::Shutdown,
                        () = tokio::time::sleep_until(deadline) => return End::Limit,
                        message = self.rx.next() => message,
                    };
                    match message {
                        None | Some(Err(_)) | Some(Ok(Message::Close(_))) => return End::Client,
                        Some(Ok(Message::Text(text))) => Bytes::from(text),
                        Some(Ok(Message::Binary(_))) => {
                            let error = frame_error(
                                "invalid_frame",
                                "frames are JSON text; a binary frame was sent",
                            );
                            if self.send_json(&error).await.is_err() {
                                return End::Client;
                            }
                            continue;
                        }
                        Some(Ok(_)) => continue,
                    }
                }
            };
            counter!(names::WEBSOCKET_FRAMES, "direction" => "in").increment(1);
            if self.frame(text).await.is_err() {
                return End::Client;
            }
            if *shutdown.borrow() {
                return End::Shutdown;
            }
            if tokio::time::Instant::now() >= deadline {
                return End::Limit;
            }
        }
    }

    /// Ends the socket: the limit's error event first, then a close frame.
    async fn close(&mut self, end: End) {
        let reason = match end {
            End::Client => return,
            End::Limit => {
                let error = error_event(
                    400,
                    "invalid_request_error",
                    "websocket_connection_limit_reached",
                    "the WebSocket connection reached its 60-minute limit; open a new one",
                    None,
                );
                let _ = self.send_json(&error).await;
                "connection limit reached"
            }
            End::Shutdown => "the gateway is shutting down",
        };
        let close = Message::Close(Some(CloseFrame {
            code: 1001,
            reason: reason.into(),
        }));
        let _ = self.tx.send(close).await;
        let _ = self.tx.close().await;
    }

    /// Sends one event as a text frame.
    async fn send_json(&mut self, event: &Value) -> Result<(), axum::Error> {
        let text = serde_json::to_string(event).unwrap_or_default();
        self.send_text(Bytes::from(text)).await
    }

    /// Sends one JSON text (`bytes` is our own serialisation, so UTF-8).
    async fn send_text(&mut self, bytes: Bytes) -> Result<(), axum::Error> {
        let text = match axum::extract::ws::Utf8Bytes::try_from(bytes) {
            Ok(text) => text,
            Err(_) => return Ok(()),
        };
        counter!(names::WEBSOCKET_FRAMES, "direction" => "out").increment(1);
        self.tx.send(Message::Text(text)).await
    }

    /// Sends `error` as an `error` event.
    async fn send_error(&mut self, error: &GatewayError) -> Result<(), axum::Error> {
        let body = serde_json::to_value(error.body()).unwrap_or_default();
        let event = json!({
            "type": "error",
            "status": error.status().as_u16(),
            "error": body.get("error").cloned().unwrap_or_default(),
        });
        self.send_json(&event).await
    }
}

/// An `error` event in the spec's envelope.
fn error_event(status: u16, kind: &str, code: &str, message: &str, param: Option<&str>) -> Value {
    json!({
        "type": "error",
        "status": status,
        "error": {"type": kind, "code": code, "message": message, "param": param},
    })
}

/// The `error` event of a frame the gateway cannot read.
fn frame_error(code: &str, message: &str) -> Value {
    error_event(400, "invalid_request_error", code, message, None)
}
