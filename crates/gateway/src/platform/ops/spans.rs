//! The span layer: a `tracing` layer that records each span's trace identity, start and end
//! and fields in the span itself while it is open, and hands the closed span to an exporter
//! thread, which builds the OpenTelemetry span data and exports it in batches (OTLP/HTTP).
//!
//! Why our own layer: the request path should pay for a span no more than a few clock reads,
//! an id and its fields. The general OpenTelemetry layer builds a span builder, a context and
//! the SDK's span for every span on the thread that serves the request (about 2 µs each, seven
//! spans a request); here that work runs on the exporter thread, off the request path. Both the
//! queue and the batches are bounded (`OTEL_BSP_MAX_QUEUE_SIZE`, `OTEL_BSP_MAX_EXPORT_BATCH_SIZE`,
//! `OTEL_BSP_SCHEDULE_DELAY`, with the SDK's defaults); a span that finds the queue full is
//! dropped and counted, never waited for.
//!
//! Semantics kept from the OpenTelemetry SDK: a span's parent is its `tracing` parent; a root
//! span may continue a remote trace ([`set_remote_parent`], from an incoming `traceparent`);
//! head sampling follows `OTEL_TRACES_SAMPLER` ([`Sampler`]; by default a remote parent that is
//! not sampled leaves its trace unexported, and every other trace is kept), and an unsampled
//! span records no fields; `tracestate` travels with the trace. Warnings and errors logged
//! inside a span become its events, and an error marks the span's status. The `request` span
//! is the server span, `upstream` the client span, the others internal.
//!
//! This file holds the layer and the trace identity; the exporter thread is in `spans/export.rs`
//! and the batching and sampler settings in `spans/sampling.rs`.

mod export;
mod sampling;

pub use export::start;
pub use sampling::{Batching, Sampler};

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, SyncSender, TrySendError};
use std::time::{Duration, Instant, SystemTime};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::Registry;
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::registry::LookupSpan;

/// Events kept per span; more are counted as dropped.
const MAX_EVENTS: usize = 32;
/// Bytes kept of one event's message.
const MAX_MESSAGE: usize = 1024;

/// The trace identity a span passes to its children and to upstream requests.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceContext {
    pub trace_id: u128,
    pub span_id: u64,
    pub sampled: bool,
    /// The incoming `tracestate`, carried unchanged.
    pub trace_state: Option<Arc<str>>,
}

impl TraceContext {
    /// The W3C `traceparent` header value: `00-<trace id>-<span id>-<flags>`, lowercase hex.
    pub fn traceparent(&self) -> String {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut out = String::with_capacity(55);
        out.push_str("00-");
        for shift in (0..32).rev() {
            out.push(char::from(
                HEX[usize::from((self.trace_id >> (shift * 4)) as u8 & 0xf)],
            ));
        }
        out.push('-');
        for shift in (0..16).rev() {
            out.push(char::from(
                HEX[usize::from((self.span_id >> (shift * 4)) as u8 & 0xf)],
            ));
        }
        out.push_str(if self.sampled { "-01" } else { "-00" });
        out
    }
}

/// One open span, kept in its extensions.
struct Open {
    context: TraceContext,
    /// The sampler that decided, kept on root spans for a later remote parent.
    sampler: Sampler,
    parent_id: u64,
    remote_parent: bool,
    start: SystemTime,
    attributes: Vec<(&'static str, Attr)>,
    events: Vec<Note>,
    dropped_events: u32,
    error: Option<String>,
}

enum Attr {
    Str(String),
    Bool(bool),
    I64(i64),
    F64(f64),
}

/// A warning or error logged inside a span.
struct Note {
    at: SystemTime,
    level: Level,
    message: String,
}

/// A closed span on its way to the exporter thread.
struct Closed {
    name: &'static str,
    open: Open,
    end: SystemTime,
}

/// Why the exporter thread is woken before its schedule.
enum Wake {
    /// A batch's worth of spans is queued.
    Batch,
    /// Export what is queued, shut the exporter down and answer.
    Stop(SyncSender<()>),
}

/// The layer. See the module documentation.
///
/// Closed spans go into a bounded queue the exporter thread does not wait on, so sending one
/// never wakes that thread (a wake-up is a system call on the request path); the thread sleeps
/// until its schedule, or until a batch's worth is queued, or until it is stopped.
pub struct SpanLayer {
    spans: SyncSender<Closed>,
    wake: SyncSender<Wake>,
    /// Spans queued since the exporter thread last drained the queue.
    queued: Arc<AtomicUsize>,
    batch: usize,
    sampler: Sampler,
    dropped: Arc<AtomicU64>,
}

/// Stops the exporter thread when dropped, after it exported what was queued (bounded wait).
pub struct SpansGuard {
    wake: SyncSender<Wake>,
}

impl Drop for SpansGuard {
    fn drop(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(5);
        let (done, answered) = mpsc::sync_channel(1);
        let mut message = Wake::Stop(done);
        loop {
            match self.wake.try_send(message) {
                Ok(()) => break,
                Err(TrySendError::Full(m)) if Instant::now() < deadline => {
                    message = m;
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err(_) => return,
            }
        }
        let _ = answered.recv_timeout(deadline.saturating_duration_since(Instant::now()));
    }
}

fn new_trace_id() -> u128 {
    loop {
        let id = fastrand::u128(..);
        if id != 0 {
            return id;
        }
    }
}

fn new_span_id() -> u64 {
    loop {
        let id = fastrand::u64(..);
        if id != 0 {
            return id;
        }
    }
}

impl<S> Layer<S> for SpanLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else {
            return;
        };
        let inherited = span.parent().and_then(|parent| {
            parent
                .extensions()
                .get::<Open>()
                .map(|open| open.context.clone())
        });
        let (context, parent_id) = match inherited {
            Some(parent) => {
                let parent_id = parent.span_id;
                (
                    TraceContext {
                        span_id: new_span_id(),
                        ..parent
                    },
                    parent_id,
                )
            }
            None => {
                let trace_id = new_trace_id();
                (
                    TraceContext {
                        trace_id,
                        span_id: new_span_id(),
                        sampled: self.sampler.samples(trace_id),
                        trace_state: None,
                    },
                    0,
                )
            }
        };
        let sampled = context.sampled;
        let mut open = Open {
            context,
            sampler: self.sampler,
            parent_id,
            remote_parent: false,
            start: SystemTime::now(),
            attributes: Vec::with_capacity(attrs.fields().len()),
            events: Vec::new(),
            dropped_events: 0,
            error: None,
        };
        if sampled {
            attrs.record(&mut Fields(&mut open.attributes));
        }
        span.extensions_mut().insert(open);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id)
            && let Some(open) = span.extensions_mut().get_mut::<Open>()
            && open.context.sampled
        {
            values.record(&mut Fields(&mut open.attributes));
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let level = *event.metadata().level();
        if level > Level::WARN {
            return;
        }
        let Some(span) = ctx.event_span(event) else {
            return;
        };
        let mut extensions = span.extensions_mut();
        let Some(open) = extensions.get_mut::<Open>().filter(|o| o.context.sampled) else {
            return;
        };
        let mut message = Message(String::new());
        event.record(&mut message);
        let mut message = message.0;
        if message.len() > MAX_MESSAGE {
            let mut cut = MAX_MESSAGE;
            while !message.is_char_boundary(cut) {
                cut -= 1;
            }
            message.truncate(cut);
        }
        if level == Level::ERROR && open.error.is_none() {
            open.error = Some(message.clone());
        }
        if open.events.len() < MAX_EVENTS {
            open.events.push(Note {
                at: SystemTime::now(),
                level,
                message,
            });
        } else {
            open.dropped_events = open.dropped_events.saturating_add(1);
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(&id) else {
            return;
        };
        let Some(open) = span.extensions_mut().remove::<Open>() else {
            return;
        };
        if !open.context.sampled {
            return;
        }
        let closed = Closed {
            name: span.name(),
            open,
            end: SystemTime::now(),
        };
        if self.spans.try_send(closed).is_err() {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        } else if self.queued.fetch_add(1, Ordering::Relaxed) + 1 == self.batch {
            let _ = self.wake.try_send(Wake::Batch);
        }
    }
}

/// Span fields as attributes.
struct Fields<'a>(&'a mut Vec<(&'static str, Attr)>);

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.push((field.name(), Attr::Str(value.to_owned())));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.push((field.name(), Attr::Bool(value)));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.push((field.name(), Attr::I64(value)));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        let value = match i64::try_from(value) {
            Ok(i) => Attr::I64(i),
            Err(_) => Attr::Str(value.to_string()),
        };
        self.0.push((field.name(), value));
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.0.push((field.name(), Attr::F64(value)));
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.push((field.name(), Attr::Str(format!("{value:?}"))));
    }
}

/// An event's message, with its other fields after it as `name=value`.
struct Message(String);

impl Visit for Message {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        use std::fmt::Write;
        if !self.0.is_empty() {
            self.0.push(' ');
        }
        if field.name() == "message" {
            let _ = write!(self.0, "{value:?}");
        } else {
            let _ = write!(self.0, "{}={value:?}", field.name());
        }
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.record_debug(field, &format_args!("{value}"));
    }
}

/// Makes `span` (a root span, before it has children) continue the trace of `remote`: its
/// trace id and the remote span as its parent; the remote sampling decision when the sampler is
/// parent-based, else the sampler's decision on the remote trace id.
pub fn set_remote_parent(span: &tracing::Span, remote: &TraceContext) {
    span.with_subscriber(|(id, dispatch)| {
        if let Some(registry) = dispatch.downcast_ref::<Registry>()
            && let Some(span) = registry.span(id)
            && let Some(open) = span.extensions_mut().get_mut::<Open>()
        {
            open.context.trace_id = remote.trace_id;
            open.context.sampled = if open.sampler.parent_based {
                remote.sampled
            } else {
                open.sampler.samples(remote.trace_id)
            };
            open.context.trace_state = remote.trace_state.clone();
            open.parent_id = remote.span_id;
            open.remote_parent = true;
        }
    });
}

/// The trace identity of `span`, when the span layer records it.
pub fn context_of(span: &tracing::Span) -> Option<TraceContext> {
    span.with_subscriber(|(id, dispatch)| read_context(dispatch, id))
        .flatten()
}

/// The trace identity of the span the current thread is in, when the span layer records it
/// (without taking a handle on the span, as [`tracing::Span::current`] would).
pub fn current_context() -> Option<TraceContext> {
    tracing::dispatcher::get_default(|dispatch| {
        let current = dispatch.current_span();
        read_context(dispatch, current.id()?)
    })
}

fn read_context(dispatch: &tracing::Dispatch, id: &Id) -> Option<TraceContext> {
    let registry = dispatch.downcast_ref::<Registry>()?;
    let span = registry.span(id)?;
    let extensions = span.extensions();
    extensions.get::<Open>().map(|open| open.context.clone())
}

#[cfg(test)]
mod tests;
