//! Request fields the gateway does not translate: the client's top-level fields the Responses
//! API does not define (Codex's `client_metadata`, `access_programs`, `generate`, a future
//! field), and named fields an endpoint rejects or calls otherwise. The profile's
//! [`FieldRules`] decide; every decision is a diagnostic.
//!
//! A translating dialect builds its body from the canonical request, so nothing unknown can
//! reach its upstream: [`report_untranslated`] says what was left behind. A native Responses
//! upstream gets the client's own body, where [`apply`] drops, renames and (unless the profile
//! passes them) removes unknown fields. A path may name a nested field (`reasoning.summary`) or
//! a field of every input item (`input[].namespace`).

use serde_json::{Map, Value};
use toolbridge_core::diagnostics::{PARAM_DROPPED, PARAM_RENAMED, diag};
use toolbridge_wire::responses::{CreateResponse, Diagnostic};

use crate::profile::{FieldRules, UnknownFields};

/// The top-level fields of the Responses API's create request (what OpenAI documents), which a
/// strict upstream knows; anything else is unknown.
pub const RESPONSES_FIELDS: &[&str] = &[
    "model",
    "input",
    "instructions",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "temperature",
    "top_p",
    "top_logprobs",
    "max_output_tokens",
    "max_tool_calls",
    "user",
    "safety_identifier",
    "prompt_cache_key",
    "prompt_cache_retention",
    "metadata",
    "store",
    "stream",
    "stream_options",
    "background",
    "text",
    "reasoning",
    "include",
    "truncation",
    "service_tier",
    "previous_response_id",
    "conversation",
    "prompt",
    "context_management",
];

/// Fields the gateway itself reads and never forwards in any dialect (history and the stream's
/// own options); leaving them behind is no loss.
const GATEWAY_READ: &[&str] = &["conversation", "stream_options"];

/// A diagnostic for each of the client's top-level fields a translating dialect has no place
/// for.
pub(crate) fn report_untranslated(req: &CreateResponse, diagnostics: &mut Vec<Diagnostic>) {
    for key in req.extra.keys() {
        if GATEWAY_READ.contains(&key.as_str()) {
            continue;
        }
        diagnostics.push(diag(
            PARAM_DROPPED,
            Some(key),
            format!("`{key}` has no equivalent in the provider's API; it was not sent"),
        ));
    }
}

/// The profile's rules applied to a passed-through body: dropped fields, renamed fields, then
/// unknown top-level fields unless the profile passes them.
pub(crate) fn apply(
    body: &mut Map<String, Value>,
    rules: &FieldRules,
    diagnostics: &mut Vec<Diagnostic>,
) {
    for path in &rules.drop {
        if take(body, path).is_some() {
            diagnostics.push(diag(
                PARAM_DROPPED,
                Some(path),
                format!("the provider's endpoint rejects `{path}`; it was not sent"),
            ));
        }
    }
    for (from, to) in &rules.rename {
        let Some(to) = to.as_str() else { continue };
        let Some(value) = take(body, from) else {
            continue;
        };
        if body.contains_key(to) {
            diagnostics.push(diag(
                PARAM_DROPPED,
                Some(from),
                format!("the provider reads `{from}` as `{to}`, which the request already sets; it was not sent"),
            ));
        } else {
            body.insert(to.to_owned(), value);
            diagnostics.push(diag(
                PARAM_RENAMED,
                Some(from),
                format!("the provider reads `{from}` as `{to}`; it was sent there"),
            ));
        }
    }
    if rules.unknown == UnknownFields::Drop {
        let renamed: Vec<&str> = rules.rename.values().filter_map(Value::as_str).collect();
        let unknown: Vec<String> = body
            .keys()
            .filter(|k| !RESPONSES_FIELDS.contains(&k.as_str()) && !renamed.contains(&k.as_str()))
            .cloned()
            .collect();
        for key in unknown {
            body.remove(&key);
            diagnostics.push(diag(
                PARAM_DROPPED,
                Some(&key),
                format!(
                    "`{key}` is not a Responses API field this provider accepts; it was not sent"
                ),
            ));
        }
    }
}

/// Removes the field at `path` (`a`, `a.b`, `input[].b`), returning it (for `input[]`, the
/// first item's, and every item's is removed). A parent object left empty goes too.
fn take(body: &mut Map<String, Value>, path: &str) -> Option<Value> {
    if let Some(rest) = path.strip_prefix("input[].") {
        let items = body.get_mut("input")?.as_array_mut()?;
        let mut first = None;
        for item in items.iter_mut().filter_map(Value::as_object_mut) {
            if let Some(v) = take(item, rest) {
                first.get_or_insert(v);
            }
        }
        return first;
    }
    match path.split_once('.') {
        None => body.remove(path),
        Some((head, rest)) => {
            let inner = body.get_mut(head)?.as_object_mut()?;
            let value = take(inner, rest);
            if inner.is_empty() {
                body.remove(head);
            }
            value
        }
    }
}
