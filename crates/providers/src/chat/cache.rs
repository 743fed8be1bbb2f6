//! Cache breakpoints on a Chat request, for providers that take Anthropic-style
//! `cache_control` marks on message content parts (Qwen's explicit cache).
//!
//! The marks go where Anthropic's do (`anthropic/cache`): the last message that can carry one
//! (this request's whole prompt is written for the next), the last system message (the
//! instructions stay cached when the conversation changes), and the message where the previous
//! request of a tool loop ended (read even past the 20-block lookback). Assistant messages are
//! passed over: the providers document marks on system, user and tool content. Every string
//! content of those roles becomes one text part, marked or not, so a message renders the same
//! bytes in every turn whichever message carries this turn's marks.

use serde_json::{Value, json};
use toolbridge_wire::chat::ChatMessage;

use crate::profile::CachePlan;

const FIELD: &str = "cache_control";

/// Marks the end of a user turn the client ended with a cache breakpoint (OpenAI's
/// `prompt_cache_breakpoint`), when the provider takes marks.
pub(super) fn mark_client(message: &mut ChatMessage, plan: &CachePlan) {
    if plan.max_breakpoints > 0 {
        as_parts(message);
        mark_last(message, &plan.mark());
    }
}

/// Places the gateway's breakpoints on `messages` as `plan` says, after the client's: of the
/// client's, the latest are kept within the provider's limit.
pub(super) fn place(messages: &mut [ChatMessage], plan: &CachePlan) {
    let max = usize::from(plan.max_breakpoints);
    let mut over = marks(messages).saturating_sub(max);
    for part in messages
        .iter_mut()
        .filter_map(|m| m.content.as_mut()?.as_array_mut())
        .flatten()
    {
        if over == 0 {
            break;
        }
        if part.as_object_mut().and_then(|p| p.remove(FIELD)).is_some() {
            over -= 1;
        }
    }
    if !plan.places() {
        return;
    }
    // Every markable message in part form, marked or not: the same message renders the same
    // whichever turn's marks it carries.
    for m in messages.iter_mut().filter(|m| m.role != "assistant") {
        as_parts(m);
    }
    let mark = plan.mark();
    let mut left = max.saturating_sub(marks(messages));
    let markable = |m: &ChatMessage| m.role != "assistant";
    let last = messages.iter().rposition(markable);
    let system = messages.iter().rposition(|m| m.role == "system");
    let previous_end = messages
        .iter()
        .rposition(|m| m.role == "assistant")
        .and_then(|a| messages[..a].iter().rposition(markable));
    let mut done: Vec<usize> = Vec::new();
    for i in [last, system, previous_end].into_iter().flatten() {
        if left == 0 {
            break;
        }
        if !done.contains(&i) && mark_last(&mut messages[i], &mark) {
            left -= 1;
        }
        done.push(i);
    }
}

/// A non-empty string content as one text part.
fn as_parts(message: &mut ChatMessage) {
    if let Some(Value::String(text)) = &mut message.content
        && !text.is_empty()
    {
        let text = std::mem::take(text);
        message.content = Some(json!([{"type": "text", "text": text}]));
    }
}

/// The marks the messages carry already (the client's).
fn marks(messages: &[ChatMessage]) -> usize {
    messages
        .iter()
        .filter_map(|m| m.content.as_ref()?.as_array())
        .flatten()
        .filter(|part| part.get(FIELD).is_some())
        .count()
}

/// Marks the last part of `message` that can carry one; whether a new mark was placed.
fn mark_last(message: &mut ChatMessage, mark: &Value) -> bool {
    let Some(Value::Array(parts)) = &mut message.content else {
        return false;
    };
    let carries = |p: &Value| match p.get("type").and_then(Value::as_str) {
        Some("text") => p
            .get("text")
            .and_then(Value::as_str)
            .is_some_and(|t| !t.is_empty()),
        Some("image_url") => true,
        _ => false,
    };
    let Some(part) = parts.iter_mut().rev().find(|p| carries(p)) else {
        return false;
    };
    match part.as_object_mut() {
        Some(obj) if !obj.contains_key(FIELD) => {
            obj.insert(FIELD.to_owned(), mark.clone());
            true
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};
    use toolbridge_wire::chat::ChatUsage;

    use crate::cache_tests::tool_loop;

    fn translate(preset: &str, body: Value) -> Value {
        crate::cache_tests::translate(preset, "", body)
    }

    #[test]
    fn qwen_gets_marks_on_the_system_the_last_and_the_previous_end() {
        let out = translate("qwen", tool_loop());
        let messages = out["messages"].as_array().unwrap();
        let mark = json!({"type": "ephemeral"});
        assert_eq!(messages[0]["role"], "system");
        assert_eq!(
            messages[0]["content"],
            json!([{"type": "text", "text": "Be terse.", "cache_control": mark}])
        );
        assert_eq!(
            messages[1]["content"],
            json!([{"type": "text", "text": "List the files.", "cache_control": mark}])
        );
        assert!(messages[2]["content"].get(0).is_none(), "{:?}", messages[2]);
        assert_eq!(messages[3]["role"], "tool");
        assert_eq!(
            messages[3]["content"],
            json!([{"type": "text", "text": "a.txt", "cache_control": mark}])
        );
    }

    #[test]
    fn automatic_caches_get_no_marks() {
        for preset in ["deepseek", "kimi", "glm", "openai", "generic"] {
            let out = translate(preset, tool_loop());
            assert!(
                !out.to_string().contains("cache_control"),
                "{preset}: {out}"
            );
        }
    }

    #[test]
    fn cache_reads_and_writes_are_read_where_each_provider_reports_them() {
        let read = |u: Value| {
            let u: ChatUsage = serde_json::from_value(u).unwrap();
            let usage = super::super::usage(&u);
            (
                usage.input_tokens,
                usage.input_tokens_details.cached_tokens,
                usage.input_tokens_details.cache_write_tokens,
            )
        };
        // Moonshot: top level.
        assert_eq!(
            read(json!({"prompt_tokens": 100, "completion_tokens": 1, "cached_tokens": 80})),
            (100, 80, 0)
        );
        // DeepSeek.
        assert_eq!(
            read(
                json!({"prompt_tokens": 100, "completion_tokens": 1, "prompt_cache_hit_tokens": 64, "prompt_cache_miss_tokens": 36})
            ),
            (100, 64, 0)
        );
        // Qwen's explicit cache.
        assert_eq!(
            read(
                json!({"prompt_tokens": 100, "completion_tokens": 1, "prompt_tokens_details": {"cached_tokens": 50, "cache_creation_input_tokens": 40}})
            ),
            (100, 50, 40)
        );
        // OpenAI.
        assert_eq!(
            read(
                json!({"prompt_tokens": 100, "completion_tokens": 1, "prompt_tokens_details": {"cached_tokens": 10, "cache_write_tokens": 90}})
            ),
            (100, 10, 90)
        );
    }

    #[test]
    fn a_clients_breakpoint_reaches_qwen_and_not_an_automatic_cache() {
        let mut body = tool_loop();
        body["input"][0] = json!({"role": "user", "content": [{"type": "input_text",
            "text": "List the files.", "prompt_cache_breakpoint": {"mode": "explicit"}}]});
        let qwen = translate("qwen", body.clone());
        assert_eq!(
            qwen["messages"][1]["content"],
            json!([{"type": "text", "text": "List the files.", "cache_control": {"type": "ephemeral"}}])
        );
        let deepseek = translate("deepseek", body);
        assert!(
            !deepseek.to_string().contains("cache_control"),
            "{deepseek}"
        );
    }
}
