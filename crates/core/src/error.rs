//! The core error type: everything a request can be refused for before it goes upstream.

use toolbridge_wire::error::{ErrorBody, ErrorObject};

/// Whose fault an error is; drives the HTTP status class, retries and log level.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Client,
    Upstream,
    Internal,
}

/// A request the core cannot plan or translate, with a stable code and the request path at fault.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Error {
    /// The body is not JSON, or a field has the wrong type.
    #[error("{message}")]
    InvalidJson {
        param: Option<String>,
        message: String,
    },
    /// A required field is absent.
    #[error("missing required parameter: `{param}`")]
    MissingParameter { param: String },
    /// A field is present but its value is not acceptable.
    #[error("invalid value for `{param}`: {message}")]
    InvalidValue { param: String, message: String },
    /// A value the API allows but the route's provider cannot take, and that cannot be degraded
    /// without changing what the client asked for.
    #[error("unsupported value for `{param}`: {message}")]
    Unsupported { param: String, message: String },
    /// A tool type this gateway does not know.
    #[error("unsupported tool type `{kind}` at `{param}`")]
    UnsupportedToolType { param: String, kind: String },
    /// A known tool the provider cannot take, under a policy that rejects instead of ignoring.
    #[error(
        "the provider cannot take the `{kind}` tool at `{param}`, and its policy rejects unsupported tools"
    )]
    UnsupportedTool { param: String, kind: String },
    /// The same tool is declared twice.
    #[error("duplicate tool at `{param}`: {message}")]
    DuplicateTool { param: String, message: String },
    /// Two different tools claim one provider name.
    #[error("tool name conflict at `{param}`: {message}")]
    ToolNameConflict { param: String, message: String },
    /// More tools than the provider accepts.
    #[error("{count} tools would go upstream, more than the provider's limit of {limit}")]
    TooManyTools { count: usize, limit: usize },
    /// `tool_choice` forces a tool that will not be there.
    #[error("{message}")]
    ToolChoiceUnavailable { message: String },
    /// A tool call and its output do not pair up.
    #[error("at `{param}`: {message}")]
    UnpairedToolOutput { param: String, message: String },
    /// `text.format.schema` is not a valid JSON Schema.
    #[error("invalid JSON schema at `{param}`: {message}")]
    InvalidSchema { param: String, message: String },
    /// A function tool's `parameters` is not a JSON Schema of an object.
    #[error("invalid function parameters at `{param}`: {message}")]
    InvalidFunctionParameters { param: String, message: String },
}

impl Error {
    /// The stable snake_case code clients see in `error.code`.
    pub fn code(&self) -> &'static str {
        match self {
            Self::InvalidJson { .. } => "invalid_json",
            Self::MissingParameter { .. } => "missing_required_parameter",
            Self::InvalidValue { .. } => "invalid_value",
            Self::Unsupported { .. } => "unsupported_value",
            Self::InvalidSchema { .. } => "invalid_json_schema",
            Self::InvalidFunctionParameters { .. } => "invalid_function_parameters",
            Self::UnsupportedToolType { .. } => "unsupported_tool_type",
            Self::UnsupportedTool { .. } => "unsupported_tool",
            Self::DuplicateTool { .. } => "duplicate_tool",
            Self::ToolNameConflict { .. } => "tool_name_conflict",
            Self::TooManyTools { .. } => "too_many_tools",
            Self::ToolChoiceUnavailable { .. } => "tool_choice_unavailable",
            Self::UnpairedToolOutput { .. } => "unpaired_tool_output",
        }
    }

    /// The HTTP status this error answers with.
    pub fn status(&self) -> u16 {
        400
    }

    /// Whose fault it is.
    pub fn source(&self) -> Source {
        Source::Client
    }

    /// The request path at fault, if any.
    pub fn param(&self) -> Option<&str> {
        match self {
            Self::InvalidJson { param, .. } => param.as_deref(),
            Self::MissingParameter { param }
            | Self::InvalidValue { param, .. }
            | Self::Unsupported { param, .. }
            | Self::InvalidSchema { param, .. }
            | Self::InvalidFunctionParameters { param, .. }
            | Self::UnsupportedToolType { param, .. }
            | Self::UnsupportedTool { param, .. }
            | Self::DuplicateTool { param, .. }
            | Self::ToolNameConflict { param, .. }
            | Self::UnpairedToolOutput { param, .. } => Some(param),
            Self::TooManyTools { .. } => Some("tools"),
            Self::ToolChoiceUnavailable { .. } => Some("tool_choice"),
        }
    }

    /// OpenAI's error body for this error.
    pub fn body(&self) -> ErrorBody {
        ErrorBody {
            error: ErrorObject {
                message: self.to_string(),
                kind: "invalid_request_error".to_owned(),
                param: self.param().map(str::to_owned),
                code: Some(self.code().to_owned()),
            },
        }
    }

    pub(crate) fn invalid(param: impl Into<String>, message: impl Into<String>) -> Self {
        Self::InvalidValue {
            param: param.into(),
            message: message.into(),
        }
    }
}
