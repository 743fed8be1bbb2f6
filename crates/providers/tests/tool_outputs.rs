//! Ring 1: tool outputs given as content parts (`input_text`, `input_image`, `input_file`), for
//! every dialect: content parts where the provider takes them, joined text otherwise, images
//! moved to a user turn after the results where a result cannot hold them, each decision a
//! diagnostic.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code fails loudly

use serde_json::{Value, json};
use toolbridge_core::plan::plan;
use toolbridge_core::request::{Limits, normalize};
use toolbridge_providers::dialect::{Dialect, Outgoing, Raw, Source};
use toolbridge_providers::profile::{Profile, ProfilePatch};
use toolbridge_wire::responses::{CreateResponse, Diagnostic};

const PNG: &str = "data:image/png;base64,iVBORw0KGgo=";
const PDF: &str = "data:application/pdf;base64,JVBERi0xLjQ=";
const REMOTE: &str = "https://img.example/chart.png";

/// A call to `lookup` answered with text, an inline image, a remote image and a PDF, then a
/// user turn.
fn request() -> Value {
    json!({
        "model": "m",
        "tools": [{"type": "function", "name": "lookup", "parameters": {"type": "object", "properties": {}}}],
        "input": [
            {"role": "user", "content": "Show me the chart."},
            {"type": "function_call", "call_id": "call_1", "name": "lookup", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "call_1", "output": [
                {"type": "input_text", "text": "Found it: "},
                {"type": "input_text", "text": "chart attached."},
                {"type": "input_image", "image_url": PNG},
                {"type": "input_image", "image_url": REMOTE, "detail": "high"},
                {"type": "input_file", "filename": "report.pdf", "file_data": PDF}
            ]},
            {"role": "user", "content": "Thanks."}
        ]
    })
}

fn build(dialect: Dialect, profile: &Profile, request: Value) -> (Value, Vec<Diagnostic>) {
    let req: CreateResponse = serde_json::from_value(request.clone()).unwrap();
    let canonical = normalize(&req, &Limits::default()).unwrap();
    let plan = plan(&canonical.tools, None, &profile.tools).unwrap();
    let raw = Raw::new(request.as_object().unwrap().clone());
    let mut diagnostics = canonical.diagnostics.clone();
    let source = Source {
        req: &req,
        raw: Some(&raw),
        canonical: &canonical,
        stored: false,
        sealed_by_gateway: &|_| false,
        provenance: None,
    };
    let out = dialect.build(&source, &plan, profile, "up", &mut diagnostics);
    let body: Value = serde_json::from_slice(&Outgoing::payload(&out)).unwrap();
    (body, diagnostics)
}

fn codes(diagnostics: &[Diagnostic]) -> Vec<&str> {
    diagnostics.iter().map(|d| d.code.as_str()).collect()
}

fn patched(preset: &str, toml: &str) -> Profile {
    Profile::resolve(preset, &[&ProfilePatch::parse(toml).unwrap()]).unwrap()
}

#[test]
fn chat_text_form_joins_the_text_and_moves_images_after_the_results() {
    let (body, diagnostics) = build(
        Dialect::Chat,
        &Profile::preset("generic").unwrap(),
        request(),
    );
    let messages = body["messages"].as_array().unwrap();
    let roles: Vec<&str> = messages
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        ["user", "assistant", "tool", "user", "user"],
        "{body:#}"
    );
    assert_eq!(
        messages[2]["content"],
        "Found it: chart attached.[file `report.pdf` omitted]"
    );
    let moved = messages[3]["content"].as_array().unwrap();
    assert_eq!(moved[0]["type"], "text");
    assert!(moved[0]["text"].as_str().unwrap().contains("`call_1`"));
    assert_eq!(
        moved[1],
        json!({"type": "image_url", "image_url": {"url": PNG}})
    );
    assert_eq!(
        moved[2],
        json!({"type": "image_url", "image_url": {"url": REMOTE, "detail": "high"}})
    );
    assert_eq!(messages[4]["content"], "Thanks.");
    let codes = codes(&diagnostics);
    assert!(codes.contains(&"tool_output_media_moved"), "{codes:?}");
    assert!(codes.contains(&"tool_output_part_dropped"), "{codes:?}");
}

#[test]
fn chat_parts_form_sends_text_parts_and_a_media_profile_keeps_images_inside() {
    let (body, _) = build(
        Dialect::Chat,
        &Profile::preset("openai").unwrap(),
        request(),
    );
    let tool = &body["messages"][2];
    assert_eq!(
        tool["content"],
        json!([
            {"type": "text", "text": "Found it: "},
            {"type": "text", "text": "chart attached."},
            {"type": "text", "text": "[file `report.pdf` omitted]"}
        ])
    );
    assert_eq!(body["messages"][3]["role"], "user", "images moved");

    let media = patched("vllm", r#"tool_output = "parts_with_media""#);
    let (body, diagnostics) = build(Dialect::Chat, &media, request());
    let content = body["messages"][2]["content"].as_array().unwrap();
    assert_eq!(
        content[2],
        json!({"type": "image_url", "image_url": {"url": PNG}})
    );
    assert_eq!(content.len(), 5, "{content:#?}");
    assert_eq!(body["messages"][3]["content"], "Thanks.", "nothing moved");
    assert!(!codes(&diagnostics).contains(&"tool_output_media_moved"));
}

#[test]
fn a_string_output_is_sent_byte_for_byte_in_every_dialect() {
    let mut req = request();
    req["input"][2]["output"] = json!("{\"temp\": 21}");
    let (chat, _) = build(
        Dialect::Chat,
        &Profile::preset("openai").unwrap(),
        req.clone(),
    );
    assert_eq!(chat["messages"][2]["content"], "{\"temp\": 21}");
    let (anthropic, _) = build(
        Dialect::Anthropic,
        &Profile::preset("anthropic").unwrap(),
        req.clone(),
    );
    assert_eq!(
        anthropic["messages"][2]["content"][0]["content"],
        "{\"temp\": 21}"
    );
    let (gemini, _) = build(Dialect::Gemini, &Profile::preset("gemini").unwrap(), req);
    assert_eq!(
        gemini["contents"][2]["parts"][0]["functionResponse"]["response"],
        json!({"temp": 21})
    );
}

#[test]
fn anthropic_tool_result_holds_text_images_and_documents() {
    let (body, diagnostics) = build(
        Dialect::Anthropic,
        &Profile::preset("anthropic").unwrap(),
        request(),
    );
    let result = &body["messages"][2]["content"][0];
    assert_eq!(result["type"], "tool_result");
    assert_eq!(result["tool_use_id"], "call_1");
    assert_eq!(
        result["content"],
        json!([
            {"type": "text", "text": "Found it: "},
            {"type": "text", "text": "chart attached."},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
            {"type": "image", "source": {"type": "url", "url": REMOTE}},
            {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0xLjQ="}, "title": "report.pdf"}
        ])
    );
    // The user's next turn joins the results' message, after the result.
    assert_eq!(body["messages"][2]["content"][1]["text"], "Thanks.");
    let found = codes(&diagnostics);
    assert!(!found.contains(&"tool_output_media_moved"), "{found:?}");

    // A text-only profile: images follow every result, still in the same user message.
    let text = patched("anthropic", r#"tool_output = "text""#);
    let (body, diagnostics) = build(Dialect::Anthropic, &text, request());
    let blocks = body["messages"][2]["content"].as_array().unwrap();
    let types: Vec<&str> = blocks.iter().map(|b| b["type"].as_str().unwrap()).collect();
    assert_eq!(
        types,
        ["tool_result", "text", "image", "image", "text"],
        "{body:#}"
    );
    assert_eq!(
        blocks[0]["content"],
        "Found it: chart attached.[file `report.pdf` omitted]"
    );
    assert!(codes(&diagnostics).contains(&"tool_output_media_moved"));
}

#[test]
fn gemini_function_response_carries_inline_media_and_moves_remote_images() {
    let (body, diagnostics) = build(
        Dialect::Gemini,
        &Profile::preset("gemini").unwrap(),
        request(),
    );
    let parts = body["contents"][2]["parts"].as_array().unwrap();
    let response = &parts[0]["functionResponse"];
    assert_eq!(
        response["response"],
        json!({"output": "Found it: chart attached."})
    );
    assert_eq!(
        response["parts"],
        json!([
            {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}},
            {"inlineData": {"mimeType": "application/pdf", "data": "JVBERi0xLjQ="}}
        ])
    );
    // The remote image (Gemini takes only inline data in a function response) follows.
    assert!(parts[1]["text"].as_str().unwrap().contains("`call_1`"));
    assert_eq!(
        parts[2]["fileData"],
        json!({"mimeType": "image/png", "fileUri": REMOTE})
    );
    assert!(codes(&diagnostics).contains(&"tool_output_media_moved"));
}

#[test]
fn a_native_responses_upstream_gets_the_parts_as_sent() {
    let (body, diagnostics) = build(
        Dialect::Responses,
        &Profile::preset("responses").unwrap(),
        request(),
    );
    assert_eq!(body["input"][2]["output"], request()["input"][2]["output"]);
    assert!(diagnostics.is_empty(), "{diagnostics:?}");
}
