//! An answer's `content` given as a list of parts instead of a string (Mistral's reasoning
//! models: `{"type": "text", "text": …}` and `{"type": "thinking", "thinking": [{"type":
//! "text", "text": …}]}`): text parts are the answer's text, thinking parts its reasoning, and a
//! part of any other type is skipped with an `upstream_chunk_skipped` diagnostic.
//!
//! Not here: what the text then goes through (`<think>` tags, the stream decoder).

use serde_json::Value;
use toolbridge_core::diagnostics::{CHUNK_SKIPPED, diag};
use toolbridge_wire::chat::AnswerContent;
use toolbridge_wire::responses::Diagnostic;

/// One piece of an answer's content, in the order it came.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Piece {
    Text(String),
    Reasoning(String),
}

/// The pieces of `content`: a string is one text piece.
pub(super) fn pieces(content: AnswerContent, diagnostics: &mut Vec<Diagnostic>) -> Vec<Piece> {
    let parts = match content {
        AnswerContent::Text(text) => return vec![Piece::Text(text)],
        AnswerContent::Parts(parts) => parts,
    };
    let mut out = Vec::with_capacity(parts.len());
    for part in parts {
        match part.get("type").and_then(Value::as_str) {
            Some("text") => {
                if let Some(text) = part.get("text").and_then(Value::as_str) {
                    out.push(Piece::Text(text.to_owned()));
                }
            }
            Some("thinking" | "reasoning") => {
                let inner = part.get("thinking").or_else(|| part.get("text"));
                let text = inner.map(thinking_text).unwrap_or_default();
                if !text.is_empty() {
                    out.push(Piece::Reasoning(text));
                }
            }
            other => diagnostics.push(diag(
                CHUNK_SKIPPED,
                None,
                format!(
                    "skipped a content part of type `{}` the gateway does not read",
                    other.unwrap_or("(none)")
                ),
            )),
        }
    }
    out
}

/// A thinking part's text: a string, or a list of text parts.
fn thinking_text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect(),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn text_and_thinking_parts_are_read_in_order_and_others_skipped() {
        let content: AnswerContent = serde_json::from_value(json!([
            {"type": "thinking", "thinking": [{"type": "text", "text": "Let me "}, {"type": "text", "text": "see."}]},
            {"type": "text", "text": "Paris"},
            {"type": "audio", "data": "…"},
            {"type": "text", "text": "."}
        ]))
        .unwrap();
        let mut diagnostics = Vec::new();
        assert_eq!(
            pieces(content, &mut diagnostics),
            [
                Piece::Reasoning("Let me see.".to_owned()),
                Piece::Text("Paris".to_owned()),
                Piece::Text(".".to_owned()),
            ]
        );
        assert_eq!(diagnostics.len(), 1);
        assert_eq!(diagnostics[0].code, "upstream_chunk_skipped");
        let plain: AnswerContent = serde_json::from_value(json!("hi")).unwrap();
        assert_eq!(
            pieces(plain, &mut diagnostics),
            [Piece::Text("hi".to_owned())]
        );
    }
}
