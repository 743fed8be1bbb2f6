//! Canonical request → Gemini `generateContent` request.
//!
//! Decisions, documented here because clients depend on them:
//! - Every system and developer turn goes to `systemInstruction`, one text part each, in order;
//!   Gemini has no developer role and no system turn in the middle of `contents`.
//! - Assistant turns become `model` contents; their reasoning text is not replayed: Gemini takes
//!   thinking back only as the `thoughtSignature` on a step's first function call, which the
//!   turn carries (sealed `encrypted_content`, or the gateway's provider-state store by
//!   `call_id`), with or without thought text.
//! - Function calls and responses carry no `id`: Gemini pairs them by name and order. A tool
//!   output's name comes from the matching earlier call; its `response` is the output when that
//!   is a JSON object, else `{"output": <the text>}`.
//! - Consecutive contents of one role are merged into one (Gemini wants all the responses to one
//!   model turn's calls in a single `user` content).
//! - `reasoning.effort` → `thinkingConfig.thinkingBudget` from the profile's effort table
//!   (`presets/gemini.toml`; a budget of 0 is off); thoughts are included whenever thinking is
//!   on.
//! - `text.format` json_object → `responseMimeType: application/json`; json_schema → that plus
//!   `responseSchema`, sanitised (see [`super::schema`]).
//! - Not sent, with a diagnostic: `top_logprobs`, `safety_identifier`/`user`,
//!   `prompt_cache_key`, `parallel_tool_calls: false`; stop sequences past Gemini's five.

use serde_json::{Map, Value, json};
use toolbridge_core::canonical::{
    AssistantTurn, CallKind, CanonicalRequest, ToolOutput, Turn, UserPart,
};
use toolbridge_core::diagnostics::{DEVELOPER_AS_SYSTEM, SYSTEM_MERGED, TOOL_OUTPUT_MISSING, diag};
use toolbridge_core::plan::{ToolPlan, sanitize};
use toolbridge_wire::gemini::{
    Blob, Content, FileData, FunctionCall, FunctionResponse, GenerateContentRequest,
    GenerationConfig, Part,
};
use toolbridge_wire::responses::Diagnostic;

use crate::profile::Profile;

mod params;
mod tools;

use params::{generation_config, output_contract};
pub(crate) use tools::google_search;
use tools::tools;

/// Translates `req` for Gemini, with the tools and names of `plan`. `upstream_model` goes in the
/// URL, not the body; it is taken for symmetry with the other dialects and unused here. Every
/// lossy decision is appended to `diagnostics`.
pub fn build(
    req: &CanonicalRequest,
    plan: &ToolPlan,
    profile: &Profile,
    upstream_model: &str,
    diagnostics: &mut Vec<Diagnostic>,
) -> GenerateContentRequest {
    let _ = upstream_model;
    let (system_instruction, contents) = contents(&req.turns, plan, profile, diagnostics);
    let mut config = generation_config(req, plan, profile, diagnostics);
    output_contract(&req.output, &mut config, diagnostics);
    let (tools, tool_config) = tools(plan, diagnostics);
    GenerateContentRequest {
        contents,
        system_instruction,
        tools,
        tool_config,
        generation_config: (config != GenerationConfig::default()).then_some(config),
        extra: Map::new(),
    }
}

fn contents(
    turns: &[Turn],
    plan: &ToolPlan,
    profile: &Profile,
    diagnostics: &mut Vec<Diagnostic>,
) -> (Option<Content>, Vec<Content>) {
    let mut system: Vec<Part> = Vec::new();
    let mut developer = false;
    let mut out: Vec<Content> = Vec::new();
    let mut moved = super::tool_result::Moved::default();
    for (i, turn) in turns.iter().enumerate() {
        let (role, parts) = match turn {
            Turn::System {
                text,
                developer: dev,
            } => {
                developer |= *dev;
                system.push(Part::text(text.clone()));
                continue;
            }
            Turn::User { parts } => ("user", parts.iter().map(user_part).collect()),
            Turn::Assistant(turn) => ("model", model_parts(turn, plan, profile)),
            Turn::ToolResult { call_id, output } => {
                let mut parts = vec![tool_result(
                    turns.get(..i).unwrap_or_default(),
                    call_id,
                    output,
                    plan,
                    profile,
                    &mut moved,
                    diagnostics,
                )];
                // Images a result could not hold follow the run of results.
                if !matches!(turns.get(i + 1), Some(Turn::ToolResult { .. })) {
                    parts.extend(super::tool_result::flush(&mut moved));
                }
                ("user", parts)
            }
        };
        push(&mut out, role, parts);
    }
    if out
        .first()
        .is_some_and(|c| c.role.as_deref() != Some("user"))
    {
        out.insert(
            0,
            Content {
                role: Some("user".to_owned()),
                parts: vec![Part::text(crate::first_turn::PLACEHOLDER.to_owned())],
                extra: Map::new(),
            },
        );
        diagnostics.push(crate::first_turn::diagnostic("Gemini"));
    }
    if developer {
        diagnostics.push(diag(
            DEVELOPER_AS_SYSTEM,
            Some("input"),
            "Gemini has no developer role; developer messages were sent in systemInstruction",
        ));
    }
    if system.len() > 1 {
        diagnostics.push(diag(
            SYSTEM_MERGED,
            Some("input"),
            "Gemini takes one systemInstruction; every system message was sent in it, in order",
        ));
    }
    let system = (!system.is_empty()).then(|| Content {
        role: None,
        parts: system,
        extra: Map::new(),
    });
    (system, out)
}

/// Appends `parts` as a `role` content, merged into the previous content when it has that role.
fn push(out: &mut Vec<Content>, role: &str, parts: Vec<Part>) {
    if parts.is_empty() {
        return;
    }
    if let Some(last) = out.last_mut()
        && last.role.as_deref() == Some(role)
    {
        last.parts.extend(parts);
        return;
    }
    out.push(Content {
        role: Some(role.to_owned()),
        parts,
        extra: Map::new(),
    });
}

pub(super) fn user_part(part: &UserPart) -> Part {
    match part {
        UserPart::Text(text) => Part::text(text.clone()),
        UserPart::Image { url, .. } => {
            if let Some((mime_type, data)) = data_url(url) {
                return Part {
                    inline_data: Some(Blob { mime_type, data }),
                    ..Part::default()
                };
            }
            Part {
                file_data: Some(FileData {
                    mime_type: image_mime(url).map(str::to_owned),
                    file_uri: url.clone(),
                }),
                ..Part::default()
            }
        }
    }
}

/// `data:<mime>;base64,<data>` → (mime, data).
pub(super) fn data_url(url: &str) -> Option<(String, String)> {
    let rest = url.strip_prefix("data:")?;
    let (meta, data) = rest.split_once(',')?;
    let mime = meta.strip_suffix(";base64")?;
    Some((mime.to_owned(), data.to_owned()))
}

/// The image type a URL's extension names, if any.
fn image_mime(url: &str) -> Option<&'static str> {
    let path = url
        .split(['?', '#'])
        .next()
        .unwrap_or(url)
        .to_ascii_lowercase();
    let ext = path.rsplit_once('.').map(|(_, e)| e)?;
    Some(match ext {
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "webp" => "image/webp",
        "gif" => "image/gif",
        "heic" => "image/heic",
        _ => return None,
    })
}

/// The name the provider sees for an earlier call's tool.
fn call_name(kind: &CallKind, plan: &ToolPlan, profile: &Profile) -> String {
    let identity = kind.identity();
    plan.names
        .provider_name(&identity)
        .map(str::to_owned)
        .unwrap_or_else(|| sanitize(identity.declared_name(), &profile.tools))
}

fn model_parts(turn: &AssistantTurn, plan: &ToolPlan, profile: &Profile) -> Vec<Part> {
    let mut parts = Vec::new();
    if let Some(text) = turn.text.as_ref().filter(|t| !t.is_empty()) {
        parts.push(Part::text(text.clone()));
    }
    for (i, call) in turn.tool_calls.iter().enumerate() {
        let (name, args) = crate::degraded::dispatched(plan, &call.kind).unwrap_or_else(|| {
            (
                call_name(&call.kind, plan, profile),
                crate::degraded::call_object(&call.kind),
            )
        });
        parts.push(Part {
            function_call: Some(FunctionCall {
                id: None,
                name,
                args: Some(args),
            }),
            // Gemini signs a step's first function call; the signature comes back on it.
            thought_signature: (i == 0).then(|| turn.reasoning_signature.clone()).flatten(),
            ..Part::default()
        });
    }
    parts
}

/// A tool output as a `functionResponse`. `earlier` are the turns before it: the nearest call
/// with its id names it (Gemini's synthesized ids repeat from one answer to the next).
fn tool_result(
    earlier: &[Turn],
    call_id: &str,
    output: &ToolOutput,
    plan: &ToolPlan,
    profile: &Profile,
    moved: &mut super::tool_result::Moved,
    diagnostics: &mut Vec<Diagnostic>,
) -> Part {
    let call = earlier.iter().rev().find_map(|t| match t {
        Turn::Assistant(a) => a.tool_calls.iter().find(|c| c.call_id == call_id),
        _ => None,
    });
    let name = match call {
        Some(call) => call_name(&call.kind, plan, profile),
        None => {
            diagnostics.push(diag(
                TOOL_OUTPUT_MISSING,
                Some("input"),
                format!(
                    "the output of `{call_id}` has no matching call; it was sent under that id as the function name"
                ),
            ));
            sanitize(call_id, &profile.tools)
        }
    };
    let (text, parts) = super::tool_result::split(call_id, output, profile, moved, diagnostics);
    let response = match serde_json::from_str(&text) {
        Ok(Value::Object(obj)) => Value::Object(obj),
        _ => json!({"output": text}),
    };
    Part {
        function_response: Some(FunctionResponse {
            id: None,
            name,
            response,
            parts,
        }),
        ..Part::default()
    }
}
