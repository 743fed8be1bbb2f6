//! Plaintext reasoning of a native Responses upstream, carried across turns for a stateless
//! client.
//!
//! Some endpoints (DeepSeek's) answer with reasoning as plaintext `reasoning_text` content and
//! no `encrypted_content`, and refuse the next tool turn unless that reasoning comes back. Codex
//! (`store: false`) echoes a reasoning item's `encrypted_content` but never its `reasoning_text`
//! content, so the reasoning would be lost between turns. When the profile says the endpoint
//! wants it back (`reasoning_replay`), the decoder seals each such item's text, with its
//! provenance (the provider's configured name), into the `encrypted_content` the client gets
//! ([`Sealing`]); the next request opens it and sends the item in the form the endpoint takes —
//! `reasoning_text` content, no blob ([`replay`]). A blob sealed for another provider (or by
//! the translating dialects, which record no provenance) is left out with
//! `reasoning_not_replayable`, as before.
//!
//! Not here: sealing itself (a [`Sealer`] the gateway supplies) and reasoning of translated
//! answers (the assembler seals those).

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{Value, json};
use toolbridge_core::diagnostics::{REASONING_NOT_REPLAYABLE, REASONING_NOT_SEALED, diag};
use toolbridge_core::reasoning::{Sealer, parse_plaintext, sealed_plaintext};
use toolbridge_wire::responses::{Diagnostic, ProviderState};

use crate::profile::ReasoningReplay;

/// Seals the plaintext reasoning of one Responses answer for the client to carry back.
#[derive(Debug, Clone)]
pub struct Sealing {
    sealer: Arc<dyn Sealer>,
    origin: String,
    /// Blobs already made, by item id: the item's `output_item.done` and the terminal
    /// response show the same blob.
    sealed: HashMap<String, String>,
}

impl Sealing {
    /// Sealing with `sealer` for reasoning produced by the provider named `origin`.
    pub fn new(sealer: Arc<dyn Sealer>, origin: &str) -> Self {
        Self {
            sealer,
            origin: origin.to_owned(),
            sealed: HashMap::new(),
        }
    }

    /// Gives a `reasoning` item with plaintext content and no blob its sealed
    /// `encrypted_content`; any other item is left as it is. A text too large to seal is a
    /// diagnostic.
    pub fn seal_item(&mut self, item: &mut Value) -> Option<Diagnostic> {
        if item["type"] != "reasoning" || item["encrypted_content"].is_string() {
            return None;
        }
        let text = plaintext(item)?;
        let id = item["id"].as_str().map(str::to_owned);
        let known = id.as_ref().and_then(|id| self.sealed.get(id)).cloned();
        let blob = match known {
            Some(blob) => blob,
            None => {
                let state = ProviderState {
                    text,
                    origin: Some(self.origin.clone()),
                    ..ProviderState::default()
                };
                let Some(blob) = self.sealer.seal(&sealed_plaintext(&state)) else {
                    return Some(diag(
                        REASONING_NOT_SEALED,
                        None,
                        "the reasoning was too large to seal into encrypted_content; a stateless client cannot carry it back",
                    ));
                };
                if let Some(id) = id {
                    self.sealed.insert(id, blob.clone());
                }
                blob
            }
        };
        if let Some(map) = item.as_object_mut() {
            map.insert("encrypted_content".to_owned(), json!(blob));
        }
        None
    }

    /// [`Sealing::seal_item`] for every item of a response object's `output`.
    pub fn seal_output(&mut self, response: &mut Value) -> Vec<Diagnostic> {
        let Some(items) = response.get_mut("output").and_then(Value::as_array_mut) else {
            return Vec::new();
        };
        items
            .iter_mut()
            .filter_map(|item| self.seal_item(item))
            .collect()
    }
}

/// The `reasoning_text` content of a reasoning item, joined; `None` when it has none.
fn plaintext(item: &Value) -> Option<String> {
    let text: String = item["content"]
        .as_array()?
        .iter()
        .filter(|part| part["type"] == "reasoning_text")
        .filter_map(|part| part["text"].as_str())
        .collect();
    (!text.is_empty()).then_some(text)
}

/// Who this upstream is, for the blobs of an earlier turn: the provider's configured name and
/// the sealer that opens the gateway's blobs.
#[derive(Clone, Copy)]
pub struct Provenance<'a> {
    pub origin: &'a str,
    pub sealer: &'a Arc<dyn Sealer>,
}

impl Provenance<'_> {
    /// The sealing of this provider's plaintext reasoning, when `policy` wants it back.
    pub fn sealing(&self, policy: ReasoningReplay) -> Option<Sealing> {
        (policy != ReasoningReplay::Never).then(|| Sealing::new(self.sealer.clone(), self.origin))
    }
}

/// The reasoning items of a request's input for this upstream: a blob the gateway sealed for
/// this provider becomes `reasoning_text` content again (the turns `policy` wants back; the
/// others are left out, as a translated request leaves them out), and any other blob the gateway
/// sealed is left out with `reasoning_not_replayable`: the upstream cannot open it, and a
/// reasoning item without its blob would make a stateless upstream look it up by id.
pub(super) fn replay(
    items: &mut Vec<Value>,
    sealed_by_gateway: &dyn Fn(&str) -> bool,
    provenance: Option<Provenance<'_>>,
    policy: ReasoningReplay,
    diagnostics: &mut Vec<Diagnostic>,
) {
    let before_call = calls_follow(items);
    let taken = std::mem::take(items);
    for (i, mut item) in taken.into_iter().enumerate() {
        let blob = match item["encrypted_content"].as_str() {
            Some(blob) if item["type"] == "reasoning" && sealed_by_gateway(blob) => blob,
            _ => {
                items.push(item);
                continue;
            }
        };
        match provenance.and_then(|p| own_text(p, blob)) {
            Some(text) if policy != ReasoningReplay::Never => {
                if policy == ReasoningReplay::All || before_call[i] {
                    restore(&mut item, text);
                    items.push(item);
                }
            }
            _ => diagnostics.push(diag(
                REASONING_NOT_REPLAYABLE,
                Some(&format!("input[{i}]")),
                "reasoning produced through another provider cannot be replayed to this one; the item was left out",
            )),
        }
    }
}

/// The text of a blob sealed for the provider `p` names; `None` for any other blob.
fn own_text(p: Provenance<'_>, blob: &str) -> Option<String> {
    let state = parse_plaintext(p.sealer.open(blob).ok()?);
    (state.origin.as_deref() == Some(p.origin) && !state.text.is_empty()).then_some(state.text)
}

/// The item in the form the endpoint takes: its text as `reasoning_text` content, no blob.
fn restore(item: &mut Value, text: String) {
    let Some(map) = item.as_object_mut() else {
        return;
    };
    map.remove("encrypted_content");
    map.insert(
        "content".to_owned(),
        json!([{"type": "reasoning_text", "text": text}]),
    );
    map.entry("summary").or_insert_with(|| json!([]));
}

/// For each item, whether a call follows it within the same assistant turn (before the next
/// user message).
fn calls_follow(items: &[Value]) -> Vec<bool> {
    let mut follows = vec![false; items.len()];
    let mut seen = false;
    for (i, item) in items.iter().enumerate().rev() {
        let kind = item["type"].as_str().unwrap_or("message");
        if kind == "message" && item["role"] == "user" {
            seen = false;
        } else if kind.ends_with("_call") {
            seen = true;
        }
        follows[i] = seen;
    }
    follows
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sealer that "seals" by prefixing, enough to follow the blobs.
    #[derive(Debug)]
    struct Clear;

    impl Sealer for Clear {
        fn seal(&self, text: &str) -> Option<String> {
            Some(format!("tbr1.{text}"))
        }
        fn open(&self, blob: &str) -> Result<String, String> {
            blob.strip_prefix("tbr1.")
                .map(str::to_owned)
                .ok_or_else(|| "not ours".to_owned())
        }
    }

    fn reasoning(text: &str) -> Value {
        json!({"type": "reasoning", "id": "rs_1", "summary": [],
               "content": [{"type": "reasoning_text", "text": text}]})
    }

    #[test]
    fn sealed_reasoning_comes_back_as_text_to_its_provider_and_is_left_out_elsewhere() {
        let mut sealing = Sealing::new(Arc::new(Clear), "deepseek");
        let mut item = reasoning("think first");
        assert!(sealing.seal_item(&mut item).is_none());
        let blob = item["encrypted_content"].as_str().unwrap().to_owned();
        // The same item sealed again shows the same blob.
        let mut again = reasoning("think first");
        sealing.seal_item(&mut again);
        assert_eq!(again["encrypted_content"], json!(blob));
        // What Codex echoes: the blob, no content.
        let echoed = || {
            vec![
                json!({"type": "message", "role": "user", "content": "hi"}),
                json!({"type": "reasoning", "summary": [], "encrypted_content": blob}),
                json!({"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"}),
                json!({"type": "function_call_output", "call_id": "c1", "output": "ok"}),
            ]
        };
        let ours = |b: &str| b.starts_with("tbr1.");
        let clear: Arc<dyn Sealer> = Arc::new(Clear);
        let provenance = |origin| Provenance {
            origin,
            sealer: &clear,
        };
        let mut items = echoed();
        let mut diagnostics = Vec::new();
        let policy = ReasoningReplay::ToolCallTurns;
        replay(
            &mut items,
            &ours,
            Some(provenance("deepseek")),
            policy,
            &mut diagnostics,
        );
        assert_eq!(
            items[1],
            json!({"type": "reasoning", "summary": [],
                   "content": [{"type": "reasoning_text", "text": "think first"}]})
        );
        assert!(diagnostics.is_empty());
        let mut items = echoed();
        replay(
            &mut items,
            &ours,
            Some(provenance("other")),
            policy,
            &mut diagnostics,
        );
        assert_eq!(items.len(), 3);
        assert_eq!(diagnostics[0].code, REASONING_NOT_REPLAYABLE);
        assert_eq!(diagnostics[0].param.as_deref(), Some("input[1]"));
    }

    #[test]
    fn a_turn_without_calls_keeps_its_reasoning_only_when_every_turn_is_replayed() {
        let state = ProviderState {
            text: "t".to_owned(),
            origin: Some("p".to_owned()),
            ..ProviderState::default()
        };
        let blob = format!("tbr1.{}", sealed_plaintext(&state));
        let items = vec![
            json!({"type": "reasoning", "summary": [], "encrypted_content": blob}),
            json!({"type": "message", "role": "assistant", "content": "done"}),
            json!({"type": "message", "role": "user", "content": "next"}),
        ];
        let clear: Arc<dyn Sealer> = Arc::new(Clear);
        let p = Provenance {
            origin: "p",
            sealer: &clear,
        };
        let ours = |b: &str| b.starts_with("tbr1.");
        let mut diagnostics = Vec::new();
        let mut some = items.clone();
        replay(
            &mut some,
            &ours,
            Some(p),
            ReasoningReplay::ToolCallTurns,
            &mut diagnostics,
        );
        assert_eq!(some.len(), 2);
        let mut all = items;
        replay(
            &mut all,
            &ours,
            Some(p),
            ReasoningReplay::All,
            &mut diagnostics,
        );
        assert_eq!(all[0]["content"][0]["text"], "t");
        assert!(diagnostics.is_empty());
    }
}
