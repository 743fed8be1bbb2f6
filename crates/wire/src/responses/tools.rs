//! The entries of `tools`: `function`, `custom` (freeform) and `namespace` modelled, every other
//! tool type kept whole.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::RawJson;

/// One entry of `tools`. Only `function` is modelled here; every other tool type is kept whole.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Tool {
    Function(FunctionTool),
    Custom(CustomTool),
    Namespace(NamespaceTool),
    /// Every other tool type (`web_search`, `file_search`, `mcp`, `local_shell`, …), whole.
    #[serde(untagged)]
    Other(Map<String, Value>),
}

impl Tool {
    /// The tool's `type`.
    pub fn kind(&self) -> &str {
        match self {
            Self::Function(_) => "function",
            Self::Custom(_) => "custom",
            Self::Namespace(_) => "namespace",
            Self::Other(map) => map.get("type").and_then(Value::as_str).unwrap_or(""),
        }
    }
}

/// A `custom` (freeform) tool: its input is raw text, optionally following a grammar.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CustomTool {
    pub name: String,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "crate::raw::long_opt"
    )]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<CustomFormat>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// The input format of a custom tool: `{"type":"text"}` or
/// `{"type":"grammar","syntax":"lark"|"regex","definition":…}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CustomFormat {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub syntax: Option<String>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "crate::raw::long_opt"
    )]
    pub definition: Option<String>,
}

/// A `namespace` tool: a named group of tools, called with `namespace` and `name`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NamespaceTool {
    pub name: String,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "crate::raw::long_opt"
    )]
    pub description: Option<String>,
    #[serde(default)]
    pub tools: Vec<Tool>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A `function` tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FunctionTool {
    pub name: String,
    #[serde(default, serialize_with = "crate::raw::long_opt")]
    pub description: Option<String>,
    /// The schema as the client wrote it ([`RawJson`]: passed on, not rebuilt).
    #[serde(default)]
    pub parameters: Option<RawJson>,
    #[serde(default)]
    pub strict: Option<bool>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}
