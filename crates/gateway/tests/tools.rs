//! Ring 2: tools through the whole app. What the provider sees for each declared tool type, and
//! how each call it makes comes back, streamed and not.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code fails loudly

mod common;

use common::Harness;
use serde_json::{Value, json};
use toolbridge_testkit::Reply;
use toolbridge_testkit::chat::chunk;
use toolbridge_testkit::sse::types;

const PATCH: &str = "*** Begin Patch\n*** Add File: hello.txt\n+hello\n*** End Patch\n";

fn codex_like_tools() -> Value {
    json!([
        {"type": "function", "name": "exec_command", "strict": false, "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]}},
        {"type": "custom", "name": "apply_patch", "description": "Edit files.", "format": {"type": "grammar", "syntax": "lark", "definition": "start: begin_patch hunk+ end_patch"}},
        {"type": "namespace", "name": "multi_agent_v1", "description": "agents", "tools": [{"type": "function", "name": "close_agent", "parameters": {"type": "object", "properties": {"id": {"type": "string"}}}}]},
        {"type": "tool_search", "execution": "client", "description": "find tools", "parameters": {"type": "object"}},
        {"type": "web_search", "external_web_access": false},
    ])
}

/// One whole call per chunk, as GLM sends them without `tool_stream`.
fn whole_call(index: u32, id: &str, name: &str, arguments: &str) -> Value {
    chunk(
        json!({"tool_calls": [{"index": index, "id": id, "type": "function", "function": {"name": name, "arguments": arguments}}]}),
        None,
    )
}

#[tokio::test]
async fn the_provider_sees_functions_only_and_every_decision_is_reported() {
    let h = Harness::with_preset("glm").await;
    h.upstream
        .push(Reply::json(toolbridge_testkit::chat::completion(
            "ok", "stop",
        )));
    let response = h
        .post(&json!({"model": "glm-5.1", "input": "hi", "tools": codex_like_tools(), "tool_choice": "auto"}))
        .await;
    assert_eq!(response.status(), 200);
    let header = response.headers()["x-toolbridge-diagnostics"]
        .to_str()
        .unwrap()
        .to_owned();
    // `tool_search` (client-run) goes as a function whose calls become `tool_search_call` items.
    // `strict: false` needs no diagnostic: nothing the client asked for is lost. The stub
    // grammar of `apply_patch` cannot be compiled, so its calls go unchecked, and that is said.
    assert_eq!(
        header,
        "tool_degraded:tools[1],tool_degraded:tools[2],tool_degraded:tools[3],tool_ignored:tools[4],custom_input_unchecked"
    );
    let sent = h.upstream.last_body();
    let names: Vec<&str> = sent["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            assert_eq!(t["type"], "function");
            t["function"]["name"].as_str().unwrap()
        })
        .collect();
    assert_eq!(
        names,
        [
            "exec_command",
            "apply_patch",
            "multi_agent_v1__close_agent",
            "tool_search",
            // Declared with the search, for the tools it will find.
            "call_found_tool"
        ]
    );
    assert_eq!(sent["tool_choice"], "auto");
    assert_eq!(
        sent["tools"][1]["function"]["parameters"]["properties"]["input"]["type"],
        "string"
    );
    let body: Value = response.json().await.unwrap();
    // The response echoes every tool the client declared, whatever became of it upstream.
    let echoed: Vec<(&str, Option<&str>)> = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["type"].as_str().unwrap(), t["name"].as_str()))
        .collect();
    assert_eq!(
        echoed,
        [
            ("function", Some("exec_command")),
            ("custom", Some("apply_patch")),
            ("namespace", Some("multi_agent_v1")),
            ("tool_search", None),
            ("web_search", None),
        ]
    );
    assert_eq!(body["tools"][1], codex_like_tools()[1]);
}

#[tokio::test]
async fn a_streamed_custom_call_is_restored_as_custom_tool_call_from_start_to_end() {
    let h = Harness::with_preset("glm").await;
    h.upstream.push(Reply::sse(vec![
        chunk(json!({"role": "assistant", "content": "Patching."}), None),
        whole_call(
            0,
            "call_p",
            "apply_patch",
            &json!({"input": PATCH}).to_string(),
        ),
        chunk(json!({}), Some("tool_calls")),
    ]));
    let events = h
        .post_stream(&json!({"model": "m", "input": "add a file", "stream": true, "tools": codex_like_tools()}))
        .await;
    let kinds = types(&events);
    let added = kinds
        .iter()
        .position(|t| t == "response.output_item.added")
        .unwrap();
    // The message comes first; then the call, typed as custom from its very first event.
    let call_added = kinds
        .iter()
        .rposition(|t| t == "response.output_item.added")
        .unwrap();
    assert!(call_added > added);
    assert_eq!(events[call_added].data["item"]["type"], "custom_tool_call");
    assert!(
        !kinds
            .iter()
            .any(|t| t.starts_with("response.function_call_arguments")),
        "never a function_call that turns into a custom_tool_call: {kinds:?}"
    );
    assert_eq!(
        &kinds[call_added..],
        [
            "response.output_item.added",
            "response.custom_tool_call_input.delta",
            "response.custom_tool_call_input.done",
            "response.output_item.done",
            "response.completed",
        ]
    );
    let done = &events[events.len() - 2].data["item"];
    assert_eq!(
        done,
        &json!({"type": "custom_tool_call", "id": done["id"], "call_id": "call_p", "name": "apply_patch", "input": PATCH, "status": "completed"})
    );
    assert_eq!(events[call_added + 2].data["input"], PATCH);
}

#[tokio::test]
async fn namespaced_calls_come_back_with_namespace_and_name() {
    let h = Harness::with_preset("deepseek").await;
    h.upstream.push(Reply::sse(vec![
        chunk(json!({"tool_calls": [{"index": 0, "id": "call_n", "type": "function", "function": {"name": "multi_agent_v1__close_agent", "arguments": ""}}]}), None),
        chunk(json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"id\":\"a1\"}"}}]}), None),
        chunk(json!({}), Some("tool_calls")),
    ]));
    let events = h
        .post_stream(&json!({"model": "m", "input": "close it", "stream": true, "tools": codex_like_tools()}))
        .await;
    let added = events
        .iter()
        .find(|e| e.data["type"] == "response.output_item.added")
        .unwrap();
    assert_eq!(added.data["item"]["type"], "function_call");
    assert_eq!(added.data["item"]["namespace"], "multi_agent_v1");
    assert_eq!(added.data["item"]["name"], "close_agent");
    let done = events
        .iter()
        .find(|e| e.data["type"] == "response.output_item.done")
        .unwrap();
    assert_eq!(done.data["item"]["namespace"], "multi_agent_v1");
    assert_eq!(done.data["item"]["name"], "close_agent");
    assert_eq!(done.data["item"]["arguments"], "{\"id\":\"a1\"}");
}

#[tokio::test]
async fn built_in_tool_types_are_restored_to_their_items() {
    // Restoration alone: with repair on, the call that is not JSON would be re-asked.
    let h = Harness::with_preset_unrepaired("generic").await;
    let declared = json!([{"type": "local_shell"}, {"type": "shell"}, {"type": "apply_patch"}]);
    h.upstream.push(Reply::json(json!({
        "id": "x", "object": "chat.completion", "model": "m",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": null, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "local_shell", "arguments": "{\"command\":[\"ls\",\"-a\"],\"working_directory\":\"/w\"}"}},
            {"id": "c2", "type": "function", "function": {"name": "shell", "arguments": "{\"commands\":[\"pwd\"]}"}},
            {"id": "c3", "type": "function", "function": {"name": "apply_patch", "arguments": "{\"type\":\"create_file\",\"path\":\"a.txt\",\"diff\":\"+hi\"}"}},
            {"id": "c4", "type": "function", "function": {"name": "shell", "arguments": "not json"}}
        ]}}]
    })));
    let (status, body) = h
        .post_json(&json!({"model": "m", "input": "go", "tools": declared}))
        .await;
    assert_eq!(status, 200, "{body}");
    let out = body["output"].as_array().unwrap();
    assert_eq!(out[0]["type"], "local_shell_call");
    assert_eq!(out[0]["call_id"], "c1");
    assert_eq!(
        out[0]["action"],
        json!({"type": "exec", "command": ["ls", "-a"], "env": {}, "working_directory": "/w"})
    );
    assert_eq!(out[1]["type"], "shell_call");
    assert_eq!(out[1]["action"], json!({"commands": ["pwd"]}));
    assert_eq!(out[2]["type"], "apply_patch_call");
    assert_eq!(
        out[2]["operation"],
        json!({"type": "create_file", "path": "a.txt", "diff": "+hi"})
    );
    assert_eq!(out[2]["status"], "completed");
    // Arguments that do not fit fall back to a function_call with the requested name.
    assert_eq!(out[3]["type"], "function_call");
    assert_eq!(out[3]["name"], "shell");
    assert_eq!(out[3]["arguments"], "not json");
    assert!(
        body["toolbridge_diagnostics"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d["code"] == "call_not_restored")
    );
}

#[tokio::test]
async fn an_undeclared_name_comes_back_as_a_function_call_with_a_diagnostic() {
    // With repair on, `bash` would be mapped to the declared shell (tests/repair.rs).
    let h = Harness::with_preset_unrepaired("generic").await;
    h.upstream.push(Reply::sse(vec![
        whole_call(0, "c9", "bash", "{\"cmd\":\"ls\"}"),
        chunk(json!({}), Some("tool_calls")),
    ]));
    let events = h
        .post_stream(
            &json!({"model": "m", "input": "x", "stream": true, "tools": codex_like_tools()}),
        )
        .await;
    let last = &events.last().unwrap().data["response"];
    assert_eq!(last["output"][0]["type"], "function_call");
    assert_eq!(last["output"][0]["name"], "bash");
    assert!(
        last["toolbridge_diagnostics"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d["code"] == "undeclared_tool_called")
    );
}

#[tokio::test]
async fn history_of_every_call_type_is_re_encoded_under_the_plan_names() {
    let h = Harness::with_preset("deepseek").await;
    h.upstream
        .push(Reply::json(toolbridge_testkit::chat::completion(
            "done", "stop",
        )));
    let (status, body) = h
        .post_json(&json!({
            "model": "m",
            "tools": codex_like_tools(),
            "input": [
                {"role": "user", "content": "work"},
                {"type": "function_call", "id": "fc_1", "call_id": "c1", "name": "exec_command", "arguments": "{\"cmd\":\"ls\"}"},
                {"type": "function_call", "id": "fc_2", "call_id": "c2", "namespace": "multi_agent_v1", "name": "close_agent", "arguments": "{}"},
                {"type": "function_call_output", "id": "o1", "call_id": "c1", "output": "a b"},
                {"type": "function_call_output", "id": "o2", "call_id": "c2", "output": "closed"},
                {"type": "custom_tool_call", "id": "ctc_1", "call_id": "c3", "name": "apply_patch", "input": PATCH},
                {"type": "custom_tool_call_output", "call_id": "c3", "output": "Success."},
                // Codex re-sends an item on retry: it must go upstream once.
                {"type": "custom_tool_call", "id": "ctc_1", "call_id": "c3", "name": "apply_patch", "input": PATCH},
                {"type": "shell_call", "call_id": "c4", "action": {"commands": ["pwd"], "timeout_ms": 100}},
                {"type": "shell_call_output", "call_id": "c4", "output": [{"stdout": "/w", "stderr": "", "outcome": {"type": "exit", "exit_code": 0}}]},
                {"type": "function_call", "call_id": "c5", "name": "exec_command", "arguments": "{}"},
                {"role": "user", "content": "and?"},
            ],
        }))
        .await;
    assert_eq!(status, 200, "{body}");
    let messages = h.upstream.last_body()["messages"].clone();
    assert_eq!(
        messages,
        json!([
            {"role": "user", "content": "work"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "exec_command", "arguments": "{\"cmd\":\"ls\"}"}},
                {"id": "c2", "type": "function", "function": {"name": "multi_agent_v1__close_agent", "arguments": "{}"}},
            ]},
            {"role": "tool", "content": "a b", "tool_call_id": "c1"},
            {"role": "tool", "content": "closed", "tool_call_id": "c2"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "c3", "type": "function", "function": {"name": "apply_patch", "arguments": json!({"input": PATCH}).to_string()}},
            ]},
            {"role": "tool", "content": "Success.", "tool_call_id": "c3"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "c4", "type": "function", "function": {"name": "shell", "arguments": "{\"commands\":[\"pwd\"],\"timeout_ms\":100}"}},
            ]},
            {"role": "tool", "content": "/w\n(exit code 0)\n", "tool_call_id": "c4"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "c5", "type": "function", "function": {"name": "exec_command", "arguments": "{}"}},
            ]},
            {"role": "tool", "content": "", "tool_call_id": "c5"},
            {"role": "user", "content": "and?"},
        ])
    );
    let codes: Vec<&str> = body["toolbridge_diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["code"].as_str().unwrap())
        .collect();
    assert!(codes.contains(&"duplicate_item_dropped"), "{codes:?}");
    assert!(codes.contains(&"tool_output_missing"), "{codes:?}");
}

#[tokio::test]
async fn an_output_without_its_call_is_a_400() {
    let h = Harness::with_preset("generic").await;
    let (status, body) = h
        .post_json(&json!({"model": "m", "input": [
            {"role": "user", "content": "x"},
            {"type": "function_call_output", "call_id": "ghost", "output": "?"}
        ]}))
        .await;
    assert_eq!(status, 400);
    assert_eq!(body["error"]["code"], "unpaired_tool_output");
    assert_eq!(body["error"]["param"], "input[1].call_id");
    assert!(h.upstream.requests().is_empty());
}

#[tokio::test]
async fn tool_refusals_happen_before_any_upstream_call() {
    let h = Harness::with_preset("glm").await;
    let many: Vec<Value> = (0..129)
        .map(|i| json!({"type": "function", "name": format!("f{i}")}))
        .collect();
    let cases = [
        (
            json!({"model": "m", "input": "x", "tools": many}),
            "too_many_tools",
            "tools",
        ),
        (
            json!({"model": "m", "input": "x", "tools": [{"type": "hologram"}]}),
            "unsupported_tool_type",
            "tools[0]",
        ),
        (
            json!({"model": "m", "input": "x", "tools": [{"type": "image_generation"}], "tool_choice": {"type": "image_generation"}}),
            "tool_choice_unavailable",
            "tool_choice",
        ),
    ];
    for (request, code, param) in cases {
        let (status, body) = h.post_json(&request).await;
        assert_eq!(status, 400, "{body}");
        assert_eq!(body["error"]["code"], code);
        assert_eq!(body["error"]["param"], param);
    }
    assert!(h.upstream.requests().is_empty());
}

#[tokio::test]
async fn a_forced_tool_is_downgraded_where_the_provider_cannot_force() {
    let h = Harness::with_preset("glm").await;
    h.upstream
        .push(Reply::json(toolbridge_testkit::chat::completion(
            "ok", "stop",
        )));
    let response = h
        .post(&json!({"model": "m", "input": "x", "tools": codex_like_tools(), "tool_choice": {"type": "function", "name": "exec_command"}}))
        .await;
    assert_eq!(response.status(), 200);
    let header = response.headers()["x-toolbridge-diagnostics"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        header.contains("tool_choice_downgraded:tool_choice"),
        "{header}"
    );
    assert_eq!(h.upstream.last_body()["tool_choice"], "auto");
}

/// Kimi runs its `$web_search` builtin only after the caller echoes the call's arguments back
/// as its result; the gateway does that itself and shows the search as a `web_search_call`.
fn kimi_search_script(r: &toolbridge_testkit::Recorded) -> Option<Reply> {
    let messages = r.body["messages"].as_array()?;
    let arguments = r#"{"search_result":{"search_id":"s-1"},"query":"rust release"}"#;
    let echoed = messages
        .iter()
        .any(|m| m["role"] == "tool" && m["name"] == "$web_search" && m["content"] == arguments);
    if !echoed {
        assert_eq!(
            r.body["tools"][0],
            json!({"type": "builtin_function", "function": {"name": "$web_search"}})
        );
        let call = json!({"tool_calls": [{"index": 0, "id": "call_ws", "type": "function", "function": {"name": "$web_search", "arguments": arguments}}]});
        return Some(if r.body["stream"] == true {
            Reply::sse(vec![
                chunk(call, None),
                chunk(json!({}), Some("tool_calls")),
            ])
        } else {
            Reply::json(json!({"id": "x", "object": "chat.completion", "model": "k",
                "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": null, "tool_calls": call["tool_calls"]}}]}))
        });
    }
    Some(if r.body["stream"] == true {
        Reply::sse(vec![chunk(
            json!({"content": "Rust 1.95 is out."}),
            Some("stop"),
        )])
    } else {
        Reply::json(toolbridge_testkit::chat::completion(
            "Rust 1.95 is out.",
            "stop",
        ))
    })
}

#[tokio::test]
async fn kimi_web_search_is_answered_by_the_gateway_and_shown_as_a_web_search_call() {
    let h = Harness::with_preset("kimi").await;
    h.upstream.set_gate(std::sync::Arc::new(kimi_search_script));
    let request = json!({"model": "kimi-k2", "input": "what is new in rust?", "tools": [{"type": "web_search"}]});

    let mut streamed = request.clone();
    streamed["stream"] = json!(true);
    let events = h.post_stream(&streamed).await;
    let kinds = types(&events);
    for expected in [
        "response.web_search_call.in_progress",
        "response.web_search_call.searching",
        "response.web_search_call.completed",
    ] {
        assert!(kinds.contains(&expected.to_owned()), "{kinds:?}");
    }
    let output = &events.last().unwrap().data["response"]["output"];
    assert_eq!(output[0]["type"], "web_search_call");
    assert_eq!(output[0]["status"], "completed");
    assert_eq!(
        output[0]["action"],
        json!({"type": "search", "query": "rust release"})
    );
    assert_eq!(output[1]["content"][0]["text"], "Rust 1.95 is out.");
    assert_eq!(h.upstream.requests().len(), 2);

    let (status, body) = h.post_json(&request).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["output"][0]["type"], "web_search_call");
    assert_eq!(body["output"][1]["content"][0]["text"], "Rust 1.95 is out.");
    assert_eq!(h.upstream.requests().len(), 4);
}

/// Which tool types a provider takes natively is profile data: a config patch that says the
/// provider takes `apply_patch` as declared (`profile.tools.tool_types.apply_patch = "native"`)
/// sends it upstream as declared, with no degraded diagnostic, and the provider's call still
/// comes back as an `apply_patch_call`; a model's own patch can turn it back, and `shell` stays
/// degraded.
#[tokio::test]
async fn a_profile_patch_can_take_apply_patch_natively() {
    let h = Harness::with_toml(|url| {
        format!(
            r#"
[providers.up]
base_url = "{url}"
api_key_env = "FAKE_UPSTREAM_KEY"
preset = "openai"
repair = false

[providers.up.profile.tools.tool_types]
apply_patch = "native"

[providers.up.models."old".profile.tools.tool_types]
apply_patch = "degraded"

[[routes]]
model = "*"
provider = "up"
"#
        )
    })
    .await;
    let declared = json!([{"type": "apply_patch"}, {"type": "shell"}]);
    h.upstream.push(Reply::json(json!({
        "id": "x", "object": "chat.completion", "model": "m",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": null, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "apply_patch", "arguments": "{\"type\":\"create_file\",\"path\":\"a.txt\",\"diff\":\"+hi\"}"}}
        ]}}]
    })));
    let response = h
        .post(&json!({"model": "m", "input": "go", "tools": declared}))
        .await;
    assert_eq!(response.status(), 200);
    let header = response.headers()["x-toolbridge-diagnostics"]
        .to_str()
        .unwrap()
        .to_owned();
    assert_eq!(header, "tool_degraded:tools[1]", "only shell is degraded");
    let sent = h.upstream.last_body();
    assert_eq!(sent["tools"][0], json!({"type": "apply_patch"}));
    assert_eq!(sent["tools"][1]["function"]["name"], "shell");
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["output"][0]["type"], "apply_patch_call", "{body}");
    assert_eq!(
        body["output"][0]["operation"],
        json!({"type": "create_file", "path": "a.txt", "diff": "+hi"})
    );

    // The model's own patch wins over the provider's.
    h.upstream
        .push(Reply::json(toolbridge_testkit::chat::completion(
            "ok", "stop",
        )));
    let (status, body) = h
        .post_json(&json!({"model": "old", "input": "go", "tools": declared}))
        .await;
    assert_eq!(status, 200, "{body}");
    let sent = h.upstream.last_body();
    assert_eq!(sent["tools"][0]["function"]["name"], "apply_patch");
}
