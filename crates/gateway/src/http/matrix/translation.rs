//! The translation rows of `toolbridge providers`: each `tool_choice` form and each parameter,
//! set on a one-tool baseline and sent through the real translator, read as the upstream body
//! fields it changes and the diagnostics it reports.
//!
//! Not here: the planner's rows for each tool type and the profile's own lines (the parent).

use serde_json::{Value, json};
use toolbridge_core::plan::plan;
use toolbridge_core::request::{Limits, normalize};
use toolbridge_providers::dialect::{Dialect, Raw, Source};
use toolbridge_providers::profile::Profile;
use toolbridge_wire::responses::CreateResponse;

use super::probe_tools;
use crate::http::responses::sealed_by_gateway;

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

/// The baseline every translation row is compared with: one function tool declared.
fn baseline() -> Value {
    json!({"model": "m", "input": "hi", "tools": [probe_tools()[0]]})
}

/// What the translator sends for each `tool_choice` form.
pub(super) fn choice_rows(profile: &Profile, dialect: Dialect) -> String {
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

/// What the translator sends for each parameter probe, set one at a time on the baseline.
pub(super) fn parameter_rows(profile: &Profile, dialect: Dialect) -> String {
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
