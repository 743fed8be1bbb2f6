//! OpenAI Responses: `event:` + `data:` SSE events from `response.created` to
//! `response.completed`, items as OpenAI sends them, custom and namespaced calls included.

use serde_json::{Value, json};

use super::{Answer, Call, End, Usage};

const RESPONSES_ENCRYPTED: &str = "gAAAA-conformance-opaque";

pub(super) fn responses_usage(u: Usage) -> Value {
    json!({
        "input_tokens": u.input,
        "input_tokens_details": {"cached_tokens": u.cached},
        "output_tokens": u.output,
        "output_tokens_details": {"reasoning_tokens": u.reasoning},
        "total_tokens": u.input + u.output,
    })
}

/// The whole response object around `output`: `completed`, or `incomplete` with
/// `max_output_tokens` when the answer was cut.
pub(super) fn responses_object(a: &Answer, output: Vec<Value>) -> Value {
    let (status, details) = match a.end {
        End::Length => ("incomplete", json!({"reason": "max_output_tokens"})),
        End::Stop | End::ToolCalls => ("completed", Value::Null),
        End::Cut => ("in_progress", Value::Null),
    };
    json!({
        "id": "resp_conf_upstream", "object": "response", "created_at": 1_700_000_000,
        "status": status, "model": "gpt-conf-2026", "output": output,
        "previous_response_id": null, "store": false, "error": null,
        "incomplete_details": details, "instructions": null, "tools": [], "tool_choice": "auto",
        "parallel_tool_calls": true, "temperature": 1.0, "top_p": 1.0, "truncation": "disabled",
        "metadata": {}, "text": {"format": {"type": "text"}},
        "usage": responses_usage(a.usage),
    })
}

/// The output items as a Responses server sends them, final: reasoning as a summary with its
/// encrypted blob, one message, then each call — a `custom_tool_call` for a custom tool, a
/// `function_call` (with `namespace` for a namespaced tool) otherwise.
pub fn responses_output(a: &Answer) -> Vec<Value> {
    let mut out = Vec::new();
    if !a.reasoning.is_empty() {
        out.push(json!({
            "type": "reasoning", "id": "rs_conf",
            "summary": [{"type": "summary_text", "text": a.reasoning.concat()}],
            "encrypted_content": RESPONSES_ENCRYPTED,
        }));
    }
    if !a.text.is_empty() {
        let status = match a.end {
            End::Length => "incomplete",
            End::Cut => "in_progress",
            End::Stop | End::ToolCalls => "completed",
        };
        out.push(json!({
            "type": "message", "id": "msg_conf", "status": status, "role": "assistant",
            "content": [{"type": "output_text", "text": a.text.concat(), "annotations": [], "logprobs": []}],
        }));
    }
    for (i, c) in a.calls.iter().enumerate() {
        let mut item = if c.custom {
            json!({
                "type": "custom_tool_call", "id": format!("ctc_conf_{i}"), "status": "completed",
                "call_id": c.id, "name": c.name,
                "input": c.arguments["input"].as_str().unwrap_or_default(),
            })
        } else {
            json!({
                "type": "function_call", "id": format!("fc_conf_{i}"), "status": "completed",
                "call_id": c.id, "name": c.name, "arguments": c.arguments.to_string(),
            })
        };
        if let Some(ns) = &c.namespace {
            item["namespace"] = json!(ns);
        }
        out.push(item);
    }
    out
}

/// OpenAI's `error` stream event (a rate limit), the `sequence`th event of its stream.
pub(super) fn responses_error_event(message: &str, sequence: usize) -> (&'static str, Value) {
    (
        "error",
        json!({"type": "error", "sequence_number": sequence, "code": "rate_limit_exceeded",
               "message": message, "param": null}),
    )
}

/// The events of one stream, numbered as they are pushed.
#[derive(Default)]
struct Events(Vec<(&'static str, Value)>);

impl Events {
    fn push(&mut self, name: &'static str, mut data: Value) {
        data["type"] = json!(name);
        data["sequence_number"] = json!(self.0.len());
        self.0.push((name, data));
    }
}

/// An event's `item_id` and `output_index`, with `extra`'s fields.
fn at(id: &Value, index: usize, extra: Value) -> Value {
    let mut v = json!({"item_id": id, "output_index": index});
    if let (Some(v), Value::Object(extra)) = (v.as_object_mut(), extra) {
        v.extend(extra);
    }
    v
}

/// The stream of a whole answer, event by event as OpenAI sends it. An answer with nothing in
/// it is a `200` with no events at all (a server that accepted and said nothing).
pub(super) fn responses_events(a: &Answer) -> Vec<(&'static str, Value)> {
    let output = responses_output(a);
    if output.is_empty() {
        return Vec::new();
    }
    let mut events = Events::default();
    let mut started = responses_object(a, Vec::new());
    started["status"] = json!("in_progress");
    started["incomplete_details"] = Value::Null;
    started["usage"] = Value::Null;
    events.push("response.created", json!({"response": started}));
    events.push("response.in_progress", json!({"response": started}));
    let mut calls = a.calls.iter();
    for (index, item) in output.iter().enumerate() {
        match item["type"].as_str().unwrap_or_default() {
            "reasoning" => reasoning_events(&mut events, a, index, &item["id"]),
            "message" => message_events(&mut events, a, index, &item["id"]),
            kind => {
                let Some(c) = calls.next() else { continue };
                call_events(&mut events, c, kind, index, item);
            }
        }
        events.push(
            "response.output_item.done",
            json!({"output_index": index, "item": item}),
        );
    }
    if a.end == End::Cut {
        // The connection closed after the last delta: no item is done, nothing ends.
        let last_delta = events
            .0
            .iter()
            .rposition(|(name, _)| name.ends_with(".delta"));
        events.0.truncate(last_delta.map_or(0, |i| i + 1));
        return events.0;
    }
    let terminal = if a.end == End::Length {
        "response.incomplete"
    } else {
        "response.completed"
    };
    events.push(
        terminal,
        json!({"response": responses_object(a, output.clone())}),
    );
    events.0
}

/// A reasoning item's events: added, one summary part, its deltas, done.
fn reasoning_events(events: &mut Events, a: &Answer, index: usize, id: &Value) {
    events.push(
        "response.output_item.added",
        json!({"output_index": index, "item": {"type": "reasoning", "id": id, "summary": []}}),
    );
    let part = |text: String| json!({"type": "summary_text", "text": text});
    events.push(
        "response.reasoning_summary_part.added",
        at(
            id,
            index,
            json!({"summary_index": 0, "part": part(String::new())}),
        ),
    );
    for r in &a.reasoning {
        events.push(
            "response.reasoning_summary_text.delta",
            at(id, index, json!({"summary_index": 0, "delta": r})),
        );
    }
    let text = a.reasoning.concat();
    events.push(
        "response.reasoning_summary_text.done",
        at(id, index, json!({"summary_index": 0, "text": text})),
    );
    events.push(
        "response.reasoning_summary_part.done",
        at(id, index, json!({"summary_index": 0, "part": part(text)})),
    );
}

/// A message's events: added, one `output_text` part, its deltas, done.
fn message_events(events: &mut Events, a: &Answer, index: usize, id: &Value) {
    events.push(
        "response.output_item.added",
        json!({"output_index": index, "item": {"type": "message", "id": id,
            "status": "in_progress", "role": "assistant", "content": []}}),
    );
    let part = |text: String| json!({"type": "output_text", "text": text, "annotations": [], "logprobs": []});
    events.push(
        "response.content_part.added",
        at(
            id,
            index,
            json!({"content_index": 0, "part": part(String::new())}),
        ),
    );
    for t in &a.text {
        events.push(
            "response.output_text.delta",
            at(
                id,
                index,
                json!({"content_index": 0, "delta": t, "logprobs": []}),
            ),
        );
    }
    let text = a.text.concat();
    events.push(
        "response.output_text.done",
        at(
            id,
            index,
            json!({"content_index": 0, "text": text, "logprobs": []}),
        ),
    );
    events.push(
        "response.content_part.done",
        at(id, index, json!({"content_index": 0, "part": part(text)})),
    );
}

/// A call's events: added (empty arguments or input), two deltas, done.
fn call_events(events: &mut Events, c: &Call, kind: &str, index: usize, item: &Value) {
    let id = &item["id"];
    let mut added = item.clone();
    added["status"] = json!("in_progress");
    let (whole, field, delta, done) = if kind == "custom_tool_call" {
        (
            c.arguments["input"].as_str().unwrap_or_default().to_owned(),
            "input",
            "response.custom_tool_call_input.delta",
            "response.custom_tool_call_input.done",
        )
    } else {
        (
            c.arguments.to_string(),
            "arguments",
            "response.function_call_arguments.delta",
            "response.function_call_arguments.done",
        )
    };
    added[field] = json!("");
    events.push(
        "response.output_item.added",
        json!({"output_index": index, "item": added}),
    );
    let cut = (0..=whole.len() / 2)
        .rev()
        .find(|i| whole.is_char_boundary(*i))
        .unwrap_or(0);
    let (head, tail) = whole.split_at(cut);
    for piece in [head, tail] {
        events.push(delta, at(id, index, json!({"delta": piece})));
    }
    events.push(done, at(id, index, json!({field: whole})));
}
