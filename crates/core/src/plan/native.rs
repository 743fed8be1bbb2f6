//! The planner's native-tool decisions, neutral: what the provider should run itself, with the
//! parts of the declaration it needs. Each dialect renders them into its vendor's JSON
//! (`toolbridge_providers`); nothing here knows a wire shape.

use serde_json::Value;

use super::{NativeFileSearch, NativeMcp, NativeWebSearch};

/// A tool the provider runs itself, as the planner decided it.
#[derive(Debug, Clone, PartialEq)]
pub enum NativeTool {
    /// Web search run by the provider, in the profile's form.
    WebSearch(NativeSearch),
    /// Retrieval over one knowledge base, named by a declared vector store id.
    Retrieval {
        form: NativeFileSearch,
        knowledge_id: String,
    },
    /// An MCP server the provider connects to itself.
    Mcp(NativeMcpServer),
    /// The tool exactly as declared (a native Responses upstream takes every tool so).
    AsDeclared(Value),
}

/// A native web search: the profile's form and what the declaration restricts.
#[derive(Debug, Clone, PartialEq)]
pub struct NativeSearch {
    pub form: NativeWebSearch,
    /// `filters.allowed_domains`, when the declaration lists any.
    pub allowed_domains: Vec<Value>,
    /// `user_location`, when the declaration has one (an object).
    pub user_location: Option<Value>,
}

/// A native MCP server: the profile's form and the declaration's connection.
#[derive(Debug, Clone, PartialEq)]
pub struct NativeMcpServer {
    pub form: NativeMcp,
    pub server_label: Option<Value>,
    pub server_url: String,
    /// `allowed_tools` as declared: a list of names, or `{"tool_names": […]}`.
    pub allowed_tools: Option<Value>,
    pub headers: Option<Value>,
}

impl NativeTool {
    /// The name of the provider builtin function whose calls the gateway echoes back (Kimi's
    /// `$web_search`), if this tool is one.
    pub fn echoed_builtin(&self) -> Option<&'static str> {
        match self {
            Self::WebSearch(NativeSearch {
                form: NativeWebSearch::KimiBuiltin,
                ..
            }) => Some(super::KIMI_WEB_SEARCH),
            Self::WebSearch(_) | Self::Retrieval { .. } | Self::Mcp(_) | Self::AsDeclared(_) => {
                None
            }
        }
    }
}
