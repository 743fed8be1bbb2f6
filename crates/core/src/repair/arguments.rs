//! Function-call arguments: JSON repair, schema validation and safe coercions.
//!
//! Arguments that parse as a JSON object and match the schema are returned untouched. Anything
//! else goes through, in order: fence removal, leaked template tokens (`<|tool_call_end|>`)
//! removed, doubled braces (`{{…}}`) undone, `jsonrepair-rs` (only for text that is still not
//! JSON), double-encoding removal, then coercions guided by the validator's errors: each `type` or `enum`
//! error points at one value, and only the conversions that cannot change meaning are made
//! (a numeric string for a number, `"true"`/`"false"` for a boolean, a lone value for an array,
//! an enum value in another case when exactly one matches).

use std::sync::Arc;

use jsonschema::error::{TypeKind, ValidationErrorKind};
use jsonschema::{JsonType, ValidationError};
use serde_json::{Number, Value};

use super::{Fix, FixKind, MAX_REPAIR_BYTES, Outcome};

/// Rounds of coercion: each round fixes every error the validator points at, and a fix can
/// uncover errors below it (a value wrapped into an array is then checked against `items`).
const COERCION_ROUNDS: usize = 8;

/// A tool's parameter schema, compiled once.
#[derive(Debug, Clone)]
pub struct CompiledSchema {
    name: String,
    validator: Arc<jsonschema::Validator>,
}

impl CompiledSchema {
    /// Compiles `schema` for the tool `name`; `Err` has the compiler's message.
    pub fn compile(name: &str, schema: &Value) -> Result<Self, String> {
        let validator = jsonschema::validator_for(schema).map_err(|e| e.to_string())?;
        Ok(Self {
            name: name.to_owned(),
            validator: Arc::new(validator),
        })
    }

    /// The tool this schema belongs to.
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn is_valid(&self, value: &Value) -> bool {
        self.validator.is_valid(value)
    }

    /// The first error, as a message with its JSON pointer.
    fn first_error(&self, value: &Value) -> Option<String> {
        self.validator.iter_errors(value).next().map(|err| {
            let at = err.instance_path().to_string();
            let at = if at.is_empty() { "/".to_owned() } else { at };
            format!(
                "the arguments do not match the schema of `{}` at `{at}`: {err}",
                self.name
            )
        })
    }
}

/// Checks and repairs the arguments of one complete call. Without a schema, any JSON object
/// passes.
pub fn repair_arguments(raw: &str, schema: Option<&CompiledSchema>) -> Outcome {
    if let Ok(value) = serde_json::from_str::<Value>(raw) {
        if value.is_object() && schema.is_none_or(|s| s.is_valid(&value)) {
            return Outcome::Valid(raw.to_owned());
        }
        return conform(raw, value, Vec::new(), schema);
    }
    if raw.len() > MAX_REPAIR_BYTES {
        return invalid(
            raw,
            format!("the arguments are not valid JSON and longer than {MAX_REPAIR_BYTES} bytes"),
            Vec::new(),
        );
    }
    match parse_repaired(raw) {
        Ok((value, fixes)) => conform(raw, value, fixes, schema),
        Err(message) => invalid(raw, message, Vec::new()),
    }
}

/// Text that is not JSON → a value and the syntax fixes it took.
fn parse_repaired(raw: &str) -> Result<(Value, Vec<Fix>), String> {
    let mut fixes = Vec::new();
    let mut text = raw.trim().to_owned();
    if let Some(inner) = strip_fence(&text) {
        fixes.push(Fix::whole(FixKind::FenceStripped));
        text = inner;
    }
    if text.is_empty() {
        fixes.push(Fix::whole(FixKind::EmptyArgumentsFilled));
        return Ok((Value::Object(Default::default()), fixes));
    }
    if let Some(inner) = strip_template_tokens(&text) {
        fixes.push(Fix::whole(FixKind::TemplateTokenStripped));
        text = inner;
    }
    if let Ok(value) = serde_json::from_str::<Value>(&text) {
        return Ok((value, fixes));
    }
    if let Some(value) = undouble_braces(&text) {
        fixes.push(Fix::whole(FixKind::ExtraBracesRemoved));
        return Ok((value, fixes));
    }
    let repaired = jsonrepair_rs::jsonrepair_value_with_options(
        &text,
        jsonrepair_rs::RepairOptions::new().with_max_input_bytes(MAX_REPAIR_BYTES),
    )
    .map_err(|e| format!("the arguments are not JSON and could not be repaired: {e}"))?;
    fixes.push(Fix::whole(FixKind::JsonSyntaxRepaired));
    Ok((repaired, fixes))
}

/// A parsed value → an object that matches the schema, if the safe fixes get there.
fn conform(
    raw: &str,
    value: Value,
    mut fixes: Vec<Fix>,
    schema: Option<&CompiledSchema>,
) -> Outcome {
    let mut value = match unwrap_double_encoded(value) {
        Ok(Some(inner)) => {
            fixes.push(Fix::whole(FixKind::DoubleEncodedUnwrapped));
            inner
        }
        Ok(None) => return not_object(raw, fixes),
        Err(v) => v,
    };
    if !value.is_object() {
        return not_object(raw, fixes);
    }
    if let Some(schema) = schema {
        coerce(&mut value, schema, &mut fixes);
    }
    // Without a fix, the original spelling is the best effort.
    let text = if fixes.is_empty() {
        raw.to_owned()
    } else {
        value.to_string()
    };
    match schema.and_then(|s| s.first_error(&value)) {
        None => Outcome::Repaired { text, fixes },
        Some(message) => invalid(&text, message, fixes),
    }
}

fn not_object(raw: &str, fixes: Vec<Fix>) -> Outcome {
    invalid(raw, "the arguments are not a JSON object".to_owned(), fixes)
}

fn invalid(best_effort: &str, message: String, fixes: Vec<Fix>) -> Outcome {
    Outcome::Invalid {
        best_effort: best_effort.to_owned(),
        message,
        fixes,
    }
}

/// Chat-template markers a provider's tool parser left around the arguments.
const TEMPLATE_TAGS: &[&str] = &["<tool_call>", "</tool_call>", "<arg_value>", "</arg_value>"];

/// The text without leaked template tokens at either end (`<|…|>` special tokens, tool-call
/// tags), if there were any.
fn strip_template_tokens(text: &str) -> Option<String> {
    let mut rest = text;
    loop {
        let before = rest.len();
        rest = rest.trim();
        if rest.ends_with("|>")
            && let Some(open) = rest.rfind("<|")
        {
            rest = &rest[..open];
        }
        if rest.starts_with("<|")
            && let Some(close) = rest.find("|>")
        {
            rest = &rest[close + 2..];
        }
        for tag in TEMPLATE_TAGS {
            rest = rest.strip_prefix(tag).unwrap_or(rest);
            rest = rest.strip_suffix(tag).unwrap_or(rest);
        }
        if rest.len() == before {
            break;
        }
    }
    let rest = rest.trim();
    (rest.len() != text.trim().len()).then(|| rest.to_owned())
}

/// `{{…}}` whose inside is a JSON object: the doubled braces Kimi-family models emit.
fn undouble_braces(text: &str) -> Option<Value> {
    let inner = text.strip_prefix('{')?.strip_suffix('}')?.trim();
    if !(inner.starts_with('{') && inner.ends_with('}')) {
        return None;
    }
    serde_json::from_str::<Value>(inner)
        .ok()
        .filter(Value::is_object)
}

/// A JSON string holding an object (arguments encoded twice) → `Ok(Some(object))`; another
/// string → `Ok(None)`; any other value comes back as `Err(value)`, untouched.
fn unwrap_double_encoded(value: Value) -> Result<Option<Value>, Value> {
    let Value::String(inner) = value else {
        return Err(value);
    };
    Ok(object_in_text(&inner))
}

/// The brace that opens a JSON object. A named constant, not a `'{'` literal inside a function,
/// so that brace-counting tools (the repository's shape check) measure functions right.
const OBJECT_OPEN: char = '{';

/// The object a string holds once its fence is gone: parsed as it is, or repaired when it does
/// not parse; `None` when the text is not an object.
fn object_in_text(text: &str) -> Option<Value> {
    let inner = text.trim();
    let inner = strip_fence(inner).unwrap_or_else(|| inner.to_owned());
    if !inner.starts_with(OBJECT_OPEN) {
        return None;
    }
    match serde_json::from_str::<Value>(&inner) {
        Ok(v @ Value::Object(_)) => Some(v),
        _ => jsonrepair_rs::jsonrepair_value(&inner)
            .ok()
            .filter(Value::is_object),
    }
}

/// The body of one markdown code fence around the whole text, if there is one. A fence the
/// model did not close (truncated output) counts too.
pub(crate) fn strip_fence(text: &str) -> Option<String> {
    let trimmed = text.trim();
    let rest = trimmed.strip_prefix("```")?;
    // The info string (```json) runs to the end of the opening line.
    let body = match rest.find('\n') {
        Some(nl) => &rest[nl + 1..],
        None => rest.trim_start_matches(|c: char| c.is_ascii_alphanumeric()),
    };
    let body = body.trim_end();
    let body = body.strip_suffix("```").unwrap_or(body);
    Some(body.to_owned())
}

/// Applies the safe coercions the validator's errors point at, round by round.
fn coerce(value: &mut Value, schema: &CompiledSchema, fixes: &mut Vec<Fix>) {
    for _ in 0..COERCION_ROUNDS {
        let planned: Vec<(String, Value, FixKind)> = schema
            .validator
            .iter_errors(value)
            .filter_map(|err| planned_fix(&err))
            .collect();
        if planned.is_empty() {
            return;
        }
        let mut changed = false;
        for (pointer, new, kind) in planned {
            if let Some(slot) = value.pointer_mut(&pointer)
                && *slot != new
            {
                *slot = new;
                fixes.push(Fix::at(kind, pointer));
                changed = true;
            }
        }
        if !changed {
            return;
        }
    }
}

/// The replacement one validation error asks for, when it is safe.
fn planned_fix(err: &ValidationError<'_>) -> Option<(String, Value, FixKind)> {
    let at = err.instance_path().to_string();
    let current = err.instance();
    let (new, kind) = match err.kind() {
        ValidationErrorKind::Type { kind } => coerce_type(current, kind)?,
        ValidationErrorKind::Enum { options } => {
            (enum_case(current, options)?, FixKind::EnumCaseMatched)
        }
        _ => return None,
    };
    Some((at, new, kind))
}

fn coerce_type(current: &Value, expected: &TypeKind) -> Option<(Value, FixKind)> {
    let wants = |ty: JsonType| match expected {
        TypeKind::Single(t) => *t == ty,
        TypeKind::Multiple(set) => set.contains(ty),
    };
    if let Value::String(s) = current {
        let s = s.trim();
        if wants(JsonType::Integer)
            && let Some(n) = integer(s)
        {
            return Some((Value::Number(n), FixKind::StringToNumber));
        }
        if wants(JsonType::Number)
            && let Some(n) = number(s)
        {
            return Some((Value::Number(n), FixKind::StringToNumber));
        }
        if wants(JsonType::Boolean) {
            match s {
                "true" | "True" | "TRUE" => {
                    return Some((Value::Bool(true), FixKind::StringToBoolean));
                }
                "false" | "False" | "FALSE" => {
                    return Some((Value::Bool(false), FixKind::StringToBoolean));
                }
                _ => {}
            }
        }
    }
    if wants(JsonType::Array) && !current.is_array() && !current.is_null() {
        return Some((Value::Array(vec![current.clone()]), FixKind::WrappedInArray));
    }
    None
}

/// A whole integer literal: an optional `-` and digits, nothing else (no `5.0`, no `1e3`).
fn integer(s: &str) -> Option<Number> {
    let digits = s.strip_prefix('-').unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse::<i64>()
        .ok()
        .map(Number::from)
        .or_else(|| s.parse::<u64>().ok().map(Number::from))
}

/// A JSON number literal that reads back as the same decimal.
fn number(s: &str) -> Option<Number> {
    if let Some(n) = integer(s) {
        return Some(n);
    }
    let n = serde_json::from_str::<Number>(s).ok()?;
    let f = n.as_f64()?;
    (f.is_finite() && f.to_string() == s).then_some(n)
}

/// The one enum string equal to `current` ignoring ASCII case.
fn enum_case(current: &Value, options: &Value) -> Option<Value> {
    let current = current.as_str()?;
    let mut matches = options
        .as_array()?
        .iter()
        .filter(|o| o.as_str().is_some_and(|o| o.eq_ignore_ascii_case(current)));
    let first = matches.next()?;
    matches.next().is_none().then(|| first.clone())
}
