//! Ring 2: plaintext reasoning of a native Responses upstream across turns, for a stateless
//! client. A DeepSeek-like fake answers with `reasoning_text` content and no
//! `encrypted_content`, and refuses a tool turn whose earlier reasoning is not sent back (as
//! DeepSeek does); the client echoes items as Codex does (`store: false`, the reasoning item's
//! `encrypted_content` and `summary` only). The gateway must seal the reasoning for the client and
//! restore it for the upstream, whole and streamed, and leave out reasoning another provider
//! produced, with `reasoning_not_replayable`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code fails loudly

mod common;

use std::sync::Arc;

use common::Harness;
use serde_json::{Value, json};
use toolbridge_testkit::{Recorded, Reply};

const THOUGHT: &str = "The user wants the files; I should run ls first.";

/// Two providers on the same DeepSeek-like endpoint, under different names: reasoning one of
/// them produced is not the other's.
async fn harness() -> Harness {
    let h = Harness::with_toml(|url| {
        format!(
            r#"
[providers.ds]
dialect = "responses"
preset = "deepseek-responses"
base_url = "{url}"
api_key_env = "FAKE_UPSTREAM_KEY"

[providers.ds_other]
dialect = "responses"
preset = "deepseek-responses"
base_url = "{url}"
api_key_env = "FAKE_UPSTREAM_KEY"

[[routes]]
model = "deepseek"
provider = "ds"
upstream_model = "deepseek-v4-flash"

[[routes]]
model = "deepseek-other"
provider = "ds_other"
upstream_model = "deepseek-v4-flash"
"#
        )
    })
    .await;
    h.upstream.set_gate(Arc::new(deepseek_rule));
    h
}

fn refuse(message: &str) -> Option<Reply> {
    Some(Reply::error(
        400,
        json!({"error": {"message": message, "type": "invalid_request_error", "param": null, "code": "invalid_request"}}),
    ))
}

/// DeepSeek's rule: a call made since the last user message (the turn in progress) goes back
/// with the reasoning before it, as `reasoning_text`; and it cannot open any
/// `encrypted_content`.
fn deepseek_rule(r: &Recorded) -> Option<Reply> {
    let input = r.body["input"].as_array()?;
    let is_user = |item: &Value| item["role"] == "user";
    let current = input.iter().rposition(is_user).unwrap_or(0);
    if input.iter().any(|i| i.get("encrypted_content").is_some()) {
        return refuse("encrypted_content is not supported");
    }
    let mut reasoning_seen = false;
    for item in &input[current..] {
        match item["type"].as_str().unwrap_or("message") {
            "reasoning" => {
                reasoning_seen = item["content"]
                    .as_array()
                    .is_some_and(|c| c.iter().any(|p| p["text"] == THOUGHT));
            }
            "function_call" if !reasoning_seen => {
                return refuse("reasoning_content in the thinking mode must be passed back");
            }
            _ => {}
        }
    }
    None
}

fn reasoning_item() -> Value {
    json!({"type": "reasoning", "id": "rs_ds_1", "summary": [],
           "content": [{"type": "reasoning_text", "text": THOUGHT}]})
}

fn call_item() -> Value {
    json!({"type": "function_call", "id": "fc_ds_1", "status": "completed", "call_id": "call_1",
           "name": "exec_command", "arguments": "{\"cmd\":\"ls\"}"})
}

fn message_item(text: &str) -> Value {
    json!({"type": "message", "id": "msg_ds_1", "status": "completed", "role": "assistant",
           "content": [{"type": "output_text", "text": text, "annotations": []}]})
}

fn response_object(output: Vec<Value>) -> Value {
    json!({"id": "resp_ds", "object": "response", "created_at": 1_700_000_000,
           "status": "completed", "model": "deepseek-v4-flash", "output": output,
           "usage": {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0},
                     "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 3},
                     "total_tokens": 15}})
}

/// DeepSeek's stream of `output`: semantic events, plaintext reasoning deltas, no `[DONE]`.
fn stream_of(output: &[Value]) -> Reply {
    let mut events = vec![(
        "response.created",
        json!({"type": "response.created", "response": response_object(Vec::new())}),
    )];
    for (i, item) in output.iter().enumerate() {
        let mut added = item.clone();
        if item["type"] == "reasoning" {
            added["content"] = json!([]);
        }
        events.push((
            "response.output_item.added",
            json!({"type": "response.output_item.added", "output_index": i, "item": added}),
        ));
        if item["type"] == "reasoning" {
            events.push((
                "response.reasoning_text.delta",
                json!({"type": "response.reasoning_text.delta", "output_index": i,
                       "item_id": item["id"], "content_index": 0, "delta": THOUGHT}),
            ));
        }
        events.push((
            "response.output_item.done",
            json!({"type": "response.output_item.done", "output_index": i, "item": item}),
        ));
    }
    events.push((
        "response.completed",
        json!({"type": "response.completed", "response": response_object(output.to_vec())}),
    ));
    Reply::sse_events(events)
}

fn reply(output: Vec<Value>, stream: bool) -> Reply {
    if stream {
        stream_of(&output)
    } else {
        Reply::json(response_object(output))
    }
}

fn tools() -> Value {
    json!([{"type": "function", "name": "exec_command", "description": "Runs a command.",
            "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}}}])
}

fn user(text: &str) -> Value {
    json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]})
}

/// What Codex sends: `store: false`, encrypted reasoning asked for.
fn request(model: &str, input: Vec<Value>, stream: bool) -> Value {
    json!({"model": model, "store": false, "stream": stream, "input": input, "tools": tools(),
           "include": ["reasoning.encrypted_content"], "reasoning": {"effort": "high"}})
}

/// A reasoning item as Codex echoes it: no id, no `reasoning_text` content, its blob kept.
fn echoed(reasoning: &Value) -> Value {
    json!({"type": "reasoning", "summary": reasoning["summary"],
           "encrypted_content": reasoning["encrypted_content"]})
}

fn echoed_call() -> Value {
    json!({"type": "function_call", "call_id": "call_1", "name": "exec_command",
           "arguments": "{\"cmd\":\"ls\"}"})
}

fn call_output() -> Value {
    json!({"type": "function_call_output", "call_id": "call_1", "output": "a.txt\nb.txt"})
}

/// One turn through the gateway: the output items the client keeps and the diagnostics.
async fn turn(h: &Harness, body: &Value) -> (Vec<Value>, Vec<Value>) {
    if body["stream"] == true {
        let events = h.post_stream(body).await;
        let last = &events.last().unwrap().data;
        assert_eq!(last["type"], "response.completed", "{last:#}");
        // What a streaming client keeps: each item as its `output_item.done` showed it, which
        // is also the item in the terminal response.
        let done: Vec<Value> = events
            .iter()
            .filter(|e| e.data["type"] == "response.output_item.done")
            .map(|e| e.data["item"].clone())
            .collect();
        assert_eq!(
            &done,
            last["response"]["output"].as_array().unwrap(),
            "the blob is the same in the event and the response"
        );
        let diagnostics = last["response"]["toolbridge_diagnostics"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        (done, diagnostics)
    } else {
        let (status, body) = h.post_json(body).await;
        assert_eq!(status, 200, "{body:#}");
        h.check_response(&body);
        let diagnostics = body["toolbridge_diagnostics"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        (body["output"].as_array().unwrap().clone(), diagnostics)
    }
}

/// The first turn: the model reasons in plaintext and calls a tool; the client gets the
/// reasoning sealed, with its text still shown.
async fn first_turn(h: &Harness, model: &str, stream: bool) -> Value {
    h.upstream
        .push(reply(vec![reasoning_item(), call_item()], stream));
    let (output, _) = turn(h, &request(model, vec![user("list the files")], stream)).await;
    let reasoning = output[0].clone();
    assert_eq!(reasoning["type"], "reasoning", "{output:#?}");
    assert_eq!(reasoning["content"][0]["text"], THOUGHT);
    let blob = reasoning["encrypted_content"].as_str().unwrap_or_default();
    assert!(
        blob.starts_with("tbr1."),
        "sealed by the gateway: {reasoning:#}"
    );
    assert!(
        !blob.contains("ls first"),
        "the blob is not the text in clear"
    );
    reasoning
}

async fn tool_turn_is_replayed_statelessly(stream: bool) {
    let h = harness().await;
    let reasoning = first_turn(&h, "deepseek", stream).await;
    h.upstream
        .push(reply(vec![message_item("a.txt and b.txt")], stream));
    let second = request(
        "deepseek",
        vec![
            user("list the files"),
            echoed(&reasoning),
            echoed_call(),
            call_output(),
        ],
        stream,
    );
    let (output, diagnostics) = turn(&h, &second).await;
    assert_eq!(
        output[0]["content"][0]["text"], "a.txt and b.txt",
        "{output:#?}"
    );
    assert!(diagnostics.is_empty(), "{diagnostics:#?}");
    // The upstream got its reasoning back in its own form, and no blob.
    let sent = h.upstream.last_body();
    assert_eq!(
        sent["input"][1],
        json!({"type": "reasoning", "summary": [],
               "content": [{"type": "reasoning_text", "text": THOUGHT}]}),
        "{sent:#}"
    );
    // The rule is real: the same turn without the reasoning is refused upstream.
    let bare = request(
        "deepseek",
        vec![user("list the files"), echoed_call(), call_output()],
        stream,
    );
    let status = h.post(&bare).await.status().as_u16();
    assert_eq!(
        status, 400,
        "the fake refuses a tool turn without its reasoning"
    );
}

#[tokio::test]
async fn plaintext_reasoning_is_sealed_for_a_stateless_client_and_replayed_whole() {
    tool_turn_is_replayed_statelessly(false).await;
}

#[tokio::test]
async fn plaintext_reasoning_is_sealed_for_a_stateless_client_and_replayed_streamed() {
    tool_turn_is_replayed_statelessly(true).await;
}

#[tokio::test]
async fn reasoning_another_provider_produced_is_left_out_with_a_diagnostic() {
    let h = harness().await;
    let theirs = first_turn(&h, "deepseek-other", false).await;
    // The conversation moves to the other provider after the tool turn ended.
    h.upstream.push(reply(vec![message_item("hello")], false));
    let next = request(
        "deepseek",
        vec![
            user("list the files"),
            echoed(&theirs),
            echoed_call(),
            call_output(),
            json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "a.txt and b.txt"}]}),
            user("thanks"),
        ],
        false,
    );
    let (_, diagnostics) = turn(&h, &next).await;
    let dropped: Vec<(&str, &str)> = diagnostics
        .iter()
        .map(|d| {
            (
                d["code"].as_str().unwrap_or_default(),
                d["param"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        dropped,
        [("reasoning_not_replayable", "input[1]")],
        "{diagnostics:#?}"
    );
    let sent = h.upstream.last_body();
    let kinds: Vec<&str> = sent["input"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["type"].as_str().unwrap_or("message"))
        .collect();
    assert_eq!(
        kinds,
        [
            "message",
            "function_call",
            "function_call_output",
            "message",
            "message"
        ]
    );
    // The provider that produced it still gets it back.
    h.upstream.push(reply(vec![message_item("again")], false));
    let back = request(
        "deepseek-other",
        vec![
            user("list the files"),
            echoed(&theirs),
            echoed_call(),
            call_output(),
        ],
        false,
    );
    let (_, diagnostics) = turn(&h, &back).await;
    assert!(diagnostics.is_empty(), "{diagnostics:#?}");
    assert_eq!(
        h.upstream.last_body()["input"][1]["content"][0]["text"],
        THOUGHT
    );
}
