//! An earlier call in its degraded function form — the inverse of restoration — shared by every
//! dialect, so a `custom`, `local_shell`, `shell` or `apply_patch` call goes back upstream exactly
//! as the model first produced it.

use serde_json::{Map, Value, json};
use toolbridge_core::canonical::CallKind;
use toolbridge_core::plan::ToolPlan;

/// The call's arguments as a JSON object. Function arguments that are not a JSON object are
/// wrapped as `{"arguments": "<text>"}` (empty ones become `{}`), for dialects that require an
/// object (Anthropic `input`, Gemini `args`).
pub(crate) fn call_object(kind: &CallKind) -> Value {
    match kind {
        CallKind::Function { arguments, .. } | CallKind::Gateway { arguments, .. } => {
            match serde_json::from_str::<Value>(arguments) {
                Ok(Value::Object(map)) => Value::Object(map),
                _ if arguments.trim().is_empty() => json!({}),
                _ => json!({"arguments": arguments}),
            }
        }
        CallKind::Custom { input, .. } => json!({"input": input}),
        CallKind::LocalShell { action } => pick(
            action,
            &["command", "working_directory", "timeout_ms", "env"],
        ),
        CallKind::Shell { action } => {
            pick(action, &["commands", "timeout_ms", "max_output_length"])
        }
        CallKind::ApplyPatch { operation } => pick(operation, &["type", "path", "diff"]),
        CallKind::ToolSearch { arguments } => match arguments {
            Value::Object(_) => arguments.clone(),
            Value::Null => json!({}),
            other => json!({"query": other}),
        },
    }
}

/// An earlier call of a tool the plan reaches through `call_found_tool`: that function's
/// provider name and the arguments it takes (`name`, and the tool's arguments as an object), in
/// the one form every turn replays.
pub(crate) fn dispatched(plan: &ToolPlan, kind: &CallKind) -> Option<(String, Value)> {
    let (dispatcher, tool) = plan.dispatched(&kind.identity())?;
    Some((
        dispatcher.to_owned(),
        json!({"name": tool, "arguments": call_object(kind)}),
    ))
}

/// The call's arguments as text, for dialects that take a string (Chat `arguments`): a function
/// call's arguments are sent byte for byte as the model wrote them.
pub(crate) fn call_text(kind: &CallKind) -> String {
    match kind {
        CallKind::Function { arguments, .. } | CallKind::Gateway { arguments, .. } => {
            arguments.clone()
        }
        other => call_object(other).to_string(),
    }
}

/// The non-null `keys` of `value`, as an object.
fn pick(value: &Value, keys: &[&str]) -> Value {
    let mut out = Map::new();
    for key in keys {
        if let Some(v) = value.get(*key).filter(|v| !v.is_null()) {
            out.insert((*key).to_owned(), v.clone());
        }
    }
    Value::Object(out)
}
