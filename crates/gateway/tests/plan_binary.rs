//! Ring 3: `toolbridge plan` prints the body the gateway would send, in the provider's own
//! dialect: a Chat Completions body for a Chat preset, a Messages body for `anthropic`, a
//! generateContent body for `gemini` and the passed-through Responses body for `responses`, each
//! from the dialect's real translator (it used to print a Chat body for every dialect).
//!
//! Every child runs with a cleared environment and a bounded wait.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::Stdio;
use std::time::Duration;
use toolbridge_testkit::tempdir::TempDir;

use serde_json::{Value, json};
use tokio::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_toolbridge");

/// A request with a system text, a user turn, a function tool and sampling parameters: every
/// dialect has a place of its own for each.
fn request(stream: bool) -> Value {
    json!({
        "model": "some-model",
        "stream": stream,
        "instructions": "Be brief.",
        "input": [{"role": "user", "content": "What is the weather?"}],
        "max_output_tokens": 200,
        "temperature": 0.5,
        "tools": [{"type": "function", "name": "get_weather",
                   "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}]
    })
}

/// Runs `toolbridge plan` with `args` on `body`; returns the report, the path it names and the
/// upstream body it prints.
async fn plan(name: &str, args: &[&str], body: &Value) -> (String, String, Value) {
    let dir = TempDir::new(name);
    let path = dir.write("request.json", &body.to_string());
    let mut cmd = Command::new(BIN);
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .arg("plan")
        .args(args)
        .arg(&path);
    let out = tokio::time::timeout(Duration::from_secs(30), cmd.output())
        .await
        .expect("the binary did not exit in time")
        .expect("the binary runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (_, tail) = stdout
        .split_once("\nupstream request (POST ")
        .unwrap_or_else(|| panic!("no upstream request in {stdout}"));
    let (path, json) = tail.split_once("):\n").expect("the request's path");
    let upstream: Value = serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {json}"));
    (stdout.clone(), path.to_owned(), upstream)
}

#[tokio::test]
async fn plan_for_a_chat_preset_prints_a_chat_completions_body() {
    let (report, path, body) = plan("chat", &["--provider", "deepseek"], &request(true)).await;
    assert!(report.contains("dialect: chat\n"), "{report}");
    assert_eq!(path, "/chat/completions");
    assert_eq!(body["model"], "some-model");
    assert_eq!(body["stream"], true);
    assert_eq!(body["messages"][0]["role"], "system");
    assert_eq!(body["messages"][1]["content"], "What is the weather?");
    assert_eq!(body["tools"][0]["function"]["name"], "get_weather");
    assert!(
        body.get("contents").is_none() && body.get("input").is_none(),
        "{body}"
    );
}

#[tokio::test]
async fn plan_for_anthropic_prints_a_messages_body() {
    let (report, path, body) =
        plan("anthropic", &["--provider", "anthropic"], &request(true)).await;
    assert!(report.contains("dialect: anthropic\n"), "{report}");
    assert_eq!(path, "/messages");
    assert_eq!(body["model"], "some-model");
    assert_eq!(body["max_tokens"], 200);
    // The system text is a top-level field in Messages, not a message.
    assert_eq!(body["messages"][0]["role"], "user");
    assert!(body["system"].to_string().contains("Be brief."), "{body}");
    assert_eq!(body["tools"][0]["name"], "get_weather");
    assert!(body["tools"][0].get("input_schema").is_some(), "{body}");
    assert!(body.get("max_completion_tokens").is_none(), "{body}");
}

#[tokio::test]
async fn plan_for_gemini_prints_a_generate_content_body() {
    let (report, path, body) = plan(
        "gemini",
        &["--provider", "gemini", "--model", "gemini-2.5-flash"],
        &request(false),
    )
    .await;
    assert!(report.contains("dialect: gemini\n"), "{report}");
    // Gemini names the model and the streaming mode in the path, not the body.
    assert_eq!(path, "/models/gemini-2.5-flash:generateContent");
    assert!(
        body.get("model").is_none() && body.get("stream").is_none(),
        "{body}"
    );
    assert_eq!(body["contents"][0]["role"], "user");
    assert_eq!(
        body["contents"][0]["parts"][0]["text"],
        "What is the weather?"
    );
    assert_eq!(body["generationConfig"]["maxOutputTokens"], 200);
    assert!(body.get("systemInstruction").is_some(), "{body}");
    assert_eq!(
        body["tools"][0]["functionDeclarations"][0]["name"],
        "get_weather"
    );
    assert!(body.get("messages").is_none(), "{body}");
}

#[tokio::test]
async fn plan_for_a_streamed_gemini_request_names_the_stream_path() {
    let (_, path, _) = plan("gemini-stream", &["--provider", "gemini"], &request(true)).await;
    assert_eq!(path, "/models/some-model:streamGenerateContent?alt=sse");
}

#[tokio::test]
async fn plan_for_responses_prints_the_passed_through_body() {
    let (report, path, body) =
        plan("responses", &["--provider", "responses"], &request(true)).await;
    assert!(report.contains("dialect: responses\n"), "{report}");
    assert_eq!(path, "/responses");
    assert_eq!(body["model"], "some-model");
    assert_eq!(body["input"][0]["content"], "What is the weather?");
    assert_eq!(body["instructions"], "Be brief.");
    assert_eq!(body["max_output_tokens"], 200);
    // The gateway owns state: the upstream stores nothing.
    assert_eq!(body["store"], false);
    assert_eq!(body["tools"][0]["name"], "get_weather");
    assert!(body.get("messages").is_none(), "{body}");
}

#[tokio::test]
async fn plan_with_a_config_follows_the_configured_providers_dialect() {
    let dir = TempDir::new("plan-config");
    let config = dir.write(
        "toolbridge.toml",
        r#"
[providers.claude]
dialect = "anthropic"
base_url = "http://127.0.0.1:9"

[[routes]]
model = "*"
provider = "claude"
"#,
    );
    let config = config.to_string_lossy().into_owned();
    let (report, path, body) = plan(
        "config",
        &["--provider", "claude", "--config", &config],
        &request(true),
    )
    .await;
    assert!(report.contains("dialect: anthropic\n"), "{report}");
    assert_eq!(path, "/messages");
    assert_eq!(body["max_tokens"], 200);
    assert_eq!(body["messages"][0]["role"], "user");
    assert!(body.get("system").is_some(), "{body}");
}
