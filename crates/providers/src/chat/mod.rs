//! The Chat Completions dialect (OpenAI-compatible providers: DeepSeek, GLM, Kimi, Qwen, MiniMax,
//! MiMo, Ollama, vLLM, …).

mod cache;
mod details;
pub mod echo;
pub mod errors;
mod fields;
pub(crate) mod native;
mod parts;
pub mod prompt;
pub mod request;
pub mod response;
pub mod stream;
pub mod think;
mod tool_result;

use toolbridge_core::diagnostics::{UNKNOWN_FINISH_REASON, diag};
use toolbridge_core::events::{FinishReason, UpstreamEvent};
use toolbridge_wire::responses::Diagnostic;

use crate::profile::{FinishKind, Profile};

/// A choice's finish reason, when it has one: the `Finish` event (and a diagnostic when the
/// reason is not one the profile knows).
pub(crate) fn push_finish(
    profile: &Profile,
    reason: &str,
    out: &mut Vec<UpstreamEvent>,
    diagnostics: &mut Vec<Diagnostic>,
) {
    if reason.is_empty() {
        return;
    }
    let (finish, known) = finish_reason(profile, reason);
    if !known {
        diagnostics.push(diag(
            UNKNOWN_FINISH_REASON,
            None,
            format!("unknown finish reason `{reason}` was treated as a normal stop"),
        ));
    }
    out.push(UpstreamEvent::Finish(finish));
}

/// Maps a provider's finish reason through the profile. An unknown reason is treated as a normal
/// stop; the caller reports it.
pub(crate) fn finish_reason(profile: &Profile, reason: &str) -> (FinishReason, bool) {
    match profile.finish_kind(reason) {
        Some(FinishKind::Stop) => (FinishReason::Stop, true),
        Some(FinishKind::ToolCalls) => (FinishReason::ToolCalls, true),
        Some(FinishKind::Length) => (FinishReason::Length, true),
        Some(FinishKind::ContentFilter) => (FinishReason::ContentFilter, true),
        Some(FinishKind::ContextLength) => (FinishReason::ContextLength, true),
        Some(FinishKind::Error) => (
            FinishReason::Error {
                code: "server_error".to_owned(),
                message: format!("the upstream stopped with finish reason `{reason}`"),
            },
            true,
        ),
        None => (FinishReason::Stop, false),
    }
}

/// Neutral usage from Chat usage, with cache reads from wherever the provider reports them
/// (OpenAI, GLM and Qwen in `prompt_tokens_details.cached_tokens`, DeepSeek in
/// `prompt_cache_hit_tokens`, Moonshot in a top-level `cached_tokens`) and cache writes from
/// `prompt_tokens_details` (OpenAI's `cache_write_tokens`, Qwen's explicit cache's
/// `cache_creation_input_tokens`). Every provider counts both inside `prompt_tokens`.
pub(crate) fn usage(u: &toolbridge_wire::chat::ChatUsage) -> toolbridge_wire::responses::Usage {
    use toolbridge_wire::responses::{InputTokensDetails, OutputTokensDetails, Usage};
    let details = u.prompt_tokens_details.as_ref();
    // A provider that reports in two places (a zero `prompt_tokens_details` beside its own
    // field) is read at the larger.
    let cached = [
        details.and_then(|d| d.cached_tokens),
        u.prompt_cache_hit_tokens,
        u.cached_tokens,
    ]
    .into_iter()
    .flatten()
    .max()
    .unwrap_or(0);
    let written = details
        .and_then(|d| d.cache_write_tokens.or(d.cache_creation_input_tokens))
        .unwrap_or(0);
    let reasoning = u
        .completion_tokens_details
        .as_ref()
        .and_then(|d| d.reasoning_tokens)
        .unwrap_or(0);
    Usage {
        input_tokens: u.prompt_tokens,
        input_tokens_details: InputTokensDetails {
            cached_tokens: cached,
            cache_write_tokens: written,
        },
        output_tokens: u.completion_tokens,
        output_tokens_details: OutputTokensDetails {
            reasoning_tokens: reasoning,
        },
        // Saturating: the counts are the upstream's, any `u64` (a sum past it panicked in a
        // debug build and wrapped to a small total in a release one).
        total_tokens: u
            .total_tokens
            .unwrap_or_else(|| u.prompt_tokens.saturating_add(u.completion_tokens)),
    }
}

/// Tool-call arguments as a string: some local servers send a JSON object instead.
pub(crate) fn arguments_text(arguments: Option<serde_json::Value>) -> String {
    match arguments {
        None | Some(serde_json::Value::Null) => String::new(),
        Some(serde_json::Value::String(s)) => s,
        Some(other) => other.to_string(),
    }
}
