//! The span layer's tests: trace identity, remote parents, the full queue, samplers.

use std::sync::Mutex;

use opentelemetry::trace::{SpanId, SpanKind, Status, TraceId};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SpanData, SpanExporter};
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
