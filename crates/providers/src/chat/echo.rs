//! A continuation exchange written in Chat wire form: provider builtin calls (Kimi's
//! `$web_search`) answered by echoing each call's arguments back as its result.
//!
//! Not here: deciding which calls are echoed (the planner's `echo_tools` and the assembler's
//! `take_echoes`) and sending the next round (the gateway).

use toolbridge_core::assemble::EchoCall;
use toolbridge_wire::chat::{ChatFunctionCall, ChatMessage, ChatRequest, ChatToolCall};

/// Appends the builtin calls as one assistant message, then each call's echo as its `tool`
/// result, to `request`.
pub fn append_echoes(request: &mut ChatRequest, echoes: Vec<EchoCall>) {
    request.messages.push(ChatMessage {
        role: "assistant".to_owned(),
        tool_calls: Some(
            echoes
                .iter()
                .map(|e| ChatToolCall {
                    id: e.call_id.clone(),
                    kind: "function".to_owned(),
                    function: ChatFunctionCall {
                        name: e.name.clone(),
                        arguments: e.arguments.clone(),
                    },
                })
                .collect(),
        ),
        ..ChatMessage::default()
    });
    for e in echoes {
        request.messages.push(ChatMessage {
            role: "tool".to_owned(),
            content: Some(serde_json::Value::String(e.arguments)),
            name: Some(e.name),
            tool_call_id: Some(e.call_id),
            ..ChatMessage::default()
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_echo_is_the_call_then_its_arguments_as_the_result() {
        let mut request = ChatRequest::default();
        append_echoes(
            &mut request,
            vec![EchoCall {
                call_id: "c1".to_owned(),
                name: "$web_search".to_owned(),
                arguments: r#"{"q":"x"}"#.to_owned(),
            }],
        );
        let body = serde_json::to_value(&request.messages).unwrap();
        assert_eq!(body[0]["role"], "assistant");
        assert_eq!(body[0]["tool_calls"][0]["id"], "c1");
        assert_eq!(body[0]["tool_calls"][0]["function"]["name"], "$web_search");
        assert_eq!(body[1]["role"], "tool");
        assert_eq!(body[1]["tool_call_id"], "c1");
        assert_eq!(body[1]["content"], r#"{"q":"x"}"#);
    }
}
