//! The `strings` tool: grapheme-aware length, reverse and substring, split, join, literal replace,
//! trim, and case conversions (upper, lower, title, snake, camel, kebab).
//!
//! "Character" means an extended grapheme cluster (what a reader sees as one character: `é`,
//! `👍🏽`, `🇫🇷`), so nothing here splits a user-perceived character. Replacement is literal; the
//! `regex` tool handles patterns. Input is capped at [`MAX_TEXT_BYTES`], lists at [`MAX_PARTS`], and
//! an output's size is computed before it is built, so a replacement cannot blow up memory.

use serde_json::{Value, json};
use unicode_segmentation::UnicodeSegmentation;

use super::common::{Args, bounded, cap_len, check_live, invalid, operation_schema};
use crate::tool::BoxFuture;
use crate::{Tool, ToolContext, ToolError, ToolOutput};

/// The most bytes of `text` (and of all `parts` together).
pub const MAX_TEXT_BYTES: usize = 1024 * 1024;
/// The most items `split` may return or `join` may take.
pub const MAX_PARTS: usize = 10_000;

const OPERATIONS: &[&str] = &[
    "length",
    "reverse",
    "substring",
    "split",
    "join",
    "replace",
    "trim",
    "upper",
    "lower",
    "title",
    "snake",
    "camel",
    "kebab",
];

/// Unicode-aware string utilities.
#[derive(Debug, Clone, Copy, Default)]
pub struct Strings;

fn too_large(limit: usize) -> ToolError {
    ToolError::OutputTooLarge { limit }
}

/// Splits an identifier-like text into lower-case words: at non-alphanumerics, at lower→upper
/// steps (`camelCase`), and before the last capital of an acronym (`HTTPServer` → http, server).
fn words(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut current = String::new();
    let chars: Vec<char> = text.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        if !c.is_alphanumeric() {
            if !current.is_empty() {
                words.push(std::mem::take(&mut current));
            }
            continue;
        }
        let prev = i.checked_sub(1).and_then(|p| chars.get(p)).copied();
        let next = chars.get(i + 1).copied();
        let boundary = c.is_uppercase()
            && prev.is_some_and(|p| {
                p.is_lowercase()
                    || p.is_numeric()
                    || (p.is_uppercase() && next.is_some_and(char::is_lowercase))
            });
        if boundary && !current.is_empty() {
            words.push(std::mem::take(&mut current));
        }
        current.extend(c.to_lowercase());
    }
    if !current.is_empty() {
        words.push(current);
    }
    words
}

fn capitalize(word: &str) -> String {
    let mut chars = word.chars();
    match chars.next() {
        Some(first) => first
            .to_uppercase()
            .chain(chars.flat_map(char::to_lowercase))
            .collect(),
        None => String::new(),
    }
}

/// Title case: the first letter of every whitespace-separated word upper-cased, the rest lower;
/// whitespace is kept as it was.
fn title(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut at_word_start = true;
    for c in text.chars() {
        if c.is_whitespace() {
            at_word_start = true;
            out.push(c);
        } else if at_word_start {
            out.extend(c.to_uppercase());
            at_word_start = false;
        } else {
            out.extend(c.to_lowercase());
        }
    }
    out
}

impl Strings {
    /// Runs one operation; `max_output` bounds what an operation may build.
    pub fn run(args: &Value, max_output: usize) -> Result<Value, ToolError> {
        let args = Args::new(args)?;
        let op = args.operation()?;
        if op == "join" {
            return join(&args, max_output);
        }
        let text = args.str("text")?;
        cap_len("text", text.len(), MAX_TEXT_BYTES)?;
        let result: Value = match op {
            "length" => json!({
                "graphemes": text.graphemes(true).count(),
                "chars": text.chars().count(),
                "bytes": text.len(),
                "utf16_units": text.encode_utf16().count(),
            }),
            "reverse" => json!(text.graphemes(true).rev().collect::<String>()),
            "substring" => return substring(&args, text),
            "split" => return split(&args, text),
            "replace" => return replace(&args, text, max_output),
            "trim" => {
                let side = args.opt_str("side")?.unwrap_or("both");
                let set: Option<Vec<char>> =
                    args.opt_str("characters")?.map(|s| s.chars().collect());
                let is_trimmed = |c: char| match &set {
                    Some(set) => set.contains(&c),
                    None => c.is_whitespace(),
                };
                let trimmed = match side {
                    "both" => text.trim_matches(is_trimmed),
                    "start" => text.trim_start_matches(is_trimmed),
                    "end" => text.trim_end_matches(is_trimmed),
                    other => {
                        return Err(invalid(
                            "/side",
                            format!("unknown side `{other}` (both, start or end)"),
                        ));
                    }
                };
                json!(trimmed)
            }
            // Case mappings can grow text (`ß` → `SS`) by at most 3x; the output check catches it.
            "upper" => json!(text.to_uppercase()),
            "lower" => json!(text.to_lowercase()),
            "title" => json!(title(text)),
            "snake" => json!(words(text).join("_")),
            "kebab" => json!(words(text).join("-")),
            "camel" => {
                let words = words(text);
                let mut out = String::with_capacity(text.len());
                for (i, word) in words.iter().enumerate() {
                    if i == 0 {
                        out.push_str(word);
                    } else {
                        out.push_str(&capitalize(word));
                    }
                }
                json!(out)
            }
            other => {
                return Err(invalid(
                    "/operation",
                    format!("unknown operation `{other}`"),
                ));
            }
        };
        Ok(json!({"operation": op, "result": result}))
    }
}

fn substring(args: &Args<'_>, text: &str) -> Result<Value, ToolError> {
    let max = i64::try_from(MAX_TEXT_BYTES).unwrap_or(i64::MAX);
    let graphemes: Vec<&str> = text.graphemes(true).collect();
    let len = graphemes.len();
    // Negative indices count from the end, as in Python; out-of-range indices are clamped.
    let resolve = |i: i64| -> usize {
        if i < 0 {
            len.saturating_sub(usize::try_from(i.unsigned_abs()).unwrap_or(usize::MAX))
        } else {
            usize::try_from(i).unwrap_or(usize::MAX).min(len)
        }
    };
    let start = resolve(args.opt_int("start", -max, max)?.unwrap_or(0));
    let end = args.opt_int("end", -max, max)?.map_or(len, resolve);
    let result: String = if start < end {
        graphemes[start..end].concat()
    } else {
        String::new()
    };
    Ok(json!({
        "operation": "substring",
        "result": result,
        "start": start,
        "end": end.max(start),
        "length": len,
    }))
}

fn split(args: &Args<'_>, text: &str) -> Result<Value, ToolError> {
    let separator = args.opt_str("separator")?;
    let limit = args
        .opt_int("limit", 1, i64::try_from(MAX_PARTS).unwrap_or(i64::MAX))?
        .and_then(|n| usize::try_from(n).ok());
    let parts: Vec<&str> = match (separator, limit) {
        // No separator: split on runs of whitespace, dropping empty pieces.
        (None, _) => text.split_whitespace().take(MAX_PARTS + 1).collect(),
        // An empty separator splits into graphemes.
        (Some(""), _) => text.graphemes(true).take(MAX_PARTS + 1).collect(),
        (Some(sep), Some(n)) => text.splitn(n, sep).collect(),
        (Some(sep), None) => text.split(sep).take(MAX_PARTS + 1).collect(),
    };
    let parts: Vec<&str> = match (separator, limit) {
        (None | Some(""), Some(n)) if parts.len() > n => parts.into_iter().take(n).collect(),
        _ => parts,
    };
    if parts.len() > MAX_PARTS {
        return Err(ToolError::LimitExceeded(format!(
            "the split gives more than {MAX_PARTS} parts; pass `limit` to stop earlier"
        )));
    }
    Ok(json!({"operation": "split", "result": parts, "count": parts.len()}))
}

fn join(args: &Args<'_>, max_output: usize) -> Result<Value, ToolError> {
    let parts = args
        .opt_str_array("parts")?
        .ok_or_else(|| invalid("/parts", "is required for `join`"))?;
    if parts.len() > MAX_PARTS {
        return Err(ToolError::LimitExceeded(format!(
            "`parts` has {} items; the limit is {MAX_PARTS}",
            parts.len()
        )));
    }
    let separator = args.opt_str("separator")?.unwrap_or("");
    let total = parts.iter().map(|p| p.len()).sum::<usize>()
        + separator
            .len()
            .saturating_mul(parts.len().saturating_sub(1));
    cap_len("parts", total, MAX_TEXT_BYTES)?;
    if total > max_output {
        return Err(too_large(max_output));
    }
    Ok(json!({"operation": "join", "result": parts.join(separator)}))
}

fn replace(args: &Args<'_>, text: &str, max_output: usize) -> Result<Value, ToolError> {
    let pattern = args.str("pattern")?;
    if pattern.is_empty() {
        return Err(invalid("/pattern", "must not be empty"));
    }
    let replacement = args.str("replacement")?;
    cap_len("replacement", replacement.len(), MAX_TEXT_BYTES)?;
    let count = args
        .opt_int("count", 1, i64::MAX)?
        .and_then(|n| usize::try_from(n).ok())
        .unwrap_or(usize::MAX);
    let matches = text.matches(pattern).take(count).count();
    // Compute the result's size before building it.
    let size = (text.len() - matches * pattern.len())
        .saturating_add(matches.saturating_mul(replacement.len()));
    if size > max_output {
        return Err(too_large(max_output));
    }
    Ok(json!({
        "operation": "replace",
        "result": text.replacen(pattern, replacement, matches),
        "replacements": matches,
    }))
}

impl Tool for Strings {
    fn name(&self) -> &str {
        "strings"
    }

    fn description(&self) -> &str {
        "Unicode-aware string utilities. Lengths, reverse and substring count grapheme clusters (what a reader sees as one character). Operations: length, reverse, substring (start/end grapheme indices, end exclusive, negative counts from the end), split (by `separator`; none = whitespace, empty = graphemes), join (`parts` with `separator`), replace (literal `pattern` → `replacement`, optional `count`), trim (`side`, optional `characters`), upper, lower, title, snake, camel, kebab."
    }

    fn parameters(&self) -> Value {
        let max = MAX_TEXT_BYTES;
        json!({
            "type": "object",
            "properties": {
                "operation": operation_schema(OPERATIONS, "The string operation."),
                "text": {
                    "type": "string",
                    "maxLength": max,
                    "description": "The input text (every operation but join). At most 1 MiB.",
                },
                "start": {
                    "type": "integer",
                    "minimum": -(max as i64),
                    "maximum": max,
                    "description": "substring: first grapheme index (default 0; negative counts from the end).",
                },
                "end": {
                    "type": "integer",
                    "minimum": -(max as i64),
                    "maximum": max,
                    "description": "substring: grapheme index after the last one (default: the end; negative counts from the end).",
                },
                "separator": {
                    "type": "string",
                    "maxLength": 1024,
                    "description": "split: the literal separator (omit for whitespace, empty for graphemes); join: placed between parts (default empty).",
                },
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": MAX_PARTS,
                    "description": "split: the most parts to return (the last part holds the rest when a separator is given).",
                },
                "parts": {
                    "type": "array",
                    "items": {"type": "string"},
                    "maxItems": MAX_PARTS,
                    "description": "join: the strings to join.",
                },
                "pattern": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": 65536,
                    "description": "replace: the literal text to find.",
                },
                "replacement": {
                    "type": "string",
                    "maxLength": max,
                    "description": "replace: the text put in its place.",
                },
                "count": {
                    "type": "integer",
                    "minimum": 1,
                    "description": "replace: replace only the first `count` occurrences (default all).",
                },
                "side": {
                    "type": "string",
                    "enum": ["both", "start", "end"],
                    "description": "trim: which side(s) to trim (default both).",
                },
                "characters": {
                    "type": "string",
                    "maxLength": 1024,
                    "description": "trim: the characters to remove (default whitespace).",
                },
            },
            "required": ["operation"],
            "additionalProperties": false,
        })
    }

    fn capabilities(&self) -> &[&str] {
        &["text", "string", "case", "split", "join", "replace"]
    }

    fn execute<'a>(
        &'a self,
        args: Value,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(async move {
            check_live(ctx)?;
            // Linear in an input capped at 1 MiB, so it runs inline.
            bounded(Self::run(&args, ctx.max_output_bytes)?, ctx)
        })
    }
}

#[cfg(test)]
mod tests;
