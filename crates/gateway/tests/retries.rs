//! Retries the clients read correctly: the gateway's retries before the first byte (a whole
//! answer whose body breaks off mid-way included), `x-should-retry: false` once the gateway spent
//! them, so an OpenAI SDK's own retries do not multiply them (counted at the fake upstream,
//! in process and with the real OpenAI Python SDK against the binary), and the documented codes
//! of a failed stream.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code fails loudly

mod common;

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use common::Harness;
use serde_json::{Value, json};
use toolbridge_testkit::chat::completion;
use toolbridge_testkit::{FakeUpstream, GatewayProcess, Reply};

const BIN: &str = env!("CARGO_BIN_EXE_toolbridge");

/// A gateway routing every model to one Chat provider with `max_retries`.
async fn harness(max_retries: u32) -> Harness {
    Harness::with_toml(|url| {
        format!(
            r#"
[providers.up]
base_url = "{url}"
api_key_env = "FAKE_UPSTREAM_KEY"
preset = "openai"
max_retries = {max_retries}

[[routes]]
model = "*"
provider = "up"
"#
        )
    })
    .await
}

fn unavailable() -> Reply {
    Reply::error(
        503,
        json!({"error": {"message": "busy", "type": "server_error", "code": null}}),
    )
}

/// A whole Chat answer whose connection breaks after its first half.
fn cut_completion() -> Reply {
    let body = completion("Never seen whole.", "stop").to_string();
    let sent = body.len() / 2;
    Reply::JsonThenReset { body, sent }
}

#[tokio::test]
async fn spent_retries_answer_with_x_should_retry_false() {
    let h = harness(2).await;
    h.upstream.set_fallback(unavailable());
    let response = h.post(&json!({"model": "m", "input": "Hi"})).await;
    assert_eq!(response.status().as_u16(), 503);
    assert_eq!(
        response
            .headers()
            .get("x-should-retry")
            .map(|v| v.to_str().unwrap()),
        Some("false")
    );
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "upstream_unavailable", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("after 3 attempts"),
        "{body}"
    );
    assert_eq!(h.upstream.requests().len(), 3, "one try and two retries");
}

#[tokio::test]
async fn without_gateway_retries_the_sdk_is_left_to_retry() {
    let h = harness(0).await;
    h.upstream.set_fallback(unavailable());
    let response = h.post(&json!({"model": "m", "input": "Hi"})).await;
    assert_eq!(response.status().as_u16(), 503);
    assert!(response.headers().get("x-should-retry").is_none());
    assert_eq!(h.upstream.requests().len(), 1);
}

#[tokio::test]
async fn a_client_error_is_not_retried_and_says_nothing_of_retries() {
    let h = harness(2).await;
    h.upstream.set_fallback(Reply::error(
        400,
        json!({"error": {"message": "bad", "type": "invalid_request_error"}}),
    ));
    let response = h.post(&json!({"model": "m", "input": "Hi"})).await;
    assert_eq!(response.status().as_u16(), 400);
    assert!(response.headers().get("x-should-retry").is_none());
    assert_eq!(h.upstream.requests().len(), 1);
}

#[tokio::test]
async fn a_whole_answer_cut_mid_body_is_retried() {
    let h = harness(2).await;
    h.upstream.push(cut_completion());
    h.upstream
        .push(Reply::json(completion("Whole at last.", "stop")));
    let (status, body) = h.post_json(&json!({"model": "m", "input": "Hi"})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["output"][0]["content"][0]["text"], "Whole at last.");
    assert_eq!(h.upstream.requests().len(), 2);
}

#[tokio::test]
async fn a_whole_answer_cut_mid_body_has_its_own_code() {
    let h = harness(0).await;
    h.upstream.push(cut_completion());
    let response = h.post(&json!({"model": "m", "input": "Hi"})).await;
    assert_eq!(response.status().as_u16(), 502);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "upstream_body_cut", "{body}");
    assert_eq!(body["error"]["type"], "server_error", "{body}");
    assert!(
        !body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("could not be reached"),
        "{body}"
    );
    assert_eq!(h.upstream.requests().len(), 1);
}

#[tokio::test]
async fn a_body_cut_on_every_try_says_the_retries_are_spent() {
    let h = harness(1).await;
    h.upstream.set_fallback(cut_completion());
    let response = h.post(&json!({"model": "m", "input": "Hi"})).await;
    assert_eq!(response.status().as_u16(), 502);
    assert_eq!(
        response
            .headers()
            .get("x-should-retry")
            .map(|v| v.to_str().unwrap()),
        Some("false")
    );
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "upstream_body_cut", "{body}");
    assert_eq!(h.upstream.requests().len(), 2);
}

/// The real OpenAI Python SDK (default `max_retries = 2`) against the binary (default
/// `max_retries = 2`) and an upstream that always answers 503: three upstream attempts, all
/// the gateway's — the SDK made one call, not three (which would be nine attempts).
#[tokio::test]
async fn the_python_sdk_makes_one_call_when_the_gateway_spent_its_retries() {
    let Some(python) = toolbridge_testkit::tools::python_with_openai() else {
        eprintln!("SKIPPED python SDK retry test: no Python with the openai package");
        return;
    };
    let upstream = FakeUpstream::start().await;
    upstream.set_fallback(unavailable());
    let gateway = GatewayProcess::start(
        Path::new(BIN),
        &[
            ("TOOLBRIDGE_UPSTREAM_URL", upstream.base_url()),
            ("TOOLBRIDGE_UPSTREAM_API_KEY", "sk-retries".to_owned()),
        ],
    )
    .await;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/sdk_retries.py");
    let run = tokio::process::Command::new(&python)
        .arg(&script)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("OPENAI_BASE_URL", gateway.url("/v1"))
        .env("OPENAI_API_KEY", "dummy")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(60), run)
        .await
        .expect("the SDK gave up in time")
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "stdout:\n{stdout}\nstderr:\n{}\ngateway:\n{}",
        String::from_utf8_lossy(&output.stderr),
        gateway.stderr()
    );
    let outcome: Value = stdout
        .lines()
        .find_map(|l| l.strip_prefix("SDK_RETRIES "))
        .map(|j| serde_json::from_str(j).unwrap())
        .unwrap_or_else(|| panic!("no SDK_RETRIES line:\n{stdout}"));
    assert_eq!(outcome["status"], 503, "{outcome}");
    assert_eq!(outcome["should_retry"], "false", "{outcome}");
    assert_eq!(outcome["code"], "upstream_unavailable", "{outcome}");
    assert_eq!(
        upstream.requests().len(),
        3,
        "the gateway's one try and two retries, and no call more from the SDK"
    );
}
