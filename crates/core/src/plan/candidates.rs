//! The candidates of a plan: one per declared tool (a namespace's children each one), and one per
//! tool the gateway offers, each with its plan entry, the identity its name is allocated for,
//! and what goes upstream.
//!
//! Not here: the hosted tools' own decisions (`hosted`), the client-run tool types
//! (`tool_types`), name allocation (`names`) and `tool_choice` (`choice`).

use serde_json::{Map, Value, json};
use toolbridge_wire::responses::{CustomTool, Diagnostic, FunctionTool, Tool};

use super::hosted::{file_search, mcp, web_search};
use super::{
    Decision, GatewayOffer, Identity, PlanEntry, ToolCapabilities, UnsupportedPolicy, UpstreamTool,
    reasons, schemas,
};
use crate::Error;
use crate::diagnostics::{TOOL_DEGRADED, TOOL_IGNORED, diag};

mod client;

/// Tool types the Responses API defines that toolbridge knows how to plan.
pub(super) const HOSTED_TYPES: &[&str] = &[
    "web_search",
    "web_search_preview",
    "web_search_2025_08_26",
    "web_search_preview_2025_03_11",
    "file_search",
    "mcp",
    "tool_search",
    "computer",
    "computer_use",
    "computer_use_preview",
    "image_generation",
    "code_interpreter",
];

pub(super) struct Candidate {
    pub(super) entry: PlanEntry,
    pub(super) identity: Option<Identity>,
    pub(super) upstream: Option<UpstreamTool>,
}

/// The candidates of the declared tools, in order: a tool the gateway serves in the provider's
/// place, a namespace's children, or the tool's own decision.
pub(super) fn declared(
    tools: &[Tool],
    caps: &ToolCapabilities,
    offer: &GatewayOffer,
    flags: &mut Map<String, Value>,
    diagnostics: &mut Vec<Diagnostic>,
) -> Result<Vec<Candidate>, Error> {
    let mut candidates = Vec::with_capacity(tools.len() + offer.tools.len());
    for (i, tool) in tools.iter().enumerate() {
        let param = format!("tools[{i}]");
        candidates.extend(declared_one(&param, tool, caps, offer, flags, diagnostics)?);
    }
    Ok(candidates)
}

/// The candidates of one declared tool (a namespace's children each one).
pub(super) fn declared_one(
    param: &str,
    tool: &Tool,
    caps: &ToolCapabilities,
    offer: &GatewayOffer,
    flags: &mut Map<String, Value>,
    diagnostics: &mut Vec<Diagnostic>,
) -> Result<Vec<Candidate>, Error> {
    if let Some(candidate) = served_by_gateway(param, tool, caps, offer) {
        return Ok(vec![candidate]);
    }
    if offer.tool_search
        && let Some(candidate) = super::search::hosted_candidate(param, tool)
    {
        return Ok(vec![candidate]);
    }
    match tool {
        Tool::Namespace(ns) => {
            if ns.name.is_empty() {
                return Err(Error::invalid(format!("{param}.name"), "must not be empty"));
            }
            diagnostics.push(diag(
                TOOL_DEGRADED,
                Some(param),
                format!(
                    "namespace `{}` is flattened into `{}__<name>` functions; calls come back with namespace and name",
                    ns.name, ns.name
                ),
            ));
            let mut candidates = Vec::with_capacity(ns.tools.len());
            for (j, child) in ns.tools.iter().enumerate() {
                let child_param = format!("{param}.tools[{j}]");
                candidates.push(namespaced(
                    &child_param,
                    &ns.name,
                    child,
                    caps,
                    diagnostics,
                )?);
            }
            Ok(candidates)
        }
        other => candidate(param, other, caps, flags, diagnostics),
    }
}

/// The candidates of the tools the gateway runs itself: functions under the `gateway` decision.
pub(super) fn offered(offer: &GatewayOffer) -> impl Iterator<Item = Candidate> + '_ {
    offer.tools.iter().enumerate().map(|(i, tool)| Candidate {
        entry: PlanEntry {
            param: format!("gateway.tools[{i}]"),
            kind: "function".to_owned(),
            name: Some(format!("{}.{}", tool.server, tool.name)),
            decision: Decision::Gateway,
            reason: reasons::GATEWAY_TOOL,
            provider_name: None,
        },
        identity: Some(Identity::Gateway {
            server: tool.server.clone(),
            name: tool.name.clone(),
        }),
        upstream: Some(UpstreamTool::Function {
            name: tool.name.clone(),
            description: tool.description.clone(),
            parameters: tool.parameters.clone().into(),
            strict: None,
        }),
    })
}

/// A declared hosted tool the provider lacks and the gateway serves: `web_search` by the
/// gateway's search, `image_generation` by its images backend, an `mcp` server the gateway
/// listed. Its functions come from the offer.
pub(super) fn served_by_gateway(
    param: &str,
    tool: &Tool,
    caps: &ToolCapabilities,
    offer: &GatewayOffer,
) -> Option<Candidate> {
    let Tool::Other(map) = tool else {
        return None;
    };
    let kind = map.get("type").and_then(Value::as_str).unwrap_or_default();
    let reason = if kind.starts_with("web_search") {
        let allowed = map.get("external_web_access") != Some(&Value::Bool(false));
        (offer.web_search && allowed && caps.web_search.is_none())
            .then_some(reasons::GATEWAY_WEB_SEARCH)?
    } else if kind == "image_generation" {
        offer
            .image_generation
            .then_some(reasons::GATEWAY_IMAGE_GENERATION)?
    } else if kind == "mcp" {
        let label = map.get("server_label").and_then(Value::as_str)?;
        (caps.mcp.is_none() && offer.mcp_servers.iter().any(|l| l == label))
            .then_some(reasons::GATEWAY_MCP)?
    } else {
        return None;
    };
    Some(Candidate {
        entry: PlanEntry {
            param: param.to_owned(),
            kind: kind.to_owned(),
            name: map
                .get("server_label")
                .and_then(Value::as_str)
                .map(str::to_owned),
            decision: Decision::Gateway,
            reason,
            provider_name: None,
        },
        identity: None,
        upstream: None,
    })
}

/// The candidates of one tool outside a namespace: a function, a custom tool, or a tool known by
/// its `type` alone (a namespace's children are planned by `namespaced`).
pub(super) fn candidate(
    param: &str,
    tool: &Tool,
    caps: &ToolCapabilities,
    flags: &mut Map<String, Value>,
    diagnostics: &mut Vec<Diagnostic>,
) -> Result<Vec<Candidate>, Error> {
    match tool {
        Tool::Function(f) => client::function(param, f, caps, diagnostics).map(|c| vec![c]),
        Tool::Custom(c) => client::custom(param, tool, c, caps, diagnostics).map(|c| vec![c]),
        Tool::Namespace(_) => Ok(Vec::new()),
        Tool::Other(map) => typed(param, tool, map, caps, flags, diagnostics),
    }
}

/// The candidates of a tool known by its `type` alone: a client-run built-in, a hosted tool, or
/// an error for a type that is missing or unknown.
fn typed(
    param: &str,
    tool: &Tool,
    map: &Map<String, Value>,
    caps: &ToolCapabilities,
    flags: &mut Map<String, Value>,
    diagnostics: &mut Vec<Diagnostic>,
) -> Result<Vec<Candidate>, Error> {
    let kind = map.get("type").and_then(Value::as_str).unwrap_or("");
    match kind {
        "local_shell" | "shell" | "apply_patch" => {
            client::builtin(param, kind, tool, caps, diagnostics).map(|c| vec![c])
        }
        "tool_search" => super::search::tool_search(param, tool, map, caps, diagnostics),
        k if k.starts_with("web_search") => {
            web_search(param, map, caps, flags, diagnostics).map(|c| vec![c])
        }
        "file_search" => file_search(param, map, caps, diagnostics),
        "mcp" => mcp(param, map, caps, diagnostics).map(|c| vec![c]),
        k if HOSTED_TYPES.contains(&k) => unsupported(param, k, caps, diagnostics).map(|c| vec![c]),
        "" => Err(Error::invalid(format!("{param}.type"), "is missing")),
        other => Err(Error::UnsupportedToolType {
            param: param.to_owned(),
            kind: other.to_owned(),
        }),
    }
}

pub(super) fn namespaced(
    param: &str,
    namespace: &str,
    tool: &Tool,
    caps: &ToolCapabilities,
    diagnostics: &mut Vec<Diagnostic>,
) -> Result<Candidate, Error> {
    let entry = |kind: &str, name: &str| PlanEntry {
        param: param.to_owned(),
        kind: kind.to_owned(),
        name: Some(format!("{namespace}.{name}")),
        decision: Decision::Degraded,
        reason: reasons::NAMESPACE_FLATTENED,
        provider_name: None,
    };
    match tool {
        Tool::Function(f) => {
            check_name(param, &f.name)?;
            Ok(Candidate {
                entry: entry("function", &f.name),
                identity: Some(Identity::Function {
                    namespace: Some(namespace.to_owned()),
                    name: f.name.clone(),
                }),
                upstream: Some(function_upstream(param, f, caps, diagnostics)),
            })
        }
        Tool::Custom(c) => {
            check_name(param, &c.name)?;
            Ok(Candidate {
                entry: entry("custom", &c.name),
                identity: Some(Identity::Custom {
                    namespace: Some(namespace.to_owned()),
                    name: c.name.clone(),
                }),
                upstream: Some(custom_upstream(c)),
            })
        }
        other => unsupported(param, other.kind(), caps, diagnostics),
    }
}

pub(super) fn check_name(param: &str, name: &str) -> Result<(), Error> {
    if name.is_empty() {
        return Err(Error::invalid(format!("{param}.name"), "must not be empty"));
    }
    Ok(())
}

pub(super) fn function_upstream(
    param: &str,
    f: &FunctionTool,
    caps: &ToolCapabilities,
    diagnostics: &mut Vec<Diagnostic>,
) -> UpstreamTool {
    let strict = match f.strict {
        Some(true) if !caps.strict => {
            diagnostics.push(diag(
                crate::diagnostics::PARAM_DROPPED,
                Some(&format!("{param}.strict")),
                format!(
                    "the provider does not enforce `strict` schemas; `{}` was sent without it",
                    f.name
                ),
            ));
            None
        }
        Some(s) if caps.strict => Some(s),
        _ => None,
    };
    // A declared tool held back for a hosted `tool_search` is offered directly: no search runs
    // for a provider without one. (Tools a search found are loaded by design: nothing to say.)
    if f.extra.get("defer_loading") == Some(&Value::Bool(true)) && param.starts_with("tools[") {
        diagnostics.push(diag(
            crate::diagnostics::PARAM_DROPPED,
            Some(&format!("{param}.defer_loading")),
            format!(
                "the provider has no tool search; `{}` is offered directly instead of deferred",
                f.name
            ),
        ));
    }
    UpstreamTool::Function {
        name: f.name.clone(),
        description: f.description.clone(),
        parameters: f
            .parameters
            .clone()
            .unwrap_or_else(|| json!({"type": "object", "properties": {}}).into()),
        strict,
    }
}

pub(super) fn custom_upstream(c: &CustomTool) -> UpstreamTool {
    UpstreamTool::Function {
        name: c.name.clone(),
        description: Some(schemas::custom_description(c)),
        parameters: schemas::custom_parameters_json(),
        strict: None,
    }
}

pub(super) fn unsupported(
    param: &str,
    kind: &str,
    caps: &ToolCapabilities,
    diagnostics: &mut Vec<Diagnostic>,
) -> Result<Candidate, Error> {
    if caps.unsupported == UnsupportedPolicy::Reject {
        return Err(Error::UnsupportedTool {
            param: param.to_owned(),
            kind: kind.to_owned(),
        });
    }
    diagnostics.push(diag(
        TOOL_IGNORED,
        Some(param),
        format!("the provider has no `{kind}` tool; it was left out"),
    ));
    Ok(ignored(param, kind, reasons::NO_PROVIDER_SUPPORT))
}

pub(super) fn ignored(param: &str, kind: &str, reason: &'static str) -> Candidate {
    Candidate {
        entry: PlanEntry {
            param: param.to_owned(),
            kind: kind.to_owned(),
            name: None,
            decision: Decision::Ignored,
            reason,
            provider_name: None,
        },
        identity: None,
        upstream: None,
    }
}

pub(super) fn native(
    param: &str,
    kind: &str,
    reason: &'static str,
    upstream: Option<UpstreamTool>,
) -> Candidate {
    Candidate {
        entry: PlanEntry {
            param: param.to_owned(),
            kind: kind.to_owned(),
            name: None,
            decision: Decision::Native,
            reason,
            provider_name: None,
        },
        identity: None,
        upstream,
    }
}
