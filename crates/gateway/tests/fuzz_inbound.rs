//! Fuzz target: the inbound request parser, `toolbridge_gateway::parse_request` (the entry point
//! of `POST /v1/responses` and of every WebSocket `response.create` frame: the wire crate's
//! hand-written `Deserialize` impls with path tracking, the duplicate-key scan, `explain`'s
//! plain words, the metadata bounds), and the core's `normalize` on what it accepts.
//!
//! Inputs:
//! - arbitrary bytes, and byte soups of JSON tokens;
//! - documents shaped like real requests (messages and parts, every call and output item,
//!   reasoning, references, every tool type, `tool_choice`, `text.format`, metadata, …) with
//!   random mutations (`toolbridge_testkit::fuzz::json`: wrong types, duplicate keys, `type` not
//!   first, deep nesting past serde_json's limit, huge numbers, unknown item types, escapes that
//!   are wrong, bytes that are not UTF-8), sometimes damaged as bytes (truncated, stray bytes,
//!   trailing data);
//! - strings of every kind as a part's text (the literal cache from 1 KiB up).
//!
//! Properties: never a panic; the answer is `Ok` or an error with a stable code, status 400, a
//! message in JSON's words (no Rust type names), and a field path whenever the body is a JSON
//! object (a path whose every step but the last is in the body); `Ok` only for a JSON object
//! without a repeated key at any depth; the same bytes parse the same twice (the literal cache);
//! what parsed serialises to a body that parses to the same request; `normalize` never panics
//! and its errors name their field.
//!
//! Long run: `TOOLBRIDGE_FUZZ_SECS=600 cargo test --workspace --test fuzz_inbound -- --nocapture`
//! (the seconds are per property).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code fails loudly

use std::cell::Cell;
use std::collections::HashSet;
use std::fmt;

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value, json};
use toolbridge_core::request::{Limits, normalize};
use toolbridge_gateway::parse_request;
use toolbridge_testkit::fuzz::json::{self as fj, Bytes, Json};
use toolbridge_testkit::fuzz::{Target, check};

#[path = "fuzz_inbound/requests.rs"]
mod requests;

use requests::request;

const TARGET: Target = Target {
    name: "inbound",
    regressions: concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/proptest-regressions/fuzz_inbound.txt"
    ),
    cases: 256,
};

/// Every code the core's error type has: the stable codes a client may see.
const CODES: &[&str] = &[
    "invalid_json",
    "missing_required_parameter",
    "invalid_value",
    "unsupported_value",
    "invalid_json_schema",
    "invalid_function_parameters",
    "unsupported_tool_type",
    "unsupported_tool",
    "duplicate_tool",
    "tool_name_conflict",
    "too_many_tools",
    "tool_choice_unavailable",
    "unpaired_tool_output",
];

/// serde's wording that `inbound::plain` rewrites: none of it may reach a client.
const RUST_WORDS: &[&str] = &[
    "expected u8",
    "expected u16",
    "expected u32",
    "expected u64",
    "expected usize",
    "expected i32",
    "expected i64",
    "expected f64",
    "untagged enum",
    "expected struct",
    "expected enum",
    "expected a sequence",
    "expected a map",
    "invalid type: map",
    "invalid type: sequence",
    "expected tuple struct",
    "expected internally tagged",
];

/// JSON tokens and the pieces of a request, for byte soups.
const TOKENS: &[&[u8]] = &[
    b"{",
    b"}",
    b"[",
    b"]",
    b",",
    b":",
    b"\"",
    b"\\",
    b"\"input\"",
    b"\"type\"",
    b"\"message\"",
    b"\"content\"",
    b"\"tools\"",
    b"\"metadata\"",
    b"null",
    b"1e999",
    b"-0",
    b"\\ud800",
    b"\xff",
    b"\xc3",
    b" ",
];

// --- the properties -------------------------------------------------------------------------

#[test]
fn arbitrary_bytes_never_panic_and_fail_with_a_code() {
    let soup = prop::collection::vec(
        prop_oneof![
            prop::sample::select(TOKENS).prop_map(<[u8]>::to_vec),
            prop::collection::vec(any::<u8>(), 1..4),
        ],
        0..64,
    )
    .prop_map(|p| Bytes(p.concat()));
    let bytes = prop_oneof![
        prop::collection::vec(any::<u8>(), 0..256).prop_map(Bytes),
        soup
    ];
    check(&TARGET, bytes, |Bytes(bytes)| {
        parse_checked(&bytes)?;
        Ok(())
    });
}

#[test]
fn request_shaped_documents_parse_or_fail_with_a_code_and_a_path() {
    let damaged = prop_oneof![
        6 => Just(Vec::new()),
        1 => prop::collection::vec(fj::byte_edit(), 1..3),
    ];
    let input =
        (fj::mutated(request().prop_map(Json::from), 4), damaged).prop_map(|(doc, edits)| {
            let bytes = fj::edit(fj::render(&doc), &edits);
            (doc, Bytes(bytes))
        });
    check(&TARGET, input, |(_, Bytes(bytes))| {
        parse_checked(&bytes)?;
        Ok(())
    });
}

#[test]
fn any_text_reads_back_as_itself_and_writes_as_serde_json_writes() {
    let text = prop_oneof![
        any::<String>(),
        fj::plausible_text(),
        (any::<String>(), 1..300usize).prop_map(|(s, n)| s.repeat(n)),
        (fj::plausible_text(), 1..40usize).prop_map(|(s, n)| s.repeat(n)),
    ];
    check(&TARGET, text, |text| {
        // The outbound escaper (eight bytes a step) writes exactly serde_json's literal.
        let ours = toolbridge_wire::raw::json_literal(&text);
        prop_assert_eq!(&ours, &serde_json::to_string(&text).unwrap());
        let mut appended = b"x".to_vec();
        toolbridge_wire::raw::write_json_literal(&text, &mut appended);
        prop_assert_eq!(&appended[1..], ours.as_bytes());
        // The inbound reader (the literal taken raw, decoded once from 1 KiB up) gives it back,
        // the second time from its cache.
        let body = json!({"model": "m", "input": [{"role": "user", "content": [
            {"type": "input_text", "text": text}]}]})
        .to_string();
        for _ in 0..2 {
            let req = parse_request(body.as_bytes())
                .map_err(|e| TestCaseError::fail(format!("refused: {e}")))?;
            let read = serde_json::to_value(&req).unwrap();
            prop_assert_eq!(&read["input"][0]["content"][0]["text"], &json!(text));
        }
        Ok(())
    });
}

// --- the checks -----------------------------------------------------------------------------

/// Parses `bytes` and checks every property of the answer against the oracle's reading.
fn parse_checked(bytes: &[u8]) -> Result<(), TestCaseError> {
    let oracle = Oracle::read(bytes);
    match parse_request(bytes) {
        Ok(req) => {
            match &oracle {
                Oracle::NotJson => {
                    return Err(TestCaseError::fail("accepted a body that is not JSON"));
                }
                // Bytes that are not UTF-8 are refused wherever they are (the reading of raw
                // text above does not tell them from an escaped surrogate).
                Oracle::Unreadable => prop_assert!(
                    std::str::from_utf8(bytes).is_ok(),
                    "accepted a body that is not UTF-8"
                ),
                Oracle::Json { value, repeated } => {
                    prop_assert!(value.is_object(), "accepted a body that is not an object");
                    prop_assert!(!repeated, "accepted a body that repeats a key");
                }
            }
            // Written with serde_json's writer (raw values as their text, never re-read).
            let written = serde_json::to_vec(&req).unwrap();
            // The same bytes read the same again (long texts now from the literal cache).
            let again = serde_json::to_vec(&parse_request(bytes).unwrap()).unwrap();
            prop_assert_eq!(&written, &again, "a second read differs");
            // What was read, written out, reads back the same.
            match parse_request(&written) {
                Ok(back) => prop_assert_eq!(
                    &serde_json::to_vec(&back).unwrap(),
                    &written,
                    "the request written out reads back differently"
                ),
                Err(e) => {
                    return Err(TestCaseError::fail(format!(
                        "the request written out is refused: {e}\nwritten: {}",
                        String::from_utf8_lossy(&written)
                    )));
                }
            }
            normalized_checked(&req)
        }
        Err(e) => {
            let code = e.code();
            prop_assert!(CODES.contains(&code), "unknown code {}", code);
            prop_assert!(
                matches!(code, "invalid_json" | "invalid_value"),
                "parsing answered {}",
                code
            );
            prop_assert_eq!(e.status(), 400);
            let message = e.to_string();
            prop_assert!(!message.is_empty());
            for words in RUST_WORDS {
                prop_assert!(
                    !message.contains(words),
                    "Rust's words ({}) in: {}",
                    words,
                    message
                );
            }
            if let Oracle::Json { value, repeated } = &oracle
                && value.is_object()
            {
                let Some(param) = e.param() else {
                    return Err(TestCaseError::fail(format!(
                        "an error about a JSON object without a field path: {message}"
                    )));
                };
                // A repeated key: the body's tree keeps the last value, the parse may stop at
                // the first, so the path is not followed.
                if !repeated {
                    path_checked(value, param, &message)?;
                }
            }
            Ok(())
        }
    }
}

/// The core's normalisation of an accepted request: no panic, errors with a code and a field.
fn normalized_checked(
    req: &toolbridge_wire::responses::CreateResponse,
) -> Result<(), TestCaseError> {
    if let Err(e) = normalize(req, &Limits::default()) {
        prop_assert!(CODES.contains(&e.code()), "unknown code {}", e.code());
        prop_assert!(
            e.param().is_some_and(|p| !p.is_empty()),
            "a normalisation error without a field: {}",
            e
        );
    }
    Ok(())
}

/// `param` is a well-formed path into `value`: every step but the last is in it (the last may
/// be a missing or an extra field), unless a key of the body is itself path-like.
fn path_checked(value: &Value, param: &str, message: &str) -> Result<(), TestCaseError> {
    // A key that is empty or path-like (`a.b`) makes the path ambiguous, as any such path is.
    if has_pathlike_key(value) {
        return Ok(());
    }
    let steps = steps(param)
        .ok_or_else(|| TestCaseError::fail(format!("a malformed path `{param}`: {message}")))?;
    let mut node = value;
    for (i, step) in steps.iter().enumerate() {
        let next = match step {
            Step::Key(k) => node.get(k.as_str()),
            Step::Index(n) => node.get(*n),
        };
        match next {
            Some(next) => node = next,
            None if i + 1 == steps.len() && (node.is_object() || node.is_array()) => break,
            None => {
                return Err(TestCaseError::fail(format!(
                    "the path `{param}` leaves the body at step {i}: {message}"
                )));
            }
        }
    }
    Ok(())
}

enum Step {
    Key(String),
    Index(usize),
}

/// `input[3].content[1].type` as its steps; `None` when it is not such a path.
fn steps(path: &str) -> Option<Vec<Step>> {
    let mut out = Vec::new();
    let mut rest = path;
    let mut first = true;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('[') {
            let (n, tail) = after.split_once(']')?;
            out.push(Step::Index(n.parse().ok()?));
            rest = tail;
        } else {
            let body = if first { rest } else { rest.strip_prefix('.')? };
            let end = body.find(['.', '[']).unwrap_or(body.len());
            if end == 0 {
                return None;
            }
            out.push(Step::Key(body[..end].to_owned()));
            rest = &body[end..];
        }
        first = false;
    }
    (!out.is_empty()).then_some(out)
}

fn has_pathlike_key(value: &Value) -> bool {
    match value {
        Value::Object(map) => map
            .iter()
            .any(|(k, v)| k.is_empty() || k.contains(['.', '[', ']', '`']) || has_pathlike_key(v)),
        Value::Array(items) => items.iter().any(has_pathlike_key),
        _ => false,
    }
}

/// An independent reading of the body: JSON or not, and whether an object repeats a key.
enum Oracle {
    NotJson,
    /// JSON serde_json refuses to build (nested past 128, a number past `f64`'s range, an
    /// escaped lone surrogate): the parser may take it inside a value it keeps as raw text (a
    /// function's `parameters`), which serde_json's reader only scans.
    Unreadable,
    Json {
        value: Value,
        /// An object repeats a key.
        repeated: bool,
    },
}

impl Oracle {
    fn read(bytes: &[u8]) -> Self {
        let repeated = Cell::new(false);
        let mut de = serde_json::Deserializer::from_slice(bytes);
        let value = match (Seed(&repeated).deserialize(&mut de), de.end()) {
            (Ok(value), Ok(())) => value,
            (Err(e), _)
                if [
                    "recursion limit exceeded",
                    "number out of range",
                    "lone leading surrogate",
                    "unexpected end of hex escape",
                    "invalid unicode code point",
                ]
                .iter()
                .any(|m| e.to_string().starts_with(m)) =>
            {
                return Self::Unreadable;
            }
            _ => return Self::NotJson,
        };
        Self::Json {
            repeated: repeated.get(),
            value,
        }
    }
}

/// A `Value`, noting a key an object repeats.
struct Seed<'a>(&'a Cell<bool>);

impl<'de> DeserializeSeed<'de> for Seed<'_> {
    type Value = Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Seed<'_> {
    type Value = Value;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("JSON")
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(json!(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(json!(v))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(json!(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(Seed(self.0))? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        let mut seen = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            if !seen.insert(key.clone()) {
                self.0.set(true);
            }
            let value = map.next_value_seed(Seed(self.0))?;
            out.insert(key, value);
        }
        Ok(Value::Object(out))
    }
}
