//! Ring 2: the whole app in process against a fake Chat Completions upstream on 127.0.0.1:0,
//! asserting the exact upstream request and what the client sees.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code fails loudly

mod common;

use common::Harness;
use serde_json::{Value, json};
use toolbridge_testkit::Reply;
use toolbridge_testkit::chat::{chunk, completion, text_stream, usage_chunk};
use toolbridge_testkit::sse::types;

#[tokio::test]
async fn sync_text_maps_request_and_fills_every_response_field() {
    let h = Harness::with_preset("generic").await;
    h.upstream
        .push(Reply::json(completion("Hello there.", "stop")));
    let (status, body) = h
        .post_json(&json!({
            "model": "gpt-test",
            "instructions": "Be brief.",
            "input": "Say hello",
            "temperature": 0.5,
            "top_p": 0.9,
            "max_output_tokens": 100,
            "metadata": {"ticket": "42"},
            "safety_identifier": "user-7",
        }))
        .await;
    assert_eq!(status, 200, "{body}");

    let sent = h.upstream.last_body();
    assert_eq!(
        sent,
        json!({
            "model": "gpt-test",
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Say hello"},
            ],
            "temperature": 0.5,
            "top_p": 0.9,
            "max_tokens": 100,
            "user": "user-7",
            "stream": false,
        })
    );
    let req = &h.upstream.requests()[0];
    assert_eq!(req.path, "/v1/chat/completions");
    assert_eq!(req.headers["authorization"], "Bearer sk-upstream-secret");

    h.check_response(&body);
    assert_eq!(body["object"], "response");
    assert_eq!(body["status"], "completed");
    assert!(body["id"].as_str().unwrap().starts_with("resp_"));
    assert!(body["created_at"].is_i64());
    assert!(body["completed_at"].is_i64());
    assert_eq!(body["model"], "gpt-test");
    assert_eq!(body["instructions"], "Be brief.");
    assert_eq!(body["metadata"], json!({"ticket": "42"}));
    assert_eq!(body["service_tier"], "default");
    assert_eq!(body["temperature"], 0.5);
    assert_eq!(body["store"], true, "stored by default, as OpenAI does");
    assert_eq!(body["text"], json!({"format": {"type": "text"}}));
    assert_eq!(body["output"][0]["type"], "message");
    assert_eq!(body["output"][0]["role"], "assistant");
    assert_eq!(body["output"][0]["status"], "completed");
    assert_eq!(
        body["output"][0]["content"],
        json!([{"type": "output_text", "text": "Hello there.", "annotations": [], "logprobs": []}])
    );
    assert_eq!(
        body["usage"],
        json!({
            "input_tokens": 11,
            "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
            "output_tokens": 7,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 18,
        })
    );
}

#[tokio::test]
async fn stream_emits_the_full_event_sequence_with_consistent_ids() {
    let h = Harness::with_preset("generic").await;
    h.upstream
        .push(Reply::sse(text_stream(&["Hel", "lo", " world"], "stop")));
    let events = h
        .post_stream(&json!({"model": "m", "input": "hi", "stream": true}))
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
            "response.output_text.delta",
            "response.output_text.done",
            "response.content_part.done",
            "response.output_item.done",
            "response.completed",
        ]
    );
    let sent = h.upstream.last_body();
    assert_eq!(sent["stream"], true);
    assert_eq!(sent["stream_options"], json!({"include_usage": true}));

    let response_id = events[0].data["response"]["id"].clone();
    assert_eq!(events[0].data["response"]["status"], "in_progress");
    let item_id = events[2].data["item"]["id"].clone();
    for e in &events[3..10] {
        if let Some(id) = e.data.get("item_id") {
            assert_eq!(id, &item_id);
        }
    }
    let deltas: String = events
        .iter()
        .filter(|e| e.data["type"] == "response.output_text.delta")
        .map(|e| e.data["delta"].as_str().unwrap())
        .collect();
    assert_eq!(deltas, "Hello world");
    assert_eq!(events[7].data["text"], "Hello world");
    let done = &events[10].data["response"];
    assert_eq!(done["id"], response_id);
    assert_eq!(done["status"], "completed");
    assert_eq!(done["output"][0]["id"], item_id);
    assert_eq!(done["output"][0]["content"][0]["text"], "Hello world");
    assert_eq!(done["usage"]["total_tokens"], 18);
    h.check_response(done);
}

#[tokio::test]
async fn developer_messages_become_one_system_message_for_glm() {
    let h = Harness::with_preset("glm").await;
    h.upstream.push(Reply::json(completion("ok", "stop")));
    let (status, body) = h
        .post_json(&json!({
            "model": "glm-5.1",
            "input": [
                {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "Rule one."}]},
                {"role": "developer", "content": "Rule two."},
                {"role": "user", "content": [{"type": "input_text", "text": "Context."}]},
                {"role": "user", "content": "Question?"},
                {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Earlier answer."}]},
                {"role": "user", "content": "Follow-up?"},
            ],
        }))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        h.upstream.last_body()["messages"],
        json!([
            {"role": "system", "content": "Rule one.\n\nRule two."},
            {"role": "user", "content": "Context."},
            {"role": "user", "content": "Question?"},
            {"role": "assistant", "content": "Earlier answer."},
            {"role": "user", "content": "Follow-up?"},
        ])
    );
    let codes: Vec<&str> = body["toolbridge_diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["code"].as_str().unwrap())
        .collect();
    assert_eq!(codes, ["developer_as_system", "system_messages_merged"]);
}

#[tokio::test]
async fn developer_role_is_kept_where_the_preset_accepts_it() {
    let h = Harness::with_preset("generic").await;
    h.upstream.push(Reply::json(completion("ok", "stop")));
    let (status, _) = h
        .post_json(&json!({
            "model": "m",
            "input": [
                {"role": "developer", "content": "Rule."},
                {"role": "system", "content": "Sys."},
                {"role": "user", "content": "Q"},
            ],
        }))
        .await;
    assert_eq!(status, 200);
    assert_eq!(
        h.upstream.last_body()["messages"],
        json!([
            {"role": "developer", "content": "Rule."},
            {"role": "system", "content": "Sys."},
            {"role": "user", "content": "Q"},
        ])
    );
}

#[tokio::test]
async fn parameters_follow_the_preset_and_every_change_is_reported() {
    let h = Harness::with_preset("minimax").await;
    h.upstream.push(Reply::json(completion("ok", "stop")));
    let response = h
        .post(&json!({
            "model": "MiniMax-M3",
            "input": "hi",
            "temperature": 1.7,
            "max_output_tokens": 64,
            "presence_penalty": 0.5,
            "stop": ["END"],
            "prompt_cache_key": "thread-1",
        }))
        .await;
    assert_eq!(response.status(), 200);
    let header = response.headers()["x-toolbridge-diagnostics"]
        .to_str()
        .unwrap()
        .to_owned();
    let body: Value = response.json().await.unwrap();
    let sent = h.upstream.last_body();
    assert_eq!(sent["temperature"], 1.0);
    assert_eq!(sent["max_completion_tokens"], 64);
    assert!(sent.get("max_tokens").is_none());
    assert!(sent.get("presence_penalty").is_none());
    assert!(sent.get("prompt_cache_key").is_none());
    assert_eq!(sent["stop"], json!(["END"]));
    assert_eq!(
        header,
        "param_clamped:temperature,param_dropped:presence_penalty,param_dropped:prompt_cache_key"
    );
    assert_eq!(body["toolbridge_diagnostics"].as_array().unwrap().len(), 3);
    // The response echoes what the client asked for.
    assert_eq!(body["temperature"], 1.7);
}

#[tokio::test]
async fn json_schema_goes_upstream_natively_in_chat_shape() {
    let h = Harness::with_preset("generic").await;
    h.upstream
        .push(Reply::json(completion(r#"{"city":"Paris"}"#, "stop")));
    let schema = json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"], "additionalProperties": false});
    let (status, body) = h
        .post_json(&json!({
            "model": "m",
            "input": "capital of France as JSON",
            "text": {"format": {"type": "json_schema", "name": "capital", "schema": schema, "strict": true}},
        }))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        h.upstream.last_body()["response_format"],
        json!({"type": "json_schema", "json_schema": {"name": "capital", "schema": schema, "strict": true}})
    );
    assert_eq!(body["status"], "completed");
    assert_eq!(body["text"]["format"]["type"], "json_schema");
    // Echoed as sent (it was `null`, which the Python SDK's strict parsing refuses).
    assert_eq!(body["text"]["format"]["schema"], schema);
    h.check_response(&body);
}

#[tokio::test]
async fn json_schema_degrades_to_json_mode_and_strict_output_is_validated() {
    let h = Harness::with_preset("deepseek").await;
    let schema =
        json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]});
    let request = json!({
        "model": "deepseek-v4-flash",
        "input": "give me a number",
        "text": {"format": {"type": "json_schema", "name": "num", "schema": schema, "strict": true}},
    });

    h.upstream
        .push(Reply::json(completion(r#"{"n": 4}"#, "stop")));
    let (status, body) = h.post_json(&request).await;
    assert_eq!(status, 200);
    assert_eq!(body["status"], "completed", "{body}");
    let sent = h.upstream.last_body();
    assert_eq!(sent["response_format"], json!({"type": "json_object"}));
    let system = sent["messages"][0]["content"].as_str().unwrap();
    assert_eq!(sent["messages"][0]["role"], "system");
    assert!(system.contains("JSON Schema (num)"), "{system}");
    assert!(system.contains(r#""required":["n"]"#), "{system}");
    assert_eq!(
        body["toolbridge_diagnostics"][0]["code"],
        "output_contract_degraded"
    );

    // A non-conforming answer fails visibly, with the output still there to inspect.
    h.upstream
        .push(Reply::json(completion(r#"{"n": "four"}"#, "stop")));
    let (status, body) = h.post_json(&request).await;
    assert_eq!(status, 200);
    assert_eq!(body["status"], "failed");
    assert_eq!(body["error"]["code"], "server_error");
    assert_eq!(body["error"]["toolbridge_code"], "output_validation_failed");
    assert!(
        body["error"]["message"].as_str().unwrap().contains("/n"),
        "{body}"
    );
    assert_eq!(body["output"][0]["content"][0]["text"], r#"{"n": "four"}"#);
    h.check_response(&body);
}

#[tokio::test]
async fn a_tool_call_only_turn_is_not_validated_against_the_schema() {
    let h = Harness::with_preset("deepseek").await;
    h.upstream.push(Reply::json(json!({
        "id": "x", "object": "chat.completion", "model": "m",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": null,
            "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": "{\"q\":\"x\"}"}}]
        }}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
    })));
    let (status, body) = h
        .post_json(&json!({
            "model": "m",
            "input": "look it up",
            "tools": [{"type": "function", "name": "lookup", "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}],
            "text": {"format": {"type": "json_schema", "name": "x", "schema": {"type": "object", "required": ["answer"]}, "strict": true}},
        }))
        .await;
    assert_eq!(status, 200);
    assert_eq!(body["status"], "completed", "{body}");
    assert_eq!(body["output"][0]["type"], "function_call");
    assert_eq!(body["output"][0]["call_id"], "call_1");
    assert_eq!(body["output"][0]["arguments"], "{\"q\":\"x\"}");
    h.check_response(&body);
}

#[tokio::test]
async fn json_object_on_deepseek_mentions_json_when_the_prompt_does_not() {
    let h = Harness::with_preset("deepseek").await;
    h.upstream.push(Reply::json(completion("{}", "stop")));
    let (status, _) = h
        .post_json(&json!({"model": "m", "input": "list three colours", "text": {"format": {"type": "json_object"}}}))
        .await;
    assert_eq!(status, 200);
    let sent = h.upstream.last_body();
    assert_eq!(sent["response_format"], json!({"type": "json_object"}));
    assert_eq!(
        sent["messages"][0],
        json!({"role": "system", "content": "Respond with a JSON object."})
    );
}

#[tokio::test]
async fn length_and_content_filter_end_as_incomplete() {
    let h = Harness::with_preset("glm").await;
    h.upstream
        .push(Reply::json(completion("partial", "length")));
    let (_, body) = h.post_json(&json!({"model": "m", "input": "long"})).await;
    assert_eq!(body["status"], "incomplete");
    assert_eq!(
        body["incomplete_details"],
        json!({"reason": "max_output_tokens"})
    );
    assert_eq!(body["completed_at"], Value::Null);
    h.check_response(&body);

    h.upstream.push(Reply::sse(vec![
        chunk(json!({"content": "some"}), None),
        chunk(json!({}), Some("sensitive")),
    ]));
    let events = h
        .post_stream(&json!({"model": "m", "input": "x", "stream": true}))
        .await;
    let last = &events.last().unwrap().data;
    assert_eq!(last["type"], "response.incomplete");
    assert_eq!(
        last["response"]["incomplete_details"]["reason"],
        "content_filter"
    );
}

#[tokio::test]
async fn stream_without_done_marker_still_completes() {
    let h = Harness::with_preset("ollama").await;
    h.upstream.push(Reply::sse_raw(vec![
        format!("data: {}\n\n", chunk(json!({"content": "fine"}), None)),
        format!("data: {}\n\n", chunk(json!({}), Some("stop"))),
    ]));
    let events = h
        .post_stream(&json!({"model": "m", "input": "x", "stream": true}))
        .await;
    let last = &events.last().unwrap().data;
    assert_eq!(last["type"], "response.completed");
    assert_eq!(last["response"]["output"][0]["content"][0]["text"], "fine");
    // No usage from the upstream: an o200k estimate, said to be one.
    let usage = &last["response"]["usage"];
    assert_eq!(usage["output_tokens"], 1, "\"fine\" is one token");
    assert!(usage["input_tokens"].as_u64().unwrap() > 0);
    assert!(
        last["response"]["toolbridge_diagnostics"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d["code"] == "usage_estimated")
    );
}

/// Issue 15: a Chat answer with neither a finish reason nor `[DONE]` was cut off: it ends
/// `incomplete` (`upstream_truncated`), streamed and whole, the text kept. A provider known to end
/// every answer that way opts out in its profile and completes, with the diagnostic either way.
#[tokio::test]
async fn a_cut_answer_ends_incomplete_unless_the_profile_tolerates_it() {
    for (tolerate, status) in [(false, "incomplete"), (true, "completed")] {
        let h = Harness::with_toml(|url| {
            format!(
                r#"
[providers.up]
base_url = "{url}"
api_key_env = "FAKE_UPSTREAM_KEY"
preset = "ollama"

[providers.up.profile]
tolerate_unterminated = {tolerate}

[[routes]]
model = "*"
provider = "up"
"#
            )
        })
        .await;
        h.upstream.push(Reply::sse_raw(vec![format!(
            "data: {}\n\n",
            chunk(json!({"content": "half"}), None)
        )]));
        let events = h
            .post_stream(&json!({"model": "m", "input": "x", "stream": true}))
            .await;
        let last = &events.last().unwrap().data;
        assert_eq!(last["type"], format!("response.{status}"), "{last}");
        let mut whole = completion("half", "stop");
        whole["choices"][0]["finish_reason"] = Value::Null;
        h.upstream.push(Reply::json(whole));
        let body: Value = h
            .post(&json!({"model": "m", "input": "x"}))
            .await
            .json()
            .await
            .unwrap();
        for response in [&last["response"], &body] {
            assert_eq!(response["status"], status, "{response}");
            assert_eq!(response["output"][0]["content"][0]["text"], "half");
            let reason = (!tolerate).then_some("upstream_truncated");
            assert_eq!(
                response["incomplete_details"]["reason"].as_str(),
                reason,
                "{response}"
            );
            assert!(
                response["toolbridge_diagnostics"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|d| d["code"] == "upstream_unterminated"),
                "{response}"
            );
        }
    }
}

#[tokio::test]
async fn an_empty_stream_fails_with_a_specific_code() {
    let h = Harness::with_preset("generic").await;
    h.upstream
        .push(Reply::sse_raw(vec!["data: [DONE]\n\n".to_owned()]));
    let events = h
        .post_stream(&json!({"model": "m", "input": "x", "stream": true}))
        .await;
    assert_eq!(
        types(&events),
        [
            "response.created",
            "response.in_progress",
            "response.failed"
        ]
    );
    assert_eq!(events[2].data["response"]["error"]["code"], "server_error");
    assert_eq!(
        events[2].data["response"]["error"]["toolbridge_code"],
        "empty_upstream_response"
    );
}

#[tokio::test]
async fn an_error_inside_the_stream_becomes_response_failed_keeping_the_text_shown() {
    let h = Harness::with_preset("generic").await;
    h.upstream.push(Reply::sse_raw(vec![
        format!("data: {}\n\n", chunk(json!({"content": "half"}), None)),
        "data: {\"error\":{\"message\":\"overloaded\",\"type\":\"server_error\"}}\n\n".to_owned(),
    ]));
    let events = h
        .post_stream(&json!({"model": "m", "input": "x", "stream": true}))
        .await;
    // The text the client was shown ends as an incomplete message, never a completed one (it
    // was dropped, and the failed response's output was empty).
    let done: Vec<&Value> = events
        .iter()
        .filter(|e| e.data["type"] == "response.output_item.done")
        .map(|e| &e.data["item"])
        .collect();
    assert_eq!(done.len(), 1, "{done:?}");
    assert_eq!(done[0]["status"], "incomplete");
    let last = &events.last().unwrap().data;
    assert_eq!(last["type"], "response.failed");
    assert_eq!(last["response"]["output"][0]["status"], "incomplete");
    assert_eq!(last["response"]["output"][0]["content"][0]["text"], "half");
    assert_eq!(last["response"]["error"]["code"], "server_error");
    assert!(
        last["response"]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("overloaded")
    );
}

/// A stream whose connection breaks after some text: the failed response keeps the text the
/// client was shown, in the terminal event and in the store (both had `output: []`).
#[tokio::test]
async fn a_stream_cut_mid_text_keeps_the_text_in_the_failed_and_stored_response() {
    let h = Harness::with_preset("generic").await;
    h.upstream.push(Reply::StreamThenReset {
        pieces: std::iter::once(json!({"role": "assistant", "content": "Once "}))
            .chain((0..30).map(|_| json!({"content": "upon "})))
            .map(|delta| format!("data: {}\n\n", chunk(delta, None)))
            .collect(),
    });
    let events = h
        .post_stream(&json!({"model": "m", "input": "A story.", "stream": true, "store": true}))
        .await;
    let last = &events.last().unwrap().data;
    assert_eq!(last["type"], "response.failed", "{last:#}");
    let output = &last["response"]["output"];
    assert_eq!(output[0]["status"], "incomplete", "{last:#}");
    // A reset may discard pieces the gateway had not read yet: what counts is that the text
    // kept is exactly the text the client was shown.
    let shown: String = events
        .iter()
        .filter(|e| e.data["type"] == "response.output_text.delta")
        .filter_map(|e| e.data["delta"].as_str())
        .collect();
    assert!(shown.starts_with("Once upon "), "{shown}");
    assert_eq!(output[0]["content"][0]["text"], shown.as_str());
    let id = last["response"]["id"].as_str().unwrap();
    let stored: Value = h
        .client
        .get(h.url(&format!("/v1/responses/{id}")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(stored["status"], "failed", "{stored:#}");
    assert_eq!(stored["output"], *output, "{stored:#}");
}

#[tokio::test]
async fn malformed_chunks_are_skipped_with_a_diagnostic() {
    let h = Harness::with_preset("vllm").await;
    h.upstream.push(Reply::sse_raw(vec![
        "data: {not json\n\n".to_owned(),
        format!(
            "data: {}\n\n",
            chunk(json!({"content": "ok"}), Some("stop"))
        ),
        format!("data: {}\n\n", usage_chunk(1, 1)),
        "data: [DONE]\n\n".to_owned(),
    ]));
    let events = h
        .post_stream(&json!({"model": "m", "input": "x", "stream": true}))
        .await;
    let last = &events.last().unwrap().data;
    assert_eq!(last["type"], "response.completed");
    assert_eq!(
        last["response"]["toolbridge_diagnostics"][0]["code"],
        "upstream_chunk_skipped"
    );
}

#[tokio::test]
async fn streamed_tool_calls_are_restored_as_function_call_items() {
    let h = Harness::with_preset("generic").await;
    h.upstream.push(Reply::sse(vec![
        chunk(json!({"role": "assistant", "content": null, "tool_calls": [{"index": 0, "id": "call_a", "type": "function", "function": {"name": "get_weather", "arguments": ""}}]}), None),
        chunk(json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"city\":"}}]}), None),
        chunk(json!({"tool_calls": [{"index": 0, "function": {"arguments": "\"Paris\"}"}}]}), None),
        chunk(json!({}), Some("tool_calls")),
    ]));
    let events = h
        .post_stream(&json!({
            "model": "m", "input": "weather?", "stream": true,
            "tools": [{"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}],
        }))
        .await;
    // With repair on (the default) a call's arguments are held until the upstream finished,
    // then sent checked, in one delta.
    assert_eq!(
        types(&events),
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.function_call_arguments.delta",
            "response.function_call_arguments.done",
            "response.output_item.done",
            "response.completed",
        ]
    );
    let done = &events[5].data["item"];
    assert_eq!(done["type"], "function_call");
    assert_eq!(done["call_id"], "call_a");
    assert_eq!(done["name"], "get_weather");
    assert_eq!(done["arguments"], "{\"city\":\"Paris\"}");
    assert_eq!(done["status"], "completed");
    assert_eq!(
        h.upstream.last_body()["tools"],
        json!([{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}])
    );
}

#[tokio::test]
async fn tool_history_becomes_assistant_tool_calls_and_tool_messages() {
    let h = Harness::with_preset("deepseek").await;
    h.upstream
        .push(Reply::json(completion("It is sunny.", "stop")));
    let (status, body) = h
        .post_json(&json!({
            "model": "m",
            "input": [
                {"role": "user", "content": "weather in Paris and Rome?"},
                {"type": "reasoning", "id": "rs_1", "summary": [], "content": [{"type": "reasoning_text", "text": "Need two calls."}]},
                {"type": "function_call", "id": "fc_1", "call_id": "c1", "name": "get_weather", "arguments": "{\"city\":\"Paris\"}"},
                {"type": "function_call", "id": "fc_2", "call_id": "c2", "name": "get_weather", "arguments": "{\"city\":\"Rome\"}"},
                {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
                {"type": "function_call_output", "call_id": "c2", "output": [{"type": "input_text", "text": "cloudy"}]},
            ],
        }))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        h.upstream.last_body()["messages"],
        json!([
            {"role": "user", "content": "weather in Paris and Rome?"},
            {"role": "assistant", "content": null, "reasoning_content": "Need two calls.", "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}},
                {"id": "c2", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Rome\"}"}},
            ]},
            {"role": "tool", "content": "sunny", "tool_call_id": "c1"},
            {"role": "tool", "content": "cloudy", "tool_call_id": "c2"},
        ])
    );
}
