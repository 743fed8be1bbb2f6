//! The exporter thread: it drains the bounded queue of closed spans on its schedule (or when a
//! batch's worth is queued, or when stopped), builds the OpenTelemetry span data off the request
//! path, and exports it in batches.

use std::borrow::Cow;
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::Instant;

use opentelemetry::trace::{
    SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState,
};
use opentelemetry::{InstrumentationScope, KeyValue};
use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanExporter, SpanLinks};

use super::{Attr, Batching, Closed, Sampler, SpanLayer, SpansGuard, Wake};

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
    let name = span_name(name, &open.attributes);
    let attributes = open
        .attributes
        .into_iter()
        .map(|(key, value)| match value {
            Attr::Str(s) if LIST_KEYS.contains(&key) => KeyValue::new(key, string_list(s)),
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
        span_kind: kind_of(&name),
        name,
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

/// The request span serves, the upstream and inference (`chat …`) spans call out; the rest is
/// the gateway's own work.
fn kind_of(name: &str) -> SpanKind {
    match name {
        "request" => SpanKind::Server,
        "upstream" => SpanKind::Client,
        _ if name.starts_with("chat") => SpanKind::Client,
        _ => SpanKind::Internal,
    }
}

/// Attributes the conventions type as string lists; a span records them as a JSON array text.
const LIST_KEYS: &[&str] = &["gen_ai.response.finish_reasons"];

/// The GenAI conventions name a span after what it does: `chat {gen_ai.request.model}`,
/// `execute_tool {gen_ai.tool.name}`. Other spans keep their `tracing` name.
fn span_name(name: &'static str, attributes: &[(&'static str, Attr)]) -> Cow<'static, str> {
    let detail = match name {
        "chat" => "gen_ai.request.model",
        "execute_tool" => "gen_ai.tool.name",
        _ => return Cow::Borrowed(name),
    };
    match attributes.iter().find(|(key, _)| *key == detail) {
        Some((_, Attr::Str(value))) => Cow::Owned(format!("{name} {value}")),
        _ => Cow::Borrowed(name),
    }
}

/// A JSON array of strings as an OpenTelemetry string list (another text: a list of itself).
fn string_list(text: String) -> opentelemetry::Value {
    let list = match serde_json::from_str::<Vec<String>>(&text) {
        Ok(list) => list,
        Err(_) => vec![text],
    };
    opentelemetry::Value::Array(opentelemetry::Array::String(
        list.into_iter().map(Into::into).collect(),
    ))
}
