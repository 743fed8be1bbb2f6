//! The function shapes of degraded tools: what a provider with functions only sees instead of a
//! freeform `custom` tool or a built-in `local_shell`, `shell` or `apply_patch` tool.

use serde_json::{Value, json};
use toolbridge_wire::responses::CustomTool;

use super::{Identity, reasons};

/// The single parameter of a degraded custom tool.
pub const CUSTOM_INPUT: &str = "input";

pub fn custom_parameters() -> Value {
    json!({
        "type": "object",
        "properties": {
            CUSTOM_INPUT: {
                "type": "string",
                "description": "The tool's raw input text, exactly as the tool expects it (not wrapped in JSON or markdown)."
            }
        },
        "required": [CUSTOM_INPUT],
        "additionalProperties": false
    })
}

/// [`custom_parameters`] as JSON text, written once per process (shared by every degraded
/// custom tool: Codex's `apply_patch` on every turn).
pub fn custom_parameters_json() -> toolbridge_wire::RawJson {
    static JSON: std::sync::LazyLock<toolbridge_wire::RawJson> =
        std::sync::LazyLock::new(|| custom_parameters().into());
    JSON.clone()
}

/// The description of a degraded custom tool: its own description and its input format.
pub fn custom_description(tool: &CustomTool) -> String {
    let mut text = tool.description.clone().unwrap_or_default();
    if !text.is_empty() {
        text.push_str("\n\n");
    }
    text.push_str("Pass the tool's raw input as the string argument `input`.");
    if let Some(format) = &tool.format
        && format.kind == "grammar"
        && let Some(definition) = &format.definition
    {
        let syntax = format.syntax.as_deref().unwrap_or("lark");
        text.push_str(&format!(
            " The input must match this {syntax} grammar:\n```\n{definition}\n```"
        ));
    }
    text
}

/// Identity, reason, parameters and description of a built-in tool type sent as a function.
pub fn builtin(kind: &str) -> (Identity, &'static str, Value, &'static str) {
    match kind {
        "local_shell" => (
            Identity::LocalShell,
            reasons::LOCAL_SHELL_AS_FUNCTION,
            json!({
                "type": "object",
                "properties": {
                    "command": {"type": "array", "items": {"type": "string"}, "description": "The command and its arguments, e.g. [\"bash\", \"-lc\", \"ls -la\"]."},
                    "working_directory": {"type": "string", "description": "Directory to run in."},
                    "timeout_ms": {"type": "integer", "description": "Timeout in milliseconds."},
                    "env": {"type": "object", "additionalProperties": {"type": "string"}, "description": "Extra environment variables."}
                },
                "required": ["command"]
            }),
            "Run a command on the user's machine and get its output.",
        ),
        "shell" => (
            Identity::Shell,
            reasons::SHELL_AS_FUNCTION,
            json!({
                "type": "object",
                "properties": {
                    "commands": {"type": "array", "items": {"type": "string"}, "description": "Shell commands to run in order."},
                    "timeout_ms": {"type": "integer", "description": "Timeout in milliseconds."},
                    "max_output_length": {"type": "integer", "description": "Most characters of output to return."}
                },
                "required": ["commands"]
            }),
            "Run shell commands on the user's machine and get their output.",
        ),
        _ => (
            Identity::ApplyPatch,
            reasons::APPLY_PATCH_AS_FUNCTION,
            json!({
                "type": "object",
                "properties": {
                    "type": {"type": "string", "enum": ["create_file", "update_file", "delete_file"]},
                    "path": {"type": "string", "description": "The file's path."},
                    "diff": {"type": "string", "description": "The V4A diff: the whole content for create_file, the changes for update_file; omit for delete_file."}
                },
                "required": ["type", "path"]
            }),
            "Create, update or delete one file.",
        ),
    }
}
