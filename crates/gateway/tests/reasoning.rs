//! Ring 2: reasoning continuity. Provider reasoning becomes `reasoning` items shown as the
//! request asks; it is sealed into `encrypted_content` for stateless clients and replayed to the
//! providers that need it; effort is said in each provider's words.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code fails loudly

mod common;

use common::Harness;
use serde_json::{Value, json};
use toolbridge_testkit::Reply;
use toolbridge_testkit::chat::{chunk, completion, usage_chunk};
use toolbridge_testkit::sse::types;

fn exec_tool() -> Value {
    json!([{"type": "function", "name": "exec_command", "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}}}])
}

fn thinking_then_call() -> Reply {
    Reply::sse(vec![
        chunk(
            json!({"role": "assistant", "reasoning_content": "I should list "}),
            None,
        ),
        chunk(json!({"reasoning_content": "the files."}), None),
        chunk(
            json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "exec_command", "arguments": "{\"cmd\":\"ls\"}"}}]}),
            None,
        ),
        chunk(json!({}), Some("tool_calls")),
        usage_chunk(10, 5),
    ])
}

#[tokio::test]
async fn reasoning_is_sealed_for_stateless_clients_and_replayed_on_tool_call_turns() {
    let h = Harness::with_preset("deepseek").await;
    h.upstream.push(thinking_then_call());
    let events = h
        .post_stream(&json!({
            "model": "deepseek-v4-flash", "input": "list files", "stream": true, "store": false,
            "tools": exec_tool(), "include": ["reasoning.encrypted_content"],
        }))
        .await;
    let kinds = types(&events);
    assert!(
        kinds.contains(&"response.reasoning_text.delta".to_owned()),
        "{kinds:?}"
    );
    let final_response = &events.last().unwrap().data["response"];
    let reasoning = final_response["output"][0].clone();
    assert_eq!(reasoning["type"], "reasoning");
    assert_eq!(
        reasoning["content"],
        json!([{"type": "reasoning_text", "text": "I should list the files."}])
    );
    let blob = reasoning["encrypted_content"].as_str().unwrap().to_owned();
    assert!(blob.starts_with("tbr1."), "{blob}");
    assert!(
        !blob.contains("files"),
        "the blob must not carry the text in clear"
    );
    let call = final_response["output"][1].clone();

    // A client that keeps only the sealed blob (no content, no summary) gets the reasoning
    // replayed to DeepSeek on the tool-call turn.
    h.upstream
        .push(Reply::json(completion("There are two files.", "stop")));
    let (status, body) = h
        .post_json(&json!({
            "model": "deepseek-v4-flash", "tools": exec_tool(), "store": false,
            "input": [
                {"role": "user", "content": "list files"},
                {"type": "reasoning", "id": reasoning["id"], "summary": [], "encrypted_content": blob},
                call,
                {"type": "function_call_output", "call_id": "call_1", "output": "a b"},
            ],
        }))
        .await;
    assert_eq!(status, 200, "{body}");
    let assistant = h.upstream.last_body()["messages"][1].clone();
    assert_eq!(assistant["role"], "assistant");
    assert_eq!(assistant["reasoning_content"], "I should list the files.");
    assert_eq!(assistant["tool_calls"][0]["id"], "call_1");
}

#[tokio::test]
async fn a_tampered_or_foreign_blob_is_ignored_with_a_diagnostic() {
    let h = Harness::with_preset("deepseek").await;
    for blob in [
        "tbr1.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
        "gAAAA-someone-elses-blob",
    ] {
        h.upstream.push(Reply::json(completion("ok", "stop")));
        let (status, body) = h
            .post_json(&json!({
                "model": "m", "tools": exec_tool(),
                "input": [
                    {"role": "user", "content": "x"},
                    {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": blob},
                    {"type": "function_call", "call_id": "c1", "name": "exec_command", "arguments": "{}"},
                    {"type": "function_call_output", "call_id": "c1", "output": "y"},
                ],
            }))
            .await;
        assert_eq!(status, 200, "{body}");
        assert!(
            h.upstream.last_body()["messages"][1]
                .get("reasoning_content")
                .is_none()
        );
        assert!(
            body["toolbridge_diagnostics"]
                .as_array()
                .unwrap()
                .iter()
                .any(|d| d["code"] == "reasoning_blob_ignored"),
            "{body}"
        );
    }
}

#[tokio::test]
async fn a_summary_request_streams_reasoning_as_summary_text() {
    let h = Harness::with_preset("deepseek").await;
    h.upstream.push(thinking_then_call());
    let events = h
        .post_stream(&json!({"model": "m", "input": "x", "stream": true, "tools": exec_tool(), "reasoning": {"summary": "auto"}}))
        .await;
    assert_eq!(
        types(&events)[2..9],
        [
            "response.output_item.added",
            "response.reasoning_summary_part.added",
            "response.reasoning_summary_text.delta",
            "response.reasoning_summary_text.delta",
            "response.reasoning_summary_text.done",
            "response.reasoning_summary_part.done",
            "response.output_item.done",
        ]
    );
    let item = &events[8].data["item"];
    assert_eq!(
        item["summary"],
        json!([{"type": "summary_text", "text": "I should list the files."}])
    );
    assert!(item.get("content").is_none() || item["content"].is_null());
    assert!(item.get("encrypted_content").is_none(), "not asked for");
}

#[tokio::test]
async fn reasoning_is_not_replayed_where_the_provider_does_not_want_it() {
    let h = Harness::with_preset("generic").await;
    h.upstream.push(Reply::json(completion("ok", "stop")));
    let (status, _) = h
        .post_json(&json!({
            "model": "m", "tools": exec_tool(),
            "input": [
                {"role": "user", "content": "x"},
                {"type": "reasoning", "id": "rs_1", "summary": [], "content": [{"type": "reasoning_text", "text": "private"}]},
                {"type": "function_call", "call_id": "c1", "name": "exec_command", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "c1", "output": "y"},
            ],
        }))
        .await;
    assert_eq!(status, 200);
    assert!(
        h.upstream.last_body()["messages"][1]
            .get("reasoning_content")
            .is_none()
    );

    // DeepSeek wants it on tool-call turns only.
    let h = Harness::with_preset("deepseek").await;
    h.upstream.push(Reply::json(completion("ok", "stop")));
    let (status, _) = h
        .post_json(&json!({
            "model": "m",
            "input": [
                {"role": "user", "content": "x"},
                {"type": "reasoning", "id": "rs_1", "summary": [], "content": [{"type": "reasoning_text", "text": "thought"}]},
                {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "answer"}]},
                {"role": "user", "content": "more"},
            ],
        }))
        .await;
    assert_eq!(status, 200);
    assert!(
        h.upstream.last_body()["messages"][1]
            .get("reasoning_content")
            .is_none()
    );
}

#[tokio::test]
async fn think_tags_become_a_reasoning_item() {
    let h = Harness::with_preset("ollama").await;
    h.upstream.push(Reply::sse(vec![
        chunk(json!({"role": "assistant", "content": "<thi"}), None),
        chunk(json!({"content": "nk>plan it</th"}), None),
        chunk(json!({"content": "ink>\n\nThe answer."}), None),
        chunk(json!({}), Some("stop")),
    ]));
    let events = h
        .post_stream(&json!({"model": "m", "input": "x", "stream": true}))
        .await;
    let output = &events.last().unwrap().data["response"]["output"];
    assert_eq!(output[0]["type"], "reasoning");
    assert_eq!(output[0]["content"][0]["text"], "plan it");
    assert_eq!(output[1]["content"][0]["text"], "The answer.");

    h.upstream
        .push(Reply::json(completion("<think>hmm</think>Done.", "stop")));
    let (_, body) = h.post_json(&json!({"model": "m", "input": "x"})).await;
    assert_eq!(body["output"][0]["content"][0]["text"], "hmm");
    assert_eq!(body["output"][1]["content"][0]["text"], "Done.");
}

#[tokio::test]
async fn effort_is_said_in_each_providers_words() {
    let cases = [
        (
            "deepseek",
            "high",
            json!({"thinking": {"type": "enabled"}, "reasoning_effort": "high"}),
        ),
        (
            "deepseek",
            "xhigh",
            json!({"thinking": {"type": "enabled"}, "reasoning_effort": "max"}),
        ),
        (
            "deepseek",
            "none",
            json!({"thinking": {"type": "disabled"}}),
        ),
        ("glm", "minimal", json!({"thinking": {"type": "disabled"}})),
        ("glm", "medium", json!({"thinking": {"type": "enabled"}})),
        ("qwen", "low", json!({"enable_thinking": true})),
        (
            "minimax",
            "none",
            json!({"thinking": {"type": "disabled"}, "reasoning_split": true}),
        ),
        ("openai", "medium", json!({"reasoning_effort": "medium"})),
    ];
    for (preset, effort, expected) in cases {
        let h = Harness::with_preset(preset).await;
        h.upstream.push(Reply::json(completion("ok", "stop")));
        let (status, body) = h
            .post_json(&json!({"model": "m", "input": "x", "reasoning": {"effort": effort}}))
            .await;
        assert_eq!(status, 200, "{body}");
        let sent = h.upstream.last_body();
        for (key, value) in expected.as_object().unwrap() {
            assert_eq!(&sent[key], value, "{preset} {effort}: {key}");
        }
        for key in ["thinking", "reasoning_effort", "enable_thinking"] {
            if expected.get(key).is_none() {
                assert!(
                    sent.get(key).is_none(),
                    "{preset} {effort}: unexpected {key}"
                );
            }
        }
    }
}
