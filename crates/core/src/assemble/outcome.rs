//! How a response ends: the terminal status (`completed`, `incomplete` or `failed`) from the
//! finish reason, the gateway's forced stop and the output contract, and the terminal event that
//! hands the final response out.
//!
//! Not here: closing the items still open (the machine's `finish` does that first).

use serde_json::Value;
use toolbridge_wire::responses::{
    EventKind, IncompleteDetails, OutputContent, OutputItem, Response, ResponseError,
    ResponseStatus, StreamEvent,
};

use super::codes;
use super::machine::Assembler;
use super::skeleton::empty_response;
use crate::contract::OutputContract;
use crate::events::FinishReason;

impl Assembler {
    pub(super) fn outcome(
        &self,
    ) -> (
        ResponseStatus,
        Option<ResponseError>,
        Option<IncompleteDetails>,
    ) {
        let failed = |code: &str, message: String| {
            (
                ResponseStatus::Failed,
                Some(super::codes::response_error(code, message)),
                None,
            )
        };
        let incomplete = |reason: &str| {
            (
                ResponseStatus::Incomplete,
                None,
                Some(IncompleteDetails {
                    reason: reason.to_owned(),
                }),
            )
        };
        if let Some(reason) = &self.forced_incomplete {
            return incomplete(reason);
        }
        match &self.finish {
            Some(FinishReason::Length) => return incomplete("max_output_tokens"),
            Some(FinishReason::ContentFilter) => return incomplete("content_filter"),
            Some(FinishReason::Incomplete(reason)) => return incomplete(reason),
            Some(FinishReason::ContextLength) => {
                return failed(
                    codes::CONTEXT_LENGTH_EXCEEDED,
                    "the conversation does not fit the model's context window".to_owned(),
                );
            }
            Some(FinishReason::Error { code, message }) => return failed(code, message.clone()),
            Some(FinishReason::Stop | FinishReason::ToolCalls) | None => {}
        }
        if !self.saw_output {
            return failed(
                codes::EMPTY_RESPONSE,
                "the upstream finished without producing any output".to_owned(),
            );
        }
        if let OutputContract::JsonSchema(contract) = &self.contract {
            let has_calls = self.slots.iter().flatten().any(OutputItem::is_tool_call);
            if contract.strict && !has_calls {
                let text = self.final_text();
                if let Err(message) = contract.check(&text) {
                    return failed(codes::OUTPUT_VALIDATION_FAILED, message);
                }
            }
        }
        (ResponseStatus::Completed, None, None)
    }

    /// The concatenated text of every output message (a relayed one's too).
    fn final_text(&self) -> String {
        let mut text = String::new();
        for item in self.slots.iter().flatten() {
            match item {
                OutputItem::Message(m) => {
                    for part in &m.content {
                        if let OutputContent::OutputText { text: t, .. } = part {
                            text.push_str(t);
                        }
                    }
                }
                OutputItem::Other(item)
                    if item.get("type").and_then(Value::as_str) == Some("message") =>
                {
                    let parts = item.get("content").and_then(Value::as_array);
                    for part in parts.into_iter().flatten() {
                        if part["type"] == "output_text" {
                            text.push_str(part["text"].as_str().unwrap_or_default());
                        }
                    }
                }
                _ => {}
            }
        }
        text
    }

    pub(super) fn terminate(
        self,
        status: ResponseStatus,
        error: Option<ResponseError>,
        incomplete: Option<IncompleteDetails>,
        completed_at: i64,
        out: &mut Vec<StreamEvent>,
    ) -> Response {
        // The machine ends here: its response is moved out, not replaced.
        let mut response = self.response;
        response.status = status;
        response.error = error;
        response.incomplete_details = incomplete;
        response.completed_at = (status == ResponseStatus::Completed).then_some(completed_at);
        response.output = self.slots.into_iter().flatten().collect();
        response.usage = self.usage;
        response.provider_states = self
            .provider_states
            .into_iter()
            .filter(|e| !e.call_ids.is_empty())
            .collect();
        let snapshot = if self.splice_terminal {
            let mut stub = empty_response();
            stub.id.clone_from(&response.id);
            stub.status = status;
            Box::new(stub)
        } else {
            Box::new(response.clone())
        };
        let kind = match status {
            ResponseStatus::Completed => EventKind::Completed { response: snapshot },
            ResponseStatus::Incomplete => EventKind::Incomplete { response: snapshot },
            _ => EventKind::Failed { response: snapshot },
        };
        out.push(StreamEvent {
            kind,
            sequence_number: self.seq,
        });
        response
    }
}
