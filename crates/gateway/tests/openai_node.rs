//! Ring 3: the official openai-node SDK (`openai` 7.59.0, on Node) against the real binary
//! (issue 18): `responses.create`, a function-call round trip sent back statelessly, and the same
//! through `responses.stream()`, whose helper accumulates every event into a snapshot and throws
//! on one it cannot place ("missing content at index 0" for reasoning deltas without their
//! content part). Each of the four routes of `official` — a reasoning Chat preset, a plain Chat
//! preset, Anthropic and Gemini — is asked in turn. The client side is `tests/node/openai_node.mjs`.
//!
//! openai-node is `$TOOLBRIDGE_TEST_OPENAI_NODE`, else `<workspace>/.tools/openai-node`
//! (installed by `scripts/test`); without it the test fails on CI and otherwise says it skipped.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code fails loudly

mod official;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use tokio::process::Command;

#[tokio::test]
async fn openai_node_creates_streams_and_round_trips_a_function_call_on_every_route() {
    let Some(dir) = toolbridge_testkit::tools::openai_node() else {
        return;
    };
    tokio::time::timeout(Duration::from_secs(180), run(dir))
        .await
        .expect("the openai-node test ran past its time limit");
}

async fn run(dir: PathBuf) {
    let gateway = official::start().await;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/node/openai_node.mjs");
    for (model, what) in official::MODELS {
        let before = gateway.upstream.requests().len();
        let output = Command::new("node")
            .arg(&script)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("OPENAI_NODE_DIR", &dir)
            .env("TOOLBRIDGE_URL", gateway.process.url("/v1"))
            .env("MODEL", model)
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output()
            .await
            .unwrap_or_else(|e| panic!("cannot run node {}: {e}", script.display()));
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        assert!(
            output.status.success(),
            "{model} ({what}): node exited with {}\nstdout:\n{stdout}\nstderr:\n{stderr}\n\
             gateway stderr:\n{}",
            output.status,
            gateway.process.stderr()
        );
        let report: Value = stdout
            .lines()
            .find_map(|l| l.strip_prefix("OPENAI_NODE_REPORT "))
            .map(|json| serde_json::from_str(json).expect("the report is JSON"))
            .unwrap_or_else(|| panic!("{model}: no report line:\n{stdout}\nstderr:\n{stderr}"));
        check(model, &report);
        let calls = gateway.upstream.requests().len() - before;
        assert_eq!(
            calls, 4,
            "{model}: one upstream call per turn, no refusal retried"
        );
    }
    gateway.process.kill().await;
}

fn check(model: &str, report: &Value) {
    let reasons = model != "plain";
    for path in ["whole", "streamed"] {
        let [first, second] = [&report[path][0], &report[path][1]];
        let ctx = format!("{model} {path}: {report:#}");
        assert_eq!(first["status"], "completed", "{ctx}");
        let kinds = first["kinds"].as_array().unwrap();
        assert_eq!(kinds.last().unwrap(), "function_call", "{ctx}");
        assert_eq!(first["call"], "{\"city\":\"Paris\"}", "{ctx}");
        if reasons {
            assert_eq!(kinds[0], "reasoning", "{ctx}");
            assert_eq!(first["reasoning"][0], official::REASONING, "{ctx}");
        } else {
            assert!(!kinds.iter().any(|k| k == "reasoning"), "{ctx}");
        }
        assert_eq!(second["status"], "completed", "{ctx}");
        assert_eq!(second["text"], official::FINAL_TEXT, "{ctx}");
        assert!(
            second["usage"]["total_tokens"].as_u64().unwrap() > 0,
            "{ctx}"
        );
    }
    // The stream helper saw the reasoning text inside a content part, as OpenAI sends it.
    if reasons {
        let events: Vec<&str> = report["events"][0]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .collect();
        let added = events
            .iter()
            .position(|e| *e == "response.content_part.added");
        let delta = events
            .iter()
            .position(|e| *e == "response.reasoning_text.delta");
        assert!(
            matches!((added, delta), (Some(a), Some(d)) if a < d),
            "{model}: {events:?}"
        );
    }
}
