//! Validation against the Open Responses OpenAPI spec in `../shared/reference/openresponses/`.
//!
//! The spec is not part of the project: [`OpenResponses::load`] returns `None` when it is absent
//! and the calling test says it skipped that check.

use std::path::PathBuf;

use serde_json::{Value, json};

/// Compiled validators for the response object and the streaming events.
pub struct OpenResponses {
    response: jsonschema::Validator,
    event: jsonschema::Validator,
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
        let components = spec["components"].clone();
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
        let event = jsonschema::validator_for(&root(event_schema)).expect("event schema compiles");
        Some(Self { response, event })
    }

    /// Checks a response object; `Err` lists every violation.
    pub fn check_response(&self, value: &Value) -> Result<(), String> {
        collect(&self.response, value)
    }

    /// Checks one streaming event.
    pub fn check_event(&self, value: &Value) -> Result<(), String> {
        collect(&self.event, value)
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
