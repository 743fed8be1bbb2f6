//! The OpenAI Responses API: the request a client sends, the response object, its output items
//! and the streaming events.
//!
//! Inbound shapes are lenient where clients differ (an input message may omit `type`; content may
//! be a string or parts) and keep what they do not understand: unknown item, content and tool
//! types land in an `Other` variant holding the original JSON object, and unknown top-level request
//! fields land in `extra`. The hand-written `Deserialize` impls of `Input`, `InputItem`,
//! `MessageContent`, `ContentPart` and `Tool` live in [`crate::inbound`], with the errors that
//! name the leaf field. Outbound shapes are complete per the Open Responses spec: every required
//! key is always serialised, with `null` where the spec allows it.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// `POST /v1/responses` request body.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
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

/// One item of `input`. A message may omit `type` (the "easy input message" form).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum InputItem {
    Message(MessageItem),
    FunctionCall(FunctionCallItem),
    FunctionCallOutput(FunctionCallOutputItem),
    CustomToolCall(CustomToolCallItem),
    CustomToolCallOutput(FunctionCallOutputItem),
    LocalShellCall(ActionCallItem),
    LocalShellCallOutput(LocalShellCallOutputItem),
    ShellCall(ActionCallItem),
    ShellCallOutput(FunctionCallOutputItem),
    ApplyPatchCall(ApplyPatchCallItem),
    ApplyPatchCallOutput(ApplyPatchCallOutputItem),
    Reasoning(ReasoningItem),
    /// A tool call the gateway (or a Responses server) ran, echoed back with its output.
    McpCall(McpCallItem),
    /// A call waiting for the client's approval, echoed back.
    McpApprovalRequest(McpApprovalRequestItem),
    /// The client's answer to an approval request.
    McpApprovalResponse(McpApprovalResponseItem),
    /// Any other item type, kept as its JSON object (including `type`).
    #[serde(untagged)]
    Other(Map<String, Value>),
}

/// A `custom_tool_call` item: a freeform tool's raw input.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CustomToolCallItem {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub call_id: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub input: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
}

/// A `local_shell_call` or `shell_call` item: the call and its `action` object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ActionCallItem {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub call_id: String,
    pub action: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
}

/// A `local_shell_call_output` item. Older clients put the call's id in `id` and no `call_id`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LocalShellCallOutputItem {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    pub output: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
}

/// An `apply_patch_call` item: the call and its `operation` (`create_file`, `update_file`,
/// `delete_file` with `path` and `diff`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApplyPatchCallItem {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub call_id: String,
    pub operation: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
}

/// An `apply_patch_call_output` item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApplyPatchCallOutputItem {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub call_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
}

/// A message item, input or output side.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MessageItem {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub role: String,
    pub content: MessageContent,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A message's content: a string or a list of parts.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum MessageContent {
    Text(String),
    Parts(Vec<ContentPart>),
}

/// One content part of a message.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentPart {
    InputText {
        text: String,
    },
    OutputText {
        text: String,
        #[serde(default)]
        annotations: Vec<Value>,
    },
    Refusal {
        refusal: String,
    },
    /// Any other part (`input_image`, `input_file`, …), kept as its JSON object.
    #[serde(untagged)]
    Other(Map<String, Value>),
}

/// A `function_call` item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FunctionCallItem {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub call_id: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub arguments: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
}

/// A `function_call_output` item. `output` is a string or a list of content parts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FunctionCallOutputItem {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub call_id: String,
    pub output: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
}

/// A `reasoning` item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReasoningItem {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default)]
    pub summary: Vec<SummaryPart>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<Vec<ReasoningContent>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encrypted_content: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
}

/// A reasoning summary part.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SummaryPart {
    #[serde(rename = "type")]
    pub kind: String,
    pub text: String,
}

impl SummaryPart {
    pub fn summary_text(text: String) -> Self {
        Self {
            kind: "summary_text".to_owned(),
            text,
        }
    }
}

/// A reasoning content part (`reasoning_text`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReasoningContent {
    #[serde(rename = "type")]
    pub kind: String,
    pub text: String,
}

impl ReasoningContent {
    pub fn reasoning_text(text: String) -> Self {
        Self {
            kind: "reasoning_text".to_owned(),
            text,
        }
    }
}

/// One entry of `tools`. Only `function` is modelled here; every other tool type is kept whole.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Tool {
    Function(FunctionTool),
    Custom(CustomTool),
    Namespace(NamespaceTool),
    /// Every other tool type (`web_search`, `file_search`, `mcp`, `local_shell`, …), whole.
    #[serde(untagged)]
    Other(Map<String, Value>),
}

impl Tool {
    /// The tool's `type`.
    pub fn kind(&self) -> &str {
        match self {
            Self::Function(_) => "function",
            Self::Custom(_) => "custom",
            Self::Namespace(_) => "namespace",
            Self::Other(map) => map.get("type").and_then(Value::as_str).unwrap_or(""),
        }
    }
}

/// A `custom` (freeform) tool: its input is raw text, optionally following a grammar.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CustomTool {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<CustomFormat>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// The input format of a custom tool: `{"type":"text"}` or
/// `{"type":"grammar","syntax":"lark"|"regex","definition":…}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CustomFormat {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub syntax: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub definition: Option<String>,
}

/// A `namespace` tool: a named group of tools, called with `namespace` and `name`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NamespaceTool {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default)]
    pub tools: Vec<Tool>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A `function` tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FunctionTool {
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub parameters: Option<Value>,
    #[serde(default)]
    pub strict: Option<bool>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
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
    /// Required in a request. The response object echoes it as `null`, as the Open Responses
    /// spec has it.
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
    pub tools: Vec<Tool>,
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

/// `incomplete_details`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IncompleteDetails {
    pub reason: String,
}

/// `error` of a failed response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResponseError {
    pub code: String,
    pub message: String,
}

/// Token usage of a response.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub input_tokens_details: InputTokensDetails,
    pub output_tokens: u64,
    pub output_tokens_details: OutputTokensDetails,
    pub total_tokens: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct InputTokensDetails {
    pub cached_tokens: u64,
    /// Input tokens written to the provider's prompt cache (the OpenAI SDK expects the field).
    #[serde(default)]
    pub cache_write_tokens: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct OutputTokensDetails {
    pub reasoning_tokens: u64,
}

/// One item of a response's `output`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum OutputItem {
    Message(OutputMessage),
    FunctionCall(FunctionCallItem),
    CustomToolCall(CustomToolCallItem),
    LocalShellCall(ActionCallItem),
    ShellCall(ActionCallItem),
    ApplyPatchCall(ApplyPatchCallItem),
    /// A web search the provider ran itself.
    WebSearchCall(WebSearchCallItem),
    Reasoning(ReasoningItem),
    /// A tool the gateway ran (an MCP server's, or a built-in under the `toolbridge` label).
    McpCall(McpCallItem),
    /// The tools of an MCP server the gateway listed.
    McpListTools(McpListToolsItem),
    /// A call that runs only once the client approves it.
    McpApprovalRequest(McpApprovalRequestItem),
}

/// An `mcp_call` item: a call the gateway ran, with its output or error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct McpCallItem {
    #[serde(default)]
    pub id: String,
    pub server_label: String,
    pub name: String,
    #[serde(default)]
    pub arguments: String,
    #[serde(default)]
    pub output: Option<String>,
    #[serde(default)]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_request_id: Option<String>,
}

/// An `mcp_list_tools` item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct McpListToolsItem {
    pub id: String,
    pub server_label: String,
    /// `{"name","description","input_schema","annotations"}` each.
    pub tools: Vec<Value>,
    #[serde(default)]
    pub error: Option<String>,
}

/// An `mcp_approval_request` item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct McpApprovalRequestItem {
    pub id: String,
    pub server_label: String,
    pub name: String,
    #[serde(default)]
    pub arguments: String,
}

/// An `mcp_approval_response` input item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct McpApprovalResponseItem {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub approval_request_id: String,
    pub approve: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// A `web_search_call` item: a search that ran on the provider's (or the gateway's) side.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WebSearchCallItem {
    pub id: String,
    pub status: String,
    /// `{"type":"search","query":…}`.
    pub action: Value,
}

impl OutputItem {
    pub fn id(&self) -> Option<&str> {
        match self {
            Self::Message(m) => Some(&m.id),
            Self::FunctionCall(c) => c.id.as_deref(),
            Self::CustomToolCall(c) => c.id.as_deref(),
            Self::LocalShellCall(c) | Self::ShellCall(c) => c.id.as_deref(),
            Self::ApplyPatchCall(c) => c.id.as_deref(),
            Self::WebSearchCall(c) => Some(&c.id),
            Self::Reasoning(r) => r.id.as_deref(),
            Self::McpCall(c) => Some(&c.id),
            Self::McpListTools(l) => Some(&l.id),
            Self::McpApprovalRequest(r) => Some(&r.id),
        }
    }

    /// True for the items a client acts on by running a tool.
    pub fn is_tool_call(&self) -> bool {
        !matches!(
            self,
            Self::Message(_)
                | Self::Reasoning(_)
                | Self::WebSearchCall(_)
                | Self::McpCall(_)
                | Self::McpListTools(_)
                | Self::McpApprovalRequest(_)
        )
    }
}

/// An assistant message in `output`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OutputMessage {
    pub id: String,
    pub status: String,
    pub role: String,
    pub content: Vec<OutputContent>,
}

/// A content part of an output message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum OutputContent {
    OutputText {
        text: String,
        annotations: Vec<Value>,
        logprobs: Vec<Value>,
    },
    Refusal {
        refusal: String,
    },
}

impl OutputContent {
    pub fn output_text(text: String) -> Self {
        Self::OutputText {
            text,
            annotations: Vec::new(),
            logprobs: Vec::new(),
        }
    }
}

/// One streaming event: a sequence number and the event itself.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StreamEvent {
    #[serde(flatten)]
    pub kind: EventKind,
    pub sequence_number: u64,
}

impl StreamEvent {
    /// The event's `type`, for the SSE `event:` line.
    pub fn name(&self) -> &'static str {
        self.kind.name()
    }
}

/// The streaming events toolbridge emits.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type")]
pub enum EventKind {
    #[serde(rename = "response.created")]
    Created { response: Box<Response> },
    #[serde(rename = "response.in_progress")]
    InProgress { response: Box<Response> },
    #[serde(rename = "response.completed")]
    Completed { response: Box<Response> },
    #[serde(rename = "response.incomplete")]
    Incomplete { response: Box<Response> },
    #[serde(rename = "response.failed")]
    Failed { response: Box<Response> },
    #[serde(rename = "response.output_item.added")]
    OutputItemAdded {
        output_index: usize,
        item: OutputItem,
    },
    #[serde(rename = "response.output_item.done")]
    OutputItemDone {
        output_index: usize,
        item: OutputItem,
    },
    #[serde(rename = "response.content_part.added")]
    ContentPartAdded {
        item_id: String,
        output_index: usize,
        content_index: usize,
        part: OutputContent,
    },
    #[serde(rename = "response.content_part.done")]
    ContentPartDone {
        item_id: String,
        output_index: usize,
        content_index: usize,
        part: OutputContent,
    },
    #[serde(rename = "response.output_text.delta")]
    OutputTextDelta {
        item_id: String,
        output_index: usize,
        content_index: usize,
        delta: String,
        logprobs: Vec<Value>,
    },
    #[serde(rename = "response.output_text.done")]
    OutputTextDone {
        item_id: String,
        output_index: usize,
        content_index: usize,
        text: String,
        logprobs: Vec<Value>,
    },
    #[serde(rename = "response.refusal.delta")]
    RefusalDelta {
        item_id: String,
        output_index: usize,
        content_index: usize,
        delta: String,
    },
    #[serde(rename = "response.refusal.done")]
    RefusalDone {
        item_id: String,
        output_index: usize,
        content_index: usize,
        refusal: String,
    },
    #[serde(rename = "response.function_call_arguments.delta")]
    FunctionCallArgumentsDelta {
        item_id: String,
        output_index: usize,
        delta: String,
    },
    #[serde(rename = "response.function_call_arguments.done")]
    FunctionCallArgumentsDone {
        item_id: String,
        output_index: usize,
        name: String,
        arguments: String,
    },
    #[serde(rename = "response.web_search_call.in_progress")]
    WebSearchCallInProgress {
        item_id: String,
        output_index: usize,
    },
    #[serde(rename = "response.web_search_call.searching")]
    WebSearchCallSearching {
        item_id: String,
        output_index: usize,
    },
    #[serde(rename = "response.web_search_call.completed")]
    WebSearchCallCompleted {
        item_id: String,
        output_index: usize,
    },
    #[serde(rename = "response.mcp_call_arguments.delta")]
    McpCallArgumentsDelta {
        item_id: String,
        output_index: usize,
        delta: String,
    },
    #[serde(rename = "response.mcp_call_arguments.done")]
    McpCallArgumentsDone {
        item_id: String,
        output_index: usize,
        arguments: String,
    },
    #[serde(rename = "response.mcp_call.in_progress")]
    McpCallInProgress {
        item_id: String,
        output_index: usize,
    },
    #[serde(rename = "response.mcp_call.completed")]
    McpCallCompleted {
        item_id: String,
        output_index: usize,
    },
    #[serde(rename = "response.mcp_call.failed")]
    McpCallFailed {
        item_id: String,
        output_index: usize,
    },
    #[serde(rename = "response.mcp_list_tools.in_progress")]
    McpListToolsInProgress {
        item_id: String,
        output_index: usize,
    },
    #[serde(rename = "response.mcp_list_tools.completed")]
    McpListToolsCompleted {
        item_id: String,
        output_index: usize,
    },
    #[serde(rename = "response.mcp_list_tools.failed")]
    McpListToolsFailed {
        item_id: String,
        output_index: usize,
    },
    #[serde(rename = "response.custom_tool_call_input.delta")]
    CustomToolCallInputDelta {
        item_id: String,
        output_index: usize,
        delta: String,
    },
    #[serde(rename = "response.custom_tool_call_input.done")]
    CustomToolCallInputDone {
        item_id: String,
        output_index: usize,
        input: String,
    },
    #[serde(rename = "response.reasoning_summary_part.added")]
    ReasoningSummaryPartAdded {
        item_id: String,
        output_index: usize,
        summary_index: usize,
        part: SummaryPart,
    },
    #[serde(rename = "response.reasoning_summary_part.done")]
    ReasoningSummaryPartDone {
        item_id: String,
        output_index: usize,
        summary_index: usize,
        part: SummaryPart,
    },
    #[serde(rename = "response.reasoning_summary_text.delta")]
    ReasoningSummaryTextDelta {
        item_id: String,
        output_index: usize,
        summary_index: usize,
        delta: String,
    },
    #[serde(rename = "response.reasoning_summary_text.done")]
    ReasoningSummaryTextDone {
        item_id: String,
        output_index: usize,
        summary_index: usize,
        text: String,
    },
    #[serde(rename = "response.reasoning_text.delta")]
    ReasoningTextDelta {
        item_id: String,
        output_index: usize,
        content_index: usize,
        delta: String,
    },
    #[serde(rename = "response.reasoning_text.done")]
    ReasoningTextDone {
        item_id: String,
        output_index: usize,
        content_index: usize,
        text: String,
    },
}

impl EventKind {
    /// The event's `type` string.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Created { .. } => "response.created",
            Self::InProgress { .. } => "response.in_progress",
            Self::Completed { .. } => "response.completed",
            Self::Incomplete { .. } => "response.incomplete",
            Self::Failed { .. } => "response.failed",
            Self::OutputItemAdded { .. } => "response.output_item.added",
            Self::OutputItemDone { .. } => "response.output_item.done",
            Self::ContentPartAdded { .. } => "response.content_part.added",
            Self::ContentPartDone { .. } => "response.content_part.done",
            Self::OutputTextDelta { .. } => "response.output_text.delta",
            Self::OutputTextDone { .. } => "response.output_text.done",
            Self::RefusalDelta { .. } => "response.refusal.delta",
            Self::RefusalDone { .. } => "response.refusal.done",
            Self::FunctionCallArgumentsDelta { .. } => "response.function_call_arguments.delta",
            Self::FunctionCallArgumentsDone { .. } => "response.function_call_arguments.done",
            Self::WebSearchCallInProgress { .. } => "response.web_search_call.in_progress",
            Self::WebSearchCallSearching { .. } => "response.web_search_call.searching",
            Self::WebSearchCallCompleted { .. } => "response.web_search_call.completed",
            Self::McpCallArgumentsDelta { .. } => "response.mcp_call_arguments.delta",
            Self::McpCallArgumentsDone { .. } => "response.mcp_call_arguments.done",
            Self::McpCallInProgress { .. } => "response.mcp_call.in_progress",
            Self::McpCallCompleted { .. } => "response.mcp_call.completed",
            Self::McpCallFailed { .. } => "response.mcp_call.failed",
            Self::McpListToolsInProgress { .. } => "response.mcp_list_tools.in_progress",
            Self::McpListToolsCompleted { .. } => "response.mcp_list_tools.completed",
            Self::McpListToolsFailed { .. } => "response.mcp_list_tools.failed",
            Self::CustomToolCallInputDelta { .. } => "response.custom_tool_call_input.delta",
            Self::CustomToolCallInputDone { .. } => "response.custom_tool_call_input.done",
            Self::ReasoningSummaryPartAdded { .. } => "response.reasoning_summary_part.added",
            Self::ReasoningSummaryPartDone { .. } => "response.reasoning_summary_part.done",
            Self::ReasoningSummaryTextDelta { .. } => "response.reasoning_summary_text.delta",
            Self::ReasoningSummaryTextDone { .. } => "response.reasoning_summary_text.done",
            Self::ReasoningTextDelta { .. } => "response.reasoning_text.delta",
            Self::ReasoningTextDone { .. } => "response.reasoning_text.done",
        }
    }

    /// True for the events that end a response stream.
    pub fn is_terminal(&self) -> bool {
        matches!(
            self,
            Self::Completed { .. } | Self::Incomplete { .. } | Self::Failed { .. }
        )
    }
}
