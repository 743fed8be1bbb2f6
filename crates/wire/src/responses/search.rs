//! The items of tool search: `tool_search_call` (the model asks for tools), `tool_search_output`
//! (the tools found, which later rounds may call) and `additional_tools` (tools a code-mode
//! client declares inside `input` instead of `tools`). Input and output side share them.
//!
//! Not here: what the gateway makes of them (planning lifts their tools, `toolbridge-core`).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::Tool;

/// A `tool_search_call` item: `execution` is `client` (the client runs the search, Codex's form)
/// or `server` (the server ran it); `arguments` is an object (`{"query": …}`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSearchCallItem {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execution: Option<String>,
    #[serde(default)]
    pub arguments: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A `tool_search_output` item: the tools a search found (namespaces whose members say
/// `defer_loading`, plain functions), for the rounds that follow.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSearchOutputItem {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execution: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    #[serde(default)]
    pub tools: Vec<Tool>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// An `additional_tools` input item: tools declared inside `input` (code-mode clients send no
/// `tools`), planned like declared ones.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AdditionalToolsItem {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    #[serde(default)]
    pub tools: Vec<Tool>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}
