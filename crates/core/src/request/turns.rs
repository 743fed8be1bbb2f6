//! The reduction of input items to [`Turn`]s, with the checks each item gets (ids, calls paired
//! with their outputs, unknown types dropped with a diagnostic).
//!
//! Not here: the texts of message contents and tool outputs (`content`); the items of tool
//! search and `additional_tools`, whose tools the reducer collects for planning
//! (`turns/search`); the gateway's own `mcp_call` and `image_generation_call` items
//! (`turns/gateway`); the items Codex sends beside the API's own (`turns/codex`).

use std::collections::HashSet;

use serde_json::{Map, Value};
use toolbridge_wire::responses::{
    ApplyPatchCallOutputItem, Diagnostic, FunctionCallItem, InputItem, LocalShellCallOutputItem,
    MessageItem, ReasoningItem,
};

use super::content::{
    marks_cache, output_text, plain_text, shell_output_text, tool_output, user_parts,
};
use crate::Error;
use crate::canonical::{
    AssistantTurn, CallKind, ContextSource, ContextTool, ToolCall, ToolOutput, Turn,
};
use crate::diagnostics::{DUPLICATE_ITEM, ITEM_DROPPED, PARAM_DROPPED, TOOL_OUTPUT_MISSING, diag};

mod codex;
mod gateway;
mod search;

pub use search::found_text;

/// Folds input items into turns: consecutive assistant output (reasoning, messages, calls)
/// becomes one assistant turn, as Chat-style dialects need. It also pairs calls with outputs:
/// a repeated item (a retrying client re-sends items) is kept once, a call without an output gets
/// an empty one (Chat providers reject unanswered calls), and an output without a call is refused.
#[derive(Default)]
pub(super) struct Reducer {
    turns: Vec<Turn>,
    assistant: Option<AssistantTurn>,
    /// Calls of the last flushed assistant turn still waiting for their output.
    pending: Vec<String>,
    calls_seen: HashSet<String>,
    outputs_seen: HashSet<String>,
    ids_seen: HashSet<String>,
    diagnostics: Vec<Diagnostic>,
    /// Tools the conversation declares (`additional_tools`, `tool_search_output`).
    context_tools: Vec<ContextTool>,
    /// The call id of the last `tool_search_call`, for an output that names none.
    last_search: Option<String>,
    /// The user turns after which the client placed an explicit cache breakpoint.
    cache_marks: Vec<usize>,
}

/// What the reducer made of the input items.
pub(super) struct Reduced {
    pub(super) turns: Vec<Turn>,
    pub(super) diagnostics: Vec<Diagnostic>,
    pub(super) context_tools: Vec<ContextTool>,
    /// Indices into `turns` (see [`crate::canonical::CanonicalRequest::cache_marks`]).
    pub(super) cache_marks: Vec<usize>,
}

impl Reducer {
    pub(super) fn item(&mut self, i: usize, item: &InputItem) -> Result<(), Error> {
        match item {
            InputItem::Message(m) => {
                if self.repeated(i, m.id.as_deref()) {
                    return Ok(());
                }
                self.message(i, m)
            }
            InputItem::Reasoning(r) => {
                if !self.repeated(i, r.id.as_deref()) {
                    self.reasoning(r);
                }
                Ok(())
            }
            InputItem::FunctionCall(c) => self.function_call(i, c),
            InputItem::CustomToolCall(c) => self.call(
                i,
                &c.call_id,
                CallKind::Custom {
                    namespace: c.namespace.clone(),
                    name: c.name.clone(),
                    input: c.input.clone(),
                },
            ),
            InputItem::LocalShellCall(c) => self.call(
                i,
                &c.call_id,
                CallKind::LocalShell {
                    action: c.action.clone(),
                },
            ),
            InputItem::ShellCall(c) => self.call(
                i,
                &c.call_id,
                CallKind::Shell {
                    action: c.action.clone(),
                },
            ),
            InputItem::ApplyPatchCall(c) => self.call(
                i,
                &c.call_id,
                CallKind::ApplyPatch {
                    operation: c.operation.clone(),
                },
            ),
            InputItem::FunctionCallOutput(o) | InputItem::CustomToolCallOutput(o) => {
                let output = tool_output(i, &o.output, &mut self.diagnostics)?;
                self.output(i, &o.call_id, output)
            }
            InputItem::ShellCallOutput(o) => {
                let output = shell_output_text(&o.output);
                self.output(i, &o.call_id, output.into())
            }
            InputItem::LocalShellCallOutput(o) => self.local_shell_output(i, o),
            InputItem::ApplyPatchCallOutput(o) => self.apply_patch_output(i, o),
            // A call the gateway ran comes back as the call and its result, so the provider
            // sees the exchange it had.
            InputItem::McpCall(c) => self.mcp_call(i, c),
            // Approvals are the gateway's own exchange: it turns an answered request into an
            // `mcp_call` before normalising; what is left was never answered (or the gateway
            // runs no tools here).
            InputItem::McpApprovalRequest(_) | InputItem::McpApprovalResponse(_) => {
                self.unanswered_approval(i);
                Ok(())
            }
            InputItem::ToolSearchCall(c) => self.tool_search_call(i, c),
            InputItem::ToolSearchOutput(o) => self.tool_search_output(i, o),
            InputItem::AdditionalTools(a) => {
                self.lift(i, &a.tools, ContextSource::Additional);
                Ok(())
            }
            InputItem::Other(map) => {
                self.untyped(i, map);
                Ok(())
            }
        }
    }

    /// A `function_call` as a call; its encrypted arguments, which only OpenAI reads, are left
    /// out with a diagnostic.
    fn function_call(&mut self, i: usize, c: &FunctionCallItem) -> Result<(), Error> {
        if c.encrypted_function_args.is_some() {
            self.diagnostics.push(diag(
                PARAM_DROPPED,
                Some(&format!("input[{i}].encrypted_function_args")),
                "encrypted function arguments are readable by OpenAI only; the call was sent with its plain `arguments`",
            ));
        }
        self.call(
            i,
            &c.call_id,
            CallKind::Function {
                namespace: c.namespace.clone(),
                name: c.name.clone(),
                arguments: c.arguments.clone(),
            },
        )
    }

    /// A `local_shell_call_output` as the output of the call its `call_id` (else its `id`) names.
    fn local_shell_output(&mut self, i: usize, o: &LocalShellCallOutputItem) -> Result<(), Error> {
        let Some(call_id) = o.call_id.as_deref().or(o.id.as_deref()) else {
            return Err(Error::MissingParameter {
                param: format!("input[{i}].call_id"),
            });
        };
        let output = output_text(i, &o.output)?;
        self.output(i, call_id, output.into())
    }

    /// An `apply_patch_call_output` as its status, then its text when it has one.
    fn apply_patch_output(&mut self, i: usize, o: &ApplyPatchCallOutputItem) -> Result<(), Error> {
        let status = o.status.as_deref().unwrap_or("completed");
        let output = match &o.output {
            Some(v) => format!("{status}: {}", output_text(i, v)?),
            None => status.to_owned(),
        };
        self.output(i, &o.call_id, output.into())
    }

    /// An MCP approval item the gateway did not turn into an `mcp_call`: left out, with a
    /// diagnostic.
    fn unanswered_approval(&mut self, i: usize) {
        self.diagnostics.push(diag(
            ITEM_DROPPED,
            Some(&format!("input[{i}]")),
            "an MCP approval item without its counterpart (or with no gateway tools to run it) was left out",
        ));
    }

    /// An item of a type the wire types do not name, taken by its `type`.
    fn untyped(&mut self, i: usize, map: &Map<String, Value>) {
        let kind = map.get("type").and_then(Value::as_str).unwrap_or("unknown");
        match kind {
            "image_generation_call" => self.image_call(i, map),
            "agent_message" => self.agent_message(map),
            "configuration_update" => self.configuration_update(map),
            _ => self.other(i, kind),
        }
    }

    /// An item of a type with no representation upstream: left out, with a diagnostic.
    fn other(&mut self, i: usize, kind: &str) {
        // A server's tool listing is made again by whoever serves the `mcp` tool on each
        // request; nothing in it is the conversation's.
        if kind == "mcp_list_tools" {
            return;
        }
        let message = match kind {
            // The compact stage opened every one this gateway sealed.
            "compaction" | "context_compaction" => format!(
                "a `{kind}` item this gateway did not seal (or one altered) cannot be read by this provider and was left out"
            ),
            _ => {
                format!("input item type `{kind}` has no representation upstream and was left out")
            }
        };
        self.diagnostics
            .push(diag(ITEM_DROPPED, Some(&format!("input[{i}]")), message));
    }

    /// True (with a diagnostic) when an item with this id was already taken.
    fn repeated(&mut self, i: usize, id: Option<&str>) -> bool {
        let Some(id) = id.filter(|id| !id.is_empty()) else {
            return false;
        };
        if self.ids_seen.insert(id.to_owned()) {
            return false;
        }
        self.diagnostics.push(diag(
            DUPLICATE_ITEM,
            Some(&format!("input[{i}]")),
            format!("item `{id}` appears more than once; it was sent once"),
        ));
        true
    }

    fn message(&mut self, i: usize, m: &MessageItem) -> Result<(), Error> {
        match m.role.as_str() {
            "system" | "developer" => {
                let text = plain_text(i, &m.content)?;
                self.other_turn(Turn::System {
                    text,
                    developer: m.role == "developer",
                });
            }
            "user" => {
                let parts = user_parts(i, &m.content, &mut self.diagnostics)?;
                self.other_turn(Turn::User { parts });
                if marks_cache(&m.content) {
                    self.cache_marks.push(self.turns.len() - 1);
                }
            }
            "assistant" => {
                let text = plain_text(i, &m.content)?;
                let turn = self.assistant_turn();
                match &mut turn.text {
                    Some(existing) => existing.push_str(&text),
                    None => turn.text = Some(text),
                }
            }
            other => {
                return Err(Error::invalid(
                    format!("input[{i}].role"),
                    format!("`{other}` is not one of `user`, `assistant`, `system`, `developer`"),
                ));
            }
        }
        Ok(())
    }

    fn call(&mut self, i: usize, call_id: &str, kind: CallKind) -> Result<(), Error> {
        if call_id.is_empty() {
            return Err(Error::invalid(
                format!("input[{i}].call_id"),
                "must not be empty",
            ));
        }
        // A retrying client may send the same call twice; the provider must see it once.
        if !self.calls_seen.insert(call_id.to_owned()) {
            self.diagnostics.push(diag(
                DUPLICATE_ITEM,
                Some(&format!("input[{i}]")),
                format!("call `{call_id}` appears more than once; it was sent once"),
            ));
            return Ok(());
        }
        self.assistant_turn().tool_calls.push(ToolCall {
            call_id: call_id.to_owned(),
            kind,
        });
        Ok(())
    }

    fn output(&mut self, i: usize, call_id: &str, output: ToolOutput) -> Result<(), Error> {
        if call_id.is_empty() {
            return Err(Error::invalid(
                format!("input[{i}].call_id"),
                "must not be empty",
            ));
        }
        if !self.calls_seen.contains(call_id) {
            return Err(Error::UnpairedToolOutput {
                param: format!("input[{i}].call_id"),
                message: format!("no earlier item is a call with call_id `{call_id}`"),
            });
        }
        if !self.outputs_seen.insert(call_id.to_owned()) {
            self.diagnostics.push(diag(
                DUPLICATE_ITEM,
                Some(&format!("input[{i}]")),
                format!("the output of `{call_id}` appears more than once; it was sent once"),
            ));
            return Ok(());
        }
        self.flush();
        self.pending.retain(|p| p != call_id);
        self.turns.push(Turn::ToolResult {
            call_id: call_id.to_owned(),
            output,
        });
        Ok(())
    }

    fn reasoning(&mut self, r: &ReasoningItem) {
        let mut text: String = r
            .content
            .iter()
            .flatten()
            .map(|c| c.text.as_str())
            .collect::<Vec<_>>()
            .join("");
        // The blob is opened even when the text is plain: it may carry the provider's signature.
        if let Some(blob) = r.encrypted_content.as_ref().filter(|b| !b.is_empty()) {
            self.assistant_turn().sealed_reasoning.push(blob.clone());
        }
        if text.is_empty() {
            if r.encrypted_content.as_ref().is_some_and(|b| !b.is_empty()) {
                return;
            }
            // Our summaries are the provider's reasoning itself, so they can be replayed.
            text = r
                .summary
                .iter()
                .map(|s| s.text.as_str())
                .collect::<Vec<_>>()
                .join("");
        }
        if text.is_empty() {
            return;
        }
        let turn = self.assistant_turn();
        match &mut turn.reasoning {
            Some(existing) => existing.push_str(&text),
            None => turn.reasoning = Some(text),
        }
    }

    /// The open assistant turn; starting one closes the previous turn's unanswered calls.
    fn assistant_turn(&mut self) -> &mut AssistantTurn {
        if self.assistant.is_none() {
            self.answer_pending();
        }
        self.assistant.get_or_insert_with(AssistantTurn::default)
    }

    fn other_turn(&mut self, turn: Turn) {
        self.flush();
        self.answer_pending();
        self.turns.push(turn);
    }

    fn flush(&mut self) {
        if let Some(turn) = self.assistant.take() {
            self.pending = turn.tool_calls.iter().map(|c| c.call_id.clone()).collect();
            self.turns.push(Turn::Assistant(turn));
        }
    }

    fn answer_pending(&mut self) {
        for call_id in std::mem::take(&mut self.pending) {
            self.diagnostics.push(diag(
                TOOL_OUTPUT_MISSING,
                Some("input"),
                format!(
                    "call `{call_id}` has no output in the input; an empty output was sent for it"
                ),
            ));
            self.outputs_seen.insert(call_id.clone());
            self.turns.push(Turn::ToolResult {
                call_id,
                output: ToolOutput::Text(String::new()),
            });
        }
    }

    pub(super) fn finish(mut self) -> Reduced {
        self.flush();
        self.answer_pending();
        Reduced {
            turns: self.turns,
            diagnostics: self.diagnostics,
            context_tools: self.context_tools,
            cache_marks: self.cache_marks,
        }
    }
}
