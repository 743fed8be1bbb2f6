//! Ring 3: the OpenAI Agents SDK for Python (`openai-agents` 0.24.0) runs an agent with a
//! function tool through the real binary (issue 18), whole (`Runner.run`) and streamed
//! (`Runner.run_streamed`), on each of the four routes of `official`: a reasoning Chat preset, a
//! plain Chat preset, Anthropic and Gemini. The SDK drives the tool loop itself (the second
//! turn sends the first turn's items back); the client side is `tests/python/agents_run.py`.
//!
//! The interpreter is `$TOOLBRIDGE_TEST_AGENTS_PYTHON`, else `<workspace>/.venv-agents` (its own
//! venv, installed by `scripts/test`); without it the test fails on CI and otherwise says it
//! skipped.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code fails loudly

mod official;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::process::Command;

#[tokio::test]
async fn agents_sdk_runs_a_tool_agent_whole_and_streamed_on_every_route() {
    let Some(python) = toolbridge_testkit::tools::python_with_agents() else {
        return;
    };
    tokio::time::timeout(Duration::from_secs(240), run(python))
        .await
        .expect("the Agents SDK test ran past its time limit");
}

async fn run(python: PathBuf) {
    let gateway = official::start().await;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/agents_run.py");
    for (model, what) in official::MODELS {
        let before = gateway.upstream.requests().len();
        let output = Command::new(&python)
            .arg(&script)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("TOOLBRIDGE_URL", gateway.process.url("/v1"))
            .env("MODEL", model)
            .env("OPENAI_AGENTS_DISABLE_TRACING", "1")
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output()
            .await
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", python.display()));
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        assert!(
            output.status.success(),
            "{model} ({what}): the agent exited with {}\nstdout:\n{stdout}\nstderr:\n{stderr}\n\
             gateway stderr:\n{}",
            output.status,
            gateway.process.stderr()
        );
        let report: Value = stdout
            .lines()
            .find_map(|l| l.strip_prefix("AGENTS_REPORT "))
            .map(|json| serde_json::from_str(json).expect("the report is JSON"))
            .unwrap_or_else(|| panic!("{model}: no report line:\n{stdout}\nstderr:\n{stderr}"));
        let ctx = format!("{model} ({what}): {report:#}");
        assert_eq!(report["calls"], json!(["Paris", "Paris"]), "{ctx}");
        for path in ["whole", "streamed"] {
            assert_eq!(report[path]["final"], official::FINAL_TEXT, "{ctx}");
            let items = report[path]["items"].as_array().unwrap();
            assert!(items.iter().any(|i| i == "tool_call_item"), "{ctx}");
            assert!(items.iter().any(|i| i == "tool_call_output_item"), "{ctx}");
            assert_eq!(items.last().unwrap(), "message_output_item", "{ctx}");
            let reasoning = items.iter().any(|i| i == "reasoning_item");
            assert_eq!(reasoning, *model != "plain", "{ctx}");
        }
        let events = report["events"].as_array().unwrap();
        assert!(events.iter().any(|e| e == "response.completed"), "{ctx}");
        let calls = gateway.upstream.requests().len() - before;
        assert_eq!(calls, 4, "{ctx}: two turns per run, no refusal");
    }
    gateway.process.kill().await;
}
