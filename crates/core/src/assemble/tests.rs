//! The reconstruction state machine, event by event.

use serde_json::json;
use toolbridge_wire::responses::{
    CreateResponse, EventKind, OutputContent, OutputItem, ResponseStatus, StreamEvent,
};

use super::{Assembler, ResponseMeta, codes, skeleton};
use crate::events::{FinishReason, ToolCallDelta, UpstreamEvent};

fn assembler() -> Assembler {
    let req: CreateResponse = serde_json::from_value(json!({"model": "m", "input": "x"})).unwrap();
    let meta = ResponseMeta {
        id: "resp_abc".to_owned(),
        created_at: 1,
        stored: false,
    };
    Assembler::new(skeleton(&req, &meta), super::AssembleOptions::default())
}

fn call(index: Option<u32>, id: Option<&str>, name: Option<&str>, args: &str) -> UpstreamEvent {
    UpstreamEvent::ToolCall(ToolCallDelta {
        index,
        id: id.map(str::to_owned),
        name: name.map(str::to_owned),
        arguments: args.to_owned(),
        item_id: None,
    })
}

fn run(events: Vec<UpstreamEvent>) -> (Vec<StreamEvent>, toolbridge_wire::responses::Response) {
    let mut a = assembler();
    let mut out = Vec::new();
    a.start(&mut out);
    for e in events {
        a.on_event(e, &mut out);
    }
    let response = a.finish(2, &mut out);
    for (i, e) in out.iter().enumerate() {
        assert_eq!(e.sequence_number, i as u64);
    }
    assert_eq!(out.iter().filter(|e| e.kind.is_terminal()).count(), 1);
    assert!(out.last().unwrap().kind.is_terminal());
    (out, response)
}

fn names(events: &[StreamEvent]) -> Vec<&str> {
    events.iter().map(StreamEvent::name).collect()
}

#[test]
fn interleaved_parallel_calls_are_kept_apart_by_index() {
    let (events, response) = run(vec![
        call(Some(0), Some("call_a"), Some("read"), ""),
        call(Some(1), Some("call_b"), Some("write"), "{\"p\":"),
        call(Some(0), None, None, "{\"f\":1}"),
        call(Some(1), None, None, "2}"),
        UpstreamEvent::Finish(FinishReason::ToolCalls),
    ]);
    let calls: Vec<_> = response
        .output
        .iter()
        .map(|item| match item {
            OutputItem::FunctionCall(c) => (c.call_id.clone(), c.name.clone(), c.arguments.clone()),
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    assert_eq!(
        calls,
        [
            ("call_a".into(), "read".into(), "{\"f\":1}".into()),
            ("call_b".into(), "write".into(), "{\"p\":2}".into())
        ]
    );
    // Both calls are done only at the end, when their arguments can no longer grow.
    let first_done = names(&events)
        .iter()
        .position(|n| *n == "response.output_item.done")
        .unwrap();
    let last_delta = names(&events)
        .iter()
        .rposition(|n| *n == "response.function_call_arguments.delta")
        .unwrap();
    assert!(first_done > last_delta);
    assert_eq!(response.status, ResponseStatus::Completed);
}

#[test]
fn calls_without_index_fall_back_to_their_id() {
    let (_, response) = run(vec![
        call(None, Some("c1"), Some("a"), "{\"x\":"),
        call(None, Some("c2"), Some("b"), "{}"),
        call(None, Some("c1"), None, "1}"),
    ]);
    let args: Vec<_> = response
        .output
        .iter()
        .filter_map(|i| match i {
            OutputItem::FunctionCall(c) => Some((c.call_id.as_str(), c.arguments.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(args, [("c1", "{\"x\":1}"), ("c2", "{}")]);
}

#[test]
fn an_id_arriving_after_the_name_is_used_when_the_item_is_announced() {
    let (events, response) = run(vec![
        call(Some(0), None, Some("f"), ""),
        call(Some(0), Some("late_id"), None, "{}"),
    ]);
    let added = events
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::OutputItemAdded {
                item: OutputItem::FunctionCall(c),
                ..
            } => Some(c.call_id.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(added, "late_id");
    let OutputItem::FunctionCall(c) = &response.output[0] else {
        panic!("not a call")
    };
    assert_eq!(c.call_id, "late_id");
}

#[test]
fn a_call_with_no_id_gets_a_generated_one_that_is_stable() {
    let (events, response) = run(vec![call(Some(0), None, Some("f"), "{\"a\":1}")]);
    let OutputItem::FunctionCall(c) = &response.output[0] else {
        panic!("not a call")
    };
    assert!(c.call_id.starts_with("call_fc_abc"), "{}", c.call_id);
    let announced = events.iter().any(|e| {
        matches!(&e.kind, EventKind::OutputItemAdded { item: OutputItem::FunctionCall(a), .. } if a.call_id == c.call_id)
    });
    assert!(announced);
}

#[test]
fn reasoning_then_text_become_two_items_in_order() {
    let (events, response) = run(vec![
        UpstreamEvent::Reasoning("think".into()),
        UpstreamEvent::Reasoning("ing".into()),
        UpstreamEvent::Text("answer".into()),
        UpstreamEvent::Finish(FinishReason::Stop),
    ]);
    assert_eq!(
        names(&events),
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.content_part.added",
            "response.reasoning_text.delta",
            "response.reasoning_text.delta",
            "response.reasoning_text.done",
            "response.content_part.done",
            "response.output_item.done",
            "response.output_item.added",
            "response.content_part.added",
            "response.output_text.delta",
            "response.output_text.done",
            "response.content_part.done",
            "response.output_item.done",
            "response.completed",
        ]
    );
    assert!(
        matches!(&response.output[0], OutputItem::Reasoning(r) if r.content.as_ref().unwrap()[0].text == "thinking")
    );
    assert!(matches!(&response.output[1], OutputItem::Message(_)));
}

#[test]
fn text_and_refusal_are_separate_content_parts() {
    let (_, response) = run(vec![
        UpstreamEvent::Text("I ".into()),
        UpstreamEvent::Refusal("can't".into()),
    ]);
    let OutputItem::Message(m) = &response.output[0] else {
        panic!("not a message")
    };
    assert_eq!(
        serde_json::to_value(&m.content).unwrap(),
        json!([
            {"type": "output_text", "text": "I ", "annotations": [], "logprobs": []},
            {"type": "refusal", "refusal": "can't"}
        ])
    );
}

#[test]
fn failing_mid_stream_never_completes_the_open_item() {
    let mut a = assembler();
    let mut out = Vec::new();
    a.start(&mut out);
    a.on_event(UpstreamEvent::Text("par".into()), &mut out);
    a.on_event(call(Some(0), Some("c"), Some("f"), "{"), &mut out);
    let response = a.fail("upstream_stream_error", "broke".into(), 3, &mut out);
    assert!(out.iter().all(|e| !matches!(
        &e.kind,
        EventKind::OutputItemDone {
            item: OutputItem::FunctionCall(_),
            ..
        }
    )));
    assert_eq!(response.status, ResponseStatus::Failed);
    // A documented code, the gateway's own beside it.
    let error = response.error.unwrap();
    assert_eq!(error.code, "server_error");
    assert_eq!(
        error.toolbridge_code.as_deref(),
        Some("upstream_stream_error")
    );
    // The text item was closed (final) when the call started; the call was not.
    assert_eq!(response.output.len(), 1);
    assert!(matches!(out.last().unwrap().kind, EventKind::Failed { .. }));
}

/// Text the client was already shown stays in the failed response (an `incomplete` message,
/// closed with its events), instead of an empty output.
#[test]
fn failing_mid_text_keeps_the_text_streamed_so_far() {
    let mut a = assembler();
    let mut out = Vec::new();
    a.start(&mut out);
    a.on_event(UpstreamEvent::Text("Hel".into()), &mut out);
    a.on_event(UpstreamEvent::Text("lo".into()), &mut out);
    let response = a.fail("upstream_stream_error", "broke".into(), 3, &mut out);
    assert_eq!(response.status, ResponseStatus::Failed);
    let [OutputItem::Message(message)] = response.output.as_slice() else {
        panic!("one message: {:?}", response.output);
    };
    assert_eq!(message.status, "incomplete");
    assert!(matches!(
        &message.content[..],
        [OutputContent::OutputText { text, .. }] if text == "Hello"
    ));
    assert!(out.iter().any(|e| matches!(
        &e.kind,
        EventKind::OutputItemDone { item: OutputItem::Message(m), .. } if m.status == "incomplete"
    )));
    assert!(matches!(out.last().unwrap().kind, EventKind::Failed { .. }));
}

#[test]
fn nothing_at_all_is_a_failure_with_a_specific_code() {
    let (_, response) = run(vec![UpstreamEvent::Finish(FinishReason::Stop)]);
    assert_eq!(response.status, ResponseStatus::Failed);
    let error = response.error.unwrap();
    assert_eq!(error.code, "server_error");
    assert_eq!(
        error.toolbridge_code.as_deref(),
        Some(codes::EMPTY_RESPONSE)
    );
}

#[test]
fn finish_reasons_map_to_statuses() {
    let cases = [
        (FinishReason::Length, ResponseStatus::Incomplete),
        (FinishReason::ContentFilter, ResponseStatus::Incomplete),
        (FinishReason::ContextLength, ResponseStatus::Failed),
        (
            FinishReason::Error {
                code: "upstream_error".into(),
                message: "x".into(),
            },
            ResponseStatus::Failed,
        ),
        (FinishReason::Stop, ResponseStatus::Completed),
    ];
    for (reason, status) in cases {
        let (events, response) = run(vec![
            UpstreamEvent::Text("t".into()),
            UpstreamEvent::Finish(reason),
        ]);
        assert_eq!(response.status, status);
        let expected = match status {
            ResponseStatus::Completed => "response.completed",
            ResponseStatus::Incomplete => "response.incomplete",
            _ => "response.failed",
        };
        assert_eq!(events.last().unwrap().name(), expected);
    }
}

#[test]
fn usage_last_one_wins_and_empty_deltas_are_ignored() {
    let usage = |n| toolbridge_wire::responses::Usage {
        input_tokens: n,
        total_tokens: n,
        ..Default::default()
    };
    let (events, response) = run(vec![
        UpstreamEvent::Text(String::new()),
        UpstreamEvent::Usage(usage(1)),
        UpstreamEvent::Text("x".into()),
        UpstreamEvent::Usage(usage(5)),
    ]);
    assert_eq!(response.usage.unwrap().input_tokens, 5);
    assert_eq!(
        names(&events)
            .iter()
            .filter(|n| **n == "response.output_text.delta")
            .count(),
        1
    );
}

/// An assembler with repair on, for one declared `exec_command(cmd: string)`.
fn repairing() -> Assembler {
    use std::sync::Arc;
    let tools: Vec<toolbridge_wire::responses::Tool> = serde_json::from_value(json!([
        {"type": "function", "name": "exec_command", "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]}}
    ]))
    .unwrap();
    let plan = crate::plan::plan(&tools, None, &crate::plan::ToolCapabilities::default()).unwrap();
    let req: CreateResponse = serde_json::from_value(json!({"model": "m", "input": "x"})).unwrap();
    let meta = ResponseMeta {
        id: "resp_abc".to_owned(),
        created_at: 1,
        stored: false,
    };
    Assembler::new(
        skeleton(&req, &meta),
        super::AssembleOptions {
            names: Arc::new(plan.names),
            repair: Some(Arc::new(crate::repair::ToolSchemas::from_tools(&tools))),
            ..super::AssembleOptions::default()
        },
    )
}

#[test]
fn with_repair_on_arguments_are_held_until_the_call_is_complete_then_sent_repaired() {
    let mut a = repairing();
    let mut out = Vec::new();
    a.on_event(UpstreamEvent::Text("Running.".to_owned()), &mut out);
    a.on_event(
        call(Some(0), Some("call_1"), Some("bash"), "{cmd: 'l"),
        &mut out,
    );
    a.on_event(call(Some(0), None, None, "s'"), &mut out);
    // The text streamed; nothing of the call did.
    let shown = names(&out);
    assert!(shown.contains(&"response.output_text.delta"));
    assert!(
        !shown.iter().any(|n| n.contains("function_call")),
        "{shown:?}"
    );
    assert_eq!(
        shown
            .iter()
            .filter(|n| **n == "response.output_item.added")
            .count(),
        1
    );
    a.on_event(UpstreamEvent::Finish(FinishReason::ToolCalls), &mut out);
    assert!(a.review_calls().is_empty());
    out.clear();
    let response = a.finish(2, &mut out);
    let deltas: Vec<&str> = out
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::FunctionCallArgumentsDelta { delta, .. } => Some(delta.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(deltas.len(), 1);
    let args: serde_json::Value = serde_json::from_str(deltas[0]).unwrap();
    assert_eq!(args, json!({"cmd": "ls"}));
    let OutputItem::FunctionCall(item) = &response.output[1] else {
        panic!("{:?}", response.output)
    };
    assert_eq!(item.name, "exec_command");
    let codes: Vec<&str> = response
        .toolbridge_diagnostics
        .iter()
        .map(|d| d.code.as_str())
        .collect();
    assert_eq!(codes, ["tool_name_mapped", "arguments_repaired"]);
}

#[test]
fn with_repair_on_an_invalid_call_is_taken_back_for_a_reask_unshown() {
    let mut a = repairing();
    let mut out = Vec::new();
    a.on_event(
        call(Some(0), Some("call_1"), Some("exec_command"), "{}"),
        &mut out,
    );
    a.on_event(UpstreamEvent::Finish(FinishReason::ToolCalls), &mut out);
    let invalid = a.review_calls();
    assert_eq!(invalid.len(), 1);
    assert!(invalid[0].message.contains("cmd"), "{}", invalid[0].message);
    let reask = a.take_reask(&invalid, &mut out);
    assert!(out.is_empty());
    assert_eq!(reask.turn.tool_calls.len(), 1);
    assert_eq!(reask.results[0].0, "call_1");
    assert!(reask.results[0].1.contains(&invalid[0].message));
    assert!(!a.has_client_calls());
    let codes: Vec<String> = a
        .current()
        .toolbridge_diagnostics
        .iter()
        .map(|d| d.code.clone())
        .collect();
    assert_eq!(codes, ["tool_call_reasked"]);
}

/// Accumulates a reasoning stream as openai-node's `ResponseStream` does: a delta must find its
/// part, opened by `content_part.added` (or `reasoning_summary_part.added`), at its index.
fn accumulate_reasoning(events: &[StreamEvent]) -> Result<(Vec<String>, Vec<String>), String> {
    let (mut content, mut summary) = (Vec::<String>::new(), Vec::<String>::new());
    for e in events {
        let v = serde_json::to_value(e).unwrap();
        let at = |k: &str| v[k].as_u64().unwrap_or(u64::MAX) as usize;
        match e.name() {
            "response.content_part.added" if v["part"]["type"] == "reasoning_text" => {
                content.push(String::new())
            }
            "response.reasoning_summary_part.added" => summary.push(String::new()),
            "response.reasoning_text.delta" => content
                .get_mut(at("content_index"))
                .ok_or("missing content at index")?
                .push_str(v["delta"].as_str().unwrap()),
            "response.reasoning_summary_text.delta" => summary
                .get_mut(at("summary_index"))
                .ok_or("missing summary at index")?
                .push_str(v["delta"].as_str().unwrap()),
            "response.content_part.done" if v["part"]["type"] == "reasoning_text" => {
                let done = v["part"]["text"].as_str().unwrap();
                if content.get(at("content_index")).map(String::as_str) != Some(done) {
                    return Err(format!("content_part.done does not match: {done}"));
                }
            }
            _ => {}
        }
    }
    Ok((content, summary))
}

#[test]
fn reasoning_text_streams_inside_an_opened_content_part_as_openai_does() {
    let (events, _) = run(vec![
        UpstreamEvent::Reasoning("think".into()),
        UpstreamEvent::Reasoning("ing".into()),
        UpstreamEvent::Finish(FinishReason::Stop),
    ]);
    let added = events
        .iter()
        .find(|e| e.name() == "response.content_part.added")
        .map(|e| serde_json::to_value(e).unwrap())
        .unwrap();
    assert_eq!(added["part"], json!({"type": "reasoning_text", "text": ""}));
    assert_eq!(added["content_index"], 0);
    let (content, summary) = accumulate_reasoning(&events).unwrap();
    assert_eq!(content, ["thinking"]);
    assert!(summary.is_empty());
}

#[test]
fn reasoning_summary_streams_inside_an_opened_summary_part() {
    let req: CreateResponse = serde_json::from_value(
        json!({"model": "m", "input": "x", "reasoning": {"summary": "auto"}}),
    )
    .unwrap();
    let meta = ResponseMeta {
        id: "resp_abc".to_owned(),
        created_at: 1,
        stored: false,
    };
    let options = super::AssembleOptions {
        reasoning: crate::reasoning::ReasoningDisplay::for_request(&req),
        ..Default::default()
    };
    let mut a = Assembler::new(skeleton(&req, &meta), options);
    let mut out = Vec::new();
    a.start(&mut out);
    a.on_event(UpstreamEvent::Reasoning("plan".into()), &mut out);
    a.on_event(UpstreamEvent::Finish(FinishReason::Stop), &mut out);
    a.finish(2, &mut out);
    let reasoning: Vec<_> = names(&out)
        .into_iter()
        .filter(|n| n.contains("reasoning") || n.contains("content_part"))
        .collect();
    assert_eq!(
        reasoning,
        [
            "response.reasoning_summary_part.added",
            "response.reasoning_summary_text.delta",
            "response.reasoning_summary_text.done",
            "response.reasoning_summary_part.done",
        ]
    );
    let (content, summary) = accumulate_reasoning(&out).unwrap();
    assert!(content.is_empty());
    assert_eq!(summary, ["plan"]);
}

#[test]
fn a_spliced_terminal_event_carries_the_id_and_status_and_the_copy_stays_the_default() {
    let events = || {
        vec![
            UpstreamEvent::Text("Hi".to_owned()),
            UpstreamEvent::Finish(FinishReason::Stop),
        ]
    };
    let terminal_response = |splice: bool| {
        let mut a = assembler();
        if splice {
            a.splice_terminal();
        }
        let mut out = Vec::new();
        a.start(&mut out);
        for e in events() {
            a.on_event(e, &mut out);
        }
        let response = a.finish(2, &mut out);
        let Some(EventKind::Completed { response: carried }) = out.pop().map(|e| e.kind) else {
            panic!("the last event is not response.completed");
        };
        (response, carried)
    };
    // By default the terminal event carries the whole final response.
    let (response, carried) = terminal_response(false);
    assert_eq!(*carried, response);
    // Spliced: the same final response is returned; the event names it without copying it.
    let (spliced, stub) = terminal_response(true);
    assert_eq!(spliced, response);
    assert_eq!(stub.id, "resp_abc");
    assert_eq!(stub.status, ResponseStatus::Completed);
    assert!(stub.output.is_empty());
    assert!(!response.output.is_empty());
}
