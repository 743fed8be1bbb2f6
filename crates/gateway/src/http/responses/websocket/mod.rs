//! The WebSocket mode of `/v1/responses` (and `/responses`): a second ingress on the response
//! pipeline, not a copy of it. `GET` upgraded, behind the same `authenticate` middleware as the
//! HTTP route (key, scopes, the per-key request limit, the tenant); each `response.create` text
//! frame runs one response through the same stages (`respond`) with [`Framing::Json`], and its
//! events go out as text frames, a keep-alive as a ping.
//!
//! - Responses on one lane run one after another; frames naming different `stream_id`s run
//!   side by side, their events tagged (`lanes`). The connection's one task reads frames and
//!   polls every running response (`running`), so nothing is spawned per response.
//! - A bad frame is answered with an `error` event in the spec's envelope
//!   (`{"type":"error","status":…,"error":{"type","code","message","param"}}`) and the socket
//!   stays usable (a binary frame too). A frame the WebSocket protocol itself cannot read (a
//!   malformed frame, a text frame that is not UTF-8, a message over the body limit) ends the
//!   socket with a close frame saying why (1002, 1007, 1009).
//! - `store: false` chains are expanded from the connection's own state (`chains`); a prewarm
//!   (`generate: false`) is answered by the gateway and starts a chain (`frame`).
//! - Each response is observed as an HTTP request is: its own request id, span and capture.
//! - Sockets are counted under caps of their own (`caps`: in all, per key, per tenant, and the
//!   responses in flight per key), not under `max_connections`: the upgrade gives the HTTP
//!   connection's slot back. A socket with no frame and no response in flight for
//!   `server.websocket_idle_timeout_secs` is closed (1001).
//! - The socket ends after `server.websocket_max_lifetime_secs`
//!   (`websocket_connection_limit_reached`) and at shutdown. Either way no new frame starts, the responses in flight end (at shutdown within
//!   the grace period: past it the transport ends them with their terminal event), and then a
//!   close frame goes out; an idle socket closes at once. The socket keeps its HTTP
//!   connection's hold ([`ConnectionHold`]), so the server waits for it as for any connection.
//!
//! Not here: what a response does (the stages), HTTP framing (`sse`).

pub(crate) mod caps;
mod chains;
mod frame;
#[cfg(test)]
mod fuzz;
mod lanes;
mod running;

use axum::body::Bytes;
use axum::extract::State;
use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::http::{HeaderMap, HeaderValue, Uri, header};
use axum::response::{IntoResponse, Response};
use futures::stream::{BoxStream, SelectAll, SplitSink, SplitStream};
use futures::{SinkExt, StreamExt};
use metrics::{counter, gauge};
use serde_json::{Value, json};
use tokio::sync::watch;

use super::emit::transport::wait_for;
use crate::error::GatewayError;
use crate::platform::auth::Authenticated;
use crate::platform::ops::metrics::names;
use crate::platform::serve::accept::ConnectionHold;
use crate::state::AppState;

/// Bytes read from a socket at a time.
const READ_BUFFER: usize = 8 * 1024;
/// Bytes of outgoing frames gathered before they are written (each event is flushed anyway).
const WRITE_BUFFER: usize = 8 * 1024;

/// `GET /responses` with `Upgrade: websocket`. A plain `GET` is still the route's 405 (it
/// creates with `POST`); a broken upgrade is the extractor's rejection, in OpenAI's JSON.
pub(crate) async fn upgrade(
    State(state): State<AppState>,
    headers: HeaderMap,
    uri: Uri,
    hold: Option<axum::Extension<ConnectionHold>>,
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
    let pass = match state.websocket_caps.open(
        &state.config.server,
        key_name(key.as_ref()),
        crate::platform::auth::tenant_of(key.as_ref()).name(),
    ) {
        Ok(pass) => pass,
        Err(refused) => {
            counter!(names::WEBSOCKETS_REFUSED, "what" => "socket").increment(1);
            return refused.into_response();
        }
    };
    let limit = state.config.body_limit;
    let hold = hold.map(|axum::Extension(hold)| hold);
    let mut response = ws
        .max_message_size(limit)
        .max_frame_size(limit)
        // tungstenite's 128 KiB read buffer is allocated per socket, idle or not (about
        // 130 KiB a socket measured, 4,096 sockets some 530 MB); a message larger than the
        // buffer is read in several reads.
        .read_buffer_size(READ_BUFFER)
        .write_buffer_size(WRITE_BUFFER)
        .on_upgrade(move |socket| {
            // Counted by the socket caps from now on, not under `max_connections`.
            if let Some(hold) = &hold {
                hold.give_back_slot();
            }
            let scope = key.clone();
            let who = Opened {
                key,
                session,
                hold,
                _pass: pass,
            };
            crate::platform::auth::scoped(scope, serve(state, who, socket))
        });
    // The largest message the socket takes, as Codex 0.171 reads it.
    response.headers_mut().insert(
        "x-codex-websocket-max-message-bytes",
        HeaderValue::from(limit as u64),
    );
    response
}

/// Who opened a socket, and its hold on the HTTP connection it came from.
struct Opened {
    key: Option<Authenticated>,
    session: Option<String>,
    /// `None` when the app is served without the gateway's accept loop (then the forced stop
    /// at the end of the grace period is the only signal).
    hold: Option<ConnectionHold>,
    /// Its place under the socket caps.
    _pass: caps::SocketPass,
}

/// The name a key's sockets and responses are counted under (keyless clients share one).
fn key_name(key: Option<&Authenticated>) -> &str {
    key.map_or(crate::platform::limits::ANONYMOUS, |k| k.key_id.as_str())
}

/// One socket, from its upgrade to its close.
async fn serve(state: AppState, who: Opened, socket: WebSocket) {
    gauge!(names::WEBSOCKETS).increment(1.0);
    let (tx, rx) = socket.split();
    let stopping = who
        .hold
        .as_ref()
        .map_or_else(|| state.shutdown.clone(), |hold| hold.stopping.clone());
    let mut conn = Connection {
        chains: chains::Chains::new(state.config.body_limit * chains::BYTES_PER_BODY_LIMIT),
        state,
        key: who.key,
        session: who.session,
        tx,
        rx,
        stopping,
        lanes: lanes::Lanes::default(),
        running: SelectAll::new(),
        frames: 0,
    };
    let end = conn.run().await;
    conn.close(end).await;
    // The HTTP connection's slot and drain mark go only now.
    drop(who.hold);
    gauge!(names::WEBSOCKETS).decrement(1.0);
}

/// Why a socket ends.
enum End {
    /// The client closed it or went away.
    Client,
    /// The connection limit ran out.
    Limit,
    /// No frame and no response in flight for the idle timeout.
    Idle,
    /// The gateway is shutting down.
    Shutdown,
    /// Reading the socket failed: the client broke the protocol, or went away.
    Broken(axum::Error),
}

/// One socket's state.
struct Connection {
    state: AppState,
    /// The key that opened the socket: every response on it is that key's.
    key: Option<Authenticated>,
    session: Option<String>,
    tx: SplitSink<WebSocket, Message>,
    rx: SplitStream<WebSocket>,
    /// Turns true when shutdown begins.
    stopping: watch::Receiver<bool>,
    /// The busy lanes and the frames waiting on them.
    lanes: lanes::Lanes,
    /// The responses in flight, one per busy lane.
    running: SelectAll<BoxStream<'static, running::Item>>,
    chains: chains::Chains,
    /// Responses started, for the per-key request limit (the upgrade counted the first).
    frames: u64,
}

impl Connection {
    /// Reads frames and relays the running responses until the socket ends.
    async fn run(&mut self) -> End {
        let limits = self.state.config.server;
        let deadline = tokio::time::Instant::now() + limits.websocket_max_lifetime;
        let mut idle_since = tokio::time::Instant::now();
        let mut busy = false;
        let mut stopping = self.stopping.clone();
        let mut ending: Option<End> = None;
        loop {
            if self.running.is_empty()
                && let Some(end) = ending.take()
            {
                return end;
            }
            let idle = self.running.is_empty() && ending.is_none();
            // The idle time runs from the end of the last response (read once per response,
            // not once per event).
            if idle && busy {
                idle_since = tokio::time::Instant::now();
            }
            busy = !self.running.is_empty();
            // Unbiased: a busy response must not starve the reading of frames (or of the
            // client's close), nor the reverse.
            let sent = tokio::select! {
                () = wait_for(&mut stopping), if ending.is_none() => {
                    ending = Some(End::Shutdown);
                    self.lanes.drop_waiting();
                    Ok(())
                }
                () = tokio::time::sleep_until(deadline), if ending.is_none() => {
                    ending = Some(End::Limit);
                    self.lanes.drop_waiting();
                    Ok(())
                }
                () = tokio::time::sleep_until(idle_since + limits.websocket_idle_timeout), if idle => {
                    return End::Idle;
                }
                item = self.running.next(), if !self.running.is_empty() => match item {
                    Some(item) => self.relay(item).await,
                    None => Ok(()),
                },
                message = self.rx.next() => match message {
                    None | Some(Ok(Message::Close(_))) => return End::Client,
                    Some(Err(error)) => return End::Broken(error),
                    // A socket that is ending starts nothing new: its close frame tells the
                    // client to open another.
                    Some(Ok(_)) if ending.is_some() => Ok(()),
                    Some(Ok(Message::Text(text))) => {
                        idle_since = tokio::time::Instant::now();
                        counter!(names::WEBSOCKET_FRAMES, "direction" => "in").increment(1);
                        self.arrive(Bytes::from(text)).await
                    }
                    Some(Ok(Message::Binary(_))) => {
                        let error = frame_error(
                            "invalid_frame",
                            "frames are JSON text; a binary frame was sent",
                        );
                        self.send_json(&error).await
                    }
                    Some(Ok(_)) => Ok(()),
                },
            };
            if sent.is_err() {
                return End::Client;
            }
        }
    }

    /// Sends what a running response handed over.
    async fn relay(&mut self, item: running::Item) -> Result<(), axum::Error> {
        match item {
            running::Item::Event(bytes) => self.send_text(bytes).await,
            running::Item::Ping => self.tx.send(Message::Ping(Bytes::new())).await,
            running::Item::End(ended) => {
                self.ended(*ended);
                Ok(())
            }
        }
    }

    /// Ends the socket: the limit's error event first, then a close frame.
    async fn close(&mut self, end: End) {
        let (code, reason) = match end {
            End::Client => return,
            End::Broken(error) => match broken_close(&error) {
                Some((1009, reason)) => {
                    // Codex 0.171 reads this code (and the size from the upgrade's
                    // `x-codex-websocket-max-message-bytes`) and resends over HTTP.
                    let limit = self.state.config.body_limit;
                    let error = error_event(
                        400,
                        "invalid_request_error",
                        "websocket_message_too_large",
                        &format!("a message is larger than this gateway's {limit} bytes"),
                        None,
                    );
                    let _ = self.send_json(&error).await;
                    (1009, reason)
                }
                Some(close) => close,
                // The client went away: there is no one to tell.
                None => return,
            },
            End::Limit => {
                let lifetime = self.state.config.server.websocket_max_lifetime.as_secs();
                let error = error_event(
                    400,
                    "invalid_request_error",
                    "websocket_connection_limit_reached",
                    &format!(
                        "the WebSocket connection reached its limit of {lifetime} s; open a new one"
                    ),
                    None,
                );
                let _ = self.send_json(&error).await;
                (1001, "connection limit reached")
            }
            // Nothing was asked: no error event, only the close (the client opens a new
            // socket for its next turn).
            End::Idle => (1001, "idle for too long"),
            End::Shutdown => (1001, "the gateway is shutting down"),
        };
        let close = Message::Close(Some(CloseFrame {
            code,
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
}

/// The close frame (code and reason) that answers a socket whose reading failed, as RFC 6455
/// (7.4.1) names them: a frame too large for the body limit (1009), a text frame that is not
/// UTF-8 (1007), any other broken frame (1002). `None` when the client is gone (the connection
/// reset or closed without a close frame): nothing can be sent. Without it the socket was
/// dropped silently and the client could not tell a protocol error from a network failure.
fn broken_close(error: &axum::Error) -> Option<(u16, &'static str)> {
    use tungstenite::Error as WsError;
    use tungstenite::error::ProtocolError;
    let error = std::error::Error::source(error)?.downcast_ref::<WsError>()?;
    match error {
        WsError::Capacity(_) => Some((1009, "the message is larger than the body limit")),
        WsError::Utf8(_) => Some((1007, "a text frame is not valid UTF-8")),
        WsError::Protocol(
            ProtocolError::ResetWithoutClosingHandshake | ProtocolError::ReceivedAfterClosing,
        ) => None,
        WsError::Protocol(_) => Some((1002, "the frame breaks the WebSocket protocol")),
        _ => None,
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
