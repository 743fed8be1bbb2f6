//! The built-ins that need configuration — `files`, `pdf`, `web_fetch` and `web_search` — and
//! [`configured`], which hands out every built-in tool, configured ones included.
//!
//! [`crate::builtins::all`] stays configuration-free; this module is the one place that opens the
//! sandbox directory and builds the guarded web client.

use std::path::PathBuf;
use std::sync::Arc;

use super::files::{Files, Sandbox};
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
}

/// Every built-in tool: those of [`crate::builtins::all`], then `files`, `pdf`, `web_fetch`,
/// and `web_search` when a search backend is configured. Fails when the sandbox directory
/// cannot be opened or the web client cannot be built.
pub fn configured(config: &BuiltinsConfig) -> Result<Vec<Arc<dyn Tool>>, ToolError> {
    let sandbox = match &config.sandbox_dir {
        Some(path) => Sandbox::open(path)?,
        None => Sandbox::none(),
    };
    let mut tools = super::all();
    tools.push(Arc::new(Files::new(sandbox.clone())));
    tools.push(Arc::new(Pdf::new(sandbox)));
    tools.extend(web::tools(&config.web)?);
    Ok(tools)
}
