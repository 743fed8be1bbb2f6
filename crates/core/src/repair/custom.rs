//! Freeform input of a grammar-checked custom tool: checked against the grammar, and repaired
//! first when it does not match.
//!
//! The repairs are the ones models need for patches, each made only when its sign is there: a
//! JSON wrapper (`{"input": …}` or a JSON string) removed, a markdown fence removed, CRLF made
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
    let steps: [(FixKind, Step); 8] = [
        (FixKind::JsonWrapperRemoved, unwrap_json),
        (FixKind::FenceStripped, strip_fence_step),
        (FixKind::CrlfNormalized, crlf),
        (FixKind::IndentationRemoved, dedent),
        (FixKind::BeginPatchAdded, add_begin_patch),
        (FixKind::EndPatchAdded, add_end_patch),
        (FixKind::TrailingWhitespaceTrimmed, trim_trailing),
        (FixKind::BlankContextLineFilled, fill_blank_context),
    ];
    let mut text = raw.to_owned();
    let mut fixes = Vec::new();
    for (kind, step) in steps {
        if let Some(next) = step(&text) {
            text = next;
            fixes.push(Fix::whole(kind));
        }
    }
    (text, fixes)
}

/// `{"input": "…"}` (or another wrapper key, or a lone string field) or a JSON string → its text.
fn unwrap_json(text: &str) -> Option<String> {
    let trimmed = text.trim();
    if !(trimmed.starts_with('{') || trimmed.starts_with('"')) {
        return None;
    }
    match serde_json::from_str::<Value>(trimmed).ok()? {
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
