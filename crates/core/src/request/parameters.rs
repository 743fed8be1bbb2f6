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

use serde_json::Value;
use toolbridge_wire::responses::Tool;

use crate::Error;

/// Checks the `parameters` of every function tool in `tools` (namespace members included).
pub(crate) fn check_tools(tools: &[Tool]) -> Result<(), Error> {
    check_list(tools, "tools")
}

fn check_list(tools: &[Tool], prefix: &str) -> Result<(), Error> {
    for (i, tool) in tools.iter().enumerate() {
        match tool {
            Tool::Function(f) => {
                if let Some(schema) = &f.parameters {
                    check(&f.name, schema).map_err(|message| Error::InvalidFunctionParameters {
                        param: format!("{prefix}[{i}].parameters"),
                        message,
                    })?;
                }
            }
            Tool::Namespace(ns) => check_list(&ns.tools, &format!("{prefix}[{i}].tools"))?,
            Tool::Custom(_) | Tool::Other(_) => {}
        }
    }
    Ok(())
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
