//! [`GatewayTools::build`]: the gateway's tools from `[gateway_tools]` as written, checked once at
//! start: the built-ins offered, the model globs, the MCP servers' configs, the request MCP
//! client, the images backend, the loop's limits and the system note.
//!
//! Not here: connecting the MCP servers (`connect`), what a request is offered (the parent).

use std::sync::Arc;
use std::time::Duration;

use globset::{Glob, GlobSetBuilder};
use toolbridge_core::plan::GatewayTool;
use toolbridge_tools::ToolRegistry;
use toolbridge_tools::builtins::web::{SafeClient, SsrfPolicy};
use toolbridge_tools::builtins::{self, BuiltinsConfig, WebConfig};

use super::file::{jq_worker, loop_limits, search_backend};
use super::{BUILTIN_SERVER, GatewayTools, ToolsFile, WEB_SEARCH, describe, images};

impl GatewayTools {
    /// Builds the tools `file` names; `env` reads key variables. Fails on an unknown built-in, a
    /// bad glob, a sandbox that cannot be opened or a bad search backend.
    pub fn build(file: &ToolsFile, env: &dyn Fn(&str) -> Option<String>) -> Result<Self, String> {
        let search = match &file.web_search {
            Some(s) => Some(search_backend(s, env)?),
            None => None,
        };
        let mut web = WebConfig::default();
        if let Some(s) = &file.web_search {
            web.policy.allow_loopback_ports = s.allow_loopback_ports.clone();
        }
        web.search = search;
        let config = BuiltinsConfig {
            sandbox_dir: file.sandbox_dir.clone(),
            web,
            jq_isolation: if file.jq_isolation.unwrap_or(true) {
                Some(jq_worker()?)
            } else {
                None
            },
        };
        let tools = builtins::configured(&config)
            .map_err(|e| format!("gateway_tools: the built-in tools cannot be built: {e}"))?;
        let registry = ToolRegistry::with_tools(tools)
            .map_err(|e| format!("gateway_tools: the built-in tools cannot be registered: {e}"))?;
        let offered = |name: &str| {
            registry
                .list()
                .into_iter()
                .find(|t| t.name == name)
                .map(|t| GatewayTool {
                    server: BUILTIN_SERVER.to_owned(),
                    name: t.name,
                    description: Some(t.description),
                    parameters: t.parameters,
                })
        };
        let mut always = Vec::new();
        for name in &file.builtins {
            if name == "*" {
                always = registry.names().filter_map(offered).collect();
                break;
            }
            always.push(offered(name).ok_or_else(|| {
                format!(
                    "gateway_tools.builtins: `{name}` is not a built-in tool here (available: {})",
                    registry.names().collect::<Vec<_>>().join(", ")
                )
            })?);
        }
        let mut globs = GlobSetBuilder::new();
        let patterns = if file.models.is_empty() {
            vec!["*".to_owned()]
        } else {
            file.models.clone()
        };
        for pattern in &patterns {
            globs.add(
                Glob::new(pattern)
                    .map_err(|e| format!("gateway_tools.models: `{pattern}`: {e}"))?,
            );
        }
        let models = globs
            .build()
            .map_err(|e| format!("gateway_tools.models: {e}"))?;
        let secs = |v: Option<u64>, d: u64| Duration::from_secs(v.unwrap_or(d));
        for server in &file.mcp {
            server
                .validate()
                .map_err(|e| format!("gateway_tools.mcp `{}`: {e}", server.label))?;
            if server.label == BUILTIN_SERVER {
                return Err(format!(
                    "gateway_tools.mcp: the label `{BUILTIN_SERVER}` is the built-ins' own"
                ));
            }
        }
        let request_mcp = if file.request_mcp.unwrap_or(false) {
            let policy = SsrfPolicy {
                allow_loopback_ports: file.mcp_allow_loopback_ports.clone(),
                timeout: secs(file.tool_timeout_secs, 30),
                ..SsrfPolicy::default()
            };
            let client = SafeClient::new(policy.clone())
                .map_err(|e| format!("gateway_tools.request_mcp: {e}"))?;
            Some((client, policy))
        } else {
            None
        };
        let images = match &file.images {
            Some(f) => {
                let backend = images::ImagesBackend::build(f, env)?;
                let tool = images::offered(&backend.model);
                Some((Arc::new(backend), tool))
            }
            None => None,
        };
        let limits = loop_limits(file, images.as_ref().map(|(b, _)| b.timeout))?;
        let note = match &file.system_note {
            Some(text) if text.trim().is_empty() => None,
            Some(text) => Some(text.clone()),
            None => Some(describe::DEFAULT_NOTE.to_owned()),
        };
        Ok(Self {
            search: offered(WEB_SEARCH),
            images,
            note,
            mcp_configs: file.mcp.clone(),
            mcp: tokio::sync::OnceCell::new(),
            source: std::sync::OnceLock::new(),
            request_mcp,
            registry,
            always,
            models,
            show: file.show.unwrap_or(true),
            limits,
        })
    }
}
