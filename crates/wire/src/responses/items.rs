//! The items of `input` (messages, calls and their outputs, reasoning) and the content parts
//! they carry. Their lenient `Deserialize` impls live in `crate::inbound`.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{
    AdditionalToolsItem, McpApprovalRequestItem, McpApprovalResponseItem, McpCallItem,
    ToolSearchCallItem, ToolSearchOutputItem,
};

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
    /// The model's request for more tools, echoed back.
    ToolSearchCall(ToolSearchCallItem),
    /// The tools a search found; their calls may follow.
    ToolSearchOutput(ToolSearchOutputItem),
    /// Tools declared inside `input` (code-mode clients).
    AdditionalTools(AdditionalToolsItem),
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
        /// OpenAI's explicit cache breakpoint (`{"mode": "explicit"}`): the client marks the end
        /// of a prefix to cache here.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        prompt_cache_breakpoint: Option<Value>,
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
    /// Absent when the arguments came only encrypted.
    #[serde(default)]
    pub arguments: String,
    /// The arguments encrypted by OpenAI (Codex 0.171 echoes them); readable by OpenAI only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encrypted_function_args: Option<String>,
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
