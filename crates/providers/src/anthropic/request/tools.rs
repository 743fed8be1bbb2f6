//! The plan's tools in Anthropic's shape: function tools with their schemas, native tools as
//! rendered, web search as Anthropic's server tool, and `tool_choice` (downgraded to `auto`
//! with thinking on, since Anthropic cannot force a tool then).
//!
//! Not here: which tools go, and under what names (the planner's `ToolPlan`).

use serde_json::{Map, Value, json};
use toolbridge_core::canonical::CanonicalRequest;
use toolbridge_core::diagnostics::{TOOL_CHOICE_DOWNGRADED, diag};
use toolbridge_core::plan::{NativeSearch, ToolPlan, UpstreamTool};
use toolbridge_wire::anthropic::{MessagesRequest, Tool, ToolChoice};
use toolbridge_wire::responses::Diagnostic;

pub(super) fn tools(
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
