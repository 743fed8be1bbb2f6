//! The input items Codex 0.171 sends beside the Responses API's own, each with a declared policy
//! on a translating route (a native Responses upstream gets them as sent):
//! - `agent_message` (multi-agent v2: a message from another agent, with `author` and
//!   `recipient`): rendered as a user turn that names both, its text kept.
//! - `configuration_update` (the session's settings changed mid-conversation): rendered as a
//!   user turn holding the update's fields as JSON, so the model knows what changed.
//! - `context_compaction`: opened like `compaction` when this gateway sealed it (the compact
//!   stage), else left out with a diagnostic (`item_dropped`), like any other type.
//! - `compaction_trigger` as the last item is the compact stage's; anywhere else it is left out
//!   with a diagnostic.
//! - `function_call.encrypted_function_args` (readable by OpenAI only): the call goes with its
//!   plain `arguments` (empty when absent) and a `param_dropped` diagnostic.
//! - message `phase` (`commentary`, `partial_answer`, `final_answer`): the text is kept, the
//!   phase is not sent (no dialect has a field for it).
//! - `input_audio` content: a short placeholder text with a `content_part_dropped`
//!   diagnostic (`content`).
//!
//! Not here: the Responses API's own items (`turns`).

use serde_json::{Map, Value};

use super::Reducer;
use crate::canonical::{Turn, UserPart};

impl Reducer {
    /// A message from another agent: the model reads who wrote it to whom, and its text.
    pub(super) fn agent_message(&mut self, map: &Map<String, Value>) {
        let name = |key: &str| {
            map.get(key)
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .unwrap_or("unknown")
                .to_owned()
        };
        let text = format!(
            "[Message from agent `{}` to `{}`]\n{}",
            name("author"),
            name("recipient"),
            item_text(map)
        );
        self.other_turn(Turn::User {
            parts: vec![UserPart::Text(text)],
        });
    }

    /// A change of the session's settings: the model reads the fields that changed.
    pub(super) fn configuration_update(&mut self, map: &Map<String, Value>) {
        let fields: Map<String, Value> = map
            .iter()
            .filter(|(k, _)| !matches!(k.as_str(), "type" | "id"))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let text = format!(
            "[The session's configuration was updated: {}]",
            Value::Object(fields)
        );
        self.other_turn(Turn::User {
            parts: vec![UserPart::Text(text)],
        });
    }
}

/// An item's text: `content` as a string or as parts, else `text`. A part's text is its `text`,
/// or its `encrypted_content` (Codex sends a spawned agent's task that way; only OpenAI's
/// server encrypts it, so elsewhere it is the task as written).
fn item_text(map: &Map<String, Value>) -> String {
    match map.get("content").or_else(|| map.get("text")) {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| {
                p.get("text")
                    .or_else(|| p.get("encrypted_content"))
                    .and_then(Value::as_str)
            })
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}
