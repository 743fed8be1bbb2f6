//! The model transport (the design's `createModelTransport`): a provider's function call, in
//! whichever dialect carried it, turned into a [`ModelSelection`] and resolved for one stage.
//!
//! Three wire shapes are read, each as the provider sends one call:
//!
//! | [`Dialect`] | shape | arguments |
//! |---|---|---|
//! | `Chat` | `{"id", "type": "function", "function": {"name", "arguments"}}` | a JSON text (`""` reads as `{}`) |
//! | `Anthropic` | `{"type": "tool_use", "id", "name", "input"}` | an object |
//! | `Gemini` | `{"functionCall": {"name", "args", "id"?}}` or the bare inner object | an object |
//!
//! A call a decoder already reduced to a name and its argument text (as a gateway's neutral
//! events carry it, whatever the dialect) is read by [`ModelTransport::text_selection`].
//!
//! The name the provider saw goes through a [`NameMap`] (the gateway renames tools to fit a
//! provider's name rules; a name with no entry maps to itself), and the selection keeps the
//! native call (id, provider-side name, argument length). A call that is not one of these
//! shapes, or whose Chat arguments are not JSON, is [`ToolError::InvalidArguments`] with the
//! pointer of the bad field; resolving then gives the source's own typed errors
//! (`unknown_tool`, `not_in_stage`, `invalid_arguments`). Nothing here sends or receives.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::{ModelSelection, ModelToolSource, NativeCall};
use crate::tool::ToolError;

/// The wire shape of a provider's function call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// OpenAI Chat Completions `tool_calls[]` (and the many providers that copy it).
    Chat,
    /// Anthropic Messages `tool_use` content blocks.
    Anthropic,
    /// Gemini `functionCall` parts.
    Gemini,
}

/// Provider-side tool names → tool ids; names without an entry are ids already.
pub type NameMap = BTreeMap<String, String>;

/// Turns one stage's provider calls into resolved selections.
#[derive(Debug, Clone)]
pub struct ModelTransport<S> {
    id: String,
    tools: S,
    names: NameMap,
}

/// A transport for stage `id` over `tools` (a sealed registry or one stage's selection).
pub fn create_model_transport<S>(id: impl Into<String>, tools: S) -> ModelTransport<S> {
    ModelTransport {
        id: id.into(),
        tools,
        names: NameMap::new(),
    }
}

impl<S> ModelTransport<S> {
    /// The stage id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The tools the stage resolves against.
    pub fn tools(&self) -> &S {
        &self.tools
    }

    /// Uses `names` to map provider-side names to tool ids.
    pub fn with_names(mut self, names: NameMap) -> Self {
        self.names = names;
        self
    }

    /// The selection one provider call carries.
    pub fn selection(&self, dialect: Dialect, call: &Value) -> Result<ModelSelection, ToolError> {
        let (id, name, input, argument_chars) = match dialect {
            Dialect::Chat => chat_call(call)?,
            Dialect::Anthropic => object_call(call, "", "input")?,
            Dialect::Gemini => match call.get("functionCall") {
                Some(inner) => object_call(inner, "/functionCall", "args")?,
                None => object_call(call, "", "args")?,
            },
        };
        Ok(self.named(id, name, input, argument_chars))
    }

    /// The selection of a call already decoded to its provider-side `name` and raw argument
    /// text (the neutral form a gateway's decoders produce from any dialect): the text is read
    /// as in a Chat call (`""` reads as `{}`), text that is not JSON is
    /// [`ToolError::InvalidArguments`] at `/`.
    pub fn text_selection(
        &self,
        id: &str,
        name: &str,
        arguments: &str,
    ) -> Result<ModelSelection, ToolError> {
        let input = arguments_json(arguments, "/")?;
        Ok(self.named(
            id.to_owned(),
            name.to_owned(),
            input,
            arguments.chars().count(),
        ))
    }

    /// [`Self::text_selection`], resolved for this stage.
    pub fn resolve_text<O>(
        &self,
        id: &str,
        name: &str,
        arguments: &str,
    ) -> Result<(ModelSelection, O), ToolError>
    where
        S: ModelToolSource<O>,
    {
        let selection = self.text_selection(id, name, arguments)?;
        let output = self.tools.resolve(&selection, &self.id)?;
        Ok((selection, output))
    }

    fn named(
        &self,
        id: String,
        name: String,
        input: Value,
        argument_chars: usize,
    ) -> ModelSelection {
        let tool_id = self
            .names
            .get(&name)
            .cloned()
            .unwrap_or_else(|| name.clone());
        ModelSelection::new(tool_id, input).with_call(NativeCall {
            id,
            name,
            argument_chars,
        })
    }

    /// The selection one provider call carries, resolved for this stage.
    pub fn resolve<O>(
        &self,
        dialect: Dialect,
        call: &Value,
    ) -> Result<(ModelSelection, O), ToolError>
    where
        S: ModelToolSource<O>,
    {
        let selection = self.selection(dialect, call)?;
        let output = self.tools.resolve(&selection, &self.id)?;
        Ok((selection, output))
    }
}

type Parsed = (String, String, Value, usize);

fn bad(path: &str, message: impl Into<String>) -> ToolError {
    ToolError::InvalidArguments {
        path: if path.is_empty() {
            "/".into()
        } else {
            path.into()
        },
        message: message.into(),
    }
}

fn string_field(value: &Value, base: &str, field: &str) -> Result<String, ToolError> {
    value
        .get(field)
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| {
            bad(
                &format!("{base}/{field}"),
                format!("`{field}` must be a string"),
            )
        })
}

fn chat_call(call: &Value) -> Result<Parsed, ToolError> {
    let function = call
        .get("function")
        .ok_or_else(|| bad("/function", "a Chat tool call has a `function` object"))?;
    let name = string_field(function, "/function", "name")?;
    let raw = string_field(function, "/function", "arguments")?;
    let input = arguments_json(&raw, "/function/arguments")?;
    let id = call
        .get("id")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    Ok((id, name, input, raw.chars().count()))
}

/// Raw argument text as JSON (`""` reads as `{}`); not JSON is an error at `path`.
fn arguments_json(raw: &str, path: &str) -> Result<Value, ToolError> {
    if raw.trim().is_empty() {
        return Ok(Value::Object(Map::new()));
    }
    serde_json::from_str(raw.trim())
        .map_err(|err| bad(path, format!("the arguments are not JSON: {err}")))
}

fn object_call(call: &Value, base: &str, field: &str) -> Result<Parsed, ToolError> {
    let name = string_field(call, base, "name")?;
    let input = match call.get(field) {
        None | Some(Value::Null) => Value::Object(Map::new()),
        Some(input @ Value::Object(_)) => input.clone(),
        Some(_) => {
            return Err(bad(
                &format!("{base}/{field}"),
                format!("`{field}` must be an object"),
            ));
        }
    };
    let id = call
        .get("id")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let argument_chars = serde_json::to_string(&input)
        .map(|text| text.chars().count())
        .unwrap_or_default();
    Ok((id, name, input, argument_chars))
}
