//! MiniMax's `reasoning_details` (issue 18): read from a whole answer and from a stream, and sent
//! back on a tool-call turn in the field MiniMax reads, as its function-call guide asks.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code fails loudly

use serde_json::{Value, json};
use toolbridge_core::events::UpstreamEvent;
use toolbridge_core::plan::plan;
use toolbridge_core::request::{Limits, normalize};
use toolbridge_providers::chat::request::build;
use toolbridge_providers::chat::response::decode;
use toolbridge_providers::chat::stream::ChunkDecoder;
use toolbridge_providers::profile::Profile;
use toolbridge_wire::chat::ChatResponse;
use toolbridge_wire::responses::CreateResponse;

fn reasoning(events: &[UpstreamEvent]) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            UpstreamEvent::Reasoning(r) => Some(r.as_str()),
            _ => None,
        })
        .collect()
}

fn detail(text: &str) -> Value {
    json!({"type": "reasoning.text", "id": "reasoning-text-1", "format": "MiniMax-response-v1", "index": 0, "text": text})
}

#[test]
fn a_whole_answer_shows_its_reasoning_details_as_reasoning() {
    let profile = Profile::preset("minimax").unwrap();
    let answer: ChatResponse = serde_json::from_value(json!({
        "id": "x", "object": "chat.completion", "model": "MiniMax-M2",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": "",
            "reasoning_details": [detail("The user wants the weather.")],
            "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]
        }}]
    }))
    .unwrap();
    let events = decode(&profile, answer, &mut Vec::new());
    assert_eq!(reasoning(&events), "The user wants the weather.");
    assert!(
        matches!(events[0], UpstreamEvent::Reasoning(_)),
        "{events:?}"
    );
}

#[test]
fn streamed_reasoning_details_become_reasoning_deltas_incremental_or_cumulative() {
    let profile = Profile::preset("minimax").unwrap();
    for chunks in [
        ["The user", " asks", " for weather."],
        ["The user", "The user asks", "The user asks for weather."],
    ] {
        let mut decoder = ChunkDecoder::new(&profile);
        let mut out = Vec::new();
        for text in chunks {
            let chunk =
                json!({"choices": [{"index": 0, "delta": {"reasoning_details": [detail(text)]}}]});
            decoder
                .on_data(&profile, &chunk.to_string(), &mut out, &mut Vec::new())
                .unwrap();
        }
        let chunk = json!({"choices": [{"index": 0, "delta": {"content": "Sunny."}, "finish_reason": "stop"}]});
        decoder
            .on_data(&profile, &chunk.to_string(), &mut out, &mut Vec::new())
            .unwrap();
        decoder.finish(&mut out);
        assert_eq!(reasoning(&out), "The user asks for weather.", "{chunks:?}");
        assert!(
            out.iter()
                .any(|e| matches!(e, UpstreamEvent::Text(t) if t == "Sunny."))
        );
    }
}

fn translate(preset: &str, input: Value) -> Value {
    let req: CreateResponse = serde_json::from_value(json!({
        "model": "m",
        "tools": [{"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}],
        "input": input,
    }))
    .unwrap();
    let canonical = normalize(&req, &Limits::default()).unwrap();
    let profile = Profile::preset(preset).unwrap();
    let plan = plan(&canonical.tools, None, &profile.tools).unwrap();
    let chat = build(&canonical, &plan, &profile, "upstream", &mut Vec::new());
    serde_json::to_value(chat).unwrap()
}

fn history() -> Value {
    json!([
        {"role": "user", "content": "weather in Paris?"},
        {"type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": "Call the tool."}]},
        {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": "{\"city\":\"Paris\"}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
        {"type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": "Answer now."}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Sunny."}]},
        {"role": "user", "content": "thanks"}
    ])
}

#[test]
fn minimax_gets_the_reasoning_of_a_tool_call_turn_back_in_reasoning_details() {
    let request = translate("minimax", history());
    let messages = request["messages"].as_array().unwrap();
    let call_turn = messages
        .iter()
        .find(|m| m["tool_calls"].is_array())
        .unwrap();
    assert_eq!(
        call_turn["reasoning_details"],
        json!([detail("Call the tool.")])
    );
    assert!(call_turn.get("reasoning_content").is_none(), "{call_turn}");
    let text_turn = messages
        .iter()
        .find(|m| m["role"] == "assistant" && m["content"] == "Sunny.")
        .unwrap();
    assert!(text_turn.get("reasoning_details").is_none(), "{text_turn}");
    assert_eq!(request["reasoning_split"], true);
}

#[test]
fn deepseek_still_gets_reasoning_content() {
    let request = translate("deepseek", history());
    let call_turn = request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["tool_calls"].is_array())
        .cloned()
        .unwrap();
    assert_eq!(call_turn["reasoning_content"], "Call the tool.");
    assert!(call_turn.get("reasoning_details").is_none());
}
