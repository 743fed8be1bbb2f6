//! Unit tests of the Anthropic dialect with realistic Messages payloads.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code fails loudly

use serde_json::{Value, json};
use toolbridge_core::events::{FinishReason, ToolCallDelta, UpstreamEvent};
use toolbridge_core::plan::plan;
use toolbridge_core::request::{Limits, normalize};
use toolbridge_wire::anthropic::{
    ContentBlock, MessageContent, MessagesRequest, MessagesResponse, StreamEvent, System,
};
use toolbridge_wire::responses::{CreateResponse, Diagnostic};

use super::stream::{Flow, MessagesDecoder};
use super::{errors, request, response};
use crate::Error;
use crate::profile::Profile;

/// Translates a Responses request body; returns the Messages request as JSON and the codes of
/// the diagnostics.
fn translate(body: Value) -> (Value, Vec<String>) {
    let req: CreateResponse = serde_json::from_value(body).unwrap();
    let canonical = normalize(&req, &Limits::default()).unwrap();
    // The common profile with the Messages preset's effort table.
    let mut profile = Profile::preset("generic").unwrap();
    profile.efforts = Profile::preset("anthropic").unwrap().efforts;
    let plan = plan(
        &canonical.tools,
        canonical.tool_choice.as_ref(),
        &profile.tools,
    )
    .unwrap();
    let mut diagnostics = Vec::new();
    let out = request::build(&canonical, &plan, &profile, "claude-x", &mut diagnostics);
    let codes = diagnostics.into_iter().map(|d| d.code).collect();
    (serde_json::to_value(out).unwrap(), codes)
}

fn weather_tool() -> Value {
    json!({"type": "function", "name": "get_weather", "description": "Weather by city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}})
}

#[test]
fn request_with_system_developer_tool_round_trip_and_merged_turns() {
    let (out, codes) = translate(json!({
        "model": "claude",
        "instructions": "You are terse.",
        "tools": [weather_tool()],
        "parallel_tool_calls": false,
        "temperature": 1.5,
        "stop": ["END"],
        "input": [
            {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "Use metric units."}]},
            {"role": "user", "content": "Hi."},
            {"type": "message", "role": "user", "content": [
                {"type": "input_text", "text": "Weather in Paris? See:"},
                {"type": "input_image", "image_url": "data:image/png;base64,AAAA", "detail": "low"},
                {"type": "input_image", "image_url": "https://example.com/a.jpg"}
            ]},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Checking.", "annotations": []}]},
            {"type": "function_call", "call_id": "toolu_1", "name": "get_weather", "arguments": "{\"city\":\"Paris\"}"},
            {"type": "function_call_output", "call_id": "toolu_1", "output": "18C"},
            {"role": "user", "content": "And tomorrow?"}
        ]
    }));
    assert_eq!(out["model"], "claude-x");
    assert_eq!(out["system"], "You are terse.\n\nUse metric units.");
    assert_eq!(out["max_tokens"], request::DEFAULT_MAX_TOKENS);
    assert_eq!(out["temperature"], 1.0);
    assert_eq!(out["stop_sequences"], json!(["END"]));
    assert_eq!(
        out["tools"],
        json!([{"name": "get_weather", "description": "Weather by city.",
            "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}])
    );
    assert_eq!(
        out["tool_choice"],
        json!({"type": "auto", "disable_parallel_tool_use": true})
    );
    assert_eq!(
        out["messages"],
        json!([
            {"role": "user", "content": [
                {"type": "text", "text": "Hi."},
                {"type": "text", "text": "Weather in Paris? See:"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}},
                {"type": "image", "source": {"type": "url", "url": "https://example.com/a.jpg"}}
            ]},
            {"role": "assistant", "content": [
                {"type": "text", "text": "Checking."},
                {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "18C"},
                {"type": "text", "text": "And tomorrow?"}
            ]}
        ])
    );
    for code in [
        "developer_as_system",
        "system_messages_merged",
        "param_clamped",
    ] {
        assert!(codes.iter().any(|c| c == code), "{code} missing: {codes:?}");
    }
}

#[test]
fn tool_choice_variants() {
    let choice = |tool_choice: Value| {
        let (out, _) = translate(json!({
            "model": "claude", "tools": [weather_tool()], "tool_choice": tool_choice, "input": "hi"
        }));
        out["tool_choice"].clone()
    };
    assert_eq!(choice(json!("auto")), json!({"type": "auto"}));
    assert_eq!(choice(json!("required")), json!({"type": "any"}));
    assert_eq!(choice(json!("none")), json!({"type": "none"}));
    assert_eq!(
        choice(json!({"type": "function", "name": "get_weather"})),
        json!({"type": "tool", "name": "get_weather"})
    );
}

#[test]
fn effort_becomes_a_thinking_budget_and_drops_temperature() {
    let (out, codes) = translate(json!({
        "model": "claude", "input": "think", "reasoning": {"effort": "high"},
        "temperature": 0.3, "tools": [weather_tool()], "tool_choice": "required"
    }));
    assert_eq!(
        out["thinking"],
        json!({"type": "enabled", "budget_tokens": 16384})
    );
    assert_eq!(out["max_tokens"], request::DEFAULT_MAX_TOKENS + 16384);
    assert!(out.get("temperature").is_none());
    assert_eq!(out["tool_choice"], json!({"type": "auto"}));
    assert!(codes.iter().any(|c| c == "tool_choice_downgraded"));
    assert!(codes.iter().any(|c| c == "param_dropped"));

    let (out, _) = translate(json!({
        "model": "claude", "input": "think", "reasoning": {"effort": "high"}, "max_output_tokens": 4000
    }));
    assert_eq!(out["thinking"]["budget_tokens"], 2000);
    assert_eq!(out["max_tokens"], 4000);
}

/// Feeds `(event, data)` pairs; returns the events, diagnostics and the last flow or error.
fn feed(
    decoder: &mut MessagesDecoder,
    events: &[(&str, Value)],
) -> (Vec<UpstreamEvent>, Vec<Diagnostic>, Result<Flow, Error>) {
    let mut out = Vec::new();
    let mut diagnostics = Vec::new();
    let mut last = Ok(Flow::Continue);
    for (name, data) in events {
        last = decoder.on_event(name, &data.to_string(), &mut out, &mut diagnostics);
        if last.is_err() {
            break;
        }
    }
    (out, diagnostics, last)
}

fn message_start() -> (&'static str, Value) {
    (
        "message_start",
        json!({"type": "message_start", "message": {"id": "msg_01", "type": "message", "role": "assistant",
            "model": "claude-sonnet-4-5", "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": 25, "cache_creation_input_tokens": 100, "cache_read_input_tokens": 200, "output_tokens": 1}}}),
    )
}

fn usage(input: u64, cached: u64, written: u64, output: u64) -> UpstreamEvent {
    use toolbridge_wire::responses::{InputTokensDetails, OutputTokensDetails, Usage};
    UpstreamEvent::Usage(Usage {
        input_tokens: input,
        input_tokens_details: InputTokensDetails {
            cached_tokens: cached,
            cache_write_tokens: written,
        },
        output_tokens: output,
        output_tokens_details: OutputTokensDetails::default(),
        total_tokens: input + output,
    })
}

#[test]
fn streamed_text_answer() {
    let mut decoder = MessagesDecoder::new();
    let (out, diagnostics, last) = feed(
        &mut decoder,
        &[
            message_start(),
            (
                "content_block_start",
                json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            ),
            ("ping", json!({"type": "ping"})),
            (
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hello"}}),
            ),
            (
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": ", world"}}),
            ),
            (
                "content_block_stop",
                json!({"type": "content_block_stop", "index": 0}),
            ),
            (
                "message_delta",
                json!({"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": null}, "usage": {"output_tokens": 12}}),
            ),
            ("message_stop", json!({"type": "message_stop"})),
        ],
    );
    assert_eq!(last, Ok(Flow::Done));
    assert!(diagnostics.is_empty());
    assert_eq!(
        out,
        vec![
            usage(325, 200, 100, 1),
            UpstreamEvent::Text("Hello".to_owned()),
            UpstreamEvent::Text(", world".to_owned()),
            UpstreamEvent::Finish(FinishReason::Stop),
            usage(325, 200, 100, 12),
        ]
    );
}

#[test]
fn streamed_tool_call_over_several_json_deltas() {
    let mut decoder = MessagesDecoder::new();
    let (out, _, last) = feed(
        &mut decoder,
        &[
            (
                "content_block_start",
                json!({"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "toolu_01A", "name": "get_weather", "input": {}}}),
            ),
            (
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": ""}}),
            ),
            (
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "{\"city\": "}}),
            ),
            (
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "\"Paris\"}"}}),
            ),
            (
                "content_block_stop",
                json!({"type": "content_block_stop", "index": 1}),
            ),
            (
                "message_delta",
                json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 40}}),
            ),
        ],
    );
    assert_eq!(last, Ok(Flow::Continue));
    let call = |id: Option<&str>, name: Option<&str>, arguments: &str| {
        UpstreamEvent::ToolCall(ToolCallDelta {
            index: Some(1),
            id: id.map(str::to_owned),
            name: name.map(str::to_owned),
            arguments: arguments.to_owned(),
            item_id: None,
        })
    };
    assert_eq!(
        out[..4],
        [
            call(Some("toolu_01A"), Some("get_weather"), ""),
            call(None, None, "{\"city\": "),
            call(None, None, "\"Paris\"}"),
            UpstreamEvent::Finish(FinishReason::ToolCalls),
        ]
    );
}

#[test]
fn thinking_with_signature_is_kept() {
    let mut decoder = MessagesDecoder::new();
    let (out, _, _) = feed(
        &mut decoder,
        &[
            (
                "content_block_start",
                json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": "", "signature": ""}}),
            ),
            (
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "Let me think"}}),
            ),
            (
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": " step by step."}}),
            ),
            (
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "EqQBCgIYAhIM1gbcDa9GJwZA"}}),
            ),
            (
                "content_block_stop",
                json!({"type": "content_block_stop", "index": 0}),
            ),
            (
                "content_block_start",
                json!({"type": "content_block_start", "index": 1, "content_block": {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3p"}}),
            ),
            (
                "content_block_stop",
                json!({"type": "content_block_stop", "index": 1}),
            ),
        ],
    );
    assert_eq!(
        out,
        vec![
            UpstreamEvent::Reasoning("Let me think".to_owned()),
            UpstreamEvent::Reasoning(" step by step.".to_owned()),
            UpstreamEvent::ReasoningSignature("EqQBCgIYAhIM1gbcDa9GJwZA".to_owned()),
            UpstreamEvent::RedactedReasoning("EmwKAhgBEgy3va3p".to_owned()),
        ]
    );
}

#[test]
fn error_event_fails_the_stream() {
    let mut decoder = MessagesDecoder::new();
    let (_, _, last) = feed(
        &mut decoder,
        &[(
            "error",
            json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        )],
    );
    let Err(Error::Upstream(e)) = last else {
        panic!("expected an upstream error, got {last:?}");
    };
    assert_eq!(e.status, 503);
    assert_eq!(e.code, "upstream_overloaded");
    assert!(e.message.contains("Overloaded"));
}

/// Two attempts in one stream (a second `message_start` before `message_stop`) fail the
/// answer instead of gluing the tool call's two argument prefixes into one.
#[test]
fn a_second_message_start_before_the_stop_fails_the_stream() {
    let mut decoder = MessagesDecoder::new();
    let tool_start = (
        "content_block_start",
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "toolu_01A", "name": "get_weather", "input": {}}}),
    );
    let prefix = (
        "content_block_delta",
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "{\"city\": \"Pa"}}),
    );
    let (_, _, last) = feed(
        &mut decoder,
        &[
            message_start(),
            tool_start.clone(),
            prefix.clone(),
            message_start(),
            tool_start,
            prefix,
        ],
    );
    let Err(e) = last else {
        panic!("expected a failed stream, got {last:?}");
    };
    assert_eq!((e.status(), e.code()), (502, "upstream_invalid_response"));
    assert!(e.to_string().contains("second `message_start`"), "{e}");
}

#[test]
fn unknown_events_and_blocks_are_skipped() {
    let mut decoder = MessagesDecoder::new();
    let (out, diagnostics, last) = feed(
        &mut decoder,
        &[
            (
                "future_event",
                json!({"type": "future_event", "payload": 1}),
            ),
            (
                "content_block_start",
                json!({"type": "content_block_start", "index": 0, "content_block": {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}}}),
            ),
            (
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "{\"query\":"}}),
            ),
            (
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "citations_delta", "citation": {}}}),
            ),
        ],
    );
    assert_eq!(last, Ok(Flow::Continue));
    assert!(out.is_empty());
    assert!(diagnostics.is_empty());
    // Not JSON at all: skipped with a diagnostic.
    let mut out = Vec::new();
    let mut diagnostics = Vec::new();
    let flow = decoder.on_event("message_delta", "{oops", &mut out, &mut diagnostics);
    assert_eq!(flow, Ok(Flow::Continue));
    assert_eq!(diagnostics.len(), 1);
    assert_eq!(diagnostics[0].code, "upstream_chunk_skipped");
}

#[test]
fn whole_response_decodes_into_events() {
    let body = json!({
        "id": "msg_01", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
        "content": [
            {"type": "thinking", "thinking": "Weather needs a tool.", "signature": "sig=="},
            {"type": "text", "text": "Let me check.", "citations": null},
            {"type": "tool_use", "id": "toolu_01", "name": "get_weather", "input": {"city": "Paris"}}
        ],
        "stop_reason": "tool_use", "stop_sequence": null,
        "usage": {"input_tokens": 10, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 5,
            "output_tokens": 30, "service_tier": "standard"},
        "container": null
    });
    let parsed: MessagesResponse = serde_json::from_value(body.clone()).unwrap();
    // Unknown fields survive a round trip.
    let again = serde_json::to_value(&parsed).unwrap();
    assert_eq!(again["container"], Value::Null);
    assert_eq!(again["usage"]["service_tier"], "standard");
    assert_eq!(again["content"][1]["citations"], Value::Null);
    let mut diagnostics = Vec::new();
    let events = response::decode(&parsed, &mut diagnostics);
    assert_eq!(
        events,
        vec![
            UpstreamEvent::Reasoning("Weather needs a tool.".to_owned()),
            UpstreamEvent::ReasoningSignature("sig==".to_owned()),
            UpstreamEvent::Text("Let me check.".to_owned()),
            UpstreamEvent::ToolCall(ToolCallDelta {
                index: Some(2),
                id: Some("toolu_01".to_owned()),
                name: Some("get_weather".to_owned()),
                arguments: "{\"city\":\"Paris\"}".to_owned(),
                item_id: None,
            }),
            UpstreamEvent::Finish(FinishReason::ToolCalls),
            usage(15, 5, 0, 30),
        ]
    );
    assert!(diagnostics.is_empty());
}

#[test]
fn stop_reasons_map() {
    let finish = |reason: &str| {
        let mut diagnostics = Vec::new();
        (
            super::finish_reason(reason, &mut diagnostics),
            diagnostics.len(),
        )
    };
    assert_eq!(finish("end_turn"), (FinishReason::Stop, 0));
    assert_eq!(finish("stop_sequence"), (FinishReason::Stop, 0));
    assert_eq!(finish("pause_turn"), (FinishReason::Stop, 0));
    assert_eq!(finish("max_tokens"), (FinishReason::Length, 0));
    assert_eq!(finish("refusal"), (FinishReason::ContentFilter, 0));
    assert_eq!(finish("brand_new"), (FinishReason::Stop, 1));
}

#[test]
fn unknown_stream_event_type_parses_as_other() {
    let event: StreamEvent = serde_json::from_str(r#"{"type":"something_new","x":1}"#).unwrap();
    assert_eq!(event, StreamEvent::Other);
}

#[test]
fn http_errors_map() {
    let rate = errors::from_http(
        429,
        br#"{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}"#,
        Some("30".to_owned()),
    );
    assert_eq!(
        (rate.status, rate.code.as_str()),
        (429, "rate_limit_exceeded")
    );
    assert_eq!(rate.retry_after.as_deref(), Some("30"));
    assert!(rate.message.contains("per-minute rate limit"));

    let overloaded = errors::from_http(
        529,
        br#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        None,
    );
    assert_eq!(
        (
            overloaded.status,
            overloaded.code.as_str(),
            overloaded.kind.as_str()
        ),
        (503, "upstream_overloaded", "server_error")
    );

    let too_long = errors::from_http(
        400,
        br#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}"#,
        None,
    );
    assert_eq!(too_long.code, "context_length_exceeded");

    let auth = errors::from_http(401, b"not json", None);
    assert_eq!(
        (auth.status, auth.code.as_str()),
        (401, "upstream_unauthorized")
    );
    assert!(auth.message.contains("not json"));
}

#[test]
fn a_native_request_parses_with_string_content_system_blocks_and_unknown_blocks() {
    let body = json!({
        "model": "claude-sonnet-4-5",
        "max_tokens": 1024,
        "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
        "messages": [
            {"role": "user", "content": "Hello"},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "hm", "signature": "sig"},
                {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "q"}},
                {"type": "container_upload", "file_id": "file_1"}
            ]}
        ],
        "tool_choice": {"type": "tool", "name": "get_weather", "disable_parallel_tool_use": true},
        "thinking": {"type": "enabled", "budget_tokens": 2048},
        "metadata": {"user_id": "u-1"},
        "top_k": 5
    });
    let req: MessagesRequest = serde_json::from_value(body).unwrap();
    assert!(matches!(&req.system, Some(System::Blocks(b)) if b.len() == 1));
    assert!(matches!(&req.messages[0].content, MessageContent::Text(t) if t == "Hello"));
    assert!(matches!(
        &req.messages[1].content,
        MessageContent::Blocks(b) if matches!(b.as_slice(), [ContentBlock::Thinking(_), ContentBlock::ServerToolUse(_), ContentBlock::Other])
    ));
    assert_eq!(req.extra["top_k"], 5);
    let again = serde_json::to_value(&req).unwrap();
    assert_eq!(again["system"][0]["cache_control"]["type"], "ephemeral");
    assert_eq!(again["tool_choice"]["name"], "get_weather");
    assert_eq!(again["thinking"]["budget_tokens"], 2048);
}

#[test]
fn empty_text_and_empty_tool_output_are_not_sent_as_empty_text() {
    let (out, _) = translate(json!({
        "model": "claude",
        "tools": [weather_tool()],
        "input": [
            {"role": "user", "content": "go"},
            {"type": "function_call", "call_id": "toolu_9", "name": "get_weather", "arguments": ""},
            {"type": "function_call_output", "call_id": "toolu_9", "output": ""}
        ]
    }));
    assert_eq!(out["messages"][1]["content"][0]["input"], json!({}));
    assert_eq!(
        out["messages"][2]["content"],
        json!([{"type": "tool_result", "tool_use_id": "toolu_9"}])
    );
}
