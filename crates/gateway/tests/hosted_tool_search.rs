//! Ring 2: the hosted `tool_search` (tools marked `defer_loading`, `tool_search` without
//! `execution: "client"`) run by the gateway, against a fake Chat upstream on 127.0.0.1:0: the
//! deferred tools stay out of the first round, the model's search is answered by the gateway
//! (ranked by the tool library's planner) and shown as `tool_search_call` + `tool_search_output`,
//! the next round offers the tools found, and a found namespace member's call comes back to the
//! client as a `function_call` with `namespace` and `name`; streamed and whole, and bounded.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code fails loudly

mod common;

use common::Harness;
use serde_json::{Value, json};
use toolbridge_testkit::chat::{chunk, usage_chunk};
use toolbridge_testkit::dialects::{Answer, Call, End, Usage, Wire};
use toolbridge_testkit::{FakeUpstream, Reply};

async fn harness() -> Harness {
    Harness::with_toml(|url| {
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
builtins = []
"#
        )
    })
    .await
}

/// A request with a hosted `tool_search`, a deferred namespace, a deferred function and one
/// ordinary function.
fn request(stream: bool) -> Value {
    json!({
        "model": "m",
        "input": "What does issue 7 say?",
        "store": false,
        "stream": stream,
        "tools": [
            {"type": "function", "name": "weather", "description": "Current weather for a city",
             "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}},
            {"type": "namespace", "name": "github", "description": "GitHub repositories",
             "tools": [
                {"type": "function", "name": "get_issue", "description": "Read an issue by its number",
                 "defer_loading": true,
                 "parameters": {"type": "object", "properties": {"number": {"type": "integer"}}, "required": ["number"]}},
                {"type": "function", "name": "merge_pull", "description": "Merge a pull request",
                 "defer_loading": true,
                 "parameters": {"type": "object", "properties": {"number": {"type": "integer"}}}}
             ]},
            {"type": "function", "name": "add_numbers", "description": "Add two numbers",
             "defer_loading": true,
             "parameters": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}}},
            {"type": "tool_search"}
        ]
    })
}

fn call(id: &str, name: &str, args: Value) -> Reply {
    Reply::json(toolbridge_testkit::chat::tool_calls_completion(&[(
        id, name, args,
    )]))
}

fn call_stream(id: &str, name: &str, args: &Value) -> Reply {
    Reply::sse(vec![
        chunk(json!({"role": "assistant", "content": ""}), None),
        chunk(
            json!({"tool_calls": [{"index": 0, "id": id, "type": "function", "function": {"name": name, "arguments": args.to_string()}}]}),
            None,
        ),
        chunk(json!({}), Some("tool_calls")),
        usage_chunk(10, 5),
    ])
}

fn tool_names(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// The upstream rounds: the first without the deferred tools, the second with the tool found
/// and the gateway's answer to the search.
fn check_rounds(upstream: &FakeUpstream) {
    let requests = upstream.requests();
    assert_eq!(requests.len(), 2);
    let first = tool_names(&requests[0].body);
    assert_eq!(first, ["weather", "tool_search"], "{:#}", requests[0].body);
    let second = tool_names(&requests[1].body);
    assert!(
        second.iter().any(|n| n == "github__get_issue"),
        "{second:?}"
    );
    assert!(!second.iter().any(|n| n == "add_numbers"), "{second:?}");
    assert!(second.iter().any(|n| n == "tool_search"), "{second:?}");
    let messages = requests[1].body["messages"].as_array().unwrap();
    let result = messages.last().unwrap();
    assert_eq!(result["role"], "tool");
    assert_eq!(result["tool_call_id"], "call_search");
    assert!(
        result["content"]
            .as_str()
            .unwrap()
            .contains("github__get_issue"),
        "{result}"
    );
}

fn check_output(output: &Value) {
    let output = output.as_array().unwrap();
    let kinds: Vec<&str> = output.iter().map(|i| i["type"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        ["tool_search_call", "tool_search_output", "function_call"],
        "{output:#?}"
    );
    let search = &output[0];
    assert_eq!(search["execution"], "server");
    assert_eq!(search["status"], "completed");
    assert_eq!(search["call_id"], "call_search");
    assert_eq!(search["arguments"]["query"], "read a github issue");
    let found = &output[1];
    assert_eq!(found["call_id"], "call_search");
    assert_eq!(found["execution"], "server");
    let tools = found["tools"].as_array().unwrap();
    assert_eq!(tools[0]["type"], "namespace");
    assert_eq!(tools[0]["name"], "github");
    assert_eq!(tools[0]["tools"][0]["name"], "get_issue");
    assert_eq!(tools[0]["tools"][0]["defer_loading"], true);
    assert!(
        !tools.iter().any(|t| t["name"] == "add_numbers"),
        "{tools:#?}"
    );
    let client_call = &output[2];
    assert_eq!(client_call["namespace"], "github");
    assert_eq!(client_call["name"], "get_issue");
    assert_eq!(client_call["call_id"], "call_issue");
}

#[tokio::test]
async fn a_hosted_search_finds_deferred_tools_and_the_next_round_offers_them() {
    let h = harness().await;
    h.upstream.push(call(
        "call_search",
        "tool_search",
        json!({"query": "read a github issue"}),
    ));
    h.upstream.push(call(
        "call_issue",
        "github__get_issue",
        json!({"number": 7}),
    ));
    let (status, body) = h.post_json(&request(false)).await;
    assert_eq!(status, 200, "{body}");
    h.check_response(&body);
    check_rounds(&h.upstream);
    check_output(&body["output"]);
}

#[tokio::test]
async fn a_streamed_hosted_search_shows_its_items_before_the_found_call() {
    let h = harness().await;
    h.upstream.push(call_stream(
        "call_search",
        "tool_search",
        &json!({"query": "read a github issue"}),
    ));
    h.upstream.push(call_stream(
        "call_issue",
        "github__get_issue",
        &json!({"number": 7}),
    ));
    let events = h.post_stream(&request(true)).await;
    let added: Vec<&str> = events
        .iter()
        .filter(|e| e.data["type"] == "response.output_item.added")
        .map(|e| e.data["item"]["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        added,
        ["tool_search_call", "tool_search_output", "function_call"]
    );
    let done: Vec<&Value> = events
        .iter()
        .filter(|e| e.data["type"] == "response.output_item.done")
        .map(|e| &e.data["item"])
        .collect();
    assert_eq!(done[0]["type"], "tool_search_call");
    assert_eq!(done[0]["status"], "completed");
    assert_eq!(done[1]["tools"][0]["tools"][0]["name"], "get_issue");
    let last = &events.last().unwrap().data;
    assert_eq!(last["type"], "response.completed");
    check_output(&last["response"]["output"]);
    check_rounds(&h.upstream);
}

#[tokio::test]
async fn searches_past_the_bound_are_answered_with_an_error() {
    let h = harness().await;
    for i in 0..5 {
        h.upstream.push(call(
            &format!("call_search_{i}"),
            "tool_search",
            json!({"query": "add two numbers"}),
        ));
    }
    h.upstream
        .push(Reply::json(toolbridge_testkit::chat::completion(
            "Done.", "stop",
        )));
    let (status, body) = h.post_json(&request(false)).await;
    assert_eq!(status, 200, "{body}");
    let output = body["output"].as_array().unwrap();
    let outputs = output
        .iter()
        .filter(|i| i["type"] == "tool_search_output")
        .count();
    let calls = output
        .iter()
        .filter(|i| i["type"] == "tool_search_call")
        .count();
    assert_eq!(calls, 5, "{body:#}");
    assert_eq!(outputs, 4, "{body:#}");
    let refused = output
        .iter()
        .rfind(|i| i["type"] == "tool_search_call")
        .unwrap();
    assert_eq!(refused["status"], "failed", "{refused}");
    let requests = h.upstream.requests();
    assert_eq!(requests.len(), 6);
    // The fourth search still ran; the fifth was refused.
    let result = |n: usize| {
        let messages = requests[n].body["messages"].as_array().unwrap();
        messages.last().unwrap()["content"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    assert!(result(4).contains("add_numbers"), "{}", result(4));
    assert!(result(5).contains("too_many_searches"), "{}", result(5));
    let last = tool_names(&requests[5].body);
    assert!(last.iter().any(|n| n == "add_numbers"), "{last:?}");
    assert!(!last.iter().any(|n| n == "github__get_issue"), "{last:?}");
}

#[tokio::test]
async fn a_stateless_replay_keeps_the_found_tools_and_the_search_exchange() {
    let h = harness().await;
    h.upstream.push(call(
        "call_search",
        "tool_search",
        json!({"query": "read a github issue"}),
    ));
    h.upstream.push(call(
        "call_issue",
        "github__get_issue",
        json!({"number": 7}),
    ));
    let (status, first) = h.post_json(&request(false)).await;
    assert_eq!(status, 200, "{first}");
    h.upstream
        .push(Reply::json(toolbridge_testkit::chat::completion(
            "Issue 7 is about a crash.",
            "stop",
        )));
    let mut input = vec![json!({"role": "user", "content": "What does issue 7 say?"})];
    input.extend(first["output"].as_array().unwrap().iter().cloned());
    input.push(json!({"type": "function_call_output", "call_id": "call_issue", "output": "It crashes on start."}));
    let mut next = request(false);
    next["input"] = Value::Array(input);
    let (status, body) = h.post_json(&next).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["output"][0]["type"], "message", "{body:#}");
    let requests = h.upstream.requests();
    let sent = &requests[2].body;
    let names = tool_names(sent);
    assert!(names.iter().any(|n| n == "github__get_issue"), "{names:?}");
    assert!(!names.iter().any(|n| n == "add_numbers"), "{names:?}");
    let messages = sent["messages"].as_array().unwrap();
    let calls: Vec<&str> = messages
        .iter()
        .filter_map(|m| m["tool_calls"].as_array())
        .flatten()
        .map(|c| c["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(calls, ["tool_search", "github__get_issue"], "{sent:#}");
    let results = messages.iter().filter(|m| m["role"] == "tool").count();
    assert_eq!(results, 2, "{sent:#}");
}

/// A Chat preset and the two other translated dialects, each by the provider's TOML line.
const TARGETS: &[(&str, Wire)] = &[
    ("preset = \"glm\"", Wire::Chat { think_tags: false }),
    ("dialect = \"anthropic\"", Wire::Anthropic),
    ("dialect = \"gemini\"", Wire::Gemini),
];

fn wire_call(id: &str, name: &str, arguments: Value) -> Answer {
    Answer {
        reasoning: Vec::new(),
        text: Vec::new(),
        calls: vec![Call {
            id: id.to_owned(),
            name: name.to_owned(),
            namespace: None,
            custom: false,
            arguments,
        }],
        end: End::ToolCalls,
        usage: Usage {
            input: 10,
            output: 5,
            ..Usage::default()
        },
    }
}

/// The function names an upstream request offers, in any dialect.
fn offered(body: &Value) -> Vec<String> {
    let mut names = Vec::new();
    for tool in body["tools"].as_array().into_iter().flatten() {
        for name in [&tool["function"]["name"], &tool["name"]] {
            names.extend(name.as_str().map(str::to_owned));
        }
        for d in tool["functionDeclarations"]
            .as_array()
            .into_iter()
            .flatten()
        {
            names.extend(d["name"].as_str().map(str::to_owned));
        }
    }
    names
}

#[tokio::test]
async fn the_hosted_search_works_through_every_translated_dialect() {
    for &(provider, wire) in TARGETS {
        for stream in [false, true] {
            let h = Harness::with_toml(|url| {
                format!(
                    "[providers.up]\nbase_url = \"{url}\"\napi_key_env = \"FAKE_UPSTREAM_KEY\"\nmax_retries = 0\n{provider}\n\n[[routes]]\nmodel = \"*\"\nprovider = \"up\"\n\n[gateway_tools]\nbuiltins = []\n"
                )
            })
            .await;
            let reply = |a: &Answer| {
                if stream {
                    wire.stream(a)
                } else {
                    wire.whole(a)
                }
            };
            h.upstream.push(reply(&wire_call(
                "call_search",
                "tool_search",
                json!({"query": "read a github issue"}),
            )));
            h.upstream.push(reply(&wire_call(
                "call_issue",
                "github__get_issue",
                json!({"number": 7}),
            )));
            let output = if stream {
                let events = h.post_stream(&request(true)).await;
                let last = &events.last().unwrap().data;
                assert_eq!(last["type"], "response.completed", "{provider}: {last}");
                last["response"]["output"].clone()
            } else {
                let (status, body) = h.post_json(&request(false)).await;
                assert_eq!(status, 200, "{provider}: {body}");
                body["output"].clone()
            };
            let items = output.as_array().unwrap();
            let kinds: Vec<&str> = items.iter().map(|i| i["type"].as_str().unwrap()).collect();
            assert_eq!(
                kinds,
                ["tool_search_call", "tool_search_output", "function_call"],
                "{provider} {stream}: {items:#?}"
            );
            assert_eq!(items[2]["namespace"], "github", "{provider}");
            assert_eq!(items[2]["name"], "get_issue", "{provider}");
            let requests = h.upstream.requests();
            assert_eq!(requests.len(), 2, "{provider}");
            let first = offered(&requests[0].body);
            assert_eq!(first, ["weather", "tool_search"], "{provider}");
            let second = offered(&requests[1].body);
            assert!(
                second.iter().any(|n| n == "github__get_issue"),
                "{provider}: {second:?}"
            );
            assert!(
                !second.iter().any(|n| n == "add_numbers"),
                "{provider}: {second:?}"
            );
        }
    }
}

#[tokio::test]
async fn a_stored_response_carries_the_search_items_into_its_chain() {
    let h = harness().await;
    h.upstream.push(call(
        "call_search",
        "tool_search",
        json!({"query": "read a github issue"}),
    ));
    h.upstream.push(call(
        "call_issue",
        "github__get_issue",
        json!({"number": 7}),
    ));
    let mut first = request(false);
    first["store"] = json!(true);
    let (status, body) = h.post_json(&first).await;
    assert_eq!(status, 200, "{body}");
    check_output(&body["output"]);
    h.upstream
        .push(Reply::json(toolbridge_testkit::chat::completion(
            "It crashes.",
            "stop",
        )));
    let mut next = request(false);
    next["store"] = json!(true);
    next["previous_response_id"] = body["id"].clone();
    next["input"] = json!([{"type": "function_call_output", "call_id": "call_issue", "output": "It crashes on start."}]);
    let (status, answer) = h.post_json(&next).await;
    assert_eq!(status, 200, "{answer}");
    let names = tool_names(&h.upstream.requests()[2].body);
    assert!(names.iter().any(|n| n == "github__get_issue"), "{names:?}");
    assert!(!names.iter().any(|n| n == "add_numbers"), "{names:?}");
}
