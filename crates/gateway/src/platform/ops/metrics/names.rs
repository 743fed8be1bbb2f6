//! Every metric's name, and its help text as the recorder describes it (`describe`).

pub(crate) const REQUESTS: &str = "toolbridge_requests_total";
pub(crate) const REQUEST_DURATION: &str = "toolbridge_request_duration_seconds";
pub(crate) const STREAM_DURATION: &str = "toolbridge_stream_duration_seconds";
pub(crate) const FIRST_BYTE: &str = "toolbridge_time_to_first_byte_seconds";
pub(crate) const FIRST_TOKEN: &str = "toolbridge_time_to_first_token_seconds";
pub(crate) const UPSTREAM_LATENCY: &str = "toolbridge_upstream_latency_seconds";
pub(crate) const OVERHEAD: &str = "toolbridge_overhead_seconds";
pub(crate) const TOKENS: &str = "toolbridge_tokens_total";
pub(crate) const CACHE_TOKENS: &str = "toolbridge_cache_tokens_total";
pub(crate) const PLAN_DECISIONS: &str = "toolbridge_tool_plan_decisions_total";
pub(crate) const REPAIRS: &str = "toolbridge_repairs_total";
pub(crate) const TOOL_LOOP_STEPS: &str = "toolbridge_tool_loop_steps_total";
pub(crate) const TOOL_CALLS: &str = "toolbridge_tool_calls_total";
pub(crate) const WEBSOCKETS: &str = "toolbridge_websocket_connections";
pub(crate) const WEBSOCKET_FRAMES: &str = "toolbridge_websocket_frames_total";
pub(crate) const OPEN_STREAMS: &str = "toolbridge_open_streams";
pub(crate) const CONFIG_RELOADS: &str = "toolbridge_config_reloads_total";
pub(crate) const STORE_LATE_FINALS: &str = "toolbridge_store_late_finals_total";
pub(crate) const WEBSOCKETS_REFUSED: &str = "toolbridge_websockets_refused_total";
pub(crate) const BUDGET_LATE_CHARGES: &str = "toolbridge_budget_late_charges_total";
pub(crate) const CHAIN_READS: &str = "toolbridge_chain_reads_total";
pub(crate) const RESENT_INPUTS: &str = "toolbridge_resent_inputs_total";

/// Describes every metric to the recorder.
pub(super) fn describe() {
    use metrics::{describe_counter, describe_gauge, describe_histogram};
    describe_counter!(
        REQUESTS,
        "Requests answered, by route, provider, model and status."
    );
    describe_histogram!(
        REQUEST_DURATION,
        metrics::Unit::Seconds,
        "Time to the response headers (whole answers: to the whole answer)."
    );
    describe_histogram!(
        STREAM_DURATION,
        metrics::Unit::Seconds,
        "Whole streams, start to end."
    );
    describe_histogram!(
        FIRST_BYTE,
        metrics::Unit::Seconds,
        "Streams: request start to the first body byte."
    );
    describe_histogram!(
        FIRST_TOKEN,
        metrics::Unit::Seconds,
        "Streams: request start to the first output delta (text, reasoning, or call arguments)."
    );
    describe_histogram!(
        UPSTREAM_LATENCY,
        metrics::Unit::Seconds,
        "Upstream requests: send until the response headers."
    );
    describe_histogram!(
        OVERHEAD,
        metrics::Unit::Seconds,
        "The gateway's own time: total minus upstream wait."
    );
    describe_counter!(TOKENS, "Tokens in and out, by provider and model.");
    describe_counter!(
        CACHE_TOKENS,
        "Input tokens the provider's prompt cache read or wrote, by provider and model."
    );
    describe_counter!(
        PLAN_DECISIONS,
        "Tool-plan decisions by tool type and decision."
    );
    describe_counter!(REPAIRS, "Tool-call repairs, by provider, model and code.");
    describe_counter!(TOOL_LOOP_STEPS, "Gateway tool loop steps.");
    describe_counter!(
        TOOL_CALLS,
        "Gateway tool calls, by server label and outcome."
    );
    describe_gauge!(OPEN_STREAMS, "Streams open now, by route.");
    describe_counter!(CONFIG_RELOADS, "Config reloads, by outcome.");
    describe_gauge!(WEBSOCKETS, "WebSocket connections open now.");
    describe_counter!(
        STORE_LATE_FINALS,
        "Final writes the store refused, by outcome (kept, written later, given up)."
    );
    describe_counter!(
        WEBSOCKETS_REFUSED,
        "WebSocket upgrades and frames refused by a cap, by what (socket, response)."
    );
    describe_counter!(
        CHAIN_READS,
        "previous_response_id chains expanded, by where from (memory: held and confirmed; store: read whole)."
    );
    describe_counter!(
        RESENT_INPUTS,
        "Large HTTP requests of a session, by how their input was read (resumed: the items resent from the session's last request taken from it; parsed: read whole)."
    );
    describe_counter!(
        BUDGET_LATE_CHARGES,
        "Budget charges the store refused, by outcome (kept, written later, given up)."
    );
    describe_counter!(
        WEBSOCKET_FRAMES,
        "WebSocket text frames, by direction (in, out)."
    );
}
