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
        let config = builtins_config(file, env)?;
        let tools = builtins::configured(&config)
            .map_err(|e| format!("gateway_tools: the built-in tools cannot be built: {e}"))?;
        let registry = ToolRegistry::with_tools(tools)
            .map_err(|e| format!("gateway_tools: the built-in tools cannot be registered: {e}"))?;
        let always = always_offered(&registry, file)?;
        let models = model_globs(file)?;
        check_mcp(file)?;
        let request_mcp = request_mcp_client(file)?;
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
            search: offered(&registry, WEB_SEARCH),
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

/// The built-ins' configuration from `file`: the sandbox, the web policy and search backend, and
/// the jq worker unless isolation is turned off.
fn builtins_config(
    file: &ToolsFile,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<BuiltinsConfig, String> {
    let search = match &file.web_search {
        Some(s) => Some(search_backend(s, env)?),
        None => None,
    };
    let mut web = WebConfig::default();
    if let Some(s) = &file.web_search {
        web.policy.allow_loopback_ports = s.allow_loopback_ports.clone();
    }
    web.search = search;
    Ok(BuiltinsConfig {
        sandbox_dir: file.sandbox_dir.clone(),
        web,
        jq_isolation: if file.jq_isolation.unwrap_or(true) {
            Some(jq_worker()?)
        } else {
            None
        },
    })
}

/// The built-in tool `name` of `registry` as offered to a model, if there is one.
fn offered(registry: &ToolRegistry, name: &str) -> Option<GatewayTool> {
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
}

/// The built-ins `file` offers on every request (`*` for all of them). Fails on a name that is
/// not a built-in here.
fn always_offered(registry: &ToolRegistry, file: &ToolsFile) -> Result<Vec<GatewayTool>, String> {
    let mut always = Vec::new();
    for name in &file.builtins {
        if name == "*" {
            always = registry
                .names()
                .filter_map(|name| offered(registry, name))
                .collect();
            break;
        }
        always.push(offered(registry, name).ok_or_else(|| {
            format!(
                "gateway_tools.builtins: `{name}` is not a built-in tool here (available: {})",
                registry.names().collect::<Vec<_>>().join(", ")
            )
        })?);
    }
    Ok(always)
}

/// The globs of the models the tools are offered to (every model when `file` names none).
fn model_globs(file: &ToolsFile) -> Result<globset::GlobSet, String> {
    let mut globs = GlobSetBuilder::new();
    let patterns = if file.models.is_empty() {
        vec!["*".to_owned()]
    } else {
        file.models.clone()
    };
    for pattern in &patterns {
        globs.add(
            Glob::new(pattern).map_err(|e| format!("gateway_tools.models: `{pattern}`: {e}"))?,
        );
    }
    globs
        .build()
        .map_err(|e| format!("gateway_tools.models: {e}"))
}

/// Checks each MCP server's config, and that none takes the built-ins' own label.
fn check_mcp(file: &ToolsFile) -> Result<(), String> {
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
    Ok(())
}

/// The client for a request's own MCP servers and its policy, when `request_mcp` is on.
fn request_mcp_client(file: &ToolsFile) -> Result<Option<(SafeClient, SsrfPolicy)>, String> {
    if !file.request_mcp.unwrap_or(false) {
        return Ok(None);
    }
    let secs = |v: Option<u64>, d: u64| Duration::from_secs(v.unwrap_or(d));
    let policy = SsrfPolicy {
        allow_loopback_ports: file.mcp_allow_loopback_ports.clone(),
        timeout: secs(file.tool_timeout_secs, 30),
        ..SsrfPolicy::default()
    };
    let client =
        SafeClient::new(policy.clone()).map_err(|e| format!("gateway_tools.request_mcp: {e}"))?;
    Ok(Some((client, policy)))
}
