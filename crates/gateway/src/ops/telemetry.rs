//! Logs and traces: the process's `tracing` subscriber (text or JSON lines on stderr, filtered
//! by `RUST_LOG`), and, when an OTLP endpoint is configured, an OpenTelemetry layer exporting
//! spans over OTLP/HTTP (protobuf, the blocking reqwest client on the batch processor's own
//! thread: the async client has no reactor there) with W3C trace context: an incoming
//! `traceparent` continues its trace, and upstream requests carry the current one.
//!
//! The subscriber is installed once, at start; a reload does not change the log format or the
//! exporter (the operator restarts for that). JSON lines carry their spans, so every line
//! logged while a request is served names its `request_id`. Headers are never logged, and
//! neither are prompts or completions (see the request capture for those, opt-in).

use std::sync::atomic::{AtomicBool, Ordering};

use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::Layer;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

use super::config::{LogFormat, OpsConfig};

/// True once spans are exported: only then is trace context read and written.
static EXPORTING: AtomicBool = AtomicBool::new(false);

/// Flushes and stops the exporter when dropped (at the end of `main`).
pub struct TelemetryGuard {
    provider: Option<SdkTracerProvider>,
}

impl Drop for TelemetryGuard {
    fn drop(&mut self) {
        if let Some(provider) = self.provider.take()
            && let Err(e) = provider.shutdown()
        {
            eprintln!("warning: flushing traces failed: {e}");
        }
    }
}

/// Installs the process's subscriber. Call it outside any async runtime (the blocking exporter
/// client builds its own).
pub fn init(ops: &OpsConfig) -> Result<TelemetryGuard, String> {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let fmt = match ops.log_format {
        LogFormat::Json => tracing_subscriber::fmt::layer()
            .json()
            .with_current_span(false)
            .with_span_list(true)
            .with_writer(std::io::stderr)
            .boxed(),
        LogFormat::Text => tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .boxed(),
    };
    let provider = match &ops.telemetry.traces_url {
        None => None,
        Some(url) => {
            let exporter = opentelemetry_otlp::SpanExporter::builder()
                .with_http()
                .with_protocol(Protocol::HttpBinary)
                .with_endpoint(url.clone())
                .build()
                .map_err(|e| format!("cannot build the OTLP exporter: {e}"))?;
            let resource = opentelemetry_sdk::Resource::builder()
                .with_service_name(ops.telemetry.service_name.clone())
                .build();
            Some(
                SdkTracerProvider::builder()
                    .with_batch_exporter(exporter)
                    .with_resource(resource)
                    .build(),
            )
        }
    };
    let otel = provider.as_ref().map(otel_layer);
    tracing_subscriber::registry()
        .with(fmt)
        .with(otel)
        .with(filter)
        .try_init()
        .map_err(|e| format!("cannot install the log subscriber: {e}"))?;
    if provider.is_some() {
        opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
        EXPORTING.store(true, Ordering::Relaxed);
    }
    Ok(TelemetryGuard { provider })
}

/// The OpenTelemetry layer over `provider`'s tracer, without the per-span extras the request
/// path would pay for on every span (source location, target and thread attributes, busy/idle
/// clocks read and the context attached on every enter and exit).
pub fn otel_layer<S>(
    provider: &SdkTracerProvider,
) -> tracing_opentelemetry::OpenTelemetryLayer<S, opentelemetry_sdk::trace::Tracer>
where
    S: tracing::Subscriber + for<'span> tracing_subscriber::registry::LookupSpan<'span>,
{
    tracing_opentelemetry::layer()
        .with_tracer(provider.tracer("toolbridge"))
        .with_location(false)
        .with_threads(false)
        .with_tracked_inactivity(false)
        .with_target(false)
        // Entering a span would otherwise attach its OpenTelemetry context to the thread on
        // every poll; nothing here reads that context (propagation reads the span's own).
        .with_context_activation(false)
}

/// Installs the subscriber of commands that do not serve: text, or JSON with
/// `TOOLBRIDGE_LOG_FORMAT=json`; no traces.
pub fn init_default() {
    let mut ops = OpsConfig::default();
    if let Some(format) = std::env::var("TOOLBRIDGE_LOG_FORMAT")
        .ok()
        .and_then(|f| LogFormat::parse(&f))
    {
        ops.log_format = format;
    }
    let _ = init(&ops);
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

struct HeaderWriter<'a>(&'a mut http::HeaderMap);

impl Injector for HeaderWriter<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(name), Ok(value)) = (
            http::HeaderName::from_bytes(key.as_bytes()),
            http::HeaderValue::from_str(&value),
        ) {
            self.0.insert(name, value);
        }
    }
}

/// Makes `span` continue the trace of an incoming `traceparent`, if any.
pub fn continue_trace(span: &tracing::Span, headers: &http::HeaderMap) {
    if !EXPORTING.load(Ordering::Relaxed) || !headers.contains_key("traceparent") {
        return;
    }
    let parent = TraceContextPropagator::new().extract(&HeaderReader(headers));
    let _ = span.set_parent(parent);
}

/// Writes the current span's trace context (`traceparent`) into upstream request headers.
pub fn inject(headers: &mut http::HeaderMap) {
    if !EXPORTING.load(Ordering::Relaxed) {
        return;
    }
    let context = tracing::Span::current().context();
    TraceContextPropagator::new().inject_context(&context, &mut HeaderWriter(headers));
}
