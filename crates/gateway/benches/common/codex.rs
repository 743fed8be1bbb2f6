//! The recorded Codex request (the `L` body of the benchmarks), or a generated equivalent when
//! the recorded one is absent (a fresh clone without `../shared`).
//!
//! Included by path (`#[path = "common/codex.rs"] mod codex;`) from the benches and from the
//! smoke test of the instruction benchmarks, so every one measures the same body.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use serde_json::{Value, json};

/// The recorded request, relative to the shared dir.
const FIXTURE: &str = "fixtures/codex-0.169.0/three_turn-gpt-5.5/003-request.json";
/// The size the generated request aims at (the recorded one is 44,008 bytes).
const GENERATED_TARGET_BYTES: usize = 44_000;

fn shared_dir() -> PathBuf {
    std::env::var_os("TOOLBRIDGE_SHARED_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared"))
}

/// The Codex request body: the fixture when present, else a generated equivalent.
pub fn codex_request() -> Vec<u8> {
    let path = shared_dir().join(FIXTURE);
    match std::fs::read(&path) {
        Ok(bytes) => {
            eprintln!(
                "pipeline bench input: fixture {} ({} bytes)",
                path.display(),
                bytes.len()
            );
            bytes
        }
        Err(e) => {
            let bytes = generated_codex_request();
            eprintln!(
                "pipeline bench input: generated Codex-like request ({} bytes); fixture {} unavailable: {e}",
                bytes.len(),
                path.display()
            );
            bytes
        }
    }
}

// --- The generated request ------------------------------------------------------------------

/// Sentences in the style of Codex's base instructions, cycled to build a long system prompt.
const PROMPT_SENTENCES: &[&str] = &[
    "You are a coding agent running in a terminal-based assistant. You are expected to be precise, safe, and helpful.",
    "Within this context, you can receive user prompts and other context provided by the harness, such as files in the workspace.",
    "Communicate with the user by streaming thinking and responses, and by making and updating plans.",
    "Emit function calls to run terminal commands and apply patches; depending on how this run is configured, you can request that these function calls be escalated for approval before running.",
    "Keep going until the query is completely resolved before ending your turn and yielding back to the user.",
    "Only terminate your turn when you are sure that the problem is solved, and autonomously resolve the query to the best of your ability.",
    "If you are not sure about file content or codebase structure pertaining to the user's request, use your tools to read files and gather the relevant information: do NOT guess or make up an answer.",
    "Fix the problem at the root cause rather than applying surface-level patches, when possible.",
    "Avoid unneeded complexity in your solution, and keep changes consistent with the style of the existing codebase.",
    "Update documentation as necessary, but do not add copyright or license headers unless specifically requested.",
    "Use `git log` and `git blame` to search the history of the codebase if additional context is required.",
    "NEVER add inline comments within code unless explicitly requested, and never output inline citations like \"【F:README.md†L5-L14】\".",
    "When the sandbox is `workspace-write`, commands may write inside the workspace roots and `/tmp`; network access is restricted.",
    "Before making tool calls, send a brief preamble to the user explaining what you're about to do: one or two sentences, 8-12 words for quick updates.",
    "Plans should be high-quality: \n1. Add CLI entry with file args\n2. Parse Markdown via CommonMark library\n3. Apply semantic HTML template\n4. Handle code blocks, images, links\n5. Add error handling for invalid files",
    "Final answers use headers only when they improve scanability; bullets are `- ` followed by bold keywords where useful; wrap commands, paths and identifiers in backticks.",
    "\tWhen testing, start as specific as possible to the code you changed so that you can catch issues efficiently, then make your way to broader tests as you build confidence.",
    "Do not attempt to fix unrelated bugs or broken tests; it is not your responsibility to fix them, though you may mention them to the user in your final message.",
];

fn long_text(target: usize, salt: usize) -> String {
    let mut text = String::with_capacity(target + 256);
    let mut i = salt;
    let mut section = 0;
    while text.len() < target {
        if i.is_multiple_of(9) {
            section += 1;
            text.push_str(&format!("\n\n## Section {section}: guidance\n\n"));
        }
        text.push_str(PROMPT_SENTENCES[i % PROMPT_SENTENCES.len()]);
        text.push(if i % 3 == 2 { '\n' } else { ' ' });
        i += 1;
    }
    text.truncate(target);
    text
}

fn string_prop(description: &str) -> Value {
    json!({"type": "string", "description": description})
}

fn number_prop(description: &str) -> Value {
    json!({"type": "number", "description": description})
}

fn function_tool(name: &str, description: &str, properties: Value, required: &[&str]) -> Value {
    json!({
        "type": "function",
        "name": name,
        "description": description,
        "strict": false,
        "parameters": {
            "type": "object",
            "properties": properties,
            "required": required,
            "additionalProperties": false,
        },
    })
}

const APPLY_PATCH_GRAMMAR: &str = r#"start: begin_patch hunk+ end_patch
begin_patch: "*** Begin Patch" LF
end_patch: "*** End Patch" LF?

hunk: add_hunk | delete_hunk | update_hunk
add_hunk: "*** Add File: " filename LF add_line+
delete_hunk: "*** Delete File: " filename LF
update_hunk: "*** Update File: " filename LF change_move? change?

filename: /(.+)/
add_line: "+" /(.*)/ LF -> line

change_move: "*** Move to: " filename LF
change: (change_context | change_line)+ eof_line?
change_context: ("@@" | "@@ " /(.+)/) LF
change_line: ("+" | "-" | " ") /(.*)/ LF
eof_line: "*** End of File" LF

%import common.LF
"#;

fn generated_tools() -> Vec<Value> {
    vec![
        function_tool(
            "exec_command",
            "Runs a command in a PTY, returning output or a session ID for ongoing interaction.",
            json!({
                "cmd": string_prop("Shell command to execute."),
                "justification": string_prop("User-facing approval question for `require_escalated`; omit otherwise."),
                "login": {"type": "boolean", "description": "True runs the shell with -l/-i semantics; false disables them. Defaults to true."},
                "max_output_tokens": number_prop("Output token budget. Defaults to 10000 tokens; larger requests may be capped by policy."),
                "prefix_rule": {"type": "array", "items": {"type": "string"}, "description": "Command prefix to remember for future approvals, e.g. [\"git\", \"pull\"]."},
                "sandbox_permissions": {"type": "string", "enum": ["use_default", "require_escalated"], "description": "Sandbox permissions for the command. Defaults to `use_default`."},
                "shell": string_prop("Shell binary to launch. Defaults to the user's default shell."),
                "tty": {"type": "boolean", "description": "Whether to allocate a TTY for the command. Defaults to false (plain pipes)."},
                "workdir": string_prop("Optional working directory to run the command in; defaults to the turn cwd."),
                "yield_time_ms": number_prop("How long to wait (in milliseconds) for output before yielding."),
            }),
            &["cmd"],
        ),
        function_tool(
            "write_stdin",
            "Writes characters to an existing unified exec session and returns recent output.",
            json!({
                "chars": string_prop("Bytes to write to stdin. Defaults to empty, which polls without writing."),
                "max_output_tokens": number_prop("Output token budget. Defaults to 10000 tokens; larger requests may be capped by policy."),
                "session_id": number_prop("Identifier of the running unified exec session."),
                "yield_time_ms": number_prop("How long to wait (in milliseconds) for output before yielding."),
            }),
            &["session_id"],
        ),
        function_tool(
            "request_user_input",
            "Request user input for one to three short questions and wait for the response. This tool is only available in Plan mode.",
            json!({
                "questions": {
                    "type": "array",
                    "description": "Questions to show the user. Prefer 1 and do not exceed 3",
                    "items": {
                        "type": "object",
                        "properties": {
                            "header": string_prop("Short header label shown in the UI (12 or fewer chars)."),
                            "id": string_prop("Stable identifier for mapping answers (snake_case)."),
                            "question": string_prop("Single-sentence prompt shown to the user."),
                            "options": {
                                "type": "array",
                                "description": "Provide 2-3 mutually exclusive choices. Put the recommended option first and suffix its label with \"(Recommended)\".",
                                "items": {
                                    "type": "object",
                                    "properties": {
                                        "label": string_prop("User-facing label (1-5 words)."),
                                        "description": string_prop("One short sentence explaining impact/tradeoff if selected."),
                                    },
                                    "required": ["label", "description"],
                                    "additionalProperties": false,
                                },
                            },
                        },
                        "required": ["id", "header", "question", "options"],
                        "additionalProperties": false,
                    },
                },
            }),
            &["questions"],
        ),
        function_tool(
            "view_image",
            "View a local image file from the filesystem when visual inspection is needed. Use this for images already available on disk.",
            json!({"path": string_prop("Local filesystem path to an image file.")}),
            &["path"],
        ),
        function_tool(
            "get_goal",
            "Get the current goal for this thread, including status, budgets, token and elapsed-time usage, and remaining token budget.",
            json!({}),
            &[],
        ),
        function_tool(
            "create_goal",
            "Create a goal only when explicitly requested by the user or system/developer instructions; do not infer goals from ordinary tasks.\nSet token_budget only when an explicit token budget is requested. Fails if an unfinished goal exists; use update_goal only for status.",
            json!({
                "objective": string_prop("Required. The concrete objective to start pursuing. This starts a new active goal when no goal exists or replaces the current goal when it is complete."),
                "token_budget": {"type": "integer", "description": "Optional positive token budget for the new active goal."},
            }),
            &["objective"],
        ),
        function_tool(
            "update_goal",
            "Update the existing goal.\nSet status to `paused` only at the user's explicit request to pause this goal, never on your own initiative. Ask if unclear; a later resume revokes that request. Report the returned status and stop goal work. Budget limits take precedence over pausing.\nSet status to `complete` only when the objective has actually been achieved and no required work remains.\nSet status to `blocked` only when the same blocking condition has repeated for at least three consecutive goal turns.",
            json!({
                "status": {"type": "string", "enum": ["active", "paused", "complete", "blocked"], "description": "Required. The new status of the goal. Use `active` to resume a paused goal."},
                "note": string_prop("Optional short note shown to the user explaining the status change, e.g. what blocks progress."),
                "token_budget": {"type": ["integer", "null"], "description": "Optional new token budget; null removes the budget."},
            }),
            &["status"],
        ),
        function_tool(
            "list_mcp_resources",
            "Lists resources provided by MCP servers. Resources allow servers to share data that provides context to language models, such as files, database schemas, or application-specific information. Prefer resources over web search when possible.",
            json!({
                "cursor": string_prop("Opaque cursor returned by a previous list_mcp_resources call for the same server."),
                "server": string_prop("Optional MCP server name. When omitted, lists resources from every configured server."),
            }),
            &[],
        ),
        json!({
            "type": "custom",
            "name": "apply_patch",
            "description": "The `apply_patch` tool can be used to edit files. This is a FREEFORM tool, so do not wrap the patch in JSON.",
            "format": {"type": "grammar", "syntax": "lark", "definition": APPLY_PATCH_GRAMMAR},
        }),
        json!({"type": "web_search"}),
    ]
}

fn developer(text: String) -> Value {
    json!({"type": "message", "role": "developer", "content": [{"type": "input_text", "text": text}]})
}

fn generated_input(system_prompt: String) -> Vec<Value> {
    let environment = "<environment_context>\n  <cwd>/home/user/work</cwd>\n  <shell>bash</shell>\n  <current_date>2026-11-30</current_date>\n  <timezone>Etc/UTC</timezone>\n  <filesystem><workspace_roots><root>/home/user/work</root></workspace_roots><permission_profile type=\"managed\"><file_system type=\"restricted\"><entry access=\"read\" path=\"/\"/><entry access=\"write\" path=\"/home/user/work\"/><entry access=\"write\" path=\"/tmp\"/></file_system><network enabled=\"false\"/></permission_profile></filesystem>\n  <approval_policy>never</approval_policy>\n  <sandbox_mode>workspace-write</sandbox_mode>\n  <network_access>restricted</network_access>\n</environment_context>";
    vec![
        developer(system_prompt),
        developer(format!(
            "<permissions instructions>\n{}\n</permissions instructions>",
            long_text(5_400, 7)
        )),
        json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": environment}]}),
        json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Run a shell command that prints hello, then create a file with apply_patch, then tell me you are done."}]}),
        json!({
            "type": "reasoning",
            "id": "rs_1",
            "summary": [{"type": "summary_text", "text": "**Planning** run a shell command"}],
            "content": null,
            "encrypted_content": "gAAAAABp-encrypted-reasoning-payload",
        }),
        json!({
            "type": "function_call",
            "status": "completed",
            "id": "fc_1",
            "name": "exec_command",
            "arguments": "{\"cmd\": \"echo hello && pwd && ls -a\", \"yield_time_ms\": 5000}",
            "call_id": "call_shell_1",
        }),
        json!({
            "type": "function_call_output",
            "call_id": "call_shell_1",
            "output": "Chunk ID: 5331c7\nWall time: 0.0000 seconds\nProcess exited with code 0\nOriginal token count: 24\nOutput:\nhello\n/home/user/work\n.\n..\n.git\nsrc\nCargo.toml\n",
        }),
        json!({
            "type": "custom_tool_call",
            "status": "completed",
            "id": "ctc_2",
            "call_id": "call_patch_2",
            "name": "apply_patch",
            "input": "*** Begin Patch\n*** Add File: created.txt\n+created via apply_patch\n+second line\n*** End Patch",
        }),
        json!({
            "type": "custom_tool_call_output",
            "call_id": "call_patch_2",
            "output": "Exit code: 0\nWall time: 0 seconds\nOutput:\nSuccess. Updated the following files:\nA created.txt\n",
        }),
    ]
}

fn generated_body(system_prompt: String) -> Value {
    let id = "01a22a49-c96e-7c83-843f-5f150ff3aace";
    json!({
        "model": "gpt-5.5",
        "stream": true,
        "input": generated_input(system_prompt),
        "tools": generated_tools(),
        "tool_choice": "auto",
        "parallel_tool_calls": true,
        "reasoning": {"effort": "medium"},
        "store": false,
        "include": ["reasoning.encrypted_content"],
        "prompt_cache_key": id,
        "text": {"verbosity": "low"},
        "client_metadata": {
            "thread_id": id,
            "session_id": id,
            "turn_id": "01a22a49-c983-7b43-957a-6ed53cd4e284",
            "x-codex-window-id": format!("{id}:0"),
            "x-codex-turn-metadata": json!({
                "session_id": id,
                "thread_id": id,
                "agent_name": "/root",
                "request_kind": "turn",
                "sandbox": "seccomp",
                "sandbox_mode": "workspace-write",
                "model": "gpt-5.5",
                "reasoning_effort": "medium",
            }).to_string(),
        },
    })
}

/// A Codex-shaped request of about [`GENERATED_TARGET_BYTES`]: the system prompt is sized so
/// that the whole body reaches the target.
fn generated_codex_request() -> Vec<u8> {
    let rest = serde_json::to_vec(&generated_body(String::new()))
        .expect("serialisable")
        .len();
    let prompt = long_text(GENERATED_TARGET_BYTES.saturating_sub(rest).max(20_000), 0);
    serde_json::to_vec(&generated_body(prompt)).expect("serialisable")
}
