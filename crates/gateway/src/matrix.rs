//! `toolbridge providers`: each provider's capability matrix, produced by running the real
//! planner and reading the real profile, so it cannot drift from what the gateway does.
//!
//! Every probe tool is planned on its own, so one tool the provider rejects does not hide what
//! happens to the others; each `tool_choice` form is planned with one function tool declared.

use serde_json::{Value, json};
use toolbridge_core::plan::{Decision, plan};
use toolbridge_providers::profile::Profile;
use toolbridge_wire::responses::Tool;

use crate::config::Dialect;

/// The tool of every type a Codex or SDK request may carry, one each.
fn probe_tools() -> Vec<Value> {
    vec![
        json!({"type": "function", "name": "lookup", "parameters": {"type": "object", "properties": {}}}),
        json!({"type": "custom", "name": "apply_patch", "format": {"type": "grammar", "syntax": "lark", "definition": "start: /.+/"}}),
        json!({"type": "namespace", "name": "repo", "tools": [{"type": "function", "name": "read", "parameters": {"type": "object", "properties": {}}}]}),
        json!({"type": "local_shell"}),
        json!({"type": "shell"}),
        json!({"type": "apply_patch"}),
        json!({"type": "web_search"}),
        json!({"type": "file_search", "vector_store_ids": ["vs_1"]}),
        json!({"type": "mcp", "server_label": "docs", "server_url": "https://mcp.example/"}),
        json!({"type": "code_interpreter", "container": {"type": "auto"}}),
        json!({"type": "image_generation"}),
        json!({"type": "computer_use_preview", "display_width": 1024, "display_height": 768, "environment": "linux"}),
        json!({"type": "tool_search"}),
    ]
}

/// Every `tool_choice` form, with a label.
fn probe_choices() -> Vec<(&'static str, Value)> {
    vec![
        ("auto", json!("auto")),
        ("none", json!("none")),
        ("required", json!("required")),
        (
            "named function",
            json!({"type": "function", "name": "lookup"}),
        ),
        (
            "allowed_tools",
            json!({"type": "allowed_tools", "mode": "required", "tools": [{"type": "function", "name": "lookup"}]}),
        ),
    ]
}

/// The profile's native form of a hosted tool (`glm_tool`, `kimi_builtin`, …), if it has one.
fn native_form(profile: &Profile, kind: &str) -> Option<String> {
    let caps = &profile.tools;
    let form = match kind {
        "web_search" => serde_json::to_value(caps.web_search?).ok()?,
        "file_search" => serde_json::to_value(caps.file_search?).ok()?,
        "mcp" => serde_json::to_value(caps.mcp?).ok()?,
        _ => return None,
    };
    form.as_str().map(str::to_owned)
}

fn decision_word(decision: Decision) -> &'static str {
    match decision {
        Decision::Native => "native",
        Decision::Degraded => "degraded",
        Decision::Gateway => "gateway",
        Decision::Ignored => "ignored",
        Decision::Rejected => "rejected",
    }
}

/// The matrix of one profile as text, for a provider speaking `dialect`. The tool rows are the
/// planner's, the same for every dialect; the `tool_choice` and parameter rows describe the Chat
/// translation, so for another dialect they are replaced by a pointer to its own rules rather
/// than shown wrong.
pub fn report(profile: &Profile, dialect: Dialect) -> String {
    let mut out = format!("provider: {}\n", profile.name);
    if dialect != Dialect::Chat {
        out.push_str(&format!("dialect: {}\n", dialect.as_str()));
    }
    out.push_str("\ntools:\n");
    for probe in probe_tools() {
        let kind = probe["type"].as_str().unwrap_or_default().to_owned();
        let tool: Tool = match serde_json::from_value(probe) {
            Ok(t) => t,
            Err(e) => {
                out.push_str(&format!("  {kind:<22} (probe did not parse: {e})\n"));
                continue;
            }
        };
        match plan(std::slice::from_ref(&tool), None, &profile.tools) {
            Ok(p) => {
                // A namespace has an entry per member after its own; the members say what
                // reaches the provider.
                let entry = p.entries.last();
                let line = match entry {
                    Some(e) => format!(
                        "{:<9} as {:<24} ({})",
                        decision_word(e.decision),
                        e.provider_name
                            .clone()
                            .or_else(|| native_form(profile, &kind))
                            .unwrap_or_else(|| "-".to_owned()),
                        e.reason
                    ),
                    None => "nothing planned".to_owned(),
                };
                let flags = if p.request_flags.is_empty() {
                    String::new()
                } else {
                    format!(" + request fields {}", Value::Object(p.request_flags))
                };
                out.push_str(&format!("  {kind:<22} {line}{flags}\n"));
            }
            Err(e) => out.push_str(&format!("  {kind:<22} {:<9} ({})\n", "rejected", e.code())),
        }
    }

    if dialect != Dialect::Chat {
        out.push_str(&format!(
            "\ntool_choice and parameters: translated by the {0} dialect's own rules \
             (crates/providers/src/{0}/request.rs); the Chat rows do not apply\n",
            dialect.as_str()
        ));
        return out;
    }

    out.push_str("\ntool_choice (with one function declared):\n");
    let function: Vec<Tool> = serde_json::from_value(json!([probe_tools()[0]])).unwrap_or_default();
    for (label, choice) in probe_choices() {
        let line = match plan(&function, Some(&choice), &profile.tools) {
            Ok(p) => {
                let sent = match (&p.tool_choice, p.send_tools) {
                    (_, false) => "tools withheld".to_owned(),
                    (Some(c), true) => format!("sent as {c}"),
                    (None, true) => "omitted".to_owned(),
                };
                let downgrades: Vec<&str> = p.diagnostics.iter().map(|d| d.code.as_str()).collect();
                if downgrades.is_empty() {
                    sent
                } else {
                    format!("{sent} [{}]", downgrades.join(", "))
                }
            }
            Err(e) => format!("refused ({})", e.code()),
        };
        out.push_str(&format!("  {label:<22} {line}\n"));
    }

    out.push_str(&format!(
        "\nlimits: max tools {}, names up to {} chars of [A-Za-z0-9{}], strict {}\n",
        profile
            .tools
            .max_tools
            .map_or_else(|| "unlimited".to_owned(), |n| n.to_string()),
        profile.tools.name_max_len,
        profile.tools.name_punctuation,
        yes(profile.tools.strict),
    ));

    out.push_str("\nparameters:\n");
    let word = |v: Value| v.as_str().map_or_else(|| v.to_string(), str::to_owned);
    let rows: Vec<(&str, String)> = vec![
        (
            "developer role",
            if profile.developer_role {
                "kept".to_owned()
            } else {
                "sent as system".to_owned()
            },
        ),
        ("merge system turns", yes(profile.merge_system).to_owned()),
        (
            "max_output_tokens",
            format!("sent as {}", word(json!(profile.max_tokens_field))),
        ),
        (
            "temperature",
            format!(
                "clamped to {}..{}",
                profile.temperature_range[0], profile.temperature_range[1]
            ),
        ),
        ("penalties", yes(profile.penalties).to_owned()),
        ("stop", yes(profile.stop).to_owned()),
        ("logprobs", yes(profile.logprobs).to_owned()),
        (
            "end user",
            match word(json!(profile.end_user_field)).as_str() {
                "none" => "not sent".to_owned(),
                field => format!("sent as {field}"),
            },
        ),
        ("prompt_cache_key", yes(profile.prompt_cache_key).to_owned()),
        ("json_schema output", yes(profile.json_schema).to_owned()),
        ("json_object output", yes(profile.json_object).to_owned()),
        ("stream usage", yes(profile.stream_usage).to_owned()),
        (
            "parallel_tool_calls",
            yes(profile.parallel_tool_calls).to_owned(),
        ),
        ("reasoning effort", word(json!(profile.effort))),
        ("reasoning replay", word(json!(profile.reasoning_replay))),
        ("<think> tags", yes(profile.think_tags).to_owned()),
    ];
    for (name, value) in rows {
        out.push_str(&format!("  {name:<22} {value}\n"));
    }
    if !profile.extra_body.is_empty() {
        out.push_str(&format!(
            "  {:<22} {}\n",
            "extra body",
            Value::Object(profile.extra_body.clone())
        ));
    }
    if !profile.finish_reasons.is_empty() {
        let reasons: Vec<String> = profile
            .finish_reasons
            .iter()
            .map(|(r, k)| format!("{r}={}", word(json!(k))))
            .collect();
        out.push_str(&format!(
            "  {:<22} {}\n",
            "finish reasons",
            reasons.join(", ")
        ));
    }
    out
}

fn yes(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}
