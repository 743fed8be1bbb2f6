//! Ring 2: the whole app in process against a fake native Responses upstream on 127.0.0.1:0
//! (`dialect = "responses"`), speaking OpenAI's Responses wire format: requests, items, tools and
//! events pass through; the gateway applies only its own concerns (identity, storage, history,
//! diagnostics, one start and one terminal event).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code fails loudly

mod common;

use common::Harness;
use serde_json::{Value, json};
use toolbridge_testkit::Reply;

async fn harness(max_retries: u32) -> Harness {
    Harness::with_toml(|url| {
        format!(
            r#"
[providers.openai]
dialect = "responses"
base_url = "{url}"
api_key_env = "FAKE_UPSTREAM_KEY"
max_retries = {max_retries}

[[routes]]
model = "*"
provider = "openai"
upstream_model = "gpt-5-upstream"
"#
        )
    })
    .await
}

/// The upstream's own response object.
fn upstream_response(status: &str, output: Value) -> Value {
    json!({
        "id": "resp_upstream_1", "object": "response", "created_at": 1_700_000_000,
        "status": status, "model": "gpt-5-upstream-2026", "output": output,
        "previous_response_id": null, "store": false, "error": null,
        "incomplete_details": null, "instructions": null, "tools": [], "tool_choice": "auto",
        "parallel_tool_calls": true, "temperature": 1.0, "top_p": 1.0, "truncation": "disabled",
        "metadata": {}, "text": {"format": {"type": "text"}},
        "usage": if status == "completed" {
            json!({"input_tokens": 21, "input_tokens_details": {"cached_tokens": 4},
                   "output_tokens": 9, "output_tokens_details": {"reasoning_tokens": 3},
                   "total_tokens": 30})
        } else { Value::Null },
        "upstream_only_field": {"survives": true}
    })
}

fn message(id: &str, text: &str) -> Value {
    json!({"type": "message", "id": id, "status": "completed", "role": "assistant",
           "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}]})
}

fn reasoning_item() -> Value {
    json!({"type": "reasoning", "id": "rs_up_1", "summary": [{"type": "summary_text", "text": "Plan."}],
           "encrypted_content": "gAAAA-upstream-opaque"})
}

fn patch_call() -> Value {
    json!({"type": "custom_tool_call", "id": "ctc_1", "status": "completed", "call_id": "call_patch",
           "name": "apply_patch", "input": "*** Begin Patch\n*** Add File: a.txt\n+hi\n*** End Patch"})
}

fn codex_tools() -> Value {
    json!([
        {"type": "function", "name": "exec_command", "description": "run", "strict": false,
         "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]}},
        {"type": "custom", "name": "apply_patch", "description": "patch",
         "format": {"type": "grammar", "syntax": "lark", "definition": "start: begin_patch hunk+ end_patch"}},
        {"type": "namespace", "name": "mcp__files", "description": "files",
         "tools": [{"type": "function", "name": "read", "parameters": {"type": "object", "properties": {}}}]},
        {"type": "web_search", "external_web_access": true},
        {"type": "tool_search", "future_knob": 3}
    ])
}

/// A realistic stream: reasoning, text, a custom tool call, an event type and an item type
/// the gateway has never heard of.
fn stream_events() -> Vec<(&'static str, Value)> {
    let created = upstream_response("in_progress", json!([]));
    let done = upstream_response(
        "completed",
        json!([reasoning_item(), message("msg_up_1", "Hello"), {"type": "future_item", "id": "fi_1", "payload": [1, 2]}, patch_call()]),
    );
    vec![
        (
            "response.created",
            json!({"type": "response.created", "sequence_number": 0, "response": created}),
        ),
        (
            "response.in_progress",
            json!({"type": "response.in_progress", "sequence_number": 1, "response": created}),
        ),
        (
            "response.output_item.added",
            json!({"type": "response.output_item.added", "sequence_number": 2, "output_index": 0,
            "item": {"type": "reasoning", "id": "rs_up_1", "summary": []}}),
        ),
        (
            "response.output_item.done",
            json!({"type": "response.output_item.done", "sequence_number": 3, "output_index": 0, "item": reasoning_item()}),
        ),
        (
            "response.output_item.added",
            json!({"type": "response.output_item.added", "sequence_number": 4, "output_index": 1,
            "item": {"type": "message", "id": "msg_up_1", "status": "in_progress", "role": "assistant", "content": []}}),
        ),
        (
            "response.content_part.added",
            json!({"type": "response.content_part.added", "sequence_number": 5, "item_id": "msg_up_1",
            "output_index": 1, "content_index": 0, "part": {"type": "output_text", "text": "", "annotations": [], "logprobs": []}}),
        ),
        (
            "response.output_text.delta",
            json!({"type": "response.output_text.delta", "sequence_number": 6, "item_id": "msg_up_1",
            "output_index": 1, "content_index": 0, "delta": "Hello", "logprobs": [], "obfuscation": "xyz"}),
        ),
        (
            "response.future_event.delta",
            json!({"type": "response.future_event.delta", "sequence_number": 7, "odd": {"nested": 1}}),
        ),
        (
            "response.output_text.done",
            json!({"type": "response.output_text.done", "sequence_number": 8, "item_id": "msg_up_1",
            "output_index": 1, "content_index": 0, "text": "Hello", "logprobs": []}),
        ),
        (
            "response.content_part.done",
            json!({"type": "response.content_part.done", "sequence_number": 9, "item_id": "msg_up_1",
            "output_index": 1, "content_index": 0, "part": {"type": "output_text", "text": "Hello", "annotations": [], "logprobs": []}}),
        ),
        (
            "response.output_item.done",
            json!({"type": "response.output_item.done", "sequence_number": 10, "output_index": 1,
            "item": message("msg_up_1", "Hello")}),
        ),
        (
            "response.output_item.added",
            json!({"type": "response.output_item.added", "sequence_number": 11, "output_index": 2,
            "item": {"type": "future_item", "id": "fi_1", "payload": [1, 2]}}),
        ),
        (
            "response.output_item.done",
            json!({"type": "response.output_item.done", "sequence_number": 12, "output_index": 2,
            "item": {"type": "future_item", "id": "fi_1", "payload": [1, 2]}}),
        ),
        (
            "response.output_item.added",
            json!({"type": "response.output_item.added", "sequence_number": 13, "output_index": 3,
            "item": {"type": "custom_tool_call", "id": "ctc_1", "status": "in_progress", "call_id": "call_patch", "name": "apply_patch", "input": ""}}),
        ),
        (
            "response.custom_tool_call_input.delta",
            json!({"type": "response.custom_tool_call_input.delta", "sequence_number": 14,
            "item_id": "ctc_1", "output_index": 3, "delta": "*** Begin Patch\n*** Add File: a.txt\n+hi\n*** End Patch"}),
        ),
        (
            "response.output_item.done",
            json!({"type": "response.output_item.done", "sequence_number": 15, "output_index": 3, "item": patch_call()}),
        ),
        (
            "response.completed",
            json!({"type": "response.completed", "sequence_number": 16, "response": done}),
        ),
    ]
}

#[tokio::test]
async fn a_codex_request_and_its_stream_pass_through_with_the_gateways_identity() {
    let h = harness(0).await;
    h.upstream.push(Reply::sse_events(stream_events()));
    let events = h
        .post_stream(&json!({
            "model": "codex-model", "stream": true, "store": false,
            "instructions": "be brief", "input": "hi",
            "tools": codex_tools(), "tool_choice": "auto", "parallel_tool_calls": false,
            "reasoning": {"effort": "high", "summary": "auto"},
            "include": ["reasoning.encrypted_content"],
            "prompt_cache_key": "thread-1", "client_metadata": {"x": 1}
        }))
        .await;

    // What went upstream: the client's request, with only the gateway's concerns changed.
    let sent = h.upstream.requests().pop().unwrap();
    assert_eq!(sent.path, "/v1/responses");
    assert_eq!(
        sent.headers["authorization"].to_str().unwrap(),
        "Bearer sk-upstream-secret"
    );
    let body = &sent.body;
    assert_eq!(body["model"], "gpt-5-upstream");
    assert_eq!(body["stream"], true);
    assert_eq!(body["store"], false);
    assert_eq!(body["tools"], codex_tools(), "tools exactly as declared");
    assert_eq!(body["tool_choice"], "auto");
    assert_eq!(body["parallel_tool_calls"], false);
    assert_eq!(
        body["reasoning"],
        json!({"effort": "high", "summary": "auto"})
    );
    assert_eq!(body["include"], json!(["reasoning.encrypted_content"]));
    assert_eq!(
        body["client_metadata"],
        json!({"x": 1}),
        "unknown request fields survive"
    );
    assert_eq!(body["instructions"], "be brief");

    // What came back: every upstream event, renumbered, one start, under the gateway's id.
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| e.data["type"].as_str().unwrap())
        .collect();
    assert_eq!(kinds.len(), 17);
    assert_eq!(
        kinds.iter().filter(|k| **k == "response.created").count(),
        1
    );
    assert!(kinds.contains(&"response.future_event.delta"));
    assert!(kinds.contains(&"response.custom_tool_call_input.delta"));
    let future = events
        .iter()
        .find(|e| e.data["type"] == "response.future_event.delta")
        .unwrap();
    assert_eq!(future.data["odd"]["nested"], 1);
    let delta = events
        .iter()
        .find(|e| e.data["type"] == "response.output_text.delta")
        .unwrap();
    assert_eq!(delta.data["obfuscation"], "xyz");
    let id = events[0].data["response"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(id.starts_with("resp_"), "{id}");
    assert_ne!(id, "resp_upstream_1");
    let last = &events.last().unwrap().data["response"];
    assert_eq!(last["id"], id.as_str());
    assert_eq!(last["model"], "codex-model");
    assert_eq!(last["status"], "completed");
    assert_eq!(last["store"], false);
    assert_eq!(last["upstream_only_field"]["survives"], true);
    assert_eq!(last["output"][2]["type"], "future_item");
    assert_eq!(last["output"][3]["input"], patch_call()["input"]);
    assert_eq!(
        last["output"][0]["encrypted_content"],
        "gAAAA-upstream-opaque"
    );
    assert_eq!(last["usage"]["input_tokens_details"]["cached_tokens"], 4);
}

#[tokio::test]
async fn stored_turns_chain_through_the_gateway_and_replay_upstream_reasoning() {
    let h = harness(0).await;
    h.upstream.push(Reply::json(upstream_response(
        "completed",
        json!([reasoning_item(), message("msg_up_1", "First answer")]),
    )));
    let (status, first) = h
        .post_json(&json!({"model": "m", "input": "first question", "metadata": {"k": "v"}}))
        .await;
    assert_eq!(status, 200, "{first}");
    h.check_response(&first);
    let first_id = first["id"].as_str().unwrap();
    assert_ne!(first_id, "resp_upstream_1");
    assert_eq!(first["store"], true);
    assert_eq!(first["upstream_only_field"]["survives"], true);
    let sent = h.upstream.last_body();
    assert_eq!(
        sent["store"], false,
        "the gateway keeps the state, not the upstream"
    );
    assert_eq!(
        sent["include"],
        json!(["reasoning.encrypted_content"]),
        "asked for, so the stored reasoning can be replayed"
    );

    // Stored whole, unknown fields included.
    let fetched: Value = h
        .client
        .get(h.url(&format!("/v1/responses/{first_id}")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(fetched["upstream_only_field"]["survives"], true);
    assert_eq!(fetched["output"], first["output"]);

    // The next turn names the gateway's id; the upstream gets the whole history, with its own
    // reasoning blob, and no previous_response_id it could not know.
    h.upstream.push(Reply::json(upstream_response(
        "completed",
        json!([message("msg_up_2", "Second answer")]),
    )));
    let (status, second) = h
        .post_json(
            &json!({"model": "m", "input": "second question", "previous_response_id": first_id}),
        )
        .await;
    assert_eq!(status, 200, "{second}");
    assert_eq!(second["previous_response_id"], first_id);
    let sent = h.upstream.last_body();
    assert!(sent.get("previous_response_id").is_none());
    let input = sent["input"].as_array().unwrap();
    let kinds: Vec<&str> = input
        .iter()
        .map(|i| i["type"].as_str().unwrap_or("message"))
        .collect();
    assert_eq!(
        kinds,
        ["message", "reasoning", "message", "message"],
        "{input:#?}"
    );
    assert_eq!(input[1]["encrypted_content"], "gAAAA-upstream-opaque");
    assert_eq!(input[2]["content"][0]["text"], "First answer");
}

#[tokio::test]
async fn upstream_errors_keep_their_status_before_the_stream_and_fail_it_after() {
    let h = harness(0).await;
    h.upstream.push(Reply::Json {
        status: 429,
        body: json!({"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}}),
        headers: vec![("retry-after".into(), "7".into())],
    });
    let response = h
        .post(&json!({"model": "m", "input": "hi", "stream": true}))
        .await;
    assert_eq!(response.status().as_u16(), 429);
    assert_eq!(response.headers()["retry-after"], "7");
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "rate_limit_exceeded");

    // An `error` event mid-stream: the one terminal event is response.failed.
    let mut events = stream_events()[..7].to_vec();
    events.push(("error", json!({"type": "error", "sequence_number": 7, "code": "server_error", "message": "The server had an error", "param": null})));
    h.upstream.push(Reply::sse_events(events));
    let events = h
        .post_stream(&json!({"model": "m", "input": "hi", "stream": true}))
        .await;
    let last = &events.last().unwrap().data;
    assert_eq!(last["type"], "response.failed");
    assert_eq!(last["response"]["error"]["code"], "server_error");
    assert!(
        events
            .iter()
            .any(|e| e.data["type"] == "response.output_text.delta")
    );

    // A stream cut before its terminal event is a cut answer (issue 15: it failed as
    // `server_error` before); an empty one says so.
    h.upstream
        .push(Reply::sse_events(stream_events()[..7].to_vec()));
    let events = h
        .post_stream(&json!({"model": "m", "input": "hi", "stream": true}))
        .await;
    let last = &events.last().unwrap().data;
    assert_eq!(last["type"], "response.incomplete");
    assert_eq!(
        last["response"]["incomplete_details"]["reason"],
        "upstream_truncated"
    );
    h.upstream.push(Reply::sse_events(Vec::new()));
    let events = h
        .post_stream(&json!({"model": "m", "input": "hi", "stream": true}))
        .await;
    assert_eq!(events.len(), 3);
    let error = &events.last().unwrap().data["response"]["error"];
    assert_eq!(error["code"], "server_error");
    assert_eq!(error["toolbridge_code"], "empty_upstream_response");
}

#[tokio::test]
async fn compaction_summarises_through_a_responses_upstream() {
    let h = harness(0).await;
    h.upstream.push(Reply::json(upstream_response(
        "completed",
        json!([message("msg_sum", "The user asked about x.")]),
    )));
    let (status, body) = h
        .post_path_json(
            "/v1/responses/compact",
            &json!({"model": "m", "input": [{"role": "user", "content": "tell me about x"}]}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["object"], "response.compaction");
    let sent = h.upstream.last_body();
    assert_eq!(sent["stream"], false);
    assert_eq!(sent["store"], false);
    assert_eq!(body["usage"]["total_tokens"], 30);
}
