//! Tools the gateway runs itself: which built-ins (and, later, MCP servers) it offers, to which
//! routes, under which limits; and the running of one call.
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
use toolbridge_tools::builtins::{self, BuiltinsConfig, JqIsolation, SearchBackend, WebConfig};
use toolbridge_tools::{ToolContext, ToolRegistry};
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

/// The gateway's tools, built once at start.
#[derive(Debug)]
pub struct GatewayTools {
    registry: ToolRegistry,
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
        Ok(Self {
            search: offered(WEB_SEARCH),
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

    /// What the gateway offers a request for `model` declaring `tools` to a provider with
    /// `caps`: the always-on built-ins, and the search tool when the request declares
    /// `web_search` (not refused with `external_web_access: false`) and the provider has none.
    pub fn offer_for(&self, model: &str, tools: &[Tool], caps: &ToolCapabilities) -> GatewayOffer {
        if !self.models.is_match(model) || caps.responses_native {
            return GatewayOffer::default();
        }
        let mut offer = GatewayOffer {
            tools: self.always.clone(),
            ..GatewayOffer::default()
        };
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
    ) -> Result<String, String> {
        if server != BUILTIN_SERVER || !self.registry.contains(name) {
            return Err(error_result(
                "tool_unavailable",
                &format!(
                    "the gateway cannot run `{name}` now; answer without it, or ask the user for what it would have provided"
                ),
            ));
        }
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
        match self.registry.execute(name, args, &ctx).await {
            Ok(output) => Ok(match output {
                Value::String(text) => text,
                other => other.to_string(),
            }),
            Err(e) => Err(error_result(e.code(), &e.to_string())),
        }
    }
}

/// How the `json` tool runs jq out of process: this binary's `jq-worker` subcommand, or the
/// `toolbridge-jq-worker` binary beside the running program (a test binary is not `toolbridge`).
fn jq_worker() -> Result<JqIsolation, String> {
    let exe = std::env::current_exe()
        .map_err(|e| format!("gateway_tools: the running program cannot be found: {e}"))?;
    let is_gateway = exe
        .file_stem()
        .and_then(|s| s.to_str())
        .is_some_and(|s| s == "toolbridge");
    if is_gateway {
        let mut isolation = JqIsolation::new(exe);
        isolation.args = vec!["jq-worker".to_owned()];
        return Ok(isolation);
    }
    let beside = |dir: Option<&std::path::Path>| {
        dir.map(|d| d.join("toolbridge-jq-worker"))
            .filter(|p| p.is_file())
    };
    let dir = exe.parent();
    beside(dir)
        .or_else(|| beside(dir.and_then(|d| d.parent())))
        .map(JqIsolation::new)
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
