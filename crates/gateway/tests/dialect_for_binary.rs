//! Ring 3: one provider, two dialects, through the real binary. A DeepSeek account serves
//! `deepseek-v4-*` on its native `/responses` and its other models on `/chat/completions`; the
//! config declares the provider once, with a `dialect_for` entry. `check` shows the split, and
//! each model's request reaches its own path of the fake upstream in that path's wire format.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code fails loudly

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use toolbridge_testkit::dialects::{Answer, End, Usage, Wire};
use toolbridge_testkit::tempdir::TempDir;
use toolbridge_testkit::{FakeUpstream, GatewayProcess};

const BIN: &str = env!("CARGO_BIN_EXE_toolbridge");

fn config(url: &str) -> String {
    format!(
        r#"
[providers.ds]
preset = "deepseek"
base_url = "{url}"
api_key_env = "DS_KEY"

[[providers.ds.dialect_for]]
models = "deepseek-v4-*"
preset = "deepseek-responses"

[[routes]]
model = "*"
provider = "ds"
"#
    )
}

fn answer(text: &str) -> Answer {
    Answer {
        reasoning: Vec::new(),
        text: vec![text.to_owned()],
        calls: Vec::new(),
        end: End::Stop,
        usage: Usage {
            input: 5,
            cached: 0,
            output: 2,
            reasoning: 0,
        },
    }
}

fn text_of(response: &Value) -> String {
    response["output"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|item| item["type"] == "message")
        .flat_map(|item| item["content"].as_array().cloned().unwrap_or_default())
        .filter_map(|part| part["text"].as_str().map(str::to_owned))
        .collect()
}

async fn ask(gateway: &GatewayProcess, model: &str) -> Value {
    let client = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let response = client
        .post(gateway.url("/v1/responses"))
        .json(&json!({"model": model, "input": "hi", "store": false,
                      "tools": [{"type": "custom", "name": "apply_patch"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    response.json().await.unwrap()
}

#[tokio::test]
async fn one_provider_serves_two_models_in_two_dialects() {
    tokio::time::timeout(Duration::from_secs(60), async {
        let upstream = FakeUpstream::start().await;
        let dir = TempDir::new("binary-dialect-for");
        let path = dir.write("toolbridge.toml", &config(&upstream.base_url()));

        let out = tokio::process::Command::new(BIN)
            .arg("check")
            .arg("--config")
            .arg(&path)
            .env_clear()
            .stdin(Stdio::null())
            .output()
            .await
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{stdout}");
        assert!(
            stdout.contains(
                "    models deepseek-v4-*: responses dialect, preset deepseek-responses (/responses)\n"
            ),
            "{stdout}"
        );

        let gateway = GatewayProcess::start(
            Path::new(BIN),
            &[
                ("TOOLBRIDGE_CONFIG", path.display().to_string()),
                ("DS_KEY", "sk-ds".to_owned()),
            ],
        )
        .await;
        upstream.push(Wire::Chat { think_tags: false }.whole(&answer("from chat")));
        let chat = ask(&gateway, "deepseek-chat").await;
        upstream.push(Wire::Responses.whole(&answer("from responses")));
        let native = ask(&gateway, "deepseek-v4-flash").await;
        assert_eq!(text_of(&chat), "from chat", "{chat:#}");
        assert_eq!(text_of(&native), "from responses", "{native:#}");

        let sent = upstream.requests();
        assert_eq!(sent.len(), 2);
        assert!(sent[0].path.ends_with("/chat/completions"), "{}", sent[0].path);
        assert!(sent[1].path.ends_with("/responses"), "{}", sent[1].path);
        // Each in its own wire format, planned by its own preset: the custom tool is a
        // function either way (DeepSeek's native endpoint refuses `custom`).
        assert_eq!(sent[0].body["model"], "deepseek-chat");
        assert!(sent[0].body["messages"].is_array(), "{:#}", sent[0].body);
        assert_eq!(sent[0].body["tools"][0]["function"]["name"], "apply_patch");
        assert_eq!(sent[1].body["model"], "deepseek-v4-flash");
        assert_eq!(sent[1].body["input"], "hi", "as the client sent it");
        assert!(sent[1].body.get("messages").is_none());
        assert_eq!(sent[1].body["tools"][0]["type"], "function");
        assert_eq!(sent[1].body["tools"][0]["name"], "apply_patch");
        for request in &sent {
            assert_eq!(request.headers["authorization"], "Bearer sk-ds");
        }
        gateway.kill().await;
    })
    .await
    .expect("the test ran past its time limit");
}
