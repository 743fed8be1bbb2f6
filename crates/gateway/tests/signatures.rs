//! Ring 3: provider signatures survive a tool turn without the client's help, through the real
//! binary. A fake Anthropic (thinking on: a signed `thinking` block and a `redacted_thinking`
//! block before the `tool_use`) and a fake Gemini 3 (a `thoughtSignature` on the `functionCall`,
//! no thought text) each refuse the turn that sends the call's result back when the signed
//! state is missing (`signatures/fake.rs`). The second turn must succeed in the three ways a
//! client continues, streamed and whole:
//! - `previous_response_id` on a stored response (no `encrypted_content` asked for), sent to a
//!   second gateway process sharing the first one's store;
//! - `store: false` echoing the output with `encrypted_content`, sent to a third gateway with
//!   its own store and the same reasoning key (the stateless path: no server state);
//! - `store: false` echoing the output without it, sent to the second gateway (the state comes
//!   from the shared store by `call_id`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "signatures/fake.rs"]
mod fake;

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fake::Scenario;
use serde_json::{Value, json};
use toolbridge_testkit::tempdir::TempDir;
use toolbridge_testkit::{FakeUpstream, GatewayProcess};

const BIN: &str = env!("CARGO_BIN_EXE_toolbridge");
const KEY: &str = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";

#[derive(Debug, Clone, Copy)]
enum Continue {
    PreviousResponse,
    EchoSealed,
    EchoPlain,
}

fn config(url: &str) -> String {
    format!(
        r#"
reasoning_keys = ["{KEY}"]

[providers.claude]
dialect = "anthropic"
base_url = "{url}"
api_key_env = "FAKE_UPSTREAM_KEY"
max_retries = 0

[providers.gem]
dialect = "gemini"
base_url = "{url}"
api_key_env = "FAKE_UPSTREAM_KEY"
max_retries = 0

[[routes]]
model = "claude"
provider = "claude"
upstream_model = "claude-sonnet-4-5"

[[routes]]
model = "gemini"
provider = "gem"
upstream_model = "gemini-3-pro-preview"
"#
    )
}

async fn gateway(config: &Path, store: &str) -> GatewayProcess {
    GatewayProcess::start(
        Path::new(BIN),
        &[
            ("TOOLBRIDGE_CONFIG", config.display().to_string()),
            ("TOOLBRIDGE_STORE_URL", store.to_owned()),
            ("FAKE_UPSTREAM_KEY", "sk-fake".to_owned()),
        ],
    )
    .await
}

fn tools() -> Value {
    json!([{"type": "function", "name": "lookup", "description": "The weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}])
}

/// POSTs a request, streamed or whole; the final response object.
async fn post(client: &reqwest::Client, gateway: &GatewayProcess, body: &Value) -> Value {
    let response = client
        .post(gateway.url("/v1/responses"))
        .json(body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    assert_eq!(status, 200, "{text}\ngateway:\n{}", gateway.stderr());
    if body["stream"] != true {
        return serde_json::from_str(&text).unwrap();
    }
    let events = toolbridge_testkit::sse::parse(&text);
    let last = events.last().expect("a terminal event");
    last.data["response"].clone()
}

struct Gateways {
    first: GatewayProcess,
    sharing: GatewayProcess,
    stateless: GatewayProcess,
}

async fn second_turn(
    client: &reqwest::Client,
    g: &Gateways,
    model: &str,
    stream: bool,
    how: Continue,
) -> Value {
    let mut first = json!({"model": model, "input": "Weather in Oslo?", "tools": tools(),
        "reasoning": {"effort": "low"}, "stream": stream});
    match how {
        Continue::PreviousResponse => {}
        Continue::EchoSealed => {
            first["store"] = json!(false);
            first["include"] = json!(["reasoning.encrypted_content"]);
        }
        Continue::EchoPlain => first["store"] = json!(false),
    }
    let answer = post(client, &g.first, &first).await;
    let output = answer["output"].as_array().unwrap().clone();
    let call = output
        .iter()
        .find(|i| i["type"] == "function_call")
        .unwrap_or_else(|| panic!("no call: {answer:#}"));
    assert!(
        !answer.to_string().contains("SIG-"),
        "signatures are never shown: {answer:#}"
    );
    let result =
        json!({"type": "function_call_output", "call_id": call["call_id"], "output": "-3C"});
    let mut next = json!({"model": model, "tools": tools(), "reasoning": {"effort": "low"},
        "stream": stream});
    let target = match how {
        Continue::PreviousResponse => {
            next["previous_response_id"] = answer["id"].clone();
            next["input"] = json!([result]);
            &g.sharing
        }
        Continue::EchoSealed | Continue::EchoPlain => {
            next["store"] = json!(false);
            let mut input = vec![json!({"role": "user", "content": "Weather in Oslo?"})];
            input.extend(output.iter().cloned());
            input.push(result);
            next["input"] = Value::Array(input);
            if matches!(how, Continue::EchoSealed) {
                let sealed = output.iter().any(|i| {
                    i["type"] == "reasoning"
                        && i["encrypted_content"]
                            .as_str()
                            .is_some_and(|c| !c.is_empty())
                });
                assert!(
                    sealed,
                    "a sealed reasoning item carries the state: {answer:#}"
                );
                &g.stateless
            } else {
                assert!(
                    output.iter().all(|i| i.get("encrypted_content").is_none()
                        || i["encrypted_content"].is_null()),
                    "{answer:#}"
                );
                &g.sharing
            }
        }
    };
    post(client, target, &next).await
}

#[tokio::test]
async fn the_second_tool_turn_keeps_its_signatures_in_every_continuation() {
    let upstream = FakeUpstream::start().await;
    let current = Arc::new(Mutex::new(Scenario::default()));
    upstream.set_gate(fake::gate(current.clone()));
    let dir = TempDir::new("signatures");
    let file = dir.write("toolbridge.toml", &config(&upstream.base_url()));
    let shared = format!("sqlite://{}", dir.0.join("shared.db").display());
    let own = format!("sqlite://{}", dir.0.join("own.db").display());
    let g = Gateways {
        first: gateway(&file, &shared).await,
        sharing: gateway(&file, &shared).await,
        stateless: gateway(&file, &own).await,
    };
    let client = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let mut n = 0;
    for model in ["claude", "gemini"] {
        for stream in [false, true] {
            for how in [
                Continue::PreviousResponse,
                Continue::EchoSealed,
                Continue::EchoPlain,
            ] {
                n += 1;
                *current.lock().unwrap() = Scenario {
                    tag: format!("{n}"),
                };
                let answer = second_turn(&client, &g, model, stream, how).await;
                assert_eq!(
                    answer["status"], "completed",
                    "{model} stream={stream} {how:?}: {answer:#}"
                );
                let text = answer["output"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|i| i["type"] == "message")
                    .map(|m| m["content"][0]["text"].clone());
                assert_eq!(text, Some(json!("Cold: -3C.")), "{model} {how:?}");
            }
        }
    }
    assert_eq!(
        upstream.requests().len(),
        2 * n,
        "no turn was refused and retried"
    );
}
