//! Benchmarks of the gateway's two hot paths, with no I/O:
//!
//! - `request/*`: a Codex-sized Responses request (about 44 KB, 10 tools) parsed, normalised and
//!   translated to a Chat Completions body (`request/codex_to_chat`), and parsed alone
//!   (`request/parse_only`) so the share of JSON parsing is visible.
//! - `stream/*`: a 2,000-chunk Chat Completions stream decoded and reconstructed into Responses
//!   stream events (`stream/chat_2000_chunks`), and the same with every event encoded as the SSE
//!   frame that goes on the wire (`stream/chat_2000_chunks_with_sse_encoding`). Throughput is
//!   reported in upstream chunks per second.
//! - `stream/tool_call_deltas_2000`: a stream of about 2,000 chunks that is mostly tool-call
//!   argument deltas (a short text preamble, then three parallel calls, keyed by index, whose
//!   arguments arrive interleaved in about 650 small pieces each), decoded and reconstructed.
//!   Throughput is reported in Responses events produced per second.
//!
//! The request input is the recorded Codex request
//! `$TOOLBRIDGE_SHARED_DIR/fixtures/codex-0.169.0/three_turn-gpt-5.5/003-request.json`
//! (default shared dir: `shared/` beside the workspace); when it is absent an equivalent request
//! is generated in code.

// Benches are test code: a broken fixture should stop the run loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use serde_json::{Value, json};
use toolbridge_core::assemble::{AssembleOptions, Assembler, ResponseMeta, skeleton};
use toolbridge_core::contract::OutputContract;
use toolbridge_core::plan::{NameMap, plan as plan_tools};
use toolbridge_core::request::{Limits, normalize};
use toolbridge_gateway::{frame, parse_request};
use toolbridge_providers::chat::request::build;
use toolbridge_providers::chat::stream::{ChunkDecoder, Flow};
use toolbridge_providers::profile::Profile;

/// The recorded request, relative to the shared dir.
const FIXTURE: &str = "fixtures/codex-0.169.0/three_turn-gpt-5.5/003-request.json";
/// The size the generated request aims at (the recorded one is 44,008 bytes).
const GENERATED_TARGET_BYTES: usize = 44_000;
/// Upstream chunks per simulated stream (the usage chunk and `[DONE]` come on top).
const STREAM_CHUNKS: usize = 2_000;
/// Text chunks before the tool calls of the tool-call stream.
const TOOL_STREAM_TEXT_CHUNKS: usize = 40;
/// Argument pieces per call of the tool-call stream.
const TOOL_STREAM_PIECES_PER_CALL: usize = 650;
/// The parallel calls of the tool-call stream: tools the Codex request declares, so the plan's
/// name map knows them.
const TOOL_STREAM_CALLS: &[&str] = &["exec_command", "write_stdin", "view_image"];
const PRESET: &str = "deepseek";
const UPSTREAM_MODEL: &str = "deepseek-v4-flash";

fn shared_dir() -> PathBuf {
    std::env::var_os("TOOLBRIDGE_SHARED_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared"))
}

/// The Codex request body: the fixture when present, else a generated equivalent.
fn codex_request() -> Vec<u8> {
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

// --- The stream ------------------------------------------------------------------------------

/// `STREAM_CHUNKS` Chat chunks as a provider sends them (role first, `finish_reason` last), then
/// a usage chunk and `[DONE]`.
fn chat_stream_payloads() -> Vec<String> {
    const WORDS: &[&str] = &[
        "The ",
        "gateway ",
        "translates ",
        "each ",
        "chunk ",
        "into ",
        "Responses ",
        "events",
        ", ",
        "keeping ",
        "`sequence_number` ",
        "monotonic",
        ".\n",
        "\"quoted\" ",
        "text ",
        "and ",
        "unicode — ",
        "ü ",
        "in ",
        "between",
        ". ",
    ];
    let chunk = |delta: Value, finish: Value| {
        json!({
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        })
        .to_string()
    };
    let mut payloads = Vec::with_capacity(STREAM_CHUNKS + 2);
    payloads.push(chunk(
        json!({"role": "assistant", "content": ""}),
        Value::Null,
    ));
    for i in 1..STREAM_CHUNKS - 1 {
        payloads.push(chunk(
            json!({"content": WORDS[i % WORDS.len()]}),
            Value::Null,
        ));
    }
    payloads.push(chunk(json!({}), json!("stop")));
    payloads.push(
        json!({
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "m",
            "choices": [],
            "usage": {"prompt_tokens": 11_000, "completion_tokens": 1_998, "total_tokens": 12_998},
        })
        .to_string(),
    );
    payloads.push("[DONE]".to_owned());
    payloads
}

/// One Chat chunk with `delta` and an optional finish reason.
fn chat_chunk(delta: Value, finish: Value) -> String {
    json!({
        "id": "chatcmpl-2",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    })
    .to_string()
}

/// The JSON arguments of call `call`, long enough to give [`TOOL_STREAM_PIECES_PER_CALL`]
/// pieces of a few characters each (escapes, paths and a little non-ASCII included).
fn tool_arguments(call: usize) -> String {
    let mut script = String::new();
    let mut line = 0;
    while script.len() < TOOL_STREAM_PIECES_PER_CALL * 7 {
        script.push_str(&format!(
            "echo \"step {line} of call {call}: déjà vu\" >> /tmp/log-{call}.txt && cat src/module_{line}.rs | grep -n 'fn ' ; "
        ));
        line += 1;
    }
    json!({"cmd": script, "workdir": "/home/user/work", "yield_time_ms": 5000}).to_string()
}

/// Splits `text` into `n` pieces of about equal length, on character boundaries.
fn split_pieces(text: &str, n: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    (0..n)
        .map(|i| {
            chars[i * chars.len() / n..(i + 1) * chars.len() / n]
                .iter()
                .collect()
        })
        .collect()
}

/// A tool-call heavy stream: a role chunk, a short text preamble, then the opening chunk of each
/// call (id, name, empty arguments) followed by their argument pieces interleaved round-robin,
/// a `tool_calls` finish, a usage chunk and `[DONE]`.
fn tool_call_stream_payloads() -> Vec<String> {
    let mut payloads = Vec::new();
    payloads.push(chat_chunk(
        json!({"role": "assistant", "content": ""}),
        Value::Null,
    ));
    for i in 0..TOOL_STREAM_TEXT_CHUNKS {
        payloads.push(chat_chunk(
            json!({"content": format!("checking part {i} ")}),
            Value::Null,
        ));
    }
    let pieces: Vec<Vec<String>> = (0..TOOL_STREAM_CALLS.len())
        .map(|call| split_pieces(&tool_arguments(call), TOOL_STREAM_PIECES_PER_CALL))
        .collect();
    for (index, name) in TOOL_STREAM_CALLS.iter().enumerate() {
        payloads.push(chat_chunk(
            json!({"tool_calls": [{
                "index": index,
                "id": format!("call_{index}"),
                "type": "function",
                "function": {"name": name, "arguments": ""},
            }]}),
            Value::Null,
        ));
    }
    let longest = pieces.iter().map(Vec::len).max().unwrap_or(0);
    for p in 0..longest {
        for (index, call_pieces) in pieces.iter().enumerate() {
            if let Some(piece) = call_pieces.get(p) {
                payloads.push(chat_chunk(
                    json!({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}),
                    Value::Null,
                ));
            }
        }
    }
    payloads.push(chat_chunk(json!({}), json!("tool_calls")));
    payloads.push(
        json!({
            "id": "chatcmpl-2",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "m",
            "choices": [],
            "usage": {"prompt_tokens": 11_000, "completion_tokens": 2_000, "total_tokens": 13_000},
        })
        .to_string(),
    );
    payloads.push("[DONE]".to_owned());
    payloads
}

// --- The benchmarks --------------------------------------------------------------------------

fn request_benches(c: &mut Criterion) {
    let body = codex_request();
    let profile = Profile::preset(PRESET).expect("the preset exists");

    // Check once, outside the timing, that the whole path works on this input.
    let req = parse_request(&body).expect("the request parses");
    let canonical = normalize(&req, &Limits::default()).expect("the request normalises");
    let plan = plan_tools(
        &canonical.tools,
        canonical.tool_choice.as_ref(),
        &profile.tools,
    )
    .expect("the tools plan");
    let mut diags = canonical.diagnostics.clone();
    diags.extend(plan.diagnostics.iter().cloned());
    let chat = build(&canonical, &plan, &profile, UPSTREAM_MODEL, &mut diags);
    let chat_bytes = serde_json::to_vec(&chat).expect("serialisable");
    eprintln!(
        "request: {} input bytes -> {} Chat bytes, {} messages, {} tools, {} diagnostics",
        body.len(),
        chat_bytes.len(),
        chat.messages.len(),
        chat.tools.as_ref().map_or(0, Vec::len),
        diags.len()
    );

    let mut group = c.benchmark_group("request");
    group.throughput(Throughput::Bytes(body.len() as u64));
    group.bench_function("codex_to_chat", |b| {
        b.iter(|| {
            let req = parse_request(black_box(&body)).expect("parses");
            let canonical = normalize(&req, &Limits::default()).expect("normalises");
            let plan = plan_tools(
                &canonical.tools,
                canonical.tool_choice.as_ref(),
                &profile.tools,
            )
            .expect("plans");
            let mut diags = canonical.diagnostics.clone();
            diags.extend(plan.diagnostics.iter().cloned());
            let chat = build(&canonical, &plan, &profile, UPSTREAM_MODEL, &mut diags);
            let bytes = serde_json::to_vec(&chat).expect("serialisable");
            black_box((bytes, diags))
        });
    });
    group.bench_function("parse_only", |b| {
        b.iter(|| black_box(parse_request(black_box(&body)).expect("parses")));
    });
    group.finish();
}

/// Runs one whole stream through decoder and assembler; `encode` also frames every event as SSE.
/// Returns the number of events produced (and, with `encode`, the bytes framed).
fn run_stream(
    payloads: &[String],
    req: &toolbridge_wire::responses::CreateResponse,
    meta: &ResponseMeta,
    names: &Arc<NameMap>,
    profile: &Profile,
    encode: bool,
) -> (usize, usize) {
    let mut decoder = ChunkDecoder::new(profile);
    let mut assembler = Assembler::new(
        skeleton(req, meta),
        AssembleOptions {
            contract: OutputContract::Text,
            names: Arc::clone(names),
            ..AssembleOptions::default()
        },
    );
    let mut out = Vec::new();
    let mut events = Vec::new();
    let mut diags = Vec::new();
    let mut produced = 0;
    let mut framed = 0;
    let drain = |out: &mut Vec<_>, produced: &mut usize, framed: &mut usize| {
        *produced += out.len();
        if encode {
            for ev in out.drain(..) {
                *framed += black_box(frame(&ev)).len();
            }
        } else {
            black_box(&*out);
            out.clear();
        }
    };
    assembler.start(&mut out);
    drain(&mut out, &mut produced, &mut framed);
    for data in payloads {
        let flow = decoder
            .on_data(profile, black_box(data), &mut events, &mut diags)
            .expect("a well-formed chunk");
        for d in diags.drain(..) {
            assembler.add_diagnostic(d);
        }
        for ev in events.drain(..) {
            assembler.on_event(ev, &mut out);
        }
        drain(&mut out, &mut produced, &mut framed);
        if flow == Flow::Done {
            break;
        }
    }
    black_box(assembler.finish(0, &mut out));
    drain(&mut out, &mut produced, &mut framed);
    (produced, framed)
}

fn stream_benches(c: &mut Criterion) {
    let payloads = chat_stream_payloads();
    let profile = Profile::preset(PRESET).expect("the preset exists");
    // The skeleton echoes the request, so use the real Codex one: its tools are in every
    // `response.created`/`in_progress`/`completed` snapshot.
    let req = parse_request(&codex_request()).expect("the request parses");
    let meta = ResponseMeta {
        id: "resp_bench".to_owned(),
        created_at: 1,
        stored: false,
    };
    // The reconstruction maps upstream tool names back through the request's plan.
    let canonical = normalize(&req, &Limits::default()).expect("the request normalises");
    let names = Arc::new(
        plan_tools(
            &canonical.tools,
            canonical.tool_choice.as_ref(),
            &profile.tools,
        )
        .expect("the tools plan")
        .names,
    );
    let (events, bytes) = run_stream(&payloads, &req, &meta, &names, &profile, true);
    eprintln!(
        "stream: {} payloads ({} chunks + usage + [DONE], {} bytes) -> {events} events, {bytes} SSE bytes",
        payloads.len(),
        STREAM_CHUNKS,
        payloads.iter().map(String::len).sum::<usize>()
    );

    let mut group = c.benchmark_group("stream");
    group.throughput(Throughput::Elements(STREAM_CHUNKS as u64));
    group.bench_function("chat_2000_chunks", |b| {
        b.iter(|| black_box(run_stream(&payloads, &req, &meta, &names, &profile, false)));
    });
    group.bench_function("chat_2000_chunks_with_sse_encoding", |b| {
        b.iter(|| black_box(run_stream(&payloads, &req, &meta, &names, &profile, true)));
    });
    group.finish();

    // Mostly tool-call argument deltas; counted in events, since a delta chunk yields about one.
    let tool_payloads = tool_call_stream_payloads();
    let (tool_events, tool_bytes) = run_stream(&tool_payloads, &req, &meta, &names, &profile, true);
    let calls_done = {
        let mut decoder = ChunkDecoder::new(&profile);
        let mut assembler = Assembler::new(
            skeleton(&req, &meta),
            AssembleOptions {
                contract: OutputContract::Text,
                names: Arc::clone(&names),
                ..AssembleOptions::default()
            },
        );
        let (mut out, mut events, mut diags) = (Vec::new(), Vec::new(), Vec::new());
        for data in &tool_payloads {
            decoder
                .on_data(&profile, data, &mut events, &mut diags)
                .expect("a well-formed chunk");
            for ev in events.drain(..) {
                assembler.on_event(ev, &mut out);
            }
        }
        let response = assembler.finish(0, &mut out);
        serde_json::to_value(&response.output)
            .expect("serialisable")
            .as_array()
            .map_or(0, |items| {
                items
                    .iter()
                    .filter(|i| i["type"] == "function_call")
                    .count()
            })
    };
    assert_eq!(
        calls_done,
        TOOL_STREAM_CALLS.len(),
        "every call of the tool-call stream is reconstructed"
    );
    eprintln!(
        "stream/tool_call_deltas: {} payloads ({} bytes) -> {tool_events} events, {tool_bytes} SSE bytes, {calls_done} function calls",
        tool_payloads.len(),
        tool_payloads.iter().map(String::len).sum::<usize>()
    );
    let mut group = c.benchmark_group("stream");
    group.throughput(Throughput::Elements(tool_events as u64));
    group.bench_function("tool_call_deltas_2000", |b| {
        b.iter(|| {
            black_box(run_stream(
                &tool_payloads,
                &req,
                &meta,
                &names,
                &profile,
                false,
            ))
        });
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(30)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    targets = request_benches, stream_benches
}
criterion_main!(benches);
