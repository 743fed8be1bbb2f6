//! Providers that require a user turn first (issue 18): history that starts with assistant
//! output (a client that trimmed or compacted its context) gets a placeholder user turn and a
//! `user_turn_added` diagnostic for Anthropic and Gemini; Chat providers get the history as it is.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code fails loudly

use serde_json::{Value, json};
use toolbridge_core::canonical::CanonicalRequest;
use toolbridge_core::plan::{ToolPlan, plan};
use toolbridge_core::request::{Limits, normalize};
use toolbridge_providers::profile::Profile;
use toolbridge_wire::responses::{CreateResponse, Diagnostic};

fn canonical(input: Value) -> (CanonicalRequest, Profile, ToolPlan, &'static str) {
    let req: CreateResponse = serde_json::from_value(json!({
        "model": "m",
        "instructions": "be brief",
        "tools": [{"type": "function", "name": "read", "parameters": {"type": "object"}}],
        "input": input,
    }))
    .unwrap();
    let canonical = normalize(&req, &Limits::default()).unwrap();
    let profile = Profile::preset("anthropic").unwrap();
    let plan = plan(&canonical.tools, None, &profile.tools).unwrap();
    (canonical, profile, plan, "upstream")
}

fn assistant_first() -> Value {
    json!([
        {"type": "function_call", "call_id": "c1", "name": "read", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "file text"},
        {"role": "user", "content": "go on"}
    ])
}

fn added(diagnostics: &[Diagnostic]) -> usize {
    diagnostics
        .iter()
        .filter(|d| d.code == "user_turn_added")
        .count()
}

#[test]
fn anthropic_gets_a_placeholder_user_turn_before_assistant_output() {
    let (req, profile, plan, model) = canonical(assistant_first());
    let mut diagnostics = Vec::new();
    let out = toolbridge_providers::anthropic::request::build(
        &req,
        &plan,
        &profile,
        model,
        &mut diagnostics,
    );
    let body = serde_json::to_value(&out).unwrap();
    let messages = body["messages"].as_array().unwrap();
    assert_eq!(messages[0]["role"], "user", "{body:#}");
    assert_eq!(messages[0]["content"][0]["type"], "text");
    assert_eq!(messages[1]["role"], "assistant");
    assert_eq!(messages[1]["content"][0]["type"], "tool_use");
    assert_eq!(added(&diagnostics), 1);
}

#[test]
fn gemini_gets_a_placeholder_user_turn_before_a_function_call() {
    let (req, _, plan, model) = canonical(assistant_first());
    let profile = Profile::preset("gemini").unwrap();
    let mut diagnostics = Vec::new();
    let out = toolbridge_providers::gemini::request::build(
        &req,
        &plan,
        &profile,
        model,
        &mut diagnostics,
    );
    let body = serde_json::to_value(&out).unwrap();
    let contents = body["contents"].as_array().unwrap();
    assert_eq!(contents[0]["role"], "user", "{body:#}");
    assert!(contents[0]["parts"][0]["text"].is_string());
    assert_eq!(contents[1]["role"], "model");
    assert!(contents[1]["parts"][0]["functionCall"].is_object());
    assert_eq!(added(&diagnostics), 1);
}

#[test]
fn a_conversation_that_starts_with_the_user_is_left_alone() {
    let input = json!([{"role": "user", "content": "hi"}]);
    let (req, profile, plan, model) = canonical(input);
    let mut diagnostics = Vec::new();
    let out = toolbridge_providers::anthropic::request::build(
        &req,
        &plan,
        &profile,
        model,
        &mut diagnostics,
    );
    assert_eq!(out.messages.len(), 1);
    let gemini = Profile::preset("gemini").unwrap();
    let out =
        toolbridge_providers::gemini::request::build(&req, &plan, &gemini, model, &mut diagnostics);
    assert_eq!(out.contents.len(), 1);
    assert_eq!(added(&diagnostics), 0);
}
