//! Chat Completions: `data:` chunks ending in `[DONE]`, reasoning as `reasoning_content` or a
//! leading `<think>` block.

use serde_json::{Value, json};

use super::{Answer, End, Usage};

pub(super) fn chat_usage(u: Usage) -> Value {
    json!({
        "prompt_tokens": u.input,
        "completion_tokens": u.output,
        "total_tokens": u.input + u.output,
        "prompt_tokens_details": {"cached_tokens": u.cached},
        "completion_tokens_details": {"reasoning_tokens": u.reasoning},
    })
}

pub(super) fn chat_finish(end: End) -> Option<&'static str> {
    match end {
        End::Stop => Some("stop"),
        End::ToolCalls => Some("tool_calls"),
        End::Length => Some("length"),
        End::Cut => None,
    }
}

pub(super) fn chat_whole(a: &Answer, think_tags: bool) -> Value {
    let reasoning = a.reasoning.concat();
    let text = a.text.concat();
    let mut message = json!({"role": "assistant", "content": text});
    if !reasoning.is_empty() {
        if think_tags {
            message["content"] = json!(format!("<think>{reasoning}</think>\n\n{text}"));
        } else {
            message["reasoning_content"] = json!(reasoning);
        }
    }
    if !a.calls.is_empty() {
        if text.is_empty() && reasoning.is_empty() {
            message["content"] = Value::Null;
        }
        message["tool_calls"] = a
            .calls
            .iter()
            .map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments.to_string()}}))
            .collect();
    }
    json!({
        "id": "chatcmpl-conf",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "fake-model",
        "choices": [{"index": 0, "message": message, "finish_reason": chat_finish(a.end)}],
        "usage": chat_usage(a.usage),
    })
}

pub(super) fn chat_chunks(a: &Answer, think_tags: bool) -> Vec<Value> {
    use crate::chat::chunk;
    let mut out = vec![chunk(json!({"role": "assistant", "content": ""}), None)];
    if !a.reasoning.is_empty() {
        if think_tags {
            out.push(chunk(json!({"content": "<think>"}), None));
            out.extend(
                a.reasoning
                    .iter()
                    .map(|r| chunk(json!({"content": r}), None)),
            );
            out.push(chunk(json!({"content": "</think>\n\n"}), None));
        } else {
            out.extend(
                a.reasoning
                    .iter()
                    .map(|r| chunk(json!({"reasoning_content": r}), None)),
            );
        }
    }
    out.extend(a.text.iter().map(|t| chunk(json!({"content": t}), None)));
    for (index, c) in a.calls.iter().enumerate() {
        let arguments = c.arguments.to_string();
        let (head, tail) = arguments.split_at(arguments.len() / 2);
        out.push(chunk(
            json!({"tool_calls": [{"index": index, "id": c.id, "type": "function", "function": {"name": c.name, "arguments": head}}]}),
            None,
        ));
        out.push(chunk(
            json!({"tool_calls": [{"index": index, "function": {"arguments": tail}}]}),
            None,
        ));
    }
    let Some(finish) = chat_finish(a.end) else {
        return out;
    };
    out.push(chunk(json!({}), Some(finish)));
    out.push(json!({
        "id": "chatcmpl-conf",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": "fake-model",
        "choices": [],
        "usage": chat_usage(a.usage),
    }));
    out
}
