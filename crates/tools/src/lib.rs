//! The toolbridge tool library, usable on its own.
//!
//! - [`tool`]: the [`Tool`] trait every tool implements, the [`ToolContext`] a call runs under
//!   (deadline, cancellation, output limit), and [`ToolError`] with stable codes.
//! - [`registry`]: [`ToolRegistry`], the one guarded execution path (lookup with close-match
//!   suggestions, schema validation of every call, deadline, cancellation, output limit), and
//!   [`FnTool`], a tool made from an async closure.
//! - [`provider`]: [`ToolProvider`], what the planner plans over (list tools, capabilities and
//!   category per tool), implemented by the registry, the typed source, MCP tool sets and a
//!   request's declared function tools.
//! - [`typed`]: the typed tool source — tools defined by a Rust input type (schema derived with
//!   schemars), a sealed registry, per-stage read-only selections, and typed resolve errors.
//! - [`planner`]: intent analysis (English and Chinese, word boundaries), capabilities checked
//!   against the registry, evidence-based ranking, validated DAG plans with output binding, and
//!   the [`planner::Bridge`] with its optional planner fallback.
//! - [`mcp`]: MCP servers (stdio, streamable HTTP) as tools, behind our own
//!   [`mcp::McpClient`] trait over the official SDK.
//! - [`suggest`]: the close-match rule every "unknown name" error uses.
//!
//! The library knows nothing of providers or of the gateway: the gateway-executed tools build on
//! it, and so can any agent.

pub mod builtins;
pub mod mcp;
pub mod planner;
pub mod provider;
pub mod registry;
pub mod suggest;
pub mod tool;
pub mod typed;

pub use provider::ToolProvider;
pub use registry::{FnTool, ToolInfo, ToolRegistry};
pub use tool::{Tool, ToolContext, ToolError, ToolOutput};

/// The guide `docs/tools.md`, included so that its examples run as doctests.
#[doc = include_str!("../../../docs/tools.md")]
#[cfg(doctest)]
pub struct GuideEnglish;

/// The Chinese guide `docs/tools.zh.md` (the same examples), run as doctests too.
#[doc = include_str!("../../../docs/tools.zh.md")]
#[cfg(doctest)]
pub struct GuideChinese;
