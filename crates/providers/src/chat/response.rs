//! Decoding a non-streamed Chat Completions answer into the same events a stream produces, so
//! both paths share one reconstruction.

use toolbridge_core::events::{ToolCallDelta, UpstreamEvent};
use toolbridge_wire::chat::ChatResponse;
use toolbridge_wire::responses::Diagnostic;

use super::details::whole_text;
use super::parts::{Piece, pieces};
use super::think::ThinkSplitter;
use super::{arguments_text, push_finish, usage};
use crate::profile::Profile;

/// Decodes a whole answer.
pub fn decode(
    profile: &Profile,
    response: ChatResponse,
    diagnostics: &mut Vec<Diagnostic>,
) -> Vec<UpstreamEvent> {
    let mut out = Vec::new();
    if let Some(choice) = response.choices.into_iter().find(|c| c.index == 0) {
        let message = choice.message;
        let details = message.reasoning_details.as_deref().and_then(whole_text);
        if let Some(r) = message.reasoning_content.or(message.reasoning).or(details) {
            out.push(UpstreamEvent::Reasoning(r));
        }
        if let Some(content) = message.content {
            let mut think = profile.think_tags.then(ThinkSplitter::default);
            for piece in pieces(content, diagnostics) {
                match (piece, think.as_mut()) {
                    (Piece::Reasoning(r), _) => out.push(UpstreamEvent::Reasoning(r)),
                    (Piece::Text(text), Some(think)) => think.push(&text, &mut out),
                    (Piece::Text(text), None) => out.push(UpstreamEvent::Text(text)),
                }
            }
            if let Some(mut think) = think {
                think.finish(&mut out);
            }
        }
        if let Some(refusal) = message.refusal {
            out.push(UpstreamEvent::Refusal(refusal));
        }
        for (i, call) in message.tool_calls.into_iter().flatten().enumerate() {
            let (name, arguments) = match call.function {
                Some(f) => (f.name, arguments_text(f.arguments)),
                None => (None, String::new()),
            };
            out.push(UpstreamEvent::ToolCall(ToolCallDelta {
                index: Some(u32::try_from(i).unwrap_or(u32::MAX)),
                id: call.id,
                name,
                arguments,
                item_id: None,
            }));
        }
        if let Some(reason) = choice.finish_reason {
            push_finish(profile, &reason, &mut out, diagnostics);
        }
    }
    if let Some(u) = &response.usage {
        out.push(UpstreamEvent::Usage(usage(u)));
    }
    out
}
