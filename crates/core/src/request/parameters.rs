//! Function tools' `parameters`: each must be a JSON Schema that describes an object, as every
//! provider requires of function parameters (OpenAI answers `invalid_function_parameters`).
//!
//! Checked here, before planning, so that a malformed schema is the client's 400 naming the
//! field (`tools[1].parameters`, `tools[2].tools[0].parameters` inside a namespace) instead of
//! an upstream error, or a provider's silent drop. A schema is checked against the meta-schemas
//! of drafts 2020-12, 7 and 4 (one accepting it is enough; nothing is fetched). It is not
//! compiled, so a schema the argument checks in [`crate::repair`] cannot compile (an
//! unresolvable `$ref`) still goes through unchecked, as before. An absent or `null`
//! `parameters` is not checked: the planner sends an empty object schema.
//!
//! Checked once: the meta-schema check costs tens of microseconds per schema and Codex sends
//! the same tools on every turn, so a schema found valid is remembered by its JSON text in one
//! process-wide set ([`KNOWN_VALID`], bounded by entries and bytes, least recently used out
//! first; recency is a counter, no clock), found by a seeded foldhash of the text and compared in
//! full (a BLAKE3 digest of each schema cost about 7 instructions a byte on every request). A
//! refused schema is not remembered: it is checked again, and its error is built each time.
//! A field's path (`tools[3].parameters`) is written only for an error.

use std::sync::{LazyLock, Mutex};

use serde_json::Value;
use toolbridge_wire::RawJson;
use toolbridge_wire::responses::Tool;

use crate::Error;
use toolbridge_wire::lru::Lru;

/// At most this many schemas are remembered as valid…
const MAX_KNOWN: usize = 4096;
/// …and at most this many bytes of their JSON.
const MAX_KNOWN_BYTES: usize = 32 * 1024 * 1024;

/// Schemas found valid: their JSON texts, by a hash of the text.
static KNOWN_VALID: LazyLock<Mutex<Lru<u64, RawJson>>> = LazyLock::new(Default::default);

/// The hash of [`KNOWN_VALID`]'s keys, seeded once per process.
static HASHER: LazyLock<hashbrown::DefaultHashBuilder> = LazyLock::new(Default::default);

/// True when `schema` is in `known` (its use recorded); another text under its key (a
/// collision) is not.
fn known_valid(known: &mut Lru<u64, RawJson>, key: u64, schema: &RawJson) -> bool {
    known
        .get(&key)
        .is_some_and(|text| text.text() == schema.text())
}

/// Remembers `schema` in `known`, under `key`.
fn remember(known: &mut Lru<u64, RawJson>, key: u64, schema: &RawJson) {
    let bytes = schema.text().len();
    known.insert(key, schema.clone(), bytes, MAX_KNOWN, MAX_KNOWN_BYTES);
}

/// The key of `schema`'s JSON text. The text is taken as it came: the same value written
/// differently is another entry (checked once more), never a wrong answer.
fn fingerprint(schema: &RawJson) -> u64 {
    std::hash::BuildHasher::hash_one(&*HASHER, schema.text().as_bytes())
}

/// [`check`], remembered when it passes.
fn check_once(name: &str, schema: &RawJson) -> Result<(), String> {
    let key = fingerprint(schema);
    if KNOWN_VALID
        .lock()
        .is_ok_and(|mut known| known_valid(&mut known, key, schema))
    {
        return Ok(());
    }
    check(name, schema.value())?;
    if let Ok(mut known) = KNOWN_VALID.lock() {
        remember(&mut known, key, schema);
    }
    Ok(())
}

/// Checks the `parameters` of every function tool in `tools` (namespace members included).
pub(crate) fn check_tools(tools: &[Tool]) -> Result<(), Error> {
    check_list(tools, &|| "tools".to_owned())
}

/// The tools of a list whose path `prefix` gives (written only for an error).
fn check_list(tools: &[Tool], prefix: &dyn Fn() -> String) -> Result<(), Error> {
    for (i, tool) in tools.iter().enumerate() {
        check_one(tool, &|| format!("{}[{i}]", prefix()))?;
    }
    Ok(())
}

/// One tool, whose path `param` gives (written only for an error).
fn check_one(tool: &Tool, param: &dyn Fn() -> String) -> Result<(), Error> {
    match tool {
        Tool::Function(f) => {
            if let Some(schema) = &f.parameters {
                check_once(&f.name, schema).map_err(|message| {
                    Error::InvalidFunctionParameters {
                        param: format!("{}.parameters", param()),
                        message,
                    }
                })?;
            }
        }
        Tool::Namespace(ns) => check_list(&ns.tools, &|| format!("{}.tools", param()))?,
        Tool::Custom(_) | Tool::Other(_) => {}
    }
    Ok(())
}

/// The conversation's own tools (a search's findings, `additional_tools`) checked like declared
/// ones; one whose schema is not usable is left out with a diagnostic rather than failing a
/// conversation the client cannot change.
pub(crate) fn check_context_tools(
    tools: &mut Vec<crate::canonical::ContextTool>,
    diagnostics: &mut Vec<toolbridge_wire::responses::Diagnostic>,
) {
    tools.retain(|c| match check_one(&c.tool, &|| c.param.clone()) {
        Ok(()) => true,
        Err(e) => {
            diagnostics.push(crate::diagnostics::diag(
                crate::diagnostics::TOOL_IGNORED,
                Some(&c.param),
                format!("a tool declared in the conversation was left out: {e}"),
            ));
            false
        }
    });
}

/// Why `schema` cannot be the parameters of the function `name`, if it cannot.
fn check(name: &str, schema: &Value) -> Result<(), String> {
    let Value::Object(map) = schema else {
        return Err(format!(
            "the parameters of `{name}` must be a JSON Schema object, not {}",
            kind(schema)
        ));
    };
    match map.get("type") {
        None => {}
        Some(Value::String(t)) if t == "object" => {}
        Some(Value::Array(types)) if types.iter().any(|t| t == "object") => {}
        Some(other) => {
            return Err(format!(
                "the parameters of `{name}` must describe an object (`\"type\": \"object\"`), not `{other}`"
            ));
        }
    }
    // Clients write every draft (MCP servers often draft-07, older ones draft-04 booleans for
    // `exclusiveMinimum`), mostly without `$schema`: one draft's meta-schema that accepts it is
    // enough. The error shown is the latest draft's.
    if jsonschema::draft202012::meta::is_valid(schema)
        || jsonschema::draft7::meta::is_valid(schema)
        || jsonschema::draft4::meta::is_valid(schema)
    {
        return Ok(());
    }
    match jsonschema::draft202012::meta::validate(schema) {
        Ok(()) => Ok(()),
        Err(e) => {
            let at = e.instance_path().to_string();
            let at = if at.is_empty() { "/".to_owned() } else { at };
            Err(format!(
                "the parameters of `{name}` are not a valid JSON Schema at `{at}`: {e}"
            ))
        }
    }
}

/// A JSON value's kind, as a client would name it.
fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tools(list: Value) -> Vec<Tool> {
        serde_json::from_value(list).unwrap_or_default()
    }

    fn refusal(list: Value) -> Option<(String, String)> {
        match check_tools(&tools(list)) {
            Ok(()) => None,
            Err(Error::InvalidFunctionParameters { param, message }) => Some((param, message)),
            Err(other) => Some((String::new(), other.to_string())),
        }
    }

    #[test]
    fn good_schemas_and_absent_parameters_pass() {
        let list = json!([
            {"type": "function", "name": "a", "parameters": {"type": "object", "properties": {"x": {"type": "string"}}}},
            {"type": "function", "name": "b"},
            {"type": "function", "name": "c", "parameters": null},
            {"type": "function", "name": "d", "parameters": {}},
            {"type": "function", "name": "e", "parameters": {"type": "object", "$ref": "https://example.invalid/s.json"}},
            // Older drafts' forms: a tuple `items` (draft 7), a boolean `exclusiveMinimum` (draft 4).
            {"type": "function", "name": "g", "parameters": {"type": "object", "properties": {"p": {"type": "array", "items": [{"type": "number"}, {"type": "number"}]}}}},
            {"type": "function", "name": "h", "parameters": {"type": "object", "properties": {"n": {"type": "number", "minimum": 0, "exclusiveMinimum": true}}}},
            {"type": "custom", "name": "f"},
            {"type": "web_search"},
        ]);
        assert_eq!(refusal(list), None);
    }

    #[test]
    fn a_schema_that_is_not_an_object_schema_names_its_field() {
        let cases = [
            (json!("{\"type\": \"object\"}"), "a string"),
            (json!([{"type": "object"}]), "an array"),
            (json!(true), "a boolean"),
            (json!({"type": "string"}), "must describe an object"),
            (
                json!({"type": "object", "properties": {"x": {"type": "strng"}}}),
                "/properties/x/type",
            ),
            (
                json!({"type": "object", "required": "x"}),
                "not a valid JSON Schema",
            ),
            (
                json!({"properties": {"x": {"minLength": "3"}}}),
                "/properties/x/minLength",
            ),
        ];
        for (parameters, words) in cases {
            let list = json!([
                {"type": "function", "name": "ok"},
                {"type": "function", "name": "bad", "parameters": parameters},
            ]);
            let (param, message) = refusal(list).unwrap_or_default();
            assert_eq!(param, "tools[1].parameters", "{parameters}: {message}");
            assert!(message.contains(words), "{parameters}: {message}");
        }
    }

    #[test]
    fn a_schema_found_valid_is_remembered_and_a_refused_one_is_not() {
        let good = RawJson::from(
            json!({"type": "object", "properties": {"remembered_x": {"type": "string"}}}),
        );
        let bad = RawJson::from(
            json!({"type": "object", "properties": {"remembered_y": {"type": "strng"}}}),
        );
        let known = |v: &RawJson| {
            KNOWN_VALID
                .lock()
                .is_ok_and(|mut k| known_valid(&mut k, fingerprint(v), v))
        };
        assert!(check_once("g", &good).is_ok());
        assert!(known(&good), "a valid schema is remembered");
        assert!(check_once("g", &good).is_ok(), "and still passes");
        for _ in 0..2 {
            let message = check_once("b", &bad).err().unwrap_or_default();
            assert!(
                message.contains("/properties/remembered_y/type"),
                "{message}"
            );
        }
        assert!(!known(&bad), "a refused schema is not remembered");
    }

    #[test]
    fn the_set_of_known_schemas_is_bounded_least_recently_used_first() {
        let mut known = Lru::default();
        // Texts of ten bytes each: `"00000001"`.
        let text = |i: usize| RawJson::from(json!(format!("{i:08}")));
        for i in 0..(MAX_KNOWN + 10) {
            remember(&mut known, i as u64, &text(i));
            if i == 0 {
                // The first is used again late, so it outlives its neighbours.
                continue;
            }
            if i == MAX_KNOWN - 1 {
                assert!(known_valid(&mut known, 0, &text(0)));
            }
        }
        assert_eq!(known.len(), MAX_KNOWN);
        assert_eq!(known.bytes(), MAX_KNOWN * 10);
        assert!(known_valid(&mut known, 0, &text(0)), "recently used: kept");
        assert!(
            !known_valid(&mut known, 1, &text(1)),
            "least recently used: gone"
        );
        assert!(
            !known_valid(&mut known, 0, &text(7)),
            "another text under a known key (a collision): not known"
        );
        let huge = RawJson::from(json!("x".repeat(MAX_KNOWN_BYTES)));
        remember(&mut known, 9, &huge);
        assert!(
            !known_valid(&mut known, 9, &huge),
            "larger than the budget: not kept"
        );
    }

    #[test]
    fn namespace_members_are_checked_at_their_own_path() {
        let list = json!([
            {"type": "function", "name": "a"},
            {"type": "web_search"},
            {"type": "namespace", "name": "ns", "tools": [{"type": "function", "name": "f", "parameters": 5}]},
        ]);
        let (param, message) = refusal(list).unwrap_or_default();
        assert_eq!(param, "tools[2].tools[0].parameters", "{message}");
    }
}
