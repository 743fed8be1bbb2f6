//! Provider state in the state machine: signatures and redacted reasoning kept for the calls
//! that follow, sealed when asked for, and the documented codes of a failed response.

use std::sync::Arc;

use serde_json::json;
use toolbridge_wire::responses::{CreateResponse, OutputItem, ProviderState};

use super::{AssembleOptions, Assembler, ResponseMeta, codes, skeleton};
use crate::events::{FinishReason, ToolCallDelta, UpstreamEvent};
use crate::reasoning::{ReasoningDisplay, Sealer, parse_plaintext};

/// A "sealer" that only marks its text, so a test can read what was sealed.
#[derive(Debug)]
struct Plain;

impl Sealer for Plain {
    fn seal(&self, text: &str) -> Option<String> {
        Some(format!("sealed:{text}"))
    }
    fn open(&self, blob: &str) -> Result<String, String> {
        blob.strip_prefix("sealed:")
            .map(str::to_owned)
            .ok_or_else(|| "not ours".to_owned())
    }
}

fn run(encrypted: bool, events: Vec<UpstreamEvent>) -> toolbridge_wire::responses::Response {
    let req: CreateResponse = serde_json::from_value(json!({"model": "m", "input": "x"})).unwrap();
    let meta = ResponseMeta {
        id: "resp_s".to_owned(),
        created_at: 1,
        stored: false,
    };
    let options = AssembleOptions {
        reasoning: ReasoningDisplay {
            summary: false,
            encrypted,
        },
        sealer: Some(Arc::new(Plain)),
        ..AssembleOptions::default()
    };
    let mut a = Assembler::new(skeleton(&req, &meta), options);
    let mut out = Vec::new();
    a.start(&mut out);
    for e in events {
        a.on_event(e, &mut out);
    }
    a.finish(2, &mut out)
}

fn call(id: &str) -> UpstreamEvent {
    UpstreamEvent::ToolCall(ToolCallDelta {
        index: Some(0),
        id: Some(id.to_owned()),
        name: Some("lookup".to_owned()),
        arguments: "{}".to_owned(),
        item_id: None,
    })
}

#[test]
fn a_signature_without_text_is_kept_for_the_call_after_it() {
    let response = run(
        false,
        vec![
            UpstreamEvent::ReasoningSignature("SIG".to_owned()),
            call("call_1"),
            UpstreamEvent::Finish(FinishReason::ToolCalls),
        ],
    );
    assert_eq!(response.output.len(), 1, "no reasoning item is made up");
    assert_eq!(response.provider_states.len(), 1);
    assert_eq!(response.provider_states[0].call_ids, ["call_1"]);
    assert_eq!(
        response.provider_states[0].state.signature.as_deref(),
        Some("SIG")
    );
    let json = serde_json::to_string(&response).unwrap();
    assert!(!json.contains("SIG"), "never serialised: {json}");
}

#[test]
fn signed_and_redacted_reasoning_is_kept_and_sealed_together() {
    let response = run(
        true,
        vec![
            UpstreamEvent::Reasoning("think".to_owned()),
            UpstreamEvent::ReasoningSignature("SIG".to_owned()),
            UpstreamEvent::RedactedReasoning("RED".to_owned()),
            UpstreamEvent::Text("Checking.".to_owned()),
            call("call_2"),
            UpstreamEvent::Finish(FinishReason::ToolCalls),
        ],
    );
    let expected = ProviderState {
        text: "think".to_owned(),
        signature: Some("SIG".to_owned()),
        redacted: vec!["RED".to_owned()],
        origin: None,
    };
    assert_eq!(response.provider_states[0].state, expected);
    assert_eq!(response.provider_states[0].call_ids, ["call_2"]);
    let OutputItem::Reasoning(item) = &response.output[0] else {
        panic!("{:?}", response.output);
    };
    let blob = item.encrypted_content.as_deref().unwrap();
    assert_eq!(parse_plaintext(Plain.open(blob).unwrap()), expected);
}

#[test]
fn a_signature_without_text_gets_a_reasoning_item_to_carry_it_when_sealing() {
    let response = run(
        true,
        vec![
            UpstreamEvent::ReasoningSignature("GSIG".to_owned()),
            call("call_3"),
            UpstreamEvent::Finish(FinishReason::ToolCalls),
        ],
    );
    let OutputItem::Reasoning(item) = &response.output[0] else {
        panic!("{:?}", response.output);
    };
    let state = parse_plaintext(
        Plain
            .open(item.encrypted_content.as_deref().unwrap())
            .unwrap(),
    );
    assert_eq!(state.signature.as_deref(), Some("GSIG"));
    assert!(matches!(response.output[1], OutputItem::FunctionCall(_)));
}

#[test]
fn failed_responses_carry_documented_codes() {
    for (fine, public) in [
        ("upstream_overloaded", "server_error"),
        ("empty_upstream_response", "server_error"),
        ("server_shutting_down", "server_error"),
        ("rate_limit_exceeded", "rate_limit_exceeded"),
        ("context_length_exceeded", "context_length_exceeded"),
        ("upstream_bad_request", "invalid_prompt"),
        ("server_error", "server_error"),
    ] {
        let error = codes::response_error(fine, "m".to_owned());
        assert_eq!(error.code, public, "{fine}");
        assert!(codes::DOCUMENTED.contains(&error.code.as_str()));
        let expected = (fine != public).then(|| fine.to_owned());
        assert_eq!(error.toolbridge_code, expected, "{fine}");
    }
}
