//! Ring 2: tools the gateway runs itself, against a fake Chat upstream on 127.0.0.1:0 (and a
//! fake SearXNG backend for `web_search`): the bounded loop, hosted items (`mcp_call`,
//! `web_search_call`) with their events, structured failures, the step limit, a turn mixing
//! gateway and client calls, and the replay of the gateway's exchange by a stateless client.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code fails loudly

mod common;

use common::Harness;
use serde_json::{Value, json};
use toolbridge_testkit::chat::{chunk, usage_chunk};
use toolbridge_testkit::{FakeUpstream, Reply};

/// A gateway running `builtins` itself for a generic Chat provider.
async fn harness(extra: &str) -> Harness {
    let extra = extra.to_owned();
    Harness::with_toml(move |url| {
        format!(
            r#"
[providers.up]
base_url = "{url}"
api_key_env = "FAKE_UPSTREAM_KEY"
max_retries = 0

[[routes]]
model = "*"
provider = "up"

[gateway_tools]
builtins = ["calculator"]
{extra}
"#
        )
    })
    .await
}

fn calls(calls: &[(&str, &str, Value)]) -> Value {
    toolbridge_testkit::chat::tool_calls_completion(calls)
}

fn answer(text: &str) -> Value {
    toolbridge_testkit::chat::completion(text, "stop")
}

/// The streamed form of a round calling one tool.
fn call_stream(id: &str, name: &str, args: &Value) -> Reply {
    Reply::sse(vec![
        chunk(json!({"role": "assistant", "content": ""}), None),
        chunk(
            json!({"tool_calls": [{"index": 0, "id": id, "type": "function", "function": {"name": name, "arguments": ""}}]}),
            None,
        ),
        chunk(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": args.to_string()}}]}),
            None,
        ),
        chunk(json!({}), Some("tool_calls")),
        usage_chunk(10, 5),
    ])
}

#[tokio::test]
async fn the_upstream_calls_the_calculator_and_then_answers_in_one_response() {
    let h = harness("").await;
    h.upstream.push(Reply::json(calls(&[(
        "call_calc",
        "calculator",
        json!({"expression": "2+3*4"}),
    )])));
    h.upstream.push(Reply::json(answer("2+3*4 is 14.")));
    let (status, body) = h
        .post_json(&json!({"model": "m", "input": "What is 2+3*4?", "store": false}))
        .await;
    assert_eq!(status, 200, "{body}");
    h.check_response(&body);

    // The model saw the calculator as a function, and its result in the second round.
    let requests = h.upstream.requests();
    assert_eq!(requests.len(), 2);
    let first = &requests[0].body;
    assert_eq!(first["tools"][0]["function"]["name"], "calculator");
    let second = &requests[1].body;
    let messages = second["messages"].as_array().unwrap();
    let assistant = &messages[messages.len() - 2];
    assert_eq!(assistant["tool_calls"][0]["id"], "call_calc");
    assert_eq!(assistant["tool_calls"][0]["function"]["name"], "calculator");
    let result = &messages[messages.len() - 1];
    assert_eq!(result["role"], "tool");
    assert_eq!(result["tool_call_id"], "call_calc");
    assert!(
        result["content"].as_str().unwrap().contains("14"),
        "{result}"
    );

    // The client sees the call as a hosted item, never as a call of its own.
    let output = body["output"].as_array().unwrap();
    let kinds: Vec<&str> = output.iter().map(|i| i["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["mcp_call", "message"], "{body:#}");
    assert_eq!(output[0]["server_label"], "toolbridge");
    assert_eq!(output[0]["name"], "calculator");
    assert_eq!(output[0]["status"], "completed");
    assert!(output[0]["output"].as_str().unwrap().contains("14"));
    assert_eq!(body["status"], "completed");
    // Both rounds' tokens are counted.
    assert_eq!(body["usage"]["input_tokens"], 21);
    assert_eq!(body["usage"]["output_tokens"], 12);
}

#[tokio::test]
async fn a_streamed_loop_shows_the_call_before_it_runs_and_keeps_one_state_machine() {
    let h = harness("").await;
    h.upstream.push(call_stream(
        "call_1",
        "calculator",
        &json!({"expression": "6*7"}),
    ));
    h.upstream
        .push(Reply::sse(toolbridge_testkit::chat::text_stream(
            &["The answer ", "is 42."],
            "stop",
        )));
    let events = h
        .post_stream(&json!({"model": "m", "input": "6*7?", "stream": true, "store": false}))
        .await;
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| e.data["type"].as_str().unwrap())
        .collect();
    let at = |kind: &str| kinds.iter().position(|k| *k == kind).unwrap();
    assert!(at("response.mcp_call.in_progress") < at("response.mcp_call.completed"));
    assert!(at("response.mcp_call_arguments.done") < at("response.mcp_call.completed"));
    assert!(at("response.mcp_call.completed") < at("response.output_text.delta"));
    assert!(!kinds.contains(&"response.function_call_arguments.delta"));
    let last = &events.last().unwrap().data["response"];
    assert_eq!(last["status"], "completed");
    assert_eq!(last["output"][0]["type"], "mcp_call");
    assert!(last["output"][0]["output"].as_str().unwrap().contains("42"));
    assert_eq!(last["output"][1]["content"][0]["text"], "The answer is 42.");
}

#[tokio::test]
async fn a_tool_error_is_a_result_the_model_reads_not_a_failed_request() {
    let h = harness("").await;
    h.upstream.push(Reply::json(calls(&[(
        "call_bad",
        "calculator",
        json!({"expression": "2+*"}),
    )])));
    h.upstream
        .push(Reply::json(answer("That expression is malformed.")));
    let (status, body) = h.post_json(&json!({"model": "m", "input": "2+*?"})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["status"], "completed");
    assert_eq!(body["output"][0]["status"], "failed");
    let error = body["output"][0]["error"].as_str().unwrap();
    let error: Value = serde_json::from_str(error).unwrap();
    assert!(error["error"]["code"].is_string(), "{error}");
    // The model read the same structured error as the call's result.
    let second = &h.upstream.requests()[1].body;
    let result = second["messages"].as_array().unwrap().last().unwrap();
    let seen: Value = serde_json::from_str(result["content"].as_str().unwrap()).unwrap();
    assert_eq!(seen, error);
}

#[tokio::test]
async fn the_loop_stops_at_its_step_limit_with_an_incomplete_response() {
    let h = harness("max_steps = 2").await;
    for i in 0..5 {
        h.upstream.push(Reply::json(calls(&[(
            &format!("call_{i}"),
            "calculator",
            json!({"expression": "1+1"}),
        )])));
    }
    let (status, body) = h.post_json(&json!({"model": "m", "input": "loop"})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["status"], "incomplete");
    assert_eq!(body["incomplete_details"]["reason"], "max_tool_calls");
    // The first round and two more; the third round's call was not run.
    assert_eq!(h.upstream.requests().len(), 3);
    let mcp_calls = body["output"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["type"] == "mcp_call")
        .count();
    assert_eq!(mcp_calls, 2);

    // The request's own `max_tool_calls` caps the calls too.
    let h = harness("").await;
    for i in 0..3 {
        h.upstream.push(Reply::json(calls(&[(
            &format!("call_{i}"),
            "calculator",
            json!({"expression": "1+1"}),
        )])));
    }
    let (_, body) = h
        .post_json(&json!({"model": "m", "input": "loop", "max_tool_calls": 1}))
        .await;
    assert_eq!(body["status"], "incomplete");
    assert_eq!(h.upstream.requests().len(), 2);
}

#[tokio::test]
async fn a_turn_mixing_gateway_and_client_calls_returns_the_client_calls_and_replays_cleanly() {
    let h = harness("").await;
    let weather = json!({"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}});
    h.upstream.push(Reply::json(calls(&[
        ("call_calc", "calculator", json!({"expression": "20-3"})),
        ("call_weather", "get_weather", json!({"city": "Oslo"})),
    ])));
    let (status, body) = h
        .post_json(
            &json!({"model": "m", "input": "weather and 20-3", "tools": [weather], "store": false}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let output = body["output"].as_array().unwrap().clone();
    let kinds: Vec<&str> = output.iter().map(|i| i["type"].as_str().unwrap()).collect();
    // The client's call was shown once the round ended and it was checked; the gateway's
    // shows once it ran.
    assert_eq!(kinds, ["function_call", "mcp_call"], "{body:#}");
    assert_eq!(output[0]["name"], "get_weather");
    assert!(output[1]["output"].as_str().unwrap().contains("17"));
    assert_eq!(
        h.upstream.requests().len(),
        1,
        "the client's call ends the response"
    );

    // A stateless client replays the whole output with its own result: the upstream sees the
    // round's two calls, then both results.
    h.upstream
        .push(Reply::json(answer("Oslo is 3°C; 20-3 is 17.")));
    let mut input = vec![json!({"role": "user", "content": "weather and 20-3"})];
    input.extend(output);
    input.push(json!({"type": "function_call_output", "call_id": "call_weather", "output": "3°C"}));
    let (status, body) = h
        .post_json(&json!({"model": "m", "input": input, "tools": [weather], "store": false}))
        .await;
    assert_eq!(status, 200, "{body}");
    assert!(
        body.get("toolbridge_diagnostics").is_none(),
        "nothing dropped: {body:#}"
    );
    // After the gateway's note naming the tools it runs (a system message of its own).
    let mut messages = h.upstream.last_body()["messages"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(messages[0]["role"], "system");
    messages.remove(0);
    let roles: Vec<&str> = messages
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "assistant", "tool", "tool"]);
    let names: Vec<&str> = messages[1]["tool_calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["get_weather", "calculator"]);
    // The replayed call is keyed by its item id, and its result pairs with it.
    assert_eq!(
        messages[2]["tool_call_id"],
        messages[1]["tool_calls"][1]["id"]
    );
    assert!(messages[2]["content"].as_str().unwrap().contains("17"));
    assert_eq!(messages[3]["tool_call_id"], "call_weather");
    assert_eq!(messages[3]["content"], "3°C");
}

#[tokio::test]
async fn web_search_the_provider_lacks_is_served_by_the_gateway_as_a_web_search_call() {
    let search = FakeUpstream::start().await;
    let search_url = search.base_url();
    let port = search_url
        .trim_start_matches("http://127.0.0.1:")
        .trim_end_matches("/v1");
    search.push(Reply::json(json!({
        "query": "toolbridge release",
        "results": [{"title": "toolbridge 1.0 released", "url": "https://example.com/tb", "content": "Released on 2026-11-30."}]
    })));
    let h = harness(&format!(
        "\n[gateway_tools.web_search]\nbackend = \"searxng\"\nurl = \"{search_url}\"\nallow_loopback_ports = [{port}]\n"
    ))
    .await;
    h.upstream.push(Reply::json(calls(&[(
        "call_s",
        "web_search",
        json!({"query": "toolbridge release"}),
    )])));
    h.upstream
        .push(Reply::json(answer("It was released on 2026-11-30.")));
    let (status, body) = h
        .post_json(&json!({"model": "m", "input": "When was toolbridge released?", "tools": [{"type": "web_search"}]}))
        .await;
    assert_eq!(status, 200, "{body}");
    h.check_response(&body);
    let output = body["output"].as_array().unwrap();
    assert_eq!(output[0]["type"], "web_search_call");
    assert_eq!(output[0]["action"]["query"], "toolbridge release");
    assert_eq!(output[0]["status"], "completed");
    assert_eq!(output[1]["type"], "message");
    // The search reached the backend, and its hits reached the model.
    let asked = search.requests().pop().unwrap();
    assert!(asked.query.unwrap().contains("q=toolbridge+release"));
    let second = &h.upstream.requests()[1].body;
    let result = second["messages"].as_array().unwrap().last().unwrap();
    assert!(
        result["content"]
            .as_str()
            .unwrap()
            .contains("Released on 2026-11-30.")
    );
    // The plan says who served web_search.
    let header = body["toolbridge_diagnostics"].to_string();
    assert!(!header.contains("tool_ignored"), "{header}");
}

#[tokio::test]
async fn the_session_side_channel_shows_each_step_of_the_loop() {
    let h = harness("").await;
    // Subscribe first: the subscription is open once the headers are back.
    let events = h
        .client
        .get(h.url("/v1/sessions/codex-session-1/events"))
        .send()
        .await
        .unwrap();
    assert_eq!(events.status().as_u16(), 200);
    h.upstream.push(Reply::json(calls(&[(
        "call_calc",
        "calculator",
        json!({"expression": "2**10"}),
    )])));
    h.upstream.push(Reply::json(answer("1024")));
    let response = h
        .client
        .post(h.url("/v1/responses"))
        .header("session-id", "codex-session-1")
        .json(&json!({"model": "m", "input": "2**10?"}))
        .send()
        .await
        .unwrap();
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["status"], "completed", "{body}");
    let mut stream = events.bytes_stream();
    let mut text = String::new();
    let read = async {
        use futures::StreamExt;
        while let Some(chunk) = stream.next().await {
            text.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
            if text.contains("event: response.completed") {
                break;
            }
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(10), read)
        .await
        .expect("the side channel shows the response's end");
    let kinds: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("event: "))
        .collect();
    assert_eq!(
        kinds,
        [
            "response.started",
            "tool.started",
            "tool.completed",
            "response.completed"
        ]
    );
    let completed: Value = text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(|d| serde_json::from_str::<Value>(d).unwrap())
        .find(|e| e["type"] == "tool.completed")
        .unwrap();
    assert_eq!(completed["tool"], "calculator");
    assert_eq!(completed["server_label"], "toolbridge");
    assert_eq!(completed["step"], 1);
    assert_eq!(completed["response_id"], body["id"]);
    assert!(completed["detail"].as_str().unwrap().contains("1024"));
}

#[tokio::test]
async fn a_gateway_key_sees_only_the_gateway_tools_its_scope_allows() {
    let secret = "tb-0000000000000000000000000000000000000000000000000000000000000001";
    let open = "tb-0000000000000000000000000000000000000000000000000000000000000002";
    let keys = format!(
        "\n[[keys]]\nid = \"narrow\"\nname = \"narrow\"\nhash = \"{}\"\ntools = [\"function\"]\n\n[[keys]]\nid = \"wide\"\nname = \"wide\"\nhash = \"{}\"\ntools = [\"function\", \"mcp:toolbridge\"]\n",
        toolbridge_gateway::hash_secret(secret),
        toolbridge_gateway::hash_secret(open),
    );
    // The keys follow the calculator gateway's tables (`[[keys]]` starts a table of its own).
    let h = harness(&keys).await;
    let offered = |key: &str| {
        let h = &h;
        let key = key.to_owned();
        async move {
            h.upstream.push(Reply::json(answer("ok")));
            let response = h
                .client
                .post(h.url("/v1/responses"))
                .bearer_auth(&key)
                .json(&json!({"model": "m", "input": "hi", "store": false}))
                .send()
                .await
                .unwrap();
            assert_eq!(response.status().as_u16(), 200);
            h.upstream.last_body()["tools"]
                .as_array()
                .map(|t| t.len())
                .unwrap_or(0)
        }
    };
    assert_eq!(offered(secret).await, 0, "no built-ins outside the scope");
    assert_eq!(
        offered(open).await,
        1,
        "mcp:toolbridge allows the built-ins"
    );
}

/// Two real gateway processes sharing Redis (127.0.0.1:6379): a subscriber of gateway B sees
/// the tool steps of a response that gateway A serves.
#[tokio::test]
async fn the_side_channel_crosses_gateway_processes_through_redis() {
    use futures::StreamExt;
    use toolbridge_testkit::GatewayProcess;
    let upstream = FakeUpstream::start().await;
    upstream.push(Reply::json(calls(&[(
        "call_calc",
        "calculator",
        json!({"expression": "7*6"}),
    )])));
    upstream.push(Reply::json(answer("42")));
    let scratch =
        std::env::temp_dir().join(format!("toolbridge-sessions-redis-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).unwrap();
    let prefix = format!("toolbridge-test-{}-{}:", std::process::id(), line!());
    let config = scratch.join("toolbridge.toml");
    std::fs::write(
        &config,
        format!(
            r#"
store_url = "none"

[providers.up]
base_url = "{}"
max_retries = 0

[[routes]]
model = "*"
provider = "up"

[gateway_tools]
builtins = ["calculator"]

[sessions]
redis_url = "redis://127.0.0.1:6379"
channel_prefix = "{prefix}"
"#,
            upstream.base_url()
        ),
    )
    .unwrap();
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_toolbridge"));
    let env = [("TOOLBRIDGE_CONFIG", config.display().to_string())];
    let a = GatewayProcess::start(bin, &env).await;
    let b = GatewayProcess::start(bin, &env).await;
    let client = reqwest::Client::new();
    let events = client
        .get(b.url("/v1/sessions/shared-session/events"))
        .send()
        .await
        .unwrap();
    assert_eq!(events.status().as_u16(), 200, "{}", b.stderr());
    let body: Value = client
        .post(a.url("/v1/responses"))
        .header("session-id", "shared-session")
        .json(&json!({"model": "m", "input": "7*6?"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(body["status"], "completed", "{body}\n{}", a.stderr());
    let mut stream = events.bytes_stream();
    let mut text = String::new();
    let read = async {
        while let Some(chunk) = stream.next().await {
            text.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
            if text.contains("event: response.completed") {
                break;
            }
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(15), read)
        .await
        .unwrap_or_else(|_| panic!("gateway B never showed the end; so far:\n{text}"));
    let kinds: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("event: "))
        .collect();
    assert_eq!(
        kinds,
        [
            "response.started",
            "tool.started",
            "tool.completed",
            "response.completed"
        ]
    );
    assert!(text.contains(body["id"].as_str().unwrap()));
    let _ = std::fs::remove_dir_all(&scratch);
}

/// The loop continues in the provider's own dialect: through Anthropic Messages, the
/// gateway's call goes back as a `tool_use` block and its result as the paired `tool_result`.
#[tokio::test]
async fn the_loop_runs_in_the_anthropic_dialect_too() {
    let h = Harness::with_toml(|url| {
        format!(
            r#"
[providers.claude]
dialect = "anthropic"
base_url = "{url}"
max_retries = 0

[[routes]]
model = "*"
provider = "claude"
upstream_model = "claude-test"

[gateway_tools]
builtins = ["calculator"]
"#
        )
    })
    .await;
    let message = |content: Value, stop: &str| {
        json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test",
               "content": content, "stop_reason": stop, "stop_sequence": null,
               "usage": {"input_tokens": 12, "output_tokens": 4}})
    };
    h.upstream.push(Reply::json(message(
        json!([{"type": "tool_use", "id": "toolu_1", "name": "calculator", "input": {"expression": "3^4"}}]),
        "tool_use",
    )));
    h.upstream.push(Reply::json(message(
        json!([{"type": "text", "text": "81"}]),
        "end_turn",
    )));
    let (status, body) = h
        .post_json(&json!({"model": "m", "input": "3^4?", "store": false}))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["output"][0]["type"], "mcp_call");
    assert_eq!(body["output"][1]["content"][0]["text"], "81");
    let second = &h.upstream.requests()[1].body;
    let messages = second["messages"].as_array().unwrap();
    let call = &messages[messages.len() - 2];
    assert_eq!(call["role"], "assistant");
    assert_eq!(call["content"][0]["type"], "tool_use");
    assert_eq!(call["content"][0]["name"], "calculator");
    assert_eq!(call["content"][0]["input"], json!({"expression": "3^4"}));
    let result = &messages[messages.len() - 1];
    assert_eq!(result["content"][0]["type"], "tool_result");
    assert_eq!(
        result["content"][0]["tool_use_id"],
        call["content"][0]["id"]
    );
}

/// Issue 23: a gateway call is resolved by the tool library's model transport; arguments that
/// do not fit the tool's schema are its `invalid_arguments`, with the JSON pointer of the bad
/// value, told to the model (never run, never a failed request).
#[tokio::test]
async fn a_malformed_gateway_call_gets_the_transports_invalid_arguments_with_its_pointer() {
    let h = harness("").await;
    h.upstream.push(Reply::json(calls(&[(
        "call_bad",
        "calculator",
        json!({"expression": 5}),
    )])));
    h.upstream.push(Reply::json(answer("I passed a number.")));
    let (status, body) = h
        .post_json(&json!({"model": "m", "input": "5?", "store": false}))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["status"], "completed");
    let item = &body["output"][0];
    assert_eq!(item["type"], "mcp_call", "{body:#}");
    assert_eq!(item["status"], "failed");
    let error: Value = serde_json::from_str(item["error"].as_str().unwrap()).unwrap();
    assert_eq!(error["error"]["code"], "invalid_arguments", "{error}");
    let message = error["error"]["message"].as_str().unwrap();
    assert!(message.contains("`/expression`"), "{message}");
    let second = &h.upstream.requests()[1].body;
    let result = second["messages"].as_array().unwrap().last().unwrap();
    assert_eq!(result["tool_call_id"], "call_bad");
    let seen: Value = serde_json::from_str(result["content"].as_str().unwrap()).unwrap();
    assert_eq!(seen, error, "the model read the transport's error");
}

/// Issue 23: the key's scope is the typed source's selection (`Scope::tool_view`) on the
/// request path: the upstream is offered only the gateway tools the key may run, and a call
/// of a gateway tool outside the scope is not run by the gateway.
#[tokio::test]
async fn a_key_scope_selects_the_gateway_tools_and_a_call_outside_it_is_not_run() {
    let narrow = "tb-0000000000000000000000000000000000000000000000000000000000000003";
    let keys = format!(
        "\n[[keys]]\nid = \"narrow\"\nname = \"narrow\"\nhash = \"{}\"\ntools = [\"function\"]\n",
        toolbridge_gateway::hash_secret(narrow),
    );
    // The keys follow the calculator gateway's tables (`[[keys]]` starts a table of its own).
    let h = harness(&keys).await;
    h.upstream.push(Reply::json(calls(&[(
        "call_calc",
        "calculator",
        json!({"expression": "1+1"}),
    )])));
    h.upstream.push(Reply::json(answer("no calculator here")));
    let declared =
        json!([{"type": "function", "name": "lookup", "parameters": {"type": "object"}}]);
    let response = h
        .client
        .post(h.url("/v1/responses"))
        .bearer_auth(narrow)
        .json(&json!({"model": "m", "input": "1+1?", "store": false, "tools": declared}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let body: Value = response.json().await.unwrap();
    let first = &h.upstream.requests()[0].body;
    let offered: Vec<&str> = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(offered, ["lookup"], "only the client's tool: {first:#}");
    let output = body["output"].as_array().unwrap();
    assert!(
        output.iter().all(|i| i["type"] != "mcp_call"),
        "the gateway ran nothing: {body:#}"
    );
    let diagnostics: Vec<&str> = body["toolbridge_diagnostics"]
        .as_array()
        .map(|d| d.iter().filter_map(|d| d["code"].as_str()).collect())
        .unwrap_or_default();
    // The call named no tool the request may call: the existing hidden re-ask told the model.
    assert_eq!(diagnostics, ["tool_call_reasked"], "{body:#}");
    assert_eq!(h.upstream.requests().len(), 2);
    assert_eq!(output[0]["content"][0]["text"], "no calculator here");
}
