//! A whole Responses answer as neutral events, for the gateway's own rounds (compaction).
//! The client-facing path does not use this: it passes the answer through ([`super::relay`]).

use serde_json::Value;
use toolbridge_core::events::{FinishReason, ToolCallDelta, UpstreamEvent};
use toolbridge_wire::responses::Usage;

use crate::error::Error;

/// Decodes a whole answer. A `failed` response is an error.
pub fn decode(answer: &Value) -> Result<Vec<UpstreamEvent>, Error> {
    if !answer.is_object() || !answer["output"].is_array() {
        return Err(Error::Decode {
            message: "not a Responses response: no `output` array".to_owned(),
        });
    }
    if answer["status"] == "failed" {
        return Err(Error::Upstream(Box::new(
            crate::chat::errors::from_stream_error(&answer["error"]),
        )));
    }
    let mut out = Vec::new();
    let mut calls = 0u32;
    for item in answer["output"].as_array().into_iter().flatten() {
        match item["type"].as_str() {
            Some("message") => {
                for part in item["content"].as_array().into_iter().flatten() {
                    match part["type"].as_str() {
                        Some("output_text") => out.push(UpstreamEvent::Text(text(&part["text"]))),
                        Some("refusal") => {
                            out.push(UpstreamEvent::Refusal(text(&part["refusal"])));
                        }
                        _ => {}
                    }
                }
            }
            Some("reasoning") => {
                let parts = item["content"]
                    .as_array()
                    .filter(|c| !c.is_empty())
                    .or_else(|| item["summary"].as_array());
                for part in parts.into_iter().flatten() {
                    out.push(UpstreamEvent::Reasoning(text(&part["text"])));
                }
            }
            Some("function_call") => {
                out.push(UpstreamEvent::ToolCall(ToolCallDelta {
                    index: Some(calls),
                    id: item["call_id"].as_str().map(str::to_owned),
                    name: item["name"].as_str().map(str::to_owned),
                    arguments: text(&item["arguments"]),
                }));
                calls += 1;
            }
            _ => {}
        }
    }
    out.push(UpstreamEvent::Finish(finish(answer, calls > 0)));
    if let Ok(usage) = serde_json::from_value::<Usage>(answer["usage"].clone()) {
        out.push(UpstreamEvent::Usage(usage));
    }
    Ok(out)
}

fn text(v: &Value) -> String {
    v.as_str().unwrap_or_default().to_owned()
}

fn finish(answer: &Value, called: bool) -> FinishReason {
    match answer["incomplete_details"]["reason"].as_str() {
        Some("max_output_tokens") => FinishReason::Length,
        Some("content_filter") => FinishReason::ContentFilter,
        _ if called => FinishReason::ToolCalls,
        _ => FinishReason::Stop,
    }
}
