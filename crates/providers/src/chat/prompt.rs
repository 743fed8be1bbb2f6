//! The texts of a request body a token estimate counts, read from the body as sent: a Chat
//! Completions, Anthropic Messages or Gemini generateContent request (or a Responses body),
//! so that every dialect follows one rule — reported usage, else an estimate.
//!
//! Not here: counting tokens (the gateway owns the tokenizer).

use serde_json::Value;

/// What an estimate counts in a request: its messages (each costs a few framing tokens) and the
/// texts in them — message texts, text parts, call names and arguments, reasoning, the system
/// prompt, and the tool declarations as one JSON text.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PromptTexts {
    pub messages: u64,
    pub texts: Vec<String>,
}

/// Keys whose string values are labels, ids or opaque blobs, not text the model reads.
const NOT_TEXT: &[&str] = &[
    "role",
    "type",
    "id",
    "tool_call_id",
    "tool_use_id",
    "call_id",
    "signature",
    "thoughtSignature",
    "mimeType",
    "mime_type",
    "media_type",
    "data",
    "encrypted_content",
];

/// The lists of turns each dialect's body holds.
const TURN_LISTS: &[&str] = &["messages", "contents", "input"];
/// The system prompt, where a dialect keeps it outside the turns.
const SYSTEM: &[&str] = &["system", "systemInstruction", "instructions"];

impl PromptTexts {
    /// The texts of `body`, a request as JSON; `None` when it holds no list of turns.
    pub fn read(body: &[u8]) -> Option<Self> {
        let request: Value = serde_json::from_slice(body).ok()?;
        let turns = TURN_LISTS
            .iter()
            .find_map(|k| request.get(*k).and_then(Value::as_array))?;
        let mut texts = Vec::new();
        let mut messages = turns.len() as u64;
        for key in SYSTEM {
            if let Some(system) = request.get(*key) {
                messages += 1;
                leaves(system, &mut texts);
            }
        }
        for turn in turns {
            leaves(turn, &mut texts);
        }
        if let Some(tools) = request.get("tools").filter(|t| !t.is_null()) {
            texts.push(tools.to_string());
        }
        Some(Self { messages, texts })
    }
}

/// Every string a model reads under `value`: strings not under a [`NOT_TEXT`] key.
fn leaves(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::String(s) if !s.is_empty() => out.push(s.clone()),
        Value::Array(items) => items.iter().for_each(|v| leaves(v, out)),
        Value::Object(map) => {
            for (key, v) in map {
                if !NOT_TEXT.contains(&key.as_str()) {
                    leaves(v, out);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn read(body: Value) -> PromptTexts {
        PromptTexts::read(&serde_json::to_vec(&body).unwrap()).unwrap()
    }

    #[test]
    fn each_dialect_s_texts_are_found_and_labels_are_not() {
        let chat = read(json!({"model": "m", "messages": [
            {"role": "user", "content": "hello"},
            {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}
        ]}));
        assert_eq!(
            (chat.messages, chat.texts),
            (2, vec!["hello".to_owned(), "f".to_owned(), "{}".to_owned()])
        );
        let anthropic = read(json!({"model": "m", "system": "be brief", "messages": [
            {"role": "user", "content": [{"type": "text", "text": "hello"}]},
            {"role": "assistant", "content": [{"type": "thinking", "thinking": "hm", "signature": "sig"}]}
        ]}));
        assert_eq!(
            (anthropic.messages, anthropic.texts),
            (
                3,
                vec!["be brief".to_owned(), "hello".to_owned(), "hm".to_owned()]
            )
        );
        let gemini = read(json!({"contents": [
            {"role": "user", "parts": [{"text": "hello"}]},
            {"role": "model", "parts": [{"functionCall": {"name": "f", "args": {"x": "y"}}, "thoughtSignature": "sig"}]}
        ], "systemInstruction": {"parts": [{"text": "be brief"}]}}));
        assert_eq!(
            (gemini.messages, gemini.texts),
            (
                3,
                vec![
                    "be brief".to_owned(),
                    "hello".to_owned(),
                    "f".to_owned(),
                    "y".to_owned()
                ]
            )
        );
    }
}
