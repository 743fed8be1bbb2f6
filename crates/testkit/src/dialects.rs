//! One neutral model answer rendered in each upstream dialect's real wire format: Chat
//! Completions (`data:` chunks ending in `[DONE]`, reasoning as `reasoning_content` or a leading
//! `<think>` block), Anthropic Messages (`event:` + `data:` SSE events from `message_start` to
//! `message_stop`) and Gemini generateContent (`data:` chunks of whole
//! `GenerateContentResponse`s, no end marker) and OpenAI Responses (`event:` + `data:` SSE
//! events from `response.created` to `response.completed`, items as OpenAI sends them, custom
//! and namespaced calls included), whole or streamed, plus each dialect's error answers (before
//! the stream and inside it).
//!
//! It knows nothing of the gateway: the conformance matrix decides what to render and what to
//! expect. A new dialect is one more [`Wire`] variant; the `match`es below then tell what it must
//! render.

use serde_json::{Value, json};

use crate::Reply;

/// The wire format of one upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wire {
    /// Chat Completions; `think_tags` puts reasoning in a leading `<think>` block of the content
    /// instead of `reasoning_content`.
    Chat {
        think_tags: bool,
    },
    Anthropic,
    Gemini,
    /// A native OpenAI Responses upstream (passed through by the gateway).
    Responses,
}

/// One tool call as the provider makes it: the provider-side name.
#[derive(Debug, Clone)]
pub struct Call {
    /// The call id; Gemini calls carry none and this is ignored there.
    pub id: String,
    pub name: String,
    /// The call's namespace. Only a Responses upstream says it (as `namespace` beside `name`);
    /// the other dialects know flat provider-side names only.
    pub namespace: Option<String>,
    /// A custom (freeform) tool call: a Responses upstream sends it as a `custom_tool_call` whose
    /// `input` is `arguments["input"]`; the other dialects know only functions.
    pub custom: bool,
    pub arguments: Value,
}

/// Token counts in OpenAI's terms: `input` includes `cached`, `output` includes `reasoning`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub input: u64,
    pub cached: u64,
    pub output: u64,
    pub reasoning: u64,
}

/// Why the answer ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    Stop,
    ToolCalls,
    Length,
    /// Cut off: the answer stops with neither a finish reason nor the dialect's end marker (a
    /// stream's connection closed early; a whole answer without a finish reason, or a Responses
    /// object still `in_progress`). A cut stream carries no usage where usage comes last.
    Cut,
}

/// A model answer, dialect-neutral.
#[derive(Debug, Clone)]
pub struct Answer {
    /// Reasoning pieces (empty: none).
    pub reasoning: Vec<String>,
    /// Text pieces, streamed one per chunk.
    pub text: Vec<String>,
    pub calls: Vec<Call>,
    pub end: End,
    pub usage: Usage,
}

/// A rate limit (429) or server error (500) answered before the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HttpFailure {
    /// A 429 asking to come back after this many seconds.
    RateLimited {
        retry_after_secs: u64,
    },
    ServerError,
}

impl Wire {
    /// The whole (non-streamed) answer.
    pub fn whole(self, a: &Answer) -> Reply {
        Reply::json(match self {
            Self::Chat { think_tags } => chat_whole(a, think_tags),
            Self::Anthropic => anthropic_whole(a),
            Self::Gemini => {
                gemini_chunk(gemini_parts(a, true), gemini_finish(a.end), Some(a.usage))
            }
            Self::Responses => responses_object(a, responses_output(a)),
        })
    }

    /// The streamed answer.
    pub fn stream(self, a: &Answer) -> Reply {
        match self {
            Self::Chat { think_tags } if a.end == End::Cut => {
                let chunks = chat_chunks(a, think_tags);
                Reply::sse_raw(chunks.iter().map(|c| format!("data: {c}\n\n")).collect())
            }
            Self::Chat { think_tags } => Reply::sse(chat_chunks(a, think_tags)),
            Self::Anthropic => Reply::sse_events(anthropic_events(a)),
            Self::Gemini => gemini_stream(gemini_chunks(a)),
            Self::Responses => Reply::sse_events(responses_events(a)),
        }
    }

    /// A stream that sends `partial` text and then the dialect's rate-limit error event.
    pub fn stream_then_rate_limit(self, partial: &str) -> Reply {
        let message = "Rate limit reached for requests";
        match self {
            Self::Chat { .. } => {
                let pieces = [
                    crate::chat::chunk(json!({"role": "assistant", "content": ""}), None),
                    crate::chat::chunk(json!({"content": partial}), None),
                    json!({"error": {"message": message, "type": "rate_limit_error", "code": "rate_limit_exceeded"}}),
                ];
                Reply::sse_raw(pieces.iter().map(|p| format!("data: {p}\n\n")).collect())
            }
            Self::Anthropic => Reply::sse_events(vec![
                anthropic_message_start(Usage::default()),
                (
                    "content_block_start",
                    json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
                ),
                (
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": partial}}),
                ),
                (
                    "error",
                    json!({"type": "error", "error": {"type": "rate_limit_error", "message": message}}),
                ),
            ]),
            Self::Gemini => gemini_stream(vec![
                gemini_chunk(vec![json!({"text": partial})], None, None),
                json!({"error": {"code": 429, "message": message, "status": "RESOURCE_EXHAUSTED"}}),
            ]),
            Self::Responses => {
                let answer = Answer {
                    reasoning: Vec::new(),
                    text: vec![partial.to_owned()],
                    calls: Vec::new(),
                    end: End::Stop,
                    usage: Usage::default(),
                };
                // Everything up to the first text delta, then OpenAI's `error` event.
                let mut events = responses_events(&answer);
                let cut = events
                    .iter()
                    .position(|(name, _)| *name == "response.output_text.delta")
                    .map_or(events.len(), |i| i + 1);
                events.truncate(cut);
                events.push(responses_error_event(message, cut));
                Reply::sse_events(events)
            }
        }
    }

    /// A `200` stream whose first event is a rate-limit error: MiniMax's `base_resp` chunk
    /// (which every Chat decoder reads), Anthropic's `error` event, Gemini's `error` chunk,
    /// OpenAI's Responses `error` event.
    pub fn stream_starting_with_rate_limit(self) -> Reply {
        match self {
            Self::Chat { .. } => Reply::sse(vec![json!({
                "id": "", "object": "", "created": 0, "model": "", "choices": null,
                "base_resp": {"status_code": 1002, "status_msg": "rate limit exceeded(RPM)"}
            })]),
            Self::Anthropic => Reply::sse_events(vec![(
                "error",
                json!({"type": "error", "error": {"type": "rate_limit_error", "message": "Rate limited"}}),
            )]),
            Self::Gemini => gemini_stream(vec![
                json!({"error": {"code": 429, "message": "Resource has been exhausted", "status": "RESOURCE_EXHAUSTED"}}),
            ]),
            Self::Responses => Reply::sse_events(vec![responses_error_event(
                "Rate limit reached for requests",
                0,
            )]),
        }
    }

    /// An HTTP error answer as the dialect sends it (a Responses server answers in OpenAI's shape,
    /// as Chat servers do). A rate limit's delay goes where the dialect puts it: the
    /// `Retry-After` header (Chat, Anthropic, Responses) or Google's `RetryInfo.retryDelay`.
    pub fn http_error(self, failure: HttpFailure) -> Reply {
        let (status, delay) = match failure {
            HttpFailure::RateLimited { retry_after_secs } => (429, Some(retry_after_secs)),
            HttpFailure::ServerError => (500, None),
        };
        let header = |d: Option<u64>| {
            d.map(|d| vec![("retry-after".to_owned(), d.to_string())])
                .unwrap_or_default()
        };
        match self {
            Self::Chat { .. } | Self::Responses => {
                let (message, kind, code) = if status == 429 {
                    (
                        "Rate limit reached",
                        "rate_limit_error",
                        "rate_limit_exceeded",
                    )
                } else {
                    ("The server had an error", "server_error", "internal_error")
                };
                Reply::Json {
                    status,
                    body: json!({"error": {"message": message, "type": kind, "param": null, "code": code}}),
                    headers: header(delay),
                }
            }
            Self::Anthropic => {
                let (message, kind) = if status == 429 {
                    (
                        "Number of request tokens has exceeded your rate limit",
                        "rate_limit_error",
                    )
                } else {
                    ("Internal server error", "api_error")
                };
                Reply::Json {
                    status,
                    body: json!({"type": "error", "error": {"type": kind, "message": message}}),
                    headers: header(delay),
                }
            }
            Self::Gemini => {
                let body = match delay {
                    Some(d) => json!({"error": {
                        "code": 429,
                        "message": "Resource has been exhausted (e.g. check quota).",
                        "status": "RESOURCE_EXHAUSTED",
                        "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": format!("{d}s")}]
                    }}),
                    None => json!({"error": {
                        "code": 500,
                        "message": "An internal error has occurred.",
                        "status": "INTERNAL"
                    }}),
                };
                Reply::Json {
                    status,
                    body,
                    headers: Vec::new(),
                }
            }
        }
    }
}

// ---- Chat Completions ----

fn chat_usage(u: Usage) -> Value {
    json!({
        "prompt_tokens": u.input,
        "completion_tokens": u.output,
        "total_tokens": u.input + u.output,
        "prompt_tokens_details": {"cached_tokens": u.cached},
        "completion_tokens_details": {"reasoning_tokens": u.reasoning},
    })
}

fn chat_finish(end: End) -> Option<&'static str> {
    match end {
        End::Stop => Some("stop"),
        End::ToolCalls => Some("tool_calls"),
        End::Length => Some("length"),
        End::Cut => None,
    }
}

fn chat_whole(a: &Answer, think_tags: bool) -> Value {
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

fn chat_chunks(a: &Answer, think_tags: bool) -> Vec<Value> {
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

// ---- Anthropic Messages ----

const SIGNATURE: &str = "EqQBCkYIBxgCKkDconformance";

fn anthropic_usage(u: Usage) -> Value {
    json!({
        "input_tokens": u.input - u.cached,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": u.cached,
        "output_tokens": u.output,
    })
}

fn anthropic_stop(end: End) -> Option<&'static str> {
    match end {
        End::Stop => Some("end_turn"),
        End::ToolCalls => Some("tool_use"),
        End::Length => Some("max_tokens"),
        End::Cut => None,
    }
}

fn anthropic_whole(a: &Answer) -> Value {
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

fn anthropic_message_start(u: Usage) -> (&'static str, Value) {
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

fn anthropic_events(a: &Answer) -> Vec<(&'static str, Value)> {
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

// ---- Gemini generateContent ----

/// A Gemini SSE stream: one `data:` line per chunk, no `[DONE]` (the connection's end ends it).
fn gemini_stream(chunks: Vec<Value>) -> Reply {
    Reply::sse_raw(chunks.iter().map(|c| format!("data: {c}\n\n")).collect())
}

fn gemini_finish(end: End) -> Option<&'static str> {
    match end {
        // Gemini ends a turn with function calls with `STOP` too.
        End::Stop | End::ToolCalls => Some("STOP"),
        End::Length => Some("MAX_TOKENS"),
        End::Cut => None,
    }
}

fn gemini_usage(u: Usage) -> Value {
    json!({
        "promptTokenCount": u.input,
        "cachedContentTokenCount": u.cached,
        "candidatesTokenCount": u.output - u.reasoning,
        "thoughtsTokenCount": u.reasoning,
        "totalTokenCount": u.input + u.output,
    })
}

fn gemini_chunk(parts: Vec<Value>, finish: Option<&str>, usage: Option<Usage>) -> Value {
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
fn gemini_parts(a: &Answer, whole: bool) -> Vec<Value> {
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

fn gemini_chunks(a: &Answer) -> Vec<Value> {
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

// ---- OpenAI Responses ----

const RESPONSES_ENCRYPTED: &str = "gAAAA-conformance-opaque";

fn responses_usage(u: Usage) -> Value {
    json!({
        "input_tokens": u.input,
        "input_tokens_details": {"cached_tokens": u.cached},
        "output_tokens": u.output,
        "output_tokens_details": {"reasoning_tokens": u.reasoning},
        "total_tokens": u.input + u.output,
    })
}

/// The whole response object around `output`: `completed`, or `incomplete` with
/// `max_output_tokens` when the answer was cut.
fn responses_object(a: &Answer, output: Vec<Value>) -> Value {
    let (status, details) = match a.end {
        End::Length => ("incomplete", json!({"reason": "max_output_tokens"})),
        End::Stop | End::ToolCalls => ("completed", Value::Null),
        End::Cut => ("in_progress", Value::Null),
    };
    json!({
        "id": "resp_conf_upstream", "object": "response", "created_at": 1_700_000_000,
        "status": status, "model": "gpt-conf-2026", "output": output,
        "previous_response_id": null, "store": false, "error": null,
        "incomplete_details": details, "instructions": null, "tools": [], "tool_choice": "auto",
        "parallel_tool_calls": true, "temperature": 1.0, "top_p": 1.0, "truncation": "disabled",
        "metadata": {}, "text": {"format": {"type": "text"}},
        "usage": responses_usage(a.usage),
    })
}

/// The output items as a Responses server sends them, final: reasoning as a summary with its
/// encrypted blob, one message, then each call — a `custom_tool_call` for a custom tool, a
/// `function_call` (with `namespace` for a namespaced tool) otherwise.
pub fn responses_output(a: &Answer) -> Vec<Value> {
    let mut out = Vec::new();
    if !a.reasoning.is_empty() {
        out.push(json!({
            "type": "reasoning", "id": "rs_conf",
            "summary": [{"type": "summary_text", "text": a.reasoning.concat()}],
            "encrypted_content": RESPONSES_ENCRYPTED,
        }));
    }
    if !a.text.is_empty() {
        let status = match a.end {
            End::Length => "incomplete",
            End::Cut => "in_progress",
            End::Stop | End::ToolCalls => "completed",
        };
        out.push(json!({
            "type": "message", "id": "msg_conf", "status": status, "role": "assistant",
            "content": [{"type": "output_text", "text": a.text.concat(), "annotations": [], "logprobs": []}],
        }));
    }
    for (i, c) in a.calls.iter().enumerate() {
        let mut item = if c.custom {
            json!({
                "type": "custom_tool_call", "id": format!("ctc_conf_{i}"), "status": "completed",
                "call_id": c.id, "name": c.name,
                "input": c.arguments["input"].as_str().unwrap_or_default(),
            })
        } else {
            json!({
                "type": "function_call", "id": format!("fc_conf_{i}"), "status": "completed",
                "call_id": c.id, "name": c.name, "arguments": c.arguments.to_string(),
            })
        };
        if let Some(ns) = &c.namespace {
            item["namespace"] = json!(ns);
        }
        out.push(item);
    }
    out
}

/// OpenAI's `error` stream event (a rate limit), the `sequence`th event of its stream.
fn responses_error_event(message: &str, sequence: usize) -> (&'static str, Value) {
    (
        "error",
        json!({"type": "error", "sequence_number": sequence, "code": "rate_limit_exceeded",
               "message": message, "param": null}),
    )
}

/// The stream of a whole answer, event by event as OpenAI sends it. An answer with nothing in
/// it is a `200` with no events at all (a server that accepted and said nothing).
fn responses_events(a: &Answer) -> Vec<(&'static str, Value)> {
    let output = responses_output(a);
    if output.is_empty() {
        return Vec::new();
    }
    let mut events: Vec<(&'static str, Value)> = Vec::new();
    let mut push = |name: &'static str, mut data: Value| {
        data["type"] = json!(name);
        data["sequence_number"] = json!(events.len());
        events.push((name, data));
    };
    let mut started = responses_object(a, Vec::new());
    started["status"] = json!("in_progress");
    started["incomplete_details"] = Value::Null;
    started["usage"] = Value::Null;
    push("response.created", json!({"response": started}));
    push("response.in_progress", json!({"response": started}));
    let mut calls = a.calls.iter();
    for (index, item) in output.iter().enumerate() {
        let id = item["id"].clone();
        let at = json!({"item_id": id, "output_index": index});
        let with = |extra: Value| {
            let mut v = at.clone();
            if let (Some(v), Value::Object(extra)) = (v.as_object_mut(), extra) {
                v.extend(extra);
            }
            v
        };
        match item["type"].as_str().unwrap_or_default() {
            "reasoning" => {
                push(
                    "response.output_item.added",
                    json!({"output_index": index, "item": {"type": "reasoning", "id": id, "summary": []}}),
                );
                let part = |text: String| json!({"type": "summary_text", "text": text});
                push(
                    "response.reasoning_summary_part.added",
                    with(json!({"summary_index": 0, "part": part(String::new())})),
                );
                for r in &a.reasoning {
                    push(
                        "response.reasoning_summary_text.delta",
                        with(json!({"summary_index": 0, "delta": r})),
                    );
                }
                let text = a.reasoning.concat();
                push(
                    "response.reasoning_summary_text.done",
                    with(json!({"summary_index": 0, "text": text})),
                );
                push(
                    "response.reasoning_summary_part.done",
                    with(json!({"summary_index": 0, "part": part(text)})),
                );
            }
            "message" => {
                push(
                    "response.output_item.added",
                    json!({"output_index": index, "item": {"type": "message", "id": id,
                        "status": "in_progress", "role": "assistant", "content": []}}),
                );
                let part = |text: String| json!({"type": "output_text", "text": text, "annotations": [], "logprobs": []});
                push(
                    "response.content_part.added",
                    with(json!({"content_index": 0, "part": part(String::new())})),
                );
                for t in &a.text {
                    push(
                        "response.output_text.delta",
                        with(json!({"content_index": 0, "delta": t, "logprobs": []})),
                    );
                }
                let text = a.text.concat();
                push(
                    "response.output_text.done",
                    with(json!({"content_index": 0, "text": text, "logprobs": []})),
                );
                push(
                    "response.content_part.done",
                    with(json!({"content_index": 0, "part": part(text)})),
                );
            }
            kind => {
                let Some(c) = calls.next() else { continue };
                let mut added = item.clone();
                added["status"] = json!("in_progress");
                let (whole, field, delta, done) = if kind == "custom_tool_call" {
                    (
                        c.arguments["input"].as_str().unwrap_or_default().to_owned(),
                        "input",
                        "response.custom_tool_call_input.delta",
                        "response.custom_tool_call_input.done",
                    )
                } else {
                    (
                        c.arguments.to_string(),
                        "arguments",
                        "response.function_call_arguments.delta",
                        "response.function_call_arguments.done",
                    )
                };
                added[field] = json!("");
                push(
                    "response.output_item.added",
                    json!({"output_index": index, "item": added}),
                );
                let cut = (0..=whole.len() / 2)
                    .rev()
                    .find(|i| whole.is_char_boundary(*i))
                    .unwrap_or(0);
                let (head, tail) = whole.split_at(cut);
                for piece in [head, tail] {
                    push(delta, with(json!({"delta": piece})));
                }
                push(done, with(json!({field: whole})));
            }
        }
        push(
            "response.output_item.done",
            json!({"output_index": index, "item": item}),
        );
    }
    if a.end == End::Cut {
        // The connection closed after the last delta: no item is done, nothing ends.
        let last_delta = events
            .iter()
            .rposition(|(name, _)| name.ends_with(".delta"));
        events.truncate(last_delta.map_or(0, |i| i + 1));
        return events;
    }
    let terminal = if a.end == End::Length {
        "response.incomplete"
    } else {
        "response.completed"
    };
    push(
        terminal,
        json!({"response": responses_object(a, output.clone())}),
    );
    events
}
