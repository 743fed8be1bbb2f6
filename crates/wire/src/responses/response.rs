//! The response object: status, error, usage and toolbridge's diagnostics. Its `output` items
//! are in `output`.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{OutputItem, ReasoningConfig, TextConfig, Tool};

/// The response object (`object: "response"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Response {
    pub id: String,
    pub object: String,
    pub created_at: i64,
    pub completed_at: Option<i64>,
    pub status: ResponseStatus,
    pub incomplete_details: Option<IncompleteDetails>,
    pub model: String,
    pub previous_response_id: Option<String>,
    pub instructions: Option<String>,
    pub output: Vec<OutputItem>,
    pub error: Option<ResponseError>,
    pub tools: EchoedTools,
    pub tool_choice: Value,
    pub truncation: String,
    pub parallel_tool_calls: bool,
    pub text: TextConfig,
    pub top_p: f64,
    pub presence_penalty: f64,
    pub frequency_penalty: f64,
    pub top_logprobs: u32,
    pub temperature: f64,
    pub reasoning: Option<ReasoningConfig>,
    pub usage: Option<Usage>,
    pub max_output_tokens: Option<u64>,
    pub max_tool_calls: Option<u64>,
    pub store: bool,
    pub background: bool,
    pub service_tier: String,
    pub metadata: Map<String, Value>,
    pub safety_identifier: Option<String>,
    pub prompt_cache_key: Option<String>,
    /// The conversation this response belongs to (`{"id": …}`), when the request named one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation: Option<Value>,
    /// toolbridge's own account of the decisions it made for this response (dropped or changed
    /// parameters, degraded tools, …). Absent when there is nothing to report.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub toolbridge_diagnostics: Vec<Diagnostic>,
    /// The provider state a later turn must send back with this response's calls (signatures,
    /// redacted reasoning), which the gateway keeps server-side. Never serialised.
    #[serde(skip)]
    pub provider_states: Vec<ProviderStateEntry>,
    /// Fields this struct does not know, as they came (a native Responses upstream's own, a
    /// stored response's): unknown fields pass through.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Response {
    /// The fields of the response object this struct names (its JSON keys).
    pub const FIELDS: &'static [&'static str] = &[
        "id",
        "object",
        "created_at",
        "completed_at",
        "status",
        "incomplete_details",
        "model",
        "previous_response_id",
        "instructions",
        "output",
        "error",
        "tools",
        "tool_choice",
        "truncation",
        "parallel_tool_calls",
        "text",
        "top_p",
        "presence_penalty",
        "frequency_penalty",
        "top_logprobs",
        "temperature",
        "reasoning",
        "usage",
        "max_output_tokens",
        "max_tool_calls",
        "store",
        "background",
        "service_tier",
        "metadata",
        "safety_identifier",
        "prompt_cache_key",
        "conversation",
        "toolbridge_diagnostics",
    ];
}

/// The tools a response echoes (the request's `tools`), and, when the gateway has it, their
/// JSON text: the text it serialised once to key the tools' compiled checks
/// (`toolbridge_core::repair::SchemaCache`), written out as it is instead of serialised again
/// (a Codex request's ten tools are about 9 KB of JSON; writing the text took 10 K instructions,
/// 1 %, off its translation). Reads go to the list; a change through it drops the text, so the
/// text never disagrees with the list.
#[derive(Clone, Default, Deserialize)]
#[serde(transparent)]
pub struct EchoedTools {
    list: Vec<Tool>,
    #[serde(skip)]
    json: Option<crate::raw::RawJson>,
}

impl EchoedTools {
    /// `list`, with `json` as its text: `json` must be `list` serialised (the caller checks the
    /// list it came from is equal to this one).
    pub fn with_json(list: Vec<Tool>, json: crate::raw::RawJson) -> Self {
        Self {
            list,
            json: Some(json),
        }
    }

    /// Whether the text is kept.
    pub fn has_json(&self) -> bool {
        self.json.is_some()
    }
}

impl From<Vec<Tool>> for EchoedTools {
    fn from(list: Vec<Tool>) -> Self {
        Self { list, json: None }
    }
}

impl std::ops::Deref for EchoedTools {
    type Target = Vec<Tool>;

    fn deref(&self) -> &Vec<Tool> {
        &self.list
    }
}

impl std::ops::DerefMut for EchoedTools {
    /// The list to change: its text, which would no longer match, is dropped.
    fn deref_mut(&mut self) -> &mut Vec<Tool> {
        self.json = None;
        &mut self.list
    }
}

impl PartialEq for EchoedTools {
    fn eq(&self, other: &Self) -> bool {
        self.list == other.list
    }
}

impl std::fmt::Debug for EchoedTools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.list.fmt(f)
    }
}

impl Serialize for EchoedTools {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match &self.json {
            Some(json) => json.serialize(serializer),
            None => self.list.serialize(serializer),
        }
    }
}

/// What a provider needs back, unchanged, with an assistant turn's calls: the reasoning text,
/// its signature (Anthropic's signed `thinking`, Gemini's `thoughtSignature`) and Anthropic's
/// `redacted_thinking` blocks.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProviderState {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub redacted: Vec<String>,
    /// The provider (its configured name) whose native Responses endpoint produced this
    /// reasoning as plaintext: it is replayed to that provider only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<String>,
}

impl ProviderState {
    /// Whether a provider checks anything of it (a signature or redacted reasoning).
    pub fn is_signed(&self) -> bool {
        self.signature.is_some() || !self.redacted.is_empty()
    }
}

/// One turn's [`ProviderState`] and the `call_id`s of the calls it goes back with.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProviderStateEntry {
    pub call_ids: Vec<String>,
    pub state: ProviderState,
}

/// One decision toolbridge made that the client should be able to see.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Diagnostic {
    /// A stable snake_case code.
    pub code: String,
    /// The request path the decision is about (`temperature`, `tools[3]`, …), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub param: Option<String>,
    pub message: String,
}

/// `status` of a response.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResponseStatus {
    Queued,
    InProgress,
    Completed,
    Incomplete,
    Failed,
    Cancelled,
}

impl ResponseStatus {
    /// The status as the API writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Queued => "queued",
            Self::InProgress => "in_progress",
            Self::Completed => "completed",
            Self::Incomplete => "incomplete",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
        }
    }
}

/// `incomplete_details`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IncompleteDetails {
    pub reason: String,
}

/// `error` of a failed response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResponseError {
    /// One of the codes OpenAI documents for a failed response (`server_error`,
    /// `rate_limit_exceeded`, `invalid_prompt`, …), so clients act on it.
    pub code: String,
    pub message: String,
    /// The gateway's own finer code (`upstream_overloaded`, `empty_upstream_response`, …), when
    /// it is not `code` itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub toolbridge_code: Option<String>,
}

/// Token usage of a response. A field an upstream leaves out reads as zero.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Usage {
    pub input_tokens: u64,
    pub input_tokens_details: InputTokensDetails,
    pub output_tokens: u64,
    pub output_tokens_details: OutputTokensDetails,
    pub total_tokens: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct InputTokensDetails {
    pub cached_tokens: u64,
    /// Input tokens written to the provider's prompt cache (the OpenAI SDK expects the field).
    #[serde(default)]
    pub cache_write_tokens: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct OutputTokensDetails {
    pub reasoning_tokens: u64,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::raw::RawJson;

    fn tools() -> Vec<Tool> {
        serde_json::from_value(serde_json::json!([
            {"type": "function", "name": "f", "description": "d \"q\"\n",
             "parameters": {"type": "object", "properties": {"x": {"type": "string"}}},
             "strict": false},
            {"type": "custom", "name": "apply_patch",
             "format": {"type": "grammar", "syntax": "lark", "definition": "start: /.+/"}},
            {"type": "web_search", "unknown": [1, 2]}
        ]))
        .unwrap()
    }

    /// Echoed tools with their text write that text, which is the list's own serialisation; a
    /// change through the list drops the text.
    #[test]
    fn echoed_tools_write_their_text_until_the_list_changes() {
        let list = tools();
        let plain = serde_json::to_string(&EchoedTools::from(list.clone())).unwrap();
        assert_eq!(plain, serde_json::to_string(&list).unwrap());
        let text = RawJson::of(&list).unwrap();
        let mut echoed = EchoedTools::with_json(list.clone(), text);
        assert!(echoed.has_json());
        assert_eq!(serde_json::to_string(&echoed).unwrap(), plain);
        assert_eq!(
            serde_json::to_value(&echoed).unwrap(),
            serde_json::to_value(&list).unwrap()
        );
        assert_eq!(echoed, EchoedTools::from(list.clone()));
        let back: EchoedTools = serde_json::from_str(&plain).unwrap();
        assert_eq!(*back, list);
        echoed.pop();
        assert!(!echoed.has_json());
        assert_eq!(
            serde_json::to_string(&echoed).unwrap(),
            serde_json::to_string(&list[..2]).unwrap()
        );
    }
}
