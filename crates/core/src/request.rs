//! Normalising a Responses request: validation with field paths, and the reduction of items to
//! [`Turn`]s.
//!
//! What is refused here is refused for every provider (a missing model, an unknown role, a
//! malformed item). What one provider cannot take is the dialect translator's business.

use serde_json::Value;
use toolbridge_wire::responses::{
    ContentPart, CreateResponse, FunctionCallItem, Input, InputItem, MessageContent, MessageItem,
    ReasoningItem, Stop, TextFormat, Tool,
};

use crate::Error;
use crate::canonical::{AssistantTurn, CanonicalRequest, Params, ToolCall, Turn, UserPart};
use crate::contract::{OutputContract, SchemaContract};
use crate::diagnostics::{ITEM_DROPPED, TOOL_IGNORED, diag};

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
                reducer.item(i, item, &mut diagnostics)?;
            }
            turns.extend(reducer.finish());
        }
    }
    if !turns.iter().any(|t| !matches!(t, Turn::System { .. })) {
        return Err(Error::invalid(
            "input",
            "must contain at least one user, assistant or tool item",
        ));
    }

    let tools = function_tools(
        req.tools.as_deref().unwrap_or_default(),
        limits,
        &mut diagnostics,
    )?;
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

fn function_tools(
    tools: &[Tool],
    limits: &Limits,
    diagnostics: &mut Vec<toolbridge_wire::responses::Diagnostic>,
) -> Result<Vec<toolbridge_wire::responses::FunctionTool>, Error> {
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
    let mut out = Vec::with_capacity(tools.len());
    for (i, tool) in tools.iter().enumerate() {
        match tool {
            Tool::Function(f) => {
                if f.name.is_empty() {
                    return Err(Error::invalid(
                        format!("tools[{i}].name"),
                        "must not be empty",
                    ));
                }
                out.push(f.clone());
            }
            Tool::Other(map) => {
                let kind = map.get("type").and_then(Value::as_str).unwrap_or("unknown");
                diagnostics.push(diag(
                    TOOL_IGNORED,
                    Some(&format!("tools[{i}]")),
                    format!("tool type `{kind}` cannot be sent to this provider and was left out"),
                ));
            }
        }
    }
    Ok(out)
}

/// Folds input items into turns: consecutive assistant output (reasoning, messages, calls)
/// becomes one assistant turn, as Chat-style dialects need.
#[derive(Default)]
struct Reducer {
    turns: Vec<Turn>,
    assistant: Option<AssistantTurn>,
}

impl Reducer {
    fn item(
        &mut self,
        i: usize,
        item: &InputItem,
        diagnostics: &mut Vec<toolbridge_wire::responses::Diagnostic>,
    ) -> Result<(), Error> {
        match item {
            InputItem::Message(m) => self.message(i, m),
            InputItem::FunctionCall(c) => {
                self.function_call(i, c)?;
                Ok(())
            }
            InputItem::FunctionCallOutput(o) => {
                self.flush();
                if o.call_id.is_empty() {
                    return Err(Error::invalid(
                        format!("input[{i}].call_id"),
                        "must not be empty",
                    ));
                }
                let output = match &o.output {
                    Value::String(s) => s.clone(),
                    Value::Array(parts) => text_of_output_parts(parts),
                    other => {
                        return Err(Error::invalid(
                            format!("input[{i}].output"),
                            format!("must be a string or a list of content parts, got {other}"),
                        ));
                    }
                };
                self.turns.push(Turn::ToolResult {
                    call_id: o.call_id.clone(),
                    output,
                });
                Ok(())
            }
            InputItem::Reasoning(r) => {
                self.reasoning(r);
                Ok(())
            }
            InputItem::Other(map) => {
                let kind = map.get("type").and_then(Value::as_str).unwrap_or("unknown");
                diagnostics.push(diag(
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

    fn message(&mut self, i: usize, m: &MessageItem) -> Result<(), Error> {
        match m.role.as_str() {
            "system" | "developer" => {
                self.flush();
                let text = plain_text(i, &m.content)?;
                self.turns.push(Turn::System {
                    text,
                    developer: m.role == "developer",
                });
            }
            "user" => {
                self.flush();
                let parts = user_parts(i, &m.content)?;
                self.turns.push(Turn::User { parts });
            }
            "assistant" => {
                let text = plain_text(i, &m.content)?;
                let turn = self.assistant.get_or_insert_with(AssistantTurn::default);
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

    fn function_call(&mut self, i: usize, c: &FunctionCallItem) -> Result<(), Error> {
        if c.call_id.is_empty() {
            return Err(Error::invalid(
                format!("input[{i}].call_id"),
                "must not be empty",
            ));
        }
        let turn = self.assistant.get_or_insert_with(AssistantTurn::default);
        // A retrying client may send the same call twice; the provider must see it once.
        if turn.tool_calls.iter().any(|t| t.call_id == c.call_id) {
            return Ok(());
        }
        turn.tool_calls.push(ToolCall {
            call_id: c.call_id.clone(),
            name: c.name.clone(),
            arguments: c.arguments.clone(),
        });
        Ok(())
    }

    fn reasoning(&mut self, r: &ReasoningItem) {
        let text: String = r
            .content
            .iter()
            .flatten()
            .map(|c| c.text.as_str())
            .collect::<Vec<_>>()
            .join("");
        if text.is_empty() {
            return;
        }
        let turn = self.assistant.get_or_insert_with(AssistantTurn::default);
        match &mut turn.reasoning {
            Some(existing) => existing.push_str(&text),
            None => turn.reasoning = Some(text),
        }
    }

    fn flush(&mut self) {
        if let Some(turn) = self.assistant.take() {
            self.turns.push(Turn::Assistant(turn));
        }
    }

    fn finish(mut self) -> Vec<Turn> {
        self.flush();
        self.turns
    }
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
        return match map.get("image_url").and_then(Value::as_str) {
            Some(url) => Ok(UserPart::Image {
                url: url.to_owned(),
                detail,
            }),
            None => Err(Error::Unsupported {
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
