//! The plan's tools in Chat's shape: function tools with their schemas and `strict`, native
//! tools as rendered, the plan's `tool_choice` and request flags as they are.
//!
//! Not here: which tools go, and under what names (the planner's `ToolPlan`).

use serde_json::{Map, Value};
use toolbridge_core::plan::{ToolPlan, UpstreamTool};
use toolbridge_wire::chat::{ChatFunction, ChatRequest, ChatTool};

pub(super) fn tools(plan: &ToolPlan, out: &mut ChatRequest) {
    if !plan.send_tools || plan.upstream.is_empty() {
        return;
    }
    out.tools = Some(
        plan.upstream
            .iter()
            .filter_map(|t| match t {
                UpstreamTool::Function {
                    name,
                    description,
                    parameters,
                    strict,
                } => Some(ChatTool {
                    kind: "function".to_owned(),
                    function: Some(ChatFunction {
                        name: name.clone(),
                        description: description.clone(),
                        parameters: Some(parameters.clone()),
                        strict: *strict,
                    }),
                    extra: Map::new(),
                }),
                UpstreamTool::Native(native) => {
                    let value = crate::native::render(native)?;
                    let mut extra = value.as_object().cloned().unwrap_or_default();
                    let kind = match extra.remove("type") {
                        Some(Value::String(kind)) => kind,
                        _ => String::new(),
                    };
                    Some(ChatTool {
                        kind,
                        function: None,
                        extra,
                    })
                }
            })
            .collect(),
    );
    out.tool_choice = plan.tool_choice.clone();
    for (key, value) in &plan.request_flags {
        out.extra.insert(key.clone(), value.clone());
    }
}
