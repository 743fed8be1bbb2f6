//! Ring 3: the real OpenAI Python SDK parses what gateway-run tools show — `mcp_call` and
//! `web_search_call` items and their stream events — each validated strictly against the SDK's
//! own pydantic model (`tests/python/sdk_hosted_items.py`), whole and streamed. The gateway runs
//! in process in front of a fake Chat upstream and a fake SearXNG backend.
//!
//! The Python interpreter is found as in `python_sdk.rs`; without one the test fails when `CI`
//! is set and otherwise prints `SKIPPED ...`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code fails loudly

mod common;

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use common::Harness;
use serde_json::{Value, json};
use tokio::process::Command;
use toolbridge_testkit::chat::{chunk, completion, text_stream, usage, usage_chunk};
use toolbridge_testkit::{FakeUpstream, Reply};

/// Round one calls the calculator and the search at once; round two answers.
fn script(upstream: &FakeUpstream, search: &FakeUpstream) {
    let calls = json!([
        {"id": "call_c", "type": "function", "function": {"name": "calculator", "arguments": "{\"expression\":\"6*7\"}"}},
        {"id": "call_s", "type": "function", "function": {"name": "web_search", "arguments": "{\"query\":\"toolbridge release\"}"}}
    ]);
    let hits = json!({"results": [{"title": "toolbridge 1.0", "url": "https://example.com/tb", "content": "Released 2026-11-30."}]});
    // Whole.
    upstream.push(Reply::json(json!({
        "id": "c1", "object": "chat.completion", "created": 1, "model": "fake-model",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": null, "tool_calls": calls},
                     "finish_reason": "tool_calls"}],
        "usage": usage(10, 5),
    })));
    search.push(Reply::json(hits.clone()));
    upstream.push(Reply::json(completion("42; released 2026-11-30.", "stop")));
    // Streamed.
    let mut chunks = vec![chunk(json!({"role": "assistant", "content": ""}), None)];
    for (i, call) in calls.as_array().unwrap().iter().enumerate() {
        let mut delta = call.clone();
        delta["index"] = json!(i);
        chunks.push(chunk(json!({"tool_calls": [delta]}), None));
    }
    chunks.push(chunk(json!({}), Some("tool_calls")));
    chunks.push(usage_chunk(10, 5));
    upstream.push(Reply::sse(chunks));
    search.push(Reply::json(hits));
    upstream.push(Reply::sse(text_stream(
        &["42; released ", "2026-11-30."],
        "stop",
    )));
}

#[tokio::test]
async fn the_python_sdk_parses_hosted_items_and_their_events_strictly() {
    let Some(python) = toolbridge_testkit::tools::python_with_openai() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "no Python with the openai package in CI"
        );
        eprintln!("SKIPPED python SDK hosted-items test: run scripts/test to install the SDK");
        return;
    };
    let search = FakeUpstream::start().await;
    let search_url = search.base_url();
    let port = search_url
        .trim_start_matches("http://127.0.0.1:")
        .trim_end_matches("/v1")
        .to_owned();
    let h = Harness::with_toml(move |url| {
        format!(
            r#"
[providers.up]
base_url = "{url}"
max_retries = 0

[[routes]]
model = "*"
provider = "up"

[gateway_tools]
builtins = ["calculator"]
jq_isolation = false

[gateway_tools.web_search]
backend = "searxng"
url = "{search_url}"
allow_loopback_ports = [{port}]
"#
        )
    })
    .await;
    script(&h.upstream, &search);
    let script_path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/sdk_hosted_items.py");
    let output = tokio::time::timeout(
        Duration::from_secs(120),
        Command::new(&python)
            .arg(&script_path)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("OPENAI_BASE_URL", h.url("/v1"))
            .env("OPENAI_API_KEY", "dummy")
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the Python SDK ran past its time limit")
    .unwrap_or_else(|e| panic!("cannot run {}: {e}", python.display()));
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        output.status.success(),
        "exited with {}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        output.status
    );
    let summary: Value = stdout
        .lines()
        .find_map(|l| l.strip_prefix("SDK_SUMMARY "))
        .map(|l| serde_json::from_str(l).unwrap())
        .unwrap_or_else(|| panic!("no summary:\n{stdout}"));
    assert_eq!(
        summary["whole_classes"],
        json!([
            "McpCall",
            "ResponseFunctionWebSearch",
            "ResponseOutputMessage"
        ])
    );
    assert_eq!(summary["whole_text"], "42; released 2026-11-30.");
    assert_eq!(summary["stream_status"], "completed");
    assert_eq!(summary["stream_classes"], summary["whole_classes"]);
    let types: Vec<&str> = summary["stream_types"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    for expected in [
        "response.mcp_call_arguments.delta",
        "response.mcp_call_arguments.done",
        "response.mcp_call.in_progress",
        "response.mcp_call.completed",
        "response.web_search_call.in_progress",
        "response.web_search_call.searching",
        "response.web_search_call.completed",
    ] {
        assert!(types.contains(&expected), "no {expected} in {types:?}");
    }
}
