//! A fake upstream: an axum server on 127.0.0.1:0 that answers with scripted replies and records
//! every request it receives.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use futures::stream;
use serde_json::Value;

/// One scripted answer.
#[derive(Debug, Clone)]
pub enum Reply {
    /// A JSON body with a status and extra headers.
    Json {
        status: u16,
        body: Value,
        headers: Vec<(String, String)>,
    },
    /// An SSE body written piece by piece, each piece its own write, with an optional pause
    /// before each.
    Stream {
        pieces: Vec<String>,
        pause: Duration,
    },
    /// An SSE body whose connection breaks after these pieces (the body fails mid-way, so the
    /// reader sees an aborted transfer, not a clean end).
    StreamThenReset { pieces: Vec<String> },
    /// A 200 JSON answer whose connection breaks after `sent` of its bytes: the headers (with
    /// the whole body's `Content-Length`) and the first bytes go out, then, after a short
    /// pause, the connection drops, so the reader sees a body cut mid-way.
    JsonThenReset { body: String, sent: usize },
    /// Another reply, served after a pause (a slow upstream).
    Delayed { pause: Duration, reply: Box<Reply> },
    /// An SSE body of exact byte pieces, which need not be UTF-8.
    StreamBytes { pieces: Vec<Vec<u8>> },
    /// Any body.
    Raw {
        status: u16,
        content_type: String,
        body: String,
    },
}

impl Reply {
    /// `200` with a JSON body.
    pub fn json(body: Value) -> Self {
        Self::Json {
            status: 200,
            body,
            headers: Vec::new(),
        }
    }

    /// An error status with a JSON body.
    pub fn error(status: u16, body: Value) -> Self {
        Self::Json {
            status,
            body,
            headers: Vec::new(),
        }
    }

    /// An SSE stream of `data:` payloads, followed by `data: [DONE]`.
    pub fn sse(payloads: Vec<Value>) -> Self {
        let mut pieces: Vec<String> = payloads.iter().map(|p| format!("data: {p}\n\n")).collect();
        pieces.push("data: [DONE]\n\n".to_owned());
        Self::Stream {
            pieces,
            pause: Duration::ZERO,
        }
    }

    /// An SSE stream of named events, each written as an `event:` line and a `data:` line, as
    /// Anthropic's Messages API streams (no `[DONE]` added: `message_stop` ends such a stream).
    pub fn sse_events(events: Vec<(&str, Value)>) -> Self {
        Self::Stream {
            pieces: events
                .iter()
                .map(|(name, data)| format!("event: {name}\ndata: {data}\n\n"))
                .collect(),
            pause: Duration::ZERO,
        }
    }

    /// An SSE stream of exact pieces (no `[DONE]` added).
    pub fn sse_raw(pieces: Vec<String>) -> Self {
        Self::Stream {
            pieces,
            pause: Duration::ZERO,
        }
    }

    /// This stream with one more event, whose bytes are not valid UTF-8, before its piece `at`
    /// (each piece is one event in the dialects' renderings). Any other reply is left as is.
    pub fn with_invalid_utf8_event(self, at: usize) -> Self {
        let Self::Stream { pieces, .. } = self else {
            return self;
        };
        let mut pieces: Vec<Vec<u8>> = pieces.into_iter().map(String::into_bytes).collect();
        pieces.insert(
            at.min(pieces.len()),
            b"data: {\"type\": \"bad\", \"text\": \"\xff\xfe\"}\n\n".to_vec(),
        );
        Self::StreamBytes { pieces }
    }
}

/// A request the fake upstream received.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    /// The query string, without its `?` (Gemini streams with `alt=sse`).
    pub query: Option<String>,
    pub headers: HeaderMap,
    pub body: Value,
}

/// A check run on every request before the script: `Some(reply)` answers instead (a provider
/// rejecting what it does not accept, say).
pub type Gate = Arc<dyn Fn(&Recorded) -> Option<Reply> + Send + Sync>;

#[derive(Default)]
struct Inner {
    script: VecDeque<Reply>,
    fallback: Option<Reply>,
    requests: Vec<Recorded>,
    gate: Option<Gate>,
    /// A prompt cache whose reads and writes replace the usage of every reply.
    cache: Option<crate::cache::CacheSim>,
    /// Streamed replies whose body was dropped before its last piece (the client went away).
    abandoned: Arc<std::sync::atomic::AtomicUsize>,
}

/// Counts a streamed reply as abandoned when it is dropped before it finished.
struct Finish {
    done: bool,
    abandoned: Arc<std::sync::atomic::AtomicUsize>,
}

impl Finish {
    /// The reply was sent to its end.
    fn complete(mut self) {
        self.done = true;
    }
}

impl Drop for Finish {
    fn drop(&mut self) {
        if !self.done {
            self.abandoned
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    }
}

/// The fake upstream server; it stops when dropped.
pub struct FakeUpstream {
    addr: SocketAddr,
    inner: Arc<Mutex<Inner>>,
    task: tokio::task::JoinHandle<()>,
}

impl FakeUpstream {
    /// Starts a server on 127.0.0.1:0.
    pub async fn start() -> Self {
        let inner = Arc::new(Mutex::new(Inner::default()));
        let app = Router::new().fallback(handle).with_state(inner.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local addr");
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self { addr, inner, task }
    }

    /// The base URL a Chat provider config would use (`http://127.0.0.1:PORT/v1`).
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Queues a reply for the next request.
    pub fn push(&self, reply: Reply) {
        self.lock().script.push_back(reply);
    }

    /// The reply used when the script is empty.
    pub fn set_fallback(&self, reply: Reply) {
        self.lock().fallback = Some(reply);
    }

    /// Installs a gate that may answer a request instead of the script.
    pub fn set_gate(&self, gate: Gate) {
        self.lock().gate = Some(gate);
    }

    /// Makes the replies report what `cache` serves each request (its usage fields rewritten
    /// in the provider's own names), and keeps the cache's account.
    pub fn set_cache(&self, cache: crate::cache::CacheSim) {
        self.lock().cache = Some(cache);
    }

    /// The cache set with [`Self::set_cache`], as it stands.
    pub fn cache(&self) -> Option<crate::cache::CacheSim> {
        self.lock().cache.clone()
    }

    /// Every request received so far.
    pub fn requests(&self) -> Vec<Recorded> {
        self.lock().requests.clone()
    }

    /// How many streamed replies lost their reader before their last piece: the peer closed
    /// the connection.
    pub fn abandoned_streams(&self) -> usize {
        self.lock()
            .abandoned
            .load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The body of the last request.
    pub fn last_body(&self) -> Value {
        self.lock()
            .requests
            .last()
            .map(|r| r.body.clone())
            .unwrap_or(Value::Null)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for FakeUpstream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn handle(
    State(inner): State<Arc<Mutex<Inner>>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let recorded = Recorded {
        method: method.to_string(),
        path: uri.path().to_owned(),
        query: uri.query().map(str::to_owned),
        headers,
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
    };
    let (reply, abandoned) = {
        let mut inner = inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.requests.push(recorded.clone());
        let gated = inner.gate.as_ref().and_then(|g| g(&recorded));
        let mut reply = gated
            .or_else(|| inner.script.pop_front())
            .or_else(|| inner.fallback.clone());
        if let (Some(cache), Some(r)) = (inner.cache.as_mut(), reply.as_mut())
            && method == Method::POST
        {
            let served = cache.serve(&recorded.body);
            patch_usage(cache, served, r);
        }
        (reply, inner.abandoned.clone())
    };
    let mut reply = reply;
    while let Some(Reply::Delayed {
        pause,
        reply: inner,
    }) = reply
    {
        tokio::time::sleep(pause).await;
        reply = Some(*inner);
    }
    match reply {
        // Unwrapped by the loop above.
        Some(Reply::Delayed { .. }) | None => (
            StatusCode::INTERNAL_SERVER_ERROR,
            "fake upstream: no reply scripted",
        )
            .into_response(),
        Some(Reply::Json {
            status,
            body,
            headers,
        }) => {
            let mut response = (
                StatusCode::from_u16(status).unwrap_or(StatusCode::OK),
                [("content-type", "application/json")],
                body.to_string(),
            )
                .into_response();
            for (k, v) in headers {
                if let (Ok(k), Ok(v)) = (
                    axum::http::HeaderName::from_bytes(k.as_bytes()),
                    axum::http::HeaderValue::from_str(&v),
                ) {
                    response.headers_mut().insert(k, v);
                }
            }
            response
        }
        Some(Reply::Raw {
            status,
            content_type,
            body,
        }) => (
            StatusCode::from_u16(status).unwrap_or(StatusCode::OK),
            [("content-type", content_type)],
            body,
        )
            .into_response(),
        Some(Reply::StreamBytes { pieces }) => (
            StatusCode::OK,
            [("content-type", "text/event-stream")],
            Body::from_stream(stream::iter(
                pieces
                    .into_iter()
                    .map(|p| Ok::<Bytes, std::convert::Infallible>(Bytes::from(p))),
            )),
        )
            .into_response(),
        Some(Reply::JsonThenReset { body, sent }) => json_then_reset(body, sent),
        Some(Reply::StreamThenReset { pieces }) => stream_then_reset(pieces),
        Some(Reply::Stream { pieces, pause }) => {
            let finish = Finish {
                done: false,
                abandoned,
            };
            let state = (pieces.into_iter(), finish);
            let body = stream::unfold(state, move |(mut it, finish)| async move {
                let Some(piece) = it.next() else {
                    finish.complete();
                    return None;
                };
                if !pause.is_zero() {
                    tokio::time::sleep(pause).await;
                }
                let chunk = Ok::<Bytes, std::convert::Infallible>(Bytes::from(piece));
                Some((chunk, (it, finish)))
            });
            (
                StatusCode::OK,
                [("content-type", "text/event-stream")],
                Body::from_stream(body),
            )
                .into_response()
        }
    }
}

/// A 200 JSON answer whose connection drops after `sent` of its bytes (see
/// [`Reply::JsonThenReset`]).
fn json_then_reset(body: String, sent: usize) -> Response {
    let length = body.len();
    let head = Bytes::from(body.into_bytes()).slice(..sent.min(length));
    let parts = stream::unfold(Some(head), |state| async move {
        match state {
            Some(head) => Some((Ok(head), None)),
            None => {
                tokio::time::sleep(Duration::from_millis(50)).await;
                let reset = std::io::Error::new(
                    std::io::ErrorKind::ConnectionReset,
                    "fake upstream: connection dropped",
                );
                // The stream ends after this error (the body is aborted).
                Some((Err::<Bytes, std::io::Error>(reset), None))
            }
        }
    });
    let mut response = (
        StatusCode::OK,
        [("content-type", "application/json")],
        Body::from_stream(parts),
    )
        .into_response();
    if let Ok(v) = axum::http::HeaderValue::from_str(&length.to_string()) {
        response.headers_mut().insert("content-length", v);
    }
    response
}

/// An SSE body whose connection drops after `pieces` (see [`Reply::StreamThenReset`]).
fn stream_then_reset(pieces: Vec<String>) -> Response {
    let mut parts: Vec<Result<Bytes, std::io::Error>> =
        pieces.into_iter().map(|p| Ok(Bytes::from(p))).collect();
    parts.push(Err(std::io::Error::new(
        std::io::ErrorKind::ConnectionReset,
        "fake upstream: connection dropped",
    )));
    (
        StatusCode::OK,
        [("content-type", "text/event-stream")],
        Body::from_stream(stream::iter(parts)),
    )
        .into_response()
}

/// Rewrites the usage `reply` reports to what `cache` served: a JSON body's, and each SSE
/// event's `data:` payload that carries usage.
fn patch_usage(cache: &crate::cache::CacheSim, served: crate::cache::Served, reply: &mut Reply) {
    match reply {
        Reply::Json { body, .. } => cache.patch(served, body),
        Reply::Delayed { reply, .. } => patch_usage(cache, served, reply),
        Reply::Stream { pieces, .. } | Reply::StreamThenReset { pieces } => {
            for piece in pieces.iter_mut() {
                let lines: Vec<String> = piece
                    .split('\n')
                    .map(|line| match line.strip_prefix("data: ") {
                        Some(data) => match serde_json::from_str::<Value>(data) {
                            Ok(mut v) => {
                                cache.patch(served, &mut v);
                                format!("data: {v}")
                            }
                            Err(_) => line.to_owned(),
                        },
                        None => line.to_owned(),
                    })
                    .collect();
                *piece = lines.join("\n");
            }
        }
        _ => {}
    }
}
