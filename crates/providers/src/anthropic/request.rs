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

use serde_json::Map;
use toolbridge_core::canonical::{AssistantTurn, CanonicalRequest, Turn, UserPart};
use toolbridge_core::contract::OutputContract;
use toolbridge_core::diagnostics::{
    DEVELOPER_AS_SYSTEM, OUTPUT_CONTRACT_DEGRADED, SYSTEM_MERGED, diag,
};
use toolbridge_core::plan::{ToolPlan, sanitize};
use toolbridge_wire::anthropic::{
    ContentBlock, ImageBlock, ImageSource, Message, MessageContent, MessagesRequest,
    RedactedThinkingBlock, System, TextBlock, ThinkingBlock, ToolUseBlock,
};
use toolbridge_wire::responses::Diagnostic;

use crate::profile::Profile;

mod params;
mod tools;

use params::params;
use tools::tools;
pub(crate) use tools::web_search;

/// `max_tokens` when the client set no `max_output_tokens`. Anthropic requires the field; 8192 is
/// an answer length every current Claude model accepts. When thinking is on, its budget is added.
pub const DEFAULT_MAX_TOKENS: u64 = 8192;

/// The smallest thinking budget Anthropic accepts.
pub const MIN_THINKING_BUDGET: u64 = 1024;

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
