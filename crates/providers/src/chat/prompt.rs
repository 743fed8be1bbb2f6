//! The texts of a request body a token estimate counts, read from a Chat Completions body (the
//! one dialect whose upstreams may report no usage; Anthropic and Gemini always do).
//!
//! Not here: counting tokens (the gateway owns the tokenizer).

use toolbridge_wire::chat::ChatRequest;

/// What an estimate counts in a request: its messages (each costs a few framing tokens) and the
/// texts in them — message texts, text parts, call names and arguments, reasoning, and the tool
/// declarations as one JSON text.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PromptTexts {
    pub messages: u64,
    pub texts: Vec<String>,
}

impl PromptTexts {
    /// The texts of `body`, a Chat request as JSON; `None` when it is not one.
    pub fn read(body: &[u8]) -> Option<Self> {
        let request: ChatRequest = serde_json::from_slice(body).ok()?;
        let mut texts = Vec::new();
        for message in &request.messages {
            match &message.content {
                Some(serde_json::Value::String(text)) => texts.push(text.clone()),
                Some(serde_json::Value::Array(parts)) => {
                    for part in parts {
                        if let Some(text) = part.get("text").and_then(serde_json::Value::as_str) {
                            texts.push(text.to_owned());
                        }
                    }
                }
                _ => {}
            }
            for call in message.tool_calls.iter().flatten() {
                texts.push(call.function.name.clone());
                texts.push(call.function.arguments.clone());
            }
            if let Some(reasoning) = &message.reasoning_content {
                texts.push(reasoning.clone());
            }
        }
        if let Some(tools) = &request.tools {
            texts.push(serde_json::to_string(tools).unwrap_or_default());
        }
        Some(Self {
            messages: request.messages.len() as u64,
            texts,
        })
    }
}
