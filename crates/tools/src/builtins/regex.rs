//! The `regex` tool: match, find_all, captures, replace and split with the linear-time `regex`
//! crate.
//!
//! Patterns come from models, so the engine is the one without backtracking (no look-around, no
//! backreferences) and its compiled program, lazy DFA cache and nesting are capped. Text and
//! pattern sizes are capped, match lists stop at a `limit`, a replacement's output is measured as
//! it grows, and the work runs on the blocking pool under the context's deadline. Offsets are
//! UTF-8 byte offsets into `text`.

use std::sync::{Mutex, PoisonError};

use ::regex::{Captures, Match, Regex, RegexBuilder};
use serde_json::{Map, Value, json};

use super::common::{
    Args, StopFlag, bounded, cap_len, check_live, invalid, operation_schema, run_blocking,
};
use crate::tool::BoxFuture;
use crate::{Tool, ToolContext, ToolError, ToolOutput};

/// The most bytes of a pattern.
pub const MAX_PATTERN_BYTES: usize = 4096;
/// The most bytes of the text searched.
pub const MAX_TEXT_BYTES: usize = 1024 * 1024;
/// The most bytes of a replacement template.
pub const MAX_REPLACEMENT_BYTES: usize = 4096;
/// The most template bytes `replace` may expand in one call (matches × template length): an
/// empty match at every position of a large text would otherwise expand the template a million
/// times while the output stays small.
pub const MAX_EXPANSION_WORK: usize = 64 * 1024 * 1024;
/// The largest `limit` a call may ask for.
pub const MAX_LIMIT: usize = 10_000;
/// How many matches `find_all` and `captures` return when no `limit` is given.
pub const DEFAULT_LIMIT: usize = 1_000;
/// The compiled program's size limit.
pub const COMPILED_SIZE_LIMIT: usize = 1024 * 1024;
/// The lazy DFA's cache size limit.
pub const DFA_SIZE_LIMIT: usize = 2 * 1024 * 1024;
/// How deeply a pattern may nest groups and repetitions.
pub const NEST_LIMIT: u32 = 64;

const OPERATIONS: &[&str] = &["match", "find_all", "captures", "replace", "split"];

/// Regular expressions with guaranteed linear-time matching.
#[derive(Debug, Clone, Copy, Default)]
pub struct RegexTool;

/// How many compiled patterns are kept.
const CACHE_SIZE: usize = 32;

/// A pattern with its flags (case-insensitive, multi-line, dot-all, verbose).
type CacheKey = (String, [bool; 4]);

/// Recently compiled patterns, oldest first: callers often repeat a pattern, and compiling a
/// Unicode-aware pattern costs about as much as searching 10 KB with it.
static CACHE: Mutex<Vec<(CacheKey, Regex)>> = Mutex::new(Vec::new());

fn cached(key: &CacheKey) -> Option<Regex> {
    let cache = CACHE.lock().unwrap_or_else(PoisonError::into_inner);
    cache
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, re)| re.clone())
}

fn remember(key: CacheKey, re: &Regex) {
    let mut cache = CACHE.lock().unwrap_or_else(PoisonError::into_inner);
    if cache.iter().any(|(k, _)| *k == key) {
        return;
    }
    if cache.len() >= CACHE_SIZE {
        cache.remove(0);
    }
    cache.push((key, re.clone()));
}

fn compile(args: &Args<'_>) -> Result<Regex, ToolError> {
    let pattern = args.str("pattern")?;
    cap_len("pattern", pattern.len(), MAX_PATTERN_BYTES)?;
    let flag = |name: &str| args.opt_bool(name).map(|b| b.unwrap_or(false));
    let flags = [
        flag("case_insensitive")?,
        flag("multi_line")?,
        flag("dot_matches_new_line")?,
        flag("ignore_whitespace")?,
    ];
    let key = (pattern.to_owned(), flags);
    if let Some(re) = cached(&key) {
        return Ok(re);
    }
    let re = RegexBuilder::new(pattern)
        .case_insensitive(flags[0])
        .multi_line(flags[1])
        .dot_matches_new_line(flags[2])
        .ignore_whitespace(flags[3])
        .size_limit(COMPILED_SIZE_LIMIT)
        .dfa_size_limit(DFA_SIZE_LIMIT)
        .nest_limit(NEST_LIMIT)
        .build()
        .map_err(|e| match e {
            ::regex::Error::CompiledTooBig(limit) => ToolError::LimitExceeded(format!(
                "the pattern compiles to more than {limit} bytes; simplify it (e.g. smaller counted repetitions)"
            )),
            other => invalid("/pattern", other.to_string()),
        })?;
    remember(key, &re);
    Ok(re)
}

fn span(m: Match<'_>) -> Value {
    json!({"text": m.as_str(), "start": m.start(), "end": m.end()})
}

fn limit(args: &Args<'_>, default: usize) -> Result<usize, ToolError> {
    let max = i64::try_from(MAX_LIMIT).unwrap_or(i64::MAX);
    Ok(args
        .opt_int("limit", 1, max)?
        .and_then(|n| usize::try_from(n).ok())
        .unwrap_or(default))
}

fn stopped() -> ToolError {
    ToolError::Timeout
}

fn capture_groups(re: &Regex, caps: &Captures<'_>) -> Value {
    let groups: Vec<Value> = (1..caps.len())
        .map(|i| caps.get(i).map_or(Value::Null, span))
        .collect();
    let named: Map<String, Value> = re
        .capture_names()
        .flatten()
        .map(|name| (name.to_owned(), caps.name(name).map_or(Value::Null, span)))
        .collect();
    let whole = caps.get(0).map_or(Value::Null, span);
    json!({"match": whole, "groups": groups, "named": named})
}

/// The operation's work, after argument checks; runs on the blocking pool.
fn search(
    op: &str,
    re: &Regex,
    text: &str,
    args: &Value,
    max_output: usize,
    stop: &StopFlag,
) -> Result<Value, ToolError> {
    let args = Args::new(args)?;
    match op {
        "match" => {
            let first = re.find(text);
            Ok(json!({
                "operation": op,
                "matched": first.is_some(),
                "match": first.map_or(Value::Null, span),
            }))
        }
        "find_all" | "captures" => find_all(op, re, text, &args, stop),
        "replace" => replace(op, re, text, &args, max_output, stop),
        "split" => split(op, re, text, &args),
        other => Err(invalid(
            "/operation",
            format!("unknown operation `{other}`"),
        )),
    }
}

/// `find_all` or `captures`: the matches (with their groups for `captures`), up to the limit.
fn find_all(
    op: &str,
    re: &Regex,
    text: &str,
    args: &Args<'_>,
    stop: &StopFlag,
) -> Result<Value, ToolError> {
    let limit = limit(args, DEFAULT_LIMIT)?;
    let mut items = Vec::new();
    let mut truncated = false;
    // `find_iter` runs on the lazy DFA; only `captures` needs the slower group engines.
    let mut matches: Box<dyn Iterator<Item = Value>> = if op == "find_all" {
        Box::new(re.find_iter(text).map(span))
    } else {
        Box::new(re.captures_iter(text).map(|caps| capture_groups(re, &caps)))
    };
    for item in &mut matches {
        if stop.is_raised() {
            return Err(stopped());
        }
        if items.len() == limit {
            truncated = true;
            break;
        }
        items.push(item);
    }
    Ok(json!({
        "operation": op,
        "count": items.len(),
        "truncated": truncated,
        "matches": items,
    }))
}

/// `replace`: the text with each match (up to `limit`) replaced by the template or the literal
/// text, its output measured as it grows.
fn replace(
    op: &str,
    re: &Regex,
    text: &str,
    args: &Args<'_>,
    max_output: usize,
    stop: &StopFlag,
) -> Result<Value, ToolError> {
    let replacement = args.str("replacement")?;
    cap_len("replacement", replacement.len(), MAX_REPLACEMENT_BYTES)?;
    let literal = args.opt_bool("literal")?.unwrap_or(false);
    let count = args
        .opt_int("limit", 1, i64::MAX)?
        .and_then(|n| usize::try_from(n).ok())
        .unwrap_or(usize::MAX);
    let mut out = String::new();
    let mut last = 0;
    let mut replacements = 0usize;
    let per_match = replacement.len().max(1);
    for caps in re.captures_iter(text).take(count) {
        if stop.is_raised() {
            return Err(stopped());
        }
        if replacements.saturating_mul(per_match) > MAX_EXPANSION_WORK {
            return Err(ToolError::LimitExceeded(format!(
                "the replacement would expand the template {replacements}+ times; narrow the pattern or use `limit`"
            )));
        }
        let Some(whole) = caps.get(0) else { continue };
        out.push_str(&text[last..whole.start()]);
        if literal {
            out.push_str(replacement);
        } else {
            caps.expand(replacement, &mut out);
        }
        last = whole.end();
        replacements += 1;
        // Measured as it grows: `$0$0$0…` on every position could otherwise reach gigabytes.
        if out.len() > max_output {
            return Err(ToolError::OutputTooLarge { limit: max_output });
        }
    }
    out.push_str(&text[last..]);
    if out.len() > max_output {
        return Err(ToolError::OutputTooLarge { limit: max_output });
    }
    Ok(json!({"operation": op, "result": out, "replacements": replacements}))
}

/// `split`: the pieces between matches, at most `limit` of them.
fn split(op: &str, re: &Regex, text: &str, args: &Args<'_>) -> Result<Value, ToolError> {
    let parts: Vec<&str> = match args.get("limit") {
        Some(_) => re.splitn(text, limit(args, MAX_LIMIT)?).collect(),
        None => re.split(text).take(MAX_LIMIT + 1).collect(),
    };
    if parts.len() > MAX_LIMIT {
        return Err(ToolError::LimitExceeded(format!(
            "the split gives more than {MAX_LIMIT} parts; pass `limit` to stop earlier"
        )));
    }
    Ok(json!({"operation": op, "count": parts.len(), "parts": parts}))
}

impl RegexTool {
    async fn run(args: Value, ctx: &ToolContext) -> Result<Value, ToolError> {
        let parsed = Args::new(&args)?;
        let op = parsed.operation()?.to_owned();
        if !OPERATIONS.contains(&op.as_str()) {
            return Err(invalid("/operation", format!("unknown operation `{op}`")));
        }
        let text = parsed.str("text")?;
        cap_len("text", text.len(), MAX_TEXT_BYTES)?;
        if op != "replace" {
            for field in ["replacement", "literal"] {
                if parsed.get(field).is_some() {
                    return Err(invalid(format!("/{field}"), "is only used by `replace`"));
                }
            }
        }
        let max_output = ctx.max_output_bytes;
        run_blocking(ctx, move |stop| {
            let parsed = Args::new(&args)?;
            // Compiling a large pattern can take a while too, so it happens here.
            let re = compile(&parsed)?;
            let text = parsed.str("text")?;
            search(&op, &re, text, &args, max_output, stop)
        })
        .await
    }
}

impl Tool for RegexTool {
    fn name(&self) -> &str {
        "regex"
    }

    fn description(&self) -> &str {
        "Regular expressions (Rust `regex` syntax: no look-around or backreferences; matching is linear time). Operations: match (is there a match, and the first one), find_all (every match, up to `limit`), captures (numbered and named groups of each match), replace (`replacement` may use $1, ${name}, $$; `limit` replaces only the first n), split. Offsets are UTF-8 byte offsets."
    }

    fn parameters(&self) -> Value {
        let flag = |what: &str| json!({"type": "boolean", "description": what});
        json!({
            "type": "object",
            "properties": {
                "operation": operation_schema(OPERATIONS, "What to do with the pattern."),
                "pattern": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": MAX_PATTERN_BYTES,
                    "description": "The regular expression, e.g. `(?P<year>\\d{4})-(?P<month>\\d{2})`.",
                },
                "text": {
                    "type": "string",
                    "maxLength": MAX_TEXT_BYTES,
                    "description": "The text to search. At most 1 MiB.",
                },
                "replacement": {
                    "type": "string",
                    "maxLength": MAX_REPLACEMENT_BYTES,
                    "description": "replace only: the replacement template ($1, ${name}, $$ for a dollar).",
                },
                "literal": flag("replace only: insert `replacement` as is, without expanding $ references (default false)."),
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": MAX_LIMIT,
                    "description": "find_all/captures: the most matches to return (default 1000); replace: replace only the first n; split: the most parts (the last holds the rest).",
                },
                "case_insensitive": flag("Match letters regardless of case (default false)."),
                "multi_line": flag("`^` and `$` match at line starts and ends (default false)."),
                "dot_matches_new_line": flag("`.` also matches `\\n` (default false)."),
                "ignore_whitespace": flag("Verbose mode: whitespace and `#` comments in the pattern are ignored (default false)."),
            },
            "required": ["operation", "pattern", "text"],
            "additionalProperties": false,
        })
    }

    fn capabilities(&self) -> &[&str] {
        &["regex", "pattern", "text", "search", "extract", "replace"]
    }

    fn execute<'a>(
        &'a self,
        args: Value,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(async move {
            check_live(ctx)?;
            bounded(Self::run(args, ctx).await?, ctx)
        })
    }
}

#[cfg(test)]
mod tests;
