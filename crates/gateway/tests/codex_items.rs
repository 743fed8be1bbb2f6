//! Ring 2: every input item type Codex 0.171 can send beside the Responses API's own
//! (`fixtures/codex-0.171/items.json`) goes through every dialect with its declared policy
//! (`core/src/request/turns/codex.rs`): rendered as text, translated, or left out with a
//! diagnostic; never a 400 that sinks the session. A native Responses upstream gets them as
//! sent.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code fails loudly

mod common;

use common::Harness;
use serde_json::{Value, json};
use toolbridge_testkit::dialects::{Answer, End, Usage, Wire};

fn fixture() -> Value {
    let mut request: Value =
        serde_json::from_str(include_str!("fixtures/codex-0.171/items.json")).unwrap();
    request.as_object_mut().unwrap().remove("_source");
    request
}

fn answer() -> Answer {
    Answer {
        reasoning: Vec::new(),
        text: vec!["Done.".to_owned()],
        calls: Vec::new(),
        end: End::Stop,
        usage: Usage {
            input: 10,
            cached: 0,
            output: 2,
            reasoning: 0,
        },
    }
}

async fn harness(provider: &str) -> Harness {
    let provider = provider.to_owned();
    Harness::with_toml(move |url| {
        format!(
            "[providers.up]\nbase_url = \"{url}\"\napi_key_env = \"FAKE_UPSTREAM_KEY\"\n{provider}\n\n[[routes]]\nmodel = \"*\"\nprovider = \"up\"\n"
        )
    })
    .await
}

fn codes(body: &Value) -> Vec<(String, String)> {
    body["toolbridge_diagnostics"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|d| {
            (
                d["code"].as_str().unwrap_or_default().to_owned(),
                d["param"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

/// Sends the fixture through a translating dialect; checks what the provider read and what the
/// client was told.
async fn translated(provider: &str, wire: Wire) {
    let h = harness(provider).await;
    h.upstream.push(wire.whole(&answer()));
    let (status, body) = h.post_json(&fixture()).await;
    assert_eq!(status, 200, "{provider}: {body:#}");
    assert_eq!(body["status"], "completed", "{provider}: {body:#}");
    let sent = h.upstream.last_body().to_string();
    for seen in [
        // agent_message: who wrote it to whom, and its text.
        "Message from agent `explorer` to `main`",
        "The failing test is tests/parse.rs.",
        // configuration_update: what changed.
        "configuration was updated",
        "reasoning_effort",
        // input_audio: a placeholder, never the bytes.
        "audio omitted",
        // messages with a phase keep their text.
        "Looking at the test first.",
        "Found it.",
        // the call goes with its plain arguments.
        "ls",
    ] {
        assert!(sent.contains(seen), "{provider}: `{seen}` not sent: {sent}");
    }
    for never in [
        "UklGRiQAAABXQVZF",
        "gAAAAB-encrypted-args",
        "gAAAAB-not-this",
        "phase",
    ] {
        assert!(
            !sent.contains(never),
            "{provider}: `{never}` was sent: {sent}"
        );
    }
    let got = codes(&body);
    for expected in [
        ("content_part_dropped", "input[3].content[1]"),
        ("param_dropped", "input[5].encrypted_function_args"),
        ("item_dropped", "input[2]"),
        ("item_dropped", "input[8]"),
    ] {
        assert!(
            got.contains(&(expected.0.to_owned(), expected.1.to_owned())),
            "{provider}: {expected:?} not in {got:?}"
        );
    }
}

#[tokio::test]
async fn codex_0171_items_go_through_a_chat_preset() {
    translated("preset = \"glm\"", Wire::Chat { think_tags: false }).await;
}

#[tokio::test]
async fn codex_0171_items_go_through_anthropic() {
    translated("preset = \"anthropic\"", Wire::Anthropic).await;
}

#[tokio::test]
async fn codex_0171_items_go_through_gemini() {
    translated("preset = \"gemini\"", Wire::Gemini).await;
}

/// A native Responses upstream reads Codex's items itself: they go as sent.
#[tokio::test]
async fn codex_0171_items_reach_a_native_responses_upstream_as_sent() {
    let h = harness("preset = \"responses\"").await;
    h.upstream.push(Wire::Responses.whole(&answer()));
    let request = fixture();
    let (status, body) = h.post_json(&request).await;
    assert_eq!(status, 200, "{body:#}");
    let sent = h.upstream.last_body();
    let kinds: Vec<&str> = sent["input"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|i| i["type"].as_str())
        .collect();
    for kind in ["agent_message", "configuration_update", "function_call"] {
        assert!(kinds.contains(&kind), "{kind} not in {kinds:?}");
    }
    let call = sent["input"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["type"] == "function_call")
        .unwrap();
    assert_eq!(
        call["encrypted_function_args"],
        json!("gAAAAB-encrypted-args")
    );
}
