//! Restoration: a provider's tool call, by the name the provider saw, back into the exact
//! Responses item the client declared the tool for. The result is a [`CallKind`], the same
//! vocabulary the request side reads earlier calls into: restoration and history encoding are
//! each other's inverse.
//!
//! A `custom` tool's input is unwrapped from the function arguments, and from the wrappers weak
//! models add (a JSON object with `input`/`patch`/`content`, a JSON string, a markdown fence).
//! Built-in tool types get their typed `action`/`operation`; arguments that do not fit fall back
//! to a `function_call` with the requested name and a diagnostic. A name nobody declared comes
//! back as a `function_call` with a diagnostic.

use serde_json::{Map, Value, json};
use toolbridge_wire::responses::Diagnostic;

use crate::canonical::CallKind;
use crate::diagnostics::{CALL_NOT_RESTORED, UNDECLARED_TOOL_CALLED, diag};
use crate::plan::{Identity, NameMap};

/// Whether a call streams as a `function_call` (its arguments can be forwarded as they come) or
/// must be complete before its item can be announced.
pub fn streams_as_function(names: &NameMap, provider_name: &str) -> bool {
    matches!(
        names.identity(provider_name),
        None | Some(Identity::Function { .. })
    )
}

/// The declared name and namespace a provider name stands for, for a `function_call`.
pub fn function_name(names: &NameMap, provider_name: &str) -> (Option<String>, String) {
    match names.identity(provider_name) {
        Some(Identity::Function { namespace, name }) => (namespace.clone(), name.clone()),
        _ => (None, provider_name.to_owned()),
    }
}

/// Restores one complete call.
pub fn restore(
    names: &NameMap,
    provider_name: &str,
    arguments: &str,
) -> (CallKind, Option<Diagnostic>) {
    let fallback = |requested: &str, why: String| {
        (
            CallKind::Function {
                namespace: None,
                name: requested.to_owned(),
                arguments: arguments.to_owned(),
            },
            Some(diag(CALL_NOT_RESTORED, None, why)),
        )
    };
    match names.identity(provider_name) {
        None => (
            CallKind::Function {
                namespace: None,
                name: provider_name.to_owned(),
                arguments: arguments.to_owned(),
            },
            Some(diag(
                UNDECLARED_TOOL_CALLED,
                None,
                format!(
                    "the model called `{provider_name}`, which no declared tool is named; it is returned as a function_call"
                ),
            )),
        ),
        Some(Identity::Function { namespace, name }) => (
            CallKind::Function {
                namespace: namespace.clone(),
                name: name.clone(),
                arguments: arguments.to_owned(),
            },
            None,
        ),
        Some(Identity::Gateway { server, name }) => (
            CallKind::Gateway {
                server: server.clone(),
                name: name.clone(),
                arguments: arguments.to_owned(),
            },
            None,
        ),
        Some(Identity::Custom { namespace, name }) => (
            CallKind::Custom {
                namespace: namespace.clone(),
                name: name.clone(),
                input: custom_input(arguments),
            },
            None,
        ),
        Some(Identity::LocalShell) => match local_shell_action(arguments) {
            Some(action) => (CallKind::LocalShell { action }, None),
            None => fallback("local_shell", not_restored("local_shell", arguments)),
        },
        Some(Identity::Shell) => match shell_action(arguments) {
            Some(action) => (CallKind::Shell { action }, None),
            None => fallback("shell", not_restored("shell", arguments)),
        },
        Some(Identity::ToolSearch) => (
            CallKind::ToolSearch {
                arguments: search_arguments(arguments),
            },
            None,
        ),
        Some(Identity::ApplyPatch) => match patch_operation(arguments) {
            Some(operation) => (CallKind::ApplyPatch { operation }, None),
            None => fallback("apply_patch", not_restored("apply_patch", arguments)),
        },
        Some(Identity::CallFound) => match found_call(names, arguments) {
            Some((inner, inner_arguments)) => restore(names, &inner, &inner_arguments),
            None => fallback(
                provider_name,
                format!(
                    "`{provider_name}` was called without the `name` of a tool the search found ({}); it is returned as a function_call",
                    shorten(arguments)
                ),
            ),
        },
    }
}

/// A `call_found_tool` call's tool (its provider name, which must be one the plan named; a
/// dispatcher cannot call itself) and that tool's arguments as text.
fn found_call(names: &NameMap, arguments: &str) -> Option<(String, String)> {
    let Ok(Value::Object(map)) = serde_json::from_str::<Value>(arguments) else {
        return None;
    };
    let name = map.get("name")?.as_str()?;
    let identity = names.identity(name)?;
    if *identity == Identity::CallFound {
        return None;
    }
    let inner = match map.get("arguments") {
        None | Some(Value::Null) => "{}".to_owned(),
        Some(Value::String(text)) => text.clone(),
        Some(other) => other.to_string(),
    };
    Some((name.to_owned(), inner))
}

fn not_restored(kind: &str, arguments: &str) -> String {
    format!(
        "the arguments of a `{kind}` call do not fit its shape ({}); it is returned as a function_call",
        shorten(arguments)
    )
}

/// The first 120 characters of `text`, with an ellipsis when there was more.
fn shorten(text: &str) -> String {
    let mut shown: String = text.chars().take(120).collect();
    if shown.len() < text.len() {
        shown.push('…');
    }
    shown
}

/// A `tool_search_call`'s arguments object: the model's object, or its text as the `query`.
fn search_arguments(arguments: &str) -> Value {
    match parse_object(arguments) {
        Some(map) => Value::Object(map),
        None => json!({"query": arguments.trim()}),
    }
}

/// The raw input of a freeform call, unwrapped.
pub fn custom_input(arguments: &str) -> String {
    let unwrapped = match serde_json::from_str::<Value>(arguments.trim()) {
        Ok(Value::String(s)) => s,
        Ok(Value::Object(map)) => match object_input(&map) {
            Some(s) => s,
            None => arguments.to_owned(),
        },
        _ => arguments.to_owned(),
    };
    strip_fence(&unwrapped)
}

fn object_input(map: &Map<String, Value>) -> Option<String> {
    for key in ["input", "patch", "content", "text", "code"] {
        if let Some(Value::String(s)) = map.get(key) {
            return Some(s.clone());
        }
    }
    match map.values().collect::<Vec<_>>().as_slice() {
        [Value::String(s)] => Some(s.clone()),
        _ => None,
    }
}

/// Removes one markdown code fence around the whole text, if there is one.
fn strip_fence(text: &str) -> String {
    let trimmed = text.trim();
    if trimmed.len() >= 6 && trimmed.starts_with("```") && trimmed.ends_with("```") {
        let inner = &trimmed[3..trimmed.len() - 3];
        // Drop the info string (```diff) on the opening line.
        let body = match inner.find('\n') {
            Some(nl) => &inner[nl + 1..],
            None => inner,
        };
        return body.to_owned();
    }
    text.to_owned()
}

fn parse_object(arguments: &str) -> Option<Map<String, Value>> {
    match serde_json::from_str::<Value>(arguments.trim()) {
        Ok(Value::Object(map)) => Some(map),
        _ => None,
    }
}

fn strings(value: &Value) -> Option<Vec<Value>> {
    match value {
        Value::Array(items) if !items.is_empty() && items.iter().all(Value::is_string) => {
            Some(items.clone())
        }
        _ => None,
    }
}

/// `local_shell_call.action` from `{command, working_directory|workdir, timeout_ms, env, user}`.
fn local_shell_action(arguments: &str) -> Option<Value> {
    let map = parse_object(arguments)?;
    let command = match map.get("command")? {
        Value::String(s) if !s.is_empty() => vec![json!("bash"), json!("-lc"), json!(s)],
        other => strings(other)?,
    };
    let mut action = Map::new();
    action.insert("type".to_owned(), json!("exec"));
    action.insert("command".to_owned(), Value::Array(command));
    action.insert(
        "env".to_owned(),
        map.get("env")
            .filter(|e| e.is_object())
            .cloned()
            .unwrap_or_else(|| json!({})),
    );
    if let Some(t) = map.get("timeout_ms").filter(|t| t.is_u64()) {
        action.insert("timeout_ms".to_owned(), t.clone());
    }
    if let Some(dir) = map
        .get("working_directory")
        .or_else(|| map.get("workdir"))
        .filter(|d| d.is_string())
    {
        action.insert("working_directory".to_owned(), dir.clone());
    }
    if let Some(user) = map.get("user").filter(|u| u.is_string()) {
        action.insert("user".to_owned(), user.clone());
    }
    Some(Value::Object(action))
}

/// `shell_call.action` from `{commands, timeout_ms, max_output_length}`.
fn shell_action(arguments: &str) -> Option<Value> {
    let map = parse_object(arguments)?;
    let commands = match map.get("commands").or_else(|| map.get("command"))? {
        Value::String(s) if !s.is_empty() => vec![json!(s)],
        other => strings(other)?,
    };
    let mut action = Map::new();
    action.insert("commands".to_owned(), Value::Array(commands));
    for key in ["timeout_ms", "max_output_length"] {
        if let Some(v) = map.get(key).filter(|v| v.is_u64()) {
            action.insert(key.to_owned(), v.clone());
        }
    }
    Some(Value::Object(action))
}

/// `apply_patch_call.operation` from `{type, path, diff}`.
fn patch_operation(arguments: &str) -> Option<Value> {
    let map = parse_object(arguments)?;
    let kind = map
        .get("type")
        .or_else(|| map.get("operation"))
        .and_then(Value::as_str)?;
    let path = map
        .get("path")
        .and_then(Value::as_str)
        .filter(|p| !p.is_empty())?;
    match kind {
        "delete_file" => Some(json!({"type": kind, "path": path})),
        "create_file" | "update_file" => {
            let diff = map.get("diff").and_then(Value::as_str)?;
            Some(json!({"type": kind, "path": path, "diff": diff}))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn custom_input_unwraps_what_weak_models_add() {
        let patch = "*** Begin Patch\n*** Add File: a.txt\n+hi\n*** End Patch";
        let cases = [
            serde_json::to_string(&json!({"input": patch})).unwrap(),
            serde_json::to_string(&json!({"patch": patch})).unwrap(),
            serde_json::to_string(&json!({"whatever": patch})).unwrap(),
            serde_json::to_string(&json!(patch)).unwrap(),
            patch.to_owned(),
            format!("```diff\n{patch}\n```"),
            serde_json::to_string(&json!({"input": format!("```\n{patch}\n```")})).unwrap(),
        ];
        for case in cases {
            assert_eq!(custom_input(&case).trim_end(), patch, "{case}");
        }
    }

    #[test]
    fn shell_shapes_accept_strings_and_lists() {
        assert_eq!(
            local_shell_action(r#"{"command": "ls -la", "workdir": "/tmp"}"#).unwrap(),
            json!({"type": "exec", "command": ["bash", "-lc", "ls -la"], "env": {}, "working_directory": "/tmp"})
        );
        assert_eq!(
            shell_action(r#"{"commands": ["pwd", "ls"], "timeout_ms": 5}"#).unwrap(),
            json!({"commands": ["pwd", "ls"], "timeout_ms": 5})
        );
        assert!(local_shell_action(r#"{"command": []}"#).is_none());
        assert!(shell_action("{").is_none());
    }

    #[test]
    fn patch_operations_are_checked() {
        assert_eq!(
            patch_operation(r#"{"type": "create_file", "path": "a", "diff": "+x"}"#).unwrap(),
            json!({"type": "create_file", "path": "a", "diff": "+x"})
        );
        assert_eq!(
            patch_operation(r#"{"type": "delete_file", "path": "a"}"#).unwrap(),
            json!({"type": "delete_file", "path": "a"})
        );
        assert!(patch_operation(r#"{"type": "update_file", "path": "a"}"#).is_none());
        assert!(patch_operation(r#"{"type": "rename", "path": "a", "diff": ""}"#).is_none());
    }
}
