//! Freeform input of a grammar-checked custom tool: checked against the grammar, and repaired
//! first when it does not match.
//!
//! The repairs are the ones models need for patches, each made only when its sign is there: a
//! JSON wrapper (`{"input": …}` or a JSON string) removed — its JSON syntax repaired first with
//! `jsonrepair-rs` when it is broken (a trailing comma, single quotes), as function arguments
//! are, so that a good patch in a broken wrapper is not taken whole —, a markdown fence removed, CRLF made
//! LF, indentation shared by every line removed, `*** Begin Patch`/`*** End Patch` added to a
//! patch that lacks them, trailing blank lines trimmed, empty lines inside an update hunk made
//! empty context lines. The repaired text must then match the
//! grammar, or the outcome is invalid with the parse error of the repaired text.

use serde_json::Value;

use super::arguments::strip_fence;
use super::lark::Grammar;
use super::matcher::{Verdict, check};
use super::{Fix, FixKind, MAX_REPAIR_BYTES, Outcome};

const BEGIN_PATCH: &str = "*** Begin Patch";
const END_PATCH: &str = "*** End Patch";
/// Keys a wrapper object may hold the input under.
const WRAPPER_KEYS: &[&str] = &["input", "patch", "content", "text", "code"];

/// Checks `raw` against `grammar`, repairing it when it does not match.
pub fn repair_custom_input(raw: &str, grammar: &Grammar) -> Outcome {
    if raw.len() > MAX_REPAIR_BYTES {
        return Outcome::Unchecked {
            text: raw.to_owned(),
            reason: format!("the input is longer than {MAX_REPAIR_BYTES} bytes"),
        };
    }
    let first = match check(grammar, raw) {
        Verdict::Matches => return Outcome::Valid(raw.to_owned()),
        Verdict::Undecided(reason) => return unchecked(raw, reason),
        Verdict::Fails(message) => message,
    };
    let (text, fixes) = repaired(raw);
    if fixes.is_empty() {
        return Outcome::Invalid {
            best_effort: raw.to_owned(),
            message: first,
            fixes,
        };
    }
    match check(grammar, &text) {
        Verdict::Matches => Outcome::Repaired { text, fixes },
        Verdict::Fails(message) => Outcome::Invalid {
            best_effort: text,
            message,
            fixes,
        },
        Verdict::Undecided(_) => Outcome::Invalid {
            best_effort: raw.to_owned(),
            message: first,
            fixes: Vec::new(),
        },
    }
}

fn unchecked(raw: &str, reason: String) -> Outcome {
    Outcome::Unchecked {
        text: raw.to_owned(),
        reason,
    }
}

/// One repair: the repaired text when its sign is there.
type Step = fn(&str) -> Option<String>;

/// Every repair whose sign is in the text, in order.
fn repaired(raw: &str) -> (String, Vec<Fix>) {
    let mut text = raw.to_owned();
    let mut fixes = Vec::new();
    // The wrapper first, repaired as function arguments are when it is not JSON: otherwise the
    // whole broken wrapper would be taken for the input and a good patch would fail the grammar.
    if let Some((inner, syntax_repaired)) = unwrap_json(&text) {
        if syntax_repaired {
            fixes.push(Fix::whole(FixKind::JsonSyntaxRepaired));
        }
        fixes.push(Fix::whole(FixKind::JsonWrapperRemoved));
        text = inner;
    }
    let steps: [(FixKind, Step); 7] = [
        (FixKind::FenceStripped, strip_fence_step),
        (FixKind::CrlfNormalized, crlf),
        (FixKind::IndentationRemoved, dedent),
        (FixKind::BeginPatchAdded, add_begin_patch),
        (FixKind::EndPatchAdded, add_end_patch),
        (FixKind::TrailingWhitespaceTrimmed, trim_trailing),
        (FixKind::BlankContextLineFilled, fill_blank_context),
    ];
    for (kind, step) in steps {
        if let Some(next) = step(&text) {
            text = next;
            fixes.push(Fix::whole(kind));
        }
    }
    (text, fixes)
}

/// `{"input": "…"}` (or another wrapper key, or a lone string field) or a JSON string → its
/// text, and whether the wrapper's JSON syntax had to be repaired first (a trailing comma,
/// single quotes, a missing closing brace: `jsonrepair-rs`, as for function arguments).
fn unwrap_json(text: &str) -> Option<(String, bool)> {
    let trimmed = text.trim();
    if !(trimmed.starts_with("{") || trimmed.starts_with('"')) {
        return None;
    }
    match serde_json::from_str::<Value>(trimmed) {
        Ok(value) => wrapped_text(value).map(|s| (s, false)),
        Err(_) => {
            let options =
                jsonrepair_rs::RepairOptions::new().with_max_input_bytes(MAX_REPAIR_BYTES);
            let value = jsonrepair_rs::jsonrepair_value_with_options(trimmed, options).ok()?;
            wrapped_text(value).map(|s| (s, true))
        }
    }
}

/// The text a parsed wrapper holds, if it is one.
fn wrapped_text(value: Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s),
        Value::Object(map) => WRAPPER_KEYS
            .iter()
            .find_map(|k| map.get(*k).and_then(Value::as_str))
            .or_else(|| match map.values().collect::<Vec<_>>().as_slice() {
                [Value::String(s)] => Some(s.as_str()),
                _ => None,
            })
            .map(str::to_owned),
        _ => None,
    }
}

fn strip_fence_step(text: &str) -> Option<String> {
    let inner = strip_fence(text)?;
    // The fence's closing line break goes with it; the body keeps one line end.
    Some(format!("{}\n", inner.trim_end_matches(['\n', '\r'])))
}

fn crlf(text: &str) -> Option<String> {
    text.contains("\r\n").then(|| text.replace("\r\n", "\n"))
}

/// Removes the whitespace prefix every non-blank line shares (a patch pasted indented).
fn dedent(text: &str) -> Option<String> {
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let first = lines.next()?;
    let mut prefix: &str = &first[..first.len() - first.trim_start().len()];
    for line in lines {
        let common = prefix
            .char_indices()
            .zip(line.chars())
            .find(|((_, a), b)| a != b)
            .map_or(prefix.len().min(line.len()), |((i, _), _)| i);
        prefix = &prefix[..common];
    }
    if prefix.is_empty() {
        return None;
    }
    let out: Vec<&str> = text
        .split('\n')
        .map(|l| l.strip_prefix(prefix).unwrap_or(l.trim_start()))
        .collect();
    Some(out.join("\n"))
}

fn is_patch_body(text: &str) -> bool {
    ["*** Update File: ", "*** Add File: ", "*** Delete File: "]
        .iter()
        .any(|h| text.starts_with(h))
}

fn add_begin_patch(text: &str) -> Option<String> {
    let trimmed = text.trim_start();
    is_patch_body(trimmed).then(|| format!("{BEGIN_PATCH}\n{trimmed}"))
}

fn add_end_patch(text: &str) -> Option<String> {
    let trimmed = text.trim_start();
    if !trimmed.starts_with(BEGIN_PATCH) || text.lines().any(|l| l.trim_end() == END_PATCH) {
        return None;
    }
    let body = text.trim_end_matches(['\n', '\r']);
    Some(format!("{body}\n{END_PATCH}\n"))
}

/// Empty lines inside `*** Update File:` hunks → `" "` (an empty context line).
fn fill_blank_context(text: &str) -> Option<String> {
    let mut in_update = false;
    let mut changed = false;
    let last_piece = text.matches('\n').count();
    let lines: Vec<&str> = text
        .split('\n')
        .enumerate()
        .map(|(i, line)| {
            if line.starts_with("*** ") {
                in_update = line.starts_with("*** Update File: ");
            }
            // The text's final line end leaves an empty last piece; it is not a line.
            let last = i == last_piece;
            if in_update && line.is_empty() && !last {
                changed = true;
                return " ";
            }
            line
        })
        .collect();
    changed.then(|| lines.join("\n"))
}

/// More than one line end (or spaces) after the last line → one line end.
fn trim_trailing(text: &str) -> Option<String> {
    let body = text.trim_end();
    let tail = &text[body.len()..];
    (tail.len() > 1 || (tail.len() == 1 && tail != "\n")).then(|| format!("{body}\n"))
}
