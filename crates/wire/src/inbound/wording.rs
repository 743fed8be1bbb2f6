//! Errors in plain words: the path an inner error carries joined with the caller's tracked one,
//! and serde's wording (`expected u64`, `untagged enum Stop`, `a sequence`) rewritten into the
//! words a client knows, in one place.
//!
//! Not here: where the errors come from (the parent's readers).

use serde_json::Value;

/// A JSON value as serde's messages name one (`integer `5``, `object`).
pub(super) fn describe(value: &Value) -> String {
    match value {
        Value::Null => "null".to_owned(),
        Value::Bool(b) => format!("boolean `{b}`"),
        Value::Number(n) if n.is_f64() => format!("floating point `{n}`"),
        Value::Number(n) => format!("integer `{n}`"),
        Value::String(s) => format!("string {s:?}"),
        Value::Array(_) => "array".to_owned(),
        Value::Object(_) => "object".to_owned(),
    }
}

/// Splits the path an inner error carries (``at `content[1].type`: …``) from its message.
pub(super) fn split_path(message: &str) -> (Option<&str>, &str) {
    message
        .strip_prefix("at `")
        .and_then(|rest| rest.split_once("`: "))
        .map_or((None, message), |(path, rest)| (Some(path), rest))
}

/// `outer` (a `serde_path_to_error` path, `.` at the root) followed by `inner`.
pub(super) fn join_path(outer: &str, inner: Option<&str>) -> Option<String> {
    let outer = (!matches!(outer, "" | "." | "?")).then_some(outer);
    match (outer, inner) {
        (None, None) => None,
        (Some(p), None) | (None, Some(p)) => Some(p.to_owned()),
        (Some(o), Some(i)) if i.starts_with('[') => Some(format!("{o}{i}")),
        (Some(o), Some(i)) => Some(format!("{o}.{i}")),
    }
}

/// An error from reading a request body: the path `serde_path_to_error` tracked (`input[3]`, `.`
/// at the root) and the error's message. Answers the whole path to the field at fault
/// (`input[3].content[1].type`), if any, and the message in plain words.
pub fn explain(tracked: &str, message: &str) -> (Option<String>, String) {
    let (deeper, message) = split_path(message);
    let deeper = deeper.map(str::to_owned).or_else(|| missing_field(message));
    (join_path(tracked, deeper.as_deref()), plain(message))
}

/// The field a "missing field `x`" or "duplicate field `x`" error is about: the leaf of its
/// path, where path tracking stops at the object that lacks or repeats it.
pub(super) fn missing_field(message: &str) -> Option<String> {
    message
        .strip_prefix("missing field `")
        .or_else(|| message.strip_prefix("duplicate field `"))
        .and_then(|rest| rest.split_once('`'))
        .map(|(field, _)| field.to_owned())
}

/// serde's messages in the words of JSON: no Rust type names (`u64`, `struct FunctionTool`,
/// `untagged enum Stop`) and JSON's names for shapes (`object`, `array`).
pub fn plain(message: &str) -> String {
    let mut out = message
        .replace("unknown variant", "unknown value")
        .replace("invalid type: map", "invalid type: object")
        .replace("invalid type: sequence", "invalid type: array")
        .replace("expected a sequence", "expected an array")
        .replace("expected a map", "expected an object")
        .replace("expected a borrowed string", "expected a string")
        .replace(
            "expected variant identifier",
            "expected one of the allowed values",
        )
        .replace("expected field identifier", "expected a field name")
        .replace("expected option", "expected a value or null")
        .replace("expected unit", "expected null");
    for (named, replacement) in [
        (
            "data did not match any variant of untagged enum ",
            "the value is not of an accepted type",
        ),
        ("expected internally tagged enum ", "expected an object"),
        ("expected adjacently tagged enum ", "expected an object"),
        ("expected struct variant ", "expected an object"),
        ("expected tuple struct ", "expected an array"),
        ("expected unit struct ", "expected null"),
        ("expected struct ", "expected an object"),
        ("expected enum ", "expected one of the allowed values"),
    ] {
        out = replace_named(&out, named, replacement);
    }
    for (types, words) in [
        (
            &["u8", "u16", "u32", "u64", "u128", "usize"][..],
            "a non-negative integer",
        ),
        (
            &["i8", "i16", "i32", "i64", "i128", "isize"][..],
            "an integer",
        ),
        (&["f32", "f64"][..], "a number"),
        (&["char"][..], "a single character"),
    ] {
        for ty in types {
            out = replace_word(
                &out,
                &format!("expected {ty}"),
                &format!("expected {words}"),
            );
        }
    }
    out
}

/// Replaces `prefix` and the Rust name right after it (`Foo`, `Foo::Bar`).
fn replace_named(text: &str, prefix: &str, replacement: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(prefix) {
        out.push_str(&rest[..at]);
        out.push_str(replacement);
        rest = rest[at + prefix.len()..]
            .trim_start_matches(|c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':');
    }
    out.push_str(rest);
    out
}

/// Replaces `word` where it is not followed by more of a name (`expected u64`, not
/// `expected u640`).
fn replace_word(text: &str, word: &str, replacement: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(word) {
        let after = &rest[at + word.len()..];
        let whole = !after.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_');
        out.push_str(&rest[..at]);
        out.push_str(if whole { replacement } else { word });
        rest = after;
    }
    out.push_str(rest);
    out
}
