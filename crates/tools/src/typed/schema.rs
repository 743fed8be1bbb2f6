//! Typed tools defined by a hand-written JSON Schema plus their own parse function (the
//! design's `defineSchema`), for inputs that no Rust type derives well or that must match an
//! existing schema byte for byte. The schema is checked and compiled at
//! [`ModelToolRegistry::seal`] like a derived one, and every input is validated against it
//! before `parse` runs, so `parse` sees only schema-valid JSON.

use std::fmt;
use std::sync::Arc;

use serde_json::Value;

use super::ModelToolRegistry;
use crate::tool::ToolError;

type Parse<I> = dyn Fn(&Value) -> Result<I, String> + Send + Sync;

/// A hand-written JSON Schema and the function that parses a schema-valid value into `I`.
pub struct InputSchema<I> {
    json_schema: Value,
    parse: Arc<Parse<I>>,
}

impl<I> Clone for InputSchema<I> {
    fn clone(&self) -> Self {
        Self {
            json_schema: self.json_schema.clone(),
            parse: Arc::clone(&self.parse),
        }
    }
}

impl<I> fmt::Debug for InputSchema<I> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InputSchema")
            .field("json_schema", &self.json_schema)
            .finish_non_exhaustive()
    }
}

impl<I> InputSchema<I> {
    /// The schema as written.
    pub fn json_schema(&self) -> &Value {
        &self.json_schema
    }
}

/// An [`InputSchema`] from a JSON Schema (an object schema, checked at seal) and a parser. A
/// parser's `Err(message)` becomes [`ToolError::InvalidArguments`] at `/`.
pub fn define_schema<I, P>(json_schema: Value, parse: P) -> InputSchema<I>
where
    P: Fn(&Value) -> Result<I, String> + Send + Sync + 'static,
{
    InputSchema {
        json_schema,
        parse: Arc::new(parse),
    }
}

impl<O: 'static> ModelToolRegistry<O> {
    /// Adds a tool whose input follows a hand-written `schema` and whose selection resolves to
    /// `resolve(parsed)`.
    pub fn schema_tool<I, F>(
        self,
        id: impl Into<String>,
        description: impl Into<String>,
        schema: InputSchema<I>,
        resolve: F,
    ) -> Self
    where
        I: 'static,
        F: Fn(I) -> O + Send + Sync + 'static,
    {
        let parse = Arc::clone(&schema.parse);
        let run = move |input: Value| -> Result<O, ToolError> {
            let parsed = parse(&input).map_err(|message| ToolError::InvalidArguments {
                path: "/".to_owned(),
                message,
            })?;
            Ok(resolve(parsed))
        };
        self.push(
            id.into(),
            description.into(),
            schema.json_schema,
            Box::new(run),
        )
    }
}
