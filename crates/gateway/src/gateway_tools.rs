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

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use globset::{Glob, GlobSet, GlobSetBuilder};
use serde::Deserialize;
use serde_json::{Value, json};
use toolbridge_core::plan::{GatewayOffer, GatewayTool, ToolCapabilities};
use toolbridge_tools::builtins::web::{SafeClient, SsrfPolicy};
use toolbridge_tools::builtins::{self, BuiltinsConfig, JqIsolation, SearchBackend, WebConfig};
use toolbridge_tools::mcp::{McpServerConfig, McpTool, McpTransport};
use toolbridge_tools::{Tool as _, ToolContext, ToolRegistry};
use toolbridge_wire::responses::Tool;

/// The server label of the gateway's built-in tools in `mcp_call` items.
pub const BUILTIN_SERVER: &str = "toolbridge";

/// The built-in that serves a declared `web_search` the provider lacks.
const WEB_SEARCH: &str = "web_search";

/// `[gateway_tools]` as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolsFile {
    /// Built-in tools offered to every request of the matching models (`calculator`, `hash`,
    /// `strings`, `ids`, `regex`, `json`, `files`, `pdf`, `web_fetch`, `web_search`), or `*`.
    #[serde(default)]
    pub builtins: Vec<String>,
    /// Client model names (globs) whose requests get the gateway's tools. Default: all.
    #[serde(default)]
    pub models: Vec<String>,
    /// Show gateway calls as hosted items (`mcp_call`, `web_search_call`). Default true.
    pub show: Option<bool>,
    /// The most upstream rounds the loop makes after the first. Default 8.
    pub max_steps: Option<u32>,
    /// The most seconds the loop may take in all. Default 120.
    pub time_budget_secs: Option<u64>,
    /// The most seconds one call may take. Default 30.
    pub tool_timeout_secs: Option<u64>,
    /// The largest result of one call, in bytes. Default 64 KiB.
    pub max_output_bytes: Option<usize>,
    /// The directory `files` and `pdf` are confined to.
    pub sandbox_dir: Option<PathBuf>,
    /// Run jq queries of the `json` tool in a worker process. Default true.
    pub jq_isolation: Option<bool>,
    /// The search backend serving `web_search` (declared by the client, or listed above).
    pub web_search: Option<SearchFile>,
    /// MCP servers whose tools every matching request gets (shown under their label).
    #[serde(default)]
    pub mcp: Vec<McpServerConfig>,
    /// Serve a request's own `mcp` tool (`server_url`) when the provider has no MCP of its own.
    /// Default false: the URL comes from the client.
    pub request_mcp: Option<bool>,
    /// Loopback ports a request's MCP server may be on (tests, a local server). Empty by default.
    #[serde(default)]
    pub mcp_allow_loopback_ports: Vec<u16>,
}

/// `[gateway_tools.web_search]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SearchFile {
    /// `searxng`, `brave` or `tavily`.
    pub backend: String,
    pub url: String,
    /// The environment variable holding the backend's key (Brave, Tavily).
    pub api_key_env: Option<String>,
    /// Loopback ports the web tools may reach: for a search backend on this machine (tests, a
    /// local SearXNG). Empty by default; model-supplied URLs are checked like any other.
    #[serde(default)]
    pub allow_loopback_ports: Vec<u16>,
}

/// The limits of one response's tool loop.
#[derive(Debug, Clone, Copy)]
pub struct LoopLimits {
    pub max_steps: u32,
    pub time_budget: Duration,
    pub tool_timeout: Duration,
    pub max_output_bytes: usize,
}

/// One connected MCP server: its tools by their name on the server.
#[derive(Debug, Clone)]
pub struct McpServer {
    pub label: String,
    /// Which calls wait for the client's approval (a request's own server; configured servers
    /// are the operator's and never ask).
    approval: Approval,
    registry: ToolRegistry,
    /// (the offered tool, its registry name).
    tools: Vec<(GatewayTool, String)>,
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

    fn from_tools(label: &str, tools: Vec<McpTool>) -> Result<Self, String> {
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

    fn offered(&self) -> impl Iterator<Item = &GatewayTool> {
        self.tools.iter().map(|(t, _)| t)
    }

    async fn run(&self, name: &str, args: Value, ctx: &ToolContext) -> Result<String, String> {
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
enum Approval {
    Never,
    Always,
    Listed {
        always: Vec<String>,
        never: Vec<String>,
    },
}

impl Approval {
    fn parse(value: Option<&Value>) -> Self {
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

/// The gateway's tools, built once at start.
#[derive(Debug)]
pub struct GatewayTools {
    registry: ToolRegistry,
    /// Configured MCP servers, and those connected at start.
    mcp_configs: Vec<McpServerConfig>,
    mcp: tokio::sync::OnceCell<Vec<McpServer>>,
    /// Serve requests' own `mcp` tools, through this guarded client.
    request_mcp: Option<(SafeClient, SsrfPolicy)>,
    /// The built-ins offered to every matching request.
    always: Vec<GatewayTool>,
    /// The search tool, offered when a declared `web_search` has no native form.
    search: Option<GatewayTool>,
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
        Ok(Self {
            search: offered(WEB_SEARCH),
            mcp_configs: file.mcp.clone(),
            mcp: tokio::sync::OnceCell::new(),
            request_mcp,
            registry,
            always,
            models,
            show: file.show.unwrap_or(true),
            limits: LoopLimits {
                max_steps: file.max_steps.unwrap_or(8),
                time_budget: secs(file.time_budget_secs, 120),
                tool_timeout: secs(file.tool_timeout_secs, 30),
                max_output_bytes: file.max_output_bytes.unwrap_or(64 * 1024),
            },
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
                .map(|server| McpServer { approval, ..server }),
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
        offer
    }

    /// True when the gateway shows `name` of `server` as a `web_search_call` item.
    pub fn is_search(server: &str, name: &str) -> bool {
        server == BUILTIN_SERVER && name == WEB_SEARCH
    }

    /// Runs one call within `timeout`. `Ok` is the result the model reads; `Err` is a short
    /// structured error, which the model reads too (the request goes on).
    pub async fn run(
        &self,
        server: &str,
        name: &str,
        arguments: &str,
        timeout: Duration,
        listed: &[McpServer],
    ) -> Result<String, String> {
        let args: Value = match serde_json::from_str(arguments.trim()) {
            Ok(v) => v,
            Err(_) if arguments.trim().is_empty() => json!({}),
            Err(e) => {
                return Err(error_result(
                    "invalid_arguments",
                    &format!(
                        "the arguments are not JSON ({e}); call the tool again with a JSON object"
                    ),
                ));
            }
        };
        let ctx = ToolContext::with_timeout(timeout, self.limits.max_output_bytes);
        if server == BUILTIN_SERVER && self.registry.contains(name) {
            return match self.registry.execute(name, args, &ctx).await {
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
            Some(server) => server.run(name, args, &ctx).await,
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

/// How the `json` tool runs jq out of process: this binary's `jq-worker` subcommand, or, from
/// a program that is not `toolbridge` (a test binary, an embedding), a `toolbridge` (with
/// `jq-worker`) or `toolbridge-jq-worker` binary beside it or one folder up (a test binary lives
/// in `target/<profile>/deps`, the `toolbridge` binary cargo builds for it in `target/<profile>`).
fn jq_worker() -> Result<JqIsolation, String> {
    let exe = std::env::current_exe()
        .map_err(|e| format!("gateway_tools: the running program cannot be found: {e}"))?;
    let is_gateway = exe
        .file_stem()
        .and_then(|s| s.to_str())
        .is_some_and(|s| s == "toolbridge");
    if is_gateway {
        return Ok(JqIsolation::new(exe).with_args(["jq-worker"]));
    }
    let beside = |dir: &std::path::Path| {
        let gateway = dir.join("toolbridge");
        let worker = dir.join("toolbridge-jq-worker");
        if gateway.is_file() {
            Some(JqIsolation::new(gateway).with_args(["jq-worker"]))
        } else if worker.is_file() {
            Some(JqIsolation::new(worker))
        } else {
            None
        }
    };
    let dir = exe.parent();
    dir.and_then(beside)
        .or_else(|| dir.and_then(|d| d.parent()).and_then(beside))
        .ok_or_else(|| {
            "gateway_tools.jq_isolation: no jq worker beside this program (toolbridge or toolbridge-jq-worker); set jq_isolation = false to run jq in process".to_owned()
        })
}

/// The structured error a model reads in place of a tool's result.
pub fn error_result(code: &str, message: &str) -> String {
    json!({"error": {"code": code, "message": message}}).to_string()
}

fn search_backend(
    file: &SearchFile,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<SearchBackend, String> {
    let base_url = url::Url::parse(&file.url)
        .map_err(|e| format!("gateway_tools.web_search.url: `{}`: {e}", file.url))?;
    let key = || {
        file.api_key_env
            .as_deref()
            .and_then(env)
            .filter(|k| !k.is_empty())
            .ok_or_else(|| {
                format!(
                    "gateway_tools.web_search.api_key_env: the `{}` backend needs a key",
                    file.backend
                )
            })
    };
    match file.backend.as_str() {
        "searxng" => Ok(SearchBackend::Searxng { base_url }),
        "brave" => Ok(SearchBackend::Brave {
            base_url,
            api_key: key()?,
        }),
        "tavily" => Ok(SearchBackend::Tavily {
            base_url,
            api_key: key()?,
        }),
        other => Err(format!(
            "gateway_tools.web_search.backend: `{other}` is not one of searxng, brave, tavily"
        )),
    }
}

/// The tools of a running gateway, shared by every request.
pub type Shared = Option<Arc<GatewayTools>>;
