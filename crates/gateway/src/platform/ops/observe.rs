//! One request seen from outside: the `observe` middleware wraps every route. It names the
//! request (`x-request-id`), opens its `request` span (continuing an incoming W3C
//! `traceparent`), keeps a [`RequestCtx`] in a task-local for the code below it (upstream wait,
//! the provider and model labels, the capture), and at the end counts the request, measures the
//! gateway's own overhead (total minus upstream wait, also the `x-toolbridge-overhead-ms`
//! header) and, for a stream, wraps the body: the open-streams gauge goes back down however the
//! stream ends (a drop guard, which also writes the capture of a stream its client closed),
//! the first byte and the first output delta are timed, and every poll of the body runs inside
//! the request's span and context, so later rounds sent from the stream are seen too.
//!
//! It never reads or logs headers other than `traceparent`; the request body is read only when
//! capture is on.

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::body::{Body, BodyDataStream, Bytes};
use axum::extract::{MatchedPath, Request};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use futures::{Stream, StreamExt};
use serde_json::{Value, json};
use toolbridge_store::CaptureStore;
use tracing::Instrument;

use super::journal::{Entry, Journal};
use super::metrics::{self, RequestLabels};
use crate::config::Config;
use crate::error::GatewayError;

/// The header carrying the gateway's own time, in milliseconds.
pub(crate) const OVERHEAD_HEADER: &str = "x-toolbridge-overhead-ms";
/// The header naming the request (also the key of its capture).
pub(crate) const REQUEST_ID_HEADER: &str = "x-request-id";
/// The status a capture records for a stream its client closed before the end (nginx's 499).
const CLIENT_CLOSED: u16 = 499;

tokio::task_local! {
    static CTX: Arc<RequestCtx>;
}

/// What the code serving one request reports to its observer.
pub(crate) struct RequestCtx {
    pub request_id: String,
    route: String,
    started: Instant,
    upstream_nanos: AtomicU64,
    /// `(provider, model)` labels, once a provider took the request.
    labels: OnceLock<(String, String)>,
    span: tracing::Span,
    capture: Option<Capture>,
    /// A background run carries this context and writes the capture itself.
    deferred: AtomicBool,
    /// The tenant owning the capture, once the key is known (the open gateway's otherwise).
    tenant: OnceLock<toolbridge_store::Tenant>,
    /// The request's entry in the console's journal, filled by the stages ([`note`]) and kept
    /// when this context is dropped (the answer is over); `None` when the console is off.
    journal: Option<(Arc<Journal>, Mutex<Entry>)>,
    /// Nanoseconds from the start to a stream's first output delta (0: none yet).
    first_token_nanos: AtomicU64,
}

impl Drop for RequestCtx {
    fn drop(&mut self) {
        let Some((journal, entry)) = self.journal.take() else {
            return;
        };
        let Ok(mut entry) = entry.into_inner() else {
            return;
        };
        // A WebSocket upgrade has no answer of its own: each response on the socket has its
        // entry.
        if entry.http_status == 101 {
            return;
        }
        entry.latency_ms = self.started.elapsed().as_secs_f64() * 1000.0;
        let first = self.first_token_nanos.load(Ordering::Relaxed);
        entry.first_token_ms = (first > 0).then(|| first as f64 / 1e6);
        if let Some(tenant) = self.tenant.get() {
            tenant.name().clone_into(&mut entry.tenant);
        }
        journal.push(entry);
    }
}

/// Adds to the current request's journal entry (when the console is on).
pub(crate) fn note(fill: impl FnOnce(&mut Entry)) {
    let _ = CTX.try_with(|c| c.note(fill));
}

/// The current request's context, if the caller runs under the middleware.
pub(crate) fn current() -> Option<Arc<RequestCtx>> {
    CTX.try_with(Arc::clone).ok()
}

/// Runs `work` (a background run, outliving its HTTP request) inside the request's context:
/// its upstream bodies and final response go to the request's capture, which the middleware
/// then leaves to the background run to write. The hand-over happens when `carry` is called,
/// before the work is spawned, so the middleware cannot write the capture first.
pub(crate) fn carry<F: std::future::Future>(
    ctx: Option<Arc<RequestCtx>>,
    work: F,
) -> impl std::future::Future<Output = F::Output> {
    if let Some(ctx) = &ctx {
        ctx.deferred.store(true, Ordering::Relaxed);
    }
    // Boxed once: both arms below hold it, and a background run's future is large.
    let work = Box::pin(work);
    async move {
        match ctx {
            Some(ctx) => {
                let span = ctx.span.clone();
                CTX.scope(ctx, work.instrument(span)).await
            }
            None => work.await,
        }
    }
}

/// The current request's id, or a fresh one outside a request.
pub(crate) fn request_id() -> String {
    CTX.try_with(|c| c.request_id.clone())
        .unwrap_or_else(|_| crate::platform::ids::new("req"))
}

/// Time spent waiting on an upstream (sending until headers, reading a whole body, waiting for
/// a stream's first event, retry back-off): it is not the gateway's overhead.
pub(crate) fn upstream_waited(elapsed: Duration) {
    let _ = CTX.try_with(|c| {
        let nanos = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        c.upstream_nanos.fetch_add(nanos, Ordering::Relaxed);
    });
}

/// Records an upstream request body in the current capture (when capture is on).
pub(crate) fn capture_upstream(provider: &str, payload: &Bytes) {
    let _ = CTX.try_with(|c| {
        if let Some(capture) = &c.capture
            && let Ok(mut parts) = capture.parts.lock()
        {
            let body = capped(payload, capture.max_bytes);
            parts
                .upstream
                .push(json!({"provider": provider, "body": body}));
        }
    });
}

impl RequestCtx {
    /// Names the provider and model (a route pattern, see [`metrics::model_label`]) of the
    /// request's labels; the first call wins (a fallback is labelled by the provider that took
    /// the request, since only that one starts metering).
    /// Records the request's tenant, which owns its capture.
    pub(crate) fn set_tenant(&self, tenant: toolbridge_store::Tenant) {
        let _ = self.tenant.set(tenant);
    }

    /// Adds to this request's journal entry (when the console is on).
    pub(crate) fn note(&self, fill: impl FnOnce(&mut Entry)) {
        if let Some((_, entry)) = &self.journal
            && let Ok(mut entry) = entry.lock()
        {
            fill(&mut entry);
        }
    }

    pub(crate) fn set_labels(&self, provider: &str, model: String) {
        let _ = self.labels.set((provider.to_owned(), model));
    }

    /// The `(provider, model)` labels, `none` before a provider took the request.
    pub(crate) fn labels(&self) -> (&str, &str) {
        match self.labels.get() {
            Some((p, m)) => (p, m),
            None => (metrics::NONE, metrics::NONE),
        }
    }

    /// Time not spent waiting on upstreams so far.
    pub(crate) fn overhead(&self) -> Duration {
        let upstream = Duration::from_nanos(self.upstream_nanos.load(Ordering::Relaxed));
        self.started.elapsed().saturating_sub(upstream)
    }

    /// Whether a capture is on for this request and not written yet.
    pub(crate) fn capture_pending(&self) -> bool {
        self.capture
            .as_ref()
            .is_some_and(|c| !c.written.load(Ordering::Relaxed))
    }

    /// Writes the capture with the final response (once; later calls do nothing).
    pub(crate) async fn write_capture(&self, response: Option<&Value>, status: u16) {
        let text = match response {
            Some(r) if self.capture_pending() => serde_json::to_vec(r).ok(),
            _ => None,
        };
        self.write_capture_json(text.as_deref(), status).await;
    }

    /// [`Self::write_capture`] with the final response as its JSON text.
    pub(crate) async fn write_capture_json(&self, response: Option<&[u8]>, status: u16) {
        let Some(capture) = &self.capture else {
            return;
        };
        if capture.written.swap(true, Ordering::Relaxed) {
            return;
        }
        let record = match capture.parts.lock() {
            Ok(parts) => json!({
                "request_id": self.request_id,
                "route": self.route,
                "captured_at": crate::platform::time::now(),
                "status": status,
                "request": parts.request,
                "upstream": parts.upstream,
                "response": response.map(|text| capped(text, capture.max_bytes)),
            }),
            Err(_) => return,
        };
        let now = crate::platform::time::now();
        let expires = now.saturating_add(i64::try_from(capture.ttl.as_secs()).unwrap_or(i64::MAX));
        let tenant = self
            .tenant
            .get()
            .cloned()
            .unwrap_or_else(toolbridge_store::Tenant::open);
        if let Err(e) = capture
            .store
            .put_capture(&tenant, &self.request_id, &record, now, expires)
            .instrument(super::telemetry::stage_span!("store", what = "capture"))
            .await
        {
            tracing::warn!(
                request_id = self.request_id,
                "cannot store the request capture: {e}"
            );
        }
    }
}

/// One request's capture, while it is served.
struct Capture {
    store: Arc<dyn CaptureStore>,
    max_bytes: usize,
    ttl: Duration,
    parts: Mutex<Parts>,
    written: AtomicBool,
}

#[derive(Default)]
struct Parts {
    request: Value,
    upstream: Vec<Value>,
}

/// A body as JSON when it is JSON and fits `max_bytes`; else its first `max_bytes` as text,
/// marked truncated.
fn capped(bytes: &[u8], max_bytes: usize) -> Value {
    if bytes.len() <= max_bytes {
        return serde_json::from_slice(bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(bytes).into_owned()));
    }
    let head = String::from_utf8_lossy(&bytes[..max_bytes]).into_owned();
    json!({"truncated": true, "bytes": bytes.len(), "head": head})
}

/// What the middleware reads of the application: the configuration (capture settings, body
/// limit) and the capture store. Its own small state, so the observer sits below the
/// application state instead of importing it.
#[derive(Clone)]
pub(crate) struct Observer {
    pub config: Arc<Config>,
    pub captures: Option<Arc<dyn CaptureStore>>,
    /// The console's journal; `None` when the console is off.
    pub journal: Option<Arc<Journal>>,
}

impl Observer {
    /// A journal entry for a request of `route` named `request_id`, when the console is on and
    /// the route is a model request's.
    fn journal_entry(&self, route: &str, request_id: &str) -> Option<(Arc<Journal>, Mutex<Entry>)> {
        let journal = self.journal.as_ref()?;
        if !route.starts_with("/v1/responses") || route.contains('{') {
            return None;
        }
        let entry = Entry {
            id: request_id.to_owned(),
            at_ms: crate::platform::time::now_ms(),
            route: route.to_owned(),
            tenant: toolbridge_store::Tenant::open().name().to_owned(),
            ..Entry::default()
        };
        Some((journal.clone(), Mutex::new(entry)))
    }
}

/// The middleware's work around `inner`, the rest of the request's way (the router's middleware
/// calls it with the next layer). See the module documentation.
pub(crate) async fn observe<F, Fut>(state: &Observer, request: Request, inner: F) -> Response
where
    F: FnOnce(Request) -> Fut,
    Fut: std::future::Future<Output = Response>,
{
    let started = Instant::now();
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |p| p.as_str().to_owned());
    let request_id = crate::platform::ids::new("req");
    let span = tracing::info_span!("request", request_id = %request_id, route = %route);
    super::telemetry::continue_trace(&span, request.headers());
    let ops = &state.config.ops;
    let mut request = request;
    let capture = match (
        &state.captures,
        ops.capture.enabled && route == "/v1/responses",
    ) {
        (Some(store), true) => {
            let (parts, body) = request.into_parts();
            let bytes = match axum::body::to_bytes(body, state.config.body_limit).await {
                Ok(bytes) => bytes,
                Err(_) => {
                    return GatewayError::BodyTooLarge {
                        limit: state.config.body_limit,
                    }
                    .into_response();
                }
            };
            let captured = Parts {
                request: capped(&bytes, ops.capture.max_bytes),
                upstream: Vec::new(),
            };
            request = Request::from_parts(parts, Body::from(bytes));
            Some(Capture {
                store: store.clone(),
                max_bytes: ops.capture.max_bytes,
                ttl: ops.capture.ttl,
                parts: Mutex::new(captured),
                written: AtomicBool::new(false),
            })
        }
        _ => None,
    };
    let journal = state.journal_entry(&route, &request_id);
    let ctx = Arc::new(RequestCtx {
        request_id,
        route,
        started,
        upstream_nanos: AtomicU64::new(0),
        labels: OnceLock::new(),
        span: span.clone(),
        capture,
        deferred: AtomicBool::new(false),
        tenant: OnceLock::new(),
        journal,
        first_token_nanos: AtomicU64::new(0),
    });
    let mut response = CTX
        .scope(ctx.clone(), inner(request))
        .instrument(span)
        .await;
    let overhead = ctx.overhead();
    let status = response.status().as_u16();
    ctx.note(|entry| entry.http_status = status);
    let headers = response.headers_mut();
    if !headers.contains_key(REQUEST_ID_HEADER)
        && let Ok(v) = HeaderValue::from_str(&ctx.request_id)
    {
        headers.insert(REQUEST_ID_HEADER, v);
    }
    if let Ok(v) = HeaderValue::from_str(&milliseconds(overhead)) {
        headers.insert(OVERHEAD_HEADER, v);
    }
    let (provider, model) = ctx.labels();
    metrics::request(
        &RequestLabels {
            route: &ctx.route,
            provider,
            model,
            status,
        },
        started.elapsed(),
        overhead,
    );
    let streaming = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
    if streaming {
        let (parts, body) = response.into_parts();
        metrics::open_streams(&ctx.route, 1.0);
        let observed = Observed {
            inner: body.into_data_stream(),
            guard: OpenStream { ctx },
            first: false,
            first_token: false,
        };
        return Response::from_parts(parts, Body::from_stream(observed));
    }
    // A request refused for its key is not kept: capture must not let unauthenticated clients
    // write to the store. A background run writes its own when it ends; a WebSocket upgrade
    // (`101`) has no response of its own: each response on the socket is captured instead.
    if status != 401 && status != 101 && !ctx.deferred.load(Ordering::Relaxed) {
        ctx.write_capture(None, status).await;
    }
    response
}

/// The context of one response that arrives in a message on an open connection (a WebSocket
/// `response.create`), not in an HTTP request of its own: named `request_id`, in `span`, its
/// capture (when on) starting from `body`, owned by `tenant`. Run its work in [`Scoped`].
pub(crate) fn message_ctx(
    observer: &Observer,
    route: &str,
    request_id: String,
    body: &[u8],
    span: tracing::Span,
    tenant: toolbridge_store::Tenant,
) -> Arc<RequestCtx> {
    let ops = &observer.config.ops;
    let capture = observer
        .captures
        .as_ref()
        .filter(|_| ops.capture.enabled)
        .map(|store| Capture {
            store: store.clone(),
            max_bytes: ops.capture.max_bytes,
            ttl: ops.capture.ttl,
            parts: Mutex::new(Parts {
                request: capped(body, ops.capture.max_bytes),
                upstream: Vec::new(),
            }),
            written: AtomicBool::new(false),
        });
    let tenant_cell = OnceLock::new();
    let _ = tenant_cell.set(tenant);
    let journal = observer.journal_entry(route, &request_id);
    Arc::new(RequestCtx {
        journal,
        first_token_nanos: AtomicU64::new(0),
        request_id,
        route: route.to_owned(),
        started: Instant::now(),
        upstream_nanos: AtomicU64::new(0),
        labels: OnceLock::new(),
        span,
        capture,
        deferred: AtomicBool::new(false),
        tenant: tenant_cell,
    })
}

/// A stream polled inside a [`RequestCtx`] (its span and task-local), as the middleware polls
/// an HTTP stream's body; dropped before its capture is written (the client went away), it
/// writes it with status 499, as an HTTP stream does.
pub(crate) struct Scoped<S> {
    inner: S,
    ctx: Arc<RequestCtx>,
}

impl<S> Scoped<S> {
    pub(crate) fn new(ctx: Arc<RequestCtx>, inner: S) -> Self {
        Self { inner, ctx }
    }
}

impl<S: Stream + Unpin> Stream for Scoped<S> {
    type Item = S::Item;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        let span = this.ctx.span.clone();
        let _entered = span.enter();
        CTX.sync_scope(this.ctx.clone(), || this.inner.poll_next_unpin(cx))
    }
}

impl<S> Drop for Scoped<S> {
    fn drop(&mut self) {
        if self.ctx.capture_pending()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            let ctx = self.ctx.clone();
            runtime.spawn(async move { ctx.write_capture(None, CLIENT_CLOSED).await });
        }
    }
}

/// A stream's body, observed.
struct Observed {
    inner: BodyDataStream,
    guard: OpenStream,
    first: bool,
    first_token: bool,
}

/// Whether a piece of an SSE body carries output: one of its events is an `event:
/// response.….delta` (text, reasoning, call arguments, a custom tool's input, a refusal). The
/// gateway writes whole events, each with its `event:` line first, a batch of them per piece,
/// whether it translated the stream or relayed it.
fn is_delta_frame(piece: &[u8]) -> bool {
    const EVENT: &[u8] = b"event: response.";
    memchr::memmem::find_iter(piece, EVENT)
        .filter(|&at| at == 0 || piece[at - 1] == b'\n')
        .any(|at| {
            let rest = &piece[at + EVENT.len()..];
            let name = rest.split(|b| *b == b'\n').next().unwrap_or_default();
            name.ends_with(b".delta")
        })
}

/// Counts a stream open until dropped, whichever way it ends.
struct OpenStream {
    ctx: Arc<RequestCtx>,
}

impl Drop for OpenStream {
    fn drop(&mut self) {
        let (provider, model) = self.ctx.labels();
        metrics::open_streams(&self.ctx.route, -1.0);
        metrics::stream_ended(&self.ctx.route, provider, model, self.ctx.started.elapsed());
        // A stream that ended without its final response (the client went away) still leaves
        // its capture: the request and the upstream bodies so far, status 499, no response.
        if self.ctx.capture_pending()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            let ctx = self.ctx.clone();
            runtime.spawn(async move { ctx.write_capture(None, CLIENT_CLOSED).await });
        }
    }
}

impl Stream for Observed {
    type Item = Result<Bytes, axum::Error>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        let ctx = this.guard.ctx.clone();
        let span = ctx.span.clone();
        let _entered = span.enter();
        let polled = CTX.sync_scope(ctx, || this.inner.poll_next_unpin(cx));
        if let Poll::Ready(Some(Ok(chunk))) = &polled {
            let ctx = &this.guard.ctx;
            if !this.first {
                this.first = true;
                let (provider, model) = ctx.labels();
                metrics::first_byte(&ctx.route, provider, model, ctx.started.elapsed());
            }
            if !this.first_token && is_delta_frame(chunk) {
                this.first_token = true;
                let (provider, model) = ctx.labels();
                let elapsed = ctx.started.elapsed();
                metrics::first_token(&ctx.route, provider, model, elapsed);
                let nanos = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX).max(1);
                ctx.first_token_nanos.store(nanos, Ordering::Relaxed);
            }
        }
        polled
    }
}

/// `duration` in milliseconds with three decimals (`1.234`), rounded to the microsecond: what
/// `format!("{:.3}", ms)` writes, from integers (the float formatting cost about 1 K
/// instructions a request).
fn milliseconds(duration: std::time::Duration) -> String {
    let micros = (duration.as_nanos() + 500) / 1000;
    let mut digits = itoa::Buffer::new();
    let mut text = String::with_capacity(12);
    text.push_str(digits.format(micros / 1000));
    text.push('.');
    let fraction = digits.format(micros % 1000 + 1000);
    text.push_str(&fraction[1..]);
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The overhead header's text is the float formatting's, from integers.
    #[test]
    fn milliseconds_are_written_as_the_float_formatting_writes_them() {
        for nanos in [
            0u64,
            1,
            499,
            500,
            999,
            1_000,
            1_499,
            1_500,
            12_345,
            999_499,
            999_500,
            1_000_000,
            1_234_567,
            45_678_901,
            3_600_000_000_000,
        ] {
            let duration = std::time::Duration::from_nanos(nanos);
            let micros = (nanos + 500) / 1000;
            let float = format!("{:.3}", micros as f64 / 1000.0);
            assert_eq!(milliseconds(duration), float, "{nanos} ns");
        }
    }

    #[test]
    fn output_deltas_are_told_from_other_frames() {
        assert!(is_delta_frame(
            b"event: response.output_text.delta\ndata: {}\n\n"
        ));
        assert!(is_delta_frame(
            b"event: response.function_call_arguments.delta\ndata: {}\n\n"
        ));
        assert!(!is_delta_frame(b"event: response.created\ndata: {}\n\n"));
        assert!(!is_delta_frame(
            b"event: response.output_text.done\ndata: {\"delta\": 1}\n\n"
        ));
        assert!(!is_delta_frame(b": keep-alive\n\n"));
        // A batch of events in one piece: any of them.
        assert!(is_delta_frame(
            b"event: response.created\ndata: {}\n\nevent: response.output_text.delta\ndata: {}\n\n"
        ));
        // The words inside an event's data are not an event.
        assert!(!is_delta_frame(
            b"event: response.created\ndata: {\"t\":\"event: response.output_text.delta\"}\n\n"
        ));
    }

    #[test]
    fn captures_are_capped_and_marked() {
        assert_eq!(capped(br#"{"a":1}"#, 100), json!({"a": 1}));
        assert_eq!(capped(b"not json", 100), json!("not json"));
        let big = capped(br#"{"input":"0123456789"}"#, 5);
        assert_eq!(big["truncated"], true);
        assert_eq!(big["head"], "{\"inp");
    }
}
