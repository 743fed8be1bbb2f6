//! Tools the gateway runs itself: which built-ins and MCP servers it offers, to which routes,
//! under which limits; and the running of one call.
//!
//! MCP servers come from two places: the config (`[[gateway_tools.mcp]]`, connected once at
//! start; a server that cannot be reached is logged and left out) and, when
//! `request_mcp = true`, a request's own Responses `mcp` tool (`server_url`, connected for that
//! request only, through the SSRF-guarded client, listed as an `mcp_list_tools` item).
//!
//! The model sees exactly what it can call: a gateway tool is offered upstream as a function
//! only when the gateway can run it (built from the tool library's registry, whose schemas are
//! checked on every call). A tool's failure is a short structured result the model reads
//! (`{"error":{"code","message"}}`), never a failed request.

//!
//! The module is split by job: `file` holds `[gateway_tools]` as written and the two pieces
//! resolved from it outside [`GatewayTools::build`] (the search backend, the jq worker); `mcp`
//! one connected MCP server and its approval rule; `source` every tool as the tool library's
//! typed source (a request's calls are resolved there, by the tool loop); `standalone` Codex's standalone search
//! (`/v1/alpha/search`) over the same web tools; this file the tools of a running gateway,
//! what each request is offered, and the running of one call.

use std::sync::Arc;
use std::time::Duration;

use globset::{Glob, GlobSet, GlobSetBuilder};
use serde_json::{Value, json};
use toolbridge_core::plan::{GatewayOffer, GatewayTool, ToolCapabilities};
use toolbridge_tools::builtins::web::{SafeClient, SsrfPolicy};
use toolbridge_tools::builtins::{self, BuiltinsConfig, WebConfig};
use toolbridge_tools::mcp::{McpServerConfig, McpTransport};
use toolbridge_tools::{ToolContext, ToolRegistry};
use toolbridge_wire::responses::Tool;

mod deferred;
mod describe;
mod file;
pub(crate) mod images;
mod mcp;
mod source;
mod standalone;

pub(crate) use deferred::{Deferred, MAX_FOUND, MAX_SEARCHES};
pub(crate) use file::ToolsFile;
pub(crate) use mcp::McpServer;
pub(crate) use source::{Action, GatewaySource};
pub(crate) use standalone::{MAX_OPERATIONS, Refusal};

use file::{jq_worker, loop_limits, search_backend};
use mcp::Approval;

/// The server label of the gateway's built-in tools in `mcp_call` items.
pub(crate) const BUILTIN_SERVER: &str = "toolbridge";

/// The built-in that serves a declared `web_search` the provider lacks.
const WEB_SEARCH: &str = "web_search";

/// The limits of one response's tool loop.
#[derive(Debug, Clone, Copy)]
pub struct LoopLimits {
    pub max_steps: u32,
    pub time_budget: Duration,
    pub tool_timeout: Duration,
    pub max_output_bytes: usize,
}

/// The gateway's tools, built once at start.
#[derive(Debug)]
pub struct GatewayTools {
    registry: ToolRegistry,
    /// Configured MCP servers, and those connected at start.
    mcp_configs: Vec<McpServerConfig>,
    mcp: tokio::sync::OnceCell<Vec<McpServer>>,
    /// Every tool above as the typed source (built once the configured servers are connected).
    source: std::sync::OnceLock<Arc<GatewaySource>>,
    /// Serve requests' own `mcp` tools, through this guarded client.
    request_mcp: Option<(SafeClient, SsrfPolicy)>,
    /// The built-ins offered to every matching request.
    always: Vec<GatewayTool>,
    /// The search tool, offered when a declared `web_search` has no native form.
    search: Option<GatewayTool>,
    /// The images backend and its function, offered for a declared `image_generation`.
    pub(crate) images: Option<(Arc<images::ImagesBackend>, GatewayTool)>,
    /// The system note template (`{tools}`); `None`: no note.
    note: Option<String>,
    models: GlobSet,
    pub show: bool,
    pub limits: LoopLimits,
}

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

    /// The typed source of every tool this gateway runs for any request: the built-ins, the
    /// search, images and `tool_search` functions, the configured MCP servers' tools (those
    /// connected when it is first needed: [`Self::connect_configured`] builds it).
    fn source(&self) -> &Arc<GatewaySource> {
        self.source.get_or_init(|| {
            let mut tools = self.always.clone();
            tools.extend(self.search.clone());
            tools.extend(self.images.as_ref().map(|(_, tool)| tool.clone()));
            tools.push(deferred::offered());
            let builtins = tools.len();
            for server in self.mcp.get().into_iter().flatten() {
                tools.extend(server.offered().cloned());
            }
            let source = GatewaySource::build(&tools).or_else(|e| {
                // The MCP tools passed the same checks when their servers were listed.
                tracing::error!("the MCP tools cannot be typed tools; they are not offered: {e}");
                GatewaySource::build(&tools[..builtins])
            });
            match source {
                Ok(source) => Arc::new(source),
                Err(e) => {
                    tracing::error!("the gateway's tools cannot be typed tools: {e}");
                    Arc::new(GatewaySource::empty())
                }
            }
        })
    }

    /// The typed source of one request: [`Self::source`] and the tools of the request's own
    /// MCP servers (`listed`); a server whose tools cannot be typed tools is left out, with a
    /// log line.
    pub(crate) fn source_for(&self, listed: &[McpServer]) -> Arc<GatewaySource> {
        let shared = self.source();
        if listed.is_empty() {
            return Arc::clone(shared);
        }
        let mut source = Arc::clone(shared);
        for server in listed {
            match source.extend(server.offered()) {
                Ok(more) => source = Arc::new(more),
                Err(e) => tracing::warn!(
                    server = server.label,
                    "a request's MCP server's tools cannot be typed tools; they are not offered: {e}"
                ),
            }
        }
        source
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

    /// Whether a call to `name` of `server` waits for the client's approval.
    pub fn needs_approval(server: &str, name: &str, listed: &[McpServer]) -> bool {
        listed
            .iter()
            .find(|s| s.label == server)
            .is_some_and(|s| s.needs_approval(name))
    }

    /// What the gateway offers a request for `model` declaring `tools` to a provider with
    /// `caps`: the always-on built-ins and configured MCP servers' tools, the search tool when
    /// the request declares `web_search` (not refused with `external_web_access: false`) and the
    /// provider has none, and the tools of the request's own MCP servers it connected
    /// (`listed`).
    pub fn offer_for(
        &self,
        model: &str,
        tools: &[Tool],
        caps: &ToolCapabilities,
        listed: &[McpServer],
    ) -> GatewayOffer {
        if !self.models.is_match(model) || caps.responses_native {
            return GatewayOffer::default();
        }
        let mut offer = GatewayOffer {
            tools: self.always.clone(),
            ..GatewayOffer::default()
        };
        for server in self.mcp.get().into_iter().flatten() {
            offer.tools.extend(server.offered().cloned());
        }
        if caps.mcp.is_none() {
            for server in listed {
                offer.tools.extend(server.offered().cloned());
                offer.mcp_servers.push(server.label.clone());
            }
        }
        let wants_search = tools.iter().any(|t| match t {
            Tool::Other(map) => {
                map.get("type")
                    .and_then(Value::as_str)
                    .is_some_and(|k| k.starts_with("web_search"))
                    && map.get("external_web_access") != Some(&Value::Bool(false))
            }
            _ => false,
        });
        if let Some(search) = &self.search
            && wants_search
            && caps.web_search.is_none()
        {
            offer.web_search = true;
            if !offer.tools.iter().any(|t| t.name == WEB_SEARCH) {
                offer.tools.push(search.clone());
            }
        }
        let wants_image = tools
            .iter()
            .any(|t| matches!(t, Tool::Other(map) if images::is_image_tool(map)));
        if let Some((_, tool)) = &self.images
            && wants_image
        {
            offer.image_generation = true;
            offer.tools.push(tool.clone());
        }
        // The hosted `tool_search`: the gateway searches the deferred tools itself.
        let hosted_search = tools.iter().any(toolbridge_core::plan::is_hosted_search);
        if hosted_search && tools.iter().any(toolbridge_core::plan::is_deferred) {
            offer.tool_search = true;
            offer.tools.push(deferred::offered());
        }
        offer
    }

    /// True when the gateway shows `name` of `server` as `tool_search_call` and
    /// `tool_search_output` items (its search over the request's deferred tools).
    pub fn is_tool_search(server: &str, name: &str) -> bool {
        server == BUILTIN_SERVER && name == deferred::TOOL_SEARCH
    }

    /// Whether the gateway's search backend serves a declared `web_search` of `model`'s
    /// requests (when the provider has no search of its own).
    pub fn searches_for(&self, model: &str) -> bool {
        self.search.is_some() && self.models.is_match(model)
    }

    /// True when the gateway shows `name` of `server` as a `web_search_call` item.
    pub fn is_search(server: &str, name: &str) -> bool {
        server == BUILTIN_SERVER && name == WEB_SEARCH
    }

    /// True when the gateway shows `name` of `server` as an `image_generation_call` item.
    pub fn is_image(server: &str, name: &str) -> bool {
        server == BUILTIN_SERVER && name == images::IMAGE_TOOL
    }

    /// Runs a call the client approved (`name` of `server`, raw `arguments`), resolved by
    /// `source` as the loop's calls are; `Err` is the structured error the model reads.
    pub(crate) async fn run_approved(
        &self,
        source: &GatewaySource,
        (server, name, arguments): (&str, &str, &str),
        listed: &[McpServer],
    ) -> Result<String, String> {
        let Some(id) = source.id(server, name) else {
            return Err(unavailable(name));
        };
        let transport =
            toolbridge_tools::typed::create_model_transport("approved", source.registry().clone());
        match transport.resolve_text("", id, arguments) {
            Ok((
                _,
                Action::Run {
                    server,
                    name,
                    arguments,
                },
            )) => {
                self.execute(&server, &name, arguments, self.limits.tool_timeout, listed)
                    .await
            }
            Ok(_) => Err(unavailable(name)),
            Err(e) => Err(error_result(e.code(), &e.to_string())),
        }
    }

    /// Runs one resolved call (`arguments` checked by the typed source) within `timeout`.
    /// `Ok` is the result the model reads; `Err` is a short structured error, which the model
    /// reads too (the request goes on).
    pub(crate) async fn execute(
        &self,
        server: &str,
        name: &str,
        arguments: Value,
        timeout: Duration,
        listed: &[McpServer],
    ) -> Result<String, String> {
        let ctx = ToolContext::with_timeout(timeout, self.limits.max_output_bytes);
        if server == BUILTIN_SERVER && self.registry.contains(name) {
            return match self.registry.execute(name, arguments, &ctx).await {
                Ok(output) => Ok(output_text(output)),
                Err(e) => Err(error_result(e.code(), &e.to_string())),
            };
        }
        let mcp = self
            .mcp
            .get()
            .into_iter()
            .flatten()
            .chain(listed)
            .find(|s| s.label == server);
        match mcp {
            Some(server) => server.run(name, arguments, &ctx).await,
            None => Err(unavailable(name)),
        }
    }
}

fn output_text(output: Value) -> String {
    match output {
        Value::String(text) => text,
        other => other.to_string(),
    }
}

/// The result of a call the gateway cannot run (its server went away): what the model should
/// do instead.
fn unavailable(name: &str) -> String {
    error_result(
        "tool_unavailable",
        &format!(
            "the gateway cannot run `{name}` now; answer without it, or ask the user for what it would have provided"
        ),
    )
}

/// The structured error a model reads in place of a tool's result.
pub(crate) fn error_result(code: &str, message: &str) -> String {
    json!({"error": {"code": code, "message": message}}).to_string()
}

/// The tools of a running gateway, shared by every request.
pub(crate) type Shared = Option<Arc<GatewayTools>>;
