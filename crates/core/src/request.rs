//! Normalising a Responses request: validation with field paths, and the reduction of items to
//! [`Turn`]s.
//!
//! What is refused here is refused for every provider (a missing model, an unknown role, a
//! malformed item, a function's `parameters` that is not an object schema: `request/parameters.rs`).
//! What one provider cannot take is the dialect translator's business.

mod parameters;

use std::collections::HashSet;

use serde_json::Value;
use toolbridge_wire::responses::{
    ContentPart, CreateResponse, Diagnostic, Input, InputItem, MessageContent, MessageItem,
    ReasoningItem, Stop, TextFormat,
};

use crate::Error;
use crate::canonical::{
    AssistantTurn, CallKind, CanonicalRequest, Params, ToolCall, Turn, UserPart,
};
use crate::contract::{OutputContract, SchemaContract};
use crate::diagnostics::{DUPLICATE_ITEM, ITEM_DROPPED, TOOL_OUTPUT_MISSING, diag};

/// Limits on what one request may contain.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_input_items: usize,
    pub max_tools: usize,
    pub max_stop_sequences: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_input_items: 10_000,
            max_tools: 512,
            max_stop_sequences: 16,
        }
    }
}

/// Validates `req` and reduces it to a [`CanonicalRequest`].
pub fn normalize(req: &CreateResponse, limits: &Limits) -> Result<CanonicalRequest, Error> {
    let model = match req.model.as_deref() {
        None => {
            return Err(Error::MissingParameter {
                param: "model".into(),
            });
        }
        Some("") => return Err(Error::invalid("model", "must not be empty")),
        Some(m) => m.to_owned(),
    };
    let mut diagnostics = Vec::new();
    let mut turns = Vec::new();
    if let Some(instructions) = &req.instructions
        && !instructions.is_empty()
    {
        turns.push(Turn::System {
            text: instructions.clone(),
            developer: false,
        });
    }
    match &req.input {
        None => {
            return Err(Error::MissingParameter {
                param: "input".into(),
            });
        }
        Some(Input::Text(text)) => turns.push(Turn::User {
            parts: vec![UserPart::Text(text.clone())],
        }),
        Some(Input::Items(items)) => {
            if items.len() > limits.max_input_items {
                return Err(Error::invalid(
                    "input",
                    format!(
                        "{} items is more than the limit of {}",
                        items.len(),
                        limits.max_input_items
                    ),
                ));
            }
            let mut reducer = Reducer::default();
            for (i, item) in items.iter().enumerate() {
                reducer.item(i, item)?;
            }
            let (reduced, found) = reducer.finish();
            turns.extend(reduced);
            diagnostics.extend(found);
        }
    }
    if !turns.iter().any(|t| !matches!(t, Turn::System { .. })) {
        return Err(Error::invalid(
            "input",
            "must contain at least one user, assistant or tool item",
        ));
    }

    let tools = req.tools.clone().unwrap_or_default();
    if tools.len() > limits.max_tools {
        return Err(Error::invalid(
            "tools",
            format!(
                "{} tools is more than the limit of {}",
                tools.len(),
                limits.max_tools
            ),
        ));
    }
    parameters::check_tools(&tools)?;
    let params = params(req, limits)?;
    let output = output_contract(req)?;
    Ok(CanonicalRequest {
        model,
        turns,
        tools,
        tool_choice: req.tool_choice.clone(),
        params,
        output,
        stream: req.stream.unwrap_or(false),
        diagnostics,
    })
}

fn params(req: &CreateResponse, limits: &Limits) -> Result<Params, Error> {
    check_range("temperature", req.temperature, 0.0, 2.0)?;
    check_range("top_p", req.top_p, 0.0, 1.0)?;
    check_range("presence_penalty", req.presence_penalty, -2.0, 2.0)?;
    check_range("frequency_penalty", req.frequency_penalty, -2.0, 2.0)?;
    if req.max_output_tokens == Some(0) {
        return Err(Error::invalid("max_output_tokens", "must be at least 1"));
    }
    let stop = match &req.stop {
        None => Vec::new(),
        Some(Stop::One(s)) => vec![s.clone()],
        Some(Stop::Many(v)) => v.clone(),
    };
    if stop.len() > limits.max_stop_sequences {
        return Err(Error::invalid(
            "stop",
            format!(
                "at most {} sequences are allowed",
                limits.max_stop_sequences
            ),
        ));
    }
    Ok(Params {
        temperature: req.temperature,
        top_p: req.top_p,
        presence_penalty: req.presence_penalty,
        frequency_penalty: req.frequency_penalty,
        max_output_tokens: req.max_output_tokens,
        stop,
        end_user: req.safety_identifier.clone().or_else(|| req.user.clone()),
        prompt_cache_key: req.prompt_cache_key.clone(),
        parallel_tool_calls: req.parallel_tool_calls,
        top_logprobs: req.top_logprobs,
        reasoning_effort: req.reasoning.as_ref().and_then(|r| r.effort.clone()),
    })
}

fn check_range(param: &str, value: Option<f64>, min: f64, max: f64) -> Result<(), Error> {
    match value {
        Some(v) if !(min..=max).contains(&v) => Err(Error::invalid(
            param,
            format!("{v} is outside the allowed range [{min}, {max}]"),
        )),
        _ => Ok(()),
    }
}

fn output_contract(req: &CreateResponse) -> Result<OutputContract, Error> {
    let format = req.text.as_ref().and_then(|t| t.format.as_ref());
    Ok(match format {
        None | Some(TextFormat::Text) => OutputContract::Text,
        Some(TextFormat::JsonObject) => OutputContract::JsonObject,
        Some(TextFormat::JsonSchema(f)) => {
            if f.name.is_empty() {
                return Err(Error::invalid("text.format.name", "must not be empty"));
            }
            if !f.schema.is_object() {
                return Err(Error::InvalidSchema {
                    param: "text.format.schema".into(),
                    message: "must be a JSON object".into(),
                });
            }
            OutputContract::JsonSchema(SchemaContract::new(
                f.name.clone(),
                f.description.clone(),
                f.schema.clone(),
                f.strict.unwrap_or(false),
            )?)
        }
    })
}

/// Folds input items into turns: consecutive assistant output (reasoning, messages, calls)
/// becomes one assistant turn, as Chat-style dialects need. It also pairs calls with outputs:
/// a repeated item (a retrying client re-sends items) is kept once, a call without an output gets
/// an empty one (Chat providers reject unanswered calls), and an output without a call is refused.
#[derive(Default)]
struct Reducer {
    turns: Vec<Turn>,
    assistant: Option<AssistantTurn>,
    /// Calls of the last flushed assistant turn still waiting for their output.
    pending: Vec<String>,
    calls_seen: HashSet<String>,
    outputs_seen: HashSet<String>,
    ids_seen: HashSet<String>,
    diagnostics: Vec<Diagnostic>,
}

impl Reducer {
    fn item(&mut self, i: usize, item: &InputItem) -> Result<(), Error> {
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
            InputItem::FunctionCall(c) => self.call(
                i,
                &c.call_id,
                CallKind::Function {
                    namespace: c.namespace.clone(),
                    name: c.name.clone(),
                    arguments: c.arguments.clone(),
                },
            ),
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
                let output = output_text(i, &o.output)?;
                self.output(i, &o.call_id, output)
            }
            InputItem::ShellCallOutput(o) => {
                let output = shell_output_text(&o.output);
                self.output(i, &o.call_id, output)
            }
            InputItem::LocalShellCallOutput(o) => {
                let Some(call_id) = o.call_id.as_deref().or(o.id.as_deref()) else {
                    return Err(Error::MissingParameter {
                        param: format!("input[{i}].call_id"),
                    });
                };
                let output = output_text(i, &o.output)?;
                self.output(i, call_id, output)
            }
            InputItem::ApplyPatchCallOutput(o) => {
                let status = o.status.as_deref().unwrap_or("completed");
                let output = match &o.output {
                    Some(v) => format!("{status}: {}", output_text(i, v)?),
                    None => status.to_owned(),
                };
                self.output(i, &o.call_id, output)
            }
            // A call the gateway ran comes back as the call and its result, so the provider
            // sees the exchange it had.
            InputItem::McpCall(c) => {
                if self.repeated(i, Some(&c.id)) {
                    return Ok(());
                }
                let call_id = if c.id.is_empty() {
                    format!("mcp_{i}")
                } else {
                    c.id.clone()
                };
                self.call(
                    i,
                    &call_id,
                    CallKind::Gateway {
                        server: c.server_label.clone(),
                        name: c.name.clone(),
                        arguments: c.arguments.clone(),
                    },
                )?;
                let output = match (&c.output, &c.error) {
                    (Some(output), _) => output.clone(),
                    (None, Some(error)) => format!("error: {error}"),
                    (None, None) => String::new(),
                };
                self.output(i, &call_id, output)
            }
            // Approvals are the gateway's own exchange: it turns an answered request into an
            // `mcp_call` before normalising; what is left was never answered (or the gateway
            // runs no tools here).
            InputItem::McpApprovalRequest(_) | InputItem::McpApprovalResponse(_) => {
                self.diagnostics.push(diag(
                    ITEM_DROPPED,
                    Some(&format!("input[{i}]")),
                    "an MCP approval item without its counterpart (or with no gateway tools to run it) was left out",
                ));
                Ok(())
            }
            InputItem::Other(map) => {
                let kind = map.get("type").and_then(Value::as_str).unwrap_or("unknown");
                // A server's tool listing is made again by whoever serves the `mcp` tool on
                // each request; nothing in it is the conversation's.
                if kind == "mcp_list_tools" {
                    return Ok(());
                }
                self.diagnostics.push(diag(
                    ITEM_DROPPED,
                    Some(&format!("input[{i}]")),
                    format!(
                        "input item type `{kind}` has no representation upstream and was left out"
                    ),
                ));
                Ok(())
            }
        }
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
                let parts = user_parts(i, &m.content)?;
                self.other_turn(Turn::User { parts });
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

    fn output(&mut self, i: usize, call_id: &str, output: String) -> Result<(), Error> {
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
                output: String::new(),
            });
        }
    }

    fn finish(mut self) -> (Vec<Turn>, Vec<Diagnostic>) {
        self.flush();
        self.answer_pending();
        (self.turns, self.diagnostics)
    }
}

/// A tool output: a string, or content parts whose text is joined.
fn output_text(i: usize, output: &Value) -> Result<String, Error> {
    match output {
        Value::String(s) => Ok(s.clone()),
        Value::Array(parts) => Ok(text_of_output_parts(parts)),
        Value::Null => Ok(String::new()),
        Value::Object(_) => Ok(output.to_string()),
        other => Err(Error::invalid(
            format!("input[{i}].output"),
            format!("must be a string or a list of content parts, got {other}"),
        )),
    }
}

/// `shell_call_output.output`: a list of `{stdout, stderr, outcome}`, rendered as text.
fn shell_output_text(output: &Value) -> String {
    let Value::Array(runs) = output else {
        return match output {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
    };
    let mut text = String::new();
    for run in runs {
        for stream in ["stdout", "stderr"] {
            if let Some(s) = run
                .get(stream)
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
            {
                text.push_str(s);
                if !s.ends_with('\n') {
                    text.push('\n');
                }
            }
        }
        match run.get("outcome") {
            Some(o) if o.get("type").and_then(Value::as_str) == Some("timeout") => {
                text.push_str("(timed out)\n");
            }
            Some(o) => {
                if let Some(code) = o.get("exit_code") {
                    text.push_str(&format!("(exit code {code})\n"));
                }
            }
            None => {}
        }
    }
    text
}

/// Text of a system, developer or assistant message; such messages carry text only.
fn plain_text(i: usize, content: &MessageContent) -> Result<String, Error> {
    match content {
        MessageContent::Text(t) => Ok(t.clone()),
        MessageContent::Parts(parts) => {
            let mut text = String::new();
            for (j, part) in parts.iter().enumerate() {
                match part {
                    ContentPart::InputText { text: t }
                    | ContentPart::OutputText { text: t, .. } => text.push_str(t),
                    ContentPart::Refusal { refusal } => text.push_str(refusal),
                    ContentPart::Other(map) => {
                        let kind = map.get("type").and_then(Value::as_str).unwrap_or("unknown");
                        return Err(Error::Unsupported {
                            param: format!("input[{i}].content[{j}]"),
                            message: format!(
                                "content type `{kind}` is not supported in this message role"
                            ),
                        });
                    }
                }
            }
            Ok(text)
        }
    }
}

fn user_parts(i: usize, content: &MessageContent) -> Result<Vec<UserPart>, Error> {
    match content {
        MessageContent::Text(t) => Ok(vec![UserPart::Text(t.clone())]),
        MessageContent::Parts(parts) => {
            let mut out = Vec::with_capacity(parts.len());
            for (j, part) in parts.iter().enumerate() {
                match part {
                    ContentPart::InputText { text } | ContentPart::OutputText { text, .. } => {
                        out.push(UserPart::Text(text.clone()))
                    }
                    ContentPart::Refusal { refusal } => out.push(UserPart::Text(refusal.clone())),
                    ContentPart::Other(map) => out.push(other_user_part(i, j, map)?),
                }
            }
            Ok(out)
        }
    }
}

fn other_user_part(
    i: usize,
    j: usize,
    map: &serde_json::Map<String, Value>,
) -> Result<UserPart, Error> {
    let kind = map.get("type").and_then(Value::as_str).unwrap_or("unknown");
    if kind == "input_image" {
        let detail = map.get("detail").and_then(Value::as_str).map(str::to_owned);
        return match map.get("image_url") {
            Some(Value::String(url)) => Ok(UserPart::Image {
                url: url.clone(),
                detail,
            }),
            // Present but not a URL string: the leaf is at fault, not the part.
            Some(other) if !other.is_null() => Err(Error::InvalidJson {
                param: Some(format!("input[{i}].content[{j}].image_url")),
                message: format!(
                    "invalid request body at `input[{i}].content[{j}].image_url`: expected a string (a URL or a data URL), not {}",
                    match other {
                        Value::Object(_) => "an object",
                        Value::Array(_) => "an array",
                        Value::Bool(_) => "a boolean",
                        _ => "a number",
                    }
                ),
            }),
            _ => Err(Error::Unsupported {
                param: format!("input[{i}].content[{j}]"),
                message: "an input_image needs `image_url`; `file_id` references are not supported"
                    .into(),
            }),
        };
    }
    Err(Error::Unsupported {
        param: format!("input[{i}].content[{j}]"),
        message: format!("content type `{kind}` is not supported by this gateway yet"),
    })
}

/// A tool output given as content parts: its text parts, joined.
fn text_of_output_parts(parts: &[Value]) -> String {
    parts
        .iter()
        .filter_map(|p| p.get("text").and_then(Value::as_str))
        .collect::<Vec<_>>()
        .join("")
}
