//! Reasoning continuity: how a provider's reasoning is shown to the client, and how it comes back.
//!
//! Output: reasoning becomes a `reasoning` item, shown as `summary_text` parts when the request
//! asks for a summary (`reasoning.summary`), else as `reasoning_text` content. (toolbridge has no
//! summariser: the "summary" is the provider's reasoning itself.) When the request includes
//! `reasoning.encrypted_content`, the reasoning is also sealed into `encrypted_content` so that a
//! stateless client (`store: false`, Codex) carries it back.
//!
//! Input: a reasoning item's text comes from its `reasoning_text` content, else from a sealed
//! `encrypted_content` this gateway made (see [`open_sealed`]), else from its summary. A blob that
//! is foreign or tampered with is ignored with a diagnostic.
//!
//! Sealing itself is a [`Sealer`] supplied by the caller: authenticated encryption needs keys and
//! randomness, which this pure crate does not own.

use toolbridge_wire::responses::{CreateResponse, Diagnostic};

use crate::canonical::Turn;
use crate::diagnostics::{REASONING_BLOB_IGNORED, diag};

/// Authenticated encryption of reasoning blobs.
pub trait Sealer: Send + Sync + std::fmt::Debug {
    /// Seals reasoning text; `None` when it cannot (too large).
    fn seal(&self, text: &str) -> Option<String>;
    /// Opens a blob this gateway sealed. `Err` says why it is not ours or not intact.
    fn open(&self, blob: &str) -> Result<String, String>;
}

/// How reasoning is shown in a response.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReasoningDisplay {
    /// As `summary_text` parts (the request asked for a summary) rather than `reasoning_text`.
    pub summary: bool,
    /// Seal into `encrypted_content` (the request included `reasoning.encrypted_content`).
    pub encrypted: bool,
}

impl ReasoningDisplay {
    /// What the request asks for.
    pub fn for_request(req: &CreateResponse) -> Self {
        let summary = req
            .reasoning
            .as_ref()
            .and_then(|r| r.summary.as_deref())
            .is_some_and(|s| matches!(s, "auto" | "concise" | "detailed"));
        let encrypted = req
            .include
            .iter()
            .flatten()
            .any(|i| i == "reasoning.encrypted_content");
        Self { summary, encrypted }
    }
}

/// Marks a sealed plaintext that carries a signature: `\u{1}` then `{"text","signature"}` as
/// JSON. Reasoning text from a provider never starts with this control character, and a
/// plaintext without it is the reasoning text alone (so older blobs still open).
const SIGNED: char = '\u{1}';

/// What is sealed for one reasoning item: its text, with the provider's signature if it gave
/// one (see [`SIGNED`]).
pub fn sealed_plaintext(text: &str, signature: Option<&str>) -> String {
    match signature {
        None => text.to_owned(),
        Some(signature) => format!(
            "{SIGNED}{}",
            serde_json::json!({"text": text, "signature": signature})
        ),
    }
}

/// The reasoning text and signature of an opened plaintext (see [`sealed_plaintext`]).
pub fn parse_plaintext(plain: String) -> (String, Option<String>) {
    let Some(json) = plain.strip_prefix(SIGNED) else {
        return (plain, None);
    };
    let value: serde_json::Value = serde_json::from_str(json).unwrap_or_default();
    match (value["text"].as_str(), value["signature"].as_str()) {
        (Some(text), Some(signature)) => (text.to_owned(), Some(signature.to_owned())),
        _ => (plain, None),
    }
}

/// Opens the sealed reasoning of assistant turns: its text fills the turn's reasoning where the
/// turn has no plain text, and its signature, if any, becomes the turn's
/// `reasoning_signature`. Blobs that do not open are dropped with one diagnostic each.
pub fn open_sealed(turns: &mut [Turn], sealer: &dyn Sealer, diagnostics: &mut Vec<Diagnostic>) {
    for turn in turns {
        let Turn::Assistant(assistant) = turn else {
            continue;
        };
        for blob in std::mem::take(&mut assistant.sealed_reasoning) {
            match sealer.open(&blob) {
                Ok(plain) => {
                    let (text, signature) = parse_plaintext(plain);
                    if assistant.reasoning.is_none() {
                        assistant.reasoning = Some(text);
                    }
                    if assistant.reasoning_signature.is_none() {
                        assistant.reasoning_signature = signature;
                    }
                }
                Err(why) => diagnostics.push(diag(
                    REASONING_BLOB_IGNORED,
                    Some("input"),
                    format!("an encrypted_content blob was ignored: {why}"),
                )),
            }
        }
    }
}

#[cfg(test)]
mod plaintext_tests {
    use super::*;

    #[test]
    fn a_signature_round_trips_and_plain_text_stays_plain() {
        let sealed = sealed_plaintext("thinking {\"text\": 1}", Some("sig/+="));
        assert_eq!(
            parse_plaintext(sealed),
            (
                "thinking {\"text\": 1}".to_owned(),
                Some("sig/+=".to_owned())
            )
        );
        let plain = sealed_plaintext("just text", None);
        assert_eq!(plain, "just text");
        assert_eq!(parse_plaintext(plain), ("just text".to_owned(), None));
        // Text that looks like the envelope but lacks the marker is text.
        let lookalike = r#"{"text":"a","signature":"b"}"#.to_owned();
        assert_eq!(parse_plaintext(lookalike.clone()), (lookalike, None));
    }
}
