//! `tool_choice` for the provider: passed where it can be said, downgraded with a diagnostic
//! where it cannot, refused before any upstream call when it names a tool that will not be there.

use serde_json::{Value, json};

use super::{Decision, Identity, NameMap, ToolCapabilities, ToolPlan, UpstreamTool};
use crate::Error;
use crate::diagnostics::{ALLOWED_TOOLS_FILTERED, TOOL_CHOICE_DOWNGRADED, diag};

/// Sets `plan.tool_choice` and `plan.send_tools`; returns the tools to send.
pub(super) fn apply(
    plan: &mut ToolPlan,
    upstream: Vec<(String, UpstreamTool)>,
    choice: Option<&Value>,
    caps: &ToolCapabilities,
    names: &NameMap,
) -> Result<Vec<UpstreamTool>, Error> {
    let tools = |u: Vec<(String, UpstreamTool)>| u.into_iter().map(|(_, t)| t).collect();
    let Some(choice) = choice else {
        return Ok(tools(upstream));
    };
    if upstream.is_empty() {
        // Nothing goes upstream: a choice would only make the provider reject the request. A
        // choice that forces a tool is still checked: that tool will not be there.
        if let Value::Object(obj) = choice
            && obj.get("type").and_then(Value::as_str) != Some("allowed_tools")
        {
            named(plan, &target(obj)?, caps, names)?;
            plan.tool_choice = None;
        }
        return Ok(Vec::new());
    }
    match choice {
        Value::String(mode) => match mode.as_str() {
            "auto" => {
                plan.tool_choice = Some(json!("auto"));
                Ok(tools(upstream))
            }
            "none" => {
                if caps.choice_none {
                    plan.tool_choice = Some(json!("none"));
                } else {
                    plan.send_tools = false;
                    downgraded(
                        plan,
                        "the provider cannot take tool_choice \"none\"; no tools were sent instead",
                    );
                }
                Ok(tools(upstream))
            }
            "required" => {
                required(plan, caps, "tool_choice \"required\"");
                Ok(tools(upstream))
            }
            other => Err(Error::invalid(
                "tool_choice",
                format!("`{other}` is not one of none, auto, required"),
            )),
        },
        Value::Object(obj) => {
            let kind = obj.get("type").and_then(Value::as_str).unwrap_or("");
            if kind == "allowed_tools" {
                return allowed_tools(plan, upstream, obj, caps, names);
            }
            let target = target(obj)?;
            named(plan, &target, caps, names)?;
            Ok(tools(upstream))
        }
        _ => Err(Error::invalid(
            "tool_choice",
            "must be a string or an object",
        )),
    }
}

/// What a tool_choice object points at.
enum Target {
    Identity(Identity),
    /// A hosted tool type (`web_search`, `file_search`, `mcp`, …).
    Hosted(String),
}

fn target(obj: &serde_json::Map<String, Value>) -> Result<Target, Error> {
    let kind = obj.get("type").and_then(Value::as_str).unwrap_or("");
    let name = obj
        .get("name")
        .or_else(|| obj.get("function").and_then(|f| f.get("name")))
        .and_then(Value::as_str);
    let namespace = obj
        .get("namespace")
        .and_then(Value::as_str)
        .map(str::to_owned);
    match (kind, name) {
        ("function", Some(name)) => Ok(Target::Identity(Identity::Function {
            namespace,
            name: name.to_owned(),
        })),
        ("custom", Some(name)) => Ok(Target::Identity(Identity::Custom {
            namespace,
            name: name.to_owned(),
        })),
        ("function" | "custom", None) => Err(Error::invalid("tool_choice.name", "is missing")),
        ("local_shell", _) => Ok(Target::Identity(Identity::LocalShell)),
        ("shell", _) => Ok(Target::Identity(Identity::Shell)),
        ("apply_patch", _) => Ok(Target::Identity(Identity::ApplyPatch)),
        ("", _) => Err(Error::invalid("tool_choice.type", "is missing")),
        (other, _) => Ok(Target::Hosted(other.to_owned())),
    }
}

fn named(
    plan: &mut ToolPlan,
    target: &Target,
    caps: &ToolCapabilities,
    names: &NameMap,
) -> Result<(), Error> {
    match target {
        Target::Identity(identity) => {
            let Some(provider) = names.provider_name(identity) else {
                return Err(Error::ToolChoiceUnavailable {
                    message: format!(
                        "tool_choice forces `{}`, which is not among the declared tools",
                        identity.declared_name()
                    ),
                });
            };
            if caps.choice_named {
                plan.tool_choice =
                    Some(json!({"type": "function", "function": {"name": provider}}));
            } else {
                required(
                    plan,
                    caps,
                    &format!("forcing `{}`", identity.declared_name()),
                );
            }
            Ok(())
        }
        Target::Hosted(kind) => {
            let matching: Vec<Decision> = plan
                .entries
                .iter()
                .filter(|e| e.kind.starts_with(kind.as_str()))
                .map(|e| e.decision)
                .collect();
            if !matching
                .iter()
                .any(|d| matches!(d, Decision::Native | Decision::Degraded | Decision::Gateway))
            {
                return Err(Error::ToolChoiceUnavailable {
                    message: format!(
                        "tool_choice forces `{kind}`, which is not declared or cannot go to this provider"
                    ),
                });
            }
            plan.tool_choice = Some(json!("auto"));
            downgraded(
                plan,
                &format!(
                    "the provider cannot be forced to use its native `{kind}`; tool_choice was sent as \"auto\""
                ),
            );
            Ok(())
        }
    }
}

fn required(plan: &mut ToolPlan, caps: &ToolCapabilities, what: &str) {
    if caps.choice_required {
        plan.tool_choice = Some(json!("required"));
        if what != "tool_choice \"required\"" {
            downgraded(
                plan,
                &format!("the provider cannot force one tool; {what} was sent as \"required\""),
            );
        }
    } else {
        plan.tool_choice = Some(json!("auto"));
        downgraded(
            plan,
            &format!("the provider cannot require a tool call; {what} was sent as \"auto\""),
        );
    }
}

fn allowed_tools(
    plan: &mut ToolPlan,
    upstream: Vec<(String, UpstreamTool)>,
    obj: &serde_json::Map<String, Value>,
    caps: &ToolCapabilities,
    names: &NameMap,
) -> Result<Vec<UpstreamTool>, Error> {
    let mode = obj.get("mode").and_then(Value::as_str).unwrap_or("auto");
    if mode != "auto" && mode != "required" {
        return Err(Error::invalid(
            "tool_choice.mode",
            format!("`{mode}` is not one of auto, required"),
        ));
    }
    let listed = obj
        .get("tools")
        .and_then(Value::as_array)
        .ok_or_else(|| Error::invalid("tool_choice.tools", "must be a list of tools"))?;
    let mut provider_names = Vec::new();
    let mut hosted = Vec::new();
    for (i, t) in listed.iter().enumerate() {
        let Some(obj) = t.as_object() else {
            return Err(Error::invalid(
                format!("tool_choice.tools[{i}]"),
                "must be an object",
            ));
        };
        match target(obj)? {
            Target::Identity(identity) => match names.provider_name(&identity) {
                Some(p) => provider_names.push(p.to_owned()),
                None => {
                    return Err(Error::ToolChoiceUnavailable {
                        message: format!(
                            "tool_choice.tools[{i}] allows `{}`, which is not among the declared tools",
                            identity.declared_name()
                        ),
                    });
                }
            },
            // A client-run `tool_search` sent as a function is allowed as that function, with
            // `call_found_tool` through which what it finds is called.
            Target::Hosted(kind) => match names.provider_name(&Identity::ToolSearch) {
                Some(p) if kind == "tool_search" => {
                    provider_names.push(p.to_owned());
                    provider_names
                        .extend(names.provider_name(&Identity::CallFound).map(str::to_owned));
                }
                _ => hosted.push(kind),
            },
        }
    }
    if caps.choice_allowed_tools {
        let tools: Vec<Value> = provider_names
            .iter()
            .map(|n| json!({"type": "function", "function": {"name": n}}))
            .collect();
        plan.tool_choice =
            Some(json!({"type": "allowed_tools", "allowed_tools": {"mode": mode, "tools": tools}}));
        return Ok(upstream.into_iter().map(|(_, t)| t).collect());
    }
    // The provider cannot restrict calls itself: only the allowed tools are declared upstream.
    let before = upstream.len();
    let kept: Vec<UpstreamTool> = upstream
        .into_iter()
        .filter(|(param, tool)| match tool {
            UpstreamTool::Function { name, .. } => provider_names.contains(name),
            UpstreamTool::Native(_) => plan.entries.iter().any(|e| {
                &e.param == param && hosted.iter().any(|h| e.kind.starts_with(h.as_str()))
            }),
        })
        .map(|(_, t)| t)
        .collect();
    plan.diagnostics.push(diag(
        ALLOWED_TOOLS_FILTERED,
        Some("tool_choice"),
        format!(
            "the provider has no allowed_tools; {} of {before} tools were declared upstream",
            kept.len()
        ),
    ));
    if mode == "required" {
        required(plan, caps, "tool_choice \"required\"");
    } else {
        plan.tool_choice = Some(json!("auto"));
    }
    Ok(kept)
}

fn downgraded(plan: &mut ToolPlan, message: &str) {
    plan.diagnostics.push(diag(
        TOOL_CHOICE_DOWNGRADED,
        Some("tool_choice"),
        message.to_owned(),
    ));
}
