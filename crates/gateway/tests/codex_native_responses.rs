//! Ring 3: the real Codex CLI runs its three-turn task (`exec_command`, the freeform
//! `apply_patch`, a final message) through the real `toolbridge` binary against fake native
//! Responses upstreams that refuse what their real counterparts refuse: a DeepSeek-like one
//! (`deepseek-responses`) that answers 400 to any `custom` tool or item and to fields outside
//! the Responses API, and a vLLM-like one (`vllm-responses`) that answers 400 to `namespace`.
//! The model calls the degraded `apply_patch` as a function; Codex must get it back as its own
//! `custom_tool_call`, apply the patch, and see its result reach the upstream as the function's.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code fails loudly

use std::path::Path;
use std::sync::Arc;

use serde_json::{Value, json};
use toolbridge_testkit::codex::CodexExec;
use toolbridge_testkit::dialects::RESPONSES_FIELDS;
use toolbridge_testkit::dialects::{Answer, Call, End, Usage, Wire};
use toolbridge_testkit::{FakeUpstream, GatewayProcess, Recorded, Reply};

const FILE_CONTENT: &str = "made through a native endpoint";
const FINAL_ANSWER: &str = "Created created.txt after checking the workspace.";

/// What the fake endpoint refuses, as its real counterpart does.
#[derive(Clone, Copy)]
enum Endpoint {
    DeepSeek,
    Vllm,
}

fn refusal(endpoint: Endpoint, body: &Value) -> Option<Reply> {
    let refuse = |why: String| {
        Some(Reply::error(
            400,
            json!({"error": {"message": why, "type": "invalid_request_error", "param": null, "code": "invalid_request"}}),
        ))
    };
    let tools = body["tools"].as_array().cloned().unwrap_or_default();
    let items = body["input"].as_array().cloned().unwrap_or_default();
    match endpoint {
        Endpoint::DeepSeek => {
            if let Some(t) = tools.iter().find(|t| t["type"] == "custom") {
                return refuse(format!("custom tools are not supported: {t}"));
            }
            if let Some(i) = items.iter().find(|i| {
                i["type"]
                    .as_str()
                    .unwrap_or("")
                    .starts_with("custom_tool_call")
            }) {
                return refuse(format!("custom tool calls are not supported: {i}"));
            }
            if let Some(k) = body
                .as_object()?
                .keys()
                .find(|k| !RESPONSES_FIELDS.contains(&k.as_str()))
            {
                return refuse(format!("unknown field `{k}`"));
            }
        }
        Endpoint::Vllm => {
            if tools.iter().any(|t| t["type"] == "namespace")
                || items.iter().any(|i| i.get("namespace").is_some())
            {
                return refuse("namespace is not supported".to_owned());
            }
        }
    }
    None
}

fn call(id: &str, name: &str, arguments: Value) -> Call {
    Call {
        id: id.to_owned(),
        name: name.to_owned(),
        namespace: None,
        custom: false,
        arguments,
    }
}

/// The model's turn for a request: by how many results its input carries.
fn script(endpoint: Endpoint, request: &Recorded) -> Reply {
    if let Some(refused) = refusal(endpoint, &request.body) {
        return refused;
    }
    let results = request.body["input"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|i| i["type"] == "function_call_output")
        .count();
    let (calls, text, end) = match results {
        0 => (
            vec![call(
                "call_shell_1",
                "exec_command",
                json!({"cmd": "echo hello-from-codex"}),
            )],
            Vec::new(),
            End::ToolCalls,
        ),
        1 => (
            vec![call(
                "call_patch_2",
                "apply_patch",
                json!({"input": format!("*** Begin Patch\n*** Add File: created.txt\n+{FILE_CONTENT}\n*** End Patch\n")}),
            )],
            Vec::new(),
            End::ToolCalls,
        ),
        _ => (
            Vec::new(),
            vec![
                "Created created.txt ".to_owned(),
                "after checking the workspace.".to_owned(),
            ],
            End::Stop,
        ),
    };
    Wire::Responses.stream(&Answer {
        reasoning: vec!["Plan the step.".to_owned()],
        text,
        calls,
        end,
        usage: Usage {
            input: 100,
            cached: 0,
            output: 20,
            reasoning: 5,
        },
    })
}

async fn start_gateway(upstream: &FakeUpstream, preset: &str, scratch: &Path) -> GatewayProcess {
    let config = scratch.join("toolbridge.toml");
    std::fs::write(
        &config,
        format!(
            r#"
[providers.native]
dialect = "responses"
preset = "{preset}"
base_url = "{}"
api_key_env = "NATIVE_KEY"
max_retries = 0

[[routes]]
model = "*"
provider = "native"
upstream_model = "native-model"
"#,
            upstream.base_url(),
        ),
    )
    .unwrap();
    GatewayProcess::start(
        Path::new(env!("CARGO_BIN_EXE_toolbridge")),
        &[
            ("TOOLBRIDGE_CONFIG", config.display().to_string()),
            ("NATIVE_KEY", "sk-native".to_owned()),
            ("RUST_LOG", "info".to_owned()),
        ],
    )
    .await
}

/// Runs Codex's task; returns the file it wrote and its last message.
async fn run_codex(codex: &Path, gateway: &GatewayProcess, scratch: &Path) -> (String, String) {
    let run = CodexExec::new(codex, scratch, gateway.url("/v1"))
        .run("Create created.txt with the usual content.")
        .await;
    let file = std::fs::read_to_string(run.work.join("created.txt")).unwrap_or_else(|_| {
        panic!(
            "Codex did not create created.txt.\nstdout:\n{}\nstderr:\n{}\n\
             gateway stderr:\n{}",
            run.stdout,
            run.stderr,
            gateway.stderr()
        )
    });
    (file, run.last_message)
}

async fn native_turn(endpoint: Endpoint, preset: &str) {
    let Some(codex) = toolbridge_testkit::tools::codex() else {
        return;
    };
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let scratch = std::env::temp_dir().join(format!(
        "toolbridge-codex-{preset}-{}-{n}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch).unwrap();
    let upstream = FakeUpstream::start().await;
    upstream.set_gate(Arc::new(move |r: &Recorded| Some(script(endpoint, r))));
    let gateway = start_gateway(&upstream, preset, &scratch).await;
    let (file, last_message) = run_codex(&codex, &gateway, &scratch.join("codex")).await;
    assert_eq!(file, format!("{FILE_CONTENT}\n"));
    assert_eq!(last_message.trim(), FINAL_ANSWER);

    let all = upstream.requests();
    assert_eq!(all.len(), 3, "upstream calls: {all:#?}");
    for r in &all {
        assert_eq!(r.path, "/v1/responses");
        assert_eq!(r.headers["authorization"], "Bearer sk-native");
        assert_eq!(r.body["store"], false);
        // Codex's freeform apply_patch went as a function.
        let patch = r.body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == "apply_patch")
            .unwrap_or_else(|| panic!("no apply_patch tool in {:#}", r.body));
        assert_eq!(patch["type"], "function", "{patch}");
    }
    // The patch call came back to the upstream as the function it called, with Codex's result.
    let third = all[2].body["input"].as_array().unwrap();
    let patch_call = third
        .iter()
        .find(|i| i["call_id"] == "call_patch_2" && i["type"] == "function_call")
        .unwrap_or_else(|| panic!("no patch call in {third:#?}"));
    assert_eq!(patch_call["name"], "apply_patch");
    let arguments: Value = serde_json::from_str(patch_call["arguments"].as_str().unwrap()).unwrap();
    assert!(
        arguments["input"]
            .as_str()
            .unwrap()
            .starts_with("*** Begin Patch")
    );
    assert!(
        third
            .iter()
            .any(|i| i["type"] == "function_call_output" && i["call_id"] == "call_patch_2"),
        "{third:#?}"
    );
    let _ = std::fs::remove_dir_all(&scratch);
    gateway.kill().await;
}

#[tokio::test]
async fn codex_completes_a_tool_turn_through_a_deepseek_like_native_responses_endpoint() {
    native_turn(Endpoint::DeepSeek, "deepseek-responses").await;
}

#[tokio::test]
async fn codex_completes_a_tool_turn_through_a_vllm_like_native_responses_endpoint() {
    native_turn(Endpoint::Vllm, "vllm-responses").await;
}
