//! Canonical request → Chat Completions request, following the provider's [`Profile`].

use serde_json::{Value, json};
use toolbridge_core::canonical::{AssistantTurn, CanonicalRequest, Turn, UserPart};
use toolbridge_core::contract::OutputContract;
use toolbridge_core::diagnostics::{
    DEVELOPER_AS_SYSTEM, OUTPUT_CONTRACT_DEGRADED, SYSTEM_MERGED, diag,
};
use toolbridge_core::plan::{ToolPlan, sanitize};
use toolbridge_wire::chat::{
    ChatFunctionCall, ChatMessage, ChatRequest, ChatToolCall, StreamOptions,
};
use toolbridge_wire::responses::Diagnostic;

use crate::profile::{Profile, ReasoningField, ReasoningReplay};

mod params;
mod tools;

use params::params;
use tools::tools;

/// Translates `req` for a provider with `profile`, sending `upstream_model`, with the tools and
/// names of `plan`. Every lossy decision is appended to `diagnostics`.
pub fn build(
    req: &CanonicalRequest,
    plan: &ToolPlan,
    profile: &Profile,
    upstream_model: &str,
    diagnostics: &mut Vec<Diagnostic>,
) -> ChatRequest {
    let mut messages = messages(req, plan, profile, diagnostics);
    let response_format = output_contract(&req.output, profile, &mut messages, diagnostics);
    let mut out = ChatRequest {
        model: upstream_model.to_owned(),
        messages,
        response_format,
        stream: req.stream,
        stream_options: (req.stream && profile.stream_usage).then_some(StreamOptions {
            include_usage: true,
        }),
        ..ChatRequest::default()
    };
    params(req, plan, profile, &mut out, diagnostics);
    tools(plan, &mut out);
    // Some providers stream a call's arguments only when asked (GLM's `tool_stream`; without it
    // each call arrives whole in one chunk).
    if profile.tool_stream && out.stream && out.tools.is_some() {
        out.extra
            .insert("tool_stream".to_owned(), Value::Bool(true));
    }
    for (key, value) in &profile.extra_body {
        out.extra.insert(key.clone(), value.clone());
    }
    super::cache::place(&mut out.messages, &profile.cache);
    out
}

/// The messages; a user turn the client ended with a cache breakpoint has its last part marked
/// (where the provider takes marks).
fn messages(
    req: &CanonicalRequest,
    plan: &ToolPlan,
    profile: &Profile,
    diagnostics: &mut Vec<Diagnostic>,
) -> Vec<ChatMessage> {
    let turns = &req.turns;
    let mut out: Vec<ChatMessage> = Vec::with_capacity(turns.len());
    let mut mapped_developer = false;
    let mut merged = false;
    let mut results = super::tool_result::ToolResults::default();
    for (i, turn) in turns.iter().enumerate() {
        if !matches!(turn, Turn::ToolResult { .. }) {
            results.flush(&mut out);
        }
        match turn {
            Turn::System { text, developer } => {
                let role = if *developer && profile.developer_role {
                    "developer"
                } else {
                    mapped_developer |= *developer;
                    "system"
                };
                if profile.merge_system
                    && let Some(last) = out.last_mut()
                    && last.role == role
                    && let Some(Value::String(existing)) = &mut last.content
                {
                    existing.push_str("\n\n");
                    existing.push_str(text);
                    merged = true;
                    continue;
                }
                out.push(ChatMessage {
                    role: role.to_owned(),
                    content: Some(Value::String(text.clone())),
                    ..ChatMessage::default()
                });
            }
            Turn::User { parts } => {
                let mut message = ChatMessage {
                    role: "user".to_owned(),
                    content: Some(user_content(parts)),
                    ..ChatMessage::default()
                };
                if req.cache_marks.contains(&i) {
                    super::cache::mark_client(&mut message, &profile.cache);
                }
                out.push(message);
            }
            Turn::Assistant(turn) => {
                let mut message = assistant(turn, plan, profile);
                let replay = match profile.reasoning_replay {
                    ReasoningReplay::Never => false,
                    ReasoningReplay::ToolCallTurns => !turn.tool_calls.is_empty(),
                    ReasoningReplay::All => true,
                };
                if !replay {
                    message.reasoning_content = None;
                } else if profile.reasoning_field == ReasoningField::ReasoningDetails {
                    message.reasoning_details = message
                        .reasoning_content
                        .take()
                        .map(|text| vec![super::details::reasoning_detail(text)]);
                }
                out.push(message)
            }
            Turn::ToolResult { call_id, output } => {
                out.push(results.message(call_id, output, profile, diagnostics))
            }
        }
    }
    results.flush(&mut out);
    if mapped_developer {
        diagnostics.push(diag(
            DEVELOPER_AS_SYSTEM,
            Some("input"),
            format!(
                "the `{}` profile rejects the developer role; developer messages were sent as system",
                profile.name
            ),
        ));
    }
    if merged {
        diagnostics.push(diag(
            SYSTEM_MERGED,
            Some("input"),
            format!(
                "the `{}` profile needs one system message; consecutive ones were merged",
                profile.name
            ),
        ));
    }
    out
}

fn user_content(parts: &[UserPart]) -> Value {
    if let [UserPart::Text(text)] = parts {
        return Value::String(text.clone());
    }
    if parts.iter().all(|p| matches!(p, UserPart::Text(_))) {
        let text: Vec<&str> = parts
            .iter()
            .filter_map(|p| match p {
                UserPart::Text(t) => Some(t.as_str()),
                UserPart::Image { .. } => None,
            })
            .collect();
        return Value::String(text.join("\n"));
    }
    Value::Array(
        parts
            .iter()
            .map(|p| match p {
                UserPart::Text(text) => json!({"type": "text", "text": text}),
                UserPart::Image { url, detail } => {
                    let mut image = json!({"url": url});
                    if let (Some(detail), Some(obj)) = (detail, image.as_object_mut()) {
                        obj.insert("detail".to_owned(), Value::String(detail.clone()));
                    }
                    json!({"type": "image_url", "image_url": image})
                }
            })
            .collect(),
    )
}

fn assistant(turn: &AssistantTurn, plan: &ToolPlan, profile: &Profile) -> ChatMessage {
    let tool_calls = (!turn.tool_calls.is_empty()).then(|| {
        turn.tool_calls
            .iter()
            .map(|c| {
                let identity = c.kind.identity();
                // A call to a tool this request no longer declares keeps a provider-safe form
                // of its own name.
                let (name, arguments) = match crate::degraded::dispatched(plan, &c.kind) {
                    Some((name, arguments)) => (name, arguments.to_string()),
                    None => (
                        plan.names
                            .provider_name(&identity)
                            .map(str::to_owned)
                            .unwrap_or_else(|| sanitize(identity.declared_name(), &profile.tools)),
                        crate::degraded::call_text(&c.kind),
                    ),
                };
                ChatToolCall {
                    id: c.call_id.clone(),
                    kind: "function".to_owned(),
                    function: ChatFunctionCall { name, arguments },
                }
            })
            .collect()
    });
    ChatMessage {
        role: "assistant".to_owned(),
        content: turn.text.clone().map(Value::String),
        tool_calls,
        reasoning_content: turn.reasoning.clone(),
        ..ChatMessage::default()
    }
}

/// Applies `text.format`: natively where the profile allows, else as JSON mode plus an
/// instruction, else as an instruction alone. Returns Chat's `response_format`.
fn output_contract(
    contract: &OutputContract,
    profile: &Profile,
    messages: &mut Vec<ChatMessage>,
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<Value> {
    match contract {
        OutputContract::Text => None,
        OutputContract::JsonObject => {
            if profile.json_object {
                if profile.json_object_needs_json_word && !mentions_json(messages) {
                    add_instruction(messages, "Respond with a JSON object.".to_owned());
                }
                Some(json!({"type": "json_object"}))
            } else {
                add_instruction(
                    messages,
                    "Respond with a JSON object and nothing else.".to_owned(),
                );
                diagnostics.push(diag(
                    OUTPUT_CONTRACT_DEGRADED,
                    Some("text.format"),
                    format!(
                        "the `{}` profile has no JSON mode; the format was asked for in the prompt",
                        profile.name
                    ),
                ));
                None
            }
        }
        OutputContract::JsonSchema(schema) => {
            if profile.json_schema {
                let mut inner =
                    json!({"name": schema.name, "schema": schema.schema, "strict": schema.strict});
                if let (Some(desc), Some(obj)) = (&schema.description, inner.as_object_mut()) {
                    obj.insert("description".to_owned(), Value::String(desc.clone()));
                }
                return Some(json!({"type": "json_schema", "json_schema": inner}));
            }
            add_instruction(
                messages,
                format!(
                    "Respond with a JSON object and nothing else. It must match this JSON Schema ({}):\n{}",
                    schema.name, schema.schema
                ),
            );
            let how = if profile.json_object {
                "JSON mode plus"
            } else {
                "only"
            };
            diagnostics.push(diag(
                OUTPUT_CONTRACT_DEGRADED,
                Some("text.format"),
                format!(
                    "the `{}` profile does not accept json_schema; it was sent as {how} a schema instruction{}",
                    profile.name,
                    if schema.strict { ", and the output is validated" } else { "" }
                ),
            ));
            profile.json_object.then(|| json!({"type": "json_object"}))
        }
    }
}

fn mentions_json(messages: &[ChatMessage]) -> bool {
    messages.iter().any(|m| match &m.content {
        Some(Value::String(s)) => s.to_ascii_lowercase().contains("json"),
        _ => false,
    })
}

/// Adds an instruction as a system message: appended to the leading system message, or inserted
/// as the first message.
fn add_instruction(messages: &mut Vec<ChatMessage>, text: String) {
    if let Some(first) = messages.first_mut()
        && first.role == "system"
        && let Some(Value::String(existing)) = &mut first.content
    {
        existing.push_str("\n\n");
        existing.push_str(&text);
        return;
    }
    messages.insert(
        0,
        ChatMessage {
            role: "system".to_owned(),
            content: Some(Value::String(text)),
            ..ChatMessage::default()
        },
    );
}
