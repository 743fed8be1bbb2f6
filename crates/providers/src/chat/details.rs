//! MiniMax's `reasoning_details`: reasoning in its own field when the request says
//! `reasoning_split: true`, read from whole answers and streams, and written back on replay.
//!
//! Source: platform.minimax.io/docs/guides/text-m2-function-call (the reasoning is in
//! `message.reasoning_details` / `delta.reasoning_details` as `{"type": "reasoning.text", "id",
//! "format": "MiniMax-response-v1", "index", "text"}` entries, and must go back with the
//! assistant message of a tool-call turn). The guide's stream example treats each chunk's `text`
//! as the text so far, while the API has been seen sending only the new part
//! (github.com/MiniMax-AI/MiniMax-M2/issues/95): [`StreamedDetails`] takes both.
//!
//! Not here: `reasoning_content`, which the decoders read first when a provider sends it.

use serde_json::{Map, json};
use toolbridge_wire::chat::ReasoningDetail;

/// The entry type that holds reasoning text; other types are not text and are skipped.
const TEXT_TYPE: &str = "reasoning.text";

/// Reasoning as MiniMax returns it and asks to have it back: one `reasoning.text` detail.
pub(super) fn reasoning_detail(text: String) -> ReasoningDetail {
    let mut extra = Map::new();
    extra.insert("id".to_owned(), json!("reasoning-text-1"));
    extra.insert("format".to_owned(), json!("MiniMax-response-v1"));
    extra.insert("index".to_owned(), json!(0));
    ReasoningDetail {
        kind: TEXT_TYPE.to_owned(),
        text: Some(text),
        extra,
    }
}

/// The text of a whole answer's details, joined; `None` when none holds text.
pub(super) fn whole_text(details: &[ReasoningDetail]) -> Option<String> {
    let texts: Vec<&str> = texts(details).collect();
    (!texts.is_empty()).then(|| texts.concat())
}

fn texts(details: &[ReasoningDetail]) -> impl Iterator<Item = &str> {
    details
        .iter()
        .filter(|d| d.kind.is_empty() || d.kind == TEXT_TYPE)
        .filter_map(|d| d.text.as_deref())
        .filter(|t| !t.is_empty())
}

/// The reasoning text seen so far in a stream, to tell a chunk that repeats it (and adds to it)
/// from one that only adds.
#[derive(Debug, Default)]
pub(super) struct StreamedDetails {
    seen: String,
}

impl StreamedDetails {
    /// The new reasoning text in one chunk's details.
    pub(super) fn delta(&mut self, details: &[ReasoningDetail]) -> Option<String> {
        let mut out = String::new();
        for text in texts(details) {
            let new = match text.strip_prefix(self.seen.as_str()) {
                Some(rest) if !self.seen.is_empty() => rest,
                _ => text,
            };
            self.seen.push_str(new);
            out.push_str(new);
        }
        (!out.is_empty()).then_some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn detail(text: &str) -> ReasoningDetail {
        ReasoningDetail {
            kind: TEXT_TYPE.to_owned(),
            text: Some(text.to_owned()),
            extra: Map::new(),
        }
    }

    #[test]
    fn incremental_and_cumulative_chunks_give_the_same_deltas() {
        let mut inc = StreamedDetails::default();
        let a: Vec<_> = ["The user", " asks", " for x"]
            .iter()
            .filter_map(|t| inc.delta(&[detail(t)]))
            .collect();
        let mut cum = StreamedDetails::default();
        let b: Vec<_> = ["The user", "The user asks", "The user asks for x"]
            .iter()
            .filter_map(|t| cum.delta(&[detail(t)]))
            .collect();
        assert_eq!(a, ["The user", " asks", " for x"]);
        assert_eq!(a, b);
    }

    #[test]
    fn details_of_other_types_are_not_text() {
        let mut other = detail("opaque");
        other.kind = "reasoning.encrypted".to_owned();
        assert_eq!(whole_text(&[other.clone()]), None);
        assert_eq!(
            whole_text(&[other, detail("a"), detail("b")]).as_deref(),
            Some("ab")
        );
    }
}
