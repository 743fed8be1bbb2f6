//! The accept loop: every client connection is counted against `max_connections`, served by
//! hyper (HTTP/1.1, or HTTP/2 with prior knowledge, as `axum::serve` did), and watched so that
//! a slow or idle client cannot hold it past the configured time.
//!
//! Per connection, a watchdog closes it when no request is in flight and either
//! - its next request's head is not complete within `header_read_timeout` of its first byte
//!   (of the connection's opening, for the first request), or
//! - no byte of a next request came within `idle_timeout` of the previous response's end.
//!
//! A request in flight is never cut by the watchdog: its body has its own deadline
//! ([`super::limits::DeadlineBody`]), and a response, however long it streams, ends by its own
//! means (the shutdown grace period included). hyper's own header timer stays set as a
//! backstop at the sum of both timeouts, which the watchdog always reaches first.
//!
//! Over the cap the loop stops accepting until a connection closes: new connections wait in
//! the kernel's listen backlog (bounded by the kernel) rather than being accepted and dropped,
//! so a burst is served late instead of refused. The timeouts above bound how long any
//! connection can keep its slot without sending requests.
//!
//! On shutdown the listener closes and every connection is asked to finish (hyper's graceful
//! shutdown: idle ones close at once, busy ones after their response); the loop returns when
//! all are closed, or at most `drain` later.
//!
//! A head hyper refuses by itself (a malformed `Content-Length`, a bad request line) is answered
//! by hyper before any route runs, with no body; the connection's socket puts OpenAI's JSON
//! error in its place (`Watched`), so that every error answer is JSON.
//!
//! A connection upgraded to a WebSocket leaves hyper, and so this loop's watch, once its `101`
//! is sent. Every request therefore carries a [`ConnectionHold`] in its extensions: the
//! upgraded socket keeps it for its whole life, so the drain waits for it and it hears when
//! shutdown begins (to close itself, since hyper no longer can). It gives its slot under the cap
//! back ([`ConnectionHold::give_back_slot`]): sockets have caps of their own (per key, per
//! tenant, in all, and an idle limit), so idle sockets cannot keep `/healthz` or another
//! client's request waiting for a slot.

use std::convert::Infallible;
use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::response::Response;
use http_body::{Frame, SizeHint};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, watch};
use tokio::time::Instant;
use tower::ServiceExt;

use super::limits::{DeadlineBody, ServerLimits};

/// Serves `service` on `listener` until `signal` resolves, then drains the connections for at
/// most `drain`.
pub(crate) async fn serve_connections(
    listener: TcpListener,
    service: Router,
    limits: ServerLimits,
    drain: Duration,
    signal: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    // Each connection holds a receiver of `open`; `closed()` resolves when the last one ends.
    let (open_tx, open_rx) = watch::channel(());
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut signal = pin!(signal);
    loop {
        let slot = tokio::select! {
            () = &mut signal => break,
            slot = slots.clone().acquire_owned() => match slot {
                Ok(slot) => slot,
                Err(_) => break,
            },
        };
        let tcp = tokio::select! {
            () = &mut signal => break,
            accepted = listener.accept() => match accepted {
                Ok((tcp, _)) => tcp,
                Err(e) => {
                    accept_failed(&e).await;
                    continue;
                }
            },
        };
        // Without TCP_NODELAY, every SSE event after the first few waits for the client's
        // delayed ACK (about 40 ms each on Linux): streams would crawl.
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::warn!("cannot set TCP_NODELAY: {e}");
        }
        tokio::spawn(connection(
            tcp,
            service.clone(),
            limits,
            ConnectionHold {
                held: Arc::new(Held {
                    slot: std::sync::Mutex::new(Some(slot)),
                    _open: open_rx.clone(),
                }),
                stopping: stop_rx.clone(),
            },
        ));
    }
    drop(listener);
    let _ = stop_tx.send(true);
    drop(open_rx);
    if tokio::time::timeout(drain, open_tx.closed()).await.is_err() {
        tracing::warn!("connections still open after the drain period are dropped");
    }
    Ok(())
}

/// After an accept error: a client's own failure is skipped; anything else (out of file
/// descriptors, most often) is logged and waited out, as `axum::serve` does.
async fn accept_failed(e: &std::io::Error) {
    use std::io::ErrorKind;
    if matches!(
        e.kind(),
        ErrorKind::ConnectionRefused | ErrorKind::ConnectionAborted | ErrorKind::ConnectionReset
    ) {
        return;
    }
    tracing::error!("accepting a connection failed: {e}");
    tokio::time::sleep(Duration::from_secs(1)).await;
}

/// What a connection holds until it ends: its slot under the cap (until it is upgraded to a
/// WebSocket) and its mark for the drain.
struct Held {
    slot: std::sync::Mutex<Option<OwnedSemaphorePermit>>,
    _open: watch::Receiver<()>,
}

/// A connection's hold on its slot and drain mark, and the shutdown signal; in every request's
/// extensions, for a connection that outlives hyper (an upgrade) to keep.
#[derive(Clone)]
pub(crate) struct ConnectionHold {
    held: Arc<Held>,
    /// Turns true when shutdown begins (the grace period starts).
    pub(crate) stopping: watch::Receiver<bool>,
}

impl ConnectionHold {
    /// Gives the connection's slot under `max_connections` back (an upgraded WebSocket, counted
    /// by the WebSocket caps instead); the drain mark stays. Over HTTP/2 the other streams of
    /// the same connection then run uncounted, bounded by hyper's stream limit.
    pub(crate) fn give_back_slot(&self) {
        if let Ok(mut slot) = self.held.slot.lock() {
            slot.take();
        }
    }
}

async fn connection(tcp: TcpStream, router: Router, limits: ServerLimits, hold: ConnectionHold) {
    let mut stop = hold.stopping.clone();
    let activity = Arc::new(Activity::new());
    let io = TokioIo::new(Watched {
        inner: tcp,
        activity: activity.clone(),
        head: Vec::new(),
        refusal: None,
    });
    let body_timeout = limits.body_read_timeout;
    let requests = activity.clone();
    let request_hold = hold.clone();
    let service = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
        let guard = InFlight::begin(requests.clone());
        // A request without a body (most GETs) needs no deadline, nor its timer.
        let mut request: Request = request.map(|body| {
            if http_body::Body::is_end_stream(&body) {
                Body::new(body)
            } else {
                Body::new(DeadlineBody::new(body, body_timeout))
            }
        });
        request.extensions_mut().insert(request_hold.clone());
        let answer = router.clone().oneshot(request);
        async move {
            let response: Response = match answer.await {
                Ok(response) => response,
                Err(never) => match never {},
            };
            Ok::<_, Infallible>(response.map(|body| {
                Body::new(Tracked {
                    inner: body,
                    _guard: guard,
                })
            }))
        }
    });
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(
            limits.header_read_timeout + limits.idle_timeout + Duration::from_secs(1),
        );
    // CONNECT protocol, as `axum::serve` enables it (HTTP/2 websockets).
    builder.http2().enable_connect_protocol();
    let mut conn = pin!(builder.serve_connection_with_upgrades(io, service));
    let mut watchdog = pin!(activity.watch(limits));
    let mut stopping = false;
    loop {
        tokio::select! {
            result = conn.as_mut() => {
                if let Err(e) = result {
                    tracing::trace!("connection ended: {e}");
                }
                break;
            }
            expired = &mut watchdog => {
                tracing::debug!("closing a connection: {expired}");
                break;
            }
            _ = stop.wait_for(|stop| *stop), if !stopping => {
                stopping = true;
                conn.as_mut().graceful_shutdown();
            }
        }
    }
    drop(hold);
}

/// What a connection is doing, shared by its socket, its requests and its watchdog. Times are
/// nanoseconds since `born`.
struct Activity {
    born: Instant,
    in_flight: AtomicUsize,
    /// When the connection last had no request in flight.
    idle_since: AtomicU64,
    /// When the first byte of the next request arrived; [`NONE`] before it has.
    first_byte: AtomicU64,
    /// Woken when a request begins or ends.
    changed: Notify,
}

const NONE: u64 = u64::MAX;

impl Activity {
    fn new() -> Self {
        Self {
            born: Instant::now(),
            in_flight: AtomicUsize::new(0),
            idle_since: AtomicU64::new(0),
            // The first request's head is timed from the connection's opening.
            first_byte: AtomicU64::new(0),
            changed: Notify::new(),
        }
    }

    fn now(&self) -> u64 {
        u64::try_from(self.born.elapsed().as_nanos()).unwrap_or(NONE - 1)
    }

    fn at(&self, nanos: u64) -> Instant {
        self.born + Duration::from_nanos(nanos)
    }

    /// Bytes came in: when no request is in flight, they start the next one's head (true when
    /// these are its first bytes).
    fn read(&self) -> bool {
        self.idle()
            && self
                .first_byte
                .compare_exchange(NONE, self.now(), Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
    }

    /// No request is in flight.
    fn idle(&self) -> bool {
        self.in_flight.load(Ordering::Acquire) == 0
    }

    /// Resolves when the connection must close, saying why. Never while a request is in
    /// flight.
    async fn watch(&self, limits: ServerLimits) -> &'static str {
        loop {
            let changed = self.changed.notified();
            let deadline = if self.in_flight.load(Ordering::Acquire) > 0 {
                None
            } else {
                match self.first_byte.load(Ordering::Acquire) {
                    NONE => Some((
                        self.at(self.idle_since.load(Ordering::Acquire)) + limits.idle_timeout,
                        "idle timeout",
                    )),
                    first => Some((
                        self.at(first) + limits.header_read_timeout,
                        "request head not received within the header read timeout",
                    )),
                }
            };
            match deadline {
                None => changed.await,
                Some((at, why)) => {
                    let now = Instant::now();
                    if at <= now {
                        return why;
                    }
                    // Bytes arriving from now on move the deadline to at least a header
                    // timeout away, so looking again by then is never late.
                    let look = at.min(now + limits.header_read_timeout);
                    tokio::select! {
                        () = tokio::time::sleep_until(look) => {}
                        () = changed => {}
                    }
                }
            }
        }
    }
}

/// A request in flight on a connection, from its head until its response body is dropped.
struct InFlight(Arc<Activity>);

impl InFlight {
    fn begin(activity: Arc<Activity>) -> Self {
        if activity.in_flight.fetch_add(1, Ordering::AcqRel) == 0 {
            activity.first_byte.store(NONE, Ordering::Release);
            activity.changed.notify_one();
        }
        Self(activity)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let activity = &self.0;
        if activity.in_flight.fetch_sub(1, Ordering::AcqRel) == 1 {
            activity.idle_since.store(activity.now(), Ordering::Release);
            activity.first_byte.store(NONE, Ordering::Release);
            activity.changed.notify_one();
        }
    }
}

/// A response body that keeps its request in flight until hyper drops it (sent or aborted).
struct Tracked {
    inner: Body,
    _guard: InFlight,
}

impl http_body::Body for Tracked {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// How much of a request head is kept to explain hyper's refusal of it.
const HEAD_KEPT: usize = 4096;

/// The connection's socket, telling its [`Activity`] when bytes come in, and answering in
/// OpenAI's JSON where hyper answers a head it cannot parse by itself.
///
/// hyper refuses a malformed head (a `Content-Length` that is not a number, a bad request
/// line, headers too large) before any service sees it, with a bodiless 400 (414, 431) that no
/// route can rewrite. The socket knows that answer: it is written while no request is in
/// flight, and every answer of ours has a JSON body. It is replaced, on its way out, by the
/// same status with the [`GatewayError`] body, whose cause comes from the start of the head
/// (kept while it arrives, at most [`HEAD_KEPT`] bytes, dropped once a request is in flight).
struct Watched {
    inner: TcpStream,
    activity: Arc<Activity>,
    /// The start of the request head being read, while no request is in flight.
    head: Vec<u8>,
    /// The answer being written in place of hyper's: its bytes, how many went out, and the
    /// length of hyper's answer (reported written once ours is).
    refusal: Option<(Vec<u8>, usize, usize)>,
}

impl Watched {
    /// Keeps the start of a request head; frees it once a request is in flight.
    fn keep_head(&mut self, read: &[u8]) {
        if !self.activity.idle() {
            self.head = Vec::new();
            return;
        }
        if self.activity.read() {
            self.head.clear();
        }
        let room = HEAD_KEPT.saturating_sub(self.head.len());
        self.head
            .extend_from_slice(read.get(..room.min(read.len())).unwrap_or_default());
    }

    /// When `buf` is hyper's own answer to a head it could not parse, ours in its place.
    fn refusal_for(&self, buf: &[u8]) -> Option<Vec<u8>> {
        if !buf.starts_with(b"HTTP/1.1 4") || !buf.ends_with(b"\r\n\r\n") || !self.activity.idle() {
            return None;
        }
        let head = std::str::from_utf8(buf).ok()?;
        let status_line = head.split("\r\n").next()?;
        let status: u16 = status_line
            .strip_prefix("HTTP/1.1 ")?
            .get(..3)?
            .parse()
            .ok()?;
        let bodiless = head
            .split("\r\n")
            .any(|line| line.eq_ignore_ascii_case("content-length: 0"));
        if !(400..500).contains(&status) || !bodiless {
            return None;
        }
        let error = match invalid_content_length(&self.head) {
            Some(value) if status == 400 => crate::error::GatewayError::InvalidContentLength(value),
            _ => crate::error::GatewayError::MalformedHead(status),
        };
        let body = serde_json::to_vec(&error.body()).ok()?;
        let mut answer = format!(
            "{status_line}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
            body.len()
        )
        .into_bytes();
        answer.extend_from_slice(&body);
        Some(answer)
    }

    /// Writes the pending refusal; `Ready(Ok(n))` with hyper's length once all of it went.
    fn poll_refusal(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<usize>> {
        while let Some((bytes, sent, _)) = &mut self.refusal
            && *sent < bytes.len()
        {
            let rest = bytes.get(*sent..).unwrap_or_default();
            match std::task::ready!(Pin::new(&mut self.inner).poll_write(cx, rest)) {
                Ok(0) => return Poll::Ready(Err(std::io::ErrorKind::WriteZero.into())),
                Ok(n) => *sent += n,
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
        Poll::Ready(Ok(self.refusal.take().map_or(0, |(_, _, theirs)| theirs)))
    }
}

/// The first `Content-Length` value in `head` that is not one non-negative integer (hyper
/// takes a list of equal ones, `5, 5`), as sent; `None` when every one is valid or none is
/// kept.
fn invalid_content_length(head: &[u8]) -> Option<String> {
    let head = String::from_utf8_lossy(head);
    let mut values = head.split("\r\n").skip(1).filter_map(|line| {
        let (name, value) = line.split_once(':')?;
        name.trim()
            .eq_ignore_ascii_case("content-length")
            .then(|| value.trim())
    });
    let mut first: Option<u64> = None;
    let invalid = values.find(|value| {
        value.split(',').any(|one| {
            let one = one.trim();
            let parsed = (!one.is_empty() && one.bytes().all(|b| b.is_ascii_digit()))
                .then(|| one.parse::<u64>().ok())
                .flatten();
            match (parsed, first) {
                (None, _) => true,
                (Some(n), Some(seen)) => n != seen,
                (Some(n), None) => {
                    first = Some(n);
                    false
                }
            }
        })
    })?;
    Some(invalid.chars().take(64).collect())
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            let read = buf.filled().get(before..).unwrap_or_default();
            self.keep_head(read);
        }
        polled
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        if self.refusal.is_none()
            && let Some(answer) = self.refusal_for(buf)
        {
            self.refusal = Some((answer, 0, buf.len()));
        }
        if self.refusal.is_some() {
            return self.poll_refusal(cx);
        }
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        // hyper's own answer is its head alone, one buffer: looked at as a plain write.
        if self.activity.idle()
            && let [only] = bufs
        {
            return self.poll_write(cx, only);
        }
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}
