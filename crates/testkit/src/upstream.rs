//! A fake upstream: an axum server on 127.0.0.1:0 that answers with scripted replies and records
//! every request it receives.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, Uri};
use axum::response::Response;
use serde_json::Value;

mod respond;

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
    abandoned: Arc<AtomicUsize>,
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

/// Records the request, then answers it with the reply its gate, the script or the fallback
/// gives, after the pauses of a delayed reply.
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
    let (reply, abandoned) = next_reply(&inner, &method, recorded);
    let mut reply = reply;
    while let Some(Reply::Delayed {
        pause,
        reply: inner,
    }) = reply
    {
        tokio::time::sleep(pause).await;
        reply = Some(*inner);
    }
    respond::respond(reply, abandoned)
}

/// Records `recorded` and takes its reply: the gate's, else the script's next, else the
/// fallback, with its usage rewritten to what the cache serves a POST. Also the count of
/// abandoned streams, which a streamed reply adds to.
fn next_reply(
    inner: &Mutex<Inner>,
    method: &Method,
    recorded: Recorded,
) -> (Option<Reply>, Arc<AtomicUsize>) {
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
