//! Decoding a non-streamed Messages answer into the same events a stream produces, so both paths
//! share one reconstruction.

use toolbridge_core::events::{ToolCallDelta, UpstreamEvent};
use toolbridge_wire::anthropic::{ContentBlock, MessagesResponse};
use toolbridge_wire::responses::Diagnostic;

use super::{UsageCounts, finish_reason};

/// Decodes a whole answer. Tool calls are numbered by their block index, as in a stream.
/// A thinking block's signature follows its reasoning as [`UpstreamEvent::ReasoningSignature`];
/// a `redacted_thinking` block is [`UpstreamEvent::RedactedReasoning`].
pub fn decode(
    response: &MessagesResponse,
    diagnostics: &mut Vec<Diagnostic>,
) -> Vec<UpstreamEvent> {
    let mut out = Vec::new();
    for (i, block) in response.content.iter().enumerate() {
        let index = u32::try_from(i).unwrap_or(u32::MAX);
        match block {
            ContentBlock::Text(text) => out.push(UpstreamEvent::Text(text.text.clone())),
            ContentBlock::Thinking(thinking) => {
                out.push(UpstreamEvent::Reasoning(thinking.thinking.clone()));
                if !thinking.signature.is_empty() {
                    out.push(UpstreamEvent::ReasoningSignature(
                        thinking.signature.clone(),
                    ));
                }
            }
            ContentBlock::ToolUse(call) => out.push(UpstreamEvent::ToolCall(ToolCallDelta {
                index: Some(index),
                id: Some(call.id.clone()),
                name: Some(call.name.clone()),
                arguments: call.input.to_string(),
                item_id: None,
            })),
            ContentBlock::ServerToolUse(call) if call.name == "web_search" => {
                out.push(UpstreamEvent::WebSearch {
                    query: super::stream::search_query(&call.input.to_string()),
                });
            }
            ContentBlock::RedactedThinking(block) if !block.data.is_empty() => {
                out.push(UpstreamEvent::RedactedReasoning(block.data.clone()));
            }
            ContentBlock::ServerToolUse(_)
            | ContentBlock::RedactedThinking(_)
            | ContentBlock::Image(_)
            | ContentBlock::Document(_)
            | ContentBlock::ToolResult(_)
            | ContentBlock::Other => {}
        }
    }
    if let Some(reason) = response.stop_reason.as_deref().filter(|r| !r.is_empty()) {
        out.push(UpstreamEvent::Finish(finish_reason(reason, diagnostics)));
    }
    if let Some(u) = &response.usage {
        let mut counts = UsageCounts::default();
        counts.update(u);
        out.push(counts.event());
    }
    out
}
