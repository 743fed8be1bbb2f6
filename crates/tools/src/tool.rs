//! The [`Tool`] trait, the context a call runs under, and the library's error type.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::watch;

/// What a tool returns: JSON, bounded by the context's output limit.
pub type ToolOutput = Value;

/// A boxed future, so that `Tool` stays object-safe.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A tool: a name, a description, a JSON Schema for its parameters, and an async execution.
///
/// Implementations must bound their own work (input sizes, iterations) and honour the context's
/// deadline and cancellation; the registry validates the arguments against [`Tool::parameters`]
/// before [`Tool::execute`] is called, so an implementation may rely on the schema's shape.
pub trait Tool: Send + Sync {
    /// The unique name the tool is registered and called under (`[A-Za-z0-9_-]{1,64}`).
    fn name(&self) -> &str;
    /// What the tool does, for the model.
    fn description(&self) -> &str;
    /// The JSON Schema of the arguments object.
    fn parameters(&self) -> Value;
    /// Capability tags (`math`, `hash`, `web`, …) the planner matches intents against.
    fn capabilities(&self) -> &[&str] {
        &[]
    }
    /// An optional category (`math`, `web`, `files`, …) for grouping tools in listings and
    /// searches; `None` by default.
    fn category(&self) -> Option<&str> {
        None
    }
    /// Runs the tool on validated arguments.
    fn execute<'a>(
        &'a self,
        args: Value,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>>;
}

/// The conditions one call runs under.
#[derive(Debug, Clone)]
pub struct ToolContext {
    /// When the call must be done.
    pub deadline: tokio::time::Instant,
    /// Turns true when the caller no longer wants the result.
    pub cancelled: watch::Receiver<bool>,
    /// The most bytes of serialised output the caller accepts.
    pub max_output_bytes: usize,
}

impl ToolContext {
    /// A context with a timeout from now, no cancellation, and an output limit.
    pub fn with_timeout(timeout: Duration, max_output_bytes: usize) -> Self {
        let (_tx, rx) = watch::channel(false);
        Self {
            deadline: tokio::time::Instant::now() + timeout,
            cancelled: rx,
            max_output_bytes,
        }
    }

    /// True once the caller cancelled.
    pub fn is_cancelled(&self) -> bool {
        *self.cancelled.borrow()
    }
}

impl Default for ToolContext {
    /// Ten seconds and 1 MiB of output.
    fn default() -> Self {
        Self::with_timeout(Duration::from_secs(10), 1024 * 1024)
    }
}

/// Why a tool call failed. Every variant has a stable snake_case [`ToolError::code`].
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ToolError {
    /// No tool has this name; `suggestions` are close matches.
    #[error("unknown tool `{name}`")]
    UnknownTool {
        name: String,
        suggestions: Vec<String>,
    },
    /// The arguments do not match the tool's schema (`path` is a JSON pointer).
    #[error("invalid arguments at `{path}`: {message}")]
    InvalidArguments { path: String, message: String },
    /// The input is valid but exceeds a limit of the tool.
    #[error("limit exceeded: {0}")]
    LimitExceeded(String),
    /// The tool ran and failed (a malformed PDF, a refused URL, a division by zero, …).
    #[error("{0}")]
    Failed(String),
    /// An operation the tool refuses for safety (an SSRF target, a sandbox escape).
    #[error("refused: {0}")]
    Refused(String),
    /// The deadline passed.
    #[error("the tool did not finish in time")]
    Timeout,
    /// The caller cancelled.
    #[error("the call was cancelled")]
    Cancelled,
    /// The output is larger than the caller accepts.
    #[error("the output is larger than {limit} bytes")]
    OutputTooLarge { limit: usize },
    /// A tool with this name is already registered.
    #[error("a tool named `{0}` is already registered")]
    Duplicate(String),
    /// A tool name outside `[A-Za-z0-9_-]{1,64}`.
    #[error("invalid tool name `{0}`: names are 1 to 64 of A-Z, a-z, 0-9, `_` and `-`")]
    InvalidName(String),
    /// A tool's parameter schema does not compile or is not an object schema.
    #[error("invalid parameter schema for `{tool}`: {message}")]
    InvalidSchema {
        /// The tool whose schema is invalid.
        tool: String,
        /// What is wrong with it.
        message: String,
    },
    /// The tool exists but is not offered to this stage (typed tool source).
    #[error("tool `{tool}` is not available in stage `{stage}`")]
    NotInStage {
        /// The selected tool.
        tool: String,
        /// The stage that does not offer it.
        stage: String,
    },
    /// An execution plan failed validation (cycle, missing dependency, type mismatch, bad binding).
    #[error("invalid plan: {0}")]
    InvalidPlan(String),
    /// One step of a multi-step plan failed; `error` is the step's own error.
    #[error("step `{step}` failed: {error}")]
    StepFailed {
        /// The id of the failed step.
        step: String,
        /// The step's own error.
        error: Box<ToolError>,
    },
    /// The planner found no capability (or no registered tool) for an intent.
    #[error("no capability matches `{intent}`")]
    NoCapability {
        /// The intent text (or capability id) that found nothing.
        intent: String,
    },
    /// A planner or source configuration is inconsistent (e.g. a capability names a tool that is
    /// not registered).
    #[error("invalid configuration: {0}")]
    InvalidConfiguration(String),
    /// A request asks for several things and one of its parts matches more than one capability
    /// equally well: the planner reports it rather than guessing.
    #[error("part {part} of the request (`{text}`) is ambiguous between {}", .candidates.join(", "))]
    AmbiguousIntent {
        /// The 1-based position of the ambiguous part.
        part: usize,
        /// The part's text.
        text: String,
        /// The capabilities that tie, in rule order.
        candidates: Vec<String>,
    },
    /// An MCP server could not be reached or did not complete the handshake in time (the command
    /// does not exist, nothing listens at the URL, the `initialize` exchange failed).
    #[error("cannot connect to MCP server `{server}`: {message}")]
    McpConnect {
        /// The server's label.
        server: String,
        /// Why.
        message: String,
    },
    /// An MCP server broke the protocol or the connection (a JSON-RPC error, an unexpected
    /// answer, a closed transport, a message over the size limit).
    #[error("MCP server `{server}` failed: {message}")]
    McpProtocol {
        /// The server's label.
        server: String,
        /// Why.
        message: String,
    },
    /// An MCP tool ran and reported an error (`isError: true`); `message` is its text.
    #[error("MCP tool `{tool}` on `{server}` reported an error: {message}")]
    McpTool {
        /// The server's label.
        server: String,
        /// The tool's name on the server.
        tool: String,
        /// The tool's own text, bounded.
        message: String,
    },
}

impl ToolError {
    /// The stable code.
    pub fn code(&self) -> &'static str {
        match self {
            Self::UnknownTool { .. } => "unknown_tool",
            Self::InvalidArguments { .. } => "invalid_arguments",
            Self::LimitExceeded(_) => "limit_exceeded",
            Self::Failed(_) => "tool_failed",
            Self::Refused(_) => "refused",
            Self::Timeout => "timeout",
            Self::Cancelled => "cancelled",
            Self::OutputTooLarge { .. } => "output_too_large",
            Self::Duplicate(_) => "duplicate_tool",
            Self::InvalidName(_) => "invalid_tool_name",
            Self::InvalidSchema { .. } => "invalid_schema",
            Self::NotInStage { .. } => "not_in_stage",
            Self::InvalidPlan(_) => "invalid_plan",
            Self::StepFailed { .. } => "step_failed",
            Self::NoCapability { .. } => "no_capability",
            Self::InvalidConfiguration(_) => "invalid_configuration",
            Self::AmbiguousIntent { .. } => "ambiguous_intent",
            Self::McpConnect { .. } => "mcp_connect_failed",
            Self::McpProtocol { .. } => "mcp_protocol_error",
            Self::McpTool { .. } => "mcp_tool_error",
        }
    }
}
