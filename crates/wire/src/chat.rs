//! The Chat Completions dialect: request, response, stream chunk and usage.
//!
//! Providers of the OpenAI-compatible family differ in the details (reasoning fields, usage
//! field names, errors inside HTTP 200), so inbound structs keep every field they do not model in
//! `extra`, and optional fields are optional even where OpenAI always sends them.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// `POST {base}/chat/completions` request body.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatRequest {
    pub model: String,
    pub messages: Vec<ChatMessage>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<ChatTool>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel_tool_calls: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub presence_penalty: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frequency_penalty: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_completion_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub safety_identifier: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_cache_key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_format: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logprobs: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_logprobs: Option<u32>,
    pub stream: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_options: Option<StreamOptions>,
    /// Provider-specific fields set by a preset (`thinking`, `tool_stream`, …).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A message's content with its long texts (a system prompt, a pasted file) through the fast
/// escaper ([`crate::raw::LongStr`]): the string itself, or each part's `text`.
fn long_text<S: serde::Serializer>(content: &Option<Value>, s: S) -> Result<S::Ok, S::Error> {
    use crate::raw::LongStr;
    use serde::ser::SerializeSeq;
    match content {
        Some(Value::String(text)) => LongStr(text).serialize(s),
        Some(Value::Array(parts)) => {
            let mut seq = s.serialize_seq(Some(parts.len()))?;
            for part in parts {
                match part {
                    Value::Object(map) => {
                        seq.serialize_element(&PartTexts(map))?;
                    }
                    other => seq.serialize_element(other)?,
                }
            }
            seq.end()
        }
        other => other.serialize(s),
    }
}

/// A content part whose string values go through [`crate::raw::LongStr`].
struct PartTexts<'a>(&'a Map<String, Value>);

impl Serialize for PartTexts<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (key, value) in self.0 {
            match value {
                Value::String(text) => map.serialize_entry(key, &crate::raw::LongStr(text))?,
                other => map.serialize_entry(key, other)?,
            }
        }
        map.end()
    }
}

/// `stream_options`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StreamOptions {
    pub include_usage: bool,
}

/// One message of a Chat request.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatMessage {
    pub role: String,
    /// A string, a list of parts, or null (an assistant turn with only tool calls).
    #[serde(default, serialize_with = "long_text")]
    pub content: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<ChatToolCall>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<String>,
    /// MiniMax's form of the same (`reasoning_split: true`), replayed on tool-call turns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_details: Option<Vec<ReasoningDetail>>,
}

/// One entry of MiniMax's `reasoning_details` (with `reasoning_split: true`), in a message or a
/// stream delta: `{"type": "reasoning.text", "id": "reasoning-text-1", "format":
/// "MiniMax-response-v1", "index": 0, "text": "…"}` (platform.minimax.io/docs/guides/
/// text-m2-function-call). Fields other than `type` and `text` are kept as they came.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ReasoningDetail {
    #[serde(rename = "type", default)]
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A tool declaration (`{"type":"function","function":{…}}`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatTool {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function: Option<ChatFunction>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// The function of a [`ChatTool`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatFunction {
    pub name: String,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "crate::raw::long_opt"
    )]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<crate::RawJson>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strict: Option<bool>,
}

/// A complete tool call in an assistant message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatToolCall {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub function: ChatFunctionCall,
}

/// The function part of a [`ChatToolCall`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatFunctionCall {
    pub name: String,
    pub arguments: String,
}

/// A Chat answer: the whole answer ([`ChatResponse`]) or one streamed chunk ([`ChatChunk`],
/// `object: "chat.completion.chunk"`), which carry the same fields around their `choices`. Read
/// field by field (`inbound/fields.rs`): a derive with `#[serde(flatten)]` would buffer every
/// chunk of a stream into serde's intermediate form and read it twice. A `null` `choices` reads
/// as none.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ChatAnswer<C> {
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub choices: Vec<C>,
    #[serde(default)]
    pub usage: Option<ChatUsage>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A non-streamed Chat response.
pub type ChatResponse = ChatAnswer<ChatChoice>;

/// One streamed chunk (`object: "chat.completion.chunk"`).
pub type ChatChunk = ChatAnswer<ChunkChoice>;

// The two choices stay two structs: they differ in the key that holds the message (`message`
// or `delta`), and one generic choice could only tell them apart with a hand-written serde or
// an alias that would accept either key in either answer.

/// One choice of a [`ChatResponse`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatChoice {
    #[serde(default)]
    pub index: u32,
    #[serde(default)]
    pub message: AnswerMessage,
    #[serde(default)]
    pub finish_reason: Option<String>,
}

/// One choice of a [`ChatChunk`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChunkChoice {
    #[serde(default)]
    pub index: u32,
    #[serde(default)]
    pub delta: AnswerMessage,
    #[serde(default)]
    pub finish_reason: Option<String>,
}

/// An answer's `content`: a string, or a list of parts (Mistral's reasoning models send `text`
/// and `thinking` parts), read part by part by the dialect.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum AnswerContent {
    Text(String),
    Parts(Vec<Value>),
}

impl From<&str> for AnswerContent {
    fn from(text: &str) -> Self {
        Self::Text(text.to_owned())
    }
}

/// The assistant message of a [`ChatChoice`], or the piece of it a [`ChunkChoice`] carries as
/// its `delta`: the same fields, each of which a chunk may leave out.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AnswerMessage {
    #[serde(default)]
    pub role: Option<String>,
    #[serde(default)]
    pub content: Option<AnswerContent>,
    #[serde(default)]
    pub refusal: Option<String>,
    /// DeepSeek, Kimi, Qwen, GLM, MiniMax and vLLM's reasoning parsers.
    #[serde(default)]
    pub reasoning_content: Option<String>,
    /// Ollama and newer vLLM name the same thing `reasoning`.
    #[serde(default)]
    pub reasoning: Option<String>,
    /// MiniMax with `reasoning_split: true`.
    #[serde(default)]
    pub reasoning_details: Option<Vec<ReasoningDetail>>,
    #[serde(default)]
    pub tool_calls: Option<Vec<ChatToolCallDelta>>,
}

/// A tool call fragment: in a stream every field may be missing from any one chunk.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatToolCallDelta {
    #[serde(default)]
    pub index: Option<u32>,
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default, rename = "type")]
    pub kind: Option<String>,
    #[serde(default)]
    pub function: Option<ChatFunctionCallDelta>,
}

/// The function part of a [`ChatToolCallDelta`]. `arguments` may arrive as a JSON object
/// instead of a string (some local servers do that), hence `Value`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatFunctionCallDelta {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub arguments: Option<Value>,
}

/// Token usage in OpenAI's and its imitators' field names.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatUsage {
    #[serde(default)]
    pub prompt_tokens: u64,
    #[serde(default)]
    pub completion_tokens: u64,
    #[serde(default)]
    pub total_tokens: Option<u64>,
    #[serde(default)]
    pub prompt_tokens_details: Option<PromptTokensDetails>,
    #[serde(default)]
    pub completion_tokens_details: Option<CompletionTokensDetails>,
    /// DeepSeek's name for cached prompt tokens.
    #[serde(default)]
    pub prompt_cache_hit_tokens: Option<u64>,
    /// Moonshot's name for cached prompt tokens (top level, beside `prompt_tokens`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_tokens: Option<u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PromptTokensDetails {
    #[serde(default)]
    pub cached_tokens: Option<u64>,
    /// Prompt tokens written to the cache (OpenAI).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_tokens: Option<u64>,
    /// Prompt tokens written to the explicit cache (Qwen).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_creation_input_tokens: Option<u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CompletionTokensDetails {
    #[serde(default)]
    pub reasoning_tokens: Option<u64>,
}
