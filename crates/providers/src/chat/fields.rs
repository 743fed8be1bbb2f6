//! Where a Chat request says what the Responses request says in its own fields: the reasoning
//! effort in the profile's style, and the cache key in the provider's own cache-hint field.
//!
//! Not here: the rest of the request (`request`).

use serde_json::{Map, Value, json};
use toolbridge_wire::chat::ChatRequest;

use crate::profile::Profile;

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

/// Sets the fields that say `effort` to this provider (its profile's effort table); false when
/// the provider has no way to say it.
pub(super) fn effort_fields(
    effort: &str,
    profile: &Profile,
    extra: &mut Map<String, Value>,
) -> bool {
    let Some(say) = profile.effort(effort) else {
        return false;
    };
    for (key, value) in &say.fields {
        extra.insert(key.clone(), value.clone());
    }
    true
}
