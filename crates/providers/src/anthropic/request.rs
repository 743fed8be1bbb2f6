//! Canonical request → Messages request.
//!
//! Decisions, documented here because clients depend on them:
//! - `instructions` and every system/developer turn go, in order, into the top-level `system`
//!   (joined with blank lines). Developer turns are reported as [`DEVELOPER_AS_SYSTEM`]; more than
//!   one instruction turn, or one in the middle of the conversation, as [`SYSTEM_MERGED`].
//! - Anthropic requires user and assistant messages to alternate: consecutive turns of the same
//!   role (tool outputs count as user turns) are merged into one message. This loses nothing, so
//!   it is not reported.
//! - Earlier reasoning is replayed only with the signature Anthropic made for it (recovered from
//!   the sealed `encrypted_content` or the gateway's provider-state store), as a `thinking`
//!   block leading its assistant message (empty text when the model sent none), followed by its
//!   `redacted_thinking` blocks unchanged, and only when this request has thinking on.
//!   Reasoning without a signature is not sent: Anthropic rejects unsigned thinking.
//! - Image `detail` has no Anthropic equivalent and is dropped.
//! - `text.format` is asked for in the system prompt ([`OUTPUT_CONTRACT_DEGRADED`]): Messages has
//!   no JSON mode.

use serde_json::{Map, Value, json};
use toolbridge_core::canonical::{AssistantTurn, CanonicalRequest, Turn, UserPart};
use toolbridge_core::contract::OutputContract;
use toolbridge_core::diagnostics::{
    DEVELOPER_AS_SYSTEM, OUTPUT_CONTRACT_DEGRADED, PARAM_CLAMPED, PARAM_DROPPED, PARAM_RENAMED,
    SYSTEM_MERGED, TOOL_CHOICE_DOWNGRADED, diag,
};
use toolbridge_core::plan::{NativeSearch, ToolPlan, UpstreamTool, sanitize};
use toolbridge_wire::anthropic::{
    ContentBlock, ImageBlock, ImageSource, Message, MessageContent, MessagesRequest, Metadata,
    RedactedThinkingBlock, System, TextBlock, Thinking, ThinkingBlock, Tool, ToolChoice,
    ToolUseBlock,
};
use toolbridge_wire::responses::Diagnostic;

use crate::profile::{CacheAffinity, Profile};

/// `max_tokens` when the client set no `max_output_tokens`. Anthropic requires the field; 8192 is
/// an answer length every current Claude model accepts. When thinking is on, its budget is added.
pub const DEFAULT_MAX_TOKENS: u64 = 8192;

/// The smallest thinking budget Anthropic accepts.
pub const MIN_THINKING_BUDGET: u64 = 1024;

/// The thinking budget `profile` gives a Responses `reasoning.effort` (its effort table: `none`
/// and `minimal` turn thinking off with a budget of 0); `None` with thinking off. An effort
/// the table does not name is dropped with a diagnostic; the row's other fields go into the
/// request as written.
fn thinking_budget(
    profile: &Profile,
    effort: &str,
    out: &mut MessagesRequest,
    dropped: &mut Vec<&str>,
) -> Option<u64> {
    let Some(say) = profile.effort(effort) else {
        dropped.push("reasoning.effort");
        return None;
    };
    for (key, value) in &say.fields {
        out.extra.insert(key.clone(), value.clone());
    }
    say.budget.filter(|b| *b > 0)
}

/// Translates `req` for Anthropic with `profile`, sending `upstream_model`, with the tools and
/// names of `plan`. Every lossy decision is appended to `diagnostics`.
pub fn build(
    req: &CanonicalRequest,
    plan: &ToolPlan,
    profile: &Profile,
    upstream_model: &str,
    diagnostics: &mut Vec<Diagnostic>,
) -> MessagesRequest {
    let mut system = system_text(&req.turns, diagnostics);
    let messages = messages(req, plan, profile, diagnostics);
    output_contract(&req.output, &mut system, diagnostics);
    let mut out = MessagesRequest {
        model: upstream_model.to_owned(),
        system: (!system.is_empty()).then_some(System::Text(system)),
        messages: Vec::new(),
        max_tokens: DEFAULT_MAX_TOKENS,
        stream: req.stream,
        ..MessagesRequest::default()
    };
    out.messages = messages;
    if out.messages.first().is_some_and(|m| m.role != "user") {
        out.messages.insert(
            0,
            Message {
                role: "user".to_owned(),
                content: MessageContent::Blocks(vec![text_block(crate::first_turn::PLACEHOLDER)]),
            },
        );
        diagnostics.push(crate::first_turn::diagnostic("Anthropic"));
    }
    params(req, profile, &mut out, diagnostics);
    if out.thinking.is_none() {
        drop_thinking(&mut out.messages);
    }
    tools(req, plan, &mut out, diagnostics);
    for (key, value) in &profile.extra_body {
        out.extra.insert(key.clone(), value.clone());
    }
    super::cache::place(&mut out, &profile.cache);
    out
}

/// The text of every system/developer turn, in order.
fn system_text(turns: &[Turn], diagnostics: &mut Vec<Diagnostic>) -> String {
    let mut parts: Vec<&str> = Vec::new();
    let mut developer = false;
    let mut moved = false;
    let mut seen_other = false;
    for turn in turns {
        match turn {
            Turn::System {
                text,
                developer: dev,
            } => {
                developer |= *dev;
                moved |= seen_other;
                parts.push(text);
            }
            _ => seen_other = true,
        }
    }
    if developer {
        diagnostics.push(diag(
            DEVELOPER_AS_SYSTEM,
            Some("input"),
            "Anthropic has no developer role; developer messages were sent as the system prompt",
        ));
    }
    if parts.len() > 1 || moved {
        diagnostics.push(diag(
            SYSTEM_MERGED,
            Some("input"),
            "Anthropic takes one top-level system prompt; instructions and system/developer messages were joined into it in order",
        ));
    }
    parts.join("\n\n")
}

/// The messages; a user turn the client ended with a cache breakpoint has its last block
/// marked (where the provider takes marks).
fn messages(
    req: &CanonicalRequest,
    plan: &ToolPlan,
    profile: &Profile,
    diagnostics: &mut Vec<Diagnostic>,
) -> Vec<Message> {
    let turns = &req.turns;
    let mut out: Vec<Message> = Vec::with_capacity(turns.len());
    let mut results = super::tool_result::ToolResults::default();
    for (i, turn) in turns.iter().enumerate() {
        let (role, mut blocks) = match turn {
            Turn::System { .. } => continue,
            Turn::User { parts } => ("user", parts.iter().filter_map(user_block).collect()),
            Turn::Assistant(turn) => ("assistant", assistant_blocks(turn, plan, profile)),
            Turn::ToolResult { call_id, output } => (
                "user",
                vec![results.block(call_id, output, profile, diagnostics)],
            ),
        };
        // Images a result could not hold follow the run of results (Anthropic wants every
        // `tool_result` block first in its user message).
        if matches!(turn, Turn::ToolResult { .. })
            && !matches!(turns.get(i + 1), Some(Turn::ToolResult { .. }))
        {
            blocks.extend(results.flush());
        }
        if blocks.is_empty() {
            continue;
        }
        match out.last_mut() {
            Some(Message {
                role: last,
                content: MessageContent::Blocks(existing),
            }) if last == role => existing.extend(blocks),
            _ => out.push(Message {
                role: role.to_owned(),
                content: MessageContent::Blocks(blocks),
            }),
        }
        if req.cache_marks.contains(&i)
            && let Some(message) = out.last_mut()
        {
            super::cache::mark_client(message, &profile.cache);
        }
    }
    out
}

/// A user part as a block; `None` for empty text, which Anthropic rejects.
fn user_block(part: &UserPart) -> Option<ContentBlock> {
    match part {
        UserPart::Text(text) if text.is_empty() => None,
        UserPart::Text(text) => Some(text_block(text)),
        UserPart::Image { url, .. } => Some(ContentBlock::Image(ImageBlock {
            source: image_source(url),
            extra: Map::new(),
        })),
    }
}

fn text_block(text: &str) -> ContentBlock {
    ContentBlock::Text(TextBlock {
        text: text.to_owned(),
        extra: Map::new(),
    })
}

/// A `data:<type>;base64,<data>` URL as a base64 source; any other URL as a url source.
pub(super) fn image_source(url: &str) -> ImageSource {
    if let Some(rest) = url.strip_prefix("data:")
        && let Some((media_type, data)) = rest.split_once(";base64,")
    {
        return ImageSource::Base64 {
            media_type: media_type.to_owned(),
            data: data.to_owned(),
        };
    }
    ImageSource::Url {
        url: url.to_owned(),
    }
}

/// Removes replayed thinking blocks (signed and redacted), for a request with thinking off.
fn drop_thinking(messages: &mut [Message]) {
    for m in messages {
        if let MessageContent::Blocks(blocks) = &mut m.content {
            blocks.retain(|b| {
                !matches!(
                    b,
                    ContentBlock::Thinking(_) | ContentBlock::RedactedThinking(_)
                )
            });
        }
    }
}

fn assistant_blocks(turn: &AssistantTurn, plan: &ToolPlan, profile: &Profile) -> Vec<ContentBlock> {
    let mut blocks = Vec::with_capacity(turn.tool_calls.len() + 2);
    // Signed thinking goes back as it came, its text empty when the model sent none; redacted
    // thinking after it, unchanged.
    if let Some(signature) = &turn.reasoning_signature {
        blocks.push(ContentBlock::Thinking(ThinkingBlock {
            thinking: turn.reasoning.clone().unwrap_or_default(),
            signature: signature.clone(),
            extra: Map::new(),
        }));
    }
    for data in &turn.redacted_reasoning {
        blocks.push(ContentBlock::RedactedThinking(RedactedThinkingBlock {
            data: data.clone(),
            extra: Map::new(),
        }));
    }
    if let Some(text) = turn.text.as_deref().filter(|t| !t.is_empty()) {
        blocks.push(text_block(text));
    }
    for call in &turn.tool_calls {
        let identity = call.kind.identity();
        // A call to a tool this request no longer declares keeps a provider-safe form of its name.
        let (name, input) = crate::degraded::dispatched(plan, &call.kind).unwrap_or_else(|| {
            (
                plan.names
                    .provider_name(&identity)
                    .map(str::to_owned)
                    .unwrap_or_else(|| sanitize(identity.declared_name(), &profile.tools)),
                crate::degraded::call_object(&call.kind),
            )
        });
        blocks.push(ContentBlock::ToolUse(ToolUseBlock {
            id: call.call_id.clone(),
            name,
            input,
            extra: Map::new(),
        }));
    }
    blocks
}

/// `metadata.user_id`: the end user when the client names one, else the session's
/// `prompt_cache_key` where the profile keeps sessions by it (one account, and so one cache,
/// behind pooled relays); a key that goes nowhere is dropped.
fn user_id(
    p: &toolbridge_core::canonical::Params,
    profile: &Profile,
    out: &mut MessagesRequest,
    dropped: &mut Vec<&str>,
    diagnostics: &mut Vec<Diagnostic>,
) {
    let affinity = profile.cache.affinity == CacheAffinity::MetadataUserId;
    if p.prompt_cache_key.is_some() && (p.end_user.is_some() || !affinity) {
        dropped.push("prompt_cache_key");
    }
    let user = match (&p.end_user, &p.prompt_cache_key) {
        (Some(user), _) => user,
        (None, Some(key)) if affinity => {
            diagnostics.push(diag(
                PARAM_RENAMED,
                Some("prompt_cache_key"),
                "Anthropic keeps a session on one cache by `metadata.user_id`; the key was sent there",
            ));
            key
        }
        _ => return,
    };
    out.metadata = Some(Metadata {
        user_id: Some(user.clone()),
        extra: Map::new(),
    });
}

fn params(
    req: &CanonicalRequest,
    profile: &Profile,
    out: &mut MessagesRequest,
    diagnostics: &mut Vec<Diagnostic>,
) {
    let p = &req.params;
    let mut dropped: Vec<&str> = Vec::new();
    if p.presence_penalty.is_some() {
        dropped.push("presence_penalty");
    }
    if p.frequency_penalty.is_some() {
        dropped.push("frequency_penalty");
    }
    if p.top_logprobs.is_some_and(|n| n > 0) {
        dropped.push("top_logprobs");
    }
    if !p.stop.is_empty() {
        out.stop_sequences = Some(p.stop.clone());
    }
    user_id(p, profile, out, &mut dropped, diagnostics);
    let budget = p
        .reasoning_effort
        .as_deref()
        .and_then(|effort| thinking_budget(profile, effort, out, &mut dropped));
    out.max_tokens = match (p.max_output_tokens, budget) {
        (Some(max), _) => max,
        (None, Some(budget)) => DEFAULT_MAX_TOKENS + budget,
        (None, None) => DEFAULT_MAX_TOKENS,
    };
    if let Some(budget) = budget {
        // The budget must stay below `max_tokens` (half of it is kept for the answer when the
        // client's limit is smaller), and at least Anthropic's minimum.
        let fitted = if budget < out.max_tokens {
            budget
        } else {
            out.max_tokens / 2
        };
        if fitted < MIN_THINKING_BUDGET {
            diagnostics.push(diag(
                PARAM_DROPPED,
                Some("reasoning.effort"),
                format!(
                    "max_output_tokens {} leaves no room for Anthropic's minimum thinking budget of {MIN_THINKING_BUDGET}; thinking was not enabled",
                    out.max_tokens
                ),
            ));
        } else {
            if fitted != budget {
                diagnostics.push(diag(
                    PARAM_CLAMPED,
                    Some("reasoning.effort"),
                    format!(
                        "the thinking budget {budget} was lowered to {fitted} to fit max_output_tokens {}",
                        out.max_tokens
                    ),
                ));
            }
            out.thinking = Some(Thinking {
                kind: "enabled".to_owned(),
                budget_tokens: Some(fitted),
                extra: Map::new(),
            });
        }
    }
    let thinking = out.thinking.is_some();
    if let Some(t) = p.temperature {
        if thinking {
            // Anthropic rejects a temperature other than the default with thinking on.
            dropped.push("temperature");
        } else {
            let [lo, hi] = profile.temperature_range;
            let [lo, hi] = [lo.max(0.0), hi.min(1.0)];
            let clamped = t.clamp(lo, hi);
            out.temperature = Some(clamped);
            if clamped != t {
                diagnostics.push(diag(
                    PARAM_CLAMPED,
                    Some("temperature"),
                    format!("temperature {t} was clamped to {clamped}, Anthropic's range is [{lo}, {hi}]"),
                ));
            }
        }
    }
    if let Some(top_p) = p.top_p {
        // With thinking on, Anthropic accepts top_p only in [0.95, 1].
        let clamped = if thinking { top_p.max(0.95) } else { top_p };
        out.top_p = Some(clamped);
        if clamped != top_p {
            diagnostics.push(diag(
                PARAM_CLAMPED,
                Some("top_p"),
                format!("top_p {top_p} was raised to {clamped}, the least Anthropic accepts with thinking on"),
            ));
        }
    }
    if p.end_user.is_some() {
        diagnostics.push(diag(
            PARAM_RENAMED,
            Some("safety_identifier"),
            "the end-user id was sent as Anthropic's metadata.user_id",
        ));
    }
    for param in dropped {
        diagnostics.push(diag(
            PARAM_DROPPED,
            Some(param),
            format!("Anthropic does not accept `{param}` here; it was not sent"),
        ));
    }
}

fn tools(
    req: &CanonicalRequest,
    plan: &ToolPlan,
    out: &mut MessagesRequest,
    diagnostics: &mut Vec<Diagnostic>,
) {
    if !plan.send_tools || plan.upstream.is_empty() {
        return;
    }
    out.tools = Some(plan.upstream.iter().filter_map(tool).collect());
    let mut choice = plan.tool_choice.as_ref().map(tool_choice);
    // Anthropic cannot force a tool while thinking: `any` and `tool` become `auto`.
    if out.thinking.is_some()
        && let Some(c) = &mut choice
        && matches!(c.kind.as_str(), "any" | "tool")
    {
        c.kind = "auto".to_owned();
        c.name = None;
        diagnostics.push(diag(
            TOOL_CHOICE_DOWNGRADED,
            Some("tool_choice"),
            "Anthropic cannot force tool use with thinking on; tool_choice was sent as \"auto\"",
        ));
    }
    if req.params.parallel_tool_calls == Some(false) {
        let c = choice.get_or_insert_with(|| ToolChoice {
            kind: "auto".to_owned(),
            ..ToolChoice::default()
        });
        if c.kind != "none" {
            c.disable_parallel_tool_use = Some(true);
        }
    }
    out.tool_choice = choice;
    for (key, value) in &plan.request_flags {
        out.extra.insert(key.clone(), value.clone());
    }
}

fn tool(t: &UpstreamTool) -> Option<Tool> {
    Some(match t {
        UpstreamTool::Function {
            name,
            description,
            parameters,
            ..
        } => Tool {
            name: name.clone(),
            description: description.clone(),
            input_schema: Some(parameters.clone()),
            extra: Map::new(),
        },
        UpstreamTool::Native(native) => {
            let value = crate::native::render(native)?;
            let mut extra = value.as_object().cloned().unwrap_or_default();
            let name = match extra.remove("name") {
                Some(Value::String(name)) => name,
                _ => String::new(),
            };
            Tool {
                name,
                description: None,
                input_schema: None,
                extra,
            }
        }
    })
}

/// The plan's Chat-shaped `tool_choice` in Anthropic's shape: `auto` → `auto`, `required` →
/// `any`, `none` → `none`, a named function → `{type: tool, name}`.
fn tool_choice(choice: &Value) -> ToolChoice {
    let (kind, name) = match choice {
        Value::String(s) if s == "required" => ("any", None),
        Value::String(s) if s == "none" => ("none", None),
        Value::Object(obj) => {
            let name = obj
                .get("function")
                .and_then(|f| f.get("name"))
                .or_else(|| obj.get("name"))
                .and_then(Value::as_str)
                .map(str::to_owned);
            match name {
                Some(name) => ("tool", Some(name)),
                None => ("auto", None),
            }
        }
        _ => ("auto", None),
    };
    ToolChoice {
        kind: kind.to_owned(),
        name,
        ..ToolChoice::default()
    }
}

/// Asks for `text.format` in the system prompt.
fn output_contract(
    contract: &OutputContract,
    system: &mut String,
    diagnostics: &mut Vec<Diagnostic>,
) {
    let instruction = match contract {
        OutputContract::Text => return,
        OutputContract::JsonObject => "Respond with a JSON object and nothing else.".to_owned(),
        OutputContract::JsonSchema(schema) => format!(
            "Respond with a JSON object and nothing else. It must match this JSON Schema ({}):\n{}",
            schema.name, schema.schema
        ),
    };
    if !system.is_empty() {
        system.push_str("\n\n");
    }
    system.push_str(&instruction);
    diagnostics.push(diag(
        OUTPUT_CONTRACT_DEGRADED,
        Some("text.format"),
        "Anthropic has no JSON mode; the format was asked for in the system prompt",
    ));
}

/// The version of Anthropic's web search server tool sent.
const WEB_SEARCH_TOOL: &str = "web_search_20250305";

/// The most searches Anthropic may run for one turn: a bound on what one request can cost.
const WEB_SEARCH_MAX_USES: u32 = 5;

/// Anthropic's web search server tool, run by Anthropic within the turn, with the declaration's
/// allowed domains and user location (Responses' `user_location` has Anthropic's shape).
pub(crate) fn web_search(search: &NativeSearch) -> Value {
    let mut tool = json!({
        "type": WEB_SEARCH_TOOL,
        "name": "web_search",
        "max_uses": WEB_SEARCH_MAX_USES,
    });
    if !search.allowed_domains.is_empty() {
        tool["allowed_domains"] = Value::Array(search.allowed_domains.clone());
    }
    if let Some(location) = &search.user_location {
        tool["user_location"] = location.clone();
    }
    tool
}
