//! Prometheus metrics: the names and labels (stable, `toolbridge_` prefixed, documented in
//! `docs/operations.md`), the recorder, and one small function per thing counted, so that call
//! sites stay one line and label values are bounded in one place.
//!
//! *Label cardinality is bounded*: routes are the router's matched paths, providers and models
//! come from the config (a model is labelled by the route pattern it matched — `gpt-*`, `*` —
//! and `other` when none), tool types from a fixed list, repair codes from the core's list.
//! Nothing a client writes becomes a label value as written.
//!
//! The recorder is process-global (the `metrics` facade); [`set_enabled`] turns recording off
//! without uninstalling it, so a config reload can switch metrics on and off.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use metrics::{Counter, Gauge, Histogram, counter, gauge, histogram};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use toolbridge_core::plan::ToolPlan;
use toolbridge_wire::responses::Diagnostic;

mod handles;

use handles::Handles;

/// Every metric name, in one place.
pub(crate) mod names;

/// The label value for anything not named by the config.
pub(crate) const OTHER: &str = "other";
/// The label value before a request reached a provider.
pub(crate) const NONE: &str = "none";

/// Latency buckets (seconds): 0.5 ms to 2 min.
const LATENCY_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    60.0, 120.0,
];
/// Overhead buckets (seconds): 10 µs to 250 ms.
const OVERHEAD_BUCKETS: &[f64] = &[
    0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
    0.1, 0.25,
];

static ENABLED: AtomicBool = AtomicBool::new(false);
static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();

/// Installs the global recorder once (with buckets set, so histograms render as histograms)
/// and returns its handle; `None` when another recorder was installed first.
pub(crate) fn install() -> Option<PrometheusHandle> {
    HANDLE
        .get_or_init(|| {
            let builder = PrometheusBuilder::new()
                .set_buckets_for_metric(Matcher::Full(names::OVERHEAD.to_owned()), OVERHEAD_BUCKETS)
                .and_then(|b| b.set_buckets(LATENCY_BUCKETS));
            let handle = match builder {
                Ok(b) => b.install_recorder(),
                Err(e) => {
                    tracing::warn!("metrics are off: {e}");
                    return None;
                }
            };
            match handle {
                Ok(handle) => {
                    names::describe();
                    Some(handle)
                }
                Err(e) => {
                    tracing::warn!("metrics are off: {e}");
                    None
                }
            }
        })
        .clone()
}

/// Turns recording on or off (the config's `[metrics] enabled`).
pub fn set_enabled(on: bool) {
    if on {
        install();
    }
    ENABLED.store(on, Ordering::Relaxed);
}

/// Whether metrics are recorded.
pub(crate) fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// The text exposition of every metric.
pub(crate) fn render() -> Option<String> {
    HANDLE.get().and_then(|h| h.as_ref()).map(|h| h.render())
}

/// Runs the recorder's upkeep (histogram buffers drained) every `period`, forever.
pub(crate) async fn upkeep(period: Duration) {
    let mut every = tokio::time::interval(period);
    loop {
        every.tick().await;
        if let Some(Some(handle)) = HANDLE.get() {
            handle.run_upkeep();
        }
    }
}

/// The model label: the pattern of the route `model` matches, or `other`.
pub(crate) fn model_label(config: &crate::config::Config, model: &str) -> String {
    match config.routes.iter().find(|r| r.matcher.is_match(model)) {
        Some(route) => route.pattern.clone(),
        None => OTHER.to_owned(),
    }
}

/// The labels of one answered request.
pub(crate) struct RequestLabels<'a> {
    pub route: &'a str,
    pub provider: &'a str,
    pub model: &'a str,
    pub status: u16,
}

/// One answered request: its count, its duration and the gateway's overhead.
pub(crate) fn request(labels: &RequestLabels<'_>, duration: Duration, overhead: Duration) {
    if !enabled() {
        return;
    }
    static HANDLES: Handles<4, (Counter, Histogram, Histogram)> = Handles::new();
    let status = status_label(labels.status);
    HANDLES.with(
        [labels.route, labels.provider, labels.model, status],
        |[route, provider, model, status]| {
            (
                counter!(names::REQUESTS, "route" => route.clone(), "provider" => provider.clone(), "model" => model.clone(), "status" => status.clone()),
                histogram!(names::REQUEST_DURATION, "route" => route.clone(), "provider" => provider.clone(), "model" => model.clone(), "status" => status),
                histogram!(names::OVERHEAD, "route" => route, "provider" => provider, "model" => model),
            )
        },
        |(requests, durations, overheads)| {
            requests.increment(1);
            durations.record(duration.as_secs_f64());
            overheads.record(overhead.as_secs_f64());
        },
    );
}

/// A stream's first body byte, `elapsed` after the request started.
pub(crate) fn first_byte(route: &str, provider: &str, model: &str, elapsed: Duration) {
    stream_timing(names::FIRST_BYTE, [route, provider, model], elapsed);
}

/// A stream's first output delta, `elapsed` after the request started.
pub(crate) fn first_token(route: &str, provider: &str, model: &str, elapsed: Duration) {
    stream_timing(names::FIRST_TOKEN, [route, provider, model], elapsed);
}

/// A stream's end (completed, failed, or dropped by the client).
pub(crate) fn stream_ended(route: &str, provider: &str, model: &str, elapsed: Duration) {
    stream_timing(names::STREAM_DURATION, [route, provider, model], elapsed);
}

/// One of the stream histograms above, labelled by route, provider and model.
fn stream_timing(name: &'static str, [route, provider, model]: [&str; 3], elapsed: Duration) {
    if enabled() {
        static HANDLES: Handles<4, Histogram> = Handles::new();
        HANDLES.with(
            [name, route, provider, model],
            |[name, route, provider, model]| histogram!(name, "route" => route, "provider" => provider, "model" => model),
            |h| h.record(elapsed.as_secs_f64()),
        );
    }
}

/// The open-streams gauge moves by `delta` (+1 when a stream opens, -1 when it ends). Not
/// gated by [`enabled`]: a stream opened before metrics were switched off still comes back
/// down (without a recorder this does nothing).
pub(crate) fn open_streams(route: &str, delta: f64) {
    if HANDLE.get().is_none_or(Option::is_none) {
        return;
    }
    static HANDLES: Handles<1, Gauge> = Handles::new();
    HANDLES.with(
        [route],
        |[route]| gauge!(names::OPEN_STREAMS, "route" => route),
        |g| g.increment(delta),
    );
}

/// One upstream attempt: send until headers (or the transport error).
pub(crate) fn upstream(provider: &str, status: Option<u16>, elapsed: Duration) {
    if enabled() {
        static HANDLES: Handles<2, Histogram> = Handles::new();
        let status = status.map_or("error", status_label);
        HANDLES.with(
            [provider, status],
            |[provider, status]| histogram!(names::UPSTREAM_LATENCY, "provider" => provider, "status" => status),
            |h| h.record(elapsed.as_secs_f64()),
        );
    }
}

/// A finished response's tokens: input (of which cache reads and writes) and output.
pub(crate) struct TokenCounts {
    pub(crate) input: u64,
    pub(crate) cached: u64,
    pub(crate) cache_write: u64,
    pub(crate) output: u64,
}

/// A finished response's tokens, by provider and model: `toolbridge_tokens_total` by direction,
/// and the provider cache's part of the input in `toolbridge_cache_tokens_total` by kind
/// (`read`, `write`).
pub(crate) fn tokens(provider: &str, model: &str, t: TokenCounts) {
    if enabled() {
        static HANDLES: Handles<2, [Counter; 4]> = Handles::new();
        HANDLES.with(
            [provider, model],
            |[provider, model]| {
                [
                    counter!(names::TOKENS, "provider" => provider.clone(), "model" => model.clone(), "direction" => "input"),
                    counter!(names::TOKENS, "provider" => provider.clone(), "model" => model.clone(), "direction" => "output"),
                    counter!(names::CACHE_TOKENS, "provider" => provider.clone(), "model" => model.clone(), "kind" => "read"),
                    counter!(names::CACHE_TOKENS, "provider" => provider, "model" => model, "kind" => "write"),
                ]
            },
            |[tokens_in, tokens_out, read, write]| {
                tokens_in.increment(t.input);
                tokens_out.increment(t.output);
                read.increment(t.cached);
                write.increment(t.cache_write);
            },
        );
    }
}

/// Counts every entry of a tool plan, by tool type and decision, and hands the plan back.
pub(crate) fn plan(provider: &str, plan: ToolPlan) -> ToolPlan {
    if enabled() {
        static HANDLES: Handles<3, Counter> = Handles::new();
        for entry in &plan.entries {
            HANDLES.with(
                [provider, tool_type_label(&entry.kind), entry.decision.as_str()],
                |[provider, tool_type, decision]| counter!(names::PLAN_DECISIONS, "provider" => provider, "tool_type" => tool_type, "decision" => decision),
                |c| c.increment(1),
            );
        }
    }
    plan
}

/// Repair diagnostics (already filtered to repair codes by the caller).
pub(crate) fn repair(provider: &str, model: &str, diagnostic: &Diagnostic) {
    if enabled() {
        static HANDLES: Handles<3, Counter> = Handles::new();
        let code = toolbridge_core::diagnostics::REPAIR_CODES
            .iter()
            .find(|c| **c == diagnostic.code)
            .copied()
            .unwrap_or(OTHER);
        HANDLES.with(
            [provider, model, code],
            |[provider, model, code]| counter!(names::REPAIRS, "provider" => provider, "model" => model, "code" => code),
            |c| c.increment(1),
        );
    }
}

/// One step of the gateway's tool loop.
pub(crate) fn tool_loop_step(provider: &str) {
    if enabled() {
        static HANDLES: Handles<1, Counter> = Handles::new();
        HANDLES.with(
            [provider],
            |[provider]| counter!(names::TOOL_LOOP_STEPS, "provider" => provider),
            |c| c.increment(1),
        );
    }
}

/// One gateway tool call's end. `server` is a configured server label.
pub(crate) fn tool_call(server: &str, ok: bool) {
    if enabled() {
        static HANDLES: Handles<2, Counter> = Handles::new();
        let outcome = if ok { "ok" } else { "error" };
        HANDLES.with(
            [server, outcome],
            |[server, outcome]| counter!(names::TOOL_CALLS, "server" => server, "outcome" => outcome),
            |c| c.increment(1),
        );
    }
}

/// A config reload's outcome: `applied` or `rejected`.
pub(crate) fn reload(outcome: &'static str) {
    if enabled() {
        counter!(names::CONFIG_RELOADS, "outcome" => outcome).increment(1);
    }
}

/// Status codes as labels, without allocating.
fn status_label(status: u16) -> &'static str {
    match status {
        200 => "200",
        400 => "400",
        401 => "401",
        403 => "403",
        404 => "404",
        408 => "408",
        409 => "409",
        413 => "413",
        415 => "415",
        422 => "422",
        429 => "429",
        499 => "499",
        500 => "500",
        502 => "502",
        503 => "503",
        504 => "504",
        s if (200..300).contains(&s) => "2xx",
        s if (300..400).contains(&s) => "3xx",
        s if (400..500).contains(&s) => "4xx",
        _ => "5xx",
    }
}

/// Tool types as labels: the Responses types the planner knows, else `other`.
fn tool_type_label(kind: &str) -> &'static str {
    const KNOWN: &[&str] = &[
        "function",
        "custom",
        "namespace",
        "local_shell",
        "shell",
        "apply_patch",
        "web_search",
        "web_search_preview",
        "file_search",
        "code_interpreter",
        "image_generation",
        "computer_use_preview",
        "mcp",
        "tool_search",
    ];
    KNOWN.iter().find(|k| **k == kind).copied().unwrap_or(OTHER)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_from_clients_are_bounded() {
        assert_eq!(tool_type_label("function"), "function");
        assert_eq!(tool_type_label("my_new_tool_type_9f8e"), OTHER);
        assert_eq!(status_label(201), "2xx");
        assert_eq!(status_label(429), "429");
    }
}
