//! The Anthropic Messages dialect: the pure translation half (no I/O, no gateway wiring).
//!
//! - [`request::build`]: canonical request → Messages request.
//! - [`stream::MessagesDecoder`]: streamed events → [`UpstreamEvent`]s.
//! - [`response::decode`]: a whole answer → the same events.
//! - [`errors::from_http`]: an error answer → [`crate::UpstreamError`].

mod cache;
pub mod errors;
pub mod request;
pub mod response;
pub mod stream;
mod tool_result;

#[cfg(test)]
mod tests;

use toolbridge_core::diagnostics::{UNKNOWN_FINISH_REASON, diag};
use toolbridge_core::events::{FinishReason, UpstreamEvent};
use toolbridge_wire::anthropic::MessagesUsage;
use toolbridge_wire::responses::{Diagnostic, InputTokensDetails, OutputTokensDetails, Usage};

/// Maps a `stop_reason`:
/// - `end_turn`, `stop_sequence` → [`FinishReason::Stop`];
/// - `tool_use` → [`FinishReason::ToolCalls`];
/// - `max_tokens` → [`FinishReason::Length`];
/// - `model_context_window_exceeded` → [`FinishReason::ContextLength`];
/// - `refusal` → [`FinishReason::ContentFilter`];
/// - `pause_turn` → [`FinishReason::Stop`]: Anthropic paused a long server-tool turn and expects
///   the caller to send the conversation back to continue it. The Responses client sees what was
///   produced so far as a finished answer, and continues by sending its next request.
///
/// Anything else is read as a normal stop with an [`UNKNOWN_FINISH_REASON`] diagnostic.
pub(crate) fn finish_reason(reason: &str, diagnostics: &mut Vec<Diagnostic>) -> FinishReason {
    match reason {
        "end_turn" | "stop_sequence" | "pause_turn" => FinishReason::Stop,
        "tool_use" => FinishReason::ToolCalls,
        "max_tokens" => FinishReason::Length,
        "model_context_window_exceeded" => FinishReason::ContextLength,
        "refusal" => FinishReason::ContentFilter,
        other => {
            diagnostics.push(diag(
                UNKNOWN_FINISH_REASON,
                None,
                format!("unknown stop reason `{other}` was treated as a normal stop"),
            ));
            FinishReason::Stop
        }
    }
}

/// Usage counters gathered over a stream (or read from one answer).
///
/// Anthropic's `input_tokens` excludes cache reads and cache writes; the Responses API's
/// `input_tokens` includes them, with `cached_tokens` (reads) and `cache_write_tokens` (writes)
/// as details. Anthropic reports no separate reasoning token count, so it stays 0.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct UsageCounts {
    input: u64,
    output: u64,
    cache_read: u64,
    cache_write: u64,
}

impl UsageCounts {
    /// Takes the counters `u` carries; a missing one keeps its earlier value (`message_delta`
    /// usually carries only `output_tokens`, which is cumulative).
    pub(crate) fn update(&mut self, u: &MessagesUsage) {
        self.input = u.input_tokens.unwrap_or(self.input);
        self.output = u.output_tokens.unwrap_or(self.output);
        self.cache_read = u.cache_read_input_tokens.unwrap_or(self.cache_read);
        self.cache_write = u.cache_creation_input_tokens.unwrap_or(self.cache_write);
    }

    pub(crate) fn event(&self) -> UpstreamEvent {
        // Saturating: the counters are the upstream's, any `u64`.
        let input = self
            .input
            .saturating_add(self.cache_read)
            .saturating_add(self.cache_write);
        UpstreamEvent::Usage(Usage {
            input_tokens: input,
            input_tokens_details: InputTokensDetails {
                cached_tokens: self.cache_read,
                cache_write_tokens: self.cache_write,
            },
            output_tokens: self.output,
            output_tokens_details: OutputTokensDetails {
                reasoning_tokens: 0,
            },
            total_tokens: input.saturating_add(self.output),
        })
    }
}
