//! The [`McpClient`] trait: what the library needs of an MCP connection, in our own types, so
//! that the SDK (whose majors break often) stays behind one implementation,
//! [`super::RmcpClient`], and tests can supply their own.

use serde_json::{Map, Value, json};

use crate::tool::{BoxFuture, ToolContext, ToolError};

/// One tool as the server lists it, bounded by the connection's limits.
#[derive(Debug, Clone, PartialEq)]
pub struct McpToolSpec {
    /// The tool's name on the server.
    pub name: String,
    /// Its description (empty when the server gives none).
    pub description: String,
    /// Its input schema (a JSON object).
    pub input_schema: Value,
}

/// The result of one `tools/call`.
#[derive(Debug, Clone, PartialEq)]
pub struct McpCallResult {
    /// The text parts (and text resources) of the content, joined with newlines.
    pub text: String,
    /// `structuredContent`, when the server sent it.
    pub structured_content: Option<Value>,
    /// `isError`: the tool ran and failed.
    pub is_error: bool,
    /// Content parts that are not text (images, audio, blobs, links): counted, not carried.
    pub non_text_parts: usize,
}

impl McpCallResult {
    /// The result as a tool output: `{"text": …}`, plus `structured_content` and
    /// `non_text_parts` when present.
    pub fn to_output(&self) -> Value {
        let mut out = Map::new();
        out.insert("text".to_owned(), json!(self.text));
        if let Some(structured) = &self.structured_content {
            out.insert("structured_content".to_owned(), structured.clone());
        }
        if self.non_text_parts > 0 {
            out.insert("non_text_parts".to_owned(), json!(self.non_text_parts));
        }
        Value::Object(out)
    }
}

/// A connection to one MCP server.
///
/// Every call honours the context's deadline ([`ToolError::Timeout`]) and cancellation
/// ([`ToolError::Cancelled`]); a call given up is cancelled on the server too. Implementations
/// bound what they accept: the listing by tool count and pages, a result by
/// [`ToolContext::max_output_bytes`].
pub trait McpClient: Send + Sync {
    /// The server's label.
    fn label(&self) -> &str;

    /// Every tool the server offers, following pagination up to the configured bounds
    /// ([`ToolError::LimitExceeded`] past them).
    fn list_tools<'a>(
        &'a self,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<Vec<McpToolSpec>, ToolError>>;

    /// Calls `name` with `arguments` (a JSON object, or `null` for none). A result with
    /// `isError` is `Ok` with [`McpCallResult::is_error`] set; protocol failures are errors.
    fn call_tool<'a>(
        &'a self,
        name: &'a str,
        arguments: Value,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<McpCallResult, ToolError>>;

    /// Ends the session (and the child process, for stdio). Later calls fail with
    /// [`ToolError::McpProtocol`]. Idempotent.
    fn close(&self) -> BoxFuture<'_, ()>;
}
