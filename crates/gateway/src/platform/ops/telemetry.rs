//! Logs and traces: the process's `tracing` subscriber (text or JSON lines on stderr, filtered
//! by `RUST_LOG`), and, when an OTLP endpoint is configured, the span layer ([`super::spans`])
//! exporting spans over OTLP/HTTP (protobuf, the blocking reqwest client on the exporter's own
//! thread: the async client has no reactor there) with W3C trace context: an incoming
//! `traceparent` continues its trace, and upstream requests carry the current one.
//!
//! The stages of a request (`parse`, `plan`, `translate`, `upstream`, `reconstruct`, `store`)
//! get spans of their own only when spans are exported ([`stage_span!`]): without an exporter
//! no one reads them, and they cost a request more than its one log line. A log line names its
//! request through the `request` span either way.
//!
//! The subscriber is installed once, at start; a reload does not change the log format or the
//! exporter (the operator restarts for that). JSON lines carry their spans, so every line
//! logged while a request is served names its `request_id`. Headers are never logged, and
//! neither are prompts or completions (see the request capture for those, opt-in).
//!
//! When serving, lines are written by a thread of their own ([`super::log_writer`]: one bounded
//! buffer, written out a lingering batch at a time), so a request thread never makes a write to
//! stderr nor wakes a thread per line; [`TelemetryGuard`] waits (bounded) for the rest at exit.
//! The other commands write directly (few lines).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use opentelemetry::propagation::{Extractor, TextMapPropagator};
use opentelemetry::trace::TraceContextExt;
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SpanExporter as _;
use tracing_subscriber::Layer;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

use super::log_line::{PlainFields, PlainLine};
use super::log_writer::LogWriterGuard;
use super::spans::{self, Batching, SpansGuard, TraceContext};
use crate::config::ops::{LogFormat, OpsConfig};

/// Whether spans are exported (an OTLP endpoint is configured): set once, at start.
static EXPORTING: AtomicBool = AtomicBool::new(false);

/// Whether spans are exported, so that a request's stages get spans of their own.
pub(crate) fn exporting() -> bool {
    EXPORTING.load(Ordering::Relaxed)
}

/// An `info` span for a stage of a request, when spans are exported; else a disabled span
/// (free to make, enter and drop). Takes what `tracing::info_span!` takes.
macro_rules! stage_span {
    ($($arg:tt)*) => {
        if $crate::platform::ops::telemetry::exporting() {
            tracing::info_span!($($arg)*)
        } else {
            tracing::Span::none()
        }
    };
}
pub(crate) use stage_span;

/// Flushes and stops the span exporter when dropped (at the end of `main`).
/// Also writes out the queued log lines.
pub(crate) struct TelemetryGuard {
    _spans: Option<SpansGuard>,
    _logs: Option<LogWriterGuard>,
}

/// Installs the process's subscriber, logs written by their own thread. Call it outside any
/// async runtime (the blocking exporter client builds its own).
pub(crate) fn init(ops: &OpsConfig) -> Result<TelemetryGuard, String> {
    let (writer, guard) =
        super::log_writer::start().map_err(|e| format!("cannot start the log writer: {e}"))?;
    install(ops, writer, Some(guard))
}

fn install<W>(
    ops: &OpsConfig,
    writer: W,
    logs: Option<LogWriterGuard>,
) -> Result<TelemetryGuard, String>
where
    W: for<'w> tracing_subscriber::fmt::MakeWriter<'w> + Send + Sync + 'static,
{
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let fmt = match ops.log_format {
        LogFormat::Json => tracing_subscriber::fmt::layer()
            .json()
            .with_current_span(false)
            .with_span_list(true)
            .with_ansi(false)
            .with_writer(writer)
            .boxed(),
        // Colour codes only for a person at a terminal: a log file or collector gets plain
        // text, the same bytes written without the colour machinery (`log_line`).
        LogFormat::Text if std::io::IsTerminal::is_terminal(&std::io::stderr()) => {
            tracing_subscriber::fmt::layer()
                .with_ansi(true)
                .with_writer(writer)
                .boxed()
        }
        LogFormat::Text => tracing_subscriber::fmt::layer()
            .with_ansi(false)
            .fmt_fields(PlainFields)
            .event_format(PlainLine)
            .with_writer(writer)
            .boxed(),
    };
    let (layer, guard) = match &ops.telemetry.traces_url {
        None => (None, None),
        Some(url) => {
            let mut exporter = opentelemetry_otlp::SpanExporter::builder()
                .with_http()
                .with_protocol(Protocol::HttpBinary)
                .with_endpoint(url.clone())
                .build()
                .map_err(|e| format!("cannot build the OTLP exporter: {e}"))?;
            let resource = opentelemetry_sdk::Resource::builder()
                .with_service_name(ops.telemetry.service_name.clone())
                .build();
            exporter.set_resource(&resource);
            let (layer, guard) =
                spans::start(exporter, Batching::from_env(), ops.telemetry.sampler)
                    .map_err(|e| format!("cannot start the span exporter: {e}"))?;
            EXPORTING.store(true, Ordering::Relaxed);
            (Some(layer), Some(guard))
        }
    };
    tracing_subscriber::registry()
        .with(fmt)
        .with(layer)
        .with(filter)
        .try_init()
        .map_err(|e| format!("cannot install the log subscriber: {e}"))?;
    Ok(TelemetryGuard {
        _spans: guard,
        _logs: logs,
    })
}

/// Installs the subscriber of commands that do not serve: text, or JSON with
/// `TOOLBRIDGE_LOG_FORMAT=json`; no traces.
pub(crate) fn init_default() {
    let mut ops = OpsConfig::default();
    if let Some(format) = std::env::var("TOOLBRIDGE_LOG_FORMAT")
        .ok()
        .and_then(|f| LogFormat::parse(&f))
    {
        ops.log_format = format;
    }
    let _ = install(&ops, std::io::stderr, None);
}

struct HeaderReader<'a>(&'a http::HeaderMap);

impl Extractor for HeaderReader<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }
    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(http::HeaderName::as_str).collect()
    }
}

/// Makes `span` continue the trace of an incoming `traceparent` (and `tracestate`), if any.
/// Without the span layer (no traces exported) this does nothing.
pub(crate) fn continue_trace(span: &tracing::Span, headers: &http::HeaderMap) {
    if !headers.contains_key("traceparent") {
        return;
    }
    let parent = TraceContextPropagator::new().extract(&HeaderReader(headers));
    let remote = parent.span().span_context().clone();
    if !remote.is_valid() {
        return;
    }
    let state = remote.trace_state().header();
    spans::set_remote_parent(
        span,
        &TraceContext {
            trace_id: u128::from_be_bytes(remote.trace_id().to_bytes()),
            span_id: u64::from_be_bytes(remote.span_id().to_bytes()),
            sampled: remote.is_sampled(),
            trace_state: (!state.is_empty()).then(|| Arc::from(state)),
        },
    );
}

/// The current span's trace context as upstream request headers: `traceparent`, and
/// `tracestate` when the trace came with one; nothing without the span layer.
pub(crate) fn outgoing() -> Option<(http::HeaderValue, Option<http::HeaderValue>)> {
    let context = spans::current_context()?;
    let parent = http::HeaderValue::from_str(&context.traceparent()).ok()?;
    let state = context
        .trace_state
        .as_deref()
        .and_then(|s| http::HeaderValue::from_str(s).ok());
    Some((parent, state))
}
