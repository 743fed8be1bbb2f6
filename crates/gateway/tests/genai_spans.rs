//! Ring 3, the GenAI semantic conventions through the real binary: a response whose model calls
//! a gateway tool reaches a local OTLP/HTTP receiver (decoded with opentelemetry-proto) as a
//! `chat {model}` client span with the provider, models, token usage (cached included) and
//! finish reasons, and an `execute_tool {name}` span for the tool; message content is on the
//! spans only when the operator opts in.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::path::Path;
use std::time::Duration;

use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use opentelemetry_proto::tonic::trace::v1::Span;
use serde_json::{Value, json};
use toolbridge_testkit::chat::{completion, tool_calls_completion};
use toolbridge_testkit::{FakeUpstream, GatewayProcess, Reply};

const BIN: &str = env!("CARGO_BIN_EXE_toolbridge");

/// The gateway with the calculator built in, exporting to `endpoint`.
async fn gateway(upstream: &FakeUpstream, endpoint: &str, content: bool) -> GatewayProcess {
    let dir = std::env::temp_dir().join(format!(
        "toolbridge-genai-{}-{content}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("config.toml");
    let config = format!(
        r#"
[telemetry]
otlp_endpoint = "{endpoint}"

[providers.up]
base_url = "{}"
preset = "deepseek"

[[routes]]
model = "m"
provider = "up"
upstream_model = "deepseek-chat"

[gateway_tools]
builtins = ["calculator"]
"#,
        upstream.base_url()
    );
    std::fs::write(&file, config).unwrap();
    let mut env = vec![
        ("TOOLBRIDGE_CONFIG", file.display().to_string()),
        ("TOOLBRIDGE_STORE_URL", "none".to_owned()),
        ("OTEL_BSP_SCHEDULE_DELAY", "100".to_owned()),
    ];
    if content {
        env.push((
            "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT",
            "true".to_owned(),
        ));
    }
    GatewayProcess::start(Path::new(BIN), &env).await
}

/// Runs one response whose model calls the calculator, then answers; returns the spans of its
/// trace once the `chat` and `execute_tool` spans arrived.
async fn traced_response(content: bool) -> Vec<Span> {
    let (endpoint, seen) = common::otlp::receiver().await;
    let upstream = FakeUpstream::start().await;
    let mut first =
        tool_calls_completion(&[("call_calc", "calculator", json!({"expression": "6*7"}))]);
    first["usage"] = json!({"prompt_tokens": 900, "completion_tokens": 20, "total_tokens": 920,
        "prompt_tokens_details": {"cached_tokens": 768}});
    upstream.push(Reply::json(first));
    let mut second = completion("6*7 is 42.", "stop");
    second["usage"] = json!({"prompt_tokens": 1000, "completion_tokens": 30, "total_tokens": 1030,
        "prompt_tokens_details": {"cached_tokens": 896}});
    upstream.push(Reply::json(second));
    let gateway = gateway(&upstream, &endpoint, content).await;

    let trace_id = "0af7651916cd43dd8448eb211c80319c";
    let response = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap()
        .post(gateway.url("/v1/responses"))
        .header("traceparent", format!("00-{trace_id}-b7ad6b7169203331-01"))
        .json(&json!({
            "model": "m",
            "instructions": "Answer with the number.",
            "input": "What is 6*7? SECRET-PROMPT",
            "prompt_cache_key": "session-77",
            "store": false
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200, "{}", gateway.stderr());
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["status"], "completed", "{body}");

    for _ in 0..100 {
        let spans: Vec<Span> = seen
            .lock()
            .unwrap()
            .iter()
            .flat_map(|r| &r.resource_spans)
            .flat_map(|r| &r.scope_spans)
            .flat_map(|s| s.spans.clone())
            .filter(|s| hex(&s.trace_id) == trace_id)
            .collect();
        let has = |prefix: &str| spans.iter().any(|s| s.name.starts_with(prefix));
        if has("chat ") && has("execute_tool ") && has("request") {
            return spans;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the GenAI spans did not arrive: {}", gateway.stderr());
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// An attribute's value as JSON (strings, ints, doubles, booleans, string lists).
fn attr(span: &Span, key: &str) -> Option<Value> {
    let value = span
        .attributes
        .iter()
        .find(|a| a.key == key)?
        .value
        .as_ref()?;
    Some(match value.value.as_ref()? {
        Any::StringValue(s) => json!(s),
        Any::IntValue(i) => json!(i),
        Any::DoubleValue(d) => json!(d),
        Any::BoolValue(b) => json!(b),
        Any::ArrayValue(list) => Value::Array(
            list.values
                .iter()
                .filter_map(|v| match v.value.as_ref()? {
                    Any::StringValue(s) => Some(json!(s)),
                    _ => None,
                })
                .collect(),
        ),
        other => json!(format!("{other:?}")),
    })
}

fn find<'a>(spans: &'a [Span], name: &str) -> &'a Span {
    spans.iter().find(|s| s.name == name).unwrap_or_else(|| {
        let names: Vec<_> = spans.iter().map(|s| &s.name).collect();
        panic!("no `{name}` span in {names:?}")
    })
}

#[tokio::test]
async fn the_inference_and_tool_spans_carry_the_conventions_attributes_and_no_content() {
    let spans = traced_response(false).await;
    let chat = find(&spans, "chat deepseek-chat");
    // CLIENT (3 in OTLP's enum).
    assert_eq!(chat.kind, 3);
    let expect = [
        ("gen_ai.operation.name", json!("chat")),
        ("gen_ai.provider.name", json!("deepseek")),
        ("gen_ai.request.model", json!("deepseek-chat")),
        ("gen_ai.response.model", json!("deepseek-chat")),
        ("gen_ai.conversation.id", json!("session-77")),
        ("gen_ai.output.type", json!("text")),
        ("server.address", json!("127.0.0.1")),
        // Both rounds of the tool loop, summed, with the cached share of the input.
        ("gen_ai.usage.input_tokens", json!(1900)),
        ("gen_ai.usage.output_tokens", json!(50)),
        ("gen_ai.usage.cache_read.input_tokens", json!(1664)),
        ("gen_ai.response.finish_reasons", json!(["stop"])),
        ("toolbridge.provider", json!("up")),
        ("toolbridge.model", json!("m")),
    ];
    for (key, value) in expect {
        assert_eq!(attr(chat, key), Some(value), "`{key}` on {chat:?}");
    }
    assert!(
        attr(chat, "gen_ai.response.id")
            .and_then(|v| v.as_str().map(|s| s.starts_with("resp_")))
            .unwrap_or(false)
    );

    let tool = find(&spans, "execute_tool calculator");
    let expect = [
        ("gen_ai.operation.name", json!("execute_tool")),
        ("gen_ai.tool.name", json!("calculator")),
        ("gen_ai.tool.call.id", json!("call_calc")),
        ("gen_ai.tool.type", json!("function")),
    ];
    for (key, value) in expect {
        assert_eq!(attr(tool, key), Some(value), "`{key}` on {tool:?}");
    }
    // Both hang in the request's trace, under its spans.
    let ids: Vec<String> = spans.iter().map(|s| hex(&s.span_id)).collect();
    for span in [chat, tool] {
        assert!(ids.contains(&hex(&span.parent_span_id)), "{}", span.name);
    }
    // No content unless the operator opts in: no attribute anywhere holds the prompt.
    for span in &spans {
        for a in &span.attributes {
            assert!(
                !format!("{:?}", a.value).contains("SECRET-PROMPT"),
                "`{}` on `{}` holds message content",
                a.key,
                span.name
            );
        }
        for key in [
            "gen_ai.input.messages",
            "gen_ai.output.messages",
            "gen_ai.system_instructions",
            "gen_ai.tool.call.arguments",
            "gen_ai.tool.call.result",
        ] {
            assert_eq!(attr(span, key), None, "`{key}` on `{}`", span.name);
        }
    }
}

#[tokio::test]
async fn message_content_is_recorded_when_the_operator_opts_in() {
    let spans = traced_response(true).await;
    let chat = find(&spans, "chat deepseek-chat");
    let json_of = |span: &Span, key: &str| -> Value {
        let text = attr(span, key).unwrap_or_else(|| panic!("no `{key}`"));
        serde_json::from_str(text.as_str().unwrap()).unwrap()
    };
    let input = json_of(chat, "gen_ai.input.messages");
    assert_eq!(input[0]["role"], "user");
    assert_eq!(input[0]["parts"][0]["type"], "text");
    assert_eq!(
        input[0]["parts"][0]["content"],
        "What is 6*7? SECRET-PROMPT"
    );
    let system = json_of(chat, "gen_ai.system_instructions");
    assert_eq!(system[0]["content"], "Answer with the number.");
    let output = json_of(chat, "gen_ai.output.messages");
    let last = output.as_array().unwrap().last().unwrap();
    assert_eq!(last["role"], "assistant");
    assert_eq!(last["finish_reason"], "stop");
    assert!(
        last["parts"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["content"] == "6*7 is 42."),
        "{output}"
    );

    let tool = find(&spans, "execute_tool calculator");
    let arguments: Value = serde_json::from_str(
        attr(tool, "gen_ai.tool.call.arguments")
            .unwrap()
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(arguments, json!({"expression": "6*7"}));
    assert!(
        attr(tool, "gen_ai.tool.call.result")
            .unwrap()
            .as_str()
            .unwrap()
            .contains("42")
    );
}
