//! Anthropic Messages: `event:` + `data:` SSE events from `message_start` to `message_stop`.

use serde_json::{Value, json};

use super::{Answer, End, Usage};

const SIGNATURE: &str = "EqQBCkYIBxgCKkDconformance";

pub(super) fn anthropic_usage(u: Usage) -> Value {
    json!({
        "input_tokens": u.input - u.cached,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": u.cached,
        "output_tokens": u.output,
    })
}

pub(super) fn anthropic_stop(end: End) -> Option<&'static str> {
    match end {
        End::Stop => Some("end_turn"),
        End::ToolCalls => Some("tool_use"),
        End::Length => Some("max_tokens"),
        End::Cut => None,
    }
}

pub(super) fn anthropic_whole(a: &Answer) -> Value {
    let mut content = Vec::new();
    if !a.reasoning.is_empty() {
        content.push(
            json!({"type": "thinking", "thinking": a.reasoning.concat(), "signature": SIGNATURE}),
        );
    }
    if !a.text.is_empty() {
        content.push(json!({"type": "text", "text": a.text.concat()}));
    }
    for c in &a.calls {
        content.push(json!({"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments}));
    }
    json!({
        "id": "msg_conf",
        "type": "message",
        "role": "assistant",
        "model": "claude-conf",
        "content": content,
        "stop_reason": anthropic_stop(a.end),
        "stop_sequence": null,
        "usage": anthropic_usage(a.usage),
    })
}

pub(super) fn anthropic_message_start(u: Usage) -> (&'static str, Value) {
    let mut usage = anthropic_usage(u);
    usage["output_tokens"] = json!(1);
    (
        "message_start",
        json!({"type": "message_start", "message": {
            "id": "msg_conf", "type": "message", "role": "assistant", "model": "claude-conf",
            "content": [], "stop_reason": null, "stop_sequence": null, "usage": usage
        }}),
    )
}

pub(super) fn anthropic_events(a: &Answer) -> Vec<(&'static str, Value)> {
    let mut out = vec![anthropic_message_start(a.usage)];
    let mut index = 0;
    let mut block = |out: &mut Vec<(&'static str, Value)>, start: Value, deltas: Vec<Value>| {
        out.push((
            "content_block_start",
            json!({"type": "content_block_start", "index": index, "content_block": start}),
        ));
        for d in deltas {
            out.push((
                "content_block_delta",
                json!({"type": "content_block_delta", "index": index, "delta": d}),
            ));
        }
        out.push((
            "content_block_stop",
            json!({"type": "content_block_stop", "index": index}),
        ));
        index += 1;
    };
    if !a.reasoning.is_empty() {
        let mut deltas: Vec<Value> = a
            .reasoning
            .iter()
            .map(|r| json!({"type": "thinking_delta", "thinking": r}))
            .collect();
        deltas.push(json!({"type": "signature_delta", "signature": SIGNATURE}));
        block(
            &mut out,
            json!({"type": "thinking", "thinking": "", "signature": ""}),
            deltas,
        );
    }
    if !a.text.is_empty() {
        block(
            &mut out,
            json!({"type": "text", "text": ""}),
            a.text
                .iter()
                .map(|t| json!({"type": "text_delta", "text": t}))
                .collect(),
        );
    }
    for c in &a.calls {
        let arguments = c.arguments.to_string();
        let (head, tail) = arguments.split_at(arguments.len() / 2);
        block(
            &mut out,
            json!({"type": "tool_use", "id": c.id, "name": c.name, "input": {}}),
            vec![
                json!({"type": "input_json_delta", "partial_json": head}),
                json!({"type": "input_json_delta", "partial_json": tail}),
            ],
        );
    }
    let Some(stop) = anthropic_stop(a.end) else {
        return out;
    };
    out.push((
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null}, "usage": {"output_tokens": a.usage.output}}),
    ));
    out.push(("message_stop", json!({"type": "message_stop"})));
    out
}
