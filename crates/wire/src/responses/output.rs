//! The items of a response's `output` ([`OutputItem`]) and an output message's content.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{
    ActionCallItem, ApplyPatchCallItem, CustomToolCallItem, FunctionCallItem, ReasoningItem,
};

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
    /// The model's request for more tools (`tool_search`).
    ToolSearchCall(super::ToolSearchCallItem),
    /// The tools a gateway-run search found.
    ToolSearchOutput(super::ToolSearchOutputItem),
    /// An image the gateway (or a Responses server) generated.
    ImageGenerationCall(ImageGenerationCallItem),
    /// An item a native Responses upstream produced, kept as it came (its type, unknown types
    /// and fields included): the gateway never rebuilds what it relays.
    #[serde(untagged)]
    Other(Map<String, Value>),
}

/// An `image_generation_call` item: the image as base64 once generated, the prompt used and the
/// options the image was made with; `error` when it could not be (a refusal, a failure).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ImageGenerationCallItem {
    #[serde(default)]
    pub id: String,
    /// `in_progress`, `generating`, `completed` or `failed`.
    pub status: String,
    /// The image, base64; `null` until it is generated.
    #[serde(default)]
    pub result: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revised_prompt: Option<String>,
    /// `generate` or `edit`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub background: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_format: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quality: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<String>,
    /// `{"type","code","message"}` of a failed call (`moderation_blocked`, `tool_unavailable`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<Value>,
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

/// The call item types a Responses provider runs itself (the client never answers them).
const PROVIDER_RUN: &[&str] = &[
    "web_search_call",
    "file_search_call",
    "code_interpreter_call",
    "image_generation_call",
    "mcp_call",
];

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
            Self::ToolSearchCall(c) => c.id.as_deref(),
            Self::ToolSearchOutput(o) => o.id.as_deref(),
            Self::ImageGenerationCall(c) => Some(&c.id),
            Self::Other(item) => item.get("id").and_then(Value::as_str),
        }
    }

    /// The item's `type`.
    pub fn kind(&self) -> &str {
        match self {
            Self::Other(item) => item.get("type").and_then(Value::as_str).unwrap_or(""),
            Self::Message(_) => "message",
            Self::FunctionCall(_) => "function_call",
            Self::CustomToolCall(_) => "custom_tool_call",
            Self::LocalShellCall(_) => "local_shell_call",
            Self::ShellCall(_) => "shell_call",
            Self::ApplyPatchCall(_) => "apply_patch_call",
            Self::WebSearchCall(_) => "web_search_call",
            Self::Reasoning(_) => "reasoning",
            Self::McpCall(_) => "mcp_call",
            Self::McpListTools(_) => "mcp_list_tools",
            Self::McpApprovalRequest(_) => "mcp_approval_request",
            Self::ToolSearchCall(_) => "tool_search_call",
            Self::ToolSearchOutput(_) => "tool_search_output",
            Self::ImageGenerationCall(_) => "image_generation_call",
        }
    }

    /// True for the items a client acts on by running a tool.
    pub fn is_tool_call(&self) -> bool {
        if let Self::ToolSearchCall(c) = self {
            // Only a client-run search is the client's to answer.
            return c.execution.as_deref() == Some("client");
        }
        if let Self::Other(item) = self {
            // A call the upstream ran itself is not the client's to answer.
            let kind = item.get("type").and_then(Value::as_str).unwrap_or("");
            return kind.ends_with("_call") && !PROVIDER_RUN.contains(&kind);
        }
        !matches!(
            self,
            Self::Message(_)
                | Self::Reasoning(_)
                | Self::WebSearchCall(_)
                | Self::McpCall(_)
                | Self::McpListTools(_)
                | Self::McpApprovalRequest(_)
                | Self::ToolSearchOutput(_)
                | Self::ImageGenerationCall(_)
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
    /// Only in `content_part` events of a reasoning item, as OpenAI sends them around
    /// `reasoning_text` deltas; never in a message's `content`.
    ReasoningText {
        text: String,
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
