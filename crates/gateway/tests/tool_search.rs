//! Client-run `tool_search` (Codex's form, `execution: "client"`) through every translated
//! dialect, streamed and whole: the provider gets `tool_search` as a function, the model's call
//! comes back as a `tool_search_call` item; the tools of a `tool_search_output` in the input are
//! lifted into the next round's tool list, and a call to one comes back as a `function_call` with
//! its `namespace`; the echoed search goes upstream as the degraded call and its result.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code fails loudly

mod common;

use common::Harness;
use serde_json::{Value, json};
use toolbridge_testkit::dialects::{Answer, Call, End, Usage, Wire};

/// A Chat preset and the two other translated dialects, each by the provider's TOML line.
const TARGETS: &[(&str, Wire)] = &[
    ("preset = \"glm\"", Wire::Chat { think_tags: false }),
    ("dialect = \"anthropic\"", Wire::Anthropic),
    ("dialect = \"gemini\"", Wire::Gemini),
];

async fn harness(provider: &str) -> Harness {
    Harness::with_toml(|url| {
        format!(
            "[providers.up]\nbase_url = \"{url}\"\napi_key_env = \"FAKE_UPSTREAM_KEY\"\n{provider}\n\n[[routes]]\nmodel = \"*\"\nprovider = \"up\"\n"
        )
    })
    .await
}

fn codex_tools() -> Value {
    json!([
        {"type": "function", "name": "exec_command", "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]}},
        {"type": "tool_search", "execution": "client", "description": "Search deferred tools.",
         "parameters": {"type": "object", "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}}, "required": ["query"]}}
    ])
}

fn probe_search(call_id: &str) -> Vec<Value> {
    vec![
        json!({"type": "tool_search_call", "id": "tsc_1", "call_id": call_id, "execution": "client", "arguments": {"query": "add"}, "status": "completed"}),
        json!({"type": "tool_search_output", "id": "tso_1", "call_id": call_id, "execution": "client", "status": "completed", "tools": [
            {"type": "namespace", "name": "mcp__probe", "description": "Tools in the mcp__probe namespace.", "tools": [
                {"type": "function", "name": "add_numbers", "description": "Add two integers.", "strict": false, "defer_loading": true,
                 "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}}
            ]}
        ]}),
    ]
}

fn call(name: &str, arguments: Value) -> Answer {
    Answer {
        reasoning: Vec::new(),
        text: Vec::new(),
        calls: vec![Call {
            id: "call_1".to_owned(),
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
            if let Some(n) = name.as_str() {
                names.push(n.to_owned());
            }
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

/// Posts `body` streamed or whole and returns the response's output items (checking that a
/// streamed item was added before it was done).
async fn output(h: &Harness, body: &Value, stream: bool) -> Vec<Value> {
    let mut body = body.clone();
    body["stream"] = json!(stream);
    if !stream {
        let (status, response) = h.post_json(&body).await;
        assert_eq!(status, 200, "{response}");
        h.check_response(&response);
        assert!(
            !response["output"].as_array().unwrap().is_empty(),
            "{response:#}\nupstream: {:#}",
            h.upstream.last_body()
        );
        return response["output"].as_array().unwrap().clone();
    }
    let events = h.post_stream(&body).await;
    let added: Vec<&Value> = events
        .iter()
        .filter(|e| e.data["type"] == "response.output_item.added")
        .map(|e| &e.data["item"])
        .collect();
    let last = &events.last().unwrap().data;
    assert_eq!(last["type"], "response.completed", "{last}");
    let items = last["response"]["output"].as_array().unwrap().clone();
    for item in &items {
        assert!(
            added
                .iter()
                .any(|a| a["id"] == item["id"] && a["type"] == item["type"]),
            "{item} was not added first"
        );
    }
    items
}

#[tokio::test]
async fn the_models_search_comes_back_as_a_tool_search_call_in_every_dialect() {
    for &(preset, wire) in TARGETS {
        for stream in [false, true] {
            let h = harness(preset).await;
            let answer = call("tool_search", json!({"query": "add two numbers"}));
            h.upstream.push(if stream {
                wire.stream(&answer)
            } else {
                wire.whole(&answer)
            });
            let items = output(
                &h,
                &json!({"model": "m", "input": "add 2 and 3", "tools": codex_tools()}),
                stream,
            )
            .await;
            let item = &items[0];
            assert_eq!(
                item["type"], "tool_search_call",
                "{preset} {stream}: {items:?}"
            );
            assert_eq!(item["execution"], "client");
            assert_eq!(item["arguments"], json!({"query": "add two numbers"}));
            assert_eq!(item["status"], "completed");
            assert!(item["call_id"].as_str().is_some_and(|c| !c.is_empty()));
            let names = offered(&h.upstream.last_body());
            assert!(
                names.contains(&"tool_search".to_owned()),
                "{preset}: {names:?}"
            );
        }
    }
}

#[tokio::test]
async fn found_tools_are_offered_next_round_and_their_calls_keep_the_namespace() {
    for &(preset, wire) in TARGETS {
        for stream in [false, true] {
            let h = harness(preset).await;
            // The model calls the found tool through `call_found_tool`, as the search's result
            // tells it.
            let answer = call(
                "call_found_tool",
                json!({"name": "mcp__probe__add_numbers", "arguments": {"a": 2, "b": 3}}),
            );
            h.upstream.push(if stream {
                wire.stream(&answer)
            } else {
                wire.whole(&answer)
            });
            let mut input = vec![json!({"role": "user", "content": "add 2 and 3"})];
            input.extend(probe_search("call_ts_1"));
            let items = output(
                &h,
                &json!({"model": "m", "input": input, "tools": codex_tools()}),
                stream,
            )
            .await;
            let item = &items[0];
            assert_eq!(
                item["type"], "function_call",
                "{preset} {stream}: {items:?}"
            );
            assert_eq!(item["namespace"], "mcp__probe");
            assert_eq!(item["name"], "add_numbers");
            assert_eq!(
                serde_json::from_str::<Value>(item["arguments"].as_str().unwrap()).unwrap(),
                json!({"a": 2, "b": 3})
            );
            let upstream = h.upstream.last_body();
            let names = offered(&upstream);
            // The tool list is the first round's: found tools are not declared.
            assert_eq!(
                names,
                ["exec_command", "tool_search", "call_found_tool"],
                "{preset}"
            );
            // Gemini pairs a result with its call by name.
            let responses: Vec<&Value> = upstream["contents"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|c| c["parts"].as_array())
                .flatten()
                .filter_map(|p| p.get("functionResponse"))
                .collect();
            if wire == Wire::Gemini {
                assert_eq!(responses.len(), 1, "{upstream}");
                assert_eq!(responses[0]["name"], "tool_search");
            }
            // The search went back as the degraded call, answered with what it found.
            let text = upstream.to_string();
            assert!(
                text.contains("mcp__probe__add_numbers: Add two integers."),
                "{preset}: {text}"
            );
            assert!(
                text.contains("add\\\"") || text.contains("\"query\":\"add\""),
                "{preset}: {text}"
            );
        }
    }
}

#[tokio::test]
async fn found_tools_stay_on_the_chain_with_previous_response_id() {
    let h = harness("preset = \"glm\"").await;
    let wire = Wire::Chat { think_tags: false };
    // Turn one: the model searches; the response is stored.
    h.upstream
        .push(wire.whole(&call("tool_search", json!({"query": "add"}))));
    let (status, first) = h
        .post_json(
            &json!({"model": "m", "input": "add 2 and 3", "tools": codex_tools(), "store": true}),
        )
        .await;
    assert_eq!(status, 200, "{first}");
    let call_id = first["output"][0]["call_id"].as_str().unwrap().to_owned();
    // Turn two answers the search; turn three only answers the call: the found tools come
    // from the stored chain.
    let mut add = call(
        "call_found_tool",
        json!({"name": "mcp__probe__add_numbers", "arguments": {"a": 2, "b": 3}}),
    );
    add.calls[0].id = "call_2".to_owned();
    h.upstream.push(wire.whole(&add));
    let output_item = probe_search(&call_id).remove(1);
    let (status, second) = h
        .post_json(&json!({"model": "m", "previous_response_id": first["id"], "input": [output_item], "tools": codex_tools(), "store": true}))
        .await;
    assert_eq!(status, 200, "{second}");
    let add_call = second["output"][0].clone();
    assert_eq!(add_call["namespace"], "mcp__probe");
    h.upstream.push(wire.whole(&Answer {
        text: vec!["5".to_owned()],
        calls: Vec::new(),
        end: End::Stop,
        ..call("", json!({}))
    }));
    let (status, third) = h
        .post_json(
            &json!({"model": "m", "previous_response_id": second["id"], "input": [
            {"type": "function_call_output", "call_id": add_call["call_id"], "output": "5"}
        ], "tools": codex_tools()}),
        )
        .await;
    assert_eq!(status, 200, "{third}");
    assert_eq!(h.upstream.requests().len(), 3, "{second:#}\n{third:#}");
    let sent = h.upstream.last_body();
    let names = offered(&sent);
    assert!(names.contains(&"call_found_tool".to_owned()), "{names:?}");
    // The call replays through `call_found_tool`, naming the found tool the stored chain
    // carries.
    let replayed = sent["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["tool_calls"].as_array())
        .flatten()
        .find(|c| c["function"]["name"] == "call_found_tool")
        .unwrap_or_else(|| panic!("{sent:#}"));
    assert_eq!(
        serde_json::from_str::<Value>(replayed["function"]["arguments"].as_str().unwrap()).unwrap(),
        json!({"name": "mcp__probe__add_numbers", "arguments": {"a": 2, "b": 3}})
    );
}

/// Code-mode slugs declare their tools in an `additional_tools` input item and send no `tools`:
/// they are planned like declared ones (a freeform tool inside a namespace comes back as a
/// `custom_tool_call` with its namespace) and stay on the stored chain's next round.
#[tokio::test]
async fn additional_tools_are_served_and_kept_across_the_chain() {
    let h = harness("dialect = \"anthropic\"").await;
    let wire = Wire::Anthropic;
    h.upstream
        .push(wire.whole(&call("functions__exec", json!({"input": "1+1"}))));
    let (status, first) = h
        .post_json(&json!({"model": "m", "store": true, "input": [
            {"type": "additional_tools", "role": "developer", "tools": [
                {"type": "namespace", "name": "functions", "description": "Code mode.", "tools": [
                    {"type": "custom", "name": "exec", "description": "Run JavaScript.", "format": {"type": "grammar", "syntax": "lark", "definition": "start: /.+/"}}
                ]}
            ]},
            {"role": "user", "content": "compute 1+1"}
        ]}))
        .await;
    assert_eq!(status, 200, "{first}");
    let item = &first["output"][0];
    assert_eq!(item["type"], "custom_tool_call", "{first}");
    assert_eq!(
        (
            item["namespace"].as_str(),
            item["name"].as_str(),
            item["input"].as_str()
        ),
        (Some("functions"), Some("exec"), Some("1+1"))
    );
    assert!(
        first["toolbridge_diagnostics"]
            .as_array()
            .unwrap()
            .iter()
            .all(|d| d["code"] != "item_dropped"),
        "{first}"
    );
    assert_eq!(offered(&h.upstream.last_body()), ["functions__exec"]);
    h.upstream.push(wire.whole(&Answer {
        text: vec!["2".to_owned()],
        calls: Vec::new(),
        end: End::Stop,
        ..call("", json!({}))
    }));
    let (status, second) = h
        .post_json(
            &json!({"model": "m", "previous_response_id": first["id"], "input": [
                {"type": "custom_tool_call_output", "call_id": item["call_id"], "output": "2"}
            ]}),
        )
        .await;
    assert_eq!(status, 200, "{second}");
    assert_eq!(offered(&h.upstream.last_body()), ["functions__exec"]);
}
