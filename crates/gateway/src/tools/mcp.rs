//! One connected MCP server (its tools, by their name on the server, in a registry that checks
//! every call against the tool's schema) and the `require_approval` rule of a request's own
//! server.
//!
//! Not here: connecting the configured servers at start or a request's server per request, and
//! choosing which server serves a call (the parent module).

use std::sync::Arc;

use serde_json::{Value, json};
use toolbridge_core::plan::GatewayTool;
use toolbridge_tools::mcp::{McpServerConfig, McpTool};
use toolbridge_tools::{Tool as _, ToolContext, ToolRegistry};

use super::{error_result, output_text, unavailable};

/// One connected MCP server: its tools by their name on the server.
#[derive(Debug, Clone)]
pub struct McpServer {
    pub label: String,
    /// Which calls wait for the client's approval (a request's own server; configured servers
    /// are the operator's and never ask).
    approval: Approval,
    registry: ToolRegistry,
    /// (the offered tool, its registry name).
    pub(super) tools: Vec<(GatewayTool, String)>,
}

impl McpServer {
    /// Connects to `config`'s server and lists its tools (`client` for streamable HTTP).
    pub async fn connect(
        config: &McpServerConfig,
        client: Option<reqwest::Client>,
    ) -> Result<Self, String> {
        let tools = toolbridge_tools::mcp::connect_with_http_client(config, client)
            .await
            .map_err(|e| e.to_string())?;
        Self::from_tools(&config.label, tools)
    }

    pub(super) fn from_tools(label: &str, tools: Vec<McpTool>) -> Result<Self, String> {
        let offered = tools
            .iter()
            .map(|t| {
                (
                    GatewayTool {
                        server: label.to_owned(),
                        name: t.tool_name().to_owned(),
                        description: Some(t.description().to_owned()),
                        parameters: t.parameters(),
                    },
                    t.name().to_owned(),
                )
            })
            .collect();
        let registry = ToolRegistry::with_tools(
            tools
                .into_iter()
                .map(|t| Arc::new(t) as Arc<dyn toolbridge_tools::Tool>),
        )
        .map_err(|e| e.to_string())?;
        Ok(Self {
            label: label.to_owned(),
            approval: Approval::Never,
            registry,
            tools: offered,
        })
    }

    /// The same server, its calls waiting for approval as `approval` says.
    pub(super) fn with_approval(self, approval: Approval) -> Self {
        Self { approval, ..self }
    }

    /// Whether a call to `name` waits for the client's approval.
    pub fn needs_approval(&self, name: &str) -> bool {
        self.approval.needs(name)
    }

    /// The server's tools as an `mcp_list_tools` listing (`name`, `description`,
    /// `input_schema`).
    pub fn listing(&self) -> Vec<Value> {
        self.tools
            .iter()
            .map(|(t, _)| {
                json!({"name": t.name, "description": t.description, "input_schema": t.parameters})
            })
            .collect()
    }

    pub(super) fn offered(&self) -> impl Iterator<Item = &GatewayTool> {
        self.tools.iter().map(|(t, _)| t)
    }

    pub(super) async fn run(
        &self,
        name: &str,
        args: Value,
        ctx: &ToolContext,
    ) -> Result<String, String> {
        let Some((_, registered)) = self.tools.iter().find(|(t, _)| t.name == name) else {
            return Err(unavailable(name));
        };
        match self.registry.execute(registered, args, ctx).await {
            Ok(output) => Ok(output_text(output)),
            Err(e) => Err(error_result(e.code(), &e.to_string())),
        }
    }
}

/// A Responses `mcp` tool's `require_approval`: `"always"` (OpenAI's default), `"never"`, or
/// `{"always": {"tool_names": […]}, "never": {"tool_names": […]}}` (names not listed ask).
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Approval {
    Never,
    Always,
    Listed {
        always: Vec<String>,
        never: Vec<String>,
    },
}

impl Approval {
    pub(super) fn parse(value: Option<&Value>) -> Self {
        let names = |v: &Value, key: &str| -> Vec<String> {
            v[key]["tool_names"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|n| n.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default()
        };
        match value {
            Some(Value::String(s)) if s == "never" => Self::Never,
            Some(v @ Value::Object(_)) => Self::Listed {
                always: names(v, "always"),
                never: names(v, "never"),
            },
            _ => Self::Always,
        }
    }

    fn needs(&self, name: &str) -> bool {
        match self {
            Self::Never => false,
            Self::Always => true,
            Self::Listed { always, never } => {
                always.iter().any(|n| n == name) || !never.iter().any(|n| n == name)
            }
        }
    }
}
