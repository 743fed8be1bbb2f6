//! Spans in the OpenTelemetry GenAI semantic conventions (the `gen_ai.*` attributes, semantic
//! conventions 1.37 and later), so that Langfuse, Arize Phoenix, Grafana or Datadog show the
//! gateway's model calls and tool runs as what they are, beside the gateway's own stage spans.
//!
//! - [`Inference`]: one `chat {model}` client span per response the gateway answers, open from
//!   the answer's start to its end: the provider (`gen_ai.provider.name`), the requested and the
//!   answering model, the conversation, the token usage with its cached and cache-written
//!   shares and reasoning, the finish reasons, and `error.type` on failure. The rounds of the
//!   gateway's tool loop are inside it (each upstream call also has its own `upstream` span).
//! - [`ToolRun`]: one `execute_tool {name}` span per tool the gateway runs (built-in or MCP).
//!
//! Message content (`gen_ai.input.messages`, `gen_ai.output.messages`,
//! `gen_ai.system_instructions`, a tool's arguments and result) is recorded only when the
//! operator opts in (`telemetry.capture_content`, or
//! `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`), as the conventions require, and
//! each such attribute is cut at [`MAX_CONTENT`] bytes. Without an exporter the spans are
//! disabled and cost nothing.

use serde_json::{Value, json};
use tracing::field::Empty;

use super::telemetry::exporting;

/// The most bytes of one content attribute (a longer text is cut at a character boundary).
pub(crate) const MAX_CONTENT: usize = 64 * 1024;

/// What an inference span starts with.
pub(crate) struct InferenceStart<'a> {
    /// `gen_ai.provider.name`: see [`provider_name`].
    pub provider: &'a str,
    /// The gateway's name of the provider (its config section).
    pub gateway_provider: &'a str,
    /// The upstream model asked for.
    pub model: &'a str,
    /// The model the client named (a route).
    pub route: &'a str,
    pub base_url: &'a str,
    pub conversation: Option<&'a str>,
    pub request: &'a toolbridge_wire::responses::CreateResponse,
    pub capture_content: bool,
}

/// How a response ended, for its inference span.
#[derive(Default)]
pub(crate) struct InferenceEnd<'a> {
    pub response_id: &'a str,
    /// `completed`, `incomplete`, `failed`, `cancelled`.
    pub status: &'a str,
    pub incomplete_reason: Option<&'a str>,
    pub error_code: Option<&'a str>,
    /// Whether the output ends with calls for the client to run.
    pub tool_calls: bool,
    /// `None` when the response reports no usage.
    pub usage: Option<Tokens>,
    /// The response's output items as JSON, read only when content is captured.
    pub output: Option<&'a Value>,
}

/// A response's tokens, as the conventions count them (input includes the cached share).
#[derive(Default, Clone, Copy)]
pub(crate) struct Tokens {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
    pub reasoning: u64,
}

/// A response's `chat` span; recorded and closed by [`Inference::end`] (or closed unrecorded
/// when dropped, for a response its client left).
#[derive(Clone)]
pub(crate) struct Inference {
    span: tracing::Span,
    capture_content: bool,
}

impl Inference {
    /// Opens the span under the current one (the request's), when spans are exported.
    pub(crate) fn start(start: &InferenceStart<'_>) -> Self {
        if !exporting() {
            return Self {
                span: tracing::Span::none(),
                capture_content: false,
            };
        }
        let (address, port) = server_of(start.base_url);
        let req = start.request;
        let span = tracing::info_span!(
            "chat",
            gen_ai.operation.name = "chat",
            gen_ai.provider.name = start.provider,
            gen_ai.request.model = start.model,
            gen_ai.conversation.id = start.conversation,
            gen_ai.output.type = output_type(req),
            gen_ai.request.max_tokens = req.max_output_tokens,
            gen_ai.request.temperature = req.temperature,
            gen_ai.request.top_p = req.top_p,
            gen_ai.request.presence_penalty = req.presence_penalty,
            gen_ai.request.frequency_penalty = req.frequency_penalty,
            server.address = address.as_deref(),
            server.port = port,
            toolbridge.provider = start.gateway_provider,
            toolbridge.model = start.route,
            gen_ai.response.id = Empty,
            // The upstream model that answered: the response the client gets names the model
            // it asked for, and the dialects' events do not carry the provider's own version.
            gen_ai.response.model = start.model,
            gen_ai.response.finish_reasons = Empty,
            gen_ai.usage.input_tokens = Empty,
            gen_ai.usage.output_tokens = Empty,
            gen_ai.usage.cache_read.input_tokens = Empty,
            gen_ai.usage.cache_creation.input_tokens = Empty,
            gen_ai.usage.reasoning.output_tokens = Empty,
            error.type = Empty,
            gen_ai.system_instructions = Empty,
            gen_ai.input.messages = Empty,
            gen_ai.output.messages = Empty,
        );
        if start.capture_content && !span.is_disabled() {
            if let Some(instructions) = &req.instructions {
                let parts = json!([{"type": "text", "content": instructions}]);
                span.record("gen_ai.system_instructions", bounded(&parts));
            }
            let input = match &req.input {
                Some(input) => serde_json::to_value(input).unwrap_or(Value::Null),
                None => Value::Null,
            };
            span.record("gen_ai.input.messages", bounded(&messages(&input)));
        }
        Self {
            span,
            capture_content: start.capture_content,
        }
    }

    /// Whether message content goes on the spans.
    pub(crate) fn captures_content(&self) -> bool {
        self.capture_content && !self.span.is_disabled()
    }

    /// Records how the response ended; the span closes when its last holder drops it.
    pub(crate) fn end(&self, end: &InferenceEnd<'_>) {
        let span = &self.span;
        if span.is_disabled() {
            return;
        }
        span.record("gen_ai.response.id", end.response_id);
        let reason = finish_reason(end);
        span.record(
            "gen_ai.response.finish_reasons",
            Value::from(vec![reason]).to_string(),
        );
        if let Some(usage) = end.usage {
            span.record("gen_ai.usage.input_tokens", usage.input);
            span.record("gen_ai.usage.output_tokens", usage.output);
            span.record("gen_ai.usage.cache_read.input_tokens", usage.cache_read);
            span.record(
                "gen_ai.usage.cache_creation.input_tokens",
                usage.cache_write,
            );
            span.record("gen_ai.usage.reasoning.output_tokens", usage.reasoning);
        }
        if end.status == "failed" {
            span.record("error.type", end.error_code.unwrap_or("failed"));
        }
        if self.capture_content
            && let Some(output) = end.output
        {
            let mut out = messages(output);
            if let Some(Value::Object(last)) = out.as_array_mut().and_then(|m| m.last_mut()) {
                last.insert("finish_reason".into(), reason.into());
            }
            span.record("gen_ai.output.messages", bounded(&out));
        }
    }
}

/// One gateway-run tool's `execute_tool` span, open while it runs.
pub(crate) struct ToolRun {
    span: tracing::Span,
    capture_content: bool,
}

impl ToolRun {
    /// Opens the span for the call `call_id` of `tool` (`server`: its MCP server's label,
    /// `toolbridge` for a built-in tool), with its arguments when content is captured.
    pub(crate) fn start(
        tool: &str,
        call_id: &str,
        server: &str,
        arguments: Option<&str>,
        capture_content: bool,
    ) -> Self {
        if !exporting() {
            return Self {
                span: tracing::Span::none(),
                capture_content: false,
            };
        }
        let built_in = server.is_empty() || server == "toolbridge";
        let span = tracing::info_span!(
            "execute_tool",
            gen_ai.operation.name = "execute_tool",
            gen_ai.tool.name = tool,
            gen_ai.tool.call.id = call_id,
            gen_ai.tool.type = if built_in { "function" } else { "extension" },
            toolbridge.mcp_server = (!built_in).then_some(server),
            gen_ai.tool.call.arguments = Empty,
            gen_ai.tool.call.result = Empty,
            error.type = Empty,
        );
        if capture_content && let Some(arguments) = arguments {
            span.record("gen_ai.tool.call.arguments", cut(arguments));
        }
        Self {
            span,
            capture_content,
        }
    }

    /// Records the tool's result and closes the span.
    pub(crate) fn end(self, result: &Result<String, String>) {
        match result {
            Ok(text) if self.capture_content => {
                self.span.record("gen_ai.tool.call.result", cut(text));
            }
            Ok(_) => {}
            Err(message) => {
                self.span.record("error.type", "tool_error");
                if self.capture_content {
                    self.span.record("gen_ai.tool.call.result", cut(message));
                }
            }
        }
    }
}

/// `gen_ai.provider.name` for a provider of preset `preset` and dialect `dialect`: the
/// conventions' well-known names where one applies, else the preset's vendor.
pub(crate) fn provider_name(preset: &str, dialect: &str) -> &'static str {
    let vendor = preset.strip_suffix("-responses").unwrap_or(preset);
    match vendor {
        "openai" => "openai",
        "anthropic" => "anthropic",
        "gemini" => "gcp.gemini",
        "deepseek" => "deepseek",
        "glm" => "zhipu",
        "kimi" => "moonshot",
        "qwen" => "alibaba.qwen",
        "minimax" => "minimax",
        "mimo" => "xiaomi.mimo",
        "ollama" => "ollama",
        "vllm" => "vllm",
        _ => match dialect {
            "anthropic" => "anthropic",
            "gemini" => "gcp.gemini",
            _ => "openai",
        },
    }
}

/// The finish reason in the conventions' words.
fn finish_reason(end: &InferenceEnd<'_>) -> &'static str {
    match (end.status, end.incomplete_reason) {
        ("completed", _) if end.tool_calls => "tool_calls",
        ("completed", _) => "stop",
        ("incomplete", Some("content_filter")) => "content_filter",
        ("incomplete", _) => "length",
        ("cancelled", _) => "cancelled",
        _ => "error",
    }
}

/// `gen_ai.output.type` from the request's text format.
fn output_type(req: &toolbridge_wire::responses::CreateResponse) -> &'static str {
    use toolbridge_wire::responses::TextFormat;
    match req.text.as_ref().and_then(|t| t.format.as_ref()) {
        Some(TextFormat::JsonSchema(_) | TextFormat::JsonObject) => "json",
        _ => "text",
    }
}

/// `server.address` and `server.port` of an upstream base URL.
fn server_of(base_url: &str) -> (Option<String>, Option<u16>) {
    match url::Url::parse(base_url) {
        Ok(url) => (
            url.host_str().map(str::to_owned),
            url.port_or_known_default(),
        ),
        Err(_) => (None, None),
    }
}

/// Responses items (or a plain input text) as the conventions' messages: each with its `role`
/// and `parts` (`text`, `tool_call`, `tool_call_response`, `reasoning`; another item kind is a
/// part named by its type). Consecutive items of one role share a message.
pub(crate) fn messages(items: &Value) -> Value {
    let mut out: Vec<Value> = Vec::new();
    let mut push = |role: &str, part: Value| match out.last_mut() {
        Some(Value::Object(m)) if m.get("role").and_then(Value::as_str) == Some(role) => {
            if let Some(Value::Array(parts)) = m.get_mut("parts") {
                parts.push(part);
            }
        }
        _ => out.push(json!({"role": role, "parts": [part]})),
    };
    match items {
        Value::String(text) => push("user", json!({"type": "text", "content": text})),
        Value::Array(items) => {
            for item in items {
                let (role, part) = part_of(item);
                push(role, part);
            }
        }
        _ => {}
    }
    Value::Array(out)
}

fn part_of(item: &Value) -> (&str, Value) {
    let kind = item["type"].as_str().unwrap_or("message");
    match kind {
        "message" => {
            let role = item["role"].as_str().unwrap_or("user");
            let text = match &item["content"] {
                Value::String(s) => s.clone(),
                Value::Array(parts) => parts
                    .iter()
                    .filter_map(|p| p["text"].as_str().or_else(|| p["refusal"].as_str()))
                    .collect::<Vec<_>>()
                    .join(""),
                _ => String::new(),
            };
            let role = if role == "developer" { "system" } else { role };
            (role, json!({"type": "text", "content": text}))
        }
        "function_call" | "custom_tool_call" => {
            let arguments = item
                .get("arguments")
                .or_else(|| item.get("input"))
                .cloned()
                .unwrap_or(Value::Null);
            (
                "assistant",
                json!({"type": "tool_call", "id": item["call_id"], "name": item["name"],
                       "arguments": arguments}),
            )
        }
        "function_call_output" | "custom_tool_call_output" => (
            "tool",
            json!({"type": "tool_call_response", "id": item["call_id"],
                   "response": item["output"]}),
        ),
        "reasoning" => {
            let text = item["summary"]
                .as_array()
                .map(|s| {
                    s.iter()
                        .filter_map(|p| p["text"].as_str())
                        .collect::<Vec<_>>()
                        .join("\n")
                })
                .unwrap_or_default();
            ("assistant", json!({"type": "reasoning", "content": text}))
        }
        other => ("assistant", json!({"type": other})),
    }
}

/// A content attribute's JSON text, cut at [`MAX_CONTENT`].
fn bounded(value: &Value) -> String {
    cut(&value.to_string()).to_owned()
}

fn cut(text: &str) -> &str {
    if text.len() <= MAX_CONTENT {
        return text;
    }
    let mut end = MAX_CONTENT;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_become_messages_with_parts() {
        let items = json!([
            {"type": "message", "role": "developer", "content": "be brief"},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
            {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "ok"},
            {"type": "message", "role": "assistant",
             "content": [{"type": "output_text", "text": "done"}]}
        ]);
        let m = messages(&items);
        assert_eq!(m[0]["role"], "system");
        assert_eq!(m[1]["parts"][0]["content"], "hi");
        assert_eq!(m[2]["role"], "assistant");
        assert_eq!(m[2]["parts"][0]["type"], "tool_call");
        assert_eq!(m[3]["parts"][0]["response"], "ok");
        assert_eq!(m[4]["parts"][0]["content"], "done");
        assert_eq!(messages(&json!("plain"))[0]["role"], "user");
    }

    #[test]
    fn finish_reasons_follow_the_status() {
        let end = |status, incomplete_reason, tool_calls| InferenceEnd {
            status,
            incomplete_reason,
            tool_calls,
            ..InferenceEnd::default()
        };
        assert_eq!(finish_reason(&end("completed", None, false)), "stop");
        assert_eq!(finish_reason(&end("completed", None, true)), "tool_calls");
        assert_eq!(
            finish_reason(&end("incomplete", Some("max_output_tokens"), false)),
            "length"
        );
        assert_eq!(finish_reason(&end("failed", None, false)), "error");
    }

    #[test]
    fn content_is_cut_at_a_character_boundary() {
        let long = "é".repeat(MAX_CONTENT);
        let cut = cut(&long);
        assert!(cut.len() <= MAX_CONTENT);
        assert!(cut.chars().all(|c| c == 'é'));
    }
}
