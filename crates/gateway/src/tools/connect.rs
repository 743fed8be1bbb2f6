//! Connecting MCP servers: the configured ones once at start (a server that cannot be reached
//! is logged and left out), and a request's own `mcp` tool through the SSRF-guarded client.
//!
//! Not here: one connected server and its approval rule (`mcp`), what a request is offered
//! (the parent).

use serde_json::Value;
use toolbridge_tools::mcp::{McpServerConfig, McpTransport};

use super::mcp::Approval;
use super::{GatewayTools, McpServer};

impl GatewayTools {
    /// Connects the configured MCP servers (once, at start). A server that cannot be reached
    /// is logged and left out: the gateway serves without its tools.
    pub async fn connect_configured(&self) {
        self.mcp
            .get_or_init(|| async {
                let mut servers = Vec::new();
                for config in &self.mcp_configs {
                    match McpServer::connect(config, None).await {
                        Ok(server) => {
                            tracing::info!(
                                server = server.label,
                                tools = server.tools.len(),
                                "connected to the MCP server"
                            );
                            servers.push(server);
                        }
                        Err(e) => tracing::warn!(
                            server = config.label,
                            "the MCP server cannot be reached; its tools are not offered: {e}"
                        ),
                    }
                }
                servers
            })
            .await;
        self.source();
    }

    /// Connects a request's own `mcp` tool (`server_label`, `server_url`, `headers`,
    /// `authorization`, `allowed_tools`), when the gateway serves them: `None` when it does
    /// not; else the server or why it could not be listed (shown in `mcp_list_tools`).
    pub async fn connect_request_tool(
        &self,
        tool: &serde_json::Map<String, Value>,
    ) -> Option<Result<McpServer, String>> {
        let (client, policy) = self.request_mcp.as_ref()?;
        let label = tool.get("server_label")?.as_str()?.to_owned();
        let url = tool.get("server_url")?.as_str()?.to_owned();
        let checked = url::Url::parse(&url)
            .map_err(|e| format!("`{url}` is not a URL: {e}"))
            .and_then(|u| {
                policy
                    .check_url(&u)
                    .map_err(|r| format!("`{url}` may not be reached: {r}"))
            });
        if let Err(e) = checked {
            return Some(Err(e));
        }
        let headers = tool
            .get("headers")
            .and_then(Value::as_object)
            .map(|h| {
                h.iter()
                    .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                    .collect()
            })
            .unwrap_or_default();
        let allowed_tools =
            match tool.get("allowed_tools") {
                Some(Value::Array(names)) => Some(
                    names
                        .iter()
                        .filter_map(|n| n.as_str().map(str::to_owned))
                        .collect(),
                ),
                Some(Value::Object(filter)) => filter
                    .get("tool_names")
                    .and_then(Value::as_array)
                    .map(|names| {
                        names
                            .iter()
                            .filter_map(|n| n.as_str().map(str::to_owned))
                            .collect()
                    }),
                _ => None,
            };
        let config = McpServerConfig {
            label,
            transport: McpTransport::StreamableHttp {
                url,
                headers,
                bearer_token: tool
                    .get("authorization")
                    .and_then(Value::as_str)
                    .map(|a| a.trim_start_matches("Bearer ").to_owned()),
            },
            allowed_tools,
            prefix_names: true,
            limits: toolbridge_tools::mcp::McpLimits::default(),
        };
        if let Err(e) = config.validate() {
            return Some(Err(e.to_string()));
        }
        let approval = Approval::parse(tool.get("require_approval"));
        Some(
            McpServer::connect(&config, Some(client.http_client()))
                .await
                .map(|server| server.with_approval(approval)),
        )
    }
}
