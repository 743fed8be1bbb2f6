//! The toolbridge tool library, usable on its own.
//!
//! - [`tool`]: the [`Tool`] trait every tool implements, the [`ToolContext`] a call runs under
//!   (deadline, cancellation, output limit), and [`ToolError`] with stable codes.
//!
//! The library knows nothing of providers or of the gateway: the gateway-executed tools build on
//! it, and so can any agent.

pub mod tool;

pub use tool::{Tool, ToolContext, ToolError, ToolOutput};
