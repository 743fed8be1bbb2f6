//! Capabilities: what the planner can do, which registered tools do it, and the simple value
//! types used to check a plan's data flow.
//!
//! A [`CapabilityCatalog`] is checked against a [`ToolProvider`] when it is built: a capability
//! that names a tool which is not registered is an error then, not a surprise at execution (one
//! of the flaws of the system this replaces). The registry is shared immutably afterwards, so the
//! check stays true. This module does not analyse text nor rank tools.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::provider::ToolProvider;
use crate::suggest::close_matches;
use crate::tool::ToolError;

/// The coarse type of a value flowing between plan steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ValueType {
    /// Anything; compatible with every type.
    Any,
    /// `null`.
    Null,
    /// `true` or `false`.
    Boolean,
    /// A JSON number.
    Number,
    /// A JSON string.
    String,
    /// A JSON array.
    Array,
    /// A JSON object.
    Object,
}

impl ValueType {
    /// The type of a JSON value.
    pub fn of(value: &Value) -> Self {
        match value {
            Value::Null => Self::Null,
            Value::Bool(_) => Self::Boolean,
            Value::Number(_) => Self::Number,
            Value::String(_) => Self::String,
            Value::Array(_) => Self::Array,
            Value::Object(_) => Self::Object,
        }
    }

    /// True when a value of type `produced` may be passed where `self` is expected.
    pub fn accepts(self, produced: ValueType) -> bool {
        self == Self::Any || produced == Self::Any || self == produced
    }

    /// True for the types a JSON pointer can look inside.
    pub fn is_container(self) -> bool {
        matches!(self, Self::Any | Self::Array | Self::Object)
    }
}

/// Static traits of a tool that the evidence scorer weighs besides its record.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ToolTraits {
    /// The same arguments always give the same output.
    pub deterministic: bool,
    /// The tool changes something outside itself (writes a file, sends a request).
    pub side_effects: bool,
    /// The relative cost of one call (0 is free).
    pub cost: f64,
}

impl Default for ToolTraits {
    /// Unknown tools are assumed non-deterministic and with side effects, and free.
    fn default() -> Self {
        Self {
            deterministic: false,
            side_effects: true,
            cost: 0.0,
        }
    }
}

impl ToolTraits {
    /// A pure function: deterministic, no side effects, free.
    pub fn pure() -> Self {
        Self {
            deterministic: true,
            side_effects: false,
            cost: 0.0,
        }
    }
}

/// One capability: an id the intent analyzer produces, the registered tools that provide it (in
/// order of preference), and its data-flow types.
#[derive(Debug, Clone, PartialEq)]
pub struct CapabilityDef {
    /// The capability id (`math`, `hash`, …).
    pub id: String,
    /// What it does.
    pub description: String,
    /// The tools that provide it, most preferred first.
    pub tools: Vec<String>,
    /// The accepted type of each argument; an argument not listed accepts anything.
    pub inputs: BTreeMap<String, ValueType>,
    /// The type of the output.
    pub output: ValueType,
    /// The argument that receives the intent text (minus the matched terms) when a call is
    /// planned from text alone, e.g. `expression` for a calculator.
    pub text_argument: Option<String>,
    /// The argument that receives the matched term itself when it is one of the values the
    /// tool's schema allows there (`enum`), e.g. `operation` = `sha256` for a hash tool.
    pub term_argument: Option<String>,
    /// Where in the output the result a following step receives lies (a JSON pointer, e.g.
    /// `/text`); the whole output when `None`.
    pub result_pointer: Option<String>,
}

impl CapabilityDef {
    /// A capability provided by `tools`, with untyped inputs and output.
    pub fn new<S: Into<String>>(id: impl Into<String>, tools: impl IntoIterator<Item = S>) -> Self {
        Self {
            id: id.into(),
            description: String::new(),
            tools: tools.into_iter().map(Into::into).collect(),
            inputs: BTreeMap::new(),
            output: ValueType::Any,
            text_argument: None,
            term_argument: None,
            result_pointer: None,
        }
    }

    /// Sets the description.
    pub fn describe(mut self, description: impl Into<String>) -> Self {
        self.description = description.into();
        self
    }

    /// Declares the accepted type of argument `name`.
    pub fn input(mut self, name: impl Into<String>, ty: ValueType) -> Self {
        self.inputs.insert(name.into(), ty);
        self
    }

    /// Declares the output type.
    pub fn output(mut self, ty: ValueType) -> Self {
        self.output = ty;
        self
    }

    /// Names the argument that receives the intent text.
    pub fn text_argument(mut self, name: impl Into<String>) -> Self {
        self.text_argument = Some(name.into());
        self
    }

    /// Names the argument that receives the matched term when the schema allows it there.
    pub fn term_argument(mut self, name: impl Into<String>) -> Self {
        self.term_argument = Some(name.into());
        self
    }

    /// Says where in the output a following step finds the result (a JSON pointer).
    pub fn result_at(mut self, pointer: impl Into<String>) -> Self {
        self.result_pointer = Some(pointer.into());
        self
    }
}

/// Capabilities checked against a registry, plus each tool's [`ToolTraits`].
#[derive(Debug, Clone, Default)]
pub struct CapabilityCatalog {
    capabilities: BTreeMap<String, CapabilityDef>,
    traits: BTreeMap<String, ToolTraits>,
}

impl CapabilityCatalog {
    /// Checks every definition against `registry`: ids are non-empty and unique, each names at
    /// least one tool, every tool is registered (an error with close matches otherwise), and
    /// every declared argument (inputs and `text_argument`) is a property of each tool's schema.
    pub fn new(
        defs: impl IntoIterator<Item = CapabilityDef>,
        registry: &dyn ToolProvider,
    ) -> Result<Self, ToolError> {
        let mut capabilities = BTreeMap::new();
        for def in defs {
            check_def(&def, registry)?;
            if capabilities.contains_key(&def.id) {
                return Err(ToolError::InvalidConfiguration(format!(
                    "capability `{}` is defined twice",
                    def.id
                )));
            }
            capabilities.insert(def.id.clone(), def);
        }
        Ok(Self {
            capabilities,
            traits: BTreeMap::new(),
        })
    }

    /// One untyped capability per capability tag the registered tools declare
    /// ([`crate::Tool::capabilities`]), listing the tools that carry it in name order.
    pub fn from_tool_tags(registry: &dyn ToolProvider) -> Self {
        let mut capabilities: BTreeMap<String, CapabilityDef> = BTreeMap::new();
        for info in registry.list_tools() {
            for tag in info.capabilities {
                capabilities
                    .entry(tag.clone())
                    .or_insert_with(|| CapabilityDef::new(tag, [] as [String; 0]))
                    .tools
                    .push(info.name.clone());
            }
        }
        Self {
            capabilities,
            traits: BTreeMap::new(),
        }
    }

    /// Adds definitions checked as in [`CapabilityCatalog::new`]; a definition for an id that
    /// exists replaces it.
    pub fn extend(
        &mut self,
        defs: impl IntoIterator<Item = CapabilityDef>,
        registry: &dyn ToolProvider,
    ) -> Result<(), ToolError> {
        for def in defs {
            check_def(&def, registry)?;
            self.capabilities.insert(def.id.clone(), def);
        }
        Ok(())
    }

    /// Records the traits of a registered tool.
    pub fn set_traits(
        &mut self,
        tool: &str,
        traits: ToolTraits,
        registry: &dyn ToolProvider,
    ) -> Result<(), ToolError> {
        if registry.describe(tool).is_none() {
            return Err(unregistered("tool traits", tool, registry));
        }
        self.traits.insert(tool.to_owned(), traits);
        Ok(())
    }

    /// The capability with this id.
    pub fn get(&self, id: &str) -> Option<&CapabilityDef> {
        self.capabilities.get(id)
    }

    /// Every capability, sorted by id.
    pub fn iter(&self) -> impl Iterator<Item = &CapabilityDef> {
        self.capabilities.values()
    }

    /// The traits of a tool (the conservative default when none were set).
    pub fn traits(&self, tool: &str) -> ToolTraits {
        self.traits.get(tool).copied().unwrap_or_default()
    }
}

fn check_def(def: &CapabilityDef, registry: &dyn ToolProvider) -> Result<(), ToolError> {
    if def.id.trim().is_empty() {
        return Err(ToolError::InvalidConfiguration(
            "a capability has an empty id".to_owned(),
        ));
    }
    if def.tools.is_empty() {
        return Err(ToolError::InvalidConfiguration(format!(
            "capability `{}` names no tool",
            def.id
        )));
    }
    let declared = def
        .inputs
        .keys()
        .chain(def.text_argument.as_ref())
        .chain(def.term_argument.as_ref());
    let declared: Vec<&String> = declared.collect();
    for tool_name in &def.tools {
        let Some(tool) = registry.describe(tool_name) else {
            return Err(unregistered(
                &format!("capability `{}`", def.id),
                tool_name,
                registry,
            ));
        };
        let properties = tool.parameters.get("properties").and_then(Value::as_object);
        for argument in &declared {
            if !properties.is_some_and(|p| p.contains_key(argument.as_str())) {
                return Err(ToolError::InvalidConfiguration(format!(
                    "capability `{}` declares argument `{argument}`, which tool `{tool_name}` does not have",
                    def.id
                )));
            }
        }
    }
    Ok(())
}

fn unregistered(what: &str, tool: &str, registry: &dyn ToolProvider) -> ToolError {
    let names: Vec<String> = registry.list_tools().into_iter().map(|t| t.name).collect();
    let suggestions = close_matches(tool, names.iter().map(String::as_str));
    let hint = if suggestions.is_empty() {
        String::new()
    } else {
        format!(" (did you mean {})", suggestions.join(", "))
    };
    ToolError::InvalidConfiguration(format!(
        "{what} names tool `{tool}`, which is not registered{hint}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_is_compatible_both_ways_and_others_only_with_themselves() {
        assert!(ValueType::Any.accepts(ValueType::Number));
        assert!(ValueType::Number.accepts(ValueType::Any));
        assert!(ValueType::Number.accepts(ValueType::Number));
        assert!(!ValueType::Number.accepts(ValueType::String));
        assert!(!ValueType::Object.accepts(ValueType::Array));
    }

    #[test]
    fn value_types_of_json() {
        assert_eq!(ValueType::of(&serde_json::json!(1.5)), ValueType::Number);
        assert_eq!(ValueType::of(&serde_json::json!("x")), ValueType::String);
        assert_eq!(ValueType::of(&serde_json::json!({})), ValueType::Object);
    }
}
