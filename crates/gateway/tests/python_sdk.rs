//! Ring 3: the real OpenAI Python SDK (`openai` package) against the real `toolbridge` binary in
//! zero-config mode, in front of a fake Chat Completions upstream. The client side is
//! `tests/python/sdk_roundtrip.py`: a non-streamed `responses.create` and a streamed
//! `responses.stream`, checked by the SDK's own parsing and accumulation.
//!
//! The Python interpreter is `$TOOLBRIDGE_TEST_PYTHON`, else `<workspace>/.venv/bin/python` (made
//! by `scripts/test`). Without one that can import `openai` the test fails when `CI` is set, and
//! otherwise says it skipped.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use tokio::process::Command;
use toolbridge_testkit::chat::{completion, text_stream};
use toolbridge_testkit::{FakeUpstream, GatewayProcess, Reply};

const BIN: &str = env!("CARGO_BIN_EXE_toolbridge");
const UPSTREAM_KEY: &str = "sk-python-sdk-test-upstream";
const SYNC_TEXT: &str = "Hello from the fake upstream.";
const STREAM_PIECES: [&str; 4] = ["Streaming", " through", " the", " gateway."];

#[tokio::test]
async fn openai_python_sdk_round_trips_sync_and_streamed_responses() {
    let Some(python) = toolbridge_testkit::tools::python_with_openai() else {
        eprintln!(
            "SKIPPED python SDK test: no Python with the openai package; run scripts/test to \
             install it"
        );
        return;
    };
    tokio::time::timeout(Duration::from_secs(120), round_trip(python))
        .await
        .expect("the Python SDK test ran past its time limit");
}

async fn round_trip(python: PathBuf) {
    let upstream = FakeUpstream::start().await;
    // The script's order: first `responses.create`, then `responses.stream`.
    upstream.push(Reply::json(completion(SYNC_TEXT, "stop")));
    upstream.push(Reply::sse(text_stream(&STREAM_PIECES, "stop")));
    let gateway = GatewayProcess::start(
        Path::new(BIN),
        &[
            ("TOOLBRIDGE_UPSTREAM_URL", upstream.base_url()),
            ("TOOLBRIDGE_UPSTREAM_API_KEY", UPSTREAM_KEY.to_owned()),
        ],
    )
    .await;

    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/sdk_roundtrip.py");
    let output = Command::new(&python)
        .arg(&script)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("OPENAI_BASE_URL", gateway.url("/v1"))
        .env("OPENAI_API_KEY", "dummy")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("PYTHONIOENCODING", "utf-8")
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", python.display()));
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        output.status.success(),
        "{} exited with {}\nstdout:\n{stdout}\nstderr:\n{stderr}\ngateway stderr:\n{}",
        script.display(),
        output.status,
        gateway.stderr()
    );

    let summary: Value = stdout
        .lines()
        .find_map(|l| l.strip_prefix("SDK_SUMMARY "))
        .map(|json| serde_json::from_str(json).expect("the summary is JSON"))
        .unwrap_or_else(|| panic!("no SDK_SUMMARY line:\n{stdout}\nstderr:\n{stderr}"));
    eprintln!("python SDK summary: {summary}");

    assert_eq!(summary["sync"]["status"], "completed");
    assert_eq!(summary["sync"]["output_text"], SYNC_TEXT);
    assert_eq!(summary["sync"]["total_tokens"], 18);
    assert!(
        summary["sync"]["id"]
            .as_str()
            .is_some_and(|id| id.starts_with("resp_")),
        "{summary}"
    );
    let streamed = STREAM_PIECES.concat();
    assert_eq!(summary["stream"]["final_text"], streamed.as_str());
    assert_eq!(summary["stream"]["final_status"], "completed");
    assert_eq!(summary["stream"]["total_tokens"], 18);
    assert_eq!(
        summary["stream"]["deltas"]
            .as_array()
            .map(|d| d.iter().filter_map(Value::as_str).collect::<String>()),
        Some(streamed)
    );

    let requests = upstream.requests();
    assert_eq!(requests.len(), 2, "{requests:#?}");
    for r in &requests {
        assert_eq!(r.path, "/v1/chat/completions");
        assert_eq!(
            r.headers["authorization"],
            format!("Bearer {UPSTREAM_KEY}").as_str()
        );
        assert_eq!(r.body["model"], "gpt-test");
    }
    assert_eq!(requests[0].body["stream"], false);
    assert_eq!(
        requests[0].body["messages"][0],
        serde_json::json!({"role": "system", "content": "Be brief."})
    );
    assert_eq!(requests[1].body["stream"], true);

    gateway.kill().await;
}
