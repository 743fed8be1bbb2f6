//! The built-in tools that need no I/O: calculator, hash, strings, ids, regex and json.
//!
//! Each tool lives in its own module, owns its JSON Schema and its limits, and bounds its own
//! work: input sizes are capped before any work starts, anything that can take a while runs off
//! the async runtime under the context's deadline (`common::run_blocking`), and every output is
//! measured against [`crate::ToolContext::max_output_bytes`] before it is returned
//! (`common::bounded`).
//!
//! [`all`] holds only the tools that touch nothing outside the process. The ones that do —
//! [`files`] (a sandbox directory), [`pdf`] (the same sandbox, or base64 bytes) and [`web`]
//! (`web_search` and `web_fetch` through an SSRF-safe client) — need configuration and come from
//! [`configured`] with a [`BuiltinsConfig`]. This module does not register anything: both hand
//! the tools to whoever builds a registry.

use std::sync::Arc;

use crate::Tool;

pub mod calculator;
mod common;
mod configured;
pub mod files;
pub mod hash;
pub mod ids;
pub mod json;
pub mod pdf;
pub mod regex;
pub mod strings;
pub mod web;

pub use calculator::Calculator;
pub use configured::{BuiltinsConfig, configured};
pub use files::{Files, Sandbox};
pub use hash::Hash;
pub use ids::Ids;
pub use json::Json;
pub use pdf::Pdf;
pub use regex::RegexTool;
pub use strings::Strings;
pub use web::{SearchBackend, WebConfig, WebFetch, WebSearch};

/// Every built-in tool of this module, ready to register.
pub fn all() -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(Calculator),
        Arc::new(Hash),
        Arc::new(Strings),
        Arc::new(Ids),
        Arc::new(RegexTool),
        Arc::new(Json),
    ]
}
