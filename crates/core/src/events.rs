//! The provider-neutral events a dialect's decoder produces from upstream output.
//!
//! A dialect turns each upstream chunk (or a whole non-streamed response) into these; the
//! [`crate::assemble::Assembler`] turns them into Responses items and events. Keeping this
//! vocabulary small is what lets every dialect share one reconstruction state machine.

use serde_json::{Map, Value};
use toolbridge_wire::responses::Usage;

/// One piece of upstream output.
#[derive(Debug, Clone, PartialEq)]
pub enum UpstreamEvent {
    /// Assistant text.
    Text(String),
    /// A refusal from the model's safety layer.
    Refusal(String),
    /// Reasoning ("thinking") text.
    Reasoning(String),
    /// The provider's opaque signature over the reasoning being streamed (Anthropic's thinking
    /// `signature`). It is sealed with the reasoning into `encrypted_content`, so a later turn
    /// can hand the reasoning back exactly as the provider requires.
    ReasoningSignature(String),
    /// Reasoning the provider returned encrypted (Anthropic's `redacted_thinking` `data`): kept
    /// with the reasoning like a signature and handed back unchanged on the next turn.
    RedactedReasoning(String),
    /// A fragment of a tool call.
    ToolCall(ToolCallDelta),
    /// The upstream completed the call at this `index` (a native Responses upstream's
    /// `output_item.done`): its arguments can no longer grow, so a client call is shown now, in
    /// the upstream's order among its other items, not at the round's end.
    CallComplete(u32),
    /// A web search the provider ran itself within the turn (Anthropic's server tool, Gemini's
    /// grounding), shown to the client as a completed `web_search_call` item.
    WebSearch { query: String },
    /// Token usage; the last one seen wins.
    Usage(Usage),
    /// Why generation stopped; the first one seen wins.
    Finish(FinishReason),
    /// A Responses stream event about one of the upstream's own items (a native Responses
    /// upstream's messages, reasoning, hosted calls, item and event types unknown to the
    /// gateway), already in the client's vocabulary: the assembler shows it as it came, with
    /// its own `output_index` and `sequence_number`, and keeps each item it completes
    /// (`response.output_item.done`) in the output unchanged.
    Relayed(Map<String, Value>),
    /// Fields of the upstream's response object the gateway has no field for (a native
    /// Responses upstream's own): they pass through onto the final response.
    ResponseFields(Map<String, Value>),
}

impl UpstreamEvent {
    /// The assistant text this event carries: a [`UpstreamEvent::Text`], or the text parts of a
    /// relayed message item when it is done.
    pub fn text(&self) -> Option<String> {
        match self {
            Self::Text(text) => Some(text.clone()),
            Self::Relayed(event)
                if event.get("type").and_then(Value::as_str)
                    == Some("response.output_item.done") =>
            {
                let item = event.get("item")?;
                if item["type"] != "message" {
                    return None;
                }
                let parts = item["content"].as_array()?;
                Some(
                    parts
                        .iter()
                        .filter(|p| p["type"] == "output_text")
                        .filter_map(|p| p["text"].as_str())
                        .collect(),
                )
            }
            _ => None,
        }
    }
}

/// A fragment of a tool call. In a stream every field may be missing from one fragment: calls are
/// keyed by `index`, falling back to `id` when a provider omits the index.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolCallDelta {
    pub index: Option<u32>,
    pub id: Option<String>,
    pub name: Option<String>,
    pub arguments: String,
    /// The upstream's own id for the call's item (a native Responses upstream's `fc_…`), kept
    /// as the item's id; `None`: the assembler makes one.
    pub item_id: Option<String>,
}

/// Why the upstream stopped, in the provider-neutral vocabulary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FinishReason {
    /// A natural end of the answer.
    Stop,
    /// The model stopped to call tools.
    ToolCalls,
    /// The output token limit was reached.
    Length,
    /// The provider's content filter stopped the output.
    ContentFilter,
    /// The conversation no longer fits the model's context window.
    ContextLength,
    /// The upstream ended the answer incomplete for another `reason` (a native Responses
    /// upstream's `incomplete_details.reason`), shown as it said.
    Incomplete(String),
    /// The provider failed while generating (`code` is toolbridge's, `message` says what the
    /// provider reported).
    Error { code: String, message: String },
}
