//! `[gateway_tools]` as written (plain serde), and the pieces of it that are resolved
//! outside [`GatewayTools::build`](super::GatewayTools::build): the search backend serving
//! `web_search`, the jq worker process of the `json` tool, and the loop's time budget, which
//! must leave room for its longest call.
//!
//! Not here: which tools a request is offered, or running them (the parent module).

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;
use toolbridge_tools::builtins::{JqIsolation, SearchBackend};
use toolbridge_tools::mcp::McpServerConfig;

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
    /// The most seconds the loop may take in all. At least the longest tool timeout (the
    /// images backend's `timeout_secs` included): a shorter one is a config error. Default 120,
    /// raised to the longest tool timeout plus 60 s when that is longer.
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
    /// The images backend serving a declared `image_generation` the provider lacks.
    pub images: Option<super::images::ImagesFile>,
    /// The system note naming the gateway-run tools a request got (`{tools}` is replaced by
    /// their names); `""` sends none. Default: a short note asking the model to use them.
    pub system_note: Option<String>,
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

/// How the `json` tool runs jq out of process: this binary's `jq-worker` subcommand, or, from
/// a program that is not `toolbridge` (a test binary, an embedding), a `toolbridge` (with
/// `jq-worker`) or `toolbridge-jq-worker` binary beside it or one folder up (a test binary lives
/// in `target/<profile>/deps`, the `toolbridge` binary cargo builds for it in `target/<profile>`).
/// The loop's budget when none is written.
const DEFAULT_BUDGET: Duration = Duration::from_secs(120);

/// What the default budget leaves beside its longest call, for the model's rounds around it.
const ROUNDS_HEADROOM: Duration = Duration::from_secs(60);

/// The loop's limits as written, defaults filled; `images`: the images backend's timeout.
pub(super) fn loop_limits(
    file: &ToolsFile,
    images: Option<Duration>,
) -> Result<super::LoopLimits, String> {
    let tool_timeout = Duration::from_secs(file.tool_timeout_secs.unwrap_or(30));
    let (longest, which) = match images {
        Some(image) if image > tool_timeout => (image, "gateway_tools.images.timeout_secs"),
        _ => (tool_timeout, "the tool timeout (tool_timeout_secs)"),
    };
    Ok(super::LoopLimits {
        max_steps: file.max_steps.unwrap_or(8),
        time_budget: time_budget(file, longest, which)?,
        tool_timeout,
        max_output_bytes: file.max_output_bytes.unwrap_or(64 * 1024),
    })
}

/// The loop's time budget: `time_budget_secs`, which may not be shorter than the longest tool
/// timeout (`longest`, named by `which`: one such call would be cut by the budget, never by
/// its own timeout); unset, 120 s, or the longest timeout and a minute when that is longer.
fn time_budget(file: &ToolsFile, longest: Duration, which: &str) -> Result<Duration, String> {
    match file.time_budget_secs {
        Some(secs) if Duration::from_secs(secs) < longest => Err(format!(
            "gateway_tools.time_budget_secs = {secs} is shorter than {which} ({} s): such a call would be cut by the loop's budget; set it to at least {}",
            longest.as_secs(),
            longest.as_secs()
        )),
        Some(secs) => Ok(Duration::from_secs(secs)),
        None => Ok(DEFAULT_BUDGET.max(longest + ROUNDS_HEADROOM)),
    }
}

pub(super) fn jq_worker() -> Result<JqIsolation, String> {
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

pub(super) fn search_backend(
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
