//! The `json` tool: parse, validate against a JSON Schema, prettify, minify, and query with jq
//! (jaq, see [`jq`]) or a JSON Pointer.
//!
//! A document arrives either as JSON text (`text`) or as a JSON value (`document`). Both are capped
//! at [`MAX_DOCUMENT_BYTES`] and [`MAX_DEPTH`] levels before any work starts. Schemas are compiled
//! with `jsonschema` built without remote reference resolution, so a `$ref` cannot fetch anything,
//! and with the linear-time regex engine for `pattern`. Validation and jq run off the async runtime
//! under the context's deadline. This module does not repair malformed JSON; a parse error is
//! reported with its line and column.
//!
//! Two tools answer to the name `json` and differ only in where jq runs: [`Json`] runs it in
//! process, where a filter that grows memory without a generator step can still exhaust the
//! process (see [`jq`]); [`IsolatedJson`] runs each query in a short-lived worker process under a
//! memory limit, killed at the deadline (see [`isolated`] and [`JqIsolation`]).

pub mod isolated;
pub mod jq;
#[cfg(test)]
mod tests;
mod worker;

pub use isolated::JqIsolation;
pub use worker::jq_worker_main;

use jsonschema::PatternOptions;
use serde::Serialize as _;
use serde_json::{Value, json};

use super::common::{
    Args, bounded, cap_len, check_live, fits, invalid, operation_schema, run_blocking,
};
use crate::tool::BoxFuture;
use crate::{Tool, ToolContext, ToolError, ToolOutput};

/// The most bytes of a document, as text or serialised.
pub const MAX_DOCUMENT_BYTES: usize = 1024 * 1024;
/// The most bytes of a schema, serialised.
pub const MAX_SCHEMA_BYTES: usize = 256 * 1024;
/// The deepest a document may nest (serde_json's own parser stops at 128 too).
pub const MAX_DEPTH: usize = 128;
/// The most validation errors reported.
pub const MAX_VALIDATION_ERRORS: usize = 50;
/// The most characters of one validation error message.
const MAX_MESSAGE_CHARS: usize = 300;
/// The compiled-size limits of a schema's `pattern` regexes.
const PATTERN_SIZE_LIMIT: usize = 1024 * 1024;
const PATTERN_DFA_SIZE_LIMIT: usize = 2 * 1024 * 1024;

const OPERATIONS: &[&str] = &["parse", "validate", "prettify", "minify", "jq", "pointer"];

/// JSON utilities, with jq in process.
///
/// jq's step budget and caps bound most filters, but not all: one that grows memory without a
/// generator step (`"x" * 10000000000`, repeated `. + .`) can use memory until the process dies,
/// and one that burns CPU keeps its thread busy past the deadline. Where model-written filters
/// run, prefer [`IsolatedJson`].
#[derive(Debug, Clone, Copy, Default)]
pub struct Json;

/// JSON utilities, with each jq query in a worker process under a memory limit, killed at the
/// deadline (see [`isolated`]); every other operation runs as in [`Json`].
#[derive(Debug, Clone)]
pub struct IsolatedJson {
    runner: isolated::Runner,
}

impl IsolatedJson {
    /// A json tool whose jq queries run as `isolation` says.
    pub fn new(isolation: JqIsolation) -> Self {
        Self {
            runner: isolated::Runner::new(isolation),
        }
    }

    /// How its jq queries run.
    pub fn isolation(&self) -> &JqIsolation {
        self.runner.config()
    }
}

/// How deeply a value nests, counted without recursion (a caller may hand us anything).
fn depth(value: &Value) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(value, 1usize)];
    while let Some((value, level)) = stack.pop() {
        deepest = deepest.max(level);
        match value {
            Value::Array(items) => stack.extend(items.iter().map(|v| (v, level + 1))),
            Value::Object(map) => stack.extend(map.values().map(|v| (v, level + 1))),
            _ => {}
        }
    }
    deepest
}

fn check_depth(field: &str, value: &Value) -> Result<(), ToolError> {
    let d = depth(value);
    if d > MAX_DEPTH {
        Err(ToolError::LimitExceeded(format!(
            "`{field}` nests {d} levels deep; the limit is {MAX_DEPTH}"
        )))
    } else {
        Ok(())
    }
}

fn parse_text(text: &str, field: &str) -> Result<Value, ToolError> {
    cap_len(field, text.len(), MAX_DOCUMENT_BYTES)?;
    serde_json::from_str(text).map_err(|e| {
        if e.to_string().contains("recursion limit") {
            ToolError::LimitExceeded(format!(
                "`{field}` nests deeper than the parser's limit of {MAX_DEPTH} levels"
            ))
        } else {
            ToolError::Failed(format!(
                "invalid JSON at line {}, column {}: {e}",
                e.line(),
                e.column()
            ))
        }
    })
}

/// The document to work on: parsed from `text` or taken from `document`, exactly one of them.
fn document(args: &Args<'_>) -> Result<Value, ToolError> {
    // A null `document` is the JSON document `null`, not a missing argument.
    match (args.opt_str("text")?, args.raw("document")) {
        (Some(text), None) => parse_text(text, "text"),
        (None, Some(doc)) => {
            if !fits(doc, MAX_DOCUMENT_BYTES) {
                return Err(ToolError::LimitExceeded(format!(
                    "`document` is larger than {MAX_DOCUMENT_BYTES} bytes"
                )));
            }
            check_depth("document", doc)?;
            Ok(doc.clone())
        }
        (Some(_), Some(_)) => Err(invalid(
            "/document",
            "give either `text` or `document`, not both",
        )),
        (None, None) => Err(invalid(
            "/document",
            "is required (or `text` with the JSON as a string)",
        )),
    }
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn truncate(message: String) -> String {
    if message.chars().count() <= MAX_MESSAGE_CHARS {
        message
    } else {
        let mut short: String = message.chars().take(MAX_MESSAGE_CHARS).collect();
        short.push('…');
        short
    }
}

async fn validate(args: &Args<'_>, ctx: &ToolContext) -> Result<Value, ToolError> {
    let instance = document(args)?;
    let schema = args
        .get("schema")
        .ok_or_else(|| invalid("/schema", "is required for `validate`"))?
        .clone();
    if !fits(&schema, MAX_SCHEMA_BYTES) {
        return Err(ToolError::LimitExceeded(format!(
            "`schema` is larger than {MAX_SCHEMA_BYTES} bytes"
        )));
    }
    check_depth("schema", &schema)?;
    let formats = args.opt_bool("validate_formats")?.unwrap_or(false);
    run_blocking(ctx, move |stop| {
        let validator = jsonschema::options()
            .should_validate_formats(formats)
            .with_pattern_options(
                PatternOptions::regex()
                    .size_limit(PATTERN_SIZE_LIMIT)
                    .dfa_size_limit(PATTERN_DFA_SIZE_LIMIT),
            )
            .build(&schema)
            .map_err(|e| {
                invalid(
                    "/schema",
                    format!("not a usable JSON Schema: {}", truncate(e.to_string())),
                )
            })?;
        let mut errors = Vec::new();
        let mut truncated = false;
        for error in validator.iter_errors(&instance) {
            if stop.is_raised() {
                return Err(ToolError::Timeout);
            }
            if errors.len() == MAX_VALIDATION_ERRORS {
                truncated = true;
                break;
            }
            errors.push(json!({
                "instance_path": error.instance_path().as_str(),
                "schema_path": error.schema_path().as_str(),
                "message": truncate(error.to_string()),
            }));
        }
        Ok(json!({
            "operation": "validate",
            "valid": errors.is_empty(),
            "errors": errors,
            "truncated": truncated,
        }))
    })
    .await
}

fn prettify(value: &Value, indent: usize) -> Result<String, ToolError> {
    let indent = " ".repeat(indent);
    let mut out = Vec::new();
    let formatter = serde_json::ser::PrettyFormatter::with_indent(indent.as_bytes());
    let mut serializer = serde_json::Serializer::with_formatter(&mut out, formatter);
    value
        .serialize(&mut serializer)
        .map_err(|e| ToolError::Failed(format!("could not format the document: {e}")))?;
    String::from_utf8(out)
        .map_err(|e| ToolError::Failed(format!("could not format the document: {e}")))
}

/// Runs one call; `isolated` says where jq runs (`None`: in process).
async fn run(
    args: &Value,
    ctx: &ToolContext,
    isolated: Option<&isolated::Runner>,
) -> Result<Value, ToolError> {
    let args = Args::new(args)?;
    let op = args.operation()?;
    match op {
        "parse" => {
            if args.raw("document").is_some() {
                return Err(invalid("/document", "`parse` takes JSON text in `text`"));
            }
            let value = parse_text(args.str("text")?, "text")?;
            Ok(json!({"operation": op, "type": type_name(&value), "value": value}))
        }
        "validate" => validate(&args, ctx).await,
        "prettify" => {
            let indent = args
                .opt_int("indent", 0, 8)?
                .and_then(|n| usize::try_from(n).ok())
                .unwrap_or(2);
            let text = prettify(&document(&args)?, indent)?;
            Ok(json!({"operation": op, "result": text}))
        }
        "minify" => {
            let text = serde_json::to_string(&document(&args)?)
                .map_err(|e| ToolError::Failed(format!("could not format the document: {e}")))?;
            Ok(json!({"operation": op, "result": text}))
        }
        "jq" => {
            let filter = args.str("filter")?;
            let input = document(&args)?;
            let results = match isolated {
                Some(runner) => runner.query(filter, input, ctx).await?,
                None => jq::query(filter, input, ctx).await?,
            };
            Ok(json!({"operation": op, "count": results.len(), "results": results}))
        }
        "pointer" => {
            let pointer = args.str("pointer")?;
            if !(pointer.is_empty() || pointer.starts_with('/')) {
                return Err(invalid(
                    "/pointer",
                    "a JSON Pointer is empty (the whole document) or starts with `/`",
                ));
            }
            let doc = document(&args)?;
            let found = doc.pointer(pointer);
            Ok(json!({
                "operation": op,
                "found": found.is_some(),
                "value": found.cloned().unwrap_or(Value::Null),
            }))
        }
        other => Err(invalid(
            "/operation",
            format!("unknown operation `{other}`"),
        )),
    }
}

const DESCRIPTION: &str = "JSON utilities. parse: JSON text → value. validate: check a document against a JSON Schema (drafts 4–2020-12; no remote $ref). prettify / minify: reformat. jq: run a jq filter (no `def`s; at most 1000 results). pointer: look up an RFC 6901 JSON Pointer such as `/items/0/name`. Give the document as `document` (a JSON value) or `text` (JSON in a string).";

const CAPABILITIES: &[&str] = &["json", "jq", "query", "validate", "schema", "format"];

fn parameters() -> Value {
    json!({
        "type": "object",
        "properties": {
            "operation": operation_schema(OPERATIONS, "What to do with the document."),
            "text": {
                "type": "string",
                "maxLength": MAX_DOCUMENT_BYTES,
                "description": "The document as JSON text (required by parse; otherwise an alternative to `document`). At most 1 MiB.",
            },
            "document": {
                "description": "The document as a JSON value (any type), instead of `text`. At most 1 MiB serialised and 128 levels deep.",
            },
            "schema": {
                "type": ["object", "boolean"],
                "description": "validate: the JSON Schema. `$ref`s resolve within the schema only.",
            },
            "validate_formats": {
                "type": "boolean",
                "description": "validate: also check `format` keywords such as email or date-time (default false: formats are annotations).",
            },
            "indent": {
                "type": "integer",
                "minimum": 0,
                "maximum": 8,
                "description": "prettify: spaces per level (default 2).",
            },
            "filter": {
                "type": "string",
                "minLength": 1,
                "maxLength": jq::MAX_FILTER_BYTES,
                "description": "jq: the filter, e.g. `.items[] | select(.price > 10) | .name`.",
            },
            "pointer": {
                "type": "string",
                "maxLength": 4096,
                "description": "pointer: an RFC 6901 JSON Pointer, e.g. `/items/0/name` (empty for the whole document).",
            },
        },
        "required": ["operation"],
        "additionalProperties": false,
    })
}

impl Tool for Json {
    fn name(&self) -> &str {
        "json"
    }

    fn description(&self) -> &str {
        DESCRIPTION
    }

    fn parameters(&self) -> Value {
        parameters()
    }

    fn capabilities(&self) -> &[&str] {
        CAPABILITIES
    }

    fn execute<'a>(
        &'a self,
        args: Value,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(async move {
            check_live(ctx)?;
            bounded(run(&args, ctx, None).await?, ctx)
        })
    }
}

impl Tool for IsolatedJson {
    fn name(&self) -> &str {
        "json"
    }

    fn description(&self) -> &str {
        DESCRIPTION
    }

    fn parameters(&self) -> Value {
        parameters()
    }

    fn capabilities(&self) -> &[&str] {
        CAPABILITIES
    }

    fn execute<'a>(
        &'a self,
        args: Value,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(async move {
            check_live(ctx)?;
            bounded(run(&args, ctx, Some(&self.runner)).await?, ctx)
        })
    }
}
