//! Decoding a streamed Gemini answer (`streamGenerateContent?alt=sse`), one SSE `data:` payload at
//! a time. Each payload is a whole `GenerateContentResponse` holding the next slice of output.
//!
//! Decisions, documented here because clients depend on them:
//! - Only candidate 0 is read (toolbridge never asks for more).
//! - Parts with `thought: true` are reasoning; other text parts are answer text.
//! - Gemini sends each function call whole, in one part: each becomes one complete
//!   [`ToolCallDelta`] with its own index, and the id `<prefix>_<n>` when Gemini gives none
//!   (`call_<n>` by default; see [`GeminiDecoder::with_call_prefix`]).
//! - Finish reasons: `STOP` → stop, or tool calls when the answer made any; `MAX_TOKENS` →
//!   length; `SAFETY`, `RECITATION`, `BLOCKLIST`, `PROHIBITED_CONTENT`, `SPII`, `IMAGE_SAFETY` →
//!   content filter; `MALFORMED_FUNCTION_CALL` and `UNEXPECTED_TOOL_CALL` → an error;
//!   `LANGUAGE`, `OTHER` and unknown reasons → stop, with a diagnostic.
//! - `promptFeedback.blockReason` (the prompt itself was blocked) → content filter.
//! - `usageMetadata` comes with every chunk; each is passed on and the last one wins.
//! - A payload that is not JSON is skipped with a diagnostic; one carrying `error` fails the
//!   response.
//! - The `thoughtSignature` of a function call becomes an [`UpstreamEvent::ReasoningSignature`]
//!   just before the call, so it is sealed with the thoughts before it and replayed on that call.
//!   A signature on a text part has nothing to travel with and is dropped.

use serde_json::Value;
use toolbridge_core::diagnostics::{CHUNK_SKIPPED, UNKNOWN_FINISH_REASON, diag};
use toolbridge_core::events::{FinishReason, ToolCallDelta, UpstreamEvent};
use toolbridge_wire::gemini::{GenerateContentResponse, UsageMetadata};
use toolbridge_wire::responses::{Diagnostic, InputTokensDetails, OutputTokensDetails, Usage};

use super::errors;
use crate::Error;

/// The decoder of one Gemini answer, streamed or whole.
#[derive(Debug, Default)]
pub struct GeminiDecoder {
    /// The start of the ids given to calls Gemini sends without one (`<prefix>_<n>`). Gemini's
    /// calls rarely carry ids, and a client keys calls by id across turns, so the caller passes
    /// a prefix unique to this answer; the default, `call`, suits one answer alone.
    call_prefix: Option<String>,
    calls: u32,
    /// The grounding search queries already shown.
    searches: std::collections::BTreeSet<String>,
    finished: bool,
    skipped: u32,
}

impl GeminiDecoder {
    pub fn new() -> Self {
        Self::default()
    }

    /// A decoder naming id-less calls `<prefix>_<n>`; pass a prefix unique to this answer.
    pub fn with_call_prefix(prefix: impl Into<String>) -> Self {
        Self {
            call_prefix: Some(prefix.into()),
            ..Self::default()
        }
    }

    /// Decodes one `data:` payload into `out`; diagnostics go to `diagnostics`.
    pub fn on_data(
        &mut self,
        data: &str,
        out: &mut Vec<UpstreamEvent>,
        diagnostics: &mut Vec<Diagnostic>,
    ) -> Result<(), Error> {
        let data = data.trim();
        if data.is_empty() || data == "[DONE]" {
            return Ok(());
        }
        match serde_json::from_str::<GenerateContentResponse>(data) {
            Ok(chunk) => self.on_response(chunk, out, diagnostics),
            Err(e) => {
                self.skipped += 1;
                // One broken server can send thousands; three diagnostics say enough.
                if self.skipped <= 3 {
                    diagnostics.push(diag(
                        CHUNK_SKIPPED,
                        None,
                        format!("skipped a chunk that is not a valid Gemini response ({e})"),
                    ));
                }
                Ok(())
            }
        }
    }

    /// Decodes one response object (a chunk, or a whole answer).
    pub fn on_response(
        &mut self,
        response: GenerateContentResponse,
        out: &mut Vec<UpstreamEvent>,
        diagnostics: &mut Vec<Diagnostic>,
    ) -> Result<(), Error> {
        if let Some(error) = response.extra.get("error").filter(|e| !e.is_null()) {
            return Err(Error::Upstream(Box::new(errors::from_stream_error(error))));
        }
        let candidate = response
            .candidates
            .into_iter()
            .find(|c| c.index.unwrap_or(0) == 0);
        if let Some(candidate) = candidate {
            for part in candidate.content.map(|c| c.parts).unwrap_or_default() {
                // A signature on a function call is over the thinking before it: it goes to the
                // open reasoning before the call closes it (see `UpstreamEvent::ReasoningSignature`).
                if let (Some(signature), Some(_)) = (&part.thought_signature, &part.function_call) {
                    out.push(UpstreamEvent::ReasoningSignature(signature.clone()));
                }
                if let Some(call) = part.function_call {
                    let index = self.calls;
                    self.calls += 1;
                    let prefix = self.call_prefix.as_deref().unwrap_or("call");
                    let id = call.id.unwrap_or_else(|| format!("{prefix}_{index}"));
                    out.push(UpstreamEvent::ToolCall(ToolCallDelta {
                        index: Some(index),
                        id: Some(id),
                        name: Some(call.name),
                        arguments: call
                            .args
                            .map(|a| a.to_string())
                            .unwrap_or_else(|| "{}".to_owned()),
                        item_id: None,
                    }));
                } else if let Some(text) = part.text.filter(|t| !t.is_empty()) {
                    if part.thought == Some(true) {
                        out.push(UpstreamEvent::Reasoning(text));
                    } else {
                        out.push(UpstreamEvent::Text(text));
                    }
                }
            }
            // Grounding with Google Search: each query Gemini ran, once (chunks may repeat them).
            let queries = candidate
                .extra
                .get("groundingMetadata")
                .and_then(|g| g.get("webSearchQueries"))
                .and_then(Value::as_array);
            for query in queries.into_iter().flatten().filter_map(Value::as_str) {
                if self.searches.insert(query.to_owned()) {
                    out.push(UpstreamEvent::WebSearch {
                        query: query.to_owned(),
                    });
                }
            }
            if let Some(reason) = candidate.finish_reason.filter(|r| !r.is_empty()) {
                let finish = self.finish_reason(&reason, diagnostics);
                self.finish(finish, out);
            }
        }
        if response
            .prompt_feedback
            .and_then(|f| f.block_reason)
            .is_some_and(|r| !r.is_empty() && r != "BLOCK_REASON_UNSPECIFIED")
        {
            self.finish(FinishReason::ContentFilter, out);
        }
        if let Some(u) = &response.usage_metadata {
            out.push(UpstreamEvent::Usage(usage(u)));
        }
        Ok(())
    }

    fn finish(&mut self, reason: FinishReason, out: &mut Vec<UpstreamEvent>) {
        if !self.finished {
            self.finished = true;
            out.push(UpstreamEvent::Finish(reason));
        }
    }

    fn finish_reason(&self, reason: &str, diagnostics: &mut Vec<Diagnostic>) -> FinishReason {
        match reason {
            "STOP" if self.calls > 0 => FinishReason::ToolCalls,
            "STOP" => FinishReason::Stop,
            "MAX_TOKENS" => FinishReason::Length,
            "SAFETY" | "RECITATION" | "BLOCKLIST" | "PROHIBITED_CONTENT" | "SPII"
            | "IMAGE_SAFETY" => FinishReason::ContentFilter,
            "MALFORMED_FUNCTION_CALL" | "UNEXPECTED_TOOL_CALL" => FinishReason::Error {
                code: "server_error".to_owned(),
                message: format!("the upstream stopped with finish reason `{reason}`"),
            },
            _ => {
                diagnostics.push(diag(
                    UNKNOWN_FINISH_REASON,
                    None,
                    format!("finish reason `{reason}` was treated as a normal stop"),
                ));
                if self.calls > 0 {
                    FinishReason::ToolCalls
                } else {
                    FinishReason::Stop
                }
            }
        }
    }
}

/// Neutral usage from `usageMetadata`. Gemini counts thinking apart from the answer
/// (`thoughtsTokenCount`); OpenAI counts it inside `output_tokens`, so the two are added.
pub fn usage(u: &UsageMetadata) -> Usage {
    // Saturating: the counts are the upstream's, any `u64`.
    let output = u
        .candidates_token_count
        .saturating_add(u.thoughts_token_count);
    Usage {
        input_tokens: u.prompt_token_count,
        input_tokens_details: InputTokensDetails {
            cached_tokens: u.cached_content_token_count,
            cache_write_tokens: 0,
        },
        output_tokens: output,
        output_tokens_details: OutputTokensDetails {
            reasoning_tokens: u.thoughts_token_count,
        },
        total_tokens: u
            .total_token_count
            .unwrap_or_else(|| u.prompt_token_count.saturating_add(output)),
    }
}
