//! Ring 3: the real Codex CLI (`@openai/codex@0.169.0`, installed by `scripts/test`) runs a task
//! through the real `toolbridge` binary against a fake upstream that behaves like GLM (and then
//! like DeepSeek): it rejects the `developer` role and any non-function tool, as the real ones
//! do. The model runs `exec_command`, adds a file through the degraded `apply_patch`, and answers.
//! The test checks the file Codex wrote and Codex's last message.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code fails loudly

use std::path::Path;
use std::sync::Arc;

use serde_json::{Value, json};
use toolbridge_testkit::chat::{chunk, usage_chunk};
use toolbridge_testkit::codex::CodexExec;
use toolbridge_testkit::{FakeUpstream, GatewayProcess, Recorded, Reply};

const FILE_CONTENT: &str = "made through toolbridge";
const FINAL_ANSWER: &str = "Created created.txt after checking the workspace.";

/// How the fake provider refuses what the real one refuses.
#[derive(Clone, Copy)]
enum Provider {
    Glm,
    DeepSeek,
}

/// Which real Codex runs the task.
#[derive(Clone, Copy, PartialEq)]
enum Cli {
    /// `@openai/codex@0.169.0`.
    V0169,
    /// `@openai/codex@0.171.0`, which opens a socket with a prewarm frame.
    V0171,
}

impl Cli {
    /// The installed binary, or `None` (the test then skips, saying why).
    fn binary(self) -> Option<std::path::PathBuf> {
        match self {
            Self::V0169 => toolbridge_testkit::tools::codex(),
            Self::V0171 => toolbridge_testkit::tools::codex_0171(),
        }
    }
}

/// What the gateway's log says of a run's transport: over WebSocket every response ran in the
/// socket's span (over HTTP none did), and the socket's prewarm (both versions send one) was
/// answered by the gateway itself.
fn assert_transport(websockets: bool, gateway: &GatewayProcess) {
    let log = gateway.stderr();
    let socket_responses = log.matches("websocket_response{").count();
    assert_eq!(socket_responses > 0, websockets, "{log}");
    let prewarmed = log.contains("prewarm answered without an upstream call");
    assert_eq!(prewarmed, websockets, "{log}");
}

fn refusal(provider: Provider, body: &Value) -> Option<Reply> {
    let messages = body["messages"].as_array()?;
    if messages.iter().any(|m| m["role"] == "developer") {
        return Some(match provider {
            Provider::Glm => Reply::error(
                400,
                json!({"error": {"code": "1214", "message": "Incorrect role information"}}),
            ),
            Provider::DeepSeek => Reply::error(
                422,
                json!({"error": {"message": "Failed to deserialize the JSON body into the target type: messages[0].role: unknown variant `developer`", "type": "invalid_request_error"}}),
            ),
        });
    }
    // DeepSeek in thinking mode: a tool-call turn's reasoning must come back.
    if matches!(provider, Provider::DeepSeek)
        && messages.iter().any(|m| {
            m["tool_calls"].as_array().is_some_and(|c| !c.is_empty())
                && m["reasoning_content"].as_str().is_none_or(str::is_empty)
        })
    {
        return Some(Reply::error(
            400,
            json!({"error": {"message": "The `reasoning_content` in the thinking mode must be passed back to the API.", "type": "invalid_request_error"}}),
        ));
    }
    for tool in body["tools"].as_array().into_iter().flatten() {
        if tool["type"] != "function" {
            return Some(Reply::error(
                400,
                json!({"error": {"code": "1214", "message": format!("unsupported tool type {}", tool["type"])}}),
            ));
        }
    }
    // Every assistant tool call must be answered by a tool message, as Chat APIs require.
    for (i, m) in messages.iter().enumerate() {
        for call in m["tool_calls"].as_array().into_iter().flatten() {
            let answered = messages[i + 1..]
                .iter()
                .take_while(|n| n["role"] == "tool")
                .any(|n| n["tool_call_id"] == call["id"]);
            if !answered {
                return Some(Reply::error(
                    400,
                    json!({"error": {"message": format!("tool call {} has no tool message", call["id"])}}),
                ));
            }
        }
    }
    None
}

/// The scripted model: shell first, then the patch, then the answer. A `sloppy` model calls the
/// shell `bash` with broken JSON (unquoted keys, single quotes, a number as a string, no closing
/// brace) and leaves out the patch's `*** End Patch`.
fn script(provider: Provider, request: &Recorded, sloppy: bool) -> Option<Reply> {
    if let Some(refused) = refusal(provider, &request.body) {
        return Some(refused);
    }
    let tool_results = request.body["messages"]
        .as_array()
        .map(|m| m.iter().filter(|m| m["role"] == "tool").count())
        .unwrap_or(0);
    let raw_call = |id: &str, name: &str, arguments: String| {
        // GLM without tool_stream, and DeepSeek, both send a short call whole.
        chunk(
            json!({"role": "assistant", "content": null, "tool_calls": [{"index": 0, "id": id, "type": "function", "function": {"name": name, "arguments": arguments}}]}),
            None,
        )
    };
    let call = |id: &str, name: &str, arguments: Value| raw_call(id, name, arguments.to_string());
    let patch = if sloppy {
        format!("*** Begin Patch\n*** Add File: created.txt\n+{FILE_CONTENT}\n")
    } else {
        format!("*** Begin Patch\n*** Add File: created.txt\n+{FILE_CONTENT}\n*** End Patch\n")
    };
    let chunks = match tool_results {
        0 => vec![
            chunk(
                json!({"role": "assistant", "reasoning_content": "Look around first."}),
                None,
            ),
            if sloppy {
                raw_call(
                    "call_shell_1",
                    "bash",
                    "{cmd: 'echo hello-from-codex', yield_time_ms: '2000'".to_owned(),
                )
            } else {
                call(
                    "call_shell_1",
                    "exec_command",
                    json!({"cmd": "echo hello-from-codex"}),
                )
            },
            chunk(json!({}), Some("tool_calls")),
        ],
        1 => vec![
            chunk(
                json!({"role": "assistant", "reasoning_content": "Now write the file."}),
                None,
            ),
            call("call_patch_2", "apply_patch", json!({ "input": patch })),
            chunk(json!({}), Some("tool_calls")),
        ],
        _ => vec![
            chunk(
                json!({"role": "assistant", "content": "Created created.txt "}),
                None,
            ),
            chunk(json!({"content": "after checking the workspace."}), None),
            chunk(json!({}), Some("stop")),
        ],
    };
    let mut chunks = chunks;
    chunks.push(usage_chunk(100, 20));
    Some(Reply::sse(chunks))
}

async fn start_gateway(upstream: &FakeUpstream, preset: &str) -> GatewayProcess {
    GatewayProcess::start(
        Path::new(env!("CARGO_BIN_EXE_toolbridge")),
        &[
            ("TOOLBRIDGE_UPSTREAM_URL", upstream.base_url()),
            ("TOOLBRIDGE_UPSTREAM_API_KEY", "sk-fake".to_owned()),
            ("TOOLBRIDGE_UPSTREAM_PRESET", preset.to_owned()),
            ("RUST_LOG", "info".to_owned()),
        ],
    )
    .await
}

/// Runs Codex, over WebSocket when `websockets`; returns the file, the last message and
/// Codex's stderr.
async fn run_codex_over(
    codex: &Path,
    gateway: &GatewayProcess,
    scratch: &Path,
    stream_retries: u32,
    websockets: bool,
) -> (String, String, String) {
    let mut exec = CodexExec::new(codex, scratch, gateway.url("/v1"));
    exec.provider =
        format!("stream_max_retries = {stream_retries}\nsupports_websockets = {websockets}");
    let run = exec.run("Create created.txt with the usual content.").await;
    let file = std::fs::read_to_string(run.work.join("created.txt")).unwrap_or_else(|_| {
        panic!(
            "Codex did not create created.txt.\nstdout:\n{}\nstderr:\n{}\n\
             gateway stderr:\n{}",
            run.stdout,
            run.stderr,
            gateway.stderr()
        )
    });
    (file, run.last_message, run.stderr)
}

/// Troubles the fake upstream causes along the way.
#[derive(Clone, Copy, PartialEq)]
enum Trouble {
    None,
    /// The first request gets a 429 with `Retry-After: 1` (the gateway retries it), and the first
    /// attempt at the second turn breaks mid-stream (Codex retries the turn).
    RateLimitAndDrop,
    /// The model calls the shell `bash` with broken arguments, and sends its patch without
    /// `*** End Patch`: the gateway repairs both, and says so.
    Sloppy,
}

async fn scenario(provider: Provider, preset: &str, trouble: Trouble) {
    scenario_over(Cli::V0169, provider, preset, trouble, false).await;
}

async fn scenario_over(
    cli: Cli,
    provider: Provider,
    preset: &str,
    trouble: Trouble,
    websockets: bool,
) {
    let Some(codex) = cli.binary() else {
        return;
    };
    let upstream = FakeUpstream::start().await;
    let seen = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let dropped = Arc::new(std::sync::atomic::AtomicBool::new(false));
    upstream.set_gate(Arc::new(move |r: &Recorded| {
        let n = seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if trouble == Trouble::RateLimitAndDrop {
            if n == 0 {
                return Some(Reply::Json {
                    status: 429,
                    body: json!({"error": {"message": "Rate limit reached", "code": "rate_limit_exceeded"}}),
                    headers: vec![("retry-after".to_owned(), "1".to_owned())],
                });
            }
            let tool_results = r.body["messages"]
                .as_array()
                .map(|m| m.iter().filter(|m| m["role"] == "tool").count())
                .unwrap_or(0);
            if tool_results == 1 && !dropped.swap(true, std::sync::atomic::Ordering::SeqCst) {
                return Some(Reply::StreamThenReset {
                    pieces: vec![
                        format!("data: {}\n\n", chunk(json!({"role": "assistant", "content": "Writing the fi"}), None)),
                        format!("data: {}\n\n", chunk(json!({"tool_calls": [{"index": 0, "id": "call_lost", "type": "function", "function": {"name": "apply_patch", "arguments": "{\"inp"}}]}), None)),
                    ],
                });
            }
        }
        script(provider, r, trouble == Trouble::Sloppy)
    }));
    let gateway = start_gateway(&upstream, preset).await;
    let scratch = std::env::temp_dir().join(format!(
        "toolbridge-codex-{preset}-{}-{}-{websockets}-{}",
        std::process::id(),
        trouble as u8,
        cli as u8
    ));
    let _ = std::fs::remove_dir_all(&scratch);
    let stream_retries = if trouble == Trouble::RateLimitAndDrop {
        2
    } else {
        0
    };
    let (file, last_message, stderr) =
        run_codex_over(&codex, &gateway, &scratch, stream_retries, websockets).await;
    assert!(!stderr.contains("Falling back"), "{stderr}");
    assert_transport(websockets, &gateway);
    if websockets && trouble == Trouble::RateLimitAndDrop {
        let log = gateway.stderr();
        assert!(log.contains("previous_response_not_found"), "{log}");
    }
    assert_eq!(file, format!("{FILE_CONTENT}\n"));
    assert_eq!(last_message.trim(), FINAL_ANSWER);

    let all = upstream.requests();
    let expected = if trouble == Trouble::RateLimitAndDrop {
        5
    } else {
        3
    };
    assert_eq!(all.len(), expected, "upstream calls");
    // The turns that were answered in full: the last request with 0, 1 and 2 tool results.
    let with_results = |n: usize| {
        all.iter()
            .rev()
            .find(|r| {
                r.body["messages"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|m| m["role"] == "tool")
                    .count()
                    == n
            })
            .unwrap()
            .clone()
    };
    let requests = [with_results(0), with_results(1), with_results(2)];
    if trouble == Trouble::RateLimitAndDrop {
        // The broken attempt's partial call never reached Codex: nothing carries `call_lost`.
        assert!(!requests[2].body.to_string().contains("call_lost"));
    }
    for r in &requests {
        assert!(
            r.body["messages"]
                .as_array()
                .unwrap()
                .iter()
                .all(|m| m["role"] != "developer")
        );
        assert_eq!(r.body["stream"], true);
    }
    // The shell ran, and its output went back to the model.
    let second = &requests[1].body["messages"];
    let shell_output = second
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap();
    assert_eq!(shell_output["tool_call_id"], "call_shell_1");
    assert!(
        shell_output["content"]
            .as_str()
            .unwrap()
            .contains("hello-from-codex"),
        "{shell_output}"
    );
    // The patch call went back upstream in its degraded form, with Codex's result.
    let third = requests[2].body["messages"].as_array().unwrap();
    let patch_call = third
        .iter()
        .filter_map(|m| m["tool_calls"].as_array())
        .flatten()
        .find(|c| c["id"] == "call_patch_2")
        .unwrap();
    assert_eq!(patch_call["function"]["name"], "apply_patch");
    let arguments: Value =
        serde_json::from_str(patch_call["function"]["arguments"].as_str().unwrap()).unwrap();
    assert!(
        arguments["input"]
            .as_str()
            .unwrap()
            .starts_with("*** Begin Patch")
    );
    let patch_result = third
        .iter()
        .find(|m| m["tool_call_id"] == "call_patch_2")
        .unwrap();
    assert!(
        patch_result["content"]
            .as_str()
            .unwrap()
            .contains("created.txt"),
        "{patch_result}"
    );
    if trouble == Trouble::Sloppy {
        // Codex ran the repaired call under the declared name, and sent it back that way.
        let shell_call = second
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|m| m["tool_calls"].as_array())
            .flatten()
            .find(|c| c["id"] == "call_shell_1")
            .unwrap();
        assert_eq!(shell_call["function"]["name"], "exec_command");
        let arguments: Value =
            serde_json::from_str(shell_call["function"]["arguments"].as_str().unwrap()).unwrap();
        assert_eq!(arguments["cmd"], "echo hello-from-codex");
        assert_eq!(arguments["yield_time_ms"].as_f64(), Some(2000.0));
        assert!(
            arguments_of(patch_call)["input"]
                .as_str()
                .unwrap()
                .trim_end()
                .ends_with("*** End Patch")
        );
        // Each response said what was fixed (logged with provider and model).
        let log = gateway.stderr();
        for code in [
            "tool_name_mapped",
            "arguments_repaired",
            "arguments_coerced",
            "custom_input_repaired",
        ] {
            assert!(log.contains(code), "no `{code}` in the gateway log:\n{log}");
        }
    }
    let _ = std::fs::remove_dir_all(&scratch);
    gateway.kill().await;
}

fn arguments_of(call: &Value) -> Value {
    serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap()
}

/// A model that gets the shell's name and arguments and the patch's end marker wrong on its
/// first try still completes Codex's task: the gateway repairs each call before Codex sees it.
#[tokio::test]
async fn codex_completes_a_tool_turn_despite_broken_calls() {
    scenario(Provider::Glm, "glm", Trouble::Sloppy).await;
}

#[tokio::test]
async fn codex_completes_a_tool_turn_through_a_glm_like_provider() {
    scenario(Provider::Glm, "glm", Trouble::None).await;
}

#[tokio::test]
async fn codex_completes_a_tool_turn_through_a_deepseek_like_provider() {
    scenario(Provider::DeepSeek, "deepseek", Trouble::None).await;
}

/// A Chat preset over Codex's WebSocket transport.
#[tokio::test]
async fn codex_completes_a_tool_turn_through_a_deepseek_like_provider_over_websocket() {
    scenario_over(
        Cli::V0169,
        Provider::DeepSeek,
        "deepseek",
        Trouble::None,
        true,
    )
    .await;
}

/// Codex 0.171 over WebSocket through a Chat preset: its prewarm is answered by the gateway
/// (three upstream calls in all), and it never falls back to HTTPS.
#[tokio::test]
async fn codex_0171_completes_a_tool_turn_through_a_deepseek_like_provider_over_websocket() {
    scenario_over(
        Cli::V0171,
        Provider::DeepSeek,
        "deepseek",
        Trouble::None,
        true,
    )
    .await;
}

#[tokio::test]
async fn codex_gets_through_a_rate_limit_and_a_dropped_stream() {
    scenario(Provider::DeepSeek, "deepseek", Trouble::RateLimitAndDrop).await;
}

/// A `toolbridge serve` whose one provider speaks `dialect` at the fake upstream, its key in
/// the environment variable `key.0`, every model routed to `model`; and a scratch folder.
async fn start_dialect_gateway(
    upstream: &FakeUpstream,
    dialect: &str,
    key: (&str, &str),
    model: &str,
) -> (std::path::PathBuf, GatewayProcess) {
    // One folder per test: two tests of one dialect (over HTTP and over WebSocket) run at once.
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let scratch = std::env::temp_dir().join(format!(
        "toolbridge-codex-{dialect}-{}-{n}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch).unwrap();
    let config = scratch.join("toolbridge.toml");
    std::fs::write(
        &config,
        format!(
            r#"
[providers.upstream]
dialect = "{dialect}"
base_url = "{}"
api_key_env = "{}"
max_retries = 0

[[routes]]
model = "*"
provider = "upstream"
upstream_model = "{model}"
"#,
            upstream.base_url(),
            key.0,
        ),
    )
    .unwrap();
    let gateway = GatewayProcess::start(
        Path::new(env!("CARGO_BIN_EXE_toolbridge")),
        &[
            ("TOOLBRIDGE_CONFIG", config.display().to_string()),
            (key.0, key.1.to_owned()),
            ("RUST_LOG", "info".to_owned()),
        ],
    )
    .await;
    (scratch, gateway)
}

/// The `tool_result` blocks of an Anthropic request, in order.
fn tool_results(body: &Value) -> Vec<Value> {
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "user")
        .filter_map(|m| m["content"].as_array())
        .flatten()
        .filter(|b| b["type"] == "tool_result")
        .cloned()
        .collect()
}

/// What a real Messages API refuses: a role other than user/assistant, two turns of one role in
/// a row, a tool without `input_schema`, and a `tool_use` not answered by a `tool_result` in the
/// very next (user) turn.
fn anthropic_refusal(body: &Value) -> Option<Reply> {
    let invalid = |message: String| {
        Some(Reply::error(
            400,
            json!({"type": "error", "error": {"type": "invalid_request_error", "message": message}}),
        ))
    };
    let messages = body["messages"].as_array()?;
    for (i, m) in messages.iter().enumerate() {
        if m["role"] != "user" && m["role"] != "assistant" {
            return invalid(format!("messages.{i}.role: unexpected role {}", m["role"]));
        }
        if i > 0 && messages[i - 1]["role"] == m["role"] {
            return invalid(format!("messages.{i}: roles must alternate"));
        }
        for block in m["content"].as_array().into_iter().flatten() {
            if block["type"] == "tool_use" {
                let answered = messages.get(i + 1).is_some_and(|n| {
                    n["content"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .any(|b| b["type"] == "tool_result" && b["tool_use_id"] == block["id"])
                });
                if !answered {
                    return invalid(format!(
                        "messages.{i}: tool_use ids were found without tool_result blocks immediately after: {}",
                        block["id"]
                    ));
                }
            }
        }
    }
    for (i, tool) in body["tools"].as_array().into_iter().flatten().enumerate() {
        if !tool["input_schema"].is_object() {
            return invalid(format!("tools.{i}.input_schema: Field required"));
        }
    }
    None
}

/// The scripted Claude: shell first, then the patch, then the answer, in Anthropic's events.
fn anthropic_script(request: &Recorded) -> Reply {
    if let Some(refused) = anthropic_refusal(&request.body) {
        return refused;
    }
    let start = (
        "message_start",
        json!({"type": "message_start", "message": {"id": "msg_codex", "type": "message", "role": "assistant", "model": "claude-test", "content": [], "stop_reason": null, "usage": {"input_tokens": 100, "output_tokens": 1}}}),
    );
    let tool_use = |id: &str, name: &str, input: Value| {
        let text = input.to_string();
        let (a, b) = text.split_at(text.len() / 2);
        vec![
            (
                "content_block_start",
                json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}),
            ),
            (
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": a}}),
            ),
            (
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": b}}),
            ),
            (
                "content_block_stop",
                json!({"type": "content_block_stop", "index": 0}),
            ),
        ]
    };
    let end = |reason: &str| {
        vec![
            (
                "message_delta",
                json!({"type": "message_delta", "delta": {"stop_reason": reason}, "usage": {"output_tokens": 20}}),
            ),
            ("message_stop", json!({"type": "message_stop"})),
        ]
    };
    let mut events = vec![start];
    match tool_results(&request.body).len() {
        0 => {
            events.extend(tool_use(
                "toolu_shell_1",
                "exec_command",
                json!({"cmd": "echo hello-from-codex"}),
            ));
            events.extend(end("tool_use"));
        }
        1 => {
            events.extend(tool_use(
                "toolu_patch_2",
                "apply_patch",
                json!({"input": format!("*** Begin Patch\n*** Add File: created.txt\n+{FILE_CONTENT}\n*** End Patch\n")}),
            ));
            events.extend(end("tool_use"));
        }
        _ => {
            events.push((
                "content_block_start",
                json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            ));
            for piece in ["Created created.txt ", "after checking the workspace."] {
                events.push((
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": piece}}),
                ));
            }
            events.push((
                "content_block_stop",
                json!({"type": "content_block_stop", "index": 0}),
            ));
            events.extend(end("end_turn"));
        }
    }
    Reply::sse_events(events)
}

/// Codex's three-turn task through the Anthropic Messages dialect: the fake refuses what the
/// real API refuses, so the test fails if a turn breaks Anthropic's role or pairing rules.
#[tokio::test]
async fn codex_completes_a_tool_turn_through_an_anthropic_provider() {
    anthropic_turn(Cli::V0169, false).await;
}

/// The same task over Codex's WebSocket transport: no fallback to HTTPS, and the prewarm
/// never reaches the upstream (three upstream calls, as over HTTP).
#[tokio::test]
async fn codex_completes_a_tool_turn_through_an_anthropic_provider_over_websocket() {
    anthropic_turn(Cli::V0169, true).await;
}

/// Codex 0.171 over WebSocket through the Anthropic dialect, its prewarm answered by the gateway.
#[tokio::test]
async fn codex_0171_completes_a_tool_turn_through_an_anthropic_provider_over_websocket() {
    anthropic_turn(Cli::V0171, true).await;
}

async fn anthropic_turn(cli: Cli, websockets: bool) {
    let Some(codex) = cli.binary() else {
        return;
    };
    let upstream = FakeUpstream::start().await;
    upstream.set_gate(Arc::new(|r: &Recorded| Some(anthropic_script(r))));
    let (scratch, gateway) = start_dialect_gateway(
        &upstream,
        "anthropic",
        ("ANTHROPIC_KEY", "sk-ant-fake"),
        "claude-test",
    )
    .await;
    let (file, last_message, stderr) =
        run_codex_over(&codex, &gateway, &scratch.join("codex"), 0, websockets).await;
    assert_eq!(file, format!("{FILE_CONTENT}\n"));
    assert_eq!(last_message.trim(), FINAL_ANSWER);
    assert!(
        !stderr.contains("Falling back"),
        "Codex fell back to HTTPS:\n{stderr}"
    );

    assert_transport(websockets, &gateway);
    let all = upstream.requests();
    assert_eq!(all.len(), 3, "upstream calls");
    for r in &all {
        assert_eq!(r.path, "/v1/messages");
        assert_eq!(r.headers["x-api-key"], "sk-ant-fake");
        assert_eq!(r.body["stream"], true);
        assert!(r.body["system"].is_string() || r.body["system"].is_array());
    }
    // The shell's output went back as a tool_result for its tool_use.
    let second = tool_results(&all[1].body);
    assert_eq!(second[0]["tool_use_id"], "toolu_shell_1");
    assert!(
        second[0].to_string().contains("hello-from-codex"),
        "{second:?}"
    );
    // The patch went back as the degraded function's input, with Codex's result.
    let third = &all[2].body;
    let patch_use = third["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["content"].as_array())
        .flatten()
        .find(|b| b["type"] == "tool_use" && b["id"] == "toolu_patch_2")
        .unwrap_or_else(|| panic!("no patch tool_use in {third:#}"));
    assert_eq!(patch_use["name"], "apply_patch");
    assert!(
        patch_use["input"]["input"]
            .as_str()
            .unwrap()
            .starts_with("*** Begin Patch")
    );
    let results = tool_results(third);
    assert!(
        results
            .iter()
            .any(|r| r["tool_use_id"] == "toolu_patch_2" && r.to_string().contains("created.txt")),
        "{results:?}"
    );
    let _ = std::fs::remove_dir_all(&scratch);
    gateway.kill().await;
}

/// The `functionResponse` parts of a Gemini request, in order.
fn function_responses(body: &Value) -> Vec<Value> {
    body["contents"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["parts"].as_array())
        .flatten()
        .filter_map(|p| p.get("functionResponse").cloned())
        .collect()
}

/// What the real Gemini API refuses: roles other than user/model, JSON Schema keywords outside
/// its OpenAPI subset in function parameters, and a `functionCall` turn not followed by a turn
/// answering every call by name.
fn gemini_refusal(body: &Value) -> Option<Reply> {
    let invalid = |message: String| {
        Some(Reply::error(
            400,
            json!({"error": {"code": 400, "message": message, "status": "INVALID_ARGUMENT"}}),
        ))
    };
    fn unknown_keyword(schema: &Value) -> Option<String> {
        match schema {
            Value::Object(map) => map.iter().find_map(|(k, v)| {
                if matches!(
                    k.as_str(),
                    "additionalProperties" | "$schema" | "$ref" | "$defs"
                ) {
                    Some(k.clone())
                } else if k == "properties" {
                    v.as_object()?.values().find_map(unknown_keyword)
                } else {
                    unknown_keyword(v)
                }
            }),
            Value::Array(items) => items.iter().find_map(unknown_keyword),
            _ => None,
        }
    }
    for tool in body["tools"].as_array().into_iter().flatten() {
        for f in tool["functionDeclarations"]
            .as_array()
            .into_iter()
            .flatten()
        {
            if let Some(k) = unknown_keyword(&f["parameters"]) {
                return invalid(format!(
                    "Invalid JSON payload received. Unknown name \"{k}\" at 'tools[0].function_declarations'"
                ));
            }
        }
    }
    let contents = body["contents"].as_array()?;
    for (i, c) in contents.iter().enumerate() {
        if c["role"] != "user" && c["role"] != "model" {
            return invalid(format!("contents[{i}].role: unknown role {}", c["role"]));
        }
        let calls: Vec<&Value> = c["parts"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| p.get("functionCall"))
            .collect();
        if calls.is_empty() {
            continue;
        }
        let answers: Vec<&Value> = contents
            .get(i + 1)
            .and_then(|n| n["parts"].as_array())
            .into_iter()
            .flatten()
            .filter_map(|p| p.get("functionResponse"))
            .collect();
        if calls.len() != answers.len()
            || calls
                .iter()
                .zip(&answers)
                .any(|(c, a)| c["name"] != a["name"])
        {
            return invalid(
                "Please ensure that the number of function response parts is equal to the number of function call parts of the function call turn.".to_owned(),
            );
        }
    }
    None
}

/// The scripted Gemini: shell first, then the patch, then the answer, as streamed chunks.
fn gemini_script(request: &Recorded) -> Reply {
    if let Some(refused) = gemini_refusal(&request.body) {
        return refused;
    }
    let usage =
        json!({"promptTokenCount": 100, "candidatesTokenCount": 20, "totalTokenCount": 120});
    let chunk = |parts: Value, finish: Option<&str>| {
        let mut candidate = json!({"content": {"role": "model", "parts": parts}, "index": 0});
        if let Some(f) = finish {
            candidate["finishReason"] = json!(f);
        }
        let mut body = json!({"candidates": [candidate], "modelVersion": "gemini-test"});
        if finish.is_some() {
            body["usageMetadata"] = usage.clone();
        }
        format!("data: {body}\r\n\r\n")
    };
    let pieces = match function_responses(&request.body).len() {
        0 => vec![chunk(
            json!([{"functionCall": {"name": "exec_command", "args": {"cmd": "echo hello-from-codex"}}}]),
            Some("STOP"),
        )],
        1 => vec![chunk(
            json!([{"functionCall": {"name": "apply_patch", "args": {"input": format!("*** Begin Patch\n*** Add File: created.txt\n+{FILE_CONTENT}\n*** End Patch\n")}}}]),
            Some("STOP"),
        )],
        _ => vec![
            chunk(json!([{"text": "Created created.txt "}]), None),
            chunk(
                json!([{"text": "after checking the workspace."}]),
                Some("STOP"),
            ),
        ],
    };
    Reply::sse_raw(pieces)
}

/// Codex's three-turn task through the Gemini dialect, against a fake that refuses what the real
/// API refuses (Codex's tool schemas carry `additionalProperties`, which Gemini rejects).
#[tokio::test]
async fn codex_completes_a_tool_turn_through_a_gemini_provider() {
    gemini_turn(Cli::V0169, false).await;
}

/// The same over WebSocket: each turn sends only its new items, and the gateway rebuilds the
/// whole history for Gemini from the socket's chain (both calls and results on the third turn).
#[tokio::test]
async fn codex_completes_a_tool_turn_through_a_gemini_provider_over_websocket() {
    gemini_turn(Cli::V0169, true).await;
}

/// Codex 0.171 over WebSocket through the Gemini dialect, its prewarm answered by the gateway.
#[tokio::test]
async fn codex_0171_completes_a_tool_turn_through_a_gemini_provider_over_websocket() {
    gemini_turn(Cli::V0171, true).await;
}

async fn gemini_turn(cli: Cli, websockets: bool) {
    let Some(codex) = cli.binary() else {
        return;
    };
    let upstream = FakeUpstream::start().await;
    upstream.set_gate(Arc::new(|r: &Recorded| Some(gemini_script(r))));
    let (scratch, gateway) = start_dialect_gateway(
        &upstream,
        "gemini",
        ("GEMINI_KEY", "gm-fake"),
        "gemini-test",
    )
    .await;
    let (file, last_message, stderr) =
        run_codex_over(&codex, &gateway, &scratch.join("codex"), 0, websockets).await;
    assert_eq!(file, format!("{FILE_CONTENT}\n"));
    assert_eq!(last_message.trim(), FINAL_ANSWER);
    assert!(!stderr.contains("Falling back"), "{stderr}");
    assert_transport(websockets, &gateway);

    let all = upstream.requests();
    assert_eq!(all.len(), 3, "upstream calls");
    for r in &all {
        assert_eq!(r.path, "/v1/models/gemini-test:streamGenerateContent");
        assert_eq!(r.headers["x-goog-api-key"], "gm-fake");
    }
    // The shell's output went back as a functionResponse named for its call.
    let second = function_responses(&all[1].body);
    assert_eq!(second[0]["name"], "exec_command");
    assert!(
        second[0].to_string().contains("hello-from-codex"),
        "{second:?}"
    );
    // Both earlier calls and both results went back on the third turn, in order.
    let third = function_responses(&all[2].body);
    let names: Vec<&str> = third.iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["exec_command", "apply_patch"], "{third:?}");
    assert!(third[1].to_string().contains("created.txt"), "{third:?}");
    let _ = std::fs::remove_dir_all(&scratch);
    gateway.kill().await;
}

/// The first turn's shell call for the restart test: it marks that Codex got the first turn,
/// then waits until the gateway has been restarted (its yield time covers the wait), so the
/// restart falls exactly between two turns.
fn restart_script(request: &Recorded) -> Option<Reply> {
    let tool_results = request.body["messages"]
        .as_array()
        .map(|m| m.iter().filter(|m| m["role"] == "tool").count())
        .unwrap_or(0);
    if tool_results > 0 {
        return script(Provider::DeepSeek, request, false);
    }
    let cmd = "touch first-turn-done && while [ ! -f gateway-restarted ]; do sleep 0.1; done \
               && echo hello-from-codex";
    let call = json!({"role": "assistant", "content": null, "tool_calls": [{"index": 0,
        "id": "call_shell_1", "type": "function", "function": {"name": "exec_command",
        "arguments": json!({"cmd": cmd, "yield_time_ms": 25000}).to_string()}}]});
    Some(Reply::sse(vec![
        chunk(
            json!({"role": "assistant", "reasoning_content": "Look around first."}),
            None,
        ),
        chunk(call, None),
        chunk(json!({}), Some("tool_calls")),
        usage_chunk(100, 20),
    ]))
}

/// Codex 0.171 over WebSocket, with the gateway restarted between the first and the second
/// turn: the socket and its chain are gone with the old process. Codex opens a new socket to
/// the new process and resends the whole history there (0.171 sends `previous_response_id`
/// only for a response it got on the same socket, so it never needs
/// `previous_response_not_found` here; the fixture's probe and `websocket.rs` cover that
/// answer), and the new process completes the task over WebSocket, without falling back.
#[tokio::test]
async fn codex_0171_recovers_over_websocket_from_a_gateway_restart_between_turns() {
    let Some(codex) = Cli::V0171.binary() else {
        return;
    };
    let upstream = FakeUpstream::start().await;
    upstream.set_gate(Arc::new(restart_script));
    let first = start_gateway(&upstream, "deepseek").await;
    let addr = first.addr();
    let scratch =
        std::env::temp_dir().join(format!("toolbridge-codex-restart-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    let mut exec = CodexExec::new(&codex, &scratch, first.url("/v1"));
    exec.provider = "stream_max_retries = 2\nsupports_websockets = true".to_owned();
    let work = exec.work();
    let restart = async {
        let marker = work.join("first-turn-done");
        for _ in 0..1200 {
            if marker.exists() {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        assert!(
            marker.exists(),
            "Codex never ran the first turn's shell call"
        );
        first.kill().await;
        let second = GatewayProcess::start(
            Path::new(env!("CARGO_BIN_EXE_toolbridge")),
            &[
                ("TOOLBRIDGE_LISTEN", addr.to_string()),
                ("TOOLBRIDGE_UPSTREAM_URL", upstream.base_url()),
                ("TOOLBRIDGE_UPSTREAM_API_KEY", "sk-fake".to_owned()),
                ("TOOLBRIDGE_UPSTREAM_PRESET", "deepseek".to_owned()),
                ("RUST_LOG", "info".to_owned()),
            ],
        )
        .await;
        std::fs::write(work.join("gateway-restarted"), "").unwrap();
        second
    };
    let (run, second) = tokio::join!(
        exec.run("Create created.txt with the usual content."),
        restart
    );
    let context = || {
        format!(
            "stderr:\n{}\ngateway stderr:\n{}",
            run.stderr,
            second.stderr()
        )
    };
    let file = std::fs::read_to_string(run.work.join("created.txt"))
        .unwrap_or_else(|_| panic!("Codex did not create created.txt\n{}", context()));
    assert_eq!(file, format!("{FILE_CONTENT}\n"));
    assert_eq!(run.last_message.trim(), FINAL_ANSWER, "{}", context());
    assert!(!run.stderr.contains("Falling back"), "{}", context());
    assert!(
        second.stderr().contains("websocket_response{"),
        "{}",
        context()
    );
    // The new process got the whole history from Codex: the task, the first call and the
    // shell's output (which waited for the restart), then the patch's.
    let all = upstream.requests();
    assert_eq!(all.len(), 3, "upstream calls\n{}", context());
    for (request, results) in [(&all[1], 1), (&all[2], 2)] {
        let messages = request.body["messages"].as_array().unwrap();
        let tools = messages.iter().filter(|m| m["role"] == "tool").count();
        assert_eq!(tools, results, "{messages:#?}");
        assert!(
            messages.iter().any(|m| m["role"] == "user"),
            "{messages:#?}"
        );
    }
    assert!(all[1].body.to_string().contains("hello-from-codex"));
    let _ = std::fs::remove_dir_all(&scratch);
    second.kill().await;
}
