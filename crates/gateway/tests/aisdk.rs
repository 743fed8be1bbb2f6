//! Ring 3: the Vercel AI SDK (`ai` 6.0.326 with `@ai-sdk/openai` 3.0.141, on Node) runs a tool
//! round trip through the real `toolbridge` binary in front of a DeepSeek-like fake upstream
//! (`TOOLBRIDGE_UPSTREAM_PRESET=deepseek`). The client side is
//! `tests/node/aisdk_tool_roundtrip.mjs`: `generateText` with one tool, `stepCountIs(3)` and
//! `store: true`, so that its second step sends the first step's reasoning back as an
//! `item_reference` the gateway resolves from its store.
//!
//! The upstream answers the first call with `reasoning_content` and a tool call, and, like
//! DeepSeek in thinking mode, refuses with a 400 any later request whose assistant tool-call
//! message lacks that reasoning; otherwise it answers with text. The test checks the SDK's final
//! text, that the second upstream request carried the reasoning and the tool result, and (from
//! the requests the script's recording `fetch` saw) that the reasoning went to the gateway by
//! reference.
//!
//! The AI SDK is `$TOOLBRIDGE_TEST_AISDK`, else `<workspace>/.tools/aisdk` (installed by
//! `scripts/test`); without it the test fails on CI and otherwise says it skipped.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code fails loudly

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::process::Command;
use toolbridge_testkit::chat::usage;
use toolbridge_testkit::{FakeUpstream, GatewayProcess, Recorded, Reply};

const BIN: &str = env!("CARGO_BIN_EXE_toolbridge");
const REASONING: &str = "The user wants the weather in Paris; I should call the weather tool.";
const CALL_ID: &str = "call_weather_1";
const FINAL_TEXT: &str = "It is sunny in Paris, 21 °C.";
const REFUSAL: &str =
    "The `reasoning_content` in the thinking mode must be passed back to the API.";

#[tokio::test]
async fn ai_sdk_tool_round_trip_resolves_item_references_and_replays_reasoning() {
    let Some(aisdk) = toolbridge_testkit::tools::aisdk() else {
        eprintln!("SKIPPED AI SDK test: the AI SDK is not installed");
        return;
    };
    tokio::time::timeout(Duration::from_secs(120), run(aisdk))
        .await
        .expect("the AI SDK test ran past its time limit");
}

/// A non-streamed DeepSeek answer with this message.
fn deepseek(message: Value, finish_reason: &str) -> Reply {
    Reply::json(json!({
        "id": "chatcmpl-deepseek",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "deepseek-reasoner",
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        "usage": usage(40, 12),
    }))
}

/// DeepSeek in thinking mode: a tool-call turn's reasoning must come back; then text.
fn answer(request: &Recorded) -> Option<Reply> {
    let messages = request.body["messages"].as_array()?;
    let unreasoned = messages.iter().any(|m| {
        m["tool_calls"].as_array().is_some_and(|c| !c.is_empty())
            && m["reasoning_content"].as_str().is_none_or(str::is_empty)
    });
    if unreasoned {
        return Some(Reply::error(
            400,
            json!({"error": {"message": REFUSAL, "type": "invalid_request_error"}}),
        ));
    }
    if messages.iter().any(|m| m["role"] == "tool") {
        return Some(deepseek(
            json!({
                "role": "assistant",
                "content": FINAL_TEXT,
                "reasoning_content": "The tool answered.",
            }),
            "stop",
        ));
    }
    Some(deepseek(
        json!({
            "role": "assistant",
            "content": "",
            "reasoning_content": REASONING,
            "tool_calls": [{
                "id": CALL_ID,
                "type": "function",
                "function": {"name": "weather", "arguments": "{\"city\":\"Paris\"}"},
            }],
        }),
        "tool_calls",
    ))
}

async fn run(aisdk: PathBuf) {
    let upstream = FakeUpstream::start().await;
    upstream.set_gate(Arc::new(answer));
    let gateway = GatewayProcess::start(
        Path::new(BIN),
        &[
            ("TOOLBRIDGE_UPSTREAM_URL", upstream.base_url()),
            ("TOOLBRIDGE_UPSTREAM_PRESET", "deepseek".to_owned()),
        ],
    )
    .await;

    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/node/aisdk_tool_roundtrip.mjs");
    let output = Command::new("node")
        .arg(&script)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("AISDK_DIR", &aisdk)
        .env("TOOLBRIDGE_URL", gateway.url("/v1"))
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .unwrap_or_else(|e| panic!("cannot run node {}: {e}", script.display()));
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        output.status.success(),
        "{} exited with {}\nstdout:\n{stdout}\nstderr:\n{stderr}\nupstream requests:\n{:#?}\n\
         gateway stderr:\n{}",
        script.display(),
        output.status,
        upstream
            .requests()
            .iter()
            .map(|r| &r.body)
            .collect::<Vec<_>>(),
        gateway.stderr()
    );
    let report: Value = stdout
        .lines()
        .find_map(|l| l.strip_prefix("AISDK_REPORT "))
        .map(|json| serde_json::from_str(json).expect("the report is JSON"))
        .unwrap_or_else(|| panic!("no AISDK_REPORT line:\n{stdout}\nstderr:\n{stderr}"));
    eprintln!("AI SDK report: {report:#}");

    // The SDK's view: a tool step, then the answer.
    assert_eq!(report["text"], FINAL_TEXT, "{report:#}");
    assert_eq!(report["finishReason"], "stop");
    assert_eq!(report["toolCalls"], json!(["Paris"]), "the tool ran once");
    let steps = report["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 2, "{report:#}");
    assert_eq!(steps[0]["finishReason"], "tool-calls");
    assert_eq!(steps[0]["toolCalls"][0]["name"], "weather");
    assert_eq!(steps[0]["toolCalls"][0]["input"], json!({"city": "Paris"}));
    // The reasoning reached the client as an item without a summary (none was asked for): the
    // SDK shows no reasoning text, so only the store can give it back to the upstream.
    let output = steps[0]["output"].as_array().unwrap();
    let kinds: Vec<&str> = output.iter().map(|i| i["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["reasoning", "function_call"], "{report:#}");
    let reasoning_id = output[0]["id"].as_str().unwrap();
    assert_eq!(steps[0]["reasoningText"], "");

    // What the SDK sent the gateway: the second request refers to the first response's reasoning
    // item by id instead of repeating it.
    let sent = report["sent"].as_array().unwrap();
    assert_eq!(sent.len(), 2, "{report:#}");
    assert!(sent.iter().all(|s| s["status"] == 200), "{report:#}");
    assert!(sent.iter().all(|s| s["store"] == true), "{report:#}");
    let second_input = sent[1]["input"].as_array().unwrap();
    let references: Vec<&Value> = second_input
        .iter()
        .filter(|i| i["type"] == "item_reference")
        .collect();
    assert!(
        !references.is_empty(),
        "the AI SDK sent no item_reference: {second_input:#?}"
    );
    assert_eq!(
        references,
        [&json!({"type": "item_reference", "id": reasoning_id})],
        "the reasoning item, by reference: {second_input:#?}"
    );
    assert!(
        second_input
            .iter()
            .any(|i| i["type"] == "function_call_output" && i["call_id"] == CALL_ID),
        "{second_input:#?}"
    );

    // What the upstream got: two calls, no refusal; the second replays the reasoning with the
    // tool call and carries the tool's result.
    let requests = upstream.requests();
    assert_eq!(requests.len(), 2, "{requests:#?}");
    let messages = requests[1].body["messages"].as_array().unwrap();
    let assistant = messages
        .iter()
        .find(|m| m["role"] == "assistant")
        .unwrap_or_else(|| panic!("no assistant message: {messages:#?}"));
    assert_eq!(assistant["reasoning_content"], REASONING, "{messages:#?}");
    assert_eq!(assistant["tool_calls"][0]["id"], CALL_ID);
    assert_eq!(assistant["tool_calls"][0]["function"]["name"], "weather");
    let tool = messages
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap_or_else(|| panic!("no tool message: {messages:#?}"));
    assert_eq!(tool["tool_call_id"], CALL_ID);
    let result: Value = serde_json::from_str(tool["content"].as_str().unwrap())
        .unwrap_or_else(|_| tool["content"].clone());
    assert_eq!(result["forecast"], "sunny", "{tool}");
    assert_eq!(
        messages[0],
        json!({"role": "user", "content": "What is the weather in Paris?"})
    );

    gateway.kill().await;
}
