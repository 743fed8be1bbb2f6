//! The Gemini dialect against realistic payloads.

use serde_json::{Value, json};
use toolbridge_core::canonical::{
    AssistantTurn, CallKind, CanonicalRequest, Params, ToolCall, Turn, UserPart,
};
use toolbridge_core::contract::{OutputContract, SchemaContract};
use toolbridge_core::events::{FinishReason, ToolCallDelta, UpstreamEvent};
use toolbridge_core::plan::{ToolCapabilities, ToolPlan, plan};
use toolbridge_wire::gemini::GenerateContentResponse;
use toolbridge_wire::responses::{Diagnostic, Tool};

use super::stream::GeminiDecoder;
use super::{errors, request, response, schema};
use crate::Error;
use crate::profile::Profile;

fn request_with(turns: Vec<Turn>) -> CanonicalRequest {
    CanonicalRequest {
        model: "gemini-2.5-flash".to_owned(),
        turns,
        tools: Vec::new(),
        context_tools: Vec::new(),
        tool_choice: None,
        params: Params::default(),
        output: OutputContract::Text,
        stream: true,
        diagnostics: Vec::new(),
        cache_marks: Vec::new(),
    }
}

fn weather_plan(choice: Option<Value>) -> ToolPlan {
    let tools: Vec<Tool> = serde_json::from_value(json!([{
        "type": "function",
        "name": "get_weather",
        "description": "Weather for a city",
        "parameters": {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
            "additionalProperties": false
        }
    }]))
    .unwrap();
    plan(&tools, choice.as_ref(), &ToolCapabilities::default()).unwrap()
}

fn build(req: &CanonicalRequest, plan: &ToolPlan) -> (Value, Vec<Diagnostic>) {
    let mut diagnostics = Vec::new();
    // The common profile with the Gemini preset's effort table.
    let mut profile = Profile::preset("generic").unwrap();
    profile.efforts = Profile::preset("gemini").unwrap().efforts;
    let out = request::build(req, plan, &profile, "gemini-2.5-flash", &mut diagnostics);
    (serde_json::to_value(out).unwrap(), diagnostics)
}

fn codes(diagnostics: &[Diagnostic]) -> Vec<(&str, Option<&str>)> {
    diagnostics
        .iter()
        .map(|d| (d.code.as_str(), d.param.as_deref()))
        .collect()
}

fn weather_call(arguments: &str) -> Turn {
    Turn::Assistant(AssistantTurn {
        text: Some("Let me check.".to_owned()),
        reasoning: Some("thinking about weather".to_owned()),
        tool_calls: vec![ToolCall {
            call_id: "call_abc".to_owned(),
            kind: CallKind::Function {
                namespace: None,
                name: "get_weather".to_owned(),
                arguments: arguments.to_owned(),
            },
        }],
        ..AssistantTurn::default()
    })
}

#[test]
fn a_tool_round_trip_with_system_turns_and_merged_contents() {
    let req = request_with(vec![
        Turn::System {
            text: "Be brief.".to_owned(),
            developer: false,
        },
        Turn::System {
            text: "Use metric units.".to_owned(),
            developer: true,
        },
        Turn::User {
            parts: vec![
                UserPart::Text("Weather in Paris?".to_owned()),
                UserPart::Image {
                    url: "data:image/png;base64,iVBORw0KGgo=".to_owned(),
                    detail: None,
                },
            ],
        },
        Turn::User {
            parts: vec![UserPart::Text("And be quick.".to_owned())],
        },
        weather_call(r#"{"city":"Paris"}"#),
        Turn::ToolResult {
            call_id: "call_abc".to_owned(),
            output: "18C and sunny".into(),
        },
        Turn::ToolResult {
            call_id: "call_abc".to_owned(),
            output: r#"{"temp":18}"#.into(),
        },
    ]);
    let (body, diagnostics) = build(&req, &weather_plan(Some(json!("auto"))));
    assert_eq!(
        body,
        json!({
            "systemInstruction": {"parts": [{"text": "Be brief."}, {"text": "Use metric units."}]},
            "contents": [
                {"role": "user", "parts": [
                    {"text": "Weather in Paris?"},
                    {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}},
                    {"text": "And be quick."}
                ]},
                {"role": "model", "parts": [
                    {"text": "Let me check."},
                    {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}}
                ]},
                {"role": "user", "parts": [
                    {"functionResponse": {"name": "get_weather", "response": {"output": "18C and sunny"}}},
                    {"functionResponse": {"name": "get_weather", "response": {"temp": 18}}}
                ]}
            ],
            "tools": [{"functionDeclarations": [{
                "name": "get_weather",
                "description": "Weather for a city",
                "parameters": {
                    "type": "object",
                    "properties": {"city": {"type": "string"}},
                    "required": ["city"]
                }
            }]}],
            "toolConfig": {"functionCallingConfig": {"mode": "AUTO"}}
        })
    );
    assert_eq!(
        codes(&diagnostics),
        vec![
            ("developer_as_system", Some("input")),
            ("system_messages_merged", Some("input")),
            (
                "tool_degraded",
                Some("tools.get_weather.parameters.$schema")
            ),
            (
                "tool_degraded",
                Some("tools.get_weather.parameters.additionalProperties")
            ),
        ]
    );
}

#[test]
fn each_tool_choice_maps_to_a_function_calling_mode() {
    let req = request_with(vec![Turn::User {
        parts: vec![UserPart::Text("hi".to_owned())],
    }]);
    let cases = [
        (json!("auto"), json!({"mode": "AUTO"})),
        (json!("required"), json!({"mode": "ANY"})),
        (json!("none"), json!({"mode": "NONE"})),
        (
            json!({"type": "function", "name": "get_weather"}),
            json!({"mode": "ANY", "allowedFunctionNames": ["get_weather"]}),
        ),
    ];
    for (choice, expected) in cases {
        let (body, _) = build(&req, &weather_plan(Some(choice.clone())));
        assert_eq!(
            body["toolConfig"]["functionCallingConfig"], expected,
            "tool_choice {choice}"
        );
    }
    let (body, _) = build(&req, &weather_plan(None));
    assert!(body.get("toolConfig").is_none());
    assert!(body.get("tools").is_some());
}

#[test]
fn params_effort_and_output_schema() {
    let mut req = request_with(vec![Turn::User {
        parts: vec![UserPart::Text("hi".to_owned())],
    }]);
    req.params = Params {
        temperature: Some(3.0),
        top_p: Some(0.9),
        max_output_tokens: Some(256),
        stop: vec!["END".to_owned()],
        reasoning_effort: Some("high".to_owned()),
        prompt_cache_key: Some("k".to_owned()),
        ..Params::default()
    };
    req.output = OutputContract::JsonSchema(
        SchemaContract::new(
            "answer".to_owned(),
            None,
            json!({"type": "object", "properties": {"n": {"const": 1}}, "additionalProperties": false}),
            true,
        )
        .unwrap(),
    );
    let (body, diagnostics) = build(&req, &ToolPlan::default());
    assert_eq!(
        body["generationConfig"],
        json!({
            "temperature": 2.0,
            "topP": 0.9,
            "maxOutputTokens": 256,
            "stopSequences": ["END"],
            "responseMimeType": "application/json",
            "responseSchema": {"type": "object", "properties": {"n": {"enum": [1]}}},
            "thinkingConfig": {"thinkingBudget": 24576, "includeThoughts": true}
        })
    );
    assert_eq!(
        codes(&diagnostics),
        vec![
            ("param_clamped", Some("temperature")),
            ("param_dropped", Some("prompt_cache_key")),
            (
                "output_contract_degraded",
                Some("text.format.schema.properties.n.const")
            ),
            (
                "output_contract_degraded",
                Some("text.format.schema.additionalProperties")
            ),
        ]
    );
}

#[test]
fn schema_refs_are_inlined_and_recursion_is_cut() {
    let input = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {
            "Node": {
                "type": "object",
                "properties": {
                    "name": {"type": ["string", "null"], "default": "x"},
                    "child": {"$ref": "#/$defs/Node"}
                }
            },
            "Kind": {"oneOf": [{"const": "a"}, {"const": "b"}]}
        },
        "properties": {
            "root": {"$ref": "#/$defs/Node", "description": "the root"},
            "kind": {"$ref": "#/definitions/Missing"},
            "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": true,
                     "examples": [["a"]]},
            "mode": {"$ref": "#/$defs/Kind"}
        },
        "patternProperties": {"^x-": {}}
    });
    let mut diagnostics = Vec::new();
    let out = schema::sanitize(&input, "p", "tool_degraded", &mut diagnostics);
    assert_eq!(
        out,
        json!({
            "type": "object",
            "properties": {
                "root": {
                    "type": "object",
                    "description": "the root",
                    "properties": {
                        "name": {"type": "string", "nullable": true},
                        "child": {"type": "object"}
                    }
                },
                "kind": {"type": "object"},
                "tags": {"type": "array", "items": {"type": "string"}},
                "mode": {"anyOf": [{"enum": ["a"]}, {"enum": ["b"]}]}
            }
        })
    );
    let paths: Vec<&str> = diagnostics
        .iter()
        .filter_map(|d| d.param.as_deref())
        .collect();
    assert_eq!(
        paths,
        vec![
            "p.$schema",
            "p.properties.root.properties.name.default",
            "p.properties.root.properties.child.$ref",
            "p.properties.kind.$ref",
            "p.properties.tags.uniqueItems",
            "p.properties.tags.examples",
            "p.properties.mode.oneOf",
            "p.properties.mode.oneOf[0].const",
            "p.properties.mode.oneOf[1].const",
            "p.patternProperties",
        ]
    );
}

fn decode_stream(payloads: &[&str]) -> (Vec<UpstreamEvent>, Vec<Diagnostic>) {
    let mut decoder = GeminiDecoder::new();
    let mut out = Vec::new();
    let mut diagnostics = Vec::new();
    for p in payloads {
        decoder.on_data(p, &mut out, &mut diagnostics).unwrap();
    }
    (out, diagnostics)
}

fn usage_of(events: &[UpstreamEvent]) -> Option<&toolbridge_wire::responses::Usage> {
    events.iter().rev().find_map(|e| match e {
        UpstreamEvent::Usage(u) => Some(u),
        _ => None,
    })
}

#[test]
fn a_streamed_text_answer_over_several_chunks() {
    let (events, diagnostics) = decode_stream(&[
        r#"{"candidates":[{"content":{"parts":[{"text":"The sky"}],"role":"model"},"index":0}],"usageMetadata":{"promptTokenCount":9,"totalTokenCount":9},"modelVersion":"gemini-2.5-flash","responseId":"abc"}"#,
        r#"{"candidates":[{"content":{"parts":[{"text":" is blue."}],"role":"model"},"index":0}],"usageMetadata":{"promptTokenCount":9,"candidatesTokenCount":4,"totalTokenCount":13},"modelVersion":"gemini-2.5-flash","responseId":"abc"}"#,
        r#"{"candidates":[{"content":{"parts":[{"text":""}],"role":"model"},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":9,"candidatesTokenCount":5,"thoughtsTokenCount":12,"cachedContentTokenCount":4,"totalTokenCount":26},"modelVersion":"gemini-2.5-flash","responseId":"abc"}"#,
    ]);
    assert!(diagnostics.is_empty());
    let texts: Vec<&UpstreamEvent> = events
        .iter()
        .filter(|e| !matches!(e, UpstreamEvent::Usage(_)))
        .collect();
    assert_eq!(
        texts,
        vec![
            &UpstreamEvent::Text("The sky".to_owned()),
            &UpstreamEvent::Text(" is blue.".to_owned()),
            &UpstreamEvent::Finish(FinishReason::Stop),
        ]
    );
    let usage = usage_of(&events).unwrap();
    assert_eq!(usage.input_tokens, 9);
    assert_eq!(usage.input_tokens_details.cached_tokens, 4);
    assert_eq!(usage.output_tokens, 17);
    assert_eq!(usage.output_tokens_details.reasoning_tokens, 12);
    assert_eq!(usage.total_tokens, 26);
}

#[test]
fn function_calls_with_thoughts_and_signatures() {
    let (events, _) = decode_stream(&[
        r#"{"candidates":[{"content":{"parts":[{"text":"**Checking weather**\nThe user wants Paris.","thought":true}],"role":"model"},"index":0}]}"#,
        r#"{"candidates":[{"content":{"parts":[{"functionCall":{"name":"get_weather","args":{"city":"Paris"}},"thoughtSignature":"CiQBVKhc7sig1"},{"functionCall":{"name":"get_weather","args":{"city":"Rome"}}}],"role":"model"},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":50,"candidatesTokenCount":20,"totalTokenCount":70}}"#,
    ]);
    assert_eq!(
        events[..5],
        [
            UpstreamEvent::Reasoning("**Checking weather**\nThe user wants Paris.".to_owned()),
            // The first call's signature goes to the reasoning before the call closes it.
            UpstreamEvent::ReasoningSignature("CiQBVKhc7sig1".to_owned()),
            UpstreamEvent::ToolCall(ToolCallDelta {
                index: Some(0),
                id: Some("call_0".to_owned()),
                name: Some("get_weather".to_owned()),
                arguments: r#"{"city":"Paris"}"#.to_owned(),
                item_id: None,
            }),
            UpstreamEvent::ToolCall(ToolCallDelta {
                index: Some(1),
                id: Some("call_1".to_owned()),
                name: Some("get_weather".to_owned()),
                arguments: r#"{"city":"Rome"}"#.to_owned(),
                item_id: None,
            }),
            UpstreamEvent::Finish(FinishReason::ToolCalls),
        ]
    );
}

#[test]
fn a_safety_stop_and_a_blocked_prompt_are_content_filter() {
    let (events, _) = decode_stream(&[
        r#"{"candidates":[{"content":{"parts":[{"text":"Here is"}],"role":"model"},"finishReason":"SAFETY","index":0,"safetyRatings":[{"category":"HARM_CATEGORY_DANGEROUS_CONTENT","probability":"HIGH","blocked":true}]}]}"#,
    ]);
    assert_eq!(
        events.last(),
        Some(&UpstreamEvent::Finish(FinishReason::ContentFilter))
    );
    let (events, _) = decode_stream(&[
        r#"{"promptFeedback":{"blockReason":"PROHIBITED_CONTENT"},"usageMetadata":{"promptTokenCount":7,"totalTokenCount":7}}"#,
    ]);
    assert_eq!(
        events[0],
        UpstreamEvent::Finish(FinishReason::ContentFilter)
    );
}

#[test]
fn finish_reasons_map_and_unknown_ones_are_reported() {
    let finish = |reason: &str| {
        let payload = format!(r#"{{"candidates":[{{"finishReason":"{reason}"}}]}}"#);
        let (events, diagnostics) = decode_stream(&[&payload]);
        (events, diagnostics.len())
    };
    assert_eq!(
        finish("MAX_TOKENS").0,
        vec![UpstreamEvent::Finish(FinishReason::Length)]
    );
    assert_eq!(
        finish("RECITATION").0,
        vec![UpstreamEvent::Finish(FinishReason::ContentFilter)]
    );
    assert!(matches!(
        finish("MALFORMED_FUNCTION_CALL").0[0],
        UpstreamEvent::Finish(FinishReason::Error { .. })
    ));
    assert_eq!(
        finish("SOMETHING_NEW"),
        (vec![UpstreamEvent::Finish(FinishReason::Stop)], 1)
    );
}

#[test]
fn an_error_object_mid_stream_fails_the_response() {
    let mut decoder = GeminiDecoder::new();
    let mut out = Vec::new();
    let mut diagnostics = Vec::new();
    let err = decoder
        .on_data(
            r#"{"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED"}}"#,
            &mut out,
            &mut diagnostics,
        )
        .unwrap_err();
    let Error::Upstream(e) = err else {
        panic!("expected an upstream error")
    };
    assert_eq!((e.status, e.code.as_str()), (429, "rate_limit_exceeded"));
    decoder
        .on_data("not json", &mut out, &mut diagnostics)
        .unwrap();
    assert_eq!(diagnostics[0].code, "upstream_chunk_skipped");
}

#[test]
fn a_whole_answer_decodes_through_the_same_decoder() {
    let body: GenerateContentResponse = serde_json::from_value(json!({
        "candidates": [{
            "content": {"role": "model", "parts": [
                {"text": "plan", "thought": true},
                {"text": "Done.", "thoughtSignature": "c2ln"}
            ]},
            "finishReason": "STOP"
        }],
        "usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 2, "totalTokenCount": 5}
    }))
    .unwrap();
    let mut diagnostics = Vec::new();
    let events = response::decode(body, "call", &mut diagnostics).unwrap();
    assert_eq!(
        events[..3],
        [
            UpstreamEvent::Reasoning("plan".to_owned()),
            UpstreamEvent::Text("Done.".to_owned()),
            UpstreamEvent::Finish(FinishReason::Stop),
        ]
    );
    assert_eq!(usage_of(&events).unwrap().total_tokens, 5);
}

#[test]
fn http_errors_map_like_the_chat_dialect() {
    let e = errors::from_http(
        429,
        br#"{"error":{"code":429,"message":"You exceeded your current quota.","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"31s"}]}}"#,
        None,
    );
    assert_eq!((e.status, e.code.as_str()), (429, "rate_limit_exceeded"));
    assert_eq!(e.retry_after.as_deref(), Some("31"));
    assert!(e.message.contains("RESOURCE_EXHAUSTED"));

    let e = errors::from_http(
        503,
        br#"{"error":{"code":503,"message":"The model is overloaded. Please try again later.","status":"UNAVAILABLE"}}"#,
        Some("5".to_owned()),
    );
    assert_eq!((e.status, e.code.as_str()), (503, "upstream_unavailable"));
    assert_eq!(e.retry_after.as_deref(), Some("5"));

    let e = errors::from_http(
        400,
        br#"{"error":{"code":400,"message":"The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).","status":"INVALID_ARGUMENT"}}"#,
        None,
    );
    assert_eq!(e.code, "context_length_exceeded");

    let e = errors::from_http(
        403,
        br#"{"error":{"code":403,"message":"Permission denied.","status":"PERMISSION_DENIED"}}"#,
        None,
    );
    assert_eq!((e.status, e.code.as_str()), (403, "upstream_forbidden"));

    let e = errors::from_http(502, b"<html>bad gateway</html>", None);
    assert_eq!(e.status, 502);
}

#[test]
fn a_tool_output_takes_the_name_of_the_nearest_call_with_its_id() {
    let call = |name: &str| {
        Turn::Assistant(AssistantTurn {
            tool_calls: vec![ToolCall {
                call_id: "call_0".to_owned(),
                kind: CallKind::Function {
                    namespace: None,
                    name: name.to_owned(),
                    arguments: String::new(),
                },
            }],
            ..AssistantTurn::default()
        })
    };
    let result = |output: &str| Turn::ToolResult {
        call_id: "call_0".to_owned(),
        output: output.into(),
    };
    let req = request_with(vec![
        call("first"),
        result("1"),
        call("second"),
        result("2"),
        result_for_unknown(),
    ]);
    let (body, diagnostics) = build(&req, &ToolPlan::default());
    let names: Vec<&Value> = body["contents"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["parts"].as_array().unwrap())
        .filter_map(|p| p.get("functionResponse").map(|r| &r["name"]))
        .collect();
    assert_eq!(names, vec!["first", "second", "call_zz"]);
    // The history opens with a call: a placeholder user turn goes first (issue 18).
    assert_eq!(body["contents"][0]["role"], "user");
    assert_eq!(
        body["contents"][2]["parts"][0]["functionResponse"]["response"],
        json!({"output": "1"})
    );
    assert_eq!(
        body["contents"][1]["parts"][0]["functionCall"]["args"],
        json!({})
    );
    assert_eq!(
        codes(&diagnostics),
        vec![
            ("tool_output_missing", Some("input")),
            ("user_turn_added", Some("input"))
        ]
    );
}

fn result_for_unknown() -> Turn {
    Turn::ToolResult {
        call_id: "call_zz".to_owned(),
        output: "orphan".into(),
    }
}
