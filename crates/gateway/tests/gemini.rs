//! Ring 2: the whole app in process against a fake Gemini upstream on 127.0.0.1:0
//! (`dialect = "gemini"`), speaking Gemini's real wire format: the model and the streaming mode in
//! the URL, `x-goog-api-key`, JSON answers, and SSE streams of whole `GenerateContentResponse`
//! chunks with no end marker (the stream ends with the connection).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code fails loudly

mod common;

use common::Harness;
use serde_json::{Value, json};
use toolbridge_testkit::Reply;
use toolbridge_testkit::sse::types;

/// A gateway routing every model to one Gemini provider with `max_retries`.
async fn harness(max_retries: u32) -> Harness {
    Harness::with_toml(|url| {
        format!(
            r#"
[providers.gemini]
dialect = "gemini"
base_url = "{url}"
api_key_env = "FAKE_UPSTREAM_KEY"
max_retries = {max_retries}

[[routes]]
model = "*"
provider = "gemini"
upstream_model = "gemini-2.5-flash"
"#
        )
    })
    .await
}

/// A Gemini SSE stream: one `data:` line per chunk, no `[DONE]`.
fn gemini_stream(chunks: Vec<Value>) -> Reply {
    Reply::sse_raw(chunks.iter().map(|c| format!("data: {c}\n\n")).collect())
}

fn text_chunk(text: &str) -> Value {
    json!({
        "candidates": [{"content": {"role": "model", "parts": [{"text": text}]}, "index": 0}],
        "modelVersion": "gemini-2.5-flash"
    })
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
async fn streamed_text_goes_to_stream_generate_content_and_comes_back_as_responses_events() {
    let h = harness(0).await;
    h.upstream.push(gemini_stream(vec![
        text_chunk("Hello"),
        text_chunk(" there"),
        json!({
            "candidates": [{"content": {"role": "model", "parts": [{"text": "."}]}, "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": 12, "candidatesTokenCount": 5, "totalTokenCount": 17},
            "modelVersion": "gemini-2.5-flash"
        }),
    ]));

    let events = h
        .post_stream(&json!({
            "model": "gemini",
            "instructions": "Be brief.",
            "input": "Say hello",
            "stream": true,
            "max_output_tokens": 100,
            "temperature": 0.5,
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
    let target = format!("{}?{}", req.path, req.query.as_deref().unwrap_or_default());
    assert_eq!(
        target,
        "/v1/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    );
    assert_eq!(req.headers["x-goog-api-key"], "sk-upstream-secret");
    assert!(
        req.headers.get("authorization").is_none(),
        "no Bearer key for Gemini"
    );
    // No `model` and no `stream`: both are in the URL.
    assert_eq!(
        req.body,
        json!({
            "contents": [{"role": "user", "parts": [{"text": "Say hello"}]}],
            "systemInstruction": {"parts": [{"text": "Be brief."}]},
            "generationConfig": {"temperature": 0.5, "maxOutputTokens": 100},
        })
    );
}

#[tokio::test]
async fn a_whole_function_call_answer_becomes_a_function_call() {
    let h = harness(0).await;
    h.upstream.push(Reply::json(json!({
        "candidates": [{
            "content": {"role": "model", "parts": [
                {"text": "Let me look."},
                {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}}
            ]},
            "finishReason": "STOP",
            "index": 0
        }],
        "usageMetadata": {"promptTokenCount": 30, "candidatesTokenCount": 9, "totalTokenCount": 39},
        "modelVersion": "gemini-2.5-flash"
    })));
    let (status, body) = h
        .post_json(
            &json!({"model": "gemini", "input": "Weather in Paris?", "tools": weather_tool()}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    h.check_response(&body);
    assert_eq!(body["status"], "completed");
    let output = body["output"].as_array().unwrap();
    let call = output
        .iter()
        .find(|i| i["type"] == "function_call")
        .unwrap_or_else(|| panic!("no function_call in {body:#}"));
    assert_eq!(call["name"], "get_weather");
    assert!(!call["call_id"].as_str().unwrap().is_empty());
    let arguments: Value = serde_json::from_str(call["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(arguments, json!({"city": "Paris"}));
    assert_eq!(body["usage"]["input_tokens"], 30);

    let requests = h.upstream.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(
        requests[0].path,
        "/v1/models/gemini-2.5-flash:generateContent"
    );
    assert_eq!(requests[0].query, None);
    let sent = &requests[0].body;
    assert_eq!(
        sent["tools"][0]["functionDeclarations"][0]["name"],
        "get_weather"
    );
}

#[tokio::test]
async fn a_streamed_function_call_and_its_usage_are_mapped() {
    let h = harness(0).await;
    h.upstream.push(gemini_stream(vec![
        json!({
            "candidates": [{"content": {"role": "model", "parts": [
                {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}}
            ]}, "index": 0}],
            "usageMetadata": {"promptTokenCount": 40, "candidatesTokenCount": 3, "totalTokenCount": 43}
        }),
        json!({
            "candidates": [{"content": {"role": "model", "parts": []}, "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": 40, "candidatesTokenCount": 14, "thoughtsTokenCount": 6, "totalTokenCount": 60}
        }),
    ]));

    let events = h
        .post_stream(&json!({"model": "gemini", "input": "Weather in Paris?", "stream": true, "tools": weather_tool()}))
        .await;
    let added = events
        .iter()
        .find(|e| e.data["type"] == "response.output_item.added")
        .unwrap();
    assert_eq!(added.data["item"]["type"], "function_call");
    let last = &events.last().unwrap().data["response"];
    assert_eq!(last["status"], "completed", "{last:#}");
    let call = &last["output"][0];
    assert_eq!(call["type"], "function_call");
    assert_eq!(call["name"], "get_weather");
    let arguments: Value = serde_json::from_str(call["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(arguments, json!({"city": "Paris"}));
    assert_eq!(last["usage"]["input_tokens"], 40);
    assert_eq!(last["usage"]["output_tokens"], 20);
    assert_eq!(
        last["usage"]["output_tokens_details"]["reasoning_tokens"],
        6
    );
    assert_eq!(last["usage"]["total_tokens"], 60);
}

/// The connection closing is the end of a Gemini stream; without any finish reason it follows the
/// rule of every dialect for a cut answer (issue 15; it completed before): the text is kept and
/// the response ends `incomplete` as `upstream_truncated`.
#[tokio::test]
async fn a_stream_ending_without_a_finish_reason_keeps_its_text() {
    let h = harness(0).await;
    h.upstream
        .push(gemini_stream(vec![text_chunk("Cut"), text_chunk(" short")]));
    let events = h
        .post_stream(&json!({"model": "gemini", "input": "hi", "stream": true}))
        .await;
    let last = &events.last().unwrap().data["response"];
    assert_eq!(events.last().unwrap().data["type"], "response.incomplete");
    assert_eq!(last["incomplete_details"]["reason"], "upstream_truncated");
    assert_eq!(last["output"][0]["content"][0]["text"], "Cut short");
    // Issue 18: usage is never silently null; with no `usageMetadata` it is an estimate, said
    // to be one, as in every other dialect.
    assert_eq!(
        last["usage"]["output_tokens"], 2,
        "\"Cut short\" is two tokens"
    );
    assert!(
        last["usage"]["input_tokens"].as_u64().unwrap() > 0,
        "{last}"
    );
    assert!(
        last["toolbridge_diagnostics"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d["code"] == "usage_estimated"),
        "{last}"
    );
}

/// Issue 18: a whole Gemini answer without `usageMetadata` gets an estimate too.
#[tokio::test]
async fn a_whole_answer_without_usage_metadata_gets_an_estimate() {
    let h = harness(0).await;
    h.upstream.push(Reply::json(json!({
        "candidates": [{"content": {"role": "model", "parts": [{"text": "fine"}]}, "finishReason": "STOP", "index": 0}]
    })));
    let (status, body) = h
        .post_json(&json!({"model": "gemini", "input": "hello there"}))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["status"], "completed");
    assert_eq!(body["usage"]["output_tokens"], 1);
    assert!(
        body["usage"]["input_tokens"].as_u64().unwrap() >= 2,
        "{body}"
    );
    assert!(
        body["toolbridge_diagnostics"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d["code"] == "usage_estimated")
    );
}

#[tokio::test]
async fn resource_exhausted_429_becomes_an_openai_shaped_rate_limit() {
    let h = harness(0).await;
    h.upstream.push(Reply::error(
        429,
        json!({"error": {
            "code": 429,
            "message": "Resource has been exhausted (e.g. check quota).",
            "status": "RESOURCE_EXHAUSTED",
            "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "7s"}]
        }}),
    ));
    let response = h.post(&json!({"model": "gemini", "input": "hi"})).await;
    assert_eq!(response.status().as_u16(), 429);
    assert_eq!(response.headers()["retry-after"], "7");
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "rate_limit_exceeded", "{body}");
    assert_eq!(body["error"]["type"], "rate_limit_error");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("RESOURCE_EXHAUSTED"), "{message}");
    assert_eq!(h.upstream.requests().len(), 1, "max_retries = 0");
}

/// `/v1/responses/compact` on a Gemini provider: the summary round goes to `:generateContent`
/// and comes back as a sealed `compaction` item.
#[tokio::test]
async fn compact_on_a_gemini_provider_summarises_through_generate_content() {
    let h = harness(0).await;
    h.upstream.push(Reply::json(json!({
        "candidates": [{"content": {"role": "model", "parts": [{"text": "Oslo weather: cold."}]}, "finishReason": "STOP"}],
        "usageMetadata": {"promptTokenCount": 40, "candidatesTokenCount": 5, "totalTokenCount": 45}
    })));
    let (status, body) = h
        .post_path_json(
            "/v1/responses/compact",
            &json!({"model": "gemini", "input": [
                {"role": "user", "content": "Weather in Oslo?"},
                {"role": "assistant", "content": "Cold, -3C."}
            ]}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let compaction = body["output"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(compaction["type"], "compaction", "{body:#}");
    assert_eq!(body["usage"]["input_tokens"], 40);
    let requests = h.upstream.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(
        requests[0].path,
        "/v1/models/gemini-2.5-flash:generateContent"
    );
    assert!(requests[0].body.to_string().contains("Cold, -3C."));
}

/// `web_search` goes to Gemini as the `googleSearch` tool, beside the function declarations.
#[tokio::test]
async fn web_search_becomes_google_search() {
    let h = harness(0).await;
    h.upstream.push(Reply::json(json!({
        "candidates": [{
            "content": {"role": "model", "parts": [{"text": "Rust 2024 shipped in 1.85."}]},
            "finishReason": "STOP",
            "groundingMetadata": {"webSearchQueries": ["rust 2024 edition release"]}
        }],
        "usageMetadata": {"promptTokenCount": 50, "candidatesTokenCount": 9, "totalTokenCount": 59}
    })));
    let (status, body) = h
        .post_json(&json!({
            "model": "gemini",
            "input": "When did Rust 2024 ship?",
            "tools": [
                {"type": "web_search"},
                {"type": "function", "name": "lookup", "parameters": {"type": "object", "properties": {}}}
            ],
        }))
        .await;
    assert_eq!(status, 200, "{body}");
    let output = body["output"].as_array().unwrap();
    let message = output.iter().find(|i| i["type"] == "message").unwrap();
    assert_eq!(message["content"][0]["text"], "Rust 2024 shipped in 1.85.");
    // The query Gemini grounded with shows as a completed web_search_call.
    let search = output
        .iter()
        .find(|i| i["type"] == "web_search_call")
        .unwrap_or_else(|| panic!("no web_search_call in {body:#}"));
    assert_eq!(search["status"], "completed");
    assert_eq!(search["action"]["query"], "rust 2024 edition release");
    let sent = h.upstream.last_body();
    let tools = sent["tools"].as_array().unwrap();
    assert!(
        tools.iter().any(|t| t == &json!({"googleSearch": {}})),
        "{sent:#}"
    );
    assert!(
        tools
            .iter()
            .any(|t| t["functionDeclarations"][0]["name"] == "lookup"),
        "{sent:#}"
    );
}

/// A function call's `thoughtSignature` survives a stateless round trip: sealed with the
/// thoughts before it, and sent back on that call's part on the next turn.
#[tokio::test]
async fn a_thought_signature_is_sealed_and_replayed_on_its_function_call() {
    let h = harness(0).await;
    h.upstream.push(gemini_stream(vec![
        json!({"candidates": [{"content": {"role": "model", "parts": [
            {"text": "Need the weather.", "thought": true}
        ]}, "index": 0}]}),
        json!({"candidates": [{"content": {"role": "model", "parts": [
            {"functionCall": {"name": "lookup", "args": {"city": "Oslo"}}, "thoughtSignature": "GEMSIG-1"}
        ]}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15}}),
    ]));
    let tools = json!([{"type": "function", "name": "lookup", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}]);
    let first = h
        .post_stream(&json!({
            "model": "gemini",
            "input": "Oslo?",
            "stream": true,
            "tools": tools,
            "reasoning": {"effort": "low"},
            "include": ["reasoning.encrypted_content"],
        }))
        .await;
    let output = first.last().unwrap().data["response"]["output"].clone();
    assert_eq!(output[0]["type"], "reasoning", "{output:#}");
    assert!(
        !output[0].to_string().contains("GEMSIG-1"),
        "sealed, not shown"
    );
    assert_eq!(output[1]["type"], "function_call");

    h.upstream.push(Reply::json(json!({
        "candidates": [{"content": {"role": "model", "parts": [{"text": "Cold."}]}, "finishReason": "STOP"}],
        "usageMetadata": {"promptTokenCount": 20, "candidatesTokenCount": 2, "totalTokenCount": 22}
    })));
    let (status, body) = h
        .post_json(&json!({
            "model": "gemini",
            "tools": tools,
            "input": [
                {"role": "user", "content": "Oslo?"},
                output[0].clone(),
                output[1].clone(),
                {"type": "function_call_output", "call_id": output[1]["call_id"], "output": "-3C"},
            ],
        }))
        .await;
    assert_eq!(status, 200, "{body}");
    let sent = h.upstream.last_body();
    let model = &sent["contents"][1];
    assert_eq!(model["role"], "model", "{sent:#}");
    assert_eq!(model["parts"][0]["functionCall"]["name"], "lookup");
    assert_eq!(
        model["parts"][0]["thoughtSignature"], "GEMSIG-1",
        "{sent:#}"
    );
}
