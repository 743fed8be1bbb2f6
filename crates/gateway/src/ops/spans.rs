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

use std::borrow::Cow;
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::time::{Duration, Instant, SystemTime};

use opentelemetry::trace::{
    SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState,
};
use opentelemetry::{InstrumentationScope, KeyValue};
use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanExporter, SpanLinks};
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

/// Batching, as the OpenTelemetry batch processor's environment variables set it.
#[derive(Clone, Copy, Debug)]
pub struct Batching {
    pub queue: usize,
    pub batch: usize,
    pub delay: Duration,
}

impl Batching {
    /// From `OTEL_BSP_*`, with the SDK's defaults (2048, 512, 5 s) for what is unset or invalid.
    pub fn from_env() -> Self {
        let read = |name: &str, default: u64| {
            std::env::var(name)
                .ok()
                .and_then(|v| v.trim().parse::<u64>().ok())
                .filter(|v| *v > 0)
                .unwrap_or(default)
        };
        let queue = usize::try_from(read("OTEL_BSP_MAX_QUEUE_SIZE", 2048)).unwrap_or(2048);
        let batch = usize::try_from(read("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 512)).unwrap_or(512);
        Batching {
            queue,
            batch: batch.min(queue),
            delay: Duration::from_millis(read("OTEL_BSP_SCHEDULE_DELAY", 5000)),
        }
    }
}

/// Which traces are recorded, as `OTEL_TRACES_SAMPLER` (and `OTEL_TRACES_SAMPLER_ARG`, the
/// ratio) name it: `always_on`, `always_off`, `traceidratio`, and their `parentbased_` forms,
/// which follow a remote caller's decision. The default is `parentbased_always_on`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sampler {
    /// The share of new traces recorded, 0 to 1.
    pub ratio: f64,
    /// Whether a remote parent's decision wins over the ratio.
    pub parent_based: bool,
}

impl Default for Sampler {
    fn default() -> Self {
        Sampler {
            ratio: 1.0,
            parent_based: true,
        }
    }
}

impl Sampler {
    /// From `OTEL_TRACES_SAMPLER` and `OTEL_TRACES_SAMPLER_ARG` as `env` reads them; an
    /// unknown sampler or a ratio outside 0..=1 is an error: `(variable, message)`.
    pub fn from_env(env: &dyn Fn(&str) -> Option<String>) -> Result<Self, (&'static str, String)> {
        let name = env("OTEL_TRACES_SAMPLER").unwrap_or_default();
        let arg = env("OTEL_TRACES_SAMPLER_ARG");
        Self::parse(name.trim(), arg.as_deref().map(str::trim))
    }

    fn parse(name: &str, arg: Option<&str>) -> Result<Self, (&'static str, String)> {
        let ratio = || match arg {
            None | Some("") => Ok(1.0),
            Some(a) => match a.parse::<f64>() {
                Ok(r) if (0.0..=1.0).contains(&r) => Ok(r),
                _ => Err((
                    "OTEL_TRACES_SAMPLER_ARG",
                    format!("`{a}` is not a ratio between 0 and 1"),
                )),
            },
        };
        let (ratio, parent_based) = match name {
            "" | "parentbased_always_on" => (1.0, true),
            "always_on" => (1.0, false),
            "always_off" => (0.0, false),
            "parentbased_always_off" => (0.0, true),
            "traceidratio" => (ratio()?, false),
            "parentbased_traceidratio" => (ratio()?, true),
            other => {
                return Err((
                    "OTEL_TRACES_SAMPLER",
                    format!(
                        "`{other}` is not one of always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off, parentbased_traceidratio"
                    ),
                ));
            }
        };
        Ok(Sampler {
            ratio,
            parent_based,
        })
    }

    /// How `toolbridge check` names it.
    pub fn describe(&self) -> String {
        let base = match self.ratio {
            r if r >= 1.0 => "always_on".to_owned(),
            r if r <= 0.0 => "always_off".to_owned(),
            r => format!("traceidratio {r}"),
        };
        if self.parent_based {
            format!("parentbased_{base}")
        } else {
            base
        }
    }

    /// The decision for a new trace: the OpenTelemetry ratio rule on the trace id's low 63 bits,
    /// so every service sampling by the same ratio keeps the same traces.
    fn samples(&self, trace_id: u128) -> bool {
        if self.ratio >= 1.0 {
            return true;
        }
        // Truncation is the rule: the bound is ratio × 2^63, as an integer.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let bound = (self.ratio * (1u64 << 63) as f64) as u64;
        #[allow(clippy::cast_possible_truncation)]
        let low = (trace_id as u64) >> 1;
        low < bound
    }
}

/// Starts the exporter thread over `exporter` and returns the layer feeding it, with the guard
/// that flushes it at the end.
pub fn start<E>(
    exporter: E,
    batching: Batching,
    sampler: Sampler,
) -> std::io::Result<(SpanLayer, SpansGuard)>
where
    E: SpanExporter + 'static,
{
    let (spans, queue) = mpsc::sync_channel(batching.queue);
    let (wake, woken) = mpsc::sync_channel(4);
    let queued = Arc::new(AtomicUsize::new(0));
    let dropped = Arc::new(AtomicU64::new(0));
    let thread = Exporting {
        exporter,
        queue,
        queued: queued.clone(),
        dropped: dropped.clone(),
        batching,
        scope: InstrumentationScope::builder("toolbridge").build(),
    };
    std::thread::Builder::new()
        .name("toolbridge-otlp".to_owned())
        .spawn(move || thread.run(&woken))?;
    Ok((
        SpanLayer {
            spans,
            wake: wake.clone(),
            queued,
            batch: batching.batch,
            sampler,
            dropped,
        },
        SpansGuard { wake },
    ))
}

/// The exporter thread's state.
struct Exporting<E> {
    exporter: E,
    queue: Receiver<Closed>,
    queued: Arc<AtomicUsize>,
    dropped: Arc<AtomicU64>,
    batching: Batching,
    scope: InstrumentationScope,
}

impl<E: SpanExporter> Exporting<E> {
    fn run(&self, woken: &Receiver<Wake>) {
        let mut deadline = Instant::now() + self.batching.delay;
        loop {
            let wait = deadline.saturating_duration_since(Instant::now());
            let stop = match woken.recv_timeout(wait) {
                Ok(Wake::Batch) => None,
                Ok(Wake::Stop(done)) => Some(Some(done)),
                Err(RecvTimeoutError::Timeout) => {
                    deadline = Instant::now() + self.batching.delay;
                    None
                }
                Err(RecvTimeoutError::Disconnected) => Some(None),
            };
            self.drain();
            if let Some(done) = stop {
                let _ = self.exporter.shutdown();
                if let Some(done) = done {
                    let _ = done.send(());
                }
                return;
            }
        }
    }

    /// Exports what is queued now, in batches (at most a queue's worth, so a steady stream of
    /// spans cannot keep the thread here).
    fn drain(&self) {
        self.queued.store(0, Ordering::Relaxed);
        let mut batch = Vec::with_capacity(self.batching.batch);
        for _ in 0..self.batching.queue {
            let Ok(closed) = self.queue.try_recv() else {
                break;
            };
            batch.push(span_data(closed, &self.scope));
            if batch.len() >= self.batching.batch {
                export(&self.exporter, &mut batch, &self.dropped);
            }
        }
        export(&self.exporter, &mut batch, &self.dropped);
    }
}

fn export<E: SpanExporter>(exporter: &E, batch: &mut Vec<SpanData>, dropped: &AtomicU64) {
    let lost = dropped.swap(0, Ordering::Relaxed);
    if lost > 0 {
        tracing::warn!("{lost} spans were dropped: the export queue was full");
    }
    if batch.is_empty() {
        return;
    }
    let spans = std::mem::take(batch);
    let count = spans.len();
    if let Err(e) = futures::executor::block_on(exporter.export(spans)) {
        tracing::warn!("cannot export {count} spans: {e}");
    }
}

fn span_data(closed: Closed, scope: &InstrumentationScope) -> SpanData {
    let Closed { name, open, end } = closed;
    let context = &open.context;
    let trace_state = context
        .trace_state
        .as_deref()
        .and_then(|s| TraceState::from_str(s).ok())
        .unwrap_or_default();
    let span_context = SpanContext::new(
        TraceId::from_bytes(context.trace_id.to_be_bytes()),
        SpanId::from_bytes(context.span_id.to_be_bytes()),
        TraceFlags::SAMPLED,
        false,
        trace_state,
    );
    let attributes = open
        .attributes
        .into_iter()
        .map(|(key, value)| match value {
            Attr::Str(s) => KeyValue::new(key, s),
            Attr::Bool(b) => KeyValue::new(key, b),
            Attr::I64(i) => KeyValue::new(key, i),
            Attr::F64(f) => KeyValue::new(key, f),
        })
        .collect();
    let events = open
        .events
        .into_iter()
        .map(|note| {
            opentelemetry::trace::Event::new(
                note.level.as_str().to_ascii_lowercase(),
                note.at,
                vec![
                    KeyValue::new("level", note.level.as_str()),
                    KeyValue::new("message", note.message),
                ],
                0,
            )
        })
        .collect();
    let mut span_events = SpanEvents::default();
    span_events.events = events;
    span_events.dropped_count = open.dropped_events;
    SpanData {
        span_context,
        parent_span_id: if open.parent_id == 0 {
            SpanId::INVALID
        } else {
            SpanId::from_bytes(open.parent_id.to_be_bytes())
        },
        parent_span_is_remote: open.remote_parent,
        span_kind: kind_of(name),
        name: Cow::Borrowed(name),
        start_time: open.start,
        end_time: end,
        attributes,
        dropped_attributes_count: 0,
        events: span_events,
        links: SpanLinks::default(),
        status: match open.error {
            Some(message) => Status::error(message),
            None => Status::Unset,
        },
        instrumentation_scope: scope.clone(),
    }
}

/// The request span serves, the upstream span calls out; the rest is the gateway's own work.
fn kind_of(name: &str) -> SpanKind {
    match name {
        "request" => SpanKind::Server,
        "upstream" => SpanKind::Client,
        _ => SpanKind::Internal,
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
mod tests {
    use std::sync::Mutex;

    use opentelemetry_sdk::error::OTelSdkResult;
    use tracing_subscriber::layer::SubscriberExt;

    use super::*;

    /// Keeps what it is given; can be made to hold the exporter thread.
    #[derive(Debug, Default, Clone)]
    struct Collect {
        spans: Arc<Mutex<Vec<SpanData>>>,
        hold: Arc<Mutex<()>>,
    }

    impl SpanExporter for Collect {
        async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
            let _held = self.hold.lock().unwrap();
            self.spans.lock().unwrap().extend(batch);
            Ok(())
        }
    }

    fn batching(queue: usize) -> Batching {
        Batching {
            queue,
            batch: 8,
            delay: Duration::from_secs(60),
        }
    }

    /// Runs `work` under a subscriber with the span layer, then flushes and returns the spans.
    fn traced(queue: usize, collect: &Collect, work: impl FnOnce()) -> Vec<SpanData> {
        let (layer, guard) = start(collect.clone(), batching(queue), Sampler::default()).unwrap();
        let subscriber = tracing_subscriber::registry().with(layer);
        tracing::subscriber::with_default(subscriber, work);
        drop(guard);
        collect.spans.lock().unwrap().clone()
    }

    fn named<'a>(spans: &'a [SpanData], name: &str) -> &'a SpanData {
        spans.iter().find(|s| s.name == name).unwrap()
    }

    #[test]
    fn children_share_the_trace_and_name_their_parent() {
        let collect = Collect::default();
        let spans = traced(64, &collect, || {
            let request =
                tracing::info_span!("request", request_id = "req_1", route = %"/v1/responses");
            let _in = request.enter();
            let upstream =
                tracing::info_span!("upstream", provider = "up", stream = true, tries = 2_u64);
            let _up = upstream.enter();
            tracing::warn!(status = 503, "retrying");
            tracing::error!("gave up");
            tracing::info!("not an event of the span");
        });
        assert_eq!(spans.len(), 2);
        let (request, upstream) = (named(&spans, "request"), named(&spans, "upstream"));
        assert_eq!(request.span_kind, SpanKind::Server);
        assert_eq!(upstream.span_kind, SpanKind::Client);
        assert_eq!(request.parent_span_id, SpanId::INVALID);
        assert_eq!(upstream.parent_span_id, request.span_context.span_id());
        assert_eq!(
            upstream.span_context.trace_id(),
            request.span_context.trace_id()
        );
        assert_ne!(
            upstream.span_context.span_id(),
            request.span_context.span_id()
        );
        assert!(request.start_time <= upstream.start_time && upstream.end_time <= request.end_time);
        let attribute = |s: &SpanData, key: &str| {
            s.attributes
                .iter()
                .find(|kv| kv.key.as_str() == key)
                .map(|kv| kv.value.to_string())
        };
        assert_eq!(attribute(request, "request_id").as_deref(), Some("req_1"));
        assert_eq!(
            attribute(request, "route").as_deref(),
            Some("/v1/responses")
        );
        assert_eq!(attribute(upstream, "stream").as_deref(), Some("true"));
        assert_eq!(attribute(upstream, "tries").as_deref(), Some("2"));
        let messages: Vec<String> = upstream
            .events
            .iter()
            .map(|e| format!("{}: {}", e.name, e.attributes[1].value))
            .collect();
        assert_eq!(messages, ["warn: retrying status=503", "error: gave up"]);
        assert_eq!(upstream.status, Status::error("gave up"));
        assert_eq!(request.status, Status::Unset);
    }

    #[test]
    fn a_remote_parent_continues_its_trace_and_its_sampling() {
        let collect = Collect::default();
        let remote = TraceContext {
            trace_id: 0x4bf9_2f35_77b3_4da6_a3ce_929d_0e0e_4736,
            span_id: 0x00f0_67aa_0ba9_02b7,
            sampled: true,
            trace_state: Some(Arc::from("vendor=abc")),
        };
        let mut outgoing = None;
        let spans = traced(64, &collect, || {
            let request = tracing::info_span!("request");
            set_remote_parent(&request, &remote);
            let _in = request.enter();
            let upstream = tracing::info_span!("upstream");
            outgoing = context_of(&upstream);
            // A trace whose caller did not sample it is not exported at all.
            let unsampled = tracing::info_span!(parent: None, "request");
            set_remote_parent(
                &unsampled,
                &TraceContext {
                    sampled: false,
                    ..remote.clone()
                },
            );
            let _child = tracing::info_span!(parent: &unsampled, "plan");
        });
        let (request, upstream) = (named(&spans, "request"), named(&spans, "upstream"));
        assert_eq!(spans.len(), 2, "{spans:?}");
        assert!(request.parent_span_is_remote);
        assert_eq!(
            request.parent_span_id,
            SpanId::from_bytes(remote.span_id.to_be_bytes())
        );
        assert_eq!(
            request.span_context.trace_id(),
            TraceId::from_bytes(remote.trace_id.to_be_bytes())
        );
        assert_eq!(request.span_context.trace_state().header(), "vendor=abc");
        let outgoing = outgoing.unwrap();
        assert_eq!(
            outgoing.traceparent(),
            format!(
                "00-4bf92f3577b34da6a3ce929d0e0e4736-{:016x}-01",
                u64::from_be_bytes(upstream.span_context.span_id().to_bytes())
            )
        );
        assert_eq!(outgoing.trace_state.as_deref(), Some("vendor=abc"));
    }

    #[test]
    fn a_full_queue_drops_spans_and_never_waits() {
        let collect = Collect::default();
        let held = collect.hold.clone();
        let (layer, guard) = start(collect.clone(), batching(4), Sampler::default()).unwrap();
        let dropped = layer.dropped.clone();
        let subscriber = tracing_subscriber::registry().with(layer);
        {
            // The exporter thread blocks in its first export; the queue then fills up.
            let _hold = held.lock().unwrap();
            tracing::subscriber::with_default(subscriber, || {
                for _ in 0..100 {
                    let _span = tracing::info_span!("plan").entered();
                }
            });
        }
        assert!(dropped.load(Ordering::Relaxed) > 0);
        drop(guard);
        let exported = collect.spans.lock().unwrap().len();
        assert!((4..100).contains(&exported), "{exported}");
    }

    #[test]
    fn traceparent_is_lowercase_hex_of_fixed_width() {
        let context = TraceContext {
            trace_id: 0xab,
            span_id: u64::MAX,
            sampled: false,
            trace_state: None,
        };
        assert_eq!(
            context.traceparent(),
            "00-000000000000000000000000000000ab-ffffffffffffffff-00"
        );
    }

    #[test]
    fn samplers_read_as_the_sdk_names_them() {
        assert_eq!(Sampler::parse("", None), Ok(Sampler::default()));
        let half = Sampler::parse("parentbased_traceidratio", Some("0.5")).unwrap();
        assert!(half.parent_based && (half.ratio - 0.5).abs() < f64::EPSILON);
        let error = Sampler::parse("traceidratio", Some("2")).unwrap_err();
        assert_eq!(error.0, "OTEL_TRACES_SAMPLER_ARG");
        assert!(error.1.contains("`2`"), "{}", error.1);
        assert_eq!(
            Sampler::parse("jaeger_remote", None).unwrap_err().0,
            "OTEL_TRACES_SAMPLER"
        );
        assert_eq!(half.describe(), "parentbased_traceidratio 0.5");
        assert_eq!(Sampler::default().describe(), "parentbased_always_on");
        // As `toolbridge check` reads the environment.
        let env = |k: &str| (k == "OTEL_TRACES_SAMPLER").then(|| "always_off".to_owned());
        assert_eq!(Sampler::from_env(&env).unwrap().describe(), "always_off");
        let off = Sampler::parse("always_off", None).unwrap();
        assert!(!off.samples(u128::MAX));
        // The ratio rule reads the low 63 bits: about half of many random ids pass at 0.5.
        let kept = (0..10_000).filter(|_| half.samples(new_trace_id())).count();
        assert!((4_000..6_000).contains(&kept), "{kept}");
        assert!(half.samples(0x10) && !half.samples(u128::from(u64::MAX)));
    }

    #[test]
    fn unsampled_traces_are_not_exported_but_still_propagate() {
        let collect = Collect::default();
        let (layer, guard) = start(
            collect.clone(),
            batching(64),
            Sampler::parse("always_off", None).unwrap(),
        )
        .unwrap();
        let mut outgoing = None;
        tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
            let request = tracing::info_span!("request", request_id = "req_2");
            let _in = request.enter();
            outgoing = context_of(&tracing::info_span!("upstream"));
        });
        drop(guard);
        assert!(collect.spans.lock().unwrap().is_empty());
        assert!(outgoing.unwrap().traceparent().ends_with("-00"));
    }
}
