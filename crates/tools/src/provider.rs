//! [`ToolProvider`]: the interface the planner plans over — list the tools, look up one tool's
//! capabilities and category — and its implementations for sources that are not a
//! [`ToolRegistry`]: an MCP server's listing ([`McpToolSet`]) and the function tools a request
//! declares ([`DeclaredTools`]). The registry implements it here too; the sealed typed source
//! implements it in [`crate::typed`].
//!
//! A source whose tools carry no capability tags (MCP tools, declared function tools) gets them
//! inferred: the default intent rules run over the tool's name (with `_` and `-` read as spaces)
//! and description, so `sha256_hex` / "Computes a digest" is a `hash` tool. The inference is
//! deterministic and documented, never a guess at run time.
//!
//! This module executes nothing: only a registry (see [`ToolProvider::registry`]) runs tools.

use std::sync::{Arc, OnceLock};

use serde_json::Value;

use crate::mcp::McpToolSpec;
use crate::planner::RuleBasedAnalyzer;
use crate::registry::{ToolInfo, ToolRegistry};
use crate::suggest::close_matches;
use crate::tool::ToolError;

/// The most tools a [`DeclaredTools`] or [`McpToolSet`] built from JSON accepts.
pub const MAX_PROVIDED_TOOLS: usize = 1024;

/// A source of tools the planner can plan over.
pub trait ToolProvider: Send + Sync {
    /// Every tool (name, description, parameter schema, capability tags, category), sorted by
    /// name.
    fn list_tools(&self) -> Vec<ToolInfo>;

    /// One tool, when the provider has it.
    fn describe(&self, name: &str) -> Option<ToolInfo> {
        self.list_tools().into_iter().find(|t| t.name == name)
    }

    /// The capability tags of tool `name` (the design's `GetToolCapabilities`); an unknown name
    /// is [`ToolError::UnknownTool`] with close matches.
    fn capabilities(&self, name: &str) -> Result<Vec<String>, ToolError> {
        self.describe(name)
            .map(|tool| tool.capabilities)
            .ok_or_else(|| unknown_tool(self, name))
    }

    /// The category of tool `name`, when it has one.
    fn category(&self, name: &str) -> Option<String> {
        self.describe(name).and_then(|tool| tool.category)
    }

    /// The registry that executes these tools, when the provider has one. Plans over a provider
    /// without one can be made and validated, but running them needs a registry holding the
    /// same tools ([`crate::planner::PlannerBuilder::executor_registry`]).
    fn registry(&self) -> Option<Arc<ToolRegistry>> {
        None
    }
}

/// What [`crate::planner::Planner::builder`] accepts: an `Arc` of any provider, or an
/// `Arc<dyn ToolProvider>`.
pub trait IntoToolProvider {
    /// The provider as a shared trait object.
    fn into_provider(self) -> Arc<dyn ToolProvider>;
}

impl<T: ToolProvider + 'static> IntoToolProvider for Arc<T> {
    fn into_provider(self) -> Arc<dyn ToolProvider> {
        self
    }
}

impl IntoToolProvider for Arc<dyn ToolProvider> {
    fn into_provider(self) -> Arc<dyn ToolProvider> {
        self
    }
}

/// [`ToolError::UnknownTool`] for `name`, with close matches among the provider's tools.
pub fn unknown_tool<P: ToolProvider + ?Sized>(provider: &P, name: &str) -> ToolError {
    let names: Vec<String> = provider.list_tools().into_iter().map(|t| t.name).collect();
    ToolError::UnknownTool {
        name: name.to_owned(),
        suggestions: close_matches(name, names.iter().map(String::as_str)),
    }
}

impl ToolProvider for ToolRegistry {
    fn list_tools(&self) -> Vec<ToolInfo> {
        self.list()
    }

    fn describe(&self, name: &str) -> Option<ToolInfo> {
        let tool = self.get(name)?;
        Some(ToolInfo {
            name: name.to_owned(),
            description: tool.description().to_owned(),
            parameters: tool.parameters(),
            capabilities: tool
                .capabilities()
                .iter()
                .map(|c| (*c).to_owned())
                .collect(),
            category: tool.category().map(str::to_owned),
        })
    }

    fn registry(&self) -> Option<Arc<ToolRegistry>> {
        // Entries are `Arc`s: the copy shares every tool and compiled validator.
        Some(Arc::new(self.clone()))
    }
}

/// The capability tags the default intent rules find in a tool's name and description, in rule
/// order.
pub fn infer_capabilities(name: &str, description: &str) -> Vec<String> {
    static ANALYZER: OnceLock<RuleBasedAnalyzer> = OnceLock::new();
    let analyzer = ANALYZER.get_or_init(RuleBasedAnalyzer::with_default_rules);
    let text = format!("{} {description}", name.replace(['_', '-'], " "));
    let mut tags: Vec<String> = analyzer
        .matches(&text)
        .into_iter()
        .map(|m| m.capability)
        .collect();
    tags.dedup();
    tags
}

fn info(name: &str, description: &str, parameters: &Value, category: Option<&str>) -> ToolInfo {
    ToolInfo {
        name: name.to_owned(),
        description: description.to_owned(),
        parameters: parameters.clone(),
        capabilities: infer_capabilities(name, description),
        category: category.map(str::to_owned),
    }
}

/// The tools one MCP server lists (`tools/list`), as plain descriptions: name, description and
/// input schema. The server's label is every tool's category.
#[derive(Debug, Clone, PartialEq)]
pub struct McpToolSet {
    /// The server's label.
    pub server: String,
    /// The tools, as the server names them.
    pub tools: Vec<McpToolSpec>,
}

impl McpToolSet {
    /// A set from already-parsed specs.
    pub fn new(server: impl Into<String>, tools: Vec<McpToolSpec>) -> Self {
        Self {
            server: server.into(),
            tools,
        }
    }

    /// A set from a `tools/list` result (`{"tools": [{"name", "description", "inputSchema"}]}`)
    /// or its bare array. A tool without a string `name` is an `invalid_arguments` error naming
    /// its pointer; a missing schema reads as an empty object schema; unknown fields are ignored.
    pub fn from_listing(server: impl Into<String>, listing: &Value) -> Result<Self, ToolError> {
        let (tools, base) = match listing.get("tools") {
            Some(tools) => (tools, "/tools"),
            None => (listing, ""),
        };
        let items = array_of(tools, base)?;
        let mut specs = Vec::with_capacity(items.len());
        for (index, tool) in items.iter().enumerate() {
            let at = format!("{base}/{index}");
            let name = string_at(tool, "name", &at)?;
            let schema = tool
                .get("inputSchema")
                .or_else(|| tool.get("input_schema"))
                .cloned()
                .unwrap_or_else(|| serde_json::json!({"type": "object"}));
            specs.push(McpToolSpec {
                name,
                description: text_or_empty(tool.get("description")),
                input_schema: schema,
            });
        }
        Ok(Self::new(server, specs))
    }
}

impl ToolProvider for McpToolSet {
    fn list_tools(&self) -> Vec<ToolInfo> {
        let mut tools: Vec<ToolInfo> = self
            .tools
            .iter()
            .map(|t| info(&t.name, &t.description, &t.input_schema, Some(&self.server)))
            .collect();
        tools.sort_by(|a, b| a.name.cmp(&b.name));
        tools
    }
}

/// The function tools a request declares, in the Responses shape (`{"type": "function",
/// "name", "description", "parameters"}`) or the Chat shape (`{"type": "function",
/// "function": {…}}`). Tools of other types are kept out of planning (they are not functions)
/// and left to whoever forwards the request.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DeclaredTools {
    tools: Vec<ToolInfo>,
}

impl DeclaredTools {
    /// Reads a request's `tools` array. A function tool without a string `name` is an
    /// `invalid_arguments` error with its pointer (`/tools/2/name`); more than
    /// [`MAX_PROVIDED_TOOLS`] tools is `limit_exceeded`. An optional string `category` is kept.
    pub fn from_request_tools(tools: &Value) -> Result<Self, ToolError> {
        let items = array_of(tools, "/tools")?;
        let mut out = Vec::new();
        for (index, tool) in items.iter().enumerate() {
            if tool.get("type").and_then(Value::as_str) != Some("function") {
                continue;
            }
            let (body, at) = match tool.get("function") {
                Some(function) => (function, format!("/tools/{index}/function")),
                None => (tool, format!("/tools/{index}")),
            };
            let name = string_at(body, "name", &at)?;
            let parameters = body
                .get("parameters")
                .cloned()
                .unwrap_or_else(|| serde_json::json!({"type": "object"}));
            let category = body.get("category").and_then(Value::as_str);
            let description = text_or_empty(body.get("description"));
            out.push(info(&name, &description, &parameters, category));
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(Self { tools: out })
    }
}

impl ToolProvider for DeclaredTools {
    fn list_tools(&self) -> Vec<ToolInfo> {
        self.tools.clone()
    }
}

fn array_of<'v>(value: &'v Value, at: &str) -> Result<&'v Vec<Value>, ToolError> {
    let items = value
        .as_array()
        .ok_or_else(|| ToolError::InvalidArguments {
            path: if at.is_empty() { "/".into() } else { at.into() },
            message: "expected an array of tools".to_owned(),
        })?;
    if items.len() > MAX_PROVIDED_TOOLS {
        return Err(ToolError::LimitExceeded(format!(
            "{} tools; the limit is {MAX_PROVIDED_TOOLS}",
            items.len()
        )));
    }
    Ok(items)
}

fn string_at(value: &Value, field: &str, at: &str) -> Result<String, ToolError> {
    value
        .get(field)
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| ToolError::InvalidArguments {
            path: format!("{at}/{field}"),
            message: format!("`{field}` must be a string"),
        })
}

fn text_or_empty(value: Option<&Value>) -> String {
    value.and_then(Value::as_str).unwrap_or_default().to_owned()
}
