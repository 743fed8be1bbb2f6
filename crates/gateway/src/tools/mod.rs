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
//! resolved from it outside [`GatewayTools::build`] (the search backend, the jq worker); `build`
//! the tools of a running gateway built from it; `connect` the connecting of MCP servers, the
//! configured ones and a request's own; `mcp` one connected MCP server and its approval rule;
//! `source` every tool as the tool library's typed source (a request's calls are resolved
//! there, by the tool loop); `run` the running of one call; `standalone` Codex's standalone
//! search (`/v1/alpha/search`) over the same web tools; this file the tools of a running
//! gateway and what each request is offered.

use std::sync::Arc;
use std::time::Duration;

use globset::GlobSet;
use serde_json::{Value, json};
use toolbridge_core::plan::{GatewayOffer, GatewayTool, ToolCapabilities};
use toolbridge_tools::ToolRegistry;
use toolbridge_tools::builtins::web::{SafeClient, SsrfPolicy};
use toolbridge_tools::mcp::McpServerConfig;
use toolbridge_wire::responses::Tool;

mod build;
mod connect;
mod deferred;
mod describe;
mod file;
pub(crate) mod images;
mod mcp;
mod run;
mod source;
mod standalone;

pub(crate) use deferred::{Deferred, MAX_FOUND, MAX_SEARCHES};
pub(crate) use file::ToolsFile;
pub(crate) use mcp::McpServer;
pub(crate) use source::{Action, GatewaySource};
pub(crate) use standalone::{MAX_OPERATIONS, Refusal};

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
