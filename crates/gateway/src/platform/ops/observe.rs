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

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{MatchedPath, Request};
use axum::http::{HeaderValue, header};
use axum::response::Response;
use toolbridge_store::CaptureStore;
use tracing::Instrument;

mod capture;
mod streams;

pub(crate) use capture::capture_upstream;
pub(crate) use streams::Scoped;

use capture::{Capture, Parts, capped};
#[cfg(test)]
use streams::is_delta_frame;
use streams::{Observed, OpenStream};

use super::journal::{Entry, Journal};
use super::metrics::{self, RequestLabels};
use crate::config::Config;

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
    let (request, capture) = match capture::begin(state, &route, request).await {
        Ok(begun) => begun,
        Err(refused) => return refused,
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
    use serde_json::json;

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
