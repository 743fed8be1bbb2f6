//! The state machine itself: [`Assembler`], its options, the face a transport drives (`new`,
//! `start`, `on_event`, `finish`, `finish_unterminated`, `fail`) and the open-item bookkeeping
//! every item kind shares (sequence numbers, item ids, output slots, `output_item.done`).
//!
//! Not here: what each kind of item looks like (`text`, `calls`, `closing`, `hosted`), how the
//! terminal status is decided (`outcome`), and the methods the gateway's rounds use (`rounds`).

use std::sync::Arc;

use toolbridge_wire::responses::{
    Diagnostic, EventKind, OutputItem, ProviderState, ProviderStateEntry, Response, ResponseStatus,
    StreamEvent, Usage,
};

use super::calls::CallState;
use super::rounds::RoundOutput;
use super::usage::add_usage;
use crate::contract::OutputContract;
use crate::diagnostics::{UPSTREAM_UNTERMINATED, diag};
use crate::events::{FinishReason, UpstreamEvent};
use crate::plan::NameMap;
use crate::reasoning::{ReasoningDisplay, Sealer};
use crate::repair::ToolSchemas;

/// What an [`Assembler`] needs besides the response skeleton.
#[derive(Debug, Clone, Default)]
pub struct AssembleOptions {
    /// What the final text must be.
    pub contract: OutputContract,
    /// Decisions made before the request went upstream.
    pub diagnostics: Vec<Diagnostic>,
    /// The plan's identity map: how provider names restore to declared tools.
    pub names: Arc<NameMap>,
    /// How reasoning is shown.
    pub reasoning: ReasoningDisplay,
    /// Seals reasoning into `encrypted_content` when `reasoning.encrypted` is set.
    pub sealer: Option<Arc<dyn Sealer>>,
    /// Provider builtin functions the caller answers by echoing (the plan's `echo_tools`).
    pub echo_tools: Vec<String>,
    /// The request's compiled tool checks: calls are repaired, and their arguments held until
    /// complete. `None`: repair is off, calls are restored as they came and stream live.
    pub repair: Option<Arc<ToolSchemas>>,
}

/// The reconstruction state machine of one response.
#[derive(Debug)]
pub struct Assembler {
    pub(super) response: Response,
    pub(super) contract: OutputContract,
    pub(super) names: Arc<NameMap>,
    pub(super) reasoning_display: ReasoningDisplay,
    pub(super) sealer: Option<Arc<dyn Sealer>>,
    /// The status a message gets when it is closed.
    pub(super) message_status: &'static str,
    pub(super) echo_tools: Vec<String>,
    pub(super) seq: u64,
    /// Whether the terminal event carries only the response's id and status
    /// ([`Self::splice_terminal`]).
    pub(super) splice_terminal: bool,
    /// Output slots by `output_index`; `None` while the item is still open.
    pub(super) slots: Vec<Option<OutputItem>>,
    pub(super) current: Open,
    pub(super) calls: Vec<CallState>,
    pub(super) usage: Option<Usage>,
    pub(super) finish: Option<FinishReason>,
    pub(super) item_counter: u32,
    pub(super) saw_output: bool,
    /// Text and reasoning of the current upstream round (a gateway tool loop replays them).
    pub(super) round: RoundOutput,
    /// Usage of earlier upstream rounds of this response, added to the last round's.
    pub(super) carried_usage: Option<Usage>,
    /// Set when the response ends incomplete for a reason of the gateway's (its step limit).
    pub(super) forced_incomplete: Option<String>,
    pub(super) repair: Option<Arc<ToolSchemas>>,
    /// Client calls of this round already shown (repair on, beside gateway calls).
    pub(super) client_calls_shown: bool,
    /// Provider state kept for the client calls it goes back with (see `text::keep_state`).
    pub(super) provider_states: Vec<ProviderStateEntry>,
    /// Whether the last of `provider_states` still takes the calls that become final.
    pub(super) state_open: bool,
    /// Relayed items of this round, by the upstream's `output_index` (`relayed`).
    pub(super) relayed: Vec<super::relayed::RelayedItem>,
}

#[derive(Debug)]
pub(super) enum Open {
    None,
    Reasoning {
        index: usize,
        id: String,
        text: String,
        /// The provider's signature over this reasoning, sealed with it.
        signature: Option<String>,
        /// Redacted reasoning beside it (Anthropic's `redacted_thinking`), sealed with it.
        redacted: Vec<String>,
    },
    Message {
        index: usize,
        id: String,
        parts: Vec<Part>,
    },
}

#[derive(Debug)]
pub(super) struct Part {
    pub(super) refusal: bool,
    pub(super) text: String,
}

impl Assembler {
    /// A machine for the response described by `response` (normally from
    /// [`skeleton`](super::skeleton())).
    pub fn new(response: Response, options: AssembleOptions) -> Self {
        let mut response = response;
        response.toolbridge_diagnostics = options.diagnostics;
        Self {
            response,
            contract: options.contract,
            names: options.names,
            reasoning_display: options.reasoning,
            sealer: options.sealer,
            message_status: "completed",
            echo_tools: options.echo_tools,
            seq: 0,
            splice_terminal: false,
            slots: Vec::new(),
            current: Open::None,
            calls: Vec::new(),
            usage: None,
            finish: None,
            item_counter: 0,
            saw_output: false,
            round: RoundOutput::default(),
            carried_usage: None,
            forced_incomplete: None,
            repair: options.repair,
            client_calls_shown: false,
            provider_states: Vec::new(),
            state_open: false,
            relayed: Vec::new(),
        }
    }

    /// For a caller that writes the final response (what the finishing call returns) into the
    /// terminal event itself, as the gateway does from its one serialisation: the terminal
    /// event then carries only the response's id and status, not a copy of it all.
    pub fn splice_terminal(&mut self) {
        self.splice_terminal = true;
    }

    /// A fresh id for an item the gateway makes (`mcpl`, `mcpr`, …).
    pub fn item_id(&mut self, prefix: &str) -> String {
        self.next_id(prefix)
    }

    /// The response as it stands before its end, as [`Self::start`] shows it (status
    /// `in_progress`, no output yet shown).
    pub fn current(&self) -> &Response {
        &self.response
    }

    /// Restores the next rounds' calls by a new plan's names (a round found tools: the loop
    /// replanned with them).
    pub fn replace_names(&mut self, names: Arc<NameMap>) {
        self.names = names;
    }

    /// Records a decision made after the request went upstream.
    pub fn add_diagnostic(&mut self, diagnostic: Diagnostic) {
        self.response.toolbridge_diagnostics.push(diagnostic);
    }

    /// `response.created` and `response.in_progress`: sent once the upstream accepted the request.
    pub fn start(&mut self, out: &mut Vec<StreamEvent>) {
        let snapshot = Box::new(self.response.clone());
        self.push(
            out,
            EventKind::Created {
                response: snapshot.clone(),
            },
        );
        self.push(out, EventKind::InProgress { response: snapshot });
    }

    /// Feeds one upstream event.
    pub fn on_event(&mut self, event: UpstreamEvent, out: &mut Vec<StreamEvent>) {
        match event {
            UpstreamEvent::Text(delta) => self.text(delta, false, out),
            UpstreamEvent::Refusal(delta) => self.text(delta, true, out),
            UpstreamEvent::Reasoning(delta) => self.reasoning(delta, out),
            UpstreamEvent::ReasoningSignature(signature) => {
                let state = ProviderState {
                    signature: Some(signature),
                    ..ProviderState::default()
                };
                self.provider_state(state, out);
            }
            UpstreamEvent::RedactedReasoning(data) => {
                let state = ProviderState {
                    redacted: vec![data],
                    ..ProviderState::default()
                };
                self.provider_state(state, out);
            }
            UpstreamEvent::ToolCall(delta) => self.tool_call(delta, out),
            UpstreamEvent::CallComplete(index) => self.call_complete(index, out),
            UpstreamEvent::WebSearch { query } => {
                self.saw_output = true;
                self.close_current(out);
                self.web_search_item(query, out);
            }
            UpstreamEvent::Usage(usage) => {
                self.usage = Some(match &self.carried_usage {
                    Some(earlier) => add_usage(earlier, &usage),
                    None => usage,
                });
            }
            UpstreamEvent::Finish(reason) => {
                if self.finish.is_none() {
                    self.finish = Some(reason);
                }
            }
            UpstreamEvent::Relayed(event) => self.relayed(event, out),
            UpstreamEvent::ResponseFields(fields) => self.response_fields(fields),
        }
    }

    /// Ends the response normally: closes every open item and emits the terminal event
    /// (`completed`, `incomplete` or `failed`, from the finish reason and the output contract).
    pub fn finish(mut self, completed_at: i64, out: &mut Vec<StreamEvent>) -> Response {
        if matches!(
            self.finish,
            Some(FinishReason::Length | FinishReason::ContentFilter | FinishReason::Incomplete(_))
        ) {
            // The text was cut off: its message is incomplete, as OpenAI marks it.
            self.message_status = "incomplete";
        }
        self.close_current(out);
        self.close_calls(out);
        let (status, error, incomplete) = self.outcome();
        self.terminate(status, error, incomplete, completed_at, out)
    }

    /// Ends a response whose upstream ended with neither a finish reason nor its end marker
    /// (`[DONE]`, `message_stop`; Gemini has none): the answer was cut off. It ends `incomplete`
    /// with reason [`super::codes::UPSTREAM_TRUNCATED`], its text kept and marked incomplete, so
    /// a client knows it is partial. A tool call whose arguments are not whole JSON was cut off,
    /// and a client would run it: the response fails instead and no call is completed.
    /// `tolerated` is a profile's opt-out for a provider known to end every answer that way: it
    /// completes, with a diagnostic. Nothing produced is `empty_upstream_response` either way.
    pub fn finish_unterminated(
        mut self,
        completed_at: i64,
        out: &mut Vec<StreamEvent>,
        tolerated: bool,
    ) -> Response {
        if self.finish.is_some() {
            return self.finish(completed_at, out);
        }
        if self.ends_cut_off() {
            return self.fail(
                "server_error",
                "the upstream stream ended in the middle of a tool call".to_owned(),
                completed_at,
                out,
            );
        }
        if self.saw_output {
            self.add_diagnostic(diag(
                UPSTREAM_UNTERMINATED,
                None,
                "the upstream stream ended without a finish reason or [DONE]; the output may be cut short",
            ));
            if !tolerated && self.forced_incomplete.is_none() {
                self.message_status = "incomplete";
                self.forced_incomplete = Some(super::codes::UPSTREAM_TRUNCATED.to_owned());
            }
        }
        self.finish(completed_at, out)
    }

    /// Ends the response `cancelled` (a client's `/cancel`, or its going away under
    /// `on_client_disconnect = "cancel"`): open items are not completed, completed ones stay. A
    /// stream still open hears it as `response.failed` (the protocol has no cancelled event).
    pub fn cancel(mut self, completed_at: i64, out: &mut Vec<StreamEvent>) -> Response {
        self.current = Open::None;
        self.calls.clear();
        self.terminate(ResponseStatus::Cancelled, None, None, completed_at, out)
    }

    /// Ends the response with a failure: what the client was already shown stays (an open
    /// message ends `incomplete` with the text streamed so far, open reasoning is closed as it
    /// stands), open tool calls are dropped (a client must never act on a partial call), and
    /// completed items stay in the output.
    pub fn fail(
        mut self,
        code: &str,
        message: String,
        completed_at: i64,
        out: &mut Vec<StreamEvent>,
    ) -> Response {
        self.calls.clear();
        self.message_status = "incomplete";
        self.close_current(out);
        let error = super::codes::response_error(code, message);
        self.terminate(ResponseStatus::Failed, Some(error), None, completed_at, out)
    }

    /// Appends an event with the next sequence number.
    pub(super) fn push(&mut self, out: &mut Vec<StreamEvent>, kind: EventKind) {
        out.push(StreamEvent {
            kind,
            sequence_number: self.seq,
        });
        self.seq += 1;
    }

    /// A fresh item id: `prefix`, the response id's tail and a counter.
    pub(super) fn next_id(&mut self, prefix: &str) -> String {
        self.item_counter += 1;
        let base = self
            .response
            .id
            .strip_prefix("resp_")
            .unwrap_or(&self.response.id);
        // `format!("{prefix}_{base}{:03}")`, written directly (a few items a response).
        let mut digits = itoa::Buffer::new();
        let counter = digits.format(self.item_counter);
        let mut id = String::with_capacity(prefix.len() + 1 + base.len() + counter.len().max(3));
        id.push_str(prefix);
        id.push('_');
        id.push_str(base);
        for _ in counter.len()..3 {
            id.push('0');
        }
        id.push_str(counter);
        id
    }

    /// Reserves the next `output_index` for an item not yet final.
    pub(super) fn open_slot(&mut self) -> usize {
        self.slots.push(None);
        self.slots.len() - 1
    }

    /// `output_item.done` for a final item, which takes its slot in the output.
    pub(super) fn done(&mut self, index: usize, item: OutputItem, out: &mut Vec<StreamEvent>) {
        if self.state_open
            && let Some(call_id) = client_call_id(&item)
        {
            self.state_for_call(&call_id);
        }
        self.push(
            out,
            EventKind::OutputItemDone {
                output_index: index,
                item: item.clone(),
            },
        );
        if let Some(slot) = self.slots.get_mut(index) {
            *slot = Some(item);
        }
    }

    /// An item added and done at once, in a fresh slot.
    pub(super) fn announce_and_finish(
        &mut self,
        added: OutputItem,
        done: OutputItem,
        out: &mut Vec<StreamEvent>,
    ) {
        let index = self.open_slot();
        self.push(
            out,
            EventKind::OutputItemAdded {
                output_index: index,
                item: added,
            },
        );
        self.done(index, done, out);
    }
}

/// The `call_id` of a call item the client runs (a function, custom, shell or patch call).
fn client_call_id(item: &OutputItem) -> Option<String> {
    let value = match item {
        OutputItem::Reasoning(_) | OutputItem::Message(_) => return None,
        other => serde_json::to_value(other).ok()?,
    };
    let kind = value["type"].as_str()?;
    if !kind.ends_with("_call") || kind.starts_with("mcp") || kind.starts_with("web_search") {
        return None;
    }
    value["call_id"].as_str().map(str::to_owned)
}
