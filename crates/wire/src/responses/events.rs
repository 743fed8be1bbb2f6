//! The streaming events toolbridge emits, each with its sequence number.

use serde::Serialize;
use serde_json::Value;

use super::{OutputContent, OutputItem, Response, SummaryPart};

/// One streaming event: a sequence number and the event itself.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StreamEvent {
    #[serde(flatten)]
    pub kind: EventKind,
    pub sequence_number: u64,
}

impl StreamEvent {
    /// The event's `type`, for the SSE `event:` line.
    pub fn name(&self) -> &str {
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
    #[serde(rename = "response.image_generation_call.in_progress")]
    ImageGenerationCallInProgress {
        item_id: String,
        output_index: usize,
    },
    #[serde(rename = "response.image_generation_call.generating")]
    ImageGenerationCallGenerating {
        item_id: String,
        output_index: usize,
    },
    /// A partial image the backend streamed (`partial_images` asked for), base64.
    #[serde(rename = "response.image_generation_call.partial_image")]
    ImageGenerationCallPartialImage {
        item_id: String,
        output_index: usize,
        partial_image_index: u32,
        partial_image_b64: String,
    },
    #[serde(rename = "response.image_generation_call.completed")]
    ImageGenerationCallCompleted {
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
    /// An event of a native Responses upstream about one of its items, kept as it came (its
    /// `type` inside, unknown types and fields included; the `output_index` the gateway's).
    #[serde(untagged)]
    Relayed(serde_json::Map<String, Value>),
}

impl EventKind {
    /// Whether the event carries the whole response (`response.created`, `.in_progress` and
    /// the terminal events).
    pub fn carries_response(&self) -> bool {
        matches!(
            self,
            Self::Created { .. }
                | Self::InProgress { .. }
                | Self::Completed { .. }
                | Self::Incomplete { .. }
                | Self::Failed { .. }
        )
    }

    /// The event's `type` string.
    pub fn name(&self) -> &str {
        match self {
            Self::Relayed(event) => event
                .get("type")
                .and_then(Value::as_str)
                .unwrap_or("message"),
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
            Self::ImageGenerationCallInProgress { .. } => {
                "response.image_generation_call.in_progress"
            }
            Self::ImageGenerationCallGenerating { .. } => {
                "response.image_generation_call.generating"
            }
            Self::ImageGenerationCallPartialImage { .. } => {
                "response.image_generation_call.partial_image"
            }
            Self::ImageGenerationCallCompleted { .. } => "response.image_generation_call.completed",
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
