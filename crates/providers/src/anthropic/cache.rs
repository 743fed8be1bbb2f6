//! Cache breakpoints on a Messages request, placed for the client.
//!
//! Anthropic caches only up to a block marked `cache_control`, and reads an earlier entry only
//! when a breakpoint of this request lies at most about 20 blocks after it. Its prefix is tools,
//! then system, then messages. A Responses client sets no mark (Codex sends none), so without
//! the gateway's marks every turn of a session pays for its whole prompt.
//!
//! The client's own marks come first: OpenAI's `prompt_cache_breakpoint` on a user message
//! becomes a mark on that turn's last block. Then the gateway's, in this order while the
//! profile's limit allows:
//! 1. the last block of the last message: this request's whole prompt is written, so the next
//!    request, which begins with it, reads it;
//! 2. the end of the system prompt (or the last tool when there is none): tools and
//!    instructions stay cached when the conversation behind them changes (compaction, a new
//!    task with the same instructions);
//! 3. the last block of the user message before the last assistant message, where the previous
//!    request of a tool loop ended: its entry is read even when this request added more than
//!    the lookback's 20 blocks (many parallel calls and results).
//!
//! A mark changes nothing of the content, so moving the rolling marks each turn keeps the prefix
//! stable for the cache (Anthropic's cache keys leave `cache_control` out); every text content
//! is sent as blocks, marked or not, so a message renders the same bytes in every turn. Thinking
//! blocks and empty texts cannot carry a mark and are passed over.
//!
//! Why explicit marks rather than Anthropic's request-level automatic `cache_control`: they work
//! on every Anthropic-compatible endpoint (Qwen's, relays); the mark on the system prompt keeps
//! the tools and instructions cached when a compaction rewrites the conversation (measured: the
//! turn after a Codex compaction reads 9,451 of its 9,574 tokens); and the mark at the previous
//! end covers tool loops longer than the 20-block lookback.

use serde_json::{Map, Value};
use toolbridge_wire::anthropic::{
    ContentBlock, Message, MessageContent, MessagesRequest, System, TextBlock,
};

use crate::profile::CachePlan;

const FIELD: &str = "cache_control";

/// Marks the end of a user turn the client ended with a cache breakpoint (OpenAI's
/// `prompt_cache_breakpoint`), when the provider takes marks.
pub(super) fn mark_client(message: &mut Message, plan: &CachePlan) {
    if plan.max_breakpoints > 0 {
        mark_message(message, &plan.mark());
    }
}

/// Places the gateway's breakpoints on `out` as `plan` says, after the client's: of the
/// client's, the latest are kept within the provider's limit (a conversation may carry more
/// than one request may write); then the gateway's fill what is left, unless the plan leaves
/// placing off or the request asks for automatic caching itself.
pub(super) fn place(out: &mut MessagesRequest, plan: &CachePlan) {
    let max = usize::from(plan.max_breakpoints);
    if max == 0 {
        return;
    }
    unmark_earliest(out, marks(out).saturating_sub(max));
    if !plan.places() || out.extra.contains_key(FIELD) {
        return;
    }
    // Every text content in block form, marked or not: the same message renders the same
    // whichever turn's marks it carries.
    as_blocks(out);
    let mark = plan.mark();
    let mut left = max.saturating_sub(marks(out));
    let last = out.messages.len().checked_sub(1);
    let previous_end = previous_end(&out.messages);
    for target in [last, None, previous_end] {
        if left == 0 {
            break;
        }
        // `None` stands for the system prompt, between the two rolling marks.
        let placed = match target {
            Some(i) => mark_message(&mut out.messages[i], &mark),
            None => mark_system(out, &mark),
        };
        if placed == Placed::New {
            left -= 1;
        }
    }
}

/// Whether a target got a new mark, already had one, or has no block to carry one.
#[derive(Debug, PartialEq, Eq)]
enum Placed {
    New,
    Already,
    No,
}

/// The number of marks the request carries already (the client's).
fn marks(out: &MessagesRequest) -> usize {
    let tools = out
        .tools
        .iter()
        .flatten()
        .filter(|t| t.extra.contains_key(FIELD))
        .count();
    let system = match &out.system {
        Some(System::Blocks(blocks)) => blocks.iter().filter(|b| has_mark(b)).count(),
        _ => 0,
    };
    let messages = out
        .messages
        .iter()
        .map(|m| match &m.content {
            MessageContent::Blocks(blocks) => blocks.iter().filter(|b| has_mark(b)).count(),
            MessageContent::Text(_) => 0,
        })
        .sum::<usize>();
    tools + system + messages
}

/// Takes the first `n` marks off, in prefix order (tools, system, messages).
fn unmark_earliest(out: &mut MessagesRequest, mut n: usize) {
    let tools = out.tools.iter_mut().flatten().map(|t| &mut t.extra);
    let system = match &mut out.system {
        Some(System::Blocks(blocks)) => Some(blocks.iter_mut().filter_map(extra_of)),
        _ => None,
    };
    let messages = out.messages.iter_mut().flat_map(|m| match &mut m.content {
        MessageContent::Blocks(blocks) => Some(blocks.iter_mut().filter_map(extra_of)),
        MessageContent::Text(_) => None,
    });
    for extra in tools
        .chain(system.into_iter().flatten())
        .chain(messages.flatten())
    {
        if n == 0 {
            return;
        }
        if extra.remove(FIELD).is_some() {
            n -= 1;
        }
    }
}

/// The index of the user message before the last assistant message, when there is one.
fn previous_end(messages: &[Message]) -> Option<usize> {
    let assistant = messages.iter().rposition(|m| m.role == "assistant")?;
    messages[..assistant].iter().rposition(|m| m.role == "user")
}

/// The system prompt and every message's non-empty text content as one text block each.
fn as_blocks(out: &mut MessagesRequest) {
    let block = |text: String| {
        vec![ContentBlock::Text(TextBlock {
            text,
            extra: Map::new(),
        })]
    };
    // Moved, not copied: a Codex system prompt is some 40 KB.
    if let Some(System::Text(text)) = &mut out.system
        && !text.is_empty()
    {
        out.system = Some(System::Blocks(block(std::mem::take(text))));
    }
    for m in &mut out.messages {
        if let MessageContent::Text(text) = &mut m.content
            && !text.is_empty()
        {
            m.content = MessageContent::Blocks(block(std::mem::take(text)));
        }
    }
}

fn mark_message(message: &mut Message, mark: &Value) -> Placed {
    match &mut message.content {
        MessageContent::Blocks(blocks) => mark_last(blocks, mark),
        MessageContent::Text(_) => Placed::No,
    }
}

fn mark_system(out: &mut MessagesRequest, mark: &Value) -> Placed {
    match &mut out.system {
        Some(System::Blocks(blocks)) => mark_last(blocks, mark),
        _ => match out.tools.as_mut().and_then(|t| t.last_mut()) {
            Some(tool) if tool.extra.contains_key(FIELD) => Placed::Already,
            Some(tool) => {
                tool.extra.insert(FIELD.to_owned(), mark.clone());
                Placed::New
            }
            None => Placed::No,
        },
    }
}

/// Marks the last block of `blocks` that can carry a mark.
fn mark_last(blocks: &mut [ContentBlock], mark: &Value) -> Placed {
    let Some(extra) = blocks.iter_mut().rev().find_map(extra_of) else {
        return Placed::No;
    };
    if extra.contains_key(FIELD) {
        return Placed::Already;
    }
    extra.insert(FIELD.to_owned(), mark.clone());
    Placed::New
}

/// The fields a block keeps beside its own, when it may carry a mark.
fn extra_of(block: &mut ContentBlock) -> Option<&mut Map<String, Value>> {
    match block {
        ContentBlock::Text(t) if !t.text.is_empty() => Some(&mut t.extra),
        ContentBlock::Image(b) => Some(&mut b.extra),
        ContentBlock::ToolUse(b) => Some(&mut b.extra),
        ContentBlock::ToolResult(b) => Some(&mut b.extra),
        ContentBlock::Document(b) => Some(&mut b.extra),
        _ => None,
    }
}

fn has_mark(block: &ContentBlock) -> bool {
    match block {
        ContentBlock::Text(t) => t.extra.contains_key(FIELD),
        ContentBlock::Image(b) => b.extra.contains_key(FIELD),
        ContentBlock::ToolUse(b) | ContentBlock::ServerToolUse(b) => b.extra.contains_key(FIELD),
        ContentBlock::ToolResult(b) => b.extra.contains_key(FIELD),
        ContentBlock::Document(b) => b.extra.contains_key(FIELD),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use crate::cache_tests::tool_loop;
    use crate::profile::{Profile, ProfilePatch};

    fn translate(body: Value, patch: &str) -> Value {
        crate::cache_tests::translate("anthropic", patch, body)
    }

    fn marked(v: &Value) -> Vec<String> {
        let mut out = Vec::new();
        walk(v, "", &mut out);
        out
    }

    fn walk(v: &Value, path: &str, out: &mut Vec<String>) {
        match v {
            Value::Object(map) => {
                for (k, child) in map {
                    if k == "cache_control" {
                        out.push(format!("{path} {child}"));
                    } else {
                        walk(child, &format!("{path}.{k}"), out);
                    }
                }
            }
            Value::Array(items) => {
                for (i, child) in items.iter().enumerate() {
                    walk(child, &format!("{path}[{i}]"), out);
                }
            }
            _ => {}
        }
    }

    #[test]
    fn the_last_message_the_system_prompt_and_the_previous_end_are_marked() {
        let out = translate(tool_loop(), "");
        let mark_json = json!({"type": "ephemeral"});
        assert_eq!(
            marked(&out),
            vec![
                format!(".system[0] {mark_json}"),
                format!(".messages[0].content[0] {mark_json}"),
                format!(".messages[2].content[0] {mark_json}"),
            ]
        );
        // The text itself is unchanged: the system prompt became one text block.
        assert_eq!(out["system"][0]["text"], "Be terse.");
        assert_eq!(out["messages"][0]["content"][0]["text"], "List the files.");
        assert_eq!(out["messages"][2]["content"][0]["type"], "tool_result");
    }

    #[test]
    fn the_limit_counts_and_the_ttl_and_the_switch_are_the_profiles() {
        let out = translate(tool_loop(), "[cache]\nmax_breakpoints = 2\nttl = \"1h\"");
        let marks = marked(&out);
        assert_eq!(marks.len(), 2, "{marks:?}");
        assert!(
            marks[0].starts_with(".system[0]") && marks[0].contains("1h"),
            "{marks:?}"
        );
        assert!(marks[1].starts_with(".messages[2]"), "{marks:?}");
        let off = translate(tool_loop(), "[cache]\nplace_breakpoints = false");
        assert!(marked(&off).is_empty());
        assert_eq!(off["system"], "Be terse.");
        let bad = ProfilePatch::parse("[cache]\nttl = \"2h\"").unwrap();
        let err = Profile::resolve("anthropic", &[&bad]).unwrap_err();
        assert!(err.to_string().contains("cache.ttl"), "{err}");
    }

    #[test]
    fn a_first_turn_without_instructions_marks_its_message_and_the_last_tool() {
        let out = translate(
            json!({"model": "m", "input": "Hi.",
                "tools": [{"type": "function", "name": "a", "parameters": {"type": "object"}},
                          {"type": "function", "name": "b", "parameters": {"type": "object"}}]}),
            "",
        );
        let marks = marked(&out);
        assert_eq!(marks.len(), 2, "{marks:?}");
        assert!(marks[0].starts_with(".messages[0].content[0]"), "{marks:?}");
        assert!(marks[1].starts_with(".tools[1]"), "{marks:?}");
    }

    /// A user message with OpenAI's explicit breakpoint on its last part.
    fn marked_user(text: &str) -> Value {
        json!({"role": "user", "content": [
            {"type": "input_text", "text": text, "prompt_cache_breakpoint": {"mode": "explicit"}}
        ]})
    }

    #[test]
    fn the_clients_breakpoints_come_first_and_the_latest_are_kept_within_the_limit() {
        // One client mark: it is kept, and the gateway's fill the rest.
        let mut body = tool_loop();
        body["input"][0] = marked_user("List the files.");
        body["input"]
            .as_array_mut()
            .unwrap()
            .push(json!({"role": "user", "content": "Thanks."}));
        let out = translate(body, "");
        let marks = marked(&out);
        assert!(marks.len() <= 4, "{marks:?}");
        assert!(
            marks
                .iter()
                .any(|m| m.starts_with(".messages[0].content[0]")),
            "{marks:?}"
        );
        // Placing off: only the client's mark.
        let mut body = tool_loop();
        body["input"][0] = marked_user("List the files.");
        let only = translate(body, "[cache]\nplace_breakpoints = false");
        assert_eq!(marked(&only).len(), 1, "{only}");
        // Six marked turns: the latest four are kept.
        let mut input = Vec::new();
        for n in 0..6 {
            input.push(marked_user(&format!("question {n}")));
            input.push(json!({"type": "message", "role": "assistant",
                "content": [{"type": "output_text", "text": format!("answer {n}")}]}));
        }
        input.push(json!({"role": "user", "content": "last"}));
        let out = translate(
            json!({"model": "m", "input": input}),
            "[cache]\nplace_breakpoints = false",
        );
        let marks = marked(&out);
        assert_eq!(
            marks
                .iter()
                .map(|m| m.split(' ').next().unwrap())
                .collect::<Vec<_>>(),
            [
                ".messages[4].content[0]",
                ".messages[6].content[0]",
                ".messages[8].content[0]",
                ".messages[10].content[0]"
            ]
        );
    }
}
