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
//!
//! The `json` tool of [`all`] runs jq in process, where a hostile filter can still exhaust the
//! process's memory; [`configured`] with [`BuiltinsConfig::jq_isolation`] runs each jq query in a
//! worker process instead ([`IsolatedJson`], [`JqIsolation`], [`jq_worker_main`]).

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
pub use json::{IsolatedJson, JqIsolation, Json, jq_worker_main};
pub use pdf::Pdf;
pub use regex::RegexTool;
pub use strings::Strings;
pub use web::{SearchBackend, WebConfig, WebFetch, WebSearch};

/// Every built-in tool of this module, ready to register.
///
/// The `json` tool here is [`Json`], which runs jq filters in process: the step budget and caps
/// bound most filters, but one that grows memory without a generator step (`"x" * 10000000000`,
/// repeated `. + .`) can use memory until the whole process dies, and one that burns CPU keeps a
/// thread busy past its deadline. Where filters come from a model or a user, build the tools with
/// [`configured`] and a [`JqIsolation`] instead.
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
