//! Gemini generateContent: `data:` chunks of whole `GenerateContentResponse`s, no end marker.

use serde_json::{Value, json};

use super::{Answer, End, Usage};
use crate::Reply;

/// A Gemini SSE stream: one `data:` line per chunk, no `[DONE]` (the connection's end ends it).
pub(super) fn gemini_stream(chunks: Vec<Value>) -> Reply {
    Reply::sse_raw(chunks.iter().map(|c| format!("data: {c}\n\n")).collect())
}

pub(super) fn gemini_finish(end: End) -> Option<&'static str> {
    match end {
        // Gemini ends a turn with function calls with `STOP` too.
        End::Stop | End::ToolCalls => Some("STOP"),
        End::Length => Some("MAX_TOKENS"),
        End::Cut => None,
    }
}

pub(super) fn gemini_usage(u: Usage) -> Value {
    json!({
        "promptTokenCount": u.input,
        "cachedContentTokenCount": u.cached,
        "candidatesTokenCount": u.output - u.reasoning,
        "thoughtsTokenCount": u.reasoning,
        "totalTokenCount": u.input + u.output,
    })
}

pub(super) fn gemini_chunk(parts: Vec<Value>, finish: Option<&str>, usage: Option<Usage>) -> Value {
    let mut candidate = json!({"content": {"role": "model", "parts": parts}, "index": 0});
    if let Some(f) = finish {
        candidate["finishReason"] = json!(f);
    }
    let mut out =
        json!({"candidates": [candidate], "modelVersion": "gemini-conf", "responseId": "conf"});
    if let Some(u) = usage {
        out["usageMetadata"] = gemini_usage(u);
    }
    out
}

/// Every part of the answer; `whole` joins the reasoning and the text into one part each.
pub(super) fn gemini_parts(a: &Answer, whole: bool) -> Vec<Value> {
    let mut parts = Vec::new();
    let join = |pieces: &[String]| -> Vec<String> {
        if whole && !pieces.is_empty() {
            vec![pieces.concat()]
        } else {
            pieces.to_vec()
        }
    };
    parts.extend(
        join(&a.reasoning)
            .into_iter()
            .map(|r| json!({"text": r, "thought": true})),
    );
    parts.extend(join(&a.text).into_iter().map(|t| json!({"text": t})));
    parts.extend(
        a.calls
            .iter()
            .map(|c| json!({"functionCall": {"name": c.name, "args": c.arguments}})),
    );
    if parts.is_empty() {
        parts.push(json!({"text": ""}));
    }
    parts
}

pub(super) fn gemini_chunks(a: &Answer) -> Vec<Value> {
    // One chunk per part, the last carrying the finish reason and the usage.
    let mut parts = gemini_parts(a, false);
    let last = parts.pop().unwrap_or_else(|| json!({"text": ""}));
    let mut out: Vec<Value> = parts
        .into_iter()
        .map(|p| gemini_chunk(vec![p], None, None))
        .collect();
    out.push(gemini_chunk(
        vec![last],
        gemini_finish(a.end),
        Some(a.usage),
    ));
    out
}
