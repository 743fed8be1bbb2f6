//! `toolbridge providers`: each provider's capability matrix, produced by running the real
//! planner and reading the real profile, so it cannot drift from what the gateway does.
//!
//! Every probe tool is planned on its own, so one tool the provider rejects does not hide what
//! happens to the others; each `tool_choice` form is planned with one function tool declared.

use serde_json::{Value, json};
use toolbridge_core::plan::{Decision, plan, plan_with};
use toolbridge_providers::profile::{CacheAffinity, Profile, ReasoningReplay};
use toolbridge_wire::responses::Tool;

use toolbridge_core::request::{Limits, normalize};
use toolbridge_wire::responses::CreateResponse;

use toolbridge_providers::dialect::{Dialect, Raw, Source};

use crate::http::responses::sealed_by_gateway;

mod efforts;

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

/// One parameter at a time, each set to a value that shows its handling.
fn probe_parameters() -> Vec<(&'static str, Value)> {
    vec![
        ("instructions", json!({"instructions": "Be brief."})),
        (
            "developer-role input",
            json!({"input": [{"role": "developer", "content": "Answer in French."}, {"role": "user", "content": "hi"}]}),
        ),
        ("temperature 1.7", json!({"temperature": 1.7})),
        ("top_p", json!({"top_p": 0.5})),
        ("presence_penalty", json!({"presence_penalty": 0.5})),
        ("frequency_penalty", json!({"frequency_penalty": 0.5})),
        ("max_output_tokens", json!({"max_output_tokens": 256})),
        ("top_logprobs", json!({"top_logprobs": 2})),
        ("safety_identifier", json!({"safety_identifier": "user-1"})),
        ("prompt_cache_key", json!({"prompt_cache_key": "thread-1"})),
        ("parallel_tool_calls", json!({"parallel_tool_calls": false})),
        ("reasoning effort", json!({"reasoning": {"effort": "high"}})),
        (
            "text json_schema",
            json!({"text": {"format": {"type": "json_schema", "name": "r", "strict": true,
                "schema": {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"], "additionalProperties": false}}}}),
        ),
        (
            "text json_object",
            json!({"text": {"format": {"type": "json_object"}}}),
        ),
        ("stream", json!({"stream": true})),
    ]
}

/// What the real translator of `dialect` does with `probe` compared with `base`: the upstream
/// body fields it adds or changes (values shortened), the fields it removes, and the
/// diagnostics it reports.
fn translation_row(profile: &Profile, dialect: Dialect, base: &Value, probe: &Value) -> String {
    let (before, _) = match translate(profile, dialect, base) {
        Ok(t) => t,
        Err(e) => return format!("(baseline refused: {e})"),
    };
    let (after, diagnostics) = match translate(profile, dialect, probe) {
        Ok(t) => t,
        Err(e) => return format!("refused ({e})"),
    };
    let mut old = Vec::new();
    let mut new = Vec::new();
    leaves("", &before, &mut old);
    leaves("", &after, &mut new);
    let mut parts: Vec<String> = new
        .iter()
        .filter(|leaf| !old.contains(leaf))
        .map(|(path, value)| format!("{path}={}", shorten(value)))
        .collect();
    let tools_gone =
        old.iter().any(|(p, _)| is_tool_path(p)) && !new.iter().any(|(p, _)| is_tool_path(p));
    if tools_gone {
        parts.push("tools withheld".to_owned());
    }
    let mut codes: Vec<String> = diagnostics
        .iter()
        .map(|d| match &d.param {
            Some(p) => format!("{}:{p}", d.code),
            None => d.code.clone(),
        })
        .collect();
    codes.dedup();
    let mut row = if parts.is_empty() {
        "nothing sent".to_owned()
    } else {
        parts.join(", ")
    };
    if !codes.is_empty() {
        row.push_str(&format!(" [{}]", codes.join(", ")));
    }
    row
}

fn is_tool_path(path: &str) -> bool {
    path.starts_with("tools")
}

/// A request translated by `dialect` as it would go upstream, with its diagnostics.
fn translate(
    profile: &Profile,
    dialect: Dialect,
    request: &Value,
) -> Result<(Value, Vec<toolbridge_wire::responses::Diagnostic>), String> {
    let req: CreateResponse = serde_json::from_value(request.clone()).map_err(|e| e.to_string())?;
    let raw = request.as_object().cloned().map(Raw::new);
    let canonical = normalize(&req, &Limits::default()).map_err(|e| e.code().to_owned())?;
    let plan = plan(
        &canonical.tools,
        canonical.tool_choice.as_ref(),
        &profile.tools,
    )
    .map_err(|e| e.code().to_owned())?;
    let mut diagnostics = canonical.diagnostics.clone();
    diagnostics.extend(plan.diagnostics.iter().cloned());
    let outgoing = crate::http::responses::translate(
        dialect,
        &Source {
            req: &req,
            raw: raw.as_ref(),
            canonical: &canonical,
            stored: false,
            sealed_by_gateway: &sealed_by_gateway,
            provenance: None,
        },
        &plan,
        profile,
        "model",
        &mut diagnostics,
    );
    let body = serde_json::from_slice(&outgoing.payload()).map_err(|e| e.to_string())?;
    Ok((body, diagnostics))
}

/// Every leaf of `value` with its dotted path; an object or array is a leaf when the whole of
/// it is short, so a small changed object reads as one field.
fn leaves(path: &str, value: &Value, out: &mut Vec<(String, Value)>) {
    let compact = value.to_string().len() <= 48;
    match value {
        Value::Object(map) if !compact && !map.is_empty() => {
            for (k, v) in map {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                leaves(&p, v, out);
            }
        }
        Value::Array(items) if !compact && !items.is_empty() => {
            for (i, v) in items.iter().enumerate() {
                leaves(&format!("{path}[{i}]"), v, out);
            }
        }
        _ => out.push((path.to_owned(), value.clone())),
    }
}

fn shorten(value: &Value) -> String {
    let text = value.to_string();
    if text.chars().count() > 48 {
        let cut: String = text.chars().take(45).collect();
        format!("{cut}...")
    } else {
        text
    }
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
///
/// With the config's gateway tools (`gateway`, for client model `model`), a hosted tool the
/// gateway serves (`web_search` with a search backend, `image_generation` with an images
/// backend) shows as `gateway`.
pub(super) fn report(
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
    if dialect.passes_through() {
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
                    decision_word(e.decision),
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

/// The baseline every translation row is compared with: one function tool declared.
fn baseline() -> Value {
    json!({"model": "m", "input": "hi", "tools": [probe_tools()[0]]})
}

/// What the translator sends for each `tool_choice` form.
fn choice_rows(profile: &Profile, dialect: Dialect) -> String {
    let base = baseline();
    let mut out = String::new();
    for (label, choice) in probe_choices() {
        let mut probe = base.clone();
        probe["tool_choice"] = choice;
        out.push_str(&format!(
            "  {label:<22} {}\n",
            translation_row(profile, dialect, &base, &probe)
        ));
    }
    out
}

/// The profile's limits on tools: how many, their names, strict schemas.
fn limits_line(profile: &Profile) -> String {
    format!(
        "\nlimits: max tools {}, names up to {} chars of [A-Za-z0-9{}], strict {}\n",
        profile
            .tools
            .max_tools
            .map_or_else(|| "unlimited".to_owned(), |n| n.to_string()),
        profile.tools.name_max_len,
        profile.tools.name_punctuation,
        yes(profile.tools.strict),
    )
}

/// How the provider caches the prompt's prefix (the profile's cache plan).
fn cache_line(profile: &Profile) -> String {
    let c = &profile.cache;
    let from = |min: u32| {
        if min > 0 {
            format!(" from {min} tokens")
        } else {
            String::new()
        }
    };
    let mut parts = Vec::new();
    if c.automatic {
        let unit = if c.unit_tokens > 0 {
            format!(" in {}-token steps", c.unit_tokens)
        } else {
            String::new()
        };
        parts.push(format!("automatic prefix{unit}{}", from(c.min_tokens)));
    }
    if c.max_breakpoints > 0 {
        let who = if c.places() {
            "placed by the gateway"
        } else {
            "the client's only"
        };
        let ttl = match (c.ttl.as_str(), c.ttls.is_empty()) {
            (_, true) => String::new(),
            ("", false) => format!(
                ", the provider's default lifetime ({} offered)",
                c.ttls.join("|")
            ),
            (ttl, false) => format!(", lifetime {ttl} ({} offered)", c.ttls.join("|")),
        };
        parts.push(format!(
            "breakpoints up to {} ({who}){ttl}{}",
            c.max_breakpoints,
            from(c.min_tokens)
        ));
    }
    if parts.is_empty() {
        parts.push("none known".to_owned());
    }
    let affinity = match c.affinity {
        CacheAffinity::None => "none",
        CacheAffinity::PromptCacheKey => "prompt_cache_key",
        CacheAffinity::MetadataUserId => "metadata.user_id",
    };
    format!(
        "prompt cache: {}; affinity key: {affinity}\n",
        parts.join("; ")
    )
}

/// Tool outputs given as parts, and the request fields the gateway does not translate.
fn fields_line(profile: &Profile, dialect: Dialect) -> String {
    let f = &profile.fields;
    // A native Responses upstream gets the parts as the client sent them.
    let outputs = if dialect.passes_through() {
        "as sent".to_owned()
    } else {
        word(serde_json::to_value(profile.tool_output).unwrap_or_default())
    };
    let renamed: Vec<String> = f
        .rename
        .iter()
        .map(|(from, to)| format!("{from} -> {}", to.as_str().unwrap_or("?")))
        .collect();
    let list = |items: &[String]| {
        if items.is_empty() {
            "none".to_owned()
        } else {
            items.join(", ")
        }
    };
    format!(
        "tool outputs as parts: {}; unknown request fields: {}; dropped: {}; renamed: {}\n",
        outputs,
        word(serde_json::to_value(f.unknown).unwrap_or_default()),
        list(&f.drop),
        list(&renamed),
    )
}

/// What a native Responses endpoint gets back of its own plaintext reasoning.
fn responses_reasoning_line(profile: &Profile) -> String {
    let turns = match profile.reasoning_replay {
        ReasoningReplay::Never => {
            return "plaintext reasoning: as the client sends it\n".to_owned();
        }
        ReasoningReplay::ToolCallTurns => "turns with calls",
        ReasoningReplay::All => "every turn",
    };
    format!(
        "plaintext reasoning: replayed on {turns}, sealed into encrypted_content for the client and sent back as reasoning_text; another provider's left out\n"
    )
}

/// What the translator sends for each parameter probe, set one at a time on the baseline.
fn parameter_rows(profile: &Profile, dialect: Dialect) -> String {
    let base = baseline();
    let mut out = String::new();
    for (label, change) in probe_parameters() {
        let mut probe = base.clone();
        if let (Some(p), Some(c)) = (probe.as_object_mut(), change.as_object()) {
            p.extend(c.clone());
        }
        out.push_str(&format!(
            "  {label:<22} {}\n",
            translation_row(profile, dialect, &base, &probe)
        ));
    }
    out
}

/// The Chat profile's own switches, one row each, then its extra body and finish reasons when
/// it has them.
fn chat_profile_rows(profile: &Profile) -> String {
    let mut out = String::new();
    for (name, value) in chat_profile_table(profile) {
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

/// A serialized profile value as a word: a string as itself, anything else as JSON.
fn word(v: Value) -> String {
    v.as_str().map_or_else(|| v.to_string(), str::to_owned)
}

/// The Chat profile's switches as `(row name, value)`, in the order printed.
fn chat_profile_table(profile: &Profile) -> Vec<(&'static str, String)> {
    vec![
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
        ("reasoning replay", word(json!(profile.reasoning_replay))),
        ("reasoning field", word(json!(profile.reasoning_field))),
        ("<think> tags", yes(profile.think_tags).to_owned()),
        ("tool_stream flag", yes(profile.tool_stream).to_owned()),
    ]
}

fn yes(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}
