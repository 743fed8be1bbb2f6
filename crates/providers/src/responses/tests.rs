//! The Responses dialect end to end as the gateway drives it: the decoder's events through the
//! assembler (the gateway's identity, one start, renumbering, unknown items, events and fields
//! kept, the endings every dialect shares), and the request built from the client's own.

use serde_json::{Value, json};
use toolbridge_core::assemble::{AssembleOptions, Assembler, ResponseMeta, skeleton};
use toolbridge_core::events::UpstreamEvent;
use toolbridge_core::plan::plan;
use toolbridge_wire::responses::{CreateResponse, StreamEvent};

use super::request::{Passthrough, build};
use super::stream::{ResponsesDecoder, decode_whole};
use crate::dialect::Flow;
use crate::profile::Profile;

fn assembler() -> Assembler {
    let req = request(
        json!({"model": "client-model", "previous_response_id": "resp_prev",
        "store": true, "input": "hi"}),
    );
    let meta = ResponseMeta {
        id: "resp_gw".to_owned(),
        created_at: 7,
        stored: true,
    };
    Assembler::new(skeleton(&req, &meta), AssembleOptions::default())
}

fn values(events: &[StreamEvent]) -> Vec<Value> {
    events
        .iter()
        .map(|e| serde_json::to_value(e).unwrap())
        .collect()
}

/// A stream of `events` decoded and assembled; `tolerated` as the profile's
/// `tolerate_unterminated`. The events out and the final response.
fn answer(events: &[(&str, Value)], tolerated: bool) -> (Vec<Value>, Value) {
    let mut assembler = assembler();
    let mut decoder = ResponsesDecoder::new(None);
    let mut out = Vec::new();
    assembler.start(&mut out);
    let mut ended = false;
    for (name, data) in events {
        let (mut upstream, mut diagnostics) = (Vec::new(), Vec::new());
        let flow = decoder.on_event(
            Some(name),
            &data.to_string(),
            &mut upstream,
            &mut diagnostics,
        );
        for d in diagnostics {
            assembler.add_diagnostic(d);
        }
        for event in upstream {
            assembler.on_event(event, &mut out);
        }
        match flow {
            Ok(Flow::Continue) => {}
            Ok(Flow::Done) => {
                ended = true;
                break;
            }
            Err(e) => {
                let response = assembler.fail(e.code(), e.to_string(), 9, &mut out);
                return (values(&out), serde_json::to_value(response).unwrap());
            }
        }
    }
    let response = if ended {
        assembler.finish(9, &mut out)
    } else {
        assembler.finish_unterminated(9, &mut out, tolerated)
    };
    (values(&out), serde_json::to_value(response).unwrap())
}

/// A whole answer decoded and assembled, as the gateway's whole path does.
fn whole(answer: Value, tolerated: bool) -> Result<Value, crate::Error> {
    let mut diagnostics = Vec::new();
    let events = decode_whole(answer, None, &mut diagnostics)?;
    let mut assembler = assembler();
    for d in diagnostics {
        assembler.add_diagnostic(d);
    }
    let mut out = Vec::new();
    for event in events {
        assembler.on_event(event, &mut out);
    }
    let response = assembler.finish_unterminated(9, &mut out, tolerated);
    Ok(serde_json::to_value(response).unwrap())
}

#[test]
fn events_pass_through_renumbered_with_the_gateway_identity_and_one_start() {
    let upstream = json!({"id": "resp_up", "object": "response", "created_at": 1,
        "model": "gpt-5-2025", "status": "in_progress", "output": [], "store": false,
        "future_field": {"kept": true}});
    let mut done = upstream.clone();
    done["status"] = json!("completed");
    let item = json!({"type": "mystery_item", "id": "x1", "payload": [1, 2]});
    done["output"] = json!([item]);
    let (out, last) = answer(
        &[
            (
                "response.created",
                json!({"type": "response.created", "sequence_number": 0, "response": upstream}),
            ),
            (
                "response.output_item.added",
                json!({"type": "response.output_item.added", "sequence_number": 1,
                "output_index": 0, "item": {"type": "mystery_item", "id": "x1"}}),
            ),
            (
                "response.mystery.delta",
                json!({"type": "response.mystery.delta", "sequence_number": 2,
                "output_index": 0, "odd": 1}),
            ),
            (
                "response.output_item.done",
                json!({"type": "response.output_item.done", "sequence_number": 3,
                "output_index": 0, "item": item}),
            ),
            (
                "response.completed",
                json!({"type": "response.completed", "sequence_number": 4, "response": done}),
            ),
        ],
        false,
    );
    let kinds: Vec<&str> = out.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.mystery.delta",
            "response.output_item.done",
            "response.completed"
        ]
    );
    for (i, e) in out.iter().enumerate() {
        assert_eq!(e["sequence_number"], json!(i));
    }
    assert_eq!(out[3]["odd"], 1);
    assert_eq!(last["id"], "resp_gw");
    assert_eq!(last["model"], "client-model");
    assert_eq!(last["previous_response_id"], "resp_prev");
    assert_eq!(last["store"], true);
    assert_eq!(last["status"], "completed");
    assert_eq!(last["future_field"]["kept"], true);
    assert_eq!(last["output"], json!([item]));
    assert_eq!(out[5]["response"], last);
}

#[test]
fn a_function_call_is_decoded_and_shown_by_the_assembler() {
    let call = json!({"type": "function_call", "id": "fc_up", "call_id": "call_1", "name": "f",
        "arguments": ""});
    let mut whole_call = call.clone();
    whole_call["arguments"] = json!("{\"a\":1}");
    let (out, last) = answer(
        &[
            (
                "response.output_item.added",
                json!({"type": "response.output_item.added", "output_index": 0, "item": call}),
            ),
            (
                "response.function_call_arguments.delta",
                json!({"type": "response.function_call_arguments.delta", "output_index": 0,
                "delta": "{\"a\":", "obfuscation": "x"}),
            ),
            (
                "response.output_item.done",
                json!({"type": "response.output_item.done", "output_index": 0, "item": whole_call}),
            ),
            (
                "response.completed",
                json!({"type": "response.completed", "response": {"status": "completed",
                "output": [whole_call]}}),
            ),
        ],
        false,
    );
    assert_eq!(last["status"], "completed");
    assert_eq!(last["output"].as_array().unwrap().len(), 1, "{last}");
    assert_eq!(last["output"][0]["type"], "function_call");
    assert_eq!(last["output"][0]["call_id"], "call_1");
    assert_eq!(last["output"][0]["arguments"], "{\"a\":1}");
    let deltas: String = out
        .iter()
        .filter(|e| e["type"] == "response.function_call_arguments.delta")
        .map(|e| e["delta"].as_str().unwrap())
        .collect();
    assert_eq!(deltas, "{\"a\":1}");
}

#[test]
fn an_error_event_becomes_the_one_terminal_failure() {
    let (out, _) = answer(
        &[
            (
                "response.output_text.delta",
                json!({"type": "response.output_text.delta", "delta": "hi"}),
            ),
            (
                "error",
                json!({"type": "error", "code": "rate_limit_exceeded", "message": "slow down"}),
            ),
            (
                "response.completed",
                json!({"type": "response.completed", "response": {}}),
            ),
        ],
        false,
    );
    let last = out.last().unwrap();
    assert_eq!(last["type"], "response.failed");
    assert_eq!(last["response"]["error"]["code"], "rate_limit_exceeded");
    assert_eq!(last["response"]["id"], "resp_gw");
    assert_eq!(
        out.iter()
            .filter(|e| e["type"] == "response.completed")
            .count(),
        0
    );
}

#[test]
fn an_unterminated_stream_ends_incomplete_and_an_empty_one_fails_with_a_specific_code() {
    // Issue 15: a stream cut before its terminal event is not a completed answer, in every
    // dialect the same: `incomplete` as `upstream_truncated` (it used to fail as `server_error`).
    let done = json!({"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
        "content": [{"type": "output_text", "text": "whole", "annotations": []}]});
    let cut = [
        (
            "response.output_item.done",
            json!({"type": "response.output_item.done", "output_index": 0, "item": done}),
        ),
        (
            "response.output_text.delta",
            json!({"type": "response.output_text.delta", "delta": "cut"}),
        ),
    ];
    let (out, last) = answer(&cut, false);
    assert_eq!(out.last().unwrap()["type"], "response.incomplete");
    assert_eq!(last["status"], "incomplete");
    assert_eq!(last["incomplete_details"]["reason"], "upstream_truncated");
    assert_eq!(last["output"], json!([done]));
    assert_eq!(
        last["toolbridge_diagnostics"][0]["code"],
        "upstream_unterminated"
    );
    // A provider known to end that way completes, with the diagnostic.
    let (out, last) = answer(&cut, true);
    assert_eq!(out.last().unwrap()["type"], "response.completed");
    assert_eq!(
        last["toolbridge_diagnostics"][0]["code"],
        "upstream_unterminated"
    );
    let (out, _) = answer(&[], false);
    assert_eq!(out.len(), 3);
    let error = &out.last().unwrap()["response"]["error"];
    assert_eq!(error["code"], "server_error");
    assert_eq!(error["toolbridge_code"], "empty_upstream_response");
}

#[test]
fn an_answer_that_completed_with_no_output_fails_as_empty_streamed_or_whole() {
    // Found by the conformance matrix: every other dialect fails an answer with nothing in it.
    let completed = json!({"id": "resp_up", "object": "response", "status": "completed", "output": [],
        "usage": {"input_tokens": 3, "output_tokens": 0, "total_tokens": 3}});
    let (out, _) = answer(
        &[(
            "response.completed",
            json!({"type": "response.completed", "response": completed}),
        )],
        false,
    );
    let last = out.last().unwrap();
    assert_eq!(last["type"], "response.failed");
    assert_eq!(last["response"]["id"], "resp_gw");
    assert_eq!(last["response"]["error"]["code"], "server_error");
    assert_eq!(
        last["response"]["error"]["toolbridge_code"],
        "empty_upstream_response"
    );
    let mine = whole(completed, false).unwrap();
    assert_eq!(mine["id"], "resp_gw");
    assert_eq!(mine["status"], "failed");
    assert_eq!(mine["error"]["toolbridge_code"], "empty_upstream_response");
    assert_eq!(mine["usage"]["input_tokens"], 3);
}

#[test]
fn a_payload_that_is_not_an_event_is_skipped_with_a_diagnostic() {
    let mut decoder = ResponsesDecoder::new(None);
    let mut diagnostics = Vec::new();
    let flow = decoder.on_event(
        Some("message"),
        "not json",
        &mut Vec::new(),
        &mut diagnostics,
    );
    assert_eq!(flow, Ok(Flow::Continue));
    assert_eq!(diagnostics[0].code, "upstream_chunk_skipped");
}

fn request(body: Value) -> CreateResponse {
    serde_json::from_value(body).unwrap()
}

#[test]
fn the_request_passes_through_with_only_the_gateways_concerns() {
    let raw = json!({
        "model": "client-model", "previous_response_id": "resp_prev", "store": true,
        "background": false, "stream": true, "future_param": {"x": 1},
        "input": [
            {"type": "message", "role": "user", "content": "hi"},
            {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "tbr1.ours"},
            {"type": "reasoning", "id": "rs_2", "summary": [], "encrypted_content": "gAAA-theirs"},
            {"type": "brand_new_item", "data": 5}
        ],
        "tools": [
            {"type": "custom", "name": "apply_patch", "format": {"type": "grammar", "syntax": "lark", "definition": "start: x"}},
            {"type": "namespace", "name": "mcp__fs", "description": "d", "tools": [{"type": "function", "name": "read", "parameters": {}}]},
            {"type": "web_search", "external_web_access": true},
            {"type": "tool_search"}
        ],
        "tool_choice": {"type": "custom", "name": "apply_patch"}
    });
    let req = request(raw.clone());
    let profile = Profile::preset("responses").unwrap();
    let canonical_tools = req.tools.clone().unwrap_or_default();
    let plan = plan(&canonical_tools, req.tool_choice.as_ref(), &profile.tools).unwrap();
    let ours = |blob: &str| blob.starts_with("tbr1.");
    let raw_body = super::request::Raw::new(raw.as_object().unwrap().clone());
    for raw_given in [None, Some(&raw_body)] {
        let mut diagnostics = Vec::new();
        let body = build(
            &req,
            raw_given,
            &plan,
            &profile,
            &Passthrough {
                upstream_model: "gpt-5",
                keep_reasoning: true,
                sealed_by_gateway: &ours,
                provenance: None,
            },
            &mut diagnostics,
        );
        assert_eq!(body["model"], "gpt-5");
        assert_eq!(body["store"], false);
        assert!(body.get("previous_response_id").is_none());
        assert!(body.get("background").is_none());
        assert_eq!(body["future_param"]["x"], 1);
        assert_eq!(body["include"], json!(["reasoning.encrypted_content"]));
        assert_eq!(
            body["tools"], raw["tools"],
            "tools exactly as the client sent them"
        );
        assert_eq!(
            body["tool_choice"],
            json!({"type": "custom", "name": "apply_patch"})
        );
        let input = body["input"].as_array().unwrap();
        assert_eq!(input.len(), 3, "{input:?}");
        assert_eq!(input[1]["id"], "rs_2");
        assert_eq!(input[2]["type"], "brand_new_item");
        assert_eq!(diagnostics[0].code, "reasoning_not_replayable");
        assert_eq!(diagnostics[0].param.as_deref(), Some("input[1]"));
        assert_eq!(
            body["input"][0],
            json!({"type": "message", "role": "user", "content": "hi"})
        );
    }
}

#[test]
fn a_whole_answer_takes_the_gateway_identity_and_keeps_its_items() {
    let answer = json!({"id": "resp_up", "object": "response", "model": "gpt-5-2025", "status": "completed",
        "output": [
            {"type": "reasoning", "id": "rs", "summary": [{"type": "summary_text", "text": "think"}]},
            {"type": "message", "id": "msg", "role": "assistant", "content": [{"type": "output_text", "text": "Hello", "annotations": []}]},
            {"type": "function_call", "call_id": "call_1", "name": "f", "arguments": "{}"}
        ],
        "usage": {"input_tokens": 3, "input_tokens_details": {"cached_tokens": 1},
                  "output_tokens": 2, "output_tokens_details": {"reasoning_tokens": 1}, "total_tokens": 5}});
    let mine = whole(answer.clone(), false).unwrap();
    assert_eq!(mine["id"], "resp_gw");
    assert_eq!(mine["status"], "completed");
    assert_eq!(mine["output"][0], answer["output"][0]);
    assert_eq!(mine["output"][1], answer["output"][1]);
    assert_eq!(mine["output"][2]["call_id"], "call_1");
    assert_eq!(mine["usage"]["input_tokens_details"]["cached_tokens"], 1);
    // The text of a relayed message is the compaction's summary.
    let events = decode_whole(answer, None, &mut Vec::new()).unwrap();
    let text: String = events.iter().filter_map(UpstreamEvent::text).collect();
    assert_eq!(text, "Hello");
    let failed = json!({"status": "failed", "output": [], "error": {"code": "server_error", "message": "boom"}});
    assert!(decode_whole(failed, None, &mut Vec::new()).is_err());
    assert!(whole(json!({"error": {}}), false).is_err());
}

#[test]
fn a_whole_answer_that_is_not_final_ends_incomplete_unless_tolerated() {
    // Issue 15: the whole form of a cut answer (the status says it had not ended).
    let answer = json!({"id": "resp_up", "object": "response", "status": "in_progress",
        "output": [{"type": "message", "role": "assistant",
            "content": [{"type": "output_text", "text": "Partial", "annotations": []}]}]});
    let mine = whole(answer.clone(), false).unwrap();
    assert_eq!(mine["status"], "incomplete");
    assert_eq!(mine["incomplete_details"]["reason"], "upstream_truncated");
    assert_eq!(mine["output"], answer["output"]);
    assert_eq!(
        mine["toolbridge_diagnostics"][0]["code"],
        "upstream_unterminated"
    );
    let tolerated = whole(answer, true).unwrap();
    assert_eq!(tolerated["status"], "completed");
}

#[test]
fn a_relayed_message_is_the_text_a_strict_schema_checks() {
    let req = request(json!({"model": "m", "input": "hi", "text": {"format": {
        "type": "json_schema", "name": "answer", "strict": true,
        "schema": {"type": "object", "properties": {"ok": {"type": "boolean"}},
                   "required": ["ok"], "additionalProperties": false}}}}));
    let canonical = toolbridge_core::request::normalize(&req, &Default::default()).unwrap();
    let meta = ResponseMeta {
        id: "resp_gw".to_owned(),
        created_at: 7,
        stored: false,
    };
    let message = |text: &str| {
        json!({"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}]})
    };
    for (text, status) in [(r#"{"ok":true}"#, "completed"), ("not json", "failed")] {
        let options = AssembleOptions {
            contract: canonical.output.clone(),
            ..AssembleOptions::default()
        };
        let mut assembler = Assembler::new(skeleton(&req, &meta), options);
        let answer = json!({"status": "completed", "output": [message(text)]});
        let mut out = Vec::new();
        for event in decode_whole(answer, None, &mut Vec::new()).unwrap() {
            assembler.on_event(event, &mut out);
        }
        let response = assembler.finish(9, &mut out);
        assert_eq!(response.status.as_str(), status, "{text}");
    }
}
