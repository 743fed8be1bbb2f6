//! Ring 2: the whole app in process against a fake Anthropic Messages upstream on 127.0.0.1:0
//! (`dialect = "anthropic"`), speaking Anthropic's real wire format: JSON answers, and SSE streams
//! with `event:` lines ending at `message_stop`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code fails loudly

mod common;

use common::Harness;
use serde_json::{Value, json};
use toolbridge_testkit::Reply;
use toolbridge_testkit::sse::types;

/// A gateway routing every model to one Anthropic provider with `max_retries`.
async fn harness(max_retries: u32) -> Harness {
    Harness::with_toml(|url| {
        format!(
            r#"
[providers.claude]
dialect = "anthropic"
base_url = "{url}"
api_key_env = "FAKE_UPSTREAM_KEY"
max_retries = {max_retries}

[[routes]]
model = "*"
provider = "claude"
upstream_model = "claude-test"
"#
        )
    })
    .await
}

fn message_start(input_tokens: u64) -> (&'static str, Value) {
    (
        "message_start",
        json!({"type": "message_start", "message": {
            "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test",
            "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": input_tokens, "output_tokens": 1}
        }}),
    )
}

fn message_end(stop_reason: &str, output_tokens: u64) -> Vec<(&'static str, Value)> {
    vec![
        (
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": null}, "usage": {"output_tokens": output_tokens}}),
        ),
        ("message_stop", json!({"type": "message_stop"})),
    ]
}

fn weather_tool() -> Value {
    json!([{
        "type": "function",
        "name": "get_weather",
        "description": "The weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    }])
}

#[tokio::test]
async fn streamed_text_goes_to_messages_and_comes_back_as_responses_events() {
    let h = harness(0).await;
    let mut events = vec![
        message_start(12),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ),
        ("ping", json!({"type": "ping"})),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hello"}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": " there."}}),
        ),
        (
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ),
    ];
    events.extend(message_end("end_turn", 5));
    h.upstream.push(Reply::sse_events(events));

    let events = h
        .post_stream(&json!({
            "model": "claude",
            "instructions": "Be brief.",
            "input": "Say hello",
            "stream": true,
        }))
        .await;
    assert_eq!(
        types(&events),
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.content_part.added",
            "response.output_text.delta",
            "response.output_text.delta",
            "response.output_text.done",
            "response.content_part.done",
            "response.output_item.done",
            "response.completed",
        ]
    );
    let last = &events.last().unwrap().data["response"];
    assert_eq!(last["status"], "completed");
    assert_eq!(last["output"][0]["content"][0]["text"], "Hello there.");
    assert_eq!(last["usage"]["input_tokens"], 12);
    assert_eq!(last["usage"]["output_tokens"], 5);
    assert_eq!(last["usage"]["total_tokens"], 17);

    let requests = h.upstream.requests();
    assert_eq!(requests.len(), 1);
    let req = &requests[0];
    assert_eq!(req.method, "POST");
    assert_eq!(req.path, "/v1/messages");
    assert_eq!(req.headers["x-api-key"], "sk-upstream-secret");
    assert_eq!(req.headers["anthropic-version"], "2023-06-01");
    assert!(
        req.headers.get("authorization").is_none(),
        "no Bearer key for Anthropic"
    );
    assert_eq!(
        req.body,
        json!({
            "model": "claude-test",
            // The gateway's cache breakpoints: the end of the system prompt, and the last
            // message (anthropic/cache.rs).
            "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
            "messages": [{"role": "user", "content": [
                {"type": "text", "text": "Say hello", "cache_control": {"type": "ephemeral"}}]}],
            "max_tokens": 8192,
            "stream": true,
        })
    );
}

#[tokio::test]
async fn a_whole_tool_use_answer_becomes_a_function_call() {
    let h = harness(0).await;
    h.upstream.push(Reply::json(json!({
        "id": "msg_2",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": [
            {"type": "text", "text": "Let me look."},
            {"type": "tool_use", "id": "toolu_01", "name": "get_weather", "input": {"city": "Paris"}}
        ],
        "stop_reason": "tool_use",
        "stop_sequence": null,
        "usage": {"input_tokens": 30, "output_tokens": 9}
    })));
    let (status, body) = h
        .post_json(
            &json!({"model": "claude", "input": "Weather in Paris?", "tools": weather_tool()}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    h.check_response(&body);
    let output = body["output"].as_array().unwrap();
    let call = output
        .iter()
        .find(|i| i["type"] == "function_call")
        .unwrap_or_else(|| panic!("no function_call in {body:#}"));
    assert_eq!(call["name"], "get_weather");
    assert_eq!(call["call_id"], "toolu_01");
    let arguments: Value = serde_json::from_str(call["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(arguments, json!({"city": "Paris"}));
    assert_eq!(body["usage"]["input_tokens"], 30);

    let sent = h.upstream.last_body();
    assert_eq!(sent["stream"], false);
    assert_eq!(sent["tools"][0]["name"], "get_weather");
    assert_eq!(
        sent["tools"][0]["input_schema"]["properties"]["city"]["type"],
        "string"
    );
}

#[tokio::test]
async fn a_streamed_tool_call_gathers_its_arguments_from_input_json_deltas() {
    let h = harness(0).await;
    let delta = |partial: &str| {
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": partial}}),
        )
    };
    let mut events = vec![
        message_start(40),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "toolu_02", "name": "get_weather", "input": {}}}),
        ),
        delta(""),
        delta("{\"ci"),
        delta("ty\": \"Par"),
        delta("is\"}"),
        (
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ),
    ];
    events.extend(message_end("tool_use", 14));
    h.upstream.push(Reply::sse_events(events));

    let events = h
        .post_stream(&json!({"model": "claude", "input": "Weather in Paris?", "stream": true, "tools": weather_tool()}))
        .await;
    let kinds = types(&events);
    assert!(
        kinds
            .iter()
            .any(|t| t == "response.function_call_arguments.delta"),
        "{kinds:?}"
    );
    let added = events
        .iter()
        .find(|e| e.data["type"] == "response.output_item.added")
        .unwrap();
    assert_eq!(added.data["item"]["type"], "function_call");
    let last = &events.last().unwrap().data["response"];
    assert_eq!(last["status"], "completed");
    let call = &last["output"][0];
    assert_eq!(call["type"], "function_call");
    assert_eq!(call["name"], "get_weather");
    assert_eq!(call["call_id"], "toolu_02");
    let arguments: Value = serde_json::from_str(call["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(arguments, json!({"city": "Paris"}));
    assert_eq!(last["usage"]["output_tokens"], 14);
}

/// A stream holding two attempts (a second `message_start` before the first `message_stop`,
/// seen after upstream retries) fails instead of restoring one call whose arguments are two
/// JSON prefixes glued together; unstreamed, the client gets a 502 before any byte.
#[tokio::test]
async fn a_second_message_start_mid_stream_fails_instead_of_merging_two_attempts() {
    let h = harness(0).await;
    let attempt = || {
        vec![
            message_start(40),
            (
                "content_block_start",
                json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "toolu_03", "name": "get_weather", "input": {}}}),
            ),
            (
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "{\"city\": \"Pa"}}),
            ),
        ]
    };
    let mut events = attempt();
    events.extend(attempt());
    events.extend(message_end("tool_use", 14));
    h.upstream.push(Reply::sse_events(events.clone()));
    let streamed = h
        .post_stream(&json!({"model": "claude", "input": "Weather?", "stream": true, "tools": weather_tool()}))
        .await;
    let last = &streamed.last().unwrap().data;
    assert_eq!(last["type"], "response.failed", "{last:#}");
    assert_eq!(
        last["response"]["error"]["toolbridge_code"],
        "upstream_invalid_response"
    );
    assert!(
        !last["response"]["output"]
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i["type"] == "function_call"),
        "{last:#}"
    );

    h.upstream.push(Reply::sse_events(events));
    let (status, body) = h
        .post_json(&json!({"model": "claude", "input": "Weather?", "tools": weather_tool()}))
        .await;
    assert_eq!(status, 502, "{body}");
    assert_eq!(body["error"]["type"], "server_error", "{body}");
}

fn overloaded() -> Reply {
    Reply::error(
        529,
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
    )
}

#[tokio::test]
async fn overloaded_529_is_retried_then_fails_with_an_openai_shaped_error() {
    let h = harness(1).await;
    h.upstream.push(overloaded());
    h.upstream.push(overloaded());
    let (status, body) = h
        .post_json(&json!({"model": "claude", "input": "hi"}))
        .await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error"]["code"], "upstream_overloaded");
    assert_eq!(body["error"]["type"], "server_error");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("529") && message.contains("Overloaded"),
        "{message}"
    );
    assert_eq!(h.upstream.requests().len(), 2, "one try and one retry");
}

#[tokio::test]
async fn overloaded_529_is_retried_and_the_retry_answers() {
    let h = harness(1).await;
    h.upstream.push(overloaded());
    h.upstream.push(Reply::json(json!({
        "id": "msg_3", "type": "message", "role": "assistant", "model": "claude-test",
        "content": [{"type": "text", "text": "Back."}],
        "stop_reason": "end_turn", "stop_sequence": null,
        "usage": {"input_tokens": 3, "output_tokens": 2}
    })));
    let (status, body) = h
        .post_json(&json!({"model": "claude", "input": "hi"}))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["output"][0]["content"][0]["text"], "Back.");
    assert_eq!(h.upstream.requests().len(), 2);
}

/// `/v1/responses/compact` on an Anthropic provider: the summary round goes out as a Messages
/// request (not streamed) and comes back as a sealed `compaction` item.
#[tokio::test]
async fn compact_on_an_anthropic_provider_summarises_through_messages() {
    let h = harness(0).await;
    h.upstream.push(Reply::json(json!({
        "id": "msg_c", "type": "message", "role": "assistant", "model": "claude-test",
        "content": [{"type": "text", "text": "The user asked about Oslo weather; it is cold."}],
        "stop_reason": "end_turn", "stop_sequence": null,
        "usage": {"input_tokens": 80, "output_tokens": 12}
    })));
    let (status, body) = h
        .post_path_json(
            "/v1/responses/compact",
            &json!({"model": "claude", "input": [
                {"role": "user", "content": "Weather in Oslo?"},
                {"role": "assistant", "content": "Cold, -3C."}
            ]}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let output = body["output"].as_array().unwrap();
    let compaction = output.last().unwrap();
    assert_eq!(compaction["type"], "compaction", "{body:#}");
    assert!(
        compaction["encrypted_content"]
            .as_str()
            .is_some_and(|c| !c.is_empty())
    );
    assert_eq!(body["usage"]["input_tokens"], 80);
    let requests = h.upstream.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].path, "/v1/messages");
    assert_eq!(requests[0].body["stream"], false);
    assert!(requests[0].body.to_string().contains("Cold, -3C."));
}

/// An `error` event after the answer started ends the stream with one `response.failed`, the
/// text so far not completed, a code OpenAI documents (the finer one beside it), and the
/// reasoning item completed before the failure kept in the failed response's output.
#[tokio::test]
async fn a_mid_stream_error_event_fails_the_response_once() {
    let h = harness(0).await;
    let events = vec![
        message_start(8),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": "", "signature": ""}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "Let me answer."}}),
        ),
        (
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "Part"}}),
        ),
        (
            "error",
            json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        ),
    ];
    h.upstream.push(Reply::sse_events(events));
    let events = h
        .post_stream(&json!({"model": "claude", "input": "Hi", "stream": true}))
        .await;
    let kinds = types(&events);
    let terminals: Vec<&String> = kinds
        .iter()
        .filter(|t| {
            matches!(
                t.as_str(),
                "response.completed" | "response.failed" | "response.incomplete"
            )
        })
        .collect();
    assert_eq!(terminals, ["response.failed"], "{kinds:?}");
    let last = &events.last().unwrap().data["response"];
    assert_eq!(last["status"], "failed");
    let message = last["error"]["message"].as_str().unwrap();
    assert!(message.contains("Overloaded"), "{last:#}");
    assert_eq!(last["error"]["code"], "server_error", "{last:#}");
    assert_eq!(last["error"]["toolbridge_code"], "upstream_overloaded");
    // What the client was shown stays: the reasoning, and the text so far as an incomplete
    // message (it was dropped, leaving only the reasoning).
    let output = last["output"].as_array().unwrap();
    assert_eq!(output.len(), 2, "{last:#}");
    assert_eq!(output[0]["type"], "reasoning");
    assert_eq!(output[1]["type"], "message");
    assert_eq!(output[1]["status"], "incomplete", "{last:#}");
    assert_eq!(output[1]["content"][0]["text"], "Part");
}

/// Streamed thinking comes back as a `reasoning` item before the message.
#[tokio::test]
async fn streamed_thinking_becomes_a_reasoning_item() {
    let h = harness(0).await;
    let mut events = vec![
        message_start(20),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": "", "signature": ""}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "Two plus two "}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "is four."}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "EqQBCgIYAhIM"}}),
        ),
        (
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "4"}}),
        ),
        (
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 1}),
        ),
    ];
    events.extend(message_end("end_turn", 12));
    h.upstream.push(Reply::sse_events(events));
    let events = h
        .post_stream(&json!({
            "model": "claude",
            "input": "2+2?",
            "stream": true,
            "reasoning": {"effort": "low"},
        }))
        .await;
    let last = &events.last().unwrap().data["response"];
    assert_eq!(last["status"], "completed", "{last:#}");
    let output = last["output"].as_array().unwrap();
    assert_eq!(output[0]["type"], "reasoning", "{last:#}");
    assert_eq!(
        output[0]
            .to_string()
            .matches("Two plus two is four.")
            .count(),
        1,
        "{:#}",
        output[0]
    );
    assert_eq!(output[1]["type"], "message");
    assert_eq!(output[1]["content"][0]["text"], "4");
    // Effort asks Anthropic for a thinking budget.
    let sent = h.upstream.last_body();
    assert_eq!(sent["thinking"]["type"], "enabled", "{sent:#}");
    assert!(sent["thinking"]["budget_tokens"].as_u64().unwrap() >= 1024);
}

/// A second turn carrying the call and its output goes upstream as an assistant `tool_use` and a
/// user `tool_result` with the same id, in Anthropic's alternating roles.
#[tokio::test]
async fn a_tool_round_trip_goes_upstream_as_tool_use_and_tool_result() {
    let h = harness(0).await;
    h.upstream.push(Reply::json(json!({
        "id": "msg_3", "type": "message", "role": "assistant", "model": "claude-test",
        "content": [{"type": "text", "text": "Sunny in Paris."}],
        "stop_reason": "end_turn", "stop_sequence": null,
        "usage": {"input_tokens": 50, "output_tokens": 6}
    })));
    let (status, body) = h
        .post_json(&json!({
            "model": "claude",
            "tools": weather_tool(),
            "input": [
                {"role": "user", "content": "Weather in Paris?"},
                {"type": "function_call", "call_id": "toolu_9", "name": "get_weather", "arguments": "{\"city\":\"Paris\"}"},
                {"type": "function_call_output", "call_id": "toolu_9", "output": "sunny, 21C"},
            ],
        }))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["output"][0]["content"][0]["text"], "Sunny in Paris.");
    let sent = h.upstream.last_body();
    let messages = sent["messages"].as_array().unwrap();
    let roles: Vec<&str> = messages
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "assistant", "user"], "{sent:#}");
    let tool_use = &messages[1]["content"][0];
    assert_eq!(tool_use["type"], "tool_use");
    assert_eq!(tool_use["id"], "toolu_9");
    assert_eq!(tool_use["name"], "get_weather");
    assert_eq!(tool_use["input"], json!({"city": "Paris"}));
    let result = &messages[2]["content"][0];
    assert_eq!(result["type"], "tool_result");
    assert_eq!(result["tool_use_id"], "toolu_9");
    assert_eq!(
        result.to_string().matches("sunny, 21C").count(),
        1,
        "{result:#}"
    );
}

/// Thinking and its signature survive a stateless round trip: sealed into the reasoning item's
/// `encrypted_content` on the tool-call turn, and sent back on the next turn as the signed
/// `thinking` block Anthropic requires before the `tool_use` (only while thinking is on).
#[tokio::test]
async fn thinking_and_its_signature_are_sealed_and_replayed_before_the_tool_use() {
    let h = harness(0).await;
    let mut events = vec![
        message_start(20),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": "", "signature": ""}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "Need the weather tool."}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "SIG-abc123"}}),
        ),
        (
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "toolu_w", "name": "get_weather", "input": {}}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "{\"city\":\"Oslo\"}"}}),
        ),
        (
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 1}),
        ),
    ];
    events.extend(message_end("tool_use", 9));
    h.upstream.push(Reply::sse_events(events));
    let first = h
        .post_stream(&json!({
            "model": "claude",
            "input": "Weather in Oslo?",
            "stream": true,
            "tools": weather_tool(),
            "reasoning": {"effort": "low"},
            "include": ["reasoning.encrypted_content"],
        }))
        .await;
    let output = first.last().unwrap().data["response"]["output"].clone();
    let reasoning = output[0].clone();
    assert_eq!(reasoning["type"], "reasoning", "{output:#}");
    let blob = reasoning["encrypted_content"].as_str().unwrap();
    assert!(
        !blob.contains("SIG-abc123"),
        "the signature is sealed, not shown"
    );
    let call = output[1].clone();
    assert_eq!(call["call_id"], "toolu_w");

    let answer = || {
        Reply::json(json!({
            "id": "msg_5", "type": "message", "role": "assistant", "model": "claude-test",
            "content": [{"type": "text", "text": "Cold."}],
            "stop_reason": "end_turn", "stop_sequence": null,
            "usage": {"input_tokens": 60, "output_tokens": 2}
        }))
    };
    let second_turn = |effort: Option<&str>| {
        let mut body = json!({
            "model": "claude",
            "tools": weather_tool(),
            "input": [
                {"role": "user", "content": "Weather in Oslo?"},
                reasoning.clone(),
                call.clone(),
                {"type": "function_call_output", "call_id": "toolu_w", "output": "-3C"},
            ],
        });
        if let Some(effort) = effort {
            body["reasoning"] = json!({"effort": effort});
        }
        body
    };
    h.upstream.push(answer());
    let (status, body) = h.post_json(&second_turn(Some("low"))).await;
    assert_eq!(status, 200, "{body}");
    let sent = h.upstream.last_body();
    let assistant = &sent["messages"][1];
    assert_eq!(assistant["role"], "assistant", "{sent:#}");
    assert_eq!(
        assistant["content"][0],
        json!({"type": "thinking", "thinking": "Need the weather tool.", "signature": "SIG-abc123"}),
        "{sent:#}"
    );
    assert_eq!(assistant["content"][1]["type"], "tool_use");

    // With thinking off, no thinking block is sent.
    h.upstream.push(answer());
    let (status, body) = h.post_json(&second_turn(None)).await;
    assert_eq!(status, 200, "{body}");
    let sent = h.upstream.last_body();
    assert!(
        !sent.to_string().contains("\"thinking\""),
        "no thinking without thinking on: {sent:#}"
    );
}

/// `web_search` goes to Anthropic as its server tool (allowed domains and location carried),
/// and the searched answer's server blocks do not disturb the text that comes back.
#[tokio::test]
async fn web_search_becomes_anthropics_server_tool() {
    let h = harness(0).await;
    h.upstream.push(Reply::json(json!({
        "id": "msg_ws", "type": "message", "role": "assistant", "model": "claude-test",
        "content": [
            {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "rust 2024 edition"}},
            {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": [{"type": "web_search_result", "url": "https://doc.rust-lang.org/edition-guide/", "title": "Edition Guide", "encrypted_content": "Eo8B"}]},
            {"type": "text", "text": "Rust 2024 shipped in 1.85.", "citations": [{"type": "web_search_result_location", "url": "https://doc.rust-lang.org/edition-guide/", "title": "Edition Guide", "cited_text": "Rust 2024"}]}
        ],
        "stop_reason": "end_turn", "stop_sequence": null,
        "usage": {"input_tokens": 900, "output_tokens": 20, "server_tool_use": {"web_search_requests": 1}}
    })));
    let (status, body) = h
        .post_json(&json!({
            "model": "claude",
            "input": "When did Rust 2024 ship?",
            "tools": [{
                "type": "web_search",
                "filters": {"allowed_domains": ["rust-lang.org"]},
                "user_location": {"type": "approximate", "country": "NO", "city": "Oslo"}
            }],
        }))
        .await;
    assert_eq!(status, 200, "{body}");
    let text = body["output"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["type"] == "message")
        .unwrap()["content"][0]["text"]
        .clone();
    assert_eq!(text, "Rust 2024 shipped in 1.85.");
    // The search Anthropic ran shows as a completed web_search_call before the answer.
    let search = &body["output"][0];
    assert_eq!(search["type"], "web_search_call", "{body:#}");
    assert_eq!(search["status"], "completed");
    assert_eq!(search["action"]["query"], "rust 2024 edition");
    let sent = h.upstream.last_body();
    assert_eq!(
        sent["tools"],
        json!([{
            "type": "web_search_20250305",
            "name": "web_search",
            "max_uses": 5,
            "allowed_domains": ["rust-lang.org"],
            "user_location": {"type": "approximate", "country": "NO", "city": "Oslo"},
            // With no system prompt, the end of the tools carries the cache breakpoint.
            "cache_control": {"type": "ephemeral"}
        }]),
        "{sent:#}"
    );
}

/// A streamed server search: its query, streamed as `input_json_delta`s, becomes one
/// `web_search_call` item with its events, and nothing of it becomes a function call.
#[tokio::test]
async fn a_streamed_server_search_becomes_a_web_search_call() {
    let h = harness(0).await;
    let mut events = vec![
        message_start(30),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "server_tool_use", "id": "srvtoolu_2", "name": "web_search", "input": {}}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "{\"query\": \"oslo "}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "weather\"}"}}),
        ),
        (
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 1, "content_block": {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_2", "content": []}}),
        ),
        (
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 1}),
        ),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 2, "content_block": {"type": "text", "text": ""}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 2, "delta": {"type": "text_delta", "text": "Cold."}}),
        ),
        (
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 2}),
        ),
    ];
    events.extend(message_end("end_turn", 4));
    h.upstream.push(Reply::sse_events(events));
    let events = h
        .post_stream(&json!({"model": "claude", "input": "Oslo weather?", "stream": true, "tools": [{"type": "web_search"}]}))
        .await;
    let kinds = types(&events);
    assert!(
        kinds
            .iter()
            .any(|t| t == "response.web_search_call.completed"),
        "{kinds:?}"
    );
    assert!(
        !kinds
            .iter()
            .any(|t| t.starts_with("response.function_call")),
        "{kinds:?}"
    );
    let last = &events.last().unwrap().data["response"];
    assert_eq!(last["status"], "completed", "{last:#}");
    assert_eq!(last["output"][0]["type"], "web_search_call");
    assert_eq!(last["output"][0]["action"]["query"], "oslo weather");
    assert_eq!(last["output"][1]["content"][0]["text"], "Cold.");
}
