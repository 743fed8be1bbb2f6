//! Ring 1: pure translation, Responses request → Chat request, for every preset, with snapshot
//! files. A change in what goes upstream shows up as a snapshot diff to review.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code fails loudly

use serde_json::{Value, json};
use toolbridge_core::plan::plan;
use toolbridge_core::request::{Limits, normalize};
use toolbridge_providers::chat::request::build;
use toolbridge_providers::profile::Profile;
use toolbridge_wire::responses::CreateResponse;

fn translate(preset: &str, request: Value) -> Value {
    let req: CreateResponse = serde_json::from_value(request).unwrap();
    let canonical = normalize(&req, &Limits::default()).unwrap();
    let profile = Profile::preset(preset).unwrap();
    let plan = plan(
        &canonical.tools,
        canonical.tool_choice.as_ref(),
        &profile.tools,
    )
    .unwrap();
    let mut diagnostics = canonical.diagnostics.clone();
    diagnostics.extend(plan.diagnostics.iter().cloned());
    let chat = build(
        &canonical,
        &plan,
        &profile,
        "upstream-model",
        &mut diagnostics,
    );
    json!({"request": chat, "diagnostics": diagnostics})
}

/// A text conversation that touches every mapped parameter and role.
fn conversation() -> Value {
    json!({
        "model": "client-model",
        "instructions": "You are terse.",
        "input": [
            {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "Use metric units."}]},
            {"type": "message", "role": "user", "content": [
                {"type": "input_text", "text": "What is in this picture?"},
                {"type": "input_image", "image_url": "data:image/png;base64,AAAA", "detail": "low"}
            ]},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "A bridge.", "annotations": []}]},
            {"role": "user", "content": "How long is it?"}
        ],
        "temperature": 1.2,
        "top_p": 0.8,
        "max_output_tokens": 512,
        "stop": "\n\n",
        "safety_identifier": "user-1",
        "prompt_cache_key": "thread-9",
        "presence_penalty": 0.1,
        "top_logprobs": 2,
        "reasoning": {"effort": "high"},
        "stream": true,
        "metadata": {"kept": "on our side"},
    })
}

/// The presets of the Chat Completions dialect: `anthropic` and `gemini` are the presets of
/// other dialects, whose translators have their own tests.
fn chat_presets() -> impl Iterator<Item = &'static str> {
    Profile::preset_names()
        .iter()
        .copied()
        .filter(|p| Profile::preset_dialect(p).as_deref() == Some("chat"))
}

#[test]
fn conversation_for_every_preset() {
    for preset in chat_presets() {
        insta::assert_json_snapshot!(
            format!("conversation_{preset}"),
            translate(preset, conversation())
        );
    }
}

#[test]
fn json_schema_for_every_preset() {
    let request = json!({
        "model": "m",
        "input": "Give me a city.",
        "text": {"format": {"type": "json_schema", "name": "city", "description": "A city", "strict": true,
            "schema": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"], "additionalProperties": false}}},
    });
    for preset in chat_presets() {
        insta::assert_json_snapshot!(
            format!("json_schema_{preset}"),
            translate(preset, request.clone())
        );
    }
}

/// A tool turn with every tool type a Codex-like client declares, and history of each call type.
fn tool_turn() -> Value {
    json!({
        "model": "m",
        "tools": [
            {"type": "function", "name": "exec_command", "strict": false, "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]}},
            {"type": "custom", "name": "apply_patch", "description": "Edit files.", "format": {"type": "grammar", "syntax": "lark", "definition": "start: begin_patch hunk+ end_patch"}},
            {"type": "namespace", "name": "multi_agent_v1", "tools": [{"type": "function", "name": "spawn_agent", "parameters": {"type": "object"}}]},
            {"type": "shell"},
            {"type": "web_search"},
            {"type": "file_search", "vector_store_ids": ["kb_7"]},
            {"type": "tool_search", "execution": "client"}
        ],
        "tool_choice": "required",
        "parallel_tool_calls": true,
        "input": [
            {"role": "user", "content": "go"},
            {"type": "function_call", "call_id": "c1", "name": "exec_command", "arguments": "{\"cmd\":\"ls\"}"},
            {"type": "custom_tool_call", "call_id": "c2", "name": "apply_patch", "input": "*** Begin Patch\n*** End Patch"},
            {"type": "function_call_output", "call_id": "c1", "output": "a"},
            {"type": "custom_tool_call_output", "call_id": "c2", "output": "ok"},
            {"type": "function_call", "call_id": "c3", "namespace": "multi_agent_v1", "name": "spawn_agent", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c3", "output": "spawned"}
        ]
    })
}

#[test]
fn tool_turn_for_every_preset() {
    for preset in chat_presets() {
        insta::assert_json_snapshot!(
            format!("tool_turn_{preset}"),
            translate(preset, tool_turn())
        );
    }
}

#[test]
fn unknown_items_and_tools_are_reported_not_dropped_silently() {
    let out = translate(
        "generic",
        json!({
            "model": "m",
            "input": [
                {"role": "user", "content": "hi"},
                {"type": "item_reference", "id": "msg_1"}
            ],
            "tools": [{"type": "image_generation"}],
        }),
    );
    let codes: Vec<&str> = out["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["code"].as_str().unwrap())
        .collect();
    assert_eq!(codes, ["item_dropped", "tool_ignored"]);
    assert_eq!(out["diagnostics"][0]["param"], "input[1]");
    assert_eq!(out["diagnostics"][1]["param"], "tools[0]");
    assert!(out["request"].get("tools").is_none());
}

#[test]
fn a_retried_call_is_sent_once() {
    let call = json!({"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"});
    let out = translate(
        "generic",
        json!({
            "model": "m",
            "input": [
                {"role": "user", "content": "go"},
                call.clone(),
                call,
                {"type": "function_call_output", "call_id": "c1", "output": "done"}
            ],
        }),
    );
    let messages = out["request"]["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 3);
    assert_eq!(messages[1]["tool_calls"].as_array().unwrap().len(), 1);
}

/// Every Responses tool type, alone, planned for every preset: the decision table.
#[test]
fn decision_table_every_tool_type_by_preset() {
    let tool_types = [
        json!({"type": "function", "name": "f", "parameters": {"type": "object"}}),
        json!({"type": "custom", "name": "c"}),
        json!({"type": "namespace", "name": "ns", "tools": [{"type": "function", "name": "g"}]}),
        json!({"type": "local_shell"}),
        json!({"type": "shell"}),
        json!({"type": "apply_patch"}),
        json!({"type": "web_search"}),
        json!({"type": "web_search", "external_web_access": false}),
        json!({"type": "file_search", "vector_store_ids": ["vs_1"]}),
        json!({"type": "mcp", "server_label": "docs", "server_url": "https://mcp.example/mcp"}),
        json!({"type": "tool_search", "execution": "client"}),
        json!({"type": "computer_use_preview"}),
        json!({"type": "image_generation"}),
        json!({"type": "code_interpreter"}),
    ];
    let mut table = serde_json::Map::new();
    for preset in chat_presets() {
        let profile = Profile::preset(preset).unwrap();
        let rows: Vec<String> = tool_types
            .iter()
            .map(|tool| {
                let tools = vec![serde_json::from_value(tool.clone()).unwrap()];
                let plan = plan(&tools, None, &profile.tools).unwrap();
                let e = &plan.entries[0];
                format!(
                    "{:<12} {:<9} {}",
                    e.kind,
                    serde_json::to_value(e.decision).unwrap().as_str().unwrap(),
                    e.reason
                )
            })
            .collect();
        table.insert((*preset).to_owned(), json!(rows));
    }
    insta::assert_json_snapshot!("decision_table", table);
}

/// GLM streams a call's arguments only when asked: `tool_stream` goes with streamed requests
/// that carry tools, and nowhere else; the flag is profile data, off for every other preset.
#[test]
fn tool_stream_is_asked_for_where_the_profile_says() {
    let tool = json!([{"type": "function", "name": "f", "parameters": {"type": "object", "properties": {}}}]);
    let streamed = json!({"model": "m", "input": "hi", "stream": true, "tools": tool});
    let whole = json!({"model": "m", "input": "hi", "tools": tool});
    let bare = json!({"model": "m", "input": "hi", "stream": true});
    assert_eq!(
        translate("glm", streamed.clone())["request"]["tool_stream"],
        true
    );
    assert!(
        translate("glm", whole)["request"]
            .get("tool_stream")
            .is_none()
    );
    assert!(
        translate("glm", bare)["request"]
            .get("tool_stream")
            .is_none()
    );
    for preset in chat_presets().filter(|p| *p != "glm") {
        assert!(
            translate(preset, streamed.clone())["request"]
                .get("tool_stream")
                .is_none(),
            "{preset}"
        );
    }
}
