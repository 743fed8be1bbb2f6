//! The built-ins that need configuration — `files`, `pdf`, `web_fetch` and `web_search` — and
//! [`configured`], which hands out every built-in tool, configured ones included.
//!
//! [`crate::builtins::all`] stays configuration-free; this module is the one place that opens the
//! sandbox directory and builds the guarded web client, and where the `json` tool's jq queries
//! move out of process ([`BuiltinsConfig::jq_isolation`]).

use std::path::PathBuf;
use std::sync::Arc;

use super::files::{Files, Sandbox};
use super::json::{IsolatedJson, JqIsolation};
use super::pdf::Pdf;
use super::web::{self, WebConfig};
use crate::{Tool, ToolError};

/// What the I/O built-ins need.
#[derive(Debug, Clone, Default)]
pub struct BuiltinsConfig {
    /// The directory `files` and `pdf` are confined to; `None` refuses every file operation.
    pub sandbox_dir: Option<PathBuf>,
    /// The web tools' policy (allowed ports, caps, the loopback test escape hatch) and search
    /// backend.
    pub web: WebConfig,
    /// When set, the `json` tool runs each jq query in a worker process under a memory limit,
    /// killed at the deadline ([`IsolatedJson`]); when `None`, jq runs in process ([`super::Json`],
    /// whose risk [`super::all`] describes).
    pub jq_isolation: Option<JqIsolation>,
}

/// Every built-in tool: those of [`crate::builtins::all`], then `files`, `pdf`, `web_fetch`,
/// and `web_search` when a search backend is configured; with [`BuiltinsConfig::jq_isolation`]
/// the `json` tool is an [`IsolatedJson`] in the same place. Fails when the sandbox directory
/// cannot be opened or the web client cannot be built.
pub fn configured(config: &BuiltinsConfig) -> Result<Vec<Arc<dyn Tool>>, ToolError> {
    let sandbox = match &config.sandbox_dir {
        Some(path) => Sandbox::open(path)?,
        None => Sandbox::none(),
    };
    let mut tools = super::all();
    if let Some(isolation) = &config.jq_isolation {
        for tool in &mut tools {
            if tool.name() == "json" {
                *tool = Arc::new(IsolatedJson::new(isolation.clone()));
            }
        }
    }
    tools.push(Arc::new(Files::new(sandbox.clone())));
    tools.push(Arc::new(Pdf::new(sandbox)));
    tools.extend(web::tools(&config.web)?);
    Ok(tools)
}
