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

/// POSTs `text` as written (a duplicate key cannot be built as a `Value`) to `path`.
async fn post_text(h: &Harness, path: &str, text: &str) -> (u16, Value) {
    let response = h
        .client
        .post(h.url(path))
        .header("content-type", "application/json")
        .body(text.to_owned())
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap())
}

/// Issue 44: a key repeated inside an input item was accepted (the last one won) while a
/// repeated top-level field was refused; a repeat at any depth is now refused, at its path.
#[tokio::test]
async fn a_key_repeated_at_any_depth_is_refused_at_its_path() {
    let h = Harness::with_preset("generic").await;
    let cases = [
        (
            r#"{"model":"m","input":[{"type":"message","role":"user","role":"assistant","content":"hi"}]}"#,
            "input[0].role",
        ),
        (
            r#"{"model":"m","input":[{"role":"user","content":"hi","role":"assistant"}]}"#,
            "input[0].role",
        ),
        (
            r#"{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"a","x":1,"x":2}]}]}"#,
            "input[0].content[0].x",
        ),
        (
            r#"{"model":"m","input":"hi","metadata":{"k":"a","k":"b"}}"#,
            "metadata.k",
        ),
        (
            r#"{"model":"m","input":"hi","tools":[{"type":"function","name":"f","parameters":{"type":"object","type":"string"}}]}"#,
            "tools[0].parameters.type",
        ),
        (r#"{"model":"m","input":"hi","extra":1,"extra":2}"#, "extra"),
    ];
    for (text, param) in cases {
        let (status, body) = post_text(&h, "/v1/responses", text).await;
        assert_eq!(status, 400, "{text} → {body}");
        assert_refused(&body, "invalid_json", param);
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains("duplicate"), "{message}");
    }
    assert!(h.upstream.requests().is_empty(), "nothing went upstream");
}

/// Issue 44: `metadata` was unbounded (10 000 keys were stored); past OpenAI's bounds (16 keys,
/// keys of 64 characters, values of 512) it is refused, naming `metadata` and the key, on
/// `/v1/responses` and on `/v1/conversations`.
#[tokio::test]
async fn metadata_past_openais_bounds_is_refused_naming_the_field() {
    let h = Harness::with_preset("generic").await;
    let many: serde_json::Map<String, Value> =
        (0..17).map(|i| (format!("k{i}"), json!("v"))).collect();
    let cases = [
        (json!(many), "metadata", "16 keys"),
        (json!({"k".repeat(65): "v"}), "metadata", "65 characters"),
        (
            json!({"note": "v".repeat(513)}),
            "metadata.note",
            "513 characters",
        ),
    ];
    for (metadata, param, says) in cases {
        let request = json!({"model": "m", "input": "hi", "metadata": metadata});
        let (status, body) = h.post_json(&request).await;
        assert_eq!(status, 400, "{body}");
        assert_refused(&body, "invalid_value", param);
        let message = body["error"]["message"].as_str().unwrap();
        assert!(
            message.contains(says) && message.contains("metadata"),
            "{message}"
        );

        let (status, body) = h
            .post_path_json("/v1/conversations", &json!({"metadata": metadata}))
            .await;
        assert_eq!(status, 400, "{body}");
        assert_refused(&body, "invalid_value", param);
    }
    assert!(h.upstream.requests().is_empty(), "nothing went upstream");

    // At the bounds, both pass.
    let most: serde_json::Map<String, Value> = (0..16)
        .map(|i| (format!("{i:0>64}"), json!("v".repeat(512))))
        .collect();
    h.upstream
        .push(Reply::json(toolbridge_testkit::chat::completion(
            "ok", "stop",
        )));
    let (status, body) = h
        .post_json(&json!({"model": "m", "input": "hi", "store": false, "metadata": most}))
        .await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = h
        .post_path_json("/v1/conversations", &json!({"metadata": most}))
        .await;
    assert_eq!(status, 200, "{body}");
}
