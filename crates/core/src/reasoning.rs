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
//! Provider state ([`ProviderState`]: the signature a provider checks, Anthropic's redacted
//! reasoning) travels sealed with the text, and is also kept server-side by `call_id` (the
//! gateway's store), so a client that keeps no blob still gets it back: [`lacks_state`] says
//! which turns need it, [`apply_state`] fills them.
//!
//! Sealing itself is a [`Sealer`] supplied by the caller: authenticated encryption needs keys and
//! randomness, which this pure crate does not own.

use toolbridge_wire::responses::{CreateResponse, Diagnostic, ProviderState};

use crate::canonical::{AssistantTurn, Turn};
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

/// Marks a sealed plaintext that carries provider state: `\u{1}` then the [`ProviderState`] as
/// JSON (`{"text","signature","redacted"}`). Reasoning text from a provider never starts with
/// this control character, and a plaintext without it is the reasoning text alone (so older
/// blobs still open).
const SIGNED: char = '\u{1}';

/// What is sealed for one reasoning item: its text alone, or the whole [`ProviderState`] when
/// the provider signed it, redacted some of it or must get it back itself (its `origin`; see
/// [`SIGNED`]).
pub fn sealed_plaintext(state: &ProviderState) -> String {
    if !state.is_signed() && state.origin.is_none() {
        return state.text.clone();
    }
    format!(
        "{SIGNED}{}",
        serde_json::to_string(state).unwrap_or_default()
    )
}

/// The provider state of an opened plaintext (see [`sealed_plaintext`]).
pub fn parse_plaintext(plain: String) -> ProviderState {
    let Some(json) = plain.strip_prefix(SIGNED) else {
        return ProviderState {
            text: plain,
            ..ProviderState::default()
        };
    };
    match serde_json::from_str::<ProviderState>(json) {
        Ok(state) if state.is_signed() || state.origin.is_some() => state,
        _ => ProviderState {
            text: plain,
            ..ProviderState::default()
        },
    }
}

/// Gives an assistant turn the provider state it lacks: the text where it has none, the
/// signature and the redacted reasoning where it has neither.
pub fn apply_state(assistant: &mut AssistantTurn, state: ProviderState) {
    if assistant.reasoning.is_none() && !state.text.is_empty() {
        assistant.reasoning = Some(state.text);
    }
    if assistant.reasoning_signature.is_none() && assistant.redacted_reasoning.is_empty() {
        assistant.reasoning_signature = state.signature;
        assistant.redacted_reasoning = state.redacted;
    }
}

/// Whether a turn's calls go back without the provider state a signing provider checks: it
/// has calls, and neither a signature nor redacted reasoning.
pub fn lacks_state(assistant: &AssistantTurn) -> bool {
    !assistant.tool_calls.is_empty()
        && assistant.reasoning_signature.is_none()
        && assistant.redacted_reasoning.is_empty()
}

/// Opens the sealed reasoning of assistant turns: its text fills the turn's reasoning where the
/// turn has no plain text, and its signature and redacted reasoning, if any, go on the turn.
/// Blobs that do not open are dropped with one diagnostic each.
pub fn open_sealed(turns: &mut [Turn], sealer: &dyn Sealer, diagnostics: &mut Vec<Diagnostic>) {
    for turn in turns {
        let Turn::Assistant(assistant) = turn else {
            continue;
        };
        for blob in std::mem::take(&mut assistant.sealed_reasoning) {
            match sealer.open(&blob) {
                Ok(plain) => apply_state(assistant, parse_plaintext(plain)),
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

    fn signed(text: &str, signature: Option<&str>, redacted: &[&str]) -> ProviderState {
        ProviderState {
            text: text.to_owned(),
            signature: signature.map(str::to_owned),
            redacted: redacted.iter().map(|r| (*r).to_owned()).collect(),
            origin: None,
        }
    }

    #[test]
    fn reasoning_with_an_origin_keeps_it_through_the_seal() {
        let state = ProviderState {
            text: "plain thoughts".to_owned(),
            origin: Some("deepseek".to_owned()),
            ..ProviderState::default()
        };
        assert_eq!(parse_plaintext(sealed_plaintext(&state)), state);
    }

    #[test]
    fn provider_state_round_trips_and_plain_text_stays_plain() {
        let state = signed("thinking {\"text\": 1}", Some("sig/+="), &[]);
        assert_eq!(parse_plaintext(sealed_plaintext(&state)), state);
        let redacted = signed("", None, &["EmwKAhgB", "EmwKAhgC"]);
        assert_eq!(parse_plaintext(sealed_plaintext(&redacted)), redacted);
        let signature_alone = signed("", Some("CiQB"), &[]);
        assert_eq!(
            parse_plaintext(sealed_plaintext(&signature_alone)),
            signature_alone
        );
        let plain = sealed_plaintext(&signed("just text", None, &[]));
        assert_eq!(plain, "just text");
        assert_eq!(parse_plaintext(plain), signed("just text", None, &[]));
        // Text that looks like the envelope but lacks the marker is text.
        let lookalike = r#"{"text":"a","signature":"b"}"#.to_owned();
        assert_eq!(
            parse_plaintext(lookalike.clone()),
            signed(&lookalike, None, &[])
        );
    }

    #[test]
    fn state_fills_only_what_the_turn_lacks() {
        let mut turn = AssistantTurn {
            reasoning: Some("mine".to_owned()),
            ..AssistantTurn::default()
        };
        apply_state(&mut turn, signed("stored", Some("s1"), &["r1"]));
        assert_eq!(turn.reasoning.as_deref(), Some("mine"));
        assert_eq!(turn.reasoning_signature.as_deref(), Some("s1"));
        assert_eq!(turn.redacted_reasoning, ["r1"]);
        apply_state(&mut turn, signed("later", Some("s2"), &[]));
        assert_eq!(turn.reasoning_signature.as_deref(), Some("s1"));
    }
}
