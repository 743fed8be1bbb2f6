//! Stable codes for the decisions toolbridge reports to the client.
//!
//! A diagnostic is not an error: the request went on, but something the client sent could not go
//! upstream exactly as it came. Every such decision is recorded with one of these codes, returned
//! in the response's `toolbridge_diagnostics` field and the `x-toolbridge-diagnostics` header, and
//! logged.

use toolbridge_wire::responses::Diagnostic;

/// A parameter the provider does not accept was not sent.
pub const PARAM_DROPPED: &str = "param_dropped";
/// A parameter was moved into the provider's accepted range.
pub const PARAM_CLAMPED: &str = "param_clamped";
/// A parameter was sent under another name or shape.
pub const PARAM_RENAMED: &str = "param_renamed";
/// `developer` messages were sent as `system` because the provider rejects the role.
pub const DEVELOPER_AS_SYSTEM: &str = "developer_as_system";
/// Consecutive system messages were merged into one because the provider requires it.
pub const SYSTEM_MERGED: &str = "system_messages_merged";
/// `text.format` could not go upstream natively and was degraded.
pub const OUTPUT_CONTRACT_DEGRADED: &str = "output_contract_degraded";
/// A tool could not go upstream and was left out of the request.
pub const TOOL_IGNORED: &str = "tool_ignored";
/// An input item the provider has no representation for was left out.
pub const ITEM_DROPPED: &str = "item_dropped";
/// The upstream stream contained a chunk toolbridge skipped.
pub const CHUNK_SKIPPED: &str = "upstream_chunk_skipped";

/// Builds a diagnostic.
pub fn diag(code: &str, param: Option<&str>, message: impl Into<String>) -> Diagnostic {
    Diagnostic {
        code: code.to_owned(),
        param: param.map(str::to_owned),
        message: message.into(),
    }
}
