//! Ring 2: hostile and odd input through the real `/v1/responses` route (issue 15): each is a
//! 400 with OpenAI's error body naming the leaf field in `param`, a stable `code` and a message
//! without Rust type names, and nothing reaches the upstream. Unknown types still pass.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code fails loudly

mod common;

use common::Harness;
use serde_json::{Value, json};
use toolbridge_testkit::Reply;

/// Words of Rust, not of JSON, that must never reach a client.
const RUST_WORDS: &[&str] = &[
    "Vec",
    "String",
    "enum",
    "struct",
    "InputItem",
    "serde",
    "u64",
    "f64",
    "untagged",
    "sequence",
];

fn assert_refused(body: &Value, code: &str, param: &str) {
    let error = &body["error"];
    assert_eq!(error["type"], "invalid_request_error", "{body}");
    assert_eq!(error["code"], code, "{body}");
    assert_eq!(error["param"], param, "{body}");
    let message = error["message"].as_str().unwrap();
    assert!(!message.is_empty());
    for word in RUST_WORDS {
        assert!(
            !message.contains(word),
            "`{word}` in the message: {message}"
        );
    }
}

fn function(name: &str, parameters: Value) -> Value {
    json!({"type": "function", "name": name, "parameters": parameters})
}

fn good() -> Value {
    json!({"type": "object", "properties": {"city": {"type": "string"}}})
}

#[tokio::test]
async fn a_tool_whose_parameters_is_not_an_object_schema_never_reaches_the_upstream() {
    let h = Harness::with_preset("generic").await;
    let namespace = |parameters: Value| json!({"type": "namespace", "name": "ns", "description": "d", "tools": [function("inner", parameters)]});
    let cases = [
        (
            vec![
                function("a", good()),
                function("b", json!("{\"type\": \"object\"}")),
            ],
            "tools[1].parameters",
        ),
        (
            vec![
                function("a", good()),
                function("b", json!({"type": "string"})),
            ],
            "tools[1].parameters",
        ),
        (
            vec![function(
                "a",
                json!({"type": "object", "properties": {"x": {"type": "strng"}}}),
            )],
            "tools[0].parameters",
        ),
        (
            vec![
                function("a", good()),
                json!({"type": "web_search"}),
                namespace(json!([1])),
            ],
            "tools[2].tools[0].parameters",
        ),
    ];
    for (tools, param) in cases {
        let request = json!({"model": "m", "input": "hi", "tools": tools, "store": false});
        let (status, body) = h.post_json(&request).await;
        assert_eq!(status, 400, "{request} → {body}");
        assert_refused(&body, "invalid_function_parameters", param);
    }
    assert!(h.upstream.requests().is_empty(), "nothing went upstream");

    // The same tools with object schemas go through.
    h.upstream
        .push(Reply::json(toolbridge_testkit::chat::completion(
            "ok", "stop",
        )));
    let tools = json!([
        function("a", good()),
        function("b", json!({})),
        namespace(good())
    ]);
    let (status, body) = h
        .post_json(&json!({"model": "m", "input": "hi", "tools": tools, "store": false}))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(h.upstream.requests().len(), 1);
}

#[tokio::test]
async fn a_wrong_type_deep_inside_an_item_names_the_leaf_field() {
    let h = Harness::with_preset("generic").await;
    let user =
        |content: Value| json!({"model": "m", "input": [{"role": "user", "content": content}]});
    let text = |t: &str| json!({"type": "input_text", "text": t});
    let cases = [
        (
            user(json!([text("a"), text("b"), {"type": 5, "text": "c"}])),
            "input[0].content[2].type",
        ),
        (
            user(json!([text("a"), {"type": "input_text", "text": ["b"]}])),
            "input[0].content[1].text",
        ),
        (
            user(json!([{"text": "a part without a type"}])),
            "input[0].content[0].type",
        ),
        (
            user(json!([{"type": "input_image", "image_url": {"url": "https://x.invalid/a.png"}}])),
            "input[0].content[0].image_url",
        ),
        (user(json!(42)), "input[0].content"),
        (
            json!({"model": "m", "input": [
                {"role": "user", "content": "a"},
                {"role": "assistant", "content": [{"type": "output_text", "text": "b", "annotations": "none"}]},
            ]}),
            "input[1].content[0].annotations",
        ),
        (
            json!({"model": "m", "input": [
                {"role": "user", "content": "a"},
                {"type": "function_call", "call_id": 7, "name": "x", "arguments": "{}"},
            ]}),
            "input[1].call_id",
        ),
        (
            json!({"model": "m", "input": "x", "tools": [function("a", good()), {"type": "function", "name": false}]}),
            "tools[1].name",
        ),
        (
            json!({"model": "m", "input": "x", "max_output_tokens": "lots"}),
            "max_output_tokens",
        ),
        (
            json!({"model": "m", "input": "x", "stop": {"a": 1}}),
            "stop",
        ),
    ];
    for (request, param) in cases {
        let (status, body) = h.post_json(&request).await;
        assert_eq!(status, 400, "{request} → {body}");
        assert_refused(&body, "invalid_json", param);
    }
    assert!(h.upstream.requests().is_empty(), "nothing went upstream");
}

#[tokio::test]
async fn unknown_item_types_and_fields_still_pass() {
    let h = Harness::with_preset("generic").await;
    h.upstream
        .push(Reply::json(toolbridge_testkit::chat::completion(
            "ok", "stop",
        )));
    let request = json!({
        "model": "m",
        "input": [
            {"type": "item_from_the_future", "payload": {"x": [1]}},
            {"role": "user", "content": [{"type": "input_text", "text": "hi", "new_field": 1}]},
        ],
        "option_from_the_future": true,
        "store": false,
    });
    let (status, body) = h.post_json(&request).await;
    assert_eq!(status, 200, "{body}");
}

#[tokio::test]
async fn a_conversation_item_with_a_wrong_type_deep_inside_names_the_leaf_field() {
    let h = Harness::with_preset("generic").await;
    let items = json!([
        {"type": "message", "role": "user", "content": "a"},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "b"}, {"type": ["input_text"]}]},
    ]);
    let response = h
        .client
        .post(h.url("/v1/conversations"))
        .json(&json!({"items": items}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 400);
    let body: Value = response.json().await.unwrap();
    assert_refused(&body, "invalid_json", "items[1].content[1].type");
}
