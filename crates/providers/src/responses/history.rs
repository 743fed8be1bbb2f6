//! The history of a planned native Responses request, in the forms the plan sent: a call to a
//! tool that went upstream as a function is written as that `function_call` (a `custom` call's
//! input as `{"input": …}`, a built-in call's action or operation as its degraded arguments, a
//! namespace member under its flattened name, without `namespace`), and its output as a
//! `function_call_output`; a `tool_search_call` to a `tool_search` sent as a function is that
//! function's call, and its `tool_search_output` the text a translated request gives the model
//! (the tools it found are declared by the plan, or called through `call_found_tool`, whose
//! calls the found tools' are written as). The inverse of the assembler's restoring of calls;
//! every other item passes untouched.

use std::collections::HashSet;

use serde_json::{Map, Value, json};
use toolbridge_core::canonical::CallKind;
use toolbridge_core::plan::{Identity, ToolPlan, UpstreamTool};
use toolbridge_core::request::found_text;
use toolbridge_wire::responses::Tool;

/// An item that is a `function_call` of a tool the plan reaches through `call_found_tool`,
/// rewritten as that function's call; whether it was one.
fn through_dispatcher(map: &mut Map<String, Value>, plan: &ToolPlan) -> bool {
    if map.get("type").and_then(Value::as_str) != Some("function_call") {
        return false;
    }
    let text = |key: &str| map.get(key).and_then(Value::as_str).map(str::to_owned);
    let found = CallKind::Function {
        namespace: text("namespace"),
        name: text("name").unwrap_or_default(),
        arguments: text("arguments").unwrap_or_default(),
    };
    let Some((name, arguments)) = crate::degraded::dispatched(plan, &found) else {
        return false;
    };
    map.insert("name".to_owned(), json!(name));
    map.insert("arguments".to_owned(), json!(arguments.to_string()));
    map.remove("namespace");
    true
}

/// Rewrites `items` for `plan` (a plan that changed some tool's form).
pub(super) fn encode(items: &mut [Value], plan: &ToolPlan) {
    let functions = function_names(plan);
    let provider = |identity: &Identity| {
        plan.names
            .provider_name(identity)
            .filter(|p| functions.contains(p))
            .map(str::to_owned)
    };
    let mut converted: HashSet<String> = HashSet::new();
    // The latest search converted, for an output that names no call.
    let mut last_search: Option<String> = None;
    for (index, item) in items.iter_mut().enumerate() {
        let Value::Object(map) = item else { continue };
        if through_dispatcher(map, plan) {
            continue;
        }
        let kind = map.get("type").and_then(Value::as_str).unwrap_or_default();
        let call_id = call_id(map, index);
        let call = match kind {
            "function_call" => {
                rename_function(map, provider);
                continue;
            }
            "tool_search_call" => {
                if provider(&Identity::ToolSearch).is_some() {
                    last_search = Some(call_id.clone());
                }
                Some(degraded_call(map, kind))
            }
            "tool_search_output" => {
                let call_id = map
                    .get("call_id")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                    .filter(|id| !id.is_empty())
                    .or_else(|| last_search.clone());
                if let Some(call_id) = call_id.filter(|id| converted.contains(id)) {
                    *map = search_output(map, &call_id);
                }
                None
            }
            "custom_tool_call_output"
            | "local_shell_call_output"
            | "shell_call_output"
            | "apply_patch_call_output"
                if converted.contains(&call_id) =>
            {
                *map = output(map, kind, &call_id);
                None
            }
            "custom_tool_call" | "local_shell_call" | "shell_call" | "apply_patch_call" => {
                Some(degraded_call(map, kind))
            }
            _ => None,
        };
        if let Some((identity, call)) = call
            && let Some(name) = provider(&identity)
        {
            *map = function_call(map, &call_id, &name, &call);
            converted.insert(call_id);
        }
    }
}

/// The names of the tools the plan sends upstream as functions.
fn function_names(plan: &ToolPlan) -> HashSet<&str> {
    plan.upstream
        .iter()
        .filter_map(|u| match u {
            UpstreamTool::Function { name, .. } => Some(name.as_str()),
            UpstreamTool::Native(_) => None,
        })
        .collect()
}

/// An item's call id: its `call_id`, else its `id`, else one made from its place in the history.
fn call_id(map: &Map<String, Value>, index: usize) -> String {
    let text = |key: &str| map.get(key).and_then(Value::as_str).map(str::to_owned);
    text("call_id")
        .or_else(|| text("id"))
        .filter(|id| !id.is_empty())
        .unwrap_or_else(|| format!("tool_search_{index}"))
}

/// A `function_call` renamed to the name the plan sent its tool under (a namespace member under
/// its flattened name, without `namespace`), when that name differs.
fn rename_function(map: &mut Map<String, Value>, provider: impl Fn(&Identity) -> Option<String>) {
    let text = |key: &str| map.get(key).and_then(Value::as_str).map(str::to_owned);
    let identity = Identity::Function {
        namespace: text("namespace"),
        name: text("name").unwrap_or_default(),
    };
    if let Some(name) = provider(&identity)
        && (identity.declared_name() != name || text("namespace").is_some())
    {
        map.insert("name".to_owned(), json!(name));
        map.remove("namespace");
    }
}

/// The tool a call item of `kind` (a custom, shell, patch or search call) calls, and the call as
/// the degraded function would take it.
fn degraded_call(map: &Map<String, Value>, kind: &str) -> (Identity, CallKind) {
    let text = |key: &str| map.get(key).and_then(Value::as_str).map(str::to_owned);
    let value = |key: &str| map.get(key).cloned().unwrap_or(Value::Null);
    match kind {
        "custom_tool_call" => (
            Identity::Custom {
                namespace: text("namespace"),
                name: text("name").unwrap_or_default(),
            },
            CallKind::Custom {
                namespace: None,
                name: String::new(),
                input: text("input").unwrap_or_default(),
            },
        ),
        "local_shell_call" => (
            Identity::LocalShell,
            CallKind::LocalShell {
                action: value("action"),
            },
        ),
        "shell_call" => (
            Identity::Shell,
            CallKind::Shell {
                action: value("action"),
            },
        ),
        "apply_patch_call" => (
            Identity::ApplyPatch,
            CallKind::ApplyPatch {
                operation: value("operation"),
            },
        ),
        _ => (
            Identity::ToolSearch,
            CallKind::ToolSearch {
                arguments: value("arguments"),
            },
        ),
    }
}

/// A converted call as the `function_call` of the function `name`, keeping the item's status.
fn function_call(
    map: &Map<String, Value>,
    call_id: &str,
    name: &str,
    call: &CallKind,
) -> Map<String, Value> {
    let mut out = Map::new();
    out.insert("type".to_owned(), json!("function_call"));
    out.insert("call_id".to_owned(), json!(call_id));
    out.insert("name".to_owned(), json!(name));
    out.insert(
        "arguments".to_owned(),
        json!(crate::degraded::call_text(call)),
    );
    if let Some(status) = map.get("status") {
        out.insert("status".to_owned(), status.clone());
    }
    out
}

/// A search's output as the `function_call_output` of the degraded `tool_search`: the text
/// naming the tools found, under the names the plan gave them.
fn search_output(map: &Map<String, Value>, call_id: &str) -> Map<String, Value> {
    let tools: Vec<Tool> = map
        .get("tools")
        .and_then(|t| serde_json::from_value(t.clone()).ok())
        .unwrap_or_default();
    let mut out = Map::new();
    out.insert("type".to_owned(), json!("function_call_output"));
    out.insert("call_id".to_owned(), json!(call_id));
    out.insert("output".to_owned(), json!(found_text(&tools)));
    out
}

/// A converted call's output as a `function_call_output`.
fn output(map: &Map<String, Value>, kind: &str, call_id: &str) -> Map<String, Value> {
    let output = match (kind, map.get("output")) {
        ("apply_patch_call_output", value) => {
            let status = map
                .get("status")
                .and_then(Value::as_str)
                .unwrap_or("completed");
            match value.and_then(Value::as_str) {
                Some(text) => json!(format!("{status}: {text}")),
                None => json!(status),
            }
        }
        (_, Some(Value::String(text))) => json!(text),
        (_, Some(Value::Array(parts))) if kind == "custom_tool_call_output" => {
            Value::Array(parts.clone())
        }
        (_, Some(other)) => json!(other.to_string()),
        (_, None) => json!(""),
    };
    let mut out = Map::new();
    out.insert("type".to_owned(), json!("function_call_output"));
    out.insert("call_id".to_owned(), json!(call_id));
    out.insert("output".to_owned(), output);
    out
}
