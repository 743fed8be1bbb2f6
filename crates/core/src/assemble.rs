//! Reconstruction: one explicit state machine per response, from [`UpstreamEvent`]s to
//! Responses stream events and the final response object.
//!
//! The same machine serves streamed and non-streamed requests (a non-streamed request feeds the
//! whole upstream response through it and keeps only the final object), so both paths produce
//! identical items.
//!
//! *Invariants*: `sequence_number` strictly increases from 0; there is exactly one terminal
//! event and nothing after it; an item's `output_item.done` is emitted only when the item is
//! final, so a tool call is completed only when the upstream has finished (its arguments can no
//! longer grow); the ids in events are the ids in the final response.
//!
//! *Repair* ([`AssembleOptions::repair`]): when on, every client call is checked and repaired
//! through [`ToolSchemas::restore_repaired`] when it is complete, and its arguments are held
//! until then (no `function_call_arguments.delta` before the upstream finished: a client must
//! never see text that is later changed); text and reasoning still stream live. Each fix is a
//! diagnostic. [`Assembler::review_calls`] reports the calls still invalid at the end of a round,
//! and [`Assembler::take_reask`] takes a round's calls back, unshown, for a hidden re-ask; what
//! to do with an invalid call is the caller's policy.

use std::sync::Arc;

use serde_json::Value;
use toolbridge_wire::responses::{
    ActionCallItem, ApplyPatchCallItem, CreateResponse, CustomToolCallItem, Diagnostic, EventKind,
    FunctionCallItem, IncompleteDetails, JsonSchemaFormat, OutputContent, OutputItem,
    OutputMessage, ReasoningContent, ReasoningItem, Response, ResponseError, ResponseStatus,
    StreamEvent, SummaryPart, TextConfig, TextFormat, Usage, WebSearchCallItem,
};

use crate::canonical::{AssistantTurn, CallKind, ToolCall};
use crate::contract::OutputContract;
use crate::diagnostics::{
    CALL_NOT_RESTORED, CHUNK_SKIPPED, REASONING_NOT_SEALED, TOOL_CALL_REASKED,
    UPSTREAM_UNTERMINATED, diag,
};
use crate::events::{FinishReason, ToolCallDelta, UpstreamEvent};
use crate::plan::{Identity, NameMap};
use crate::reasoning::{ReasoningDisplay, Sealer};
use crate::repair::{NameMatch, Outcome, RepairedCall, ToolSchemas};
use crate::restore::{function_name, restore, streams_as_function};

/// Error codes of failed responses produced here.
pub mod codes {
    /// The upstream ended without producing anything.
    pub const EMPTY_RESPONSE: &str = "empty_upstream_response";
    /// The final text does not satisfy `text.format`.
    pub const OUTPUT_VALIDATION_FAILED: &str = "output_validation_failed";
    /// The conversation does not fit the model's context window.
    pub const CONTEXT_LENGTH_EXCEEDED: &str = "context_length_exceeded";
    /// A tool call stayed invalid after repair, under the `fail` policy.
    pub const INVALID_TOOL_CALL: &str = "invalid_tool_call";
    /// The `incomplete_details.reason` of an answer the upstream cut off: it ended with neither a
    /// finish reason nor its dialect's end marker.
    pub const UPSTREAM_TRUNCATED: &str = "upstream_truncated";
}

/// What the response echoes about the request and how it is identified.
#[derive(Debug, Clone)]
pub struct ResponseMeta {
    pub id: String,
    pub created_at: i64,
    /// Whether the response will be retrievable later.
    pub stored: bool,
}

/// Builds the response object as it stands before any output: every required key present and
/// every request default filled in.
pub fn skeleton(req: &CreateResponse, meta: &ResponseMeta) -> Response {
    Response {
        id: meta.id.clone(),
        object: "response".to_owned(),
        created_at: meta.created_at,
        completed_at: None,
        status: ResponseStatus::InProgress,
        incomplete_details: None,
        model: req.model.clone().unwrap_or_default(),
        previous_response_id: req.previous_response_id.clone(),
        instructions: req.instructions.clone(),
        output: Vec::new(),
        error: None,
        tools: req.tools.clone().unwrap_or_default(),
        tool_choice: req
            .tool_choice
            .clone()
            .unwrap_or_else(|| Value::String("auto".to_owned())),
        truncation: req
            .truncation
            .clone()
            .unwrap_or_else(|| "disabled".to_owned()),
        parallel_tool_calls: req.parallel_tool_calls.unwrap_or(true),
        text: TextConfig {
            format: Some(echoed_format(req)),
            verbosity: req.text.as_ref().and_then(|t| t.verbosity.clone()),
        },
        top_p: req.top_p.unwrap_or(1.0),
        presence_penalty: req.presence_penalty.unwrap_or(0.0),
        frequency_penalty: req.frequency_penalty.unwrap_or(0.0),
        top_logprobs: req.top_logprobs.unwrap_or(0),
        temperature: req.temperature.unwrap_or(1.0),
        reasoning: req.reasoning.clone(),
        usage: None,
        max_output_tokens: req.max_output_tokens,
        max_tool_calls: req.max_tool_calls,
        store: meta.stored,
        background: req.background.unwrap_or(false),
        service_tier: req
            .service_tier
            .clone()
            .filter(|t| t != "auto")
            .unwrap_or_else(|| "default".to_owned()),
        metadata: req.metadata.clone().unwrap_or_default(),
        safety_identifier: req.safety_identifier.clone(),
        prompt_cache_key: req.prompt_cache_key.clone(),
        conversation: conversation_id(req).map(|id| serde_json::json!({"id": id})),
        toolbridge_diagnostics: Vec::new(),
    }
}

/// The conversation a request names: `conversation: "conv_…"` or `{"id": "conv_…"}`.
pub fn conversation_id(req: &CreateResponse) -> Option<String> {
    match req.extra.get("conversation")? {
        Value::String(id) => Some(id.clone()),
        Value::Object(obj) => obj.get("id").and_then(Value::as_str).map(str::to_owned),
        _ => None,
    }
}

/// `text.format` as the response echoes it: the schema itself is not repeated (the Open
/// Responses spec has it `null`), and `strict` is always a boolean.
fn echoed_format(req: &CreateResponse) -> TextFormat {
    match req.text.as_ref().and_then(|t| t.format.as_ref()) {
        None => TextFormat::Text,
        Some(TextFormat::JsonSchema(f)) => TextFormat::JsonSchema(JsonSchemaFormat {
            name: f.name.clone(),
            schema: Value::Null,
            description: f.description.clone(),
            strict: Some(f.strict.unwrap_or(false)),
        }),
        Some(other) => other.clone(),
    }
}

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

/// A client call still invalid after repair, at the end of a round.
#[derive(Debug, Clone, PartialEq)]
pub struct InvalidCall {
    pub call_id: String,
    /// The tool as the model called it.
    pub tool: String,
    /// What is wrong: the check's message (a JSON pointer or a line and column, and what was
    /// expected), or that the name matches no declared tool.
    pub message: String,
}

/// A round's calls taken back for a hidden re-ask: the assistant turn to append to the
/// conversation (the round's text, reasoning and calls) and a result for each call.
#[derive(Debug, Clone, PartialEq)]
pub struct Reask {
    pub turn: AssistantTurn,
    /// `(call_id, output)` per call, in order: the validation error for an invalid call.
    pub results: Vec<(String, String)>,
}

/// A provider builtin call (Kimi's `$web_search`) the caller answers by sending its arguments
/// back as its result, so that the provider runs it and goes on.
#[derive(Debug, Clone, PartialEq)]
pub struct EchoCall {
    pub call_id: String,
    pub name: String,
    pub arguments: String,
}

/// A call the gateway runs itself, taken from a finished upstream round.
#[derive(Debug, Clone, PartialEq)]
pub struct GatewayCall {
    pub call_id: String,
    /// The gateway tool's server label (`toolbridge` for built-ins) and name.
    pub server: String,
    pub name: String,
    pub arguments: String,
}

/// What an upstream round produced besides its calls, for the history of the next round.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RoundOutput {
    pub text: Option<String>,
    pub reasoning: Option<String>,
    /// The provider's signature over that reasoning (Anthropic, Gemini), needed to replay it.
    pub reasoning_signature: Option<String>,
}

/// A hosted item the gateway shows for a call it runs.
#[derive(Debug, Clone, PartialEq)]
pub enum Hosted {
    /// An `mcp_call` item (MCP tools, and built-ins under the `toolbridge` label).
    Mcp {
        server_label: String,
        name: String,
        arguments: String,
    },
    /// A `web_search_call` item (the gateway's search serving `web_search`).
    WebSearch { query: String },
}

/// A hosted item shown as started, to be finished when its call returns.
#[derive(Debug)]
pub struct HostedSlot {
    index: usize,
    id: String,
    hosted: Hosted,
}

impl HostedSlot {
    /// The item's id (`mcp_…`, `ws_…`).
    pub fn id(&self) -> &str {
        &self.id
    }
}

/// The reconstruction state machine of one response.
#[derive(Debug)]
pub struct Assembler {
    response: Response,
    contract: OutputContract,
    names: Arc<NameMap>,
    reasoning_display: ReasoningDisplay,
    sealer: Option<Arc<dyn Sealer>>,
    /// The status a message gets when it is closed.
    message_status: &'static str,
    echo_tools: Vec<String>,
    seq: u64,
    /// Output slots by `output_index`; `None` while the item is still open.
    slots: Vec<Option<OutputItem>>,
    current: Open,
    calls: Vec<CallState>,
    usage: Option<Usage>,
    finish: Option<FinishReason>,
    item_counter: u32,
    saw_output: bool,
    /// Text and reasoning of the current upstream round (a gateway tool loop replays them).
    round: RoundOutput,
    /// Usage of earlier upstream rounds of this response, added to the last round's.
    carried_usage: Option<Usage>,
    /// Set when the response ends incomplete for a reason of the gateway's (its step limit).
    forced_incomplete: Option<String>,
    repair: Option<Arc<ToolSchemas>>,
    /// Client calls of this round already shown (repair on, beside gateway calls).
    client_calls_shown: bool,
}

#[derive(Debug)]
enum Open {
    None,
    Reasoning {
        index: usize,
        id: String,
        text: String,
        /// The provider's signature over this reasoning, sealed with it.
        signature: Option<String>,
    },
    Message {
        index: usize,
        id: String,
        parts: Vec<Part>,
    },
}

#[derive(Debug)]
struct Part {
    refusal: bool,
    text: String,
}

#[derive(Debug)]
struct CallState {
    key_index: Option<u32>,
    /// Set once the call streams as a `function_call`; calls of other types are announced only
    /// when complete (their item type and shape depend on the whole arguments).
    output_index: Option<usize>,
    item_id: String,
    call_id: Option<String>,
    name: Option<String>,
    arguments: String,
    /// The call checked and repaired, once complete (repair on).
    repaired: Option<RepairedCall>,
}

impl CallState {
    /// The call's id: the provider's, or one made from the item id.
    fn id(&self) -> String {
        self.call_id
            .clone()
            .unwrap_or_else(|| format!("call_{}", self.item_id))
    }
}

impl Assembler {
    /// A machine for the response described by `response` (normally from [`skeleton`]).
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
        }
    }

    /// The response id.
    pub fn response_id(&self) -> &str {
        &self.response.id
    }

    /// At the end of an upstream round: when every call of the round is a provider builtin the
    /// caller must echo, shows them as `web_search_call` items and returns them; the response
    /// stays open for the next round. `None` when the round ends the response.
    pub fn take_echoes(&mut self, out: &mut Vec<StreamEvent>) -> Option<Vec<EchoCall>> {
        let echo = |c: &CallState| {
            c.name
                .as_deref()
                .is_some_and(|n| self.echo_tools.iter().any(|e| e == n))
        };
        if self.calls.is_empty() || !self.calls.iter().all(echo) {
            return None;
        }
        self.close_current(out);
        let mut echoes = Vec::new();
        for call in std::mem::take(&mut self.calls) {
            let call_id = call
                .call_id
                .unwrap_or_else(|| format!("call_{}", call.item_id));
            let query = serde_json::from_str::<Value>(&call.arguments)
                .ok()
                .and_then(|v| v.get("query").and_then(Value::as_str).map(str::to_owned))
                .unwrap_or_default();
            self.web_search_item(query, out);
            echoes.push(EchoCall {
                call_id,
                name: call.name.unwrap_or_default(),
                arguments: call.arguments,
            });
        }
        self.finish = None;
        Some(echoes)
    }

    /// At the end of an upstream round: takes the calls the gateway runs itself (held back
    /// from the client), with the round's text and reasoning for the next round's history. The
    /// client's own calls of the round stay. Empty when the round made no gateway call.
    pub fn take_gateway_calls(
        &mut self,
        out: &mut Vec<StreamEvent>,
    ) -> (Vec<GatewayCall>, RoundOutput) {
        let names = Arc::clone(&self.names);
        let is_gateway = |c: &CallState| {
            c.name.as_deref().is_some_and(|n| {
                matches!(
                    names.identity(n),
                    Some(crate::plan::Identity::Gateway { .. })
                )
            })
        };
        if !self.calls.iter().any(is_gateway) {
            return (Vec::new(), RoundOutput::default());
        }
        self.close_current(out);
        let (gateway, client): (Vec<CallState>, Vec<CallState>) = std::mem::take(&mut self.calls)
            .into_iter()
            .partition(is_gateway);
        self.calls = client;
        if self.repair.is_some() && !self.calls.is_empty() {
            // Held calls are shown now, before the gateway's items, so the output keeps the
            // round's calls together (a client replaying it sends them as one turn).
            self.close_calls(out);
            self.client_calls_shown = true;
        }
        let taken = gateway
            .into_iter()
            .filter_map(|call| {
                let provider_name = call.name?;
                let Some(crate::plan::Identity::Gateway { server, name }) =
                    self.names.identity(&provider_name).cloned()
                else {
                    return None;
                };
                Some(GatewayCall {
                    call_id: call
                        .call_id
                        .unwrap_or_else(|| format!("call_{}", call.item_id)),
                    server,
                    name,
                    arguments: call.arguments,
                })
            })
            .collect();
        (taken, std::mem::take(&mut self.round))
    }

    /// True when the current round has calls for the client.
    pub fn has_client_calls(&self) -> bool {
        !self.calls.is_empty() || self.client_calls_shown
    }

    /// True when the current round has calls the gateway runs itself.
    pub fn has_gateway_calls(&self) -> bool {
        self.calls.iter().any(|c| {
            c.name
                .as_deref()
                .is_some_and(|n| matches!(self.names.identity(n), Some(Identity::Gateway { .. })))
        })
    }

    /// At the end of a round, with repair on: checks and repairs every client call of the round
    /// (kept for when the calls are shown) and returns those still invalid — a payload that fails
    /// its check after repair, or a name that matches no declared tool. Empty with repair off.
    pub fn review_calls(&mut self) -> Vec<InvalidCall> {
        let Some(schemas) = self.repair.clone() else {
            return Vec::new();
        };
        let names = Arc::clone(&self.names);
        let mut invalid = Vec::new();
        for call in &mut self.calls {
            let Some(called) = call.name.as_deref() else {
                continue;
            };
            if self.echo_tools.iter().any(|e| e == called)
                || matches!(names.identity(called), Some(Identity::Gateway { .. }))
            {
                continue;
            }
            let repaired = call
                .repaired
                .get_or_insert_with(|| schemas.restore_repaired(&names, called, &call.arguments));
            if let Some(message) = invalid_message(repaired, called, &names) {
                invalid.push(InvalidCall {
                    call_id: call.id(),
                    tool: called.to_owned(),
                    message,
                });
            }
        }
        invalid
    }

    /// Takes the round's calls back for a hidden re-ask: none is shown; each `invalid` call gets
    /// its validation error as its result, and the others a result saying they were not run. A
    /// `tool_call_reasked` diagnostic names each invalid call. The round's text and reasoning (already
    /// shown) go into the turn, as the tool loop replays them.
    pub fn take_reask(&mut self, invalid: &[InvalidCall], out: &mut Vec<StreamEvent>) -> Reask {
        self.close_current(out);
        let mut tool_calls = Vec::new();
        let mut results = Vec::new();
        for mut call in std::mem::take(&mut self.calls) {
            let Some(called) = call.name.clone() else {
                continue;
            };
            let call_id = call.id();
            let kind = match (call.repaired.take(), &self.repair) {
                (Some(repaired), _) => repaired.call,
                (None, Some(schemas)) => {
                    schemas
                        .restore_repaired(&self.names, &called, &call.arguments)
                        .call
                }
                (None, None) => restore(&self.names, &called, &call.arguments).0,
            };
            let result = match invalid.iter().find(|i| i.call_id == call_id) {
                Some(i) => {
                    self.add_diagnostic(diag(
                        TOOL_CALL_REASKED,
                        None,
                        format!(
                            "`{}` was called with invalid input ({}); the call was not shown and the model was asked once more",
                            i.tool, i.message
                        ),
                    ));
                    format!(
                        "Error: this call was not run because it is invalid. {} Call the tool again with corrected input.",
                        i.message
                    )
                }
                None => "This call was not run because another call in the same turn was invalid; make it again if it is still needed.".to_owned(),
            };
            tool_calls.push(ToolCall {
                call_id: call_id.clone(),
                kind,
            });
            results.push((call_id, result));
        }
        let round = std::mem::take(&mut self.round);
        Reask {
            turn: AssistantTurn {
                text: round.text,
                reasoning: round.reasoning,
                reasoning_signature: round.reasoning_signature,
                sealed_reasoning: Vec::new(),
                tool_calls,
            },
            results,
        }
    }

    /// True when the upstream ended with no finish reason in the middle of a call (its arguments
    /// are not whole JSON): the response fails rather than show a cut-off call.
    pub fn ends_cut_off(&self) -> bool {
        self.finish.is_none()
            && self.calls.iter().any(|c| {
                let args = c.arguments.trim();
                !args.is_empty() && serde_json::from_str::<serde::de::IgnoredAny>(args).is_err()
            })
    }

    /// Starts the next upstream round of the same response: its finish reason is the one that
    /// counts, and this round's usage is carried into the total.
    pub fn next_round(&mut self) {
        self.finish = None;
        self.client_calls_shown = false;
        if let Some(usage) = self.usage.take() {
            self.carried_usage = Some(usage.clone());
            self.usage = Some(usage);
        }
    }

    /// Ends the response `incomplete` with `reason` at its finish (the gateway's tool loop ran
    /// out of steps or time); calls still held for the gateway are left out.
    pub fn stop_incomplete(&mut self, reason: &str) {
        self.forced_incomplete = Some(reason.to_owned());
    }

    /// Shows a call the gateway is about to run: the item, `in_progress`.
    pub fn hosted_start(&mut self, hosted: Hosted, out: &mut Vec<StreamEvent>) -> HostedSlot {
        self.close_current(out);
        self.saw_output = true;
        let index = self.open_slot();
        let id = match &hosted {
            Hosted::Mcp { .. } => self.next_id("mcp"),
            Hosted::WebSearch { .. } => self.next_id("ws"),
        };
        let slot = HostedSlot { index, id, hosted };
        let item = hosted_item(&slot, "in_progress", None);
        self.push(
            out,
            EventKind::OutputItemAdded {
                output_index: index,
                item,
            },
        );
        let (item_id, output_index) = (slot.id.clone(), index);
        let events = match &slot.hosted {
            Hosted::Mcp { arguments, .. } => vec![
                EventKind::McpCallArgumentsDelta {
                    item_id: item_id.clone(),
                    output_index,
                    delta: arguments.clone(),
                },
                EventKind::McpCallArgumentsDone {
                    item_id: item_id.clone(),
                    output_index,
                    arguments: arguments.clone(),
                },
                EventKind::McpCallInProgress {
                    item_id,
                    output_index,
                },
            ],
            Hosted::WebSearch { .. } => vec![
                EventKind::WebSearchCallInProgress {
                    item_id: item_id.clone(),
                    output_index,
                },
                EventKind::WebSearchCallSearching {
                    item_id,
                    output_index,
                },
            ],
        };
        for kind in events {
            self.push(out, kind);
        }
        slot
    }

    /// Finishes a hosted item with its call's result (`Err`: the tool's error message).
    pub fn hosted_finish(
        &mut self,
        slot: HostedSlot,
        result: Result<String, String>,
        out: &mut Vec<StreamEvent>,
    ) {
        let (item_id, output_index) = (slot.id.clone(), slot.index);
        let ok = result.is_ok();
        let event = match (&slot.hosted, ok) {
            (Hosted::Mcp { .. }, true) => EventKind::McpCallCompleted {
                item_id,
                output_index,
            },
            (Hosted::Mcp { .. }, false) => EventKind::McpCallFailed {
                item_id,
                output_index,
            },
            (Hosted::WebSearch { .. }, _) => EventKind::WebSearchCallCompleted {
                item_id,
                output_index,
            },
        };
        self.push(out, event);
        let status = if ok { "completed" } else { "failed" };
        let item = hosted_item(&slot, status, Some(result));
        self.done(slot.index, item, out);
    }

    /// Shows an item the gateway produced whole (an `mcp_list_tools` listing, an
    /// `mcp_approval_request`, an approved call it ran before the model's turn): added and done
    /// at once, with the listing's own events.
    pub fn gateway_item(&mut self, item: OutputItem, out: &mut Vec<StreamEvent>) {
        self.close_current(out);
        let index = self.open_slot();
        let id = item.id().unwrap_or_default().to_owned();
        self.push(
            out,
            EventKind::OutputItemAdded {
                output_index: index,
                item: item.clone(),
            },
        );
        if let OutputItem::McpListTools(listing) = &item {
            self.push(
                out,
                EventKind::McpListToolsInProgress {
                    item_id: id.clone(),
                    output_index: index,
                },
            );
            let end = if listing.error.is_some() {
                EventKind::McpListToolsFailed {
                    item_id: id,
                    output_index: index,
                }
            } else {
                EventKind::McpListToolsCompleted {
                    item_id: id,
                    output_index: index,
                }
            };
            self.push(out, end);
        }
        self.done(index, item, out);
    }

    /// A fresh id for an item the gateway makes (`mcpl`, `mcpr`, …).
    pub fn item_id(&mut self, prefix: &str) -> String {
        self.next_id(prefix)
    }

    /// Shows a search the provider ran as a completed `web_search_call` item.
    fn web_search_item(&mut self, query: String, out: &mut Vec<StreamEvent>) {
        let id = self.next_id("ws");
        let index = self.open_slot();
        let item = |status: &str| {
            OutputItem::WebSearchCall(WebSearchCallItem {
                id: id.clone(),
                status: status.to_owned(),
                action: serde_json::json!({"type": "search", "query": query}),
            })
        };
        self.push(
            out,
            EventKind::OutputItemAdded {
                output_index: index,
                item: item("in_progress"),
            },
        );
        for kind in [
            EventKind::WebSearchCallInProgress {
                item_id: id.clone(),
                output_index: index,
            },
            EventKind::WebSearchCallSearching {
                item_id: id.clone(),
                output_index: index,
            },
            EventKind::WebSearchCallCompleted {
                item_id: id.clone(),
                output_index: index,
            },
        ] {
            self.push(out, kind);
        }
        self.done(index, item("completed"), out);
    }

    /// The response as it stands before its end (status `in_progress`, no output yet shown).
    pub fn snapshot(&self) -> Response {
        self.response.clone()
    }

    /// True while the upstream has reported no usage.
    pub fn needs_usage(&self) -> bool {
        self.usage.is_none()
    }

    /// Everything the model produced so far, as text (answers, reasoning, call names and
    /// arguments), for estimating output tokens.
    pub fn produced_text(&self) -> String {
        let mut text = String::new();
        for item in self.slots.iter().flatten() {
            match item {
                OutputItem::Message(m) => {
                    for part in &m.content {
                        match part {
                            OutputContent::OutputText { text: t, .. } => text.push_str(t),
                            OutputContent::Refusal { refusal } => text.push_str(refusal),
                        }
                    }
                }
                OutputItem::Reasoning(r) => {
                    for c in r.content.iter().flatten() {
                        text.push_str(&c.text);
                    }
                    for s in &r.summary {
                        text.push_str(&s.text);
                    }
                }
                other => text.push_str(&serde_json::to_string(other).unwrap_or_default()),
            }
        }
        match &self.current {
            Open::None => {}
            Open::Reasoning { text: t, .. } => text.push_str(t),
            Open::Message { parts, .. } => {
                for p in parts {
                    text.push_str(&p.text);
                }
            }
        }
        for call in &self.calls {
            text.push_str(call.name.as_deref().unwrap_or_default());
            text.push_str(&call.arguments);
        }
        text
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
            UpstreamEvent::ReasoningSignature(sig) => {
                // Only reasoning with text can be replayed; a signature alone is dropped.
                if let Open::Reasoning { signature, .. } = &mut self.current {
                    self.round.reasoning_signature = Some(sig.clone());
                    *signature = Some(sig);
                }
            }
            UpstreamEvent::ToolCall(delta) => self.tool_call(delta, out),
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
        }
    }

    /// Ends the response normally: closes every open item and emits the terminal event
    /// (`completed`, `incomplete` or `failed`, from the finish reason and the output contract).
    pub fn finish(mut self, completed_at: i64, out: &mut Vec<StreamEvent>) -> Response {
        if matches!(
            self.finish,
            Some(FinishReason::Length | FinishReason::ContentFilter)
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
    /// with reason [`codes::UPSTREAM_TRUNCATED`], its text kept and marked incomplete, so a client
    /// knows it is partial. A tool call whose arguments are not whole JSON was cut off, and a
    /// client would run it: the response fails instead and no call is completed. `tolerated` is a
    /// profile's opt-out for a provider known to end every answer that way: it completes, with a
    /// diagnostic. Nothing produced is `empty_upstream_response` either way.
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
                self.forced_incomplete = Some(codes::UPSTREAM_TRUNCATED.to_owned());
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

    /// Ends the response with a failure: open items are not completed (a client must never act on
    /// a partial item), completed ones stay in the output.
    pub fn fail(
        mut self,
        code: &str,
        message: String,
        completed_at: i64,
        out: &mut Vec<StreamEvent>,
    ) -> Response {
        self.current = Open::None;
        self.calls.clear();
        let error = ResponseError {
            code: code.to_owned(),
            message,
        };
        self.terminate(ResponseStatus::Failed, Some(error), None, completed_at, out)
    }

    fn outcome(
        &self,
    ) -> (
        ResponseStatus,
        Option<ResponseError>,
        Option<IncompleteDetails>,
    ) {
        let failed = |code: &str, message: String| {
            (
                ResponseStatus::Failed,
                Some(ResponseError {
                    code: code.to_owned(),
                    message,
                }),
                None,
            )
        };
        let incomplete = |reason: &str| {
            (
                ResponseStatus::Incomplete,
                None,
                Some(IncompleteDetails {
                    reason: reason.to_owned(),
                }),
            )
        };
        if let Some(reason) = &self.forced_incomplete {
            return incomplete(reason);
        }
        match &self.finish {
            Some(FinishReason::Length) => return incomplete("max_output_tokens"),
            Some(FinishReason::ContentFilter) => return incomplete("content_filter"),
            Some(FinishReason::ContextLength) => {
                return failed(
                    codes::CONTEXT_LENGTH_EXCEEDED,
                    "the conversation does not fit the model's context window".to_owned(),
                );
            }
            Some(FinishReason::Error { code, message }) => return failed(code, message.clone()),
            Some(FinishReason::Stop | FinishReason::ToolCalls) | None => {}
        }
        if !self.saw_output {
            return failed(
                codes::EMPTY_RESPONSE,
                "the upstream finished without producing any output".to_owned(),
            );
        }
        if let OutputContract::JsonSchema(contract) = &self.contract {
            let has_calls = self.slots.iter().flatten().any(OutputItem::is_tool_call);
            if contract.strict && !has_calls {
                let text = self.final_text();
                if let Err(message) = contract.check(&text) {
                    return failed(codes::OUTPUT_VALIDATION_FAILED, message);
                }
            }
        }
        (ResponseStatus::Completed, None, None)
    }

    /// The concatenated text of every output message.
    fn final_text(&self) -> String {
        let mut text = String::new();
        for item in self.slots.iter().flatten() {
            if let OutputItem::Message(m) = item {
                for part in &m.content {
                    if let OutputContent::OutputText { text: t, .. } = part {
                        text.push_str(t);
                    }
                }
            }
        }
        text
    }

    fn terminate(
        mut self,
        status: ResponseStatus,
        error: Option<ResponseError>,
        incomplete: Option<IncompleteDetails>,
        completed_at: i64,
        out: &mut Vec<StreamEvent>,
    ) -> Response {
        let mut response = std::mem::replace(&mut self.response, empty_response());
        response.status = status;
        response.error = error;
        response.incomplete_details = incomplete;
        response.completed_at = (status == ResponseStatus::Completed).then_some(completed_at);
        response.output = std::mem::take(&mut self.slots)
            .into_iter()
            .flatten()
            .collect();
        response.usage = self.usage.take();
        let snapshot = Box::new(response.clone());
        let kind = match status {
            ResponseStatus::Completed => EventKind::Completed { response: snapshot },
            ResponseStatus::Incomplete => EventKind::Incomplete { response: snapshot },
            _ => EventKind::Failed { response: snapshot },
        };
        self.push(out, kind);
        response
    }

    fn push(&mut self, out: &mut Vec<StreamEvent>, kind: EventKind) {
        out.push(StreamEvent {
            kind,
            sequence_number: self.seq,
        });
        self.seq += 1;
    }

    /// `encrypted_content` for reasoning text, when the request asked for it.
    fn seal(&mut self, text: &str) -> Option<String> {
        if !self.reasoning_display.encrypted {
            return None;
        }
        let sealed = self.sealer.as_ref().and_then(|s| s.seal(text));
        if sealed.is_none() {
            self.add_diagnostic(diag(
                REASONING_NOT_SEALED,
                Some("include"),
                "the reasoning could not be sealed into encrypted_content (too large, or no key)",
            ));
        }
        sealed
    }

    fn next_id(&mut self, prefix: &str) -> String {
        self.item_counter += 1;
        let base = self
            .response
            .id
            .strip_prefix("resp_")
            .unwrap_or(&self.response.id);
        format!("{prefix}_{base}{:03}", self.item_counter)
    }

    fn open_slot(&mut self) -> usize {
        self.slots.push(None);
        self.slots.len() - 1
    }

    fn text(&mut self, delta: String, refusal: bool, out: &mut Vec<StreamEvent>) {
        if delta.is_empty() {
            return;
        }
        if !refusal {
            self.round
                .text
                .get_or_insert_with(String::new)
                .push_str(&delta);
        }
        self.saw_output = true;
        if !matches!(self.current, Open::Message { .. }) {
            self.close_current(out);
            let index = self.open_slot();
            let id = self.next_id("msg");
            self.push(
                out,
                EventKind::OutputItemAdded {
                    output_index: index,
                    item: OutputItem::Message(OutputMessage {
                        id: id.clone(),
                        status: "in_progress".to_owned(),
                        role: "assistant".to_owned(),
                        content: Vec::new(),
                    }),
                },
            );
            self.current = Open::Message {
                index,
                id,
                parts: Vec::new(),
            };
        }
        let Open::Message { index, id, parts } = &mut self.current else {
            return;
        };
        let (index, id) = (*index, id.clone());
        let need_new_part = parts.last().is_none_or(|p| p.refusal != refusal);
        let mut events = Vec::with_capacity(3);
        if need_new_part {
            if let Some(last) = parts.last() {
                events.extend(part_done_events(&id, index, parts.len() - 1, last));
            }
            parts.push(Part {
                refusal,
                text: String::new(),
            });
            events.push(EventKind::ContentPartAdded {
                item_id: id.clone(),
                output_index: index,
                content_index: parts.len() - 1,
                part: content_of(refusal, String::new()),
            });
        }
        let content_index = parts.len() - 1;
        if let Some(part) = parts.last_mut() {
            part.text.push_str(&delta);
        }
        events.push(if refusal {
            EventKind::RefusalDelta {
                item_id: id,
                output_index: index,
                content_index,
                delta,
            }
        } else {
            EventKind::OutputTextDelta {
                item_id: id,
                output_index: index,
                content_index,
                delta,
                logprobs: Vec::new(),
            }
        });
        for kind in events {
            self.push(out, kind);
        }
    }

    fn reasoning(&mut self, delta: String, out: &mut Vec<StreamEvent>) {
        if delta.is_empty() {
            return;
        }
        self.round
            .reasoning
            .get_or_insert_with(String::new)
            .push_str(&delta);
        self.saw_output = true;
        if !matches!(self.current, Open::Reasoning { .. }) {
            self.close_current(out);
            let index = self.open_slot();
            let id = self.next_id("rs");
            let summary = self.reasoning_display.summary;
            self.push(
                out,
                EventKind::OutputItemAdded {
                    output_index: index,
                    item: OutputItem::Reasoning(ReasoningItem {
                        id: Some(id.clone()),
                        summary: Vec::new(),
                        content: (!summary).then(Vec::new),
                        encrypted_content: None,
                        status: None,
                    }),
                },
            );
            if summary {
                self.push(
                    out,
                    EventKind::ReasoningSummaryPartAdded {
                        item_id: id.clone(),
                        output_index: index,
                        summary_index: 0,
                        part: SummaryPart::summary_text(String::new()),
                    },
                );
            }
            self.current = Open::Reasoning {
                index,
                id,
                text: String::new(),
                signature: None,
            };
        }
        let summary = self.reasoning_display.summary;
        let Open::Reasoning {
            index, id, text, ..
        } = &mut self.current
        else {
            return;
        };
        text.push_str(&delta);
        let kind = if summary {
            EventKind::ReasoningSummaryTextDelta {
                item_id: id.clone(),
                output_index: *index,
                summary_index: 0,
                delta,
            }
        } else {
            EventKind::ReasoningTextDelta {
                item_id: id.clone(),
                output_index: *index,
                content_index: 0,
                delta,
            }
        };
        self.push(out, kind);
    }

    fn tool_call(&mut self, delta: ToolCallDelta, out: &mut Vec<StreamEvent>) {
        self.close_current(out);
        let position = match (delta.index, &delta.id) {
            (Some(i), _) => self.calls.iter().position(|c| c.key_index == Some(i)),
            (None, Some(id)) => self
                .calls
                .iter()
                .position(|c| c.call_id.as_deref() == Some(id.as_str())),
            // Neither index nor id: a continuation of the latest call.
            (None, None) => self.calls.len().checked_sub(1),
        };
        let position = match position {
            Some(p) => p,
            None => {
                let item_id = self.next_id("fc");
                self.calls.push(CallState {
                    key_index: delta.index,
                    output_index: None,
                    item_id,
                    call_id: None,
                    name: None,
                    arguments: String::new(),
                    repaired: None,
                });
                self.calls.len() - 1
            }
        };
        let mut events = Vec::with_capacity(2);
        let mut new_slot = false;
        // With repair on, a call is announced only once complete and checked.
        let hold = self.repair.is_some();
        if let Some(call) = self.calls.get_mut(position) {
            if call.call_id.is_none() {
                call.call_id = delta.id.filter(|id| !id.is_empty());
            }
            if call.name.is_none() {
                call.name = delta.name.filter(|n| !n.is_empty());
            }
            call.arguments.push_str(&delta.arguments);
            match call.output_index {
                Some(index) => {
                    if !delta.arguments.is_empty() {
                        events.push(EventKind::FunctionCallArgumentsDelta {
                            item_id: call.item_id.clone(),
                            output_index: index,
                            delta: delta.arguments,
                        });
                    }
                }
                // The item is announced once its name and its id are known: a client keys on
                // both, and a provider's id may come after the first arguments (they are held
                // until then). A call that never gets an id is announced when the upstream ends,
                // with a generated one. Only function calls stream.
                None => {
                    new_slot = !hold
                        && call.name.as_deref().is_some_and(|n| {
                            streams_as_function(&self.names, n)
                                && !self.echo_tools.iter().any(|e| e == n)
                        })
                        && call.call_id.is_some()
                }
            }
        }
        if new_slot {
            let index = self.open_slot();
            if let Some(call) = self.calls.get_mut(position) {
                call.output_index = Some(index);
                if call.call_id.is_none() {
                    call.call_id = Some(format!("call_{}", call.item_id));
                }
                let (namespace, name) =
                    function_name(&self.names, call.name.as_deref().unwrap_or_default());
                events.push(EventKind::OutputItemAdded {
                    output_index: index,
                    item: OutputItem::FunctionCall(FunctionCallItem {
                        id: Some(call.item_id.clone()),
                        call_id: call.call_id.clone().unwrap_or_default(),
                        name,
                        namespace,
                        arguments: String::new(),
                        status: Some("in_progress".to_owned()),
                    }),
                });
                if !call.arguments.is_empty() {
                    events.push(EventKind::FunctionCallArgumentsDelta {
                        item_id: call.item_id.clone(),
                        output_index: index,
                        delta: call.arguments.clone(),
                    });
                }
            }
        }
        self.saw_output = true;
        for kind in events {
            self.push(out, kind);
        }
    }

    fn close_current(&mut self, out: &mut Vec<StreamEvent>) {
        match std::mem::replace(&mut self.current, Open::None) {
            Open::None => {}
            Open::Reasoning {
                index,
                id,
                text,
                signature,
            } => {
                let encrypted_content = self.seal(&crate::reasoning::sealed_plaintext(
                    &text,
                    signature.as_deref(),
                ));
                let item = if self.reasoning_display.summary {
                    let part = SummaryPart::summary_text(text.clone());
                    self.push(
                        out,
                        EventKind::ReasoningSummaryTextDone {
                            item_id: id.clone(),
                            output_index: index,
                            summary_index: 0,
                            text,
                        },
                    );
                    self.push(
                        out,
                        EventKind::ReasoningSummaryPartDone {
                            item_id: id.clone(),
                            output_index: index,
                            summary_index: 0,
                            part: part.clone(),
                        },
                    );
                    ReasoningItem {
                        id: Some(id),
                        summary: vec![part],
                        content: None,
                        encrypted_content,
                        status: None,
                    }
                } else {
                    self.push(
                        out,
                        EventKind::ReasoningTextDone {
                            item_id: id.clone(),
                            output_index: index,
                            content_index: 0,
                            text: text.clone(),
                        },
                    );
                    ReasoningItem {
                        id: Some(id),
                        summary: Vec::new(),
                        content: Some(vec![ReasoningContent::reasoning_text(text)]),
                        encrypted_content,
                        status: None,
                    }
                };
                self.done(index, OutputItem::Reasoning(item), out);
            }
            Open::Message { index, id, parts } => {
                if let Some(last) = parts.last() {
                    for kind in part_done_events(&id, index, parts.len() - 1, last) {
                        self.push(out, kind);
                    }
                }
                let content = parts
                    .into_iter()
                    .map(|p| content_of(p.refusal, p.text))
                    .collect();
                let item = OutputItem::Message(OutputMessage {
                    id,
                    status: self.message_status.to_owned(),
                    role: "assistant".to_owned(),
                    content,
                });
                self.done(index, item, out);
            }
        }
    }

    fn close_calls(&mut self, out: &mut Vec<StreamEvent>) {
        let calls = std::mem::take(&mut self.calls);
        for mut call in calls {
            if let Some(name) = call.name.as_deref()
                && self.echo_tools.iter().any(|e| e == name)
            {
                // A provider builtin next to client calls cannot be echoed in this turn.
                self.add_diagnostic(diag(
                    CALL_NOT_RESTORED,
                    None,
                    format!("the provider's builtin `{name}` was called beside client tools; it was left out"),
                ));
                continue;
            }
            let Some(called) = call.name.clone() else {
                self.add_diagnostic(diag(
                    CHUNK_SKIPPED,
                    None,
                    "the upstream sent a tool call without a name; it was left out",
                ));
                continue;
            };
            let repaired = match (call.repaired.take(), &self.repair) {
                (Some(repaired), _) => Some(repaired),
                (None, Some(schemas)) => {
                    Some(schemas.restore_repaired(&self.names, &called, &call.arguments))
                }
                (None, None) => None,
            };
            // The provider name the call was restored under (a mapped name when repaired).
            let (restored, provider_name) = match repaired {
                Some(repaired) => {
                    for d in repaired.diagnostics {
                        self.add_diagnostic(d);
                    }
                    let name = match repaired.name {
                        Some(NameMatch::Mapped { name, .. }) => name,
                        _ => called,
                    };
                    (repaired.call, name)
                }
                None => {
                    let (restored, diagnostic) = restore(&self.names, &called, &call.arguments);
                    if let Some(d) = diagnostic {
                        self.add_diagnostic(d);
                    }
                    (restored, called)
                }
            };
            let provider_name = provider_name.as_str();
            let call_id = call.id();
            if let CallKind::Gateway { name, .. } = &restored {
                // Held for the gateway, which did not run it (its loop stopped first).
                self.add_diagnostic(diag(
                    CALL_NOT_RESTORED,
                    None,
                    format!("the gateway tool `{name}` was called after the tool loop stopped; the call was not run"),
                ));
                continue;
            }
            match restored {
                CallKind::Function {
                    namespace,
                    name,
                    arguments,
                } => {
                    let item = FunctionCallItem {
                        id: Some(call.item_id.clone()),
                        call_id,
                        name,
                        namespace,
                        arguments: String::new(),
                        status: Some("in_progress".to_owned()),
                    };
                    let index = match call.output_index {
                        Some(index) => index,
                        None => {
                            // Announced only now: a name with neither id nor arguments, or a
                            // built-in call whose arguments did not fit and fell back.
                            let index = self.open_slot();
                            self.push(
                                out,
                                EventKind::OutputItemAdded {
                                    output_index: index,
                                    item: OutputItem::FunctionCall(item.clone()),
                                },
                            );
                            if !arguments.is_empty() {
                                self.push(
                                    out,
                                    EventKind::FunctionCallArgumentsDelta {
                                        item_id: call.item_id.clone(),
                                        output_index: index,
                                        delta: arguments.clone(),
                                    },
                                );
                            }
                            index
                        }
                    };
                    self.push(
                        out,
                        EventKind::FunctionCallArgumentsDone {
                            item_id: call.item_id.clone(),
                            output_index: index,
                            name: item.name.clone(),
                            arguments: arguments.clone(),
                        },
                    );
                    let item = FunctionCallItem {
                        arguments,
                        status: Some("completed".to_owned()),
                        ..item
                    };
                    self.done(index, OutputItem::FunctionCall(item), out);
                }
                CallKind::Custom {
                    namespace,
                    name,
                    input,
                } => {
                    let index = self.open_slot();
                    // Announced only now, so it can carry the id prefix of its real type.
                    let item_id = self.next_id("ctc");
                    let call = CallState { item_id, ..call };
                    let item = CustomToolCallItem {
                        id: Some(call.item_id.clone()),
                        call_id,
                        name,
                        namespace,
                        input: String::new(),
                        status: Some("in_progress".to_owned()),
                    };
                    self.push(
                        out,
                        EventKind::OutputItemAdded {
                            output_index: index,
                            item: OutputItem::CustomToolCall(item.clone()),
                        },
                    );
                    self.push(
                        out,
                        EventKind::CustomToolCallInputDelta {
                            item_id: call.item_id.clone(),
                            output_index: index,
                            delta: input.clone(),
                        },
                    );
                    self.push(
                        out,
                        EventKind::CustomToolCallInputDone {
                            item_id: call.item_id.clone(),
                            output_index: index,
                            input: input.clone(),
                        },
                    );
                    let item = CustomToolCallItem {
                        input,
                        status: Some("completed".to_owned()),
                        ..item
                    };
                    self.done(index, OutputItem::CustomToolCall(item), out);
                }
                CallKind::LocalShell { action } | CallKind::Shell { action } => {
                    let local = matches!(
                        self.names.identity(provider_name),
                        Some(crate::plan::Identity::LocalShell)
                    );
                    let make = |status: &str| {
                        let item = ActionCallItem {
                            id: Some(call.item_id.clone()),
                            call_id: call_id.clone(),
                            action: action.clone(),
                            status: Some(status.to_owned()),
                        };
                        if local {
                            OutputItem::LocalShellCall(item)
                        } else {
                            OutputItem::ShellCall(item)
                        }
                    };
                    self.announce_and_finish(make("in_progress"), make("completed"), out);
                }
                CallKind::ApplyPatch { operation } => {
                    let make = |status: &str| {
                        OutputItem::ApplyPatchCall(ApplyPatchCallItem {
                            id: Some(call.item_id.clone()),
                            call_id: call_id.clone(),
                            operation: operation.clone(),
                            status: Some(status.to_owned()),
                        })
                    };
                    self.announce_and_finish(make("in_progress"), make("completed"), out);
                }
                // Left out above.
                CallKind::Gateway { .. } => {}
            }
        }
    }

    fn announce_and_finish(
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

    fn done(&mut self, index: usize, item: OutputItem, out: &mut Vec<StreamEvent>) {
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
}

/// Why a repaired call is still invalid, if it is.
fn invalid_message(repaired: &RepairedCall, called: &str, names: &NameMap) -> Option<String> {
    if let Some(NameMatch::NoConfidentMatch) = repaired.name {
        let mut declared: Vec<&str> = names.provider_names().collect();
        declared.sort_unstable();
        return Some(format!(
            "`{called}` is not a declared tool; the declared tools are: {}.",
            declared.join(", ")
        ));
    }
    match &repaired.outcome {
        Some(Outcome::Invalid { message, .. }) => Some(format!("`{called}`: {message}.")),
        _ => None,
    }
}

fn content_of(refusal: bool, text: String) -> OutputContent {
    if refusal {
        OutputContent::Refusal { refusal: text }
    } else {
        OutputContent::output_text(text)
    }
}

fn part_done_events(id: &str, index: usize, content_index: usize, part: &Part) -> [EventKind; 2] {
    let text_done = if part.refusal {
        EventKind::RefusalDone {
            item_id: id.to_owned(),
            output_index: index,
            content_index,
            refusal: part.text.clone(),
        }
    } else {
        EventKind::OutputTextDone {
            item_id: id.to_owned(),
            output_index: index,
            content_index,
            text: part.text.clone(),
            logprobs: Vec::new(),
        }
    };
    [
        text_done,
        EventKind::ContentPartDone {
            item_id: id.to_owned(),
            output_index: index,
            content_index,
            part: content_of(part.refusal, part.text.clone()),
        },
    ]
}

fn empty_response() -> Response {
    skeleton(
        &CreateResponse::default(),
        &ResponseMeta {
            id: String::new(),
            created_at: 0,
            stored: false,
        },
    )
}

#[cfg(test)]
mod tests;

/// The item of a hosted call, with its result once it has one.
fn hosted_item(
    slot: &HostedSlot,
    status: &str,
    result: Option<Result<String, String>>,
) -> OutputItem {
    match &slot.hosted {
        Hosted::Mcp {
            server_label,
            name,
            arguments,
        } => {
            let (output, error) = match result {
                Some(Ok(output)) => (Some(output), None),
                Some(Err(error)) => (None, Some(error)),
                None => (None, None),
            };
            OutputItem::McpCall(toolbridge_wire::responses::McpCallItem {
                id: slot.id.clone(),
                server_label: server_label.clone(),
                name: name.clone(),
                arguments: arguments.clone(),
                output,
                error,
                status: Some(status.to_owned()),
                approval_request_id: None,
            })
        }
        Hosted::WebSearch { query } => OutputItem::WebSearchCall(WebSearchCallItem {
            id: slot.id.clone(),
            status: status.to_owned(),
            action: serde_json::json!({"type": "search", "query": query}),
        }),
    }
}

/// Two rounds' usage added up.
fn add_usage(a: &Usage, b: &Usage) -> Usage {
    let mut sum = b.clone();
    sum.input_tokens += a.input_tokens;
    sum.output_tokens += a.output_tokens;
    sum.total_tokens += a.total_tokens;
    sum.input_tokens_details.cached_tokens += a.input_tokens_details.cached_tokens;
    sum.input_tokens_details.cache_write_tokens += a.input_tokens_details.cache_write_tokens;
    sum.output_tokens_details.reasoning_tokens += a.output_tokens_details.reasoning_tokens;
    sum
}
