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

mod anthropic;
mod chat;
mod gemini;
mod responses;

use anthropic::{anthropic_events, anthropic_message_start, anthropic_whole};
use chat::{chat_chunks, chat_whole};
use gemini::{gemini_chunk, gemini_chunks, gemini_finish, gemini_parts, gemini_stream};
pub use responses::responses_output;
use responses::{responses_error_event, responses_events, responses_object};

/// The top-level fields of OpenAI's Responses create request: what a strict native Responses
/// endpoint documents (the fakes refuse any other).
pub const RESPONSES_FIELDS: &[&str] = &[
    "model",
    "input",
    "instructions",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "temperature",
    "top_p",
    "top_logprobs",
    "max_output_tokens",
    "max_tool_calls",
    "user",
    "safety_identifier",
    "metadata",
    "store",
    "stream",
    "text",
    "reasoning",
    "include",
    "truncation",
    "service_tier",
];

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

impl Answer {
    /// An answer of `text` (none when empty) and `calls`, ending with the calls when there are
    /// any: no reasoning, a small usage (a caching fake replaces it).
    pub fn of(calls: Vec<Call>, text: &str) -> Self {
        Self {
            reasoning: Vec::new(),
            text: if text.is_empty() {
                Vec::new()
            } else {
                vec![text.to_owned()]
            },
            end: if calls.is_empty() {
                End::Stop
            } else {
                End::ToolCalls
            },
            calls,
            usage: Usage {
                input: 100,
                output: 10,
                ..Usage::default()
            },
        }
    }
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
