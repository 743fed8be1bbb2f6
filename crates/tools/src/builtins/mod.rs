//! The built-in tools that need no I/O: calculator, hash, strings, ids, regex and json.
//!
//! Each tool lives in its own module, owns its JSON Schema and its limits, and bounds its own
//! work: input sizes are capped before any work starts, anything that can take a while runs off
//! the async runtime under the context's deadline (`common::run_blocking`), and every output is
//! measured against [`crate::ToolContext::max_output_bytes`] before it is returned
//! (`common::bounded`).
//!
//! This module deliberately does not hold the tools that touch the outside world (files, web,
//! PDF): those need a sandbox or an SSRF-safe client and live elsewhere. It does not register
//! anything either: [`all`] hands the tools to whoever builds a registry.

use std::sync::Arc;

use crate::Tool;

pub mod calculator;
mod common;
pub mod hash;
pub mod ids;
pub mod json;
pub mod regex;
pub mod strings;

pub use calculator::Calculator;
pub use hash::Hash;
pub use ids::Ids;
pub use json::Json;
pub use regex::RegexTool;
pub use strings::Strings;

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
