//! Each provider's capability matrix (`toolbridge providers`, and the console's providers page),
//! produced by running the real planner and translator and reading the real profile, so it
//! cannot drift from what the gateway does. In `http` because it translates through
//! `responses::translate`, the one place bodies are built.
//!
//! Every probe tool is planned on its own, so one tool the provider rejects does not hide what
//! happens to the others; each `tool_choice` form is planned with one function tool declared.

use serde_json::{Value, json};
use toolbridge_core::plan::plan_with;
use toolbridge_providers::dialect::Dialect;
use toolbridge_providers::profile::Profile;
use toolbridge_wire::responses::Tool;

mod efforts;
mod profile;
mod translation;

use profile::{cache_line, chat_profile_rows, fields_line, limits_line, responses_reasoning_line};
use translation::{choice_rows, parameter_rows};

/// The MCP probe's server. A constant, so the probe table below holds no `//` inside a string
/// (`rust_shape.py` strips from `//` to the end of a line before counting braces, and took the
/// table for a function of several hundred lines).
const MCP_PROBE_URL: &str = "https://mcp.example/";

/// The tool of every type a Codex or SDK request may carry, one each: the probes as data.
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
        json!({"type": "mcp", "server_label": "docs", "server_url": MCP_PROBE_URL}),
        json!({"type": "code_interpreter", "container": {"type": "auto"}}),
        json!({"type": "image_generation"}),
        json!({"type": "computer_use_preview", "display_width": 1024, "display_height": 768, "environment": "linux"}),
        // The client-run form Codex declares (the hosted form has no provider-side decision).
        json!({"type": "tool_search", "execution": "client"}),
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

/// The matrix of one profile as text, for a provider speaking `dialect`. The tool rows are the
/// planner's, the same for every dialect; the `tool_choice` and parameter rows describe the Chat
/// translation, so for another dialect they are replaced by a pointer to its own rules rather
/// than shown wrong.
///
/// With the config's gateway tools (`gateway`, for client model `model`), a hosted tool the
/// gateway serves (`web_search` with a search backend, `image_generation` with an images
/// backend) shows as `gateway`.
pub(crate) fn report(
    profile: &Profile,
    dialect: Dialect,
    gateway: Option<(&crate::tools::GatewayTools, &str)>,
) -> String {
    let mut out = format!("provider: {}\n", profile.name);
    if dialect != Dialect::default() {
        out.push_str(&format!("dialect: {}\n", dialect.as_str()));
    }
    out.push_str("\ntools:\n");
    for probe in probe_tools() {
        out.push_str(&tool_row(profile, probe, gateway));
    }
    out.push_str("\ntool_choice (with one function declared; what the translator sends):\n");
    out.push_str(&choice_rows(profile, dialect));
    out.push_str(&limits_line(profile));
    out.push_str(&fields_line(profile, dialect));
    out.push_str(&cache_line(profile));
    if dialect.sends_client_request() {
        out.push_str(&responses_reasoning_line(profile));
    } else {
        out.push_str(&efforts::rows(profile));
    }
    out.push_str("\nparameters (what the translator sends, and its diagnostics):\n");
    out.push_str(&parameter_rows(profile, dialect));
    if dialect.reads_chat_profile() {
        out.push_str("\nprofile (Chat dialect):\n");
        out.push_str(&chat_profile_rows(profile));
    }
    out.push_str("\nCodex catalog (GET /v1/models?client_version=…, repair on):\n");
    out.push_str(&catalog_rows(profile, dialect));
    out
}

/// What the Codex catalog says of this preset's models, from the same derivation the catalog
/// uses (the gateway's own search counted as not configured).
fn catalog_rows(profile: &Profile, dialect: Dialect) -> String {
    let caps = crate::catalog::derive::capabilities(profile, dialect, true, false);
    caps.rows()
        .iter()
        .map(|(name, value)| format!("  {name:<22} {value}\n"))
        .collect()
}

/// One probe tool planned on its own: the planner's decision for it, the name it reaches the
/// provider under, and the request fields it sets.
fn tool_row(
    profile: &Profile,
    probe: Value,
    gateway: Option<(&crate::tools::GatewayTools, &str)>,
) -> String {
    let kind = probe["type"].as_str().unwrap_or_default().to_owned();
    let tool: Tool = match serde_json::from_value(probe) {
        Ok(t) => t,
        Err(e) => return format!("  {kind:<22} (probe did not parse: {e})\n"),
    };
    let tools = std::slice::from_ref(&tool);
    let offer = gateway
        .map(|(g, model)| g.offer_for(model, tools, &profile.tools, &[]))
        .unwrap_or_default();
    match plan_with(tools, None, &profile.tools, &offer) {
        Ok(p) => {
            // A namespace has an entry per member after its own; the members say what
            // reaches the provider. The gateway's own functions come after the declared tools.
            // `call_found_tool`, declared beside a `tool_search` sent as a function, is said
            // after the search's own row.
            let entry = p.entries.iter().rfind(|e| {
                e.param.starts_with("tools[")
                    && e.reason != toolbridge_core::plan::reasons::CALL_FOUND
            });
            let dispatcher = p
                .entries
                .iter()
                .any(|e| e.reason == toolbridge_core::plan::reasons::CALL_FOUND);
            let line = match entry {
                Some(e) => format!(
                    "{:<9} as {:<24} ({})",
                    e.decision.as_str(),
                    e.provider_name
                        .clone()
                        .or_else(|| native_form(profile, &kind))
                        .unwrap_or_else(|| "-".to_owned()),
                    e.reason
                ),
                None => "nothing planned".to_owned(),
            };
            let mut flags = if p.request_flags.is_empty() {
                String::new()
            } else {
                format!(" + request fields {}", Value::Object(p.request_flags))
            };
            if dispatcher {
                flags.push_str(" + call_found_tool for the tools it finds");
            }
            format!("  {kind:<22} {line}{flags}\n")
        }
        Err(e) => format!("  {kind:<22} {:<9} ({})\n", "rejected", e.code()),
    }
}

/// The profiles of the configured providers (`provider`: only that one), each as `model` is
/// served (`dialect_for`); without a model, the models served in another dialect get their own.
pub(crate) fn configured_profiles(
    config: &crate::config::Config,
    provider: Option<&str>,
    model: Option<&str>,
) -> Vec<(toolbridge_providers::profile::Profile, Dialect)> {
    let mut profiles = Vec::new();
    for (name, p) in &config.providers {
        if provider.is_some_and(|wanted| wanted != name) {
            continue;
        }
        let served = p.for_model(model.unwrap_or_default());
        let mut profile = served.profile_for(model.unwrap_or_default());
        profile.name = format!("{name} ({})", profile.name);
        profiles.push((profile, served.dialect));
        for d in p.dialect_for.iter().filter(|_| model.is_none()) {
            let mut profile = d.provider.profile.clone();
            profile.name = format!("{name}, models {} ({})", d.pattern, profile.name);
            profiles.push((profile, d.provider.dialect));
        }
    }
    profiles
}

/// The capability matrix of the configured provider `name`, as `toolbridge providers --config
/// … --provider NAME` prints it (the console's providers page).
pub(crate) fn provider_matrix(config: &crate::config::Config, name: &str) -> String {
    let served = config.gateway_tools.as_deref().map(|g| (g, "*"));
    configured_profiles(config, Some(name), None)
        .iter()
        .map(|(profile, dialect)| report(profile, *dialect, served))
        .collect::<Vec<_>>()
        .join("\n")
}
