//! What the gateway's loops use between upstream rounds of one response: echoed provider
//! builtins, calls the gateway runs itself, the repair review and the hidden re-ask, the
//! cut-off check, carrying usage into the next round and the gateway's forced stop.
//!
//! These methods are public for the gateway's round policy today; a round driver will absorb
//! them. What to do with a round (run, echo, re-ask, stop) is the caller's policy, not decided
//! here.

use std::sync::Arc;

use serde_json::Value;
use toolbridge_wire::responses::StreamEvent;

use super::calls::CallState;
use super::machine::Assembler;
use crate::canonical::{AssistantTurn, ToolCall};
use crate::diagnostics::{TOOL_CALL_REASKED, diag};
use crate::plan::{Identity, NameMap};
use crate::repair::{NameMatch, Outcome, RepairedCall};
use crate::restore::restore;

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
    /// The name the provider called it by (the plan's provider name).
    pub provider_name: String,
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
    /// Redacted reasoning of the round (Anthropic's `redacted_thinking`), replayed unchanged.
    pub reasoning_redacted: Vec<String>,
}

impl Assembler {
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
            c.name
                .as_deref()
                .is_some_and(|n| matches!(names.identity(n), Some(Identity::Gateway { .. })))
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
                let Some(Identity::Gateway { server, name }) =
                    self.names.identity(&provider_name).cloned()
                else {
                    return None;
                };
                Some(GatewayCall {
                    call_id: call
                        .call_id
                        .unwrap_or_else(|| format!("call_{}", call.item_id)),
                    provider_name,
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
                redacted_reasoning: round.reasoning_redacted,
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
        // The next round's upstream numbers its items from 0 again.
        self.relayed.clear();
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
