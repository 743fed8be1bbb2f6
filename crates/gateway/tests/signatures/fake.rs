//! The fake providers of `signatures.rs`: Anthropic Messages with thinking on and Gemini 3, each
//! answering a first turn with a signed tool call and enforcing, on the turn that sends the
//! call's result back, the provider's documented rule: Anthropic refuses a final assistant
//! message whose `tool_use` is not led by its signed `thinking` block (and, here, one that lost
//! its `redacted_thinking`); Gemini 3 refuses a `functionCall` part without its
//! `thoughtSignature`. Their error bodies are the providers' own.

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use toolbridge_testkit::Reply;
use toolbridge_testkit::upstream::{Gate, Recorded};

/// The signatures and ids of one scenario, unique to it.
#[derive(Debug, Clone, Default)]
pub struct Scenario {
    pub tag: String,
}

impl Scenario {
    pub fn anthropic_signature(&self) -> String {
        format!("ANTSIG-{}", self.tag)
    }
    pub fn redacted(&self) -> String {
        format!("REDACTED-{}", self.tag)
    }
    pub fn gemini_signature(&self) -> String {
        format!("GEMSIG-{}", self.tag)
    }
    pub fn tool_use_id(&self) -> String {
        format!("toolu_{}", self.tag)
    }
}

/// The gate answering both providers for the scenario in `current`.
pub fn gate(current: Arc<Mutex<Scenario>>) -> Gate {
    Arc::new(move |r: &Recorded| {
        let scenario = current.lock().unwrap().clone();
        Some(if r.path.ends_with("/messages") {
            anthropic(r, &scenario)
        } else {
            gemini(r, &scenario)
        })
    })
}

fn anthropic(r: &Recorded, s: &Scenario) -> Reply {
    let stream = r.body["stream"] == true;
    let messages = r.body["messages"].as_array().cloned().unwrap_or_default();
    let second = messages.iter().any(|m| {
        m["content"]
            .as_array()
            .is_some_and(|c| c.iter().any(|b| b["type"] == "tool_result"))
    });
    if !second {
        return anthropic_call(s, stream);
    }
    let assistant = messages.iter().rev().find(|m| m["role"] == "assistant");
    let blocks = assistant
        .and_then(|m| m["content"].as_array().cloned())
        .unwrap_or_default();
    let signed = blocks.first().is_some_and(|b| {
        b["type"] == "thinking" && b["signature"] == s.anthropic_signature().as_str()
    });
    let redacted = blocks
        .iter()
        .any(|b| b["type"] == "redacted_thinking" && b["data"] == s.redacted().as_str());
    if r.body["thinking"]["type"] != "enabled" || !signed || !redacted {
        return Reply::error(
            400,
            json!({"type": "error", "error": {"type": "invalid_request_error",
                "message": "messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, but found `tool_use`. When `thinking` is enabled, a final `assistant` message must start with a thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks)."}}),
        );
    }
    anthropic_text(stream)
}

fn anthropic_call(s: &Scenario, stream: bool) -> Reply {
    let usage = json!({"input_tokens": 12, "output_tokens": 6});
    if !stream {
        return Reply::json(json!({
            "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test",
            "content": [
                {"type": "thinking", "thinking": "I need the weather.", "signature": s.anthropic_signature()},
                {"type": "redacted_thinking", "data": s.redacted()},
                {"type": "tool_use", "id": s.tool_use_id(), "name": "lookup", "input": {"city": "Oslo"}}
            ],
            "stop_reason": "tool_use", "stop_sequence": null, "usage": usage
        }));
    }
    let start = |i: u32, block: Value| {
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": i, "content_block": block}),
        )
    };
    let delta = |i: u32, delta: Value| {
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": i, "delta": delta}),
        )
    };
    let stop = |i: u32| {
        (
            "content_block_stop",
            json!({"type": "content_block_stop", "index": i}),
        )
    };
    Reply::sse_events(vec![
        (
            "message_start",
            json!({"type": "message_start", "message": {"id": "msg_1", "type": "message",
                "role": "assistant", "model": "claude-test", "content": [], "stop_reason": null,
                "stop_sequence": null, "usage": {"input_tokens": 12, "output_tokens": 1}}}),
        ),
        start(
            0,
            json!({"type": "thinking", "thinking": "", "signature": ""}),
        ),
        delta(
            0,
            json!({"type": "thinking_delta", "thinking": "I need the weather."}),
        ),
        delta(
            0,
            json!({"type": "signature_delta", "signature": s.anthropic_signature()}),
        ),
        stop(0),
        start(
            1,
            json!({"type": "redacted_thinking", "data": s.redacted()}),
        ),
        stop(1),
        start(
            2,
            json!({"type": "tool_use", "id": s.tool_use_id(), "name": "lookup", "input": {}}),
        ),
        delta(
            2,
            json!({"type": "input_json_delta", "partial_json": "{\"city\": \"Oslo\"}"}),
        ),
        stop(2),
        (
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null}, "usage": {"output_tokens": 6}}),
        ),
        ("message_stop", json!({"type": "message_stop"})),
    ])
}

fn anthropic_text(stream: bool) -> Reply {
    if !stream {
        return Reply::json(json!({
            "id": "msg_2", "type": "message", "role": "assistant", "model": "claude-test",
            "content": [{"type": "text", "text": "Cold: -3C."}],
            "stop_reason": "end_turn", "stop_sequence": null,
            "usage": {"input_tokens": 30, "output_tokens": 4}
        }));
    }
    Reply::sse_events(vec![
        (
            "message_start",
            json!({"type": "message_start", "message": {"id": "msg_2", "type": "message",
                "role": "assistant", "model": "claude-test", "content": [], "stop_reason": null,
                "stop_sequence": null, "usage": {"input_tokens": 30, "output_tokens": 1}}}),
        ),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Cold: -3C."}}),
        ),
        (
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ),
        (
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": null}, "usage": {"output_tokens": 4}}),
        ),
        ("message_stop", json!({"type": "message_stop"})),
    ])
}

fn gemini(r: &Recorded, s: &Scenario) -> Reply {
    let stream = r.path.contains("streamGenerateContent");
    let contents = r.body["contents"].as_array().cloned().unwrap_or_default();
    let parts = |role: &str| -> Vec<Value> {
        contents
            .iter()
            .filter(|c| c["role"] == role)
            .flat_map(|c| c["parts"].as_array().cloned().unwrap_or_default())
            .collect()
    };
    let second = parts("user")
        .iter()
        .any(|p| p.get("functionResponse").is_some());
    if !second {
        // Gemini 3 with thoughts not included: the signature alone, on the call.
        return gemini_answer(
            json!([{"functionCall": {"name": "lookup", "args": {"city": "Oslo"}},
                    "thoughtSignature": s.gemini_signature()}]),
            stream,
        );
    }
    let signed = parts("model")
        .iter()
        .filter(|p| p.get("functionCall").is_some())
        .take(1)
        .all(|p| p["thoughtSignature"] == s.gemini_signature().as_str());
    if !signed {
        return Reply::error(
            400,
            json!({"error": {"code": 400, "status": "INVALID_ARGUMENT",
                "message": "Function call is missing a thought_signature in functionCall parts. This is required for tools to work correctly, and missing thought_signature may lead to degraded model performance. Additional data, function call `default_api:lookup` , position 2. Please refer to https://ai.google.dev/gemini-api/docs/thought-signatures for more details."}}),
        );
    }
    gemini_answer(json!([{"text": "Cold: -3C."}]), stream)
}

fn gemini_answer(parts: Value, stream: bool) -> Reply {
    let chunk = json!({
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 12, "candidatesTokenCount": 6, "totalTokenCount": 18},
        "modelVersion": "gemini-3-pro-preview"
    });
    if stream {
        Reply::sse_raw(vec![format!("data: {chunk}\n\n")])
    } else {
        Reply::json(chunk)
    }
}
