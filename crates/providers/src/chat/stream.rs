//! Decoding a streamed Chat Completions answer, one SSE `data:` payload at a time.
//!
//! Decisions, documented here because clients depend on them:
//! - `[DONE]` ends the stream; a stream that ends without it is still finished normally.
//! - A chunk with no choices and no usage (keep-alives, provider metadata) is skipped silently.
//! - A payload that is not JSON, or JSON of the wrong shape, is skipped with a diagnostic: one
//!   bad chunk from a local server should not cost the whole answer.
//! - A chunk carrying `error` (some providers report mid-stream failures that way) fails the
//!   response with the provider's message.
//! - Only choice 0 is read (toolbridge never asks for `n > 1`).

use toolbridge_core::diagnostics::{CHUNK_SKIPPED, diag};
use toolbridge_core::events::{ToolCallDelta, UpstreamEvent};
use toolbridge_wire::chat::ChatChunk;
use toolbridge_wire::responses::Diagnostic;

use super::details::StreamedDetails;
use super::parts::{Piece, pieces};
use super::think::ThinkSplitter;
use super::{arguments_text, errors, push_finish, usage};
use crate::Error;
use crate::profile::Profile;

mod fast;

/// What the caller should do after an event: one type for every dialect.
pub use crate::dialect::Flow;

/// The decoder of one streamed answer.
#[derive(Debug, Default)]
pub struct ChunkDecoder {
    skipped: u32,
    /// Set for profiles whose reasoning comes inside `<think>` tags in the content.
    think: Option<ThinkSplitter>,
    /// MiniMax's `delta.reasoning_details` so far.
    details: StreamedDetails,
}

impl ChunkDecoder {
    pub fn new(profile: &Profile) -> Self {
        Self {
            skipped: 0,
            think: profile.think_tags.then(ThinkSplitter::default),
            details: StreamedDetails::default(),
        }
    }

    /// Flushes what the decoder holds back; call once when the upstream stream ends.
    pub fn finish(&mut self, out: &mut Vec<UpstreamEvent>) {
        if let Some(think) = &mut self.think {
            think.finish(out);
        }
    }

    /// Decodes one `data:` payload into `out`; diagnostics go to `diagnostics`.
    pub fn on_data(
        &mut self,
        profile: &Profile,
        data: &str,
        out: &mut Vec<UpstreamEvent>,
        diagnostics: &mut Vec<Diagnostic>,
    ) -> Result<Flow, Error> {
        let data = data.trim();
        if data == "[DONE]" {
            return Ok(Flow::Done);
        }
        if data.is_empty() {
            return Ok(Flow::Continue);
        }
        if let Some(chunk) = fast::plain(data) {
            fast::decode(profile, chunk, self, out, diagnostics);
            return Ok(Flow::Continue);
        }
        self.on_chunk(profile, data, out, diagnostics)
    }

    /// The full reading of a chunk (a non-empty payload other than `[DONE]`).
    fn on_chunk(
        &mut self,
        profile: &Profile,
        data: &str,
        out: &mut Vec<UpstreamEvent>,
        diagnostics: &mut Vec<Diagnostic>,
    ) -> Result<Flow, Error> {
        let chunk: ChatChunk = match serde_json::from_str(data) {
            Ok(chunk) => chunk,
            Err(e) => {
                self.skip(
                    diagnostics,
                    format!("a chunk that is not a valid Chat chunk ({e})"),
                );
                return Ok(Flow::Continue);
            }
        };
        if let Some(error) = chunk.extra.get("error").filter(|e| !e.is_null()) {
            return Err(Error::Upstream(Box::new(errors::from_stream_error(error))));
        }
        if let Some(error) = errors::base_resp_error(&chunk.extra) {
            return Err(Error::Upstream(Box::new(error)));
        }
        decode_chunk(profile, chunk, self, out, diagnostics);
        Ok(Flow::Continue)
    }

    fn skip(&mut self, diagnostics: &mut Vec<Diagnostic>, what: String) {
        self.skipped += 1;
        // One diagnostic per kind of problem is enough; a broken server can send thousands.
        if self.skipped <= 3 {
            diagnostics.push(diag(CHUNK_SKIPPED, None, format!("skipped {what}")));
        }
    }
}

/// Text for `decoder`'s output: through the `<think>` splitter when the profile has one.
fn push_text(decoder: &mut ChunkDecoder, text: String, out: &mut Vec<UpstreamEvent>) {
    match decoder.think.as_mut() {
        Some(think) => think.push(&text, out),
        None => out.push(UpstreamEvent::Text(text)),
    }
}

fn decode_chunk(
    profile: &Profile,
    chunk: ChatChunk,
    decoder: &mut ChunkDecoder,
    out: &mut Vec<UpstreamEvent>,
    diagnostics: &mut Vec<Diagnostic>,
) {
    if let Some(choice) = chunk.choices.into_iter().find(|c| c.index == 0) {
        let delta = choice.delta;
        let details = delta
            .reasoning_details
            .as_deref()
            .and_then(|d| decoder.details.delta(d));
        if let Some(r) = delta.reasoning_content.or(delta.reasoning).or(details) {
            out.push(UpstreamEvent::Reasoning(r));
        }
        if let Some(content) = delta.content {
            for piece in pieces(content, diagnostics) {
                match piece {
                    Piece::Text(text) => push_text(decoder, text, out),
                    Piece::Reasoning(r) => out.push(UpstreamEvent::Reasoning(r)),
                }
            }
        }
        if let Some(refusal) = delta.refusal {
            out.push(UpstreamEvent::Refusal(refusal));
        }
        for call in delta.tool_calls.into_iter().flatten() {
            let (name, arguments) = match call.function {
                Some(f) => (f.name, arguments_text(f.arguments)),
                None => (None, String::new()),
            };
            out.push(UpstreamEvent::ToolCall(ToolCallDelta {
                index: call.index,
                id: call.id,
                name,
                arguments,
                item_id: None,
            }));
        }
        if let Some(reason) = choice.finish_reason {
            push_finish(profile, &reason, out, diagnostics);
        }
    }
    if let Some(u) = &chunk.usage {
        out.push(UpstreamEvent::Usage(usage(u)));
    }
}
