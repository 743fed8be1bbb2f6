//! MCP servers as tools of the library: stdio and streamable HTTP through the official Rust SDK
//! (`rmcp`), behind our own [`McpClient`] trait.
//!
//! - [`config`]: [`McpServerConfig`] (label, transport, `allowed_tools`, limits), serde.
//! - [`client`]: the [`McpClient`] trait and its result types ([`McpToolSpec`],
//!   [`McpCallResult`]).
//! - [`rmcp_client`]: [`RmcpClient`], the implementation over `rmcp` (the only module that
//!   names SDK types).
//! - [`McpTool`]: one server tool as a [`Tool`], so that it goes through the registry like a
//!   built-in: its input schema compiled at registration and every call validated before it is
//!   sent, deadline, cancellation and output limit enforced.
//!
//! [`connect`] opens a server, lists its tools and returns them as [`McpTool`]s sharing one
//! client. Tools that cannot be offered safely (a name that is not a valid registry name once
//! prefixed, a schema over the size limit or that does not compile, a duplicate) are skipped
//! with a warning, so one odd tool does not take the whole server down.
//!
//! Not here: approvals, the Responses `mcp` tool and the `mcp_call` items (the gateway's).

pub mod client;
pub mod config;
pub mod rmcp_client;

use std::collections::BTreeSet;
use std::fmt;
use std::sync::Arc;

use serde_json::Value;

use crate::registry::{compile_parameters, validate_name};
use crate::tool::{BoxFuture, Tool, ToolContext, ToolError, ToolOutput};

pub use client::{McpCallResult, McpClient, McpToolSpec};
pub use config::{McpLimits, McpServerConfig, McpTransport};
pub use rmcp_client::RmcpClient;

/// The separator between a server label and a tool name in registry names (`label__tool`).
pub const NAME_SEPARATOR: &str = "__";

/// Connects to the server, lists its tools, and returns those that pass `allowed_tools` and
/// the checks above, all sharing one [`RmcpClient`]. Connecting, the handshake and the listing
/// together are bounded by [`McpLimits::connect_timeout_ms`]; any failure before the listing
/// is [`ToolError::McpConnect`].
pub async fn connect(config: &McpServerConfig) -> Result<Vec<McpTool>, ToolError> {
    connect_with_http_client(config, None).await
}

/// [`connect`] with the HTTP client to use for streamable HTTP (see [`RmcpClient::connect`]).
pub async fn connect_with_http_client(
    config: &McpServerConfig,
    http: Option<reqwest::Client>,
) -> Result<Vec<McpTool>, ToolError> {
    let timeout = config.limits.connect_timeout();
    let deadline = tokio::time::Instant::now() + timeout;
    let client = Arc::new(RmcpClient::connect(config, http, deadline).await?);
    let remaining = deadline.saturating_duration_since(tokio::time::Instant::now());
    let ctx = ToolContext::with_timeout(remaining, config.limits.max_message_bytes);
    let specs = match client.list_tools(&ctx).await {
        Ok(specs) => specs,
        Err(ToolError::Timeout) => {
            client.close().await;
            return Err(ToolError::McpConnect {
                server: config.label.clone(),
                message: "listing the tools did not finish in time".to_owned(),
            });
        }
        Err(err) => {
            client.close().await;
            return Err(err);
        }
    };
    Ok(tools_from_specs(config, client, specs))
}

/// The [`McpTool`]s for a listing: `allowed_tools` applied, names formed (`label__tool` unless
/// `prefix_names` is off; characters outside `[A-Za-z0-9_-]` become `_`), descriptions cut,
/// schemas checked. Usable with any [`McpClient`].
pub fn tools_from_specs(
    config: &McpServerConfig,
    client: Arc<dyn McpClient>,
    specs: Vec<McpToolSpec>,
) -> Vec<McpTool> {
    let label = &config.label;
    let mut seen = BTreeSet::new();
    let mut tools = Vec::new();
    for spec in specs {
        if let Some(allowed) = &config.allowed_tools
            && !allowed.contains(&spec.name)
        {
            continue;
        }
        let name = registry_name(config, &spec.name);
        let skip = |reason: &str| {
            tracing::warn!(server = %label, tool = %spec.name, reason, "MCP tool skipped");
        };
        if validate_name(&name).is_err() {
            skip("its name is not a valid tool name once prefixed");
            continue;
        }
        if !seen.insert(name.clone()) {
            skip("another tool has the same name");
            continue;
        }
        let schema_size = serde_json::to_vec(&spec.input_schema).map_or(usize::MAX, |v| v.len());
        if schema_size > config.limits.max_schema_bytes {
            skip("its input schema is over the size limit");
            continue;
        }
        if compile_parameters(&name, &spec.input_schema).is_err() {
            skip("its input schema is not a valid object schema");
            continue;
        }
        tools.push(McpTool {
            name,
            server_label: label.clone(),
            tool_name: spec.name,
            description: cut(spec.description, config.limits.max_description_bytes),
            parameters: spec.input_schema,
            client: Arc::clone(&client),
        });
    }
    tools
}

/// `name` in the characters every provider takes in a tool name: outside `[A-Za-z0-9_-]`
/// becomes `_`.
pub fn safe_tool_name(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn registry_name(config: &McpServerConfig, tool: &str) -> String {
    let safe = safe_tool_name(tool);
    if config.prefix_names {
        format!("{}{NAME_SEPARATOR}{safe}", config.label)
    } else {
        safe
    }
}

fn cut(mut text: String, max: usize) -> String {
    if text.len() > max {
        let mut end = max;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    text
}

/// One MCP server tool as a [`Tool`]. The registry name may carry the server label; the
/// label and the tool's name on the server stay available for display (`mcp_call` items carry
/// `server_label` and `name`).
///
/// `execute` sends the (already validated) arguments and returns
/// [`McpCallResult::to_output`]; a result with `isError` is [`ToolError::McpTool`].
pub struct McpTool {
    name: String,
    server_label: String,
    tool_name: String,
    description: String,
    parameters: Value,
    client: Arc<dyn McpClient>,
}

impl fmt::Debug for McpTool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("McpTool")
            .field("name", &self.name)
            .field("server_label", &self.server_label)
            .field("tool_name", &self.tool_name)
            .finish_non_exhaustive()
    }
}

impl McpTool {
    /// The server's label.
    pub fn server_label(&self) -> &str {
        &self.server_label
    }

    /// The tool's own name on the server (what `tools/call` sends).
    pub fn tool_name(&self) -> &str {
        &self.tool_name
    }

    /// The connection this tool uses (shared by every tool of the server), e.g. to close it.
    pub fn client(&self) -> &Arc<dyn McpClient> {
        &self.client
    }
}

impl Tool for McpTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn parameters(&self) -> Value {
        self.parameters.clone()
    }

    fn capabilities(&self) -> &[&str] {
        &["mcp"]
    }

    fn execute<'a>(
        &'a self,
        args: Value,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(async move {
            let result = self.client.call_tool(&self.tool_name, args, ctx).await?;
            if result.is_error {
                return Err(ToolError::McpTool {
                    server: self.server_label.clone(),
                    tool: self.tool_name.clone(),
                    message: rmcp_client::clip(result.text),
                });
            }
            Ok(result.to_output())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(prefix: bool) -> McpServerConfig {
        McpServerConfig {
            label: "srv".to_owned(),
            transport: McpTransport::StreamableHttp {
                url: "http://127.0.0.1:1/mcp".to_owned(),
                headers: Default::default(),
                bearer_token: None,
            },
            allowed_tools: None,
            prefix_names: prefix,
            limits: McpLimits::default(),
        }
    }

    #[test]
    fn registry_names_are_prefixed_and_made_safe() {
        assert_eq!(
            registry_name(&config(true), "files/read.v2"),
            "srv__files_read_v2"
        );
        assert_eq!(registry_name(&config(false), "add"), "add");
    }

    #[test]
    fn descriptions_are_cut_at_a_character_boundary() {
        assert_eq!(cut("héllo".to_owned(), 2), "h");
        assert_eq!(cut("abc".to_owned(), 8), "abc");
    }
}
