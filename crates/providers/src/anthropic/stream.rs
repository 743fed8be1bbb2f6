//! Decoding a streamed Messages answer, one server-sent event at a time.
//!
//! Decisions, documented here because clients depend on them:
//! - `message_stop` ends the stream ([`Flow::Done`]); `ping` is ignored.
//! - Tool calls are keyed by the content block `index`: a `tool_use` block start gives the id and
//!   name, each `input_json_delta` a fragment of the arguments.
//! - `message_start` and `message_delta` carry usage; a [`UpstreamEvent::Usage`] is emitted after
//!   each with the counters so far (the last one wins downstream).
//! - An `error` event fails the response ([`Error::Upstream`]).
//! - A second `message_start` before the first message's `message_stop` (seen after upstream
//!   retries) fails the response ([`Error::Decode`]): two attempts are never merged into one
//!   answer (their reasoning side by side, a tool call's arguments two JSON prefixes glued).
//! - An event or block type this decoder does not know is skipped silently (Anthropic adds new
//!   ones, e.g. server tool blocks); a payload that is not JSON, or of the wrong shape, is skipped
//!   with a diagnostic.
//! - A thinking block's signature becomes one [`UpstreamEvent::ReasoningSignature`] when the
//!   block stops, so the gateway keeps it with the reasoning and can replay both.
//!   A `redacted_thinking` block (whole in its start event) becomes one
//!   [`UpstreamEvent::RedactedReasoning`], kept and replayed the same way.

use std::collections::BTreeSet;

use toolbridge_core::diagnostics::{CHUNK_SKIPPED, diag};
use toolbridge_core::events::{ToolCallDelta, UpstreamEvent};
use toolbridge_wire::anthropic::{ContentBlock, Delta, StreamEvent};
use toolbridge_wire::responses::Diagnostic;

use super::{UsageCounts, errors, finish_reason};
use crate::Error;

/// What the caller should do after an event: one type for every dialect.
pub use crate::dialect::Flow;

/// The decoder of one streamed answer.
#[derive(Debug, Default)]
pub struct MessagesDecoder {
    skipped: u32,
    /// A `message_start` came (and no `message_stop` yet).
    started: bool,
    usage: UsageCounts,
    /// Indexes of the open `tool_use` blocks.
    tool_blocks: BTreeSet<u32>,
    /// The open thinking block: its index and its signature so far.
    thinking: Option<(u32, String)>,
    /// The open `server_tool_use` block of a web search: its index and input so far.
    search: Option<(u32, String)>,
}

impl MessagesDecoder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Decodes one event (`event_name` is the SSE `event:` line, `data` its `data:` payload) into
    /// `out`; diagnostics go to `diagnostics`.
    pub fn on_event(
        &mut self,
        event_name: &str,
        data: &str,
        out: &mut Vec<UpstreamEvent>,
        diagnostics: &mut Vec<Diagnostic>,
    ) -> Result<Flow, Error> {
        let data = data.trim();
        if data.is_empty() {
            return Ok(Flow::Continue);
        }
        let event: StreamEvent = match serde_json::from_str(data) {
            Ok(event) => event,
            Err(e) => {
                self.skip(
                    diagnostics,
                    format!("a `{event_name}` event that is not a valid Messages event ({e})"),
                );
                return Ok(Flow::Continue);
            }
        };
        match event {
            StreamEvent::MessageStart { message } => {
                if std::mem::replace(&mut self.started, true) {
                    return Err(Error::Decode {
                        message: "a second `message_start` arrived before the first message ended; the two attempts are not merged".to_owned(),
                    });
                }
                if let Some(u) = &message.usage {
                    self.usage.update(u);
                    out.push(self.usage.event());
                }
            }
            StreamEvent::ContentBlockStart {
                index,
                content_block,
            } => self.block_start(index, content_block, out),
            StreamEvent::ContentBlockDelta { index, delta } => self.delta(index, delta, out),
            StreamEvent::ContentBlockStop { index } => {
                self.tool_blocks.remove(&index);
                if let Some((_, input)) = self.search.take_if(|(i, _)| *i == index) {
                    out.push(UpstreamEvent::WebSearch {
                        query: search_query(&input),
                    });
                }
                // The block's whole signature, once: it is sealed with the reasoning.
                if let Some((_, signature)) = self.thinking.take_if(|(i, _)| *i == index)
                    && !signature.is_empty()
                {
                    out.push(UpstreamEvent::ReasoningSignature(signature));
                }
            }
            StreamEvent::MessageDelta { delta, usage } => {
                if let Some(reason) = delta.stop_reason.filter(|r| !r.is_empty()) {
                    out.push(UpstreamEvent::Finish(finish_reason(&reason, diagnostics)));
                }
                if let Some(u) = &usage {
                    self.usage.update(u);
                    out.push(self.usage.event());
                }
            }
            StreamEvent::MessageStop => return Ok(Flow::Done),
            StreamEvent::Error { error } => {
                return Err(Error::Upstream(Box::new(errors::from_stream_error(&error))));
            }
            StreamEvent::Ping | StreamEvent::Other => {}
        }
        Ok(Flow::Continue)
    }

    fn block_start(&mut self, index: u32, block: ContentBlock, out: &mut Vec<UpstreamEvent>) {
        match block {
            ContentBlock::Text(text) => {
                if !text.text.is_empty() {
                    out.push(UpstreamEvent::Text(text.text));
                }
            }
            ContentBlock::ToolUse(call) => {
                self.tool_blocks.insert(index);
                // The start carries `input: {}`; the arguments follow as `input_json_delta`s.
                let arguments = match &call.input {
                    serde_json::Value::Object(map) if !map.is_empty() => call.input.to_string(),
                    _ => String::new(),
                };
                out.push(UpstreamEvent::ToolCall(ToolCallDelta {
                    index: Some(index),
                    id: Some(call.id),
                    name: Some(call.name),
                    arguments,
                    item_id: None,
                }));
            }
            ContentBlock::ServerToolUse(call) if call.name == "web_search" => {
                let input = match &call.input {
                    serde_json::Value::Object(map) if !map.is_empty() => call.input.to_string(),
                    _ => String::new(),
                };
                self.search = Some((index, input));
            }
            ContentBlock::ServerToolUse(_) => {}
            ContentBlock::Thinking(block) => {
                if !block.thinking.is_empty() {
                    out.push(UpstreamEvent::Reasoning(block.thinking));
                }
                self.thinking = Some((index, block.signature));
            }
            // Whole in its start event: its data goes back unchanged on the next turn.
            ContentBlock::RedactedThinking(block) if !block.data.is_empty() => {
                out.push(UpstreamEvent::RedactedReasoning(block.data));
            }
            ContentBlock::RedactedThinking(_)
            | ContentBlock::Image(_)
            | ContentBlock::Document(_)
            | ContentBlock::ToolResult(_)
            | ContentBlock::Other => {}
        }
    }

    fn delta(&mut self, index: u32, delta: Delta, out: &mut Vec<UpstreamEvent>) {
        match delta {
            Delta::TextDelta { text } => {
                if !text.is_empty() {
                    out.push(UpstreamEvent::Text(text));
                }
            }
            Delta::InputJsonDelta { partial_json } if self.search_at(index) => {
                if let Some((_, input)) = &mut self.search {
                    input.push_str(&partial_json);
                }
            }
            Delta::InputJsonDelta { partial_json } => {
                if self.tool_blocks.contains(&index) && !partial_json.is_empty() {
                    out.push(UpstreamEvent::ToolCall(ToolCallDelta {
                        index: Some(index),
                        id: None,
                        name: None,
                        arguments: partial_json,
                        item_id: None,
                    }));
                }
            }
            Delta::ThinkingDelta { thinking } => {
                if !thinking.is_empty() {
                    out.push(UpstreamEvent::Reasoning(thinking));
                }
            }
            Delta::SignatureDelta { signature } => {
                if let Some((i, so_far)) = &mut self.thinking
                    && *i == index
                {
                    so_far.push_str(&signature);
                }
            }
            Delta::Other => {}
        }
    }

    fn search_at(&self, index: u32) -> bool {
        self.search.as_ref().is_some_and(|(i, _)| *i == index)
    }

    fn skip(&mut self, diagnostics: &mut Vec<Diagnostic>, what: String) {
        self.skipped += 1;
        // A few diagnostics are enough; a broken upstream can send thousands.
        if self.skipped <= 3 {
            diagnostics.push(diag(CHUNK_SKIPPED, None, format!("skipped {what}")));
        }
    }
}

/// The `query` of a web search's input JSON; empty when it has none.
pub(super) fn search_query(input: &str) -> String {
    serde_json::from_str::<serde_json::Value>(input)
        .ok()
        .and_then(|v| v.get("query").and_then(|q| q.as_str()).map(str::to_owned))
        .unwrap_or_default()
}
