//! The provider-neutral events a dialect's decoder produces from upstream output.
//!
//! A dialect turns each upstream chunk (or a whole non-streamed response) into these; the
//! [`crate::assemble::Assembler`] turns them into Responses items and events. Keeping this
//! vocabulary small is what lets every dialect share one reconstruction state machine.

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
    /// A web search the provider ran itself within the turn (Anthropic's server tool, Gemini's
    /// grounding), shown to the client as a completed `web_search_call` item.
    WebSearch { query: String },
    /// Token usage; the last one seen wins.
    Usage(Usage),
    /// Why generation stopped; the first one seen wins.
    Finish(FinishReason),
}

/// A fragment of a tool call. In a stream every field may be missing from one fragment: calls are
/// keyed by `index`, falling back to `id` when a provider omits the index.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolCallDelta {
    pub index: Option<u32>,
    pub id: Option<String>,
    pub name: Option<String>,
    pub arguments: String,
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
    /// The provider failed while generating (`code` is toolbridge's, `message` says what the
    /// provider reported).
    Error { code: String, message: String },
}
