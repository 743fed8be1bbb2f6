//! The plan's tools in Gemini's shape: function declarations with sanitised schemas in one
//! tool, native tools (Google Search) as rendered, and `tool_choice` as
//! `functionCallingConfig`.
//!
//! Not here: which tools go, and under what names (the planner's `ToolPlan`).

use serde_json::{Map, Value, json};
use toolbridge_core::diagnostics::TOOL_DEGRADED;
use toolbridge_core::plan::{ToolPlan, UpstreamTool};
use toolbridge_wire::gemini::{FunctionCallingConfig, FunctionDeclaration, Tool, ToolConfig};
use toolbridge_wire::responses::Diagnostic;

use crate::gemini::schema;

pub(super) fn tools(
    plan: &ToolPlan,
    diagnostics: &mut Vec<Diagnostic>,
) -> (Vec<Tool>, Option<ToolConfig>) {
    if !plan.send_tools || plan.upstream.is_empty() {
        return (Vec::new(), None);
    }
    let mut declarations = Vec::new();
    let mut native = Vec::new();
    for tool in &plan.upstream {
        match tool {
            UpstreamTool::Function {
                name,
                description,
                parameters,
                ..
            } => declarations.push(FunctionDeclaration {
                name: name.clone(),
                description: description.clone(),
                parameters: Some(schema::sanitize(
                    parameters.value(),
                    &format!("tools.{name}.parameters"),
                    TOOL_DEGRADED,
                    diagnostics,
                )),
            }),
            UpstreamTool::Native(tool) => {
                if let Some(value) = crate::native::render(tool) {
                    native.push(Tool {
                        extra: value.as_object().cloned().unwrap_or_default(),
                        ..Tool::default()
                    });
                }
            }
        }
    }
    let mut tools = Vec::new();
    if !declarations.is_empty() {
        tools.push(Tool {
            function_declarations: declarations,
            ..Tool::default()
        });
    }
    tools.extend(native);
    let config = plan.tool_choice.as_ref().and_then(function_calling_config);
    (
        tools,
        config.map(|c| ToolConfig {
            function_calling_config: Some(c),
            extra: Map::new(),
        }),
    )
}

/// The plan's Chat-shaped `tool_choice` → `functionCallingConfig`.
fn function_calling_config(choice: &Value) -> Option<FunctionCallingConfig> {
    let config = |mode: &str, names: Vec<String>| FunctionCallingConfig {
        mode: Some(mode.to_owned()),
        allowed_function_names: names,
    };
    match choice {
        Value::String(mode) => match mode.as_str() {
            "auto" => Some(config("AUTO", Vec::new())),
            "required" => Some(config("ANY", Vec::new())),
            "none" => Some(config("NONE", Vec::new())),
            _ => None,
        },
        Value::Object(obj) => {
            let name = obj
                .get("function")
                .and_then(|f| f.get("name"))
                .or_else(|| obj.get("name"))
                .and_then(Value::as_str)?;
            Some(config("ANY", vec![name.to_owned()]))
        }
        _ => None,
    }
}

/// Gemini's `googleSearch` tool (grounding with Google Search), run by Gemini.
pub(crate) fn google_search() -> Value {
    json!({"googleSearch": {}})
}
