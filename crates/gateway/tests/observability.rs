//! Ring 2: metrics through the whole app. Two requests count 2 (requests, the duration
//! histogram), their tokens are summed, their tool plans counted by type and decision, a stream
//! moves the open-streams gauge up and back to 0 and times its first byte and first token, and
//! every answer carries the overhead header;
//! the gateway's tool loop counts its steps and calls, and a repaired call counts by its code.
//! The recorder is process-wide, so this file's labels are its own (provider `metered`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::Harness;
use serde_json::json;
use toolbridge_testkit::Reply;
use toolbridge_testkit::chat::{completion, text_stream, tool_calls_completion, usage_chunk};

async fn harness() -> Harness {
    Harness::with_toml(|url| {
        format!(
            r#"
[providers.metered]
base_url = "{url}"
api_key_env = "FAKE_UPSTREAM_KEY"

[[routes]]
model = "obs-model"
provider = "metered"

[[routes]]
model = "obs-stream"
provider = "metered"

[[routes]]
model = "obs-*"
provider = "metered"
"#
        )
    })
    .await
}

/// The value of the sample of `name` whose labels include every `labels` pair.
fn sample(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| l.starts_with(&format!("{name}{{")) || l.starts_with(&format!("{name} ")))
        .find(|l| {
            labels
                .iter()
                .all(|(k, v)| l.contains(&format!("{k}=\"{v}\"")))
        })
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

async fn metrics(h: &Harness) -> String {
    let response = h.client.get(h.url("/metrics")).send().await.unwrap();
    assert_eq!(response.status().as_u16(), 200);
    response.text().await.unwrap()
}

#[tokio::test]
async fn two_requests_count_two_with_tokens_plans_and_the_overhead_header() {
    let h = harness().await;
    let request = json!({
        "model": "obs-model",
        "input": "hi",
        "tools": [{"type": "function", "name": "lookup", "parameters": {"type": "object", "properties": {}}}],
    });
    for _ in 0..2 {
        h.upstream.push(Reply::json(completion("hello", "stop")));
        let response = h.post(&request).await;
        assert_eq!(response.status().as_u16(), 200);
        let overhead = response.headers()["x-toolbridge-overhead-ms"]
            .to_str()
            .unwrap()
            .parse::<f64>()
            .unwrap();
        assert!(overhead >= 0.0);
        assert!(response.headers().contains_key("x-request-id"));
        let _ = response.text().await.unwrap();
    }
    // A model no exact route names is labelled by the route pattern it matched.
    h.upstream.push(Reply::json(completion("hello", "stop")));
    let (status, _) = h
        .post_json(&json!({"model": "obs-anything-9f3", "input": "hi"}))
        .await;
    assert_eq!(status, 200);

    let text = metrics(&h).await;
    let labels = [
        ("route", "/v1/responses"),
        ("provider", "metered"),
        ("model", "obs-model"),
        ("status", "200"),
    ];
    assert_eq!(
        sample(&text, "toolbridge_requests_total", &labels),
        Some(2.0),
        "{text}"
    );
    assert_eq!(
        sample(&text, "toolbridge_request_duration_seconds_count", &labels),
        Some(2.0)
    );
    assert_eq!(
        sample(&text, "toolbridge_overhead_seconds_count", &labels[..3]),
        Some(2.0)
    );
    let tokens = |direction| {
        sample(
            &text,
            "toolbridge_tokens_total",
            &[
                ("provider", "metered"),
                ("model", "obs-model"),
                ("direction", direction),
            ],
        )
    };
    assert_eq!(tokens("input"), Some(22.0), "11 prompt tokens twice");
    assert_eq!(tokens("output"), Some(14.0), "7 completion tokens twice");
    assert_eq!(
        sample(
            &text,
            "toolbridge_tool_plan_decisions_total",
            &[
                ("provider", "metered"),
                ("tool_type", "function"),
                ("decision", "native")
            ]
        ),
        Some(2.0)
    );
    assert_eq!(
        sample(&text, "toolbridge_requests_total", &[("model", "obs-*")]),
        Some(1.0)
    );
    assert!(
        !text.contains("obs-anything-9f3"),
        "client model names are not labels"
    );
    assert!(
        sample(
            &text,
            "toolbridge_upstream_latency_seconds_count",
            &[("provider", "metered"), ("status", "200")]
        )
        .is_some_and(|n| n >= 3.0)
    );
}

#[tokio::test]
async fn a_stream_opens_and_closes_the_open_streams_gauge() {
    let h = harness().await;
    let mut payloads = text_stream(&["a", "b"], "stop");
    payloads.push(usage_chunk(5, 2));
    // Slow enough that the stream is certainly open while the metrics are read.
    let mut pieces: Vec<String> = payloads.iter().map(|p| format!("data: {p}\n\n")).collect();
    pieces.push("data: [DONE]\n\n".to_owned());
    h.upstream.push(Reply::Stream {
        pieces,
        pause: std::time::Duration::from_millis(100),
    });
    let response = h
        .post(&json!({"model": "obs-stream", "input": "hi", "stream": true}))
        .await;
    assert_eq!(response.status().as_u16(), 200);
    assert!(response.headers().contains_key("x-toolbridge-overhead-ms"));
    let during = metrics(&h).await;
    assert_eq!(
        sample(
            &during,
            "toolbridge_open_streams",
            &[("route", "/v1/responses")]
        ),
        Some(1.0),
        "{during}"
    );
    let body = response.text().await.unwrap();
    assert!(body.contains("response.completed"));
    // The body's drop guard runs once hyper is done with it; give it a moment.
    let mut after = String::new();
    for _ in 0..50 {
        after = metrics(&h).await;
        if sample(
            &after,
            "toolbridge_open_streams",
            &[("route", "/v1/responses")],
        ) == Some(0.0)
        {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(
        sample(
            &after,
            "toolbridge_open_streams",
            &[("route", "/v1/responses")]
        ),
        Some(0.0),
        "{after}"
    );
    assert!(
        sample(
            &after,
            "toolbridge_time_to_first_byte_seconds_count",
            &[("provider", "metered")]
        )
        .is_some_and(|n| n >= 1.0)
    );
    assert!(
        sample(
            &after,
            "toolbridge_stream_duration_seconds_count",
            &[("provider", "metered")]
        )
        .is_some_and(|n| n >= 1.0)
    );
    // The first token is the first output delta: later than the first byte
    // (`response.created` goes out before the upstream's first token).
    let stream_labels = [("provider", "metered"), ("model", "obs-stream")];
    assert_eq!(
        sample(
            &after,
            "toolbridge_time_to_first_token_seconds_count",
            &stream_labels
        ),
        Some(1.0),
        "{after}"
    );
    let first_token = sample(
        &after,
        "toolbridge_time_to_first_token_seconds_sum",
        &stream_labels,
    )
    .unwrap();
    let first_byte = sample(
        &after,
        "toolbridge_time_to_first_byte_seconds_sum",
        &stream_labels,
    )
    .unwrap();
    assert!(first_token >= first_byte, "{first_token} < {first_byte}");
}

#[tokio::test]
async fn loop_steps_tool_calls_and_repairs_are_counted() {
    let h = Harness::with_toml(|url| {
        format!(
            r#"
[providers.looped]
base_url = "{url}"
api_key_env = "FAKE_UPSTREAM_KEY"
max_retries = 0

[[routes]]
model = "loop-*"
provider = "looped"

[gateway_tools]
builtins = ["calculator"]
jq_isolation = false
"#
        )
    })
    .await;
    // One gateway step: the calculator runs (once well, once on a bad expression), then the
    // model answers.
    h.upstream.push(Reply::json(tool_calls_completion(&[
        ("call_1", "calculator", json!({"expression": "2+3"})),
        ("call_2", "calculator", json!({"expression": "2+"})),
    ])));
    h.upstream.push(Reply::json(completion("5", "stop")));
    let (status, body) = h
        .post_json(&json!({"model": "loop-a", "input": "2+3?", "store": false}))
        .await;
    assert_eq!(status, 200, "{body}");
    // A client tool call whose arguments need repair (a trailing comma).
    h.upstream.push(Reply::json(json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": null,
            "tool_calls": [{"id": "call_3", "type": "function", "function": {"name": "lookup", "arguments": "{\"q\": \"x\",}"}}]}}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
    })));
    let (status, body) = h
        .post_json(&json!({"model": "loop-b", "input": "look", "store": false,
            "tools": [{"type": "function", "name": "lookup", "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}]}))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["output"][0]["arguments"], r#"{"q":"x"}"#, "{body:#}");

    let text = metrics(&h).await;
    assert_eq!(
        sample(
            &text,
            "toolbridge_tool_loop_steps_total",
            &[("provider", "looped")]
        ),
        Some(1.0),
        "{text}"
    );
    let calls = |outcome| {
        sample(
            &text,
            "toolbridge_tool_calls_total",
            &[("server", "toolbridge"), ("outcome", outcome)],
        )
    };
    assert_eq!(calls("ok"), Some(1.0), "{text}");
    assert_eq!(calls("error"), Some(1.0), "{text}");
    assert_eq!(
        sample(
            &text,
            "toolbridge_repairs_total",
            &[
                ("provider", "looped"),
                ("model", "loop-*"),
                ("code", "arguments_repaired")
            ]
        ),
        Some(1.0),
        "{text}"
    );
}
