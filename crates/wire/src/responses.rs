//! The OpenAI Responses API: the request a client sends, the response object, its output items
//! and the streaming events.
//!
//! Inbound shapes are lenient where clients differ (an input message may omit `type`; content may
//! be a string or parts) and keep what they do not understand: unknown item, content and tool
//! types land in an `Other` variant holding the original JSON object, and unknown top-level request
//! fields land in `extra`. The hand-written `Deserialize` impls of the request, `Input`, `InputItem`,
//! `MessageContent`, `ContentPart` and `Tool` live in [`crate::inbound`], with the errors that
//! name the leaf field. Outbound shapes are complete per the Open Responses spec: every required
//! key is always serialised, with `null` where the spec allows it.
//!
//! This file holds the request; the input items (`items`), the tools (`tools`), the response
//! object with its output items (`response`) and the stream events (`events`) have their own
//! files, re-exported here so every type keeps its path `toolbridge_wire::responses::Name`.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

mod events;
mod items;
mod output;
mod response;
mod search;
mod tools;

pub use events::{EventKind, StreamEvent};
pub use items::{
    ActionCallItem, ApplyPatchCallItem, ApplyPatchCallOutputItem, ContentPart, CustomToolCallItem,
    FunctionCallItem, FunctionCallOutputItem, InputItem, LocalShellCallOutputItem, MessageContent,
    MessageItem, ReasoningContent, ReasoningItem, SummaryPart,
};
pub use output::{
    ImageGenerationCallItem, McpApprovalRequestItem, McpApprovalResponseItem, McpCallItem,
    McpListToolsItem, OutputContent, OutputItem, OutputMessage, WebSearchCallItem,
};
pub use response::{
    Diagnostic, EchoedTools, IncompleteDetails, InputTokensDetails, OutputTokensDetails,
    ProviderState, ProviderStateEntry, Response, ResponseError, ResponseStatus, Usage,
};
pub use search::{AdditionalToolsItem, ToolSearchCallItem, ToolSearchOutputItem};
pub use tools::{CustomFormat, CustomTool, FunctionTool, NamespaceTool, Tool};

/// `POST /v1/responses` request body. Read by the hand-written `Deserialize` in
/// `inbound::fields`, field by field (a new field goes there too).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CreateResponse {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<Input>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<Tool>>,
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
    pub top_logprobs: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tool_calls: Option<u64>,
    /// Not part of the Responses API; accepted as an extension because Chat Completions users
    /// expect it and every Chat provider supports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop: Option<Stop>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub safety_identifier: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_cache_key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub background: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<TextConfig>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<ReasoningConfig>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub truncation: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_tier: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_response_id: Option<String>,
    /// Every field this crate does not model (`client_metadata`, `stream_options`, …).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `input`: a plain string (one user message) or a list of items.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Input {
    Text(String),
    Items(Vec<InputItem>),
}

/// `stop`: one sequence or several.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Stop {
    One(String),
    Many(Vec<String>),
}

/// `text`: the output format and verbosity.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TextConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<TextFormat>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verbosity: Option<String>,
}

/// `text.format`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum TextFormat {
    Text,
    JsonObject,
    JsonSchema(JsonSchemaFormat),
}

/// `text.format` of type `json_schema`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JsonSchemaFormat {
    pub name: String,
    /// Required in a request; the response object echoes it as sent.
    #[serde(default)]
    pub schema: Value,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strict: Option<bool>,
}

/// `reasoning`: effort and summary mode. Unknown keys (`context`, …) are kept.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ReasoningConfig {
    #[serde(default)]
    pub effort: Option<String>,
    #[serde(default)]
    pub summary: Option<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}
