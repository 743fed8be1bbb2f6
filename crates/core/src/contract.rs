//! Output contracts: what `text.format` asks the final text to be, and checking it.

use std::sync::Arc;

use serde_json::Value;

use crate::Error;

/// What the final assistant text must be.
#[derive(Debug, Clone, Default)]
pub enum OutputContract {
    /// Free text.
    #[default]
    Text,
    /// Any JSON object.
    JsonObject,
    /// JSON matching a schema.
    JsonSchema(SchemaContract),
}

/// A `json_schema` contract with its compiled validator.
#[derive(Debug, Clone)]
pub struct SchemaContract {
    pub name: String,
    pub description: Option<String>,
    pub schema: Value,
    pub strict: bool,
    validator: Arc<jsonschema::Validator>,
}

impl SchemaContract {
    /// Compiles the schema; an invalid schema is the client's error.
    pub fn new(
        name: String,
        description: Option<String>,
        schema: Value,
        strict: bool,
    ) -> Result<Self, Error> {
        let validator = jsonschema::validator_for(&schema).map_err(|e| Error::InvalidSchema {
            param: "text.format.schema".to_owned(),
            message: e.to_string(),
        })?;
        Ok(Self {
            name,
            description,
            schema,
            strict,
            validator: Arc::new(validator),
        })
    }

    /// Checks the final text against the schema. `Err` carries a message naming the first
    /// failing location in the output.
    pub fn check(&self, text: &str) -> Result<(), String> {
        let value: Value = serde_json::from_str(text.trim())
            .map_err(|e| format!("the output is not valid JSON: {e}"))?;
        match self.validator.iter_errors(&value).next() {
            None => Ok(()),
            Some(err) => {
                let at = err.instance_path().to_string();
                let at = if at.is_empty() { "/".to_owned() } else { at };
                Err(format!(
                    "the output does not match schema `{}` at `{at}`: {err}",
                    self.name
                ))
            }
        }
    }
}
