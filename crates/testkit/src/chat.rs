//! Real Chat Completions payloads, as OpenAI-compatible providers send them.

use serde_json::{Value, json};

/// A non-streamed completion with text.
pub fn completion(text: &str, finish_reason: &str) -> Value {
    json!({
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "fake-model",
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": text},
            "finish_reason": finish_reason,
        }],
        "usage": usage(11, 7),
    })
}

/// OpenAI-style usage.
pub fn usage(prompt: u64, completion: u64) -> Value {
    json!({
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0},
    })
}

/// One streamed chunk with a delta and an optional finish reason.
pub fn chunk(delta: Value, finish_reason: Option<&str>) -> Value {
    json!({
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": "fake-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    })
}

/// The final usage-only chunk sent with `stream_options.include_usage`.
pub fn usage_chunk(prompt: u64, completion: u64) -> Value {
    json!({
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": "fake-model",
        "choices": [],
        "usage": usage(prompt, completion),
    })
}

/// The chunks of a streamed text answer: a role chunk, one chunk per piece, a finish chunk and
/// a usage chunk.
pub fn text_stream(pieces: &[&str], finish_reason: &str) -> Vec<Value> {
    let mut out = vec![chunk(json!({"role": "assistant", "content": ""}), None)];
    out.extend(pieces.iter().map(|p| chunk(json!({"content": p}), None)));
    out.push(chunk(json!({}), Some(finish_reason)));
    out.push(usage_chunk(11, 7));
    out
}

/// A non-streamed completion calling tools: `(id, name, arguments)` each.
pub fn tool_calls_completion(calls: &[(&str, &str, Value)]) -> Value {
    let tool_calls: Vec<Value> = calls
        .iter()
        .map(|(id, name, args)| {
            json!({"id": id, "type": "function", "function": {"name": name, "arguments": args.to_string()}})
        })
        .collect();
    json!({
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "fake-model",
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": null, "tool_calls": tool_calls},
            "finish_reason": "tool_calls",
        }],
        "usage": usage(10, 5),
    })
}
