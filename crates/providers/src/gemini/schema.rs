//! JSON Schema → the OpenAPI-style subset Gemini accepts for function `parameters` and
//! `responseSchema`.
//!
//! What is done, every lossy step reported as a diagnostic naming its JSON path:
//! - Local `$ref`s (`#/$defs/…`, `#/definitions/…`, any JSON pointer into the same document) are
//!   inlined. A reference that points back into itself, or nests deeper than [`MAX_REF_DEPTH`],
//!   is cut and replaced by `{"type":"object"}`; one that cannot be resolved is replaced the same
//!   way.
//! - `type: [T, "null"]` becomes `type: T, nullable: true`; a type list with several non-null
//!   types keeps the first.
//! - `const: v` becomes `enum: [v]`; `oneOf` becomes `anyOf` (Gemini has no exclusive union, so
//!   the schema gets looser); an `allOf` of one schema is merged into its parent.
//! - `$defs` and `definitions` are removed silently once inlined.
//! - Every keyword outside [`KEPT`] is dropped: `$schema`, `$id`,
//!   `additionalProperties`, `patternProperties`, `unevaluatedProperties`, `examples`,
//!   `default`, `not`, `if`/`then`/`else`, `exclusiveMinimum`/`exclusiveMaximum`, `multipleOf`,
//!   `uniqueItems`, `dependentRequired`, an `allOf` of several schemas, tuple-form `items`, …
//!
//! What is not done: enum values are not converted to strings, and `format` values Gemini does
//! not know are passed as they are.

use serde_json::{Map, Value, json};
use toolbridge_core::diagnostics::diag;
use toolbridge_wire::responses::Diagnostic;

/// How many `$ref`s may be expanded inside one another.
pub const MAX_REF_DEPTH: usize = 8;

/// Keywords passed through unchanged (their values are not schemas).
const KEPT: &[&str] = &[
    "type",
    "format",
    "title",
    "description",
    "nullable",
    "enum",
    "required",
    "minItems",
    "maxItems",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "pattern",
    "minProperties",
    "maxProperties",
    "propertyOrdering",
    "example",
];

/// Sanitises `schema`. `path` names it in diagnostics (`tools[0].parameters`), each reported
/// with `code`.
pub fn sanitize(
    schema: &Value,
    path: &str,
    code: &str,
    diagnostics: &mut Vec<Diagnostic>,
) -> Value {
    let mut s = Sanitizer {
        root: schema,
        code,
        diagnostics,
        refs: Vec::new(),
    };
    s.node(schema, path)
}

struct Sanitizer<'a> {
    root: &'a Value,
    code: &'a str,
    diagnostics: &'a mut Vec<Diagnostic>,
    /// The `$ref`s being expanded, outermost first.
    refs: Vec<String>,
}

impl Sanitizer<'_> {
    fn report(&mut self, path: &str, message: String) {
        self.diagnostics.push(diag(self.code, Some(path), message));
    }

    fn node(&mut self, node: &Value, path: &str) -> Value {
        let Value::Object(obj) = node else {
            // `true`/`false` schemas have no Gemini form; any value is the closest.
            if node.is_boolean() {
                self.report(
                    path,
                    "a boolean schema was sent as {\"type\":\"object\"}".to_owned(),
                );
                return json!({"type": "object"});
            }
            return node.clone();
        };
        if let Some(Value::String(reference)) = obj.get("$ref") {
            return self.reference(reference, obj, path);
        }
        let mut out = Map::new();
        for (key, value) in obj {
            let at = format!("{path}.{key}");
            match key.as_str() {
                "type" => self.kind(value, &at, &mut out),
                "properties" => {
                    let props = match value {
                        Value::Object(props) => props
                            .iter()
                            .map(|(name, v)| (name.clone(), self.node(v, &format!("{at}.{name}"))))
                            .collect(),
                        _ => Map::new(),
                    };
                    out.insert(key.clone(), Value::Object(props));
                }
                "items" => {
                    if value.is_array() {
                        self.report(&at, "tuple-form `items` was dropped".to_owned());
                    } else {
                        out.insert(key.clone(), self.node(value, &at));
                    }
                }
                "anyOf" | "oneOf" => {
                    if key == "oneOf" {
                        self.report(&at, "`oneOf` was sent as `anyOf`".to_owned());
                    }
                    let list = self.list(value, &at);
                    out.insert("anyOf".to_owned(), Value::Array(list));
                }
                "allOf" => match value.as_array().map(Vec::as_slice) {
                    Some([single]) => {
                        if let Value::Object(merged) = self.node(single, &format!("{at}[0]")) {
                            for (k, v) in merged {
                                out.entry(k).or_insert(v);
                            }
                        }
                    }
                    _ => self.report(&at, "`allOf` of several schemas was dropped".to_owned()),
                },
                "const" => {
                    self.report(&at, "`const` was sent as an `enum` of one".to_owned());
                    out.insert("enum".to_owned(), json!([value]));
                }
                // Inlined where referenced; the definitions themselves do not go upstream.
                "$defs" | "definitions" => {}
                k if KEPT.contains(&k) => {
                    out.insert(key.clone(), value.clone());
                }
                _ => self.report(&at, format!("`{key}` is not supported by Gemini; dropped")),
            }
        }
        Value::Object(out)
    }

    fn list(&mut self, value: &Value, path: &str) -> Vec<Value> {
        value
            .as_array()
            .map(|items| {
                items
                    .iter()
                    .enumerate()
                    .map(|(i, v)| self.node(v, &format!("{path}[{i}]")))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// `type`, with a list of types folded into one plus `nullable`.
    fn kind(&mut self, value: &Value, path: &str, out: &mut Map<String, Value>) {
        let Value::Array(types) = value else {
            out.insert("type".to_owned(), value.clone());
            return;
        };
        let nullable = types.iter().any(|t| t == "null");
        let others: Vec<&Value> = types.iter().filter(|t| *t != "null").collect();
        if let Some(first) = others.first() {
            out.insert("type".to_owned(), (*first).clone());
        }
        if others.len() > 1 {
            self.report(
                path,
                format!(
                    "a list of types was narrowed to its first, {}",
                    others.first().map(|v| v.to_string()).unwrap_or_default()
                ),
            );
        }
        if nullable {
            out.insert("nullable".to_owned(), Value::Bool(true));
        }
    }

    fn reference(&mut self, reference: &str, obj: &Map<String, Value>, path: &str) -> Value {
        let at = format!("{path}.$ref");
        let target = reference
            .strip_prefix('#')
            .and_then(|pointer| self.root.pointer(pointer));
        let Some(target) = target else {
            self.report(
                &at,
                format!("`{reference}` could not be resolved; sent as {{\"type\":\"object\"}}"),
            );
            return json!({"type": "object"});
        };
        if self.refs.iter().any(|r| r == reference) || self.refs.len() >= MAX_REF_DEPTH {
            self.report(
                &at,
                format!(
                    "`{reference}` is recursive (or nested too deep); it was cut to {{\"type\":\"object\"}}"
                ),
            );
            return json!({"type": "object"});
        }
        self.refs.push(reference.to_owned());
        let mut out = self.node(target, path);
        self.refs.pop();
        // Keywords beside the `$ref` (a description, usually) override the target's.
        let mut siblings = obj.clone();
        siblings.remove("$ref");
        if !siblings.is_empty()
            && let (Value::Object(out), Value::Object(extra)) =
                (&mut out, self.node(&Value::Object(siblings), path))
        {
            out.extend(extra);
        }
        out
    }
}
