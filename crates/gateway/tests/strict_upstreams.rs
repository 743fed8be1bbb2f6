//! Ring 2: what Codex sends, through strict upstreams that answer 400 to anything they do not
//! take — fields Codex adds (`client_metadata`, `access_programs`, `generate`,
//! `prompt_cache_key`), `custom` tools, `namespace` — and tool outputs given as content parts,
//! checked in the wire body the fake upstream received. The gateway must leave out, map or
//! plan every such thing, say so in diagnostics, and restore the calls the client declared.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code fails loudly

mod common;

use std::sync::Arc;

use common::Harness;
use serde_json::{Value, json};
use toolbridge_testkit::dialects::RESPONSES_FIELDS;
use toolbridge_testkit::dialects::{Answer, Call, End, Usage, Wire};
use toolbridge_testkit::{Recorded, Reply};

/// The fields a strict Chat Completions endpoint knows.
const CHAT_FIELDS: &[&str] = &[
    "model",
    "messages",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "temperature",
    "top_p",
    "max_tokens",
    "max_completion_tokens",
    "stream",
    "stream_options",
    "stop",
    "user",
    "response_format",
    "thinking",
    "reasoning_effort",
    "presence_penalty",
    "frequency_penalty",
];

fn refuse(message: String) -> Option<Reply> {
    Some(Reply::error(
        400,
        json!({"error": {"message": message, "type": "invalid_request_error", "param": null, "code": "invalid_request"}}),
    ))
}

/// A strict Chat endpoint: an unknown top-level field is a 400.
fn strict_chat(r: &Recorded) -> Option<Reply> {
    let body = r.body.as_object()?;
    body.keys()
        .find(|k| !CHAT_FIELDS.contains(&k.as_str()))
        .and_then(|k| refuse(format!("unknown field `{k}`")))
}

/// A DeepSeek-like native Responses endpoint: unknown fields, every tool but functions and
/// `web_search`, custom calls, tool search items and `namespace` anywhere are a 400.
fn strict_responses(r: &Recorded) -> Option<Reply> {
    let body = r.body.as_object()?;
    if let Some(k) = body
        .keys()
        .find(|k| !RESPONSES_FIELDS.contains(&k.as_str()))
    {
        return refuse(format!("unknown field `{k}`"));
    }
    for tool in body
        .get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let kind = tool["type"].as_str().unwrap_or_default();
        if !["function", "web_search"].contains(&kind) {
            return refuse(format!("tool type `{kind}` is not supported"));
        }
    }
    for item in body
        .get("input")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let kind = item["type"].as_str().unwrap_or_default();
        if kind.starts_with("custom_tool_call")
            || kind.starts_with("tool_search")
            || item.get("namespace").is_some()
        {
            return refuse(format!("input item `{kind}` is not supported"));
        }
    }
    None
}

fn codes(body: &Value) -> Vec<(String, String)> {
    body["toolbridge_diagnostics"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|d| {
            (
                d["code"].as_str().unwrap_or_default().to_owned(),
                d["param"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

fn text_answer(text: &str) -> Answer {
    Answer {
        reasoning: Vec::new(),
        text: vec![text.to_owned()],
        calls: Vec::new(),
        end: End::Stop,
        usage: Usage {
            input: 10,
            cached: 0,
            output: 3,
            reasoning: 0,
        },
    }
}

/// What Codex adds to every request beside the conversation.
fn codex_extras(mut request: Value) -> Value {
    let extras = json!({
        "client_metadata": {"x-codex-installation-id": "abc"},
        "access_programs": ["default"],
        "generate": true,
        "prompt_cache_key": "thread-7",
        "reasoning": {"effort": "medium", "summary": "auto"},
    });
    for (k, v) in extras.as_object().unwrap() {
        request[k] = v.clone();
    }
    request
}

#[tokio::test]
async fn codex_fields_do_not_reach_a_strict_chat_upstream_and_each_is_reported() {
    let h = Harness::with_preset("deepseek").await;
    h.upstream.set_gate(Arc::new(strict_chat));
    h.upstream
        .push(Wire::Chat { think_tags: false }.whole(&text_answer("ok")));
    let (status, body) = h
        .post_json(&codex_extras(json!({"model": "m", "input": "hi"})))
        .await;
    assert_eq!(status, 200, "{body:#}");
    let sent = h.upstream.last_body();
    assert!(sent.get("prompt_cache_key").is_none(), "{sent:#}");
    let got = codes(&body);
    for field in [
        "client_metadata",
        "access_programs",
        "generate",
        "prompt_cache_key",
    ] {
        assert!(
            got.contains(&("param_dropped".to_owned(), field.to_owned())),
            "{field} reported: {got:?}"
        );
    }
    // The reasoning object is said the provider's way (DeepSeek's `thinking`).
    assert_eq!(sent["thinking"], json!({"type": "enabled"}));
}

#[tokio::test]
async fn the_cache_key_goes_where_the_profile_says_the_provider_reads_one() {
    let h = Harness::with_toml(|url| {
        format!(
            r#"
[providers.up]
base_url = "{url}"
api_key_env = "FAKE_UPSTREAM_KEY"
preset = "generic"
profile = {{ fields = {{ rename = {{ prompt_cache_key = "user" }} }} }}

[[routes]]
model = "*"
provider = "up"
"#
        )
    })
    .await;
    h.upstream.set_gate(Arc::new(strict_chat));
    h.upstream
        .push(Wire::Chat { think_tags: false }.whole(&text_answer("ok")));
    let (status, body) = h
        .post_json(&json!({"model": "m", "input": "hi", "prompt_cache_key": "thread-7"}))
        .await;
    assert_eq!(status, 200, "{body:#}");
    assert_eq!(h.upstream.last_body()["user"], "thread-7");
    assert!(
        codes(&body).contains(&("param_renamed".to_owned(), "prompt_cache_key".to_owned())),
        "{body:#}"
    );
}

#[tokio::test]
async fn an_array_tool_output_reaches_anthropic_as_tool_result_blocks() {
    let h = Harness::with_toml(|url| {
        format!(
            r#"
[providers.claude]
dialect = "anthropic"
base_url = "{url}"
api_key_env = "FAKE_UPSTREAM_KEY"

[[routes]]
model = "*"
provider = "claude"
"#
        )
    })
    .await;
    h.upstream
        .push(Wire::Anthropic.whole(&text_answer("A chart.")));
    let (status, body) = h
        .post_json(&json!({
            "model": "m",
            "tools": [{"type": "function", "name": "lookup", "parameters": {"type": "object", "properties": {}}}],
            "input": [
                {"role": "user", "content": "Show me."},
                {"type": "function_call", "call_id": "call_1", "name": "lookup", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "call_1", "output": [
                    {"type": "input_text", "text": "Here:"},
                    {"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo="}
                ]}
            ]
        }))
        .await;
    assert_eq!(status, 200, "{body:#}");
    let sent = h.upstream.last_body();
    assert_eq!(
        sent["messages"][2]["content"][0],
        json!({"type": "tool_result", "tool_use_id": "call_1", "content": [
            {"type": "text", "text": "Here:"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}
        ],
        // The last message carries the gateway's cache breakpoint (anthropic/cache.rs).
        "cache_control": {"type": "ephemeral"}})
    );
}

async fn deepseek_responses() -> Harness {
    let h = Harness::with_toml(|url| {
        format!(
            r#"
[providers.ds]
dialect = "responses"
preset = "deepseek-responses"
base_url = "{url}"
api_key_env = "FAKE_UPSTREAM_KEY"

[[routes]]
model = "*"
provider = "ds"
upstream_model = "deepseek-v4-flash"
"#
        )
    })
    .await;
    h.upstream.set_gate(Arc::new(strict_responses));
    h
}

/// A Codex turn: a freeform `apply_patch`, an MCP namespace, earlier calls to both in history.
fn codex_turn(stream: bool) -> Value {
    codex_extras(json!({
        "model": "deepseek", "stream": stream,
        "tools": [
            {"type": "function", "name": "exec_command", "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}}},
            {"type": "custom", "name": "apply_patch", "description": "Edit files.",
             "format": {"type": "grammar", "syntax": "lark", "definition": "start: /.+/"}},
            {"type": "namespace", "name": "mcp__docs", "description": "Docs", "tools": [
                {"type": "function", "name": "search", "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}
            ]}
        ],
        "tool_choice": "auto",
        "input": [
            {"role": "user", "content": "Fix it."},
            {"type": "custom_tool_call", "call_id": "c1", "name": "apply_patch", "input": "*** Begin Patch\n*** End Patch"},
            {"type": "custom_tool_call_output", "call_id": "c1", "output": "Done"},
            {"type": "function_call", "call_id": "c2", "namespace": "mcp__docs", "name": "search", "arguments": "{\"q\":\"x\"}"},
            {"type": "function_call_output", "call_id": "c2", "output": [{"type": "input_text", "text": "found"}]}
        ]
    }))
}

fn calls_answer() -> Answer {
    Answer {
        reasoning: vec!["Think.".to_owned()],
        text: Vec::new(),
        calls: vec![
            Call {
                id: "call_a".to_owned(),
                name: "apply_patch".to_owned(),
                namespace: None,
                custom: false,
                arguments: json!({"input": "*** Begin Patch\n*** Add File: a\n+x\n*** End Patch"}),
            },
            Call {
                id: "call_b".to_owned(),
                name: "mcp__docs__search".to_owned(),
                namespace: None,
                custom: false,
                arguments: json!({"q": "y"}),
            },
        ],
        end: End::ToolCalls,
        usage: Usage {
            input: 10,
            cached: 0,
            output: 3,
            reasoning: 1,
        },
    }
}

fn check_sent(sent: &Value) {
    let tools: Vec<(&str, &str)> = sent["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["type"].as_str().unwrap(), t["name"].as_str().unwrap()))
        .collect();
    assert_eq!(
        tools,
        [
            ("function", "exec_command"),
            ("function", "apply_patch"),
            ("function", "mcp__docs__search")
        ],
        "{sent:#}"
    );
    // The exec_command tool goes exactly as declared.
    assert_eq!(sent["tools"][0], codex_turn(false)["tools"][0]);
    let input = &sent["input"];
    assert_eq!(
        input[1],
        json!({"type": "function_call", "call_id": "c1", "name": "apply_patch",
               "arguments": "{\"input\":\"*** Begin Patch\\n*** End Patch\"}"})
    );
    assert_eq!(
        input[2],
        json!({"type": "function_call_output", "call_id": "c1", "output": "Done"})
    );
    assert_eq!(input[3]["name"], "mcp__docs__search");
    assert!(input[3].get("namespace").is_none());
    assert_eq!(
        input[4]["output"],
        json!([{"type": "input_text", "text": "found"}])
    );
    assert_eq!(
        sent["reasoning"],
        json!({"effort": "medium", "summary": "auto"})
    );
}

fn check_restored(output: &[Value]) {
    let kinds: Vec<&str> = output.iter().map(|i| i["type"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        ["reasoning", "custom_tool_call", "function_call"],
        "{output:#?}"
    );
    assert_eq!(output[1]["name"], "apply_patch");
    assert_eq!(output[1]["call_id"], "call_a");
    assert_eq!(
        output[1]["input"],
        "*** Begin Patch\n*** Add File: a\n+x\n*** End Patch"
    );
    assert_eq!(output[2]["namespace"], "mcp__docs");
    assert_eq!(output[2]["name"], "search");
    assert_eq!(output[2]["arguments"], "{\"q\":\"y\"}");
}

#[tokio::test]
async fn a_codex_turn_through_a_strict_native_responses_upstream_whole() {
    let h = deepseek_responses().await;
    h.upstream.push(Wire::Responses.whole(&calls_answer()));
    let (status, body) = h.post_json(&codex_turn(false)).await;
    assert_eq!(status, 200, "{body:#}");
    check_sent(&h.upstream.last_body());
    check_restored(body["output"].as_array().unwrap());
    let got = codes(&body);
    for field in [
        "client_metadata",
        "access_programs",
        "generate",
        "prompt_cache_key",
    ] {
        assert!(
            got.contains(&("param_dropped".to_owned(), field.to_owned())),
            "{field}: {got:?}"
        );
    }
    assert!(
        got.contains(&("tool_degraded".to_owned(), "tools[1]".to_owned())),
        "{got:?}"
    );
    h.check_response(&body);
}

#[tokio::test]
async fn a_codex_turn_through_a_strict_native_responses_upstream_streamed() {
    let h = deepseek_responses().await;
    h.upstream.push(Wire::Responses.stream(&calls_answer()));
    let events = h.post_stream(&codex_turn(true)).await;
    check_sent(&h.upstream.last_body());
    common::check_stream(&events, h.schema.as_ref());
    let last = &events.last().unwrap().data;
    assert_eq!(last["type"], "response.completed", "{last:#}");
    check_restored(last["response"]["output"].as_array().unwrap());
    // The custom call is shown whole, as the client's type, with its input in one delta.
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| e.data["type"].as_str().unwrap())
        .collect();
    assert!(
        kinds.contains(&"response.custom_tool_call_input.delta"),
        "{kinds:?}"
    );
    let done: Vec<&Value> = events
        .iter()
        .filter(|e| e.data["type"] == "response.output_item.done")
        .map(|e| &e.data["item"])
        .collect();
    check_restored(&done.into_iter().cloned().collect::<Vec<_>>());
    // No event still shows the degraded function form of the custom call.
    assert!(
        !events
            .iter()
            .any(|e| e.data["item"]["type"] == "function_call"
                && e.data["item"]["name"] == "apply_patch"),
        "degraded form leaked"
    );
}

#[tokio::test]
async fn the_generic_responses_preset_passes_unknown_fields_and_every_tool() {
    let h = Harness::with_toml(|url| {
        format!(
            r#"
[providers.openai]
dialect = "responses"
base_url = "{url}"
api_key_env = "FAKE_UPSTREAM_KEY"

[[routes]]
model = "*"
provider = "openai"
"#
        )
    })
    .await;
    h.upstream.push(Wire::Responses.whole(&text_answer("ok")));
    let request = codex_turn(false);
    let (status, body) = h.post_json(&request).await;
    assert_eq!(status, 200, "{body:#}");
    let sent = h.upstream.last_body();
    assert_eq!(sent["tools"], request["tools"]);
    assert_eq!(sent["input"], request["input"]);
    assert_eq!(sent["client_metadata"], request["client_metadata"]);
    assert_eq!(sent["generate"], true);
}

/// A Codex turn after a client-run `tool_search` found an MCP namespace.
fn searched_turn(stream: bool) -> Value {
    json!({
        "model": "deepseek", "stream": stream, "store": false,
        "tools": [
            {"type": "function", "name": "exec_command", "parameters": {"type": "object"}},
            {"type": "tool_search", "execution": "client", "description": "Finds tools.",
             "parameters": {"type": "object", "properties": {"query": {"type": "string"}}}}
        ],
        "input": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "search the docs"}]},
            {"type": "tool_search_call", "call_id": "s1", "execution": "client", "status": "completed",
             "arguments": {"query": "docs"}},
            {"type": "tool_search_output", "call_id": "s1", "execution": "client", "status": "completed",
             "tools": [{"type": "namespace", "name": "mcp__docs", "description": "Docs server",
                        "tools": [{"type": "function", "name": "search", "description": "Searches the docs.",
                                   "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}]}]}
        ]
    })
}

fn found_call_answer() -> Answer {
    Answer {
        reasoning: Vec::new(),
        text: Vec::new(),
        // Through `call_found_tool`: found tools are not declared (the tool list stays the
        // first round's).
        calls: vec![Call {
            id: "call_f".to_owned(),
            name: "call_found_tool".to_owned(),
            namespace: None,
            custom: false,
            arguments: json!({"name": "mcp__docs__search", "arguments": {"q": "install"}}),
        }],
        end: End::ToolCalls,
        usage: Usage {
            input: 10,
            cached: 0,
            output: 3,
            reasoning: 0,
        },
    }
}

/// The echoed search reached the upstream as its function's call and output, and the tools it
/// found are named in that output (called through `call_found_tool`, declared from the start).
fn check_search_sent(sent: &Value) {
    let tools: Vec<&str> = sent["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        tools,
        ["exec_command", "tool_search", "call_found_tool"],
        "{sent:#}"
    );
    let input = &sent["input"];
    assert_eq!(
        input[1],
        json!({"type": "function_call", "call_id": "s1", "name": "tool_search",
               "arguments": "{\"query\":\"docs\"}", "status": "completed"})
    );
    assert_eq!(input[2]["type"], "function_call_output", "{input:#}");
    assert_eq!(input[2]["call_id"], "s1");
    let text = input[2]["output"].as_str().unwrap();
    assert!(
        text.contains("- mcp__docs__search: Searches the docs."),
        "{text}"
    );
}

#[tokio::test]
async fn an_echoed_tool_search_reaches_a_strict_native_upstream_as_its_function_whole() {
    let h = deepseek_responses().await;
    h.upstream.push(Wire::Responses.whole(&found_call_answer()));
    let (status, body) = h.post_json(&searched_turn(false)).await;
    assert_eq!(status, 200, "{body:#}");
    check_search_sent(&h.upstream.last_body());
    // The found member's call comes back with its namespace, as the client declared it.
    let call = &body["output"][0];
    assert_eq!(call["type"], "function_call", "{body:#}");
    assert_eq!(call["namespace"], "mcp__docs");
    assert_eq!(call["name"], "search");
    assert_eq!(call["arguments"], r#"{"q":"install"}"#);
    h.check_response(&body);
}

#[tokio::test]
async fn an_echoed_tool_search_reaches_a_strict_native_upstream_as_its_function_streamed() {
    let h = deepseek_responses().await;
    h.upstream
        .push(Wire::Responses.stream(&found_call_answer()));
    let events = h.post_stream(&searched_turn(true)).await;
    check_search_sent(&h.upstream.last_body());
    let last = &events.last().unwrap().data;
    assert_eq!(last["type"], "response.completed", "{last:#}");
    assert_eq!(last["response"]["output"][0]["namespace"], "mcp__docs");
    assert_eq!(last["response"]["output"][0]["name"], "search");
    assert_eq!(
        last["response"]["output"][0]["arguments"],
        r#"{"q":"install"}"#
    );
    // The arguments streamed are the found tool's own.
    let streamed: String = events
        .iter()
        .filter(|e| e.data["type"] == "response.function_call_arguments.delta")
        .filter_map(|e| e.data["delta"].as_str())
        .collect();
    assert_eq!(streamed, r#"{"q":"install"}"#);
}

#[tokio::test]
async fn allowed_tools_naming_a_degraded_tool_reach_a_strict_native_upstream_by_its_function() {
    let h = deepseek_responses().await;
    h.upstream.push(Wire::Responses.whole(&calls_answer()));
    let mut request = codex_turn(false);
    request["tool_choice"] = json!({"type": "allowed_tools", "mode": "required", "tools": [
        {"type": "custom", "name": "apply_patch"},
        {"type": "function", "name": "exec_command"}
    ]});
    let (status, body) = h.post_json(&request).await;
    assert_eq!(status, 200, "{body:#}");
    assert_eq!(
        h.upstream.last_body()["tool_choice"],
        json!({"type": "allowed_tools", "mode": "required", "tools": [
            {"type": "function", "name": "apply_patch"},
            {"type": "function", "name": "exec_command"}
        ]})
    );
}
