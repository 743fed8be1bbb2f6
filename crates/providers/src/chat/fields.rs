//! Where a Chat request says what the Responses request says in its own fields: the reasoning
//! effort in the profile's style, and the cache key in the provider's own cache-hint field.
//!
//! Not here: the rest of the request (`request`).

use serde_json::{Map, Value, json};
use toolbridge_wire::chat::ChatRequest;

use crate::profile::EffortStyle;

/// Puts the cache key in the provider's own cache-hint field (`user`, `session_id`, …); false
/// when that field is already taken (the end user's identifier went there).
pub(super) fn cache_hint(out: &mut ChatRequest, field: &str, key: &str) -> bool {
    let slot = match field {
        "user" => &mut out.user,
        "safety_identifier" => &mut out.safety_identifier,
        _ => {
            if out.extra.contains_key(field) {
                return false;
            }
            out.extra.insert(field.to_owned(), json!(key));
            return true;
        }
    };
    if slot.is_some() {
        return false;
    }
    *slot = Some(key.to_owned());
    true
}

/// Sets the fields that say `effort` in `style`; false when the provider has no way to say it.
pub(super) fn effort_fields(
    effort: &str,
    style: EffortStyle,
    extra: &mut Map<String, Value>,
) -> bool {
    let off = matches!(effort, "none" | "minimal");
    let mut set = |k: &str, v: Value| {
        extra.insert(k.to_owned(), v);
    };
    match style {
        EffortStyle::None => return false,
        EffortStyle::ReasoningEffort => set("reasoning_effort", json!(effort)),
        EffortStyle::DeepSeek => {
            if off {
                set("thinking", json!({"type": "disabled"}));
            } else {
                set("thinking", json!({"type": "enabled"}));
                set(
                    "reasoning_effort",
                    json!(if effort == "xhigh" { "max" } else { "high" }),
                );
            }
        }
        EffortStyle::Glm => set(
            "thinking",
            json!({"type": if off { "disabled" } else { "enabled" }}),
        ),
        EffortStyle::Qwen => set("enable_thinking", json!(!off)),
        EffortStyle::MiniMax => set(
            "thinking",
            json!({"type": if off { "disabled" } else { "adaptive" }}),
        ),
    }
    true
}
