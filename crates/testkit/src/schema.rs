//! Validation against the Open Responses OpenAPI spec in `../shared/reference/openresponses/`.
//!
//! The spec is not part of the project: [`OpenResponses::load`] returns `None` when it is absent
//! and the calling test says it skipped that check.
//!
//! The spec knows only `function` tools and the message, function call, function call output,
//! reasoning and compaction items. OpenAI's other tool and item types (custom tools, namespaces,
//! hosted tools, `custom_tool_call`, `shell_call`, …) are extensions it cannot describe, so they
//! are left out of what is checked: tools and items of other types are removed from a response
//! before validation, and events the spec does not list (or that carry such an item) are not
//! checked. Everything the spec does describe is.

use std::path::PathBuf;

use serde_json::{Value, json};

/// Compiled validators for the response object and the streaming events.
pub struct OpenResponses {
    response: jsonschema::Validator,
    event: jsonschema::Validator,
    compaction: jsonschema::Validator,
    event_types: Vec<String>,
    item_types: Vec<String>,
}

impl OpenResponses {
    /// Where the spec is expected: `$TOOLBRIDGE_SHARED_DIR` or the `shared/` beside the repo.
    pub fn path() -> PathBuf {
        let shared = std::env::var_os("TOOLBRIDGE_SHARED_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared"));
        shared.join("reference/openresponses/openapi.json")
    }

    /// Loads the spec, or `None` (with a message on stderr) when it is absent.
    pub fn load() -> Option<Self> {
        let path = Self::path();
        let Ok(text) = std::fs::read_to_string(&path) else {
            eprintln!(
                "SKIPPED Open Responses schema validation: {} is absent",
                path.display()
            );
            return None;
        };
        let spec: Value = serde_json::from_str(&text).expect("openapi.json is JSON");
        let mut components = spec["components"].clone();
        // The spec has the response echo `text.format.schema` as `null`; the gateway echoes the
        // schema as sent, as OpenAI does (the Python SDK's strict parsing refuses `null`).
        components["schemas"]["JsonSchemaResponseFormat"]["properties"]["schema"] =
            json!({"anyOf": [{"type": "null"}, {"type": "object"}]});
        let event_schema =
            spec["paths"]["/responses"]["post"]["responses"]["200"]["content"]["text/event-stream"]
                ["schema"]
                .clone();
        let root = |schema: Value| {
            let mut root = json!({
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "components": components.clone(),
            });
            if let (Some(obj), Some(extra)) = (root.as_object_mut(), schema.as_object()) {
                for (k, v) in extra {
                    obj.insert(k.clone(), v.clone());
                }
            }
            root
        };
        let response = jsonschema::validator_for(&root(
            json!({"$ref": "#/components/schemas/ResponseResource"}),
        ))
        .expect("ResponseResource schema compiles");
        let compaction = jsonschema::validator_for(&root(
            json!({"$ref": "#/components/schemas/CompactResource"}),
        ))
        .expect("CompactResource schema compiles");
        let event_types = enum_values(&spec, &event_schema, "type");
        let item_types = enum_values(
            &spec,
            &json!({"oneOf": spec["components"]["schemas"]["ItemField"]["oneOf"].clone()}),
            "type",
        );
        let event = jsonschema::validator_for(&root(event_schema)).expect("event schema compiles");
        Some(Self {
            response,
            event,
            compaction,
            event_types,
            item_types,
        })
    }

    /// Checks a response object; `Err` lists every violation.
    pub fn check_response(&self, value: &Value) -> Result<(), String> {
        collect(&self.response, &self.within_spec(value))
    }

    /// Checks a `/v1/responses/compact` answer (`CompactResource`), every output item with it.
    pub fn check_compaction(&self, value: &Value) -> Result<(), String> {
        collect(&self.compaction, value)
    }

    /// Checks one streaming event (extension events and items are not checked, see above).
    pub fn check_event(&self, value: &Value) -> Result<(), String> {
        let kind = value["type"].as_str().unwrap_or("");
        if !self.event_types.iter().any(|t| t == kind) {
            return Ok(());
        }
        if let Some(item_kind) = value.get("item").and_then(|i| i["type"].as_str())
            && !self.item_types.iter().any(|t| t == item_kind)
        {
            return Ok(());
        }
        let mut value = value.clone();
        if let Some(response) = value.get_mut("response") {
            *response = self.within_spec(response);
        }
        collect(&self.event, &value)
    }

    /// A response with only the tools and items the spec describes.
    fn within_spec(&self, value: &Value) -> Value {
        let mut value = value.clone();
        if let Some(tools) = value.get_mut("tools").and_then(Value::as_array_mut) {
            tools.retain(|t| t["type"] == "function");
        }
        if let Some(output) = value.get_mut("output").and_then(Value::as_array_mut) {
            output.retain(|i| {
                self.item_types
                    .iter()
                    .any(|t| Some(t.as_str()) == i["type"].as_str())
            });
        }
        value
    }
}

fn collect(validator: &jsonschema::Validator, value: &Value) -> Result<(), String> {
    let errors: Vec<String> = validator
        .iter_errors(value)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("\n"))
    }
}

/// The `enum` values of `field` across the `oneOf` branches of `schema` (through `$ref`s).
fn enum_values(spec: &Value, schema: &Value, field: &str) -> Vec<String> {
    let mut out = Vec::new();
    for branch in schema["oneOf"].as_array().into_iter().flatten() {
        let resolved = match branch["$ref"].as_str() {
            Some(r) => {
                let name = r.rsplit('/').next().unwrap_or("");
                &spec["components"]["schemas"][name]
            }
            None => branch,
        };
        for v in resolved["properties"][field]["enum"]
            .as_array()
            .into_iter()
            .flatten()
        {
            if let Some(s) = v.as_str() {
                out.push(s.to_owned());
            }
        }
    }
    out
}
