//! The plan for a native Responses upstream, from its profile's [`ResponsesTools`]: every tool
//! the endpoint takes goes as declared (byte for byte where nothing else changes), every other
//! one is planned as for a translating dialect — a `custom` tool or a built-in type degraded to
//! a function, a namespace flattened, a hosted tool the endpoint lacks left out or refused —,
//! under names allocated for the whole set, so the relay can restore each degraded call as the
//! item the client declared.
//!
//! When every tool goes as declared this is the passthrough plan (`passthrough`), unchanged.
//!
//! An endpoint that does not take `tool_search` gets it as a function, and the searches the
//! client echoes as that function's calls and outputs (`providers::responses::history`): the
//! tools a `tool_search_output` found are then planned after the declared ones, as the
//! translating planner plans them (`context`), since the upstream no longer reads them from the
//! item.
//!
//! Not here: the translating planner's decisions themselves (`candidates`, `tool_types`,
//! `hosted`), which this reuses.

use serde_json::{Map, Value, json};
use toolbridge_wire::responses::{Diagnostic, Tool};

use super::candidates::{self, Candidate, HOSTED_TYPES, check_name, ignored};
use super::{
    Decision, GatewayOffer, Identity, NameMap, NativeTool, PlanEntry, ResponsesTools,
    ToolCapabilities, ToolPlan, ToolTypeDecision, UpstreamTool, drop_absent_fields, named,
    passthrough, reasons,
};
use crate::Error;
use crate::canonical::{ContextSource, ContextTool};
use crate::diagnostics::{TOOL_IGNORED, diag};

/// What the endpoint's profile decides for one declared tool.
fn decision(tool: &Tool, r: &ResponsesTools) -> ToolTypeDecision {
    match tool {
        Tool::Function(_) => ToolTypeDecision::Native,
        Tool::Custom(_) => r.custom,
        Tool::Namespace(_) => r.namespace,
        Tool::Other(_) => match tool.kind() {
            "local_shell" => r.local_shell,
            "shell" => r.shell,
            "apply_patch" => r.apply_patch,
            kind if HOSTED_TYPES.contains(&kind) || kind.starts_with("web_search") => {
                if r.runs(kind) {
                    ToolTypeDecision::Native
                } else {
                    // Planned as for a translating dialect.
                    ToolTypeDecision::Degraded
                }
            }
            _ => r.unknown,
        },
    }
}

/// Plans `tools` for a native Responses upstream with `caps`.
pub(super) fn plan(
    tools: &[Tool],
    context: &[ContextTool],
    tool_choice: Option<&Value>,
    caps: &ToolCapabilities,
    offer: &GatewayOffer,
) -> Result<ToolPlan, Error> {
    let r = &caps.responses;
    if tools
        .iter()
        .all(|t| decision(t, r) == ToolTypeDecision::Native)
    {
        return passthrough::plan_passthrough(tools, tool_choice, caps);
    }
    // The translating planner, reading the endpoint's own decisions for client-run types.
    let mut planned = caps.clone();
    planned.responses_native = false;
    planned.tool_types = r.tool_types();
    let mut diagnostics = Vec::new();
    let mut flags = Map::new();
    let mut found = declared(tools, r, &planned, offer, &mut flags, &mut diagnostics)?;
    let dispatched = add_searched(context, &planned, &mut found, &mut flags, &mut diagnostics);
    let names = NameMap::allocate(
        found
            .iter()
            .filter_map(|c| c.identity.clone().map(|id| (c.entry.param.clone(), id))),
        &planned,
    )?;
    let (entries, upstream) = limited(found, &names, caps.max_tools, &mut diagnostics)?;
    let functions: Vec<&str> = upstream
        .iter()
        .filter_map(|u| match u {
            UpstreamTool::Function { name, .. } => Some(name.as_str()),
            UpstreamTool::Native(_) => None,
        })
        .collect();
    let tool_choice = tool_choice.map(|choice| choice_for(choice, &names, &functions));
    Ok(ToolPlan {
        entries,
        upstream,
        request_flags: flags,
        tool_choice,
        send_tools: true,
        names,
        echo_tools: Vec::new(),
        dispatched,
        diagnostics,
    })
}

/// The candidates of the declared tools, each as the endpoint's profile decides: as declared,
/// left out, refused, or planned as for a translating dialect.
fn declared(
    tools: &[Tool],
    r: &ResponsesTools,
    planned: &ToolCapabilities,
    offer: &GatewayOffer,
    flags: &mut Map<String, Value>,
    diagnostics: &mut Vec<Diagnostic>,
) -> Result<Vec<Candidate>, Error> {
    let mut found = Vec::with_capacity(tools.len());
    for (i, tool) in tools.iter().enumerate() {
        let param = format!("tools[{i}]");
        match (decision(tool, r), tool) {
            (ToolTypeDecision::Native, _) => found.push(as_declared(&param, tool)?),
            (ToolTypeDecision::Rejected, _) => {
                return Err(Error::UnsupportedTool {
                    param,
                    kind: tool.kind().to_owned(),
                });
            }
            (ToolTypeDecision::Ignored, _) => {
                diagnostics.push(diag(
                    TOOL_IGNORED,
                    Some(&param),
                    format!(
                        "the provider's endpoint does not take `{}` tools; it was left out",
                        tool.kind()
                    ),
                ));
                found.push(ignored(&param, tool.kind(), reasons::NO_PROVIDER_SUPPORT));
            }
            (ToolTypeDecision::Degraded, _) => found.extend(candidates::declared_one(
                &param,
                tool,
                planned,
                offer,
                flags,
                diagnostics,
            )?),
        }
    }
    Ok(found)
}

/// The tools earlier searches found, added to `found` when `tool_search` goes as a function;
/// the identities reached through `call_found_tool`.
fn add_searched(
    context: &[ContextTool],
    planned: &ToolCapabilities,
    found: &mut Vec<Candidate>,
    flags: &mut Map<String, Value>,
    diagnostics: &mut Vec<Diagnostic>,
) -> Vec<Identity> {
    // The searches reach the upstream as the degraded function's calls only when that function
    // is declared; then so must the tools they found.
    let mut dispatched = Vec::new();
    if found
        .iter()
        .any(|c| c.identity == Some(Identity::ToolSearch))
    {
        let searched: Vec<ContextTool> = context
            .iter()
            .filter(|c| c.source == ContextSource::Found)
            .cloned()
            .collect();
        let lifted = super::context::candidates(&searched, planned, found, flags, diagnostics);
        dispatched = super::search::dispatch(found, lifted, planned, context);
    }
    dispatched
}

/// The named entries and upstream tools, the upstream tools fitted to `max_tools` (an error
/// when they cannot be).
fn limited(
    found: Vec<Candidate>,
    names: &NameMap,
    max_tools: Option<usize>,
    diagnostics: &mut Vec<Diagnostic>,
) -> Result<(Vec<PlanEntry>, Vec<UpstreamTool>), Error> {
    let (mut entries, mut upstream) = named(found, names);
    if let Some(max) = max_tools {
        let dropped = super::context::fit_limit(&mut upstream, max, diagnostics);
        super::context::mark_dropped(&mut entries, &dropped);
    }
    let upstream: Vec<UpstreamTool> = upstream.into_iter().map(|(_, u)| u).collect();
    if let Some(max) = max_tools
        && upstream.len() > max
    {
        return Err(Error::TooManyTools {
            count: upstream.len(),
            limit: max,
        });
    }
    Ok((entries, upstream))
}

/// A tool the endpoint takes as it was declared. A function or custom tool keeps its identity
/// (its name is reserved against the degraded tools' names, and kept unless the endpoint's
/// charset forbids it).
fn as_declared(param: &str, tool: &Tool) -> Result<Candidate, Error> {
    let identity = match tool {
        Tool::Function(f) => {
            check_name(param, &f.name)?;
            Some(Identity::Function {
                namespace: None,
                name: f.name.clone(),
            })
        }
        Tool::Custom(c) => {
            check_name(param, &c.name)?;
            Some(Identity::Custom {
                namespace: None,
                name: c.name.clone(),
            })
        }
        Tool::Namespace(ns) => {
            check_name(param, &ns.name)?;
            None
        }
        Tool::Other(_) => None,
    };
    let mut value = serde_json::to_value(tool).map_err(|e| Error::invalid(param, e.to_string()))?;
    drop_absent_fields(&mut value);
    let name = match tool {
        Tool::Function(f) => Some(f.name.clone()),
        Tool::Custom(c) => Some(c.name.clone()),
        Tool::Namespace(ns) => Some(ns.name.clone()),
        Tool::Other(map) => map.get("name").and_then(Value::as_str).map(str::to_owned),
    };
    Ok(Candidate {
        entry: PlanEntry {
            param: param.to_owned(),
            kind: tool.kind().to_owned(),
            name,
            decision: Decision::Native,
            reason: reasons::RESPONSES_NATIVE,
            provider_name: None,
        },
        identity,
        upstream: Some(UpstreamTool::Native(NativeTool::AsDeclared(value))),
    })
}

/// `tool_choice` in the Responses shape: a named tool that went upstream as a function (one of
/// `functions`) is named as that function, and so is each such tool an `allowed_tools` choice
/// lists (a flattened namespace listed whole becomes its member functions); anything else as
/// sent.
fn choice_for(choice: &Value, names: &NameMap, functions: &[&str]) -> Value {
    let Some(obj) = choice.as_object() else {
        return choice.clone();
    };
    if obj.get("type").and_then(Value::as_str) == Some("allowed_tools") {
        return allowed_tools_for(obj, names, functions);
    }
    match as_function(obj, names, functions) {
        Some(provider) => json!({"type": "function", "name": provider}),
        None => choice.clone(),
    }
}

/// The provider name of the tool `obj` names, when that tool went upstream as a function.
fn as_function(obj: &Map<String, Value>, names: &NameMap, functions: &[&str]) -> Option<String> {
    let name = obj.get("name").and_then(Value::as_str);
    let namespace = obj
        .get("namespace")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let identity = match (obj.get("type").and_then(Value::as_str), name) {
        (Some("custom"), Some(name)) => Identity::Custom {
            namespace,
            name: name.to_owned(),
        },
        (Some("function"), Some(name)) => Identity::Function {
            namespace,
            name: name.to_owned(),
        },
        (Some("local_shell"), _) => Identity::LocalShell,
        (Some("shell"), _) => Identity::Shell,
        (Some("apply_patch"), _) => Identity::ApplyPatch,
        (Some("tool_search"), _) => Identity::ToolSearch,
        _ => return None,
    };
    names
        .provider_name(&identity)
        .filter(|provider| functions.contains(provider))
        .map(str::to_owned)
}

/// An `allowed_tools` choice with every listed tool that went upstream as a function named as
/// that function; the other entries and fields as sent.
fn allowed_tools_for(obj: &Map<String, Value>, names: &NameMap, functions: &[&str]) -> Value {
    let Some(listed) = obj.get("tools").and_then(Value::as_array) else {
        return Value::Object(obj.clone());
    };
    let function = |name: &str| json!({"type": "function", "name": name});
    let mut tools = Vec::with_capacity(listed.len());
    for entry in listed {
        let Some(tool) = entry.as_object() else {
            tools.push(entry.clone());
            continue;
        };
        if let Some(provider) = as_function(tool, names, functions) {
            tools.push(function(&provider));
            continue;
        }
        let flattened: Vec<&str> = match (tool.get("type"), tool.get("name")) {
            (Some(Value::String(kind)), Some(Value::String(ns))) if kind == "namespace" => {
                functions
                    .iter()
                    .copied()
                    .filter(|f| {
                        matches!(names.identity(f), Some(Identity::Function { namespace: Some(n), .. }
                            | Identity::Custom { namespace: Some(n), .. }) if n == ns)
                    })
                    .collect()
            }
            _ => Vec::new(),
        };
        if flattened.is_empty() {
            tools.push(entry.clone());
        } else {
            tools.extend(flattened.into_iter().map(function));
        }
    }
    let mut out = obj.clone();
    out.insert("tools".to_owned(), Value::Array(tools));
    Value::Object(out)
}

#[cfg(test)]
mod tests;
