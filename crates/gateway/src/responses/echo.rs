//! Provider builtin calls the gateway answers itself (Kimi's `$web_search`): the next round of
//! the same request, with the calls echoed back as their results.

use super::*;

/// The most rounds of provider builtin calls answered within one response.
pub(super) const MAX_ECHO_ROUNDS: u8 = 4;

/// What a response needs to answer provider builtin calls itself (Kimi's `$web_search`): the
/// request so far and where to send it again.
pub(super) struct EchoRounds {
    pub(super) upstreams: Arc<crate::upstream::Upstreams>,
    pub(super) provider: crate::config::Provider,
    pub(super) chat: toolbridge_wire::chat::ChatRequest,
    pub(super) left: u8,
}

impl EchoRounds {
    /// Appends the builtin calls and their echoed results, and sends the request again.
    pub(super) async fn send(
        &mut self,
        echoes: Vec<toolbridge_core::assemble::EchoCall>,
    ) -> Result<(reqwest::Response, Bytes), GatewayError> {
        use toolbridge_wire::chat::{ChatFunctionCall, ChatMessage, ChatToolCall};
        self.left = self.left.saturating_sub(1);
        self.chat.messages.push(ChatMessage {
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
            self.chat.messages.push(ChatMessage {
                role: "tool".to_owned(),
                content: Some(serde_json::Value::String(e.arguments)),
                name: Some(e.name),
                tool_call_id: Some(e.call_id),
                ..ChatMessage::default()
            });
        }
        let payload = Bytes::from(serde_json::to_vec(&self.chat).unwrap_or_default());
        let response = self
            .upstreams
            .send(&self.provider, &self.chat.model, &payload, self.chat.stream)
            .await?;
        Ok((response, payload))
    }
}
