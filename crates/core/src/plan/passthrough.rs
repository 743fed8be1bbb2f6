//! The plan for a native Responses upstream: every tool as declared, names unchanged.

use serde_json::{Map, Value};
use toolbridge_wire::responses::Tool;

use super::candidates::check_name;
use super::{
    Decision, NameMap, NativeTool, PlanEntry, ToolCapabilities, ToolPlan, UpstreamTool, reasons,
};
use crate::Error;

/// The plan for a native Responses upstream: every tool goes as declared, names unchanged (an
/// empty [`NameMap`] restores nothing), `tool_choice` as sent. Only the checks that keep a bad
/// request from reaching the upstream remain: names present and valid, and `max_tools`.
pub(super) fn plan_passthrough(
    tools: &[Tool],
    tool_choice: Option<&Value>,
    caps: &ToolCapabilities,
) -> Result<ToolPlan, Error> {
    let mut entries = Vec::with_capacity(tools.len());
    let mut upstream = Vec::with_capacity(tools.len());
    for (i, tool) in tools.iter().enumerate() {
        let param = format!("tools[{i}]");
        let name = match tool {
            Tool::Function(f) => Some(f.name.clone()),
            Tool::Custom(c) => Some(c.name.clone()),
            Tool::Namespace(ns) => Some(ns.name.clone()),
            Tool::Other(map) => map.get("name").and_then(Value::as_str).map(str::to_owned),
        };
        if let Some(name) = &name
            && !matches!(tool, Tool::Other(_))
        {
            check_name(&param, name)?;
        }
        let mut value =
            serde_json::to_value(tool).map_err(|e| Error::invalid(&param, e.to_string()))?;
        drop_absent_fields(&mut value);
        upstream.push(UpstreamTool::Native(NativeTool::AsDeclared(value)));
        entries.push(PlanEntry {
            param,
            kind: tool.kind().to_owned(),
            name,
            decision: Decision::Native,
            reason: reasons::RESPONSES_NATIVE,
            provider_name: None,
        });
    }
    if let Some(max) = caps.max_tools
        && upstream.len() > max
    {
        return Err(Error::TooManyTools {
            count: upstream.len(),
            limit: max,
        });
    }
    Ok(ToolPlan {
        entries,
        upstream,
        request_flags: Map::new(),
        tool_choice: tool_choice.cloned(),
        send_tools: true,
        names: NameMap::default(),
        echo_tools: Vec::new(),
        dispatched: Vec::new(),
        diagnostics: Vec::new(),
    })
}

/// The typed tool writes an absent `description`, `parameters` or `strict` as `null` (the
/// response object's tools need them); a passed-through tool leaves them out, as the client did.
pub(super) fn drop_absent_fields(tool: &mut Value) {
    if let Some(map) = tool.as_object_mut() {
        for key in ["description", "parameters", "strict"] {
            if map.get(key).is_some_and(Value::is_null) {
                map.remove(key);
            }
        }
        if let Some(Value::Array(children)) = map.get_mut("tools") {
            children.iter_mut().for_each(drop_absent_fields);
        }
    }
}
