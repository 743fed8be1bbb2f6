//! The gateway's error type: every way a request can fail before its answer starts, each with a
//! stable code, an HTTP status and OpenAI's error body.
//!
//! Errors are turned into responses without side effects; the one place that logs them is the
//! request handler's completion log line.

use std::time::Duration;

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use toolbridge_wire::error::{ErrorBody, ErrorObject};

/// A configuration that cannot be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {message}")]
    Read { path: String, message: String },
    #[error("cannot parse config file {path}: {message}")]
    Parse { path: String, message: String },
    #[error("invalid config at `{field}`: {message}")]
    Invalid { field: String, message: String },
    #[error(
        "no config file was given and TOOLBRIDGE_UPSTREAM_URL is not set; set it to a Chat Completions base URL (for example http://127.0.0.1:11434/v1) or pass --config FILE"
    )]
    NoUpstream,
}

impl ConfigError {
    pub(crate) fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self::Invalid {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// A request that failed before any of its answer was sent.
#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    #[error(transparent)]
    Request(#[from] toolbridge_core::Error),
    #[error(transparent)]
    Upstream(#[from] toolbridge_providers::Error),
    #[error("missing or invalid API key; send `Authorization: Bearer <key>` with a gateway key")]
    Unauthorized,
    #[error(
        "the model `{model}` does not exist or is not routed by this gateway; known models: {known}"
    )]
    ModelNotFound { model: String, known: String },
    #[error("the request body is larger than the limit of {limit} bytes")]
    BodyTooLarge { limit: usize },
    #[error("the request body could not be read: {0}")]
    BodyUnreadable(String),
    #[error("the request body did not arrive within {secs} s")]
    BodyTimeout { secs: u64 },
    #[error("the method {method} is not allowed on {path}{}", allowed_list(.allowed))]
    MethodNotAllowed {
        method: String,
        path: String,
        allowed: Option<String>,
    },
    /// An answer the router made by itself (a rejection), with its status and no detail: its
    /// own text may name Rust types.
    #[error("{}", rejected_message(*.0))]
    Rejected(u16),
    #[error("the request must be `application/json`")]
    UnsupportedMediaType,
    /// A `Content-Length` that is not one non-negative integer: refused by the HTTP parser
    /// before any route sees the request (`platform/serve/accept`).
    #[error(
        "the Content-Length header `{0}` is not a valid length: it must be one non-negative integer"
    )]
    InvalidContentLength(String),
    /// Another request head the HTTP parser refused (its status: 400, 414 or 431).
    #[error("{}", malformed_head_message(*.0))]
    MalformedHead(u16),
    #[error("the request body's Content-Encoding `{0}` is not supported (gzip, br, zstd, deflate)")]
    UnsupportedEncoding(String),
    #[error("the upstream provider could not be reached: {0}")]
    UpstreamUnreachable(String),
    #[error("the upstream provider did not answer in time")]
    UpstreamTimeout,
    /// The upstream answered 2xx, then its body broke off before its end.
    #[error("the upstream provider's answer broke off before its end: {0}")]
    UpstreamBodyCut(String),
    /// `error`, after the gateway spent its retries on it (or its retry budget refused one):
    /// answered like `error`, with `x-should-retry: false` so the client does not retry again.
    #[error("{error} (after {attempts} attempts)")]
    Retried {
        attempts: u32,
        error: Box<GatewayError>,
    },
    #[error("not found: {0}")]
    RouteNotFound(String),
    #[error("previous response `{0}` was not found (it was never stored, was deleted, or expired)")]
    PreviousResponseNotFound(String),
    #[error("no stored item has the id `{id}` named by the item_reference at `{param}`")]
    ItemReferenceNotFound { param: String, id: String },
    #[error("response `{0}` was not found")]
    ResponseNotFound(String),
    #[error("conversation `{0}` was not found")]
    ConversationNotFound(String),
    #[error(
        "no turns of session `{0}` are in the cache ledger (none were answered, they expired, or the gateway keeps no store)"
    )]
    CacheSessionNotFound(String),
    #[error(
        "request `{0}` is not in the console's journal (another process served it, it was evicted, or it is another tenant's)"
    )]
    JournalRequestNotFound(String),
    #[error("the response store failed: {0}")]
    Store(String),
    #[error("this gateway key may not use the model `{model}`")]
    ModelNotAllowed { model: String },
    #[error("this gateway key may not expose the tool {tool} (at `{param}`)")]
    ToolNotAllowed { param: String, tool: String },
    #[error(
        "this gateway key's {period} token budget of {limit} is used up ({used} used); it resets at {resets_at}"
    )]
    BudgetExhausted {
        period: &'static str,
        limit: u64,
        used: u64,
        resets_at: String,
        retry_after_secs: u64,
    },
    #[error("{message}; retry after {retry_after_secs} s")]
    RateLimited {
        message: String,
        retry_after_secs: u64,
    },
    /// The model's tool call stayed invalid after repair, and the provider's policy is `fail`.
    #[error("{0}")]
    InvalidToolCall(String),
    #[error(
        "this gateway has no web search backend; configure [gateway_tools.web_search] (searxng, brave or tavily) to serve /v1/alpha/search"
    )]
    SearchUnavailable,
}

impl GatewayError {
    /// The stable code in `error.code`.
    pub fn code(&self) -> &str {
        match self {
            Self::Request(e) => e.code(),
            Self::Upstream(e) => e.code(),
            Self::Unauthorized => "invalid_api_key",
            Self::ModelNotFound { .. } => "model_not_found",
            Self::BodyTooLarge { .. } => "request_too_large",
            Self::BodyUnreadable(_) => "invalid_body",
            Self::BodyTimeout { .. } => "request_timeout",
            Self::MethodNotAllowed { .. } => "method_not_allowed",
            Self::Rejected(status) => match status {
                408 => "request_timeout",
                413 => "request_too_large",
                415 => "unsupported_media_type",
                422 => "invalid_body",
                500.. => "internal_error",
                _ => "invalid_request",
            },
            Self::UnsupportedMediaType => "unsupported_media_type",
            Self::InvalidContentLength(_) => "invalid_content_length",
            Self::MalformedHead(status) => match status {
                414 => "uri_too_long",
                431 => "request_header_fields_too_large",
                _ => "invalid_request_head",
            },
            Self::UnsupportedEncoding(_) => "unsupported_content_encoding",
            Self::UpstreamUnreachable(_) => "upstream_unreachable",
            Self::UpstreamTimeout => "upstream_timeout",
            Self::UpstreamBodyCut(_) => "upstream_body_cut",
            Self::Retried { error, .. } => error.code(),
            Self::RouteNotFound(_) => "not_found",
            Self::PreviousResponseNotFound(_) => "previous_response_not_found",
            Self::ItemReferenceNotFound { .. } => "item_reference_not_found",
            Self::ResponseNotFound(_) => "response_not_found",
            Self::ConversationNotFound(_) => "conversation_not_found",
            Self::CacheSessionNotFound(_) => "cache_session_not_found",
            Self::JournalRequestNotFound(_) => "request_not_found",
            Self::Store(_) => "store_unavailable",
            Self::ModelNotAllowed { .. } => "model_not_allowed",
            Self::ToolNotAllowed { .. } => "tool_not_allowed",
            Self::BudgetExhausted { .. } => "budget_exhausted",
            Self::RateLimited { .. } => "rate_limit_exceeded",
            Self::InvalidToolCall(_) => toolbridge_core::assemble::codes::INVALID_TOOL_CALL,
            Self::SearchUnavailable => "web_search_unavailable",
        }
    }

    pub fn status(&self) -> StatusCode {
        let code = match self {
            Self::Request(e) => e.status(),
            Self::Upstream(e) => e.status(),
            Self::Unauthorized => 401,
            Self::ModelNotFound { .. }
            | Self::RouteNotFound(_)
            | Self::ResponseNotFound(_)
            | Self::ConversationNotFound(_)
            | Self::CacheSessionNotFound(_)
            | Self::JournalRequestNotFound(_) => 404,
            Self::PreviousResponseNotFound(_) | Self::ItemReferenceNotFound { .. } => 400,
            Self::Store(_) => 503,
            Self::BodyTooLarge { .. } => 413,
            Self::BodyUnreadable(_) => 400,
            Self::BodyTimeout { .. } => 408,
            Self::MethodNotAllowed { .. } => 405,
            Self::Rejected(status) | Self::MalformedHead(status) => *status,
            Self::InvalidContentLength(_) => 400,
            Self::UnsupportedMediaType | Self::UnsupportedEncoding(_) => 415,
            Self::UpstreamUnreachable(_) | Self::UpstreamBodyCut(_) | Self::InvalidToolCall(_) => {
                502
            }
            Self::Retried { error, .. } => return error.status(),
            Self::UpstreamTimeout => 504,
            Self::ModelNotAllowed { .. } | Self::ToolNotAllowed { .. } => 403,
            Self::BudgetExhausted { .. } | Self::RateLimited { .. } => 429,
            Self::SearchUnavailable => 501,
        };
        StatusCode::from_u16(code).unwrap_or(StatusCode::BAD_GATEWAY)
    }

    /// OpenAI's error body.
    pub fn body(&self) -> ErrorBody {
        match self {
            Self::Request(e) => e.body(),
            Self::Upstream(e) => e.body(),
            Self::Retried { error, attempts } => {
                let mut body = error.body();
                body.error.message = format!("{} (after {attempts} attempts)", body.error.message);
                body
            }
            _ => {
                let (kind, param) = match self {
                    Self::Unauthorized => ("authentication_error", None),
                    Self::ModelNotFound { .. } => ("invalid_request_error", Some("model")),
                    Self::PreviousResponseNotFound(_) => {
                        ("invalid_request_error", Some("previous_response_id"))
                    }
                    Self::ItemReferenceNotFound { param, .. } => {
                        ("invalid_request_error", Some(param.as_str()))
                    }
                    Self::ResponseNotFound(_) => ("invalid_request_error", None),
                    Self::ModelNotAllowed { .. } => ("invalid_request_error", Some("model")),
                    Self::ToolNotAllowed { param, .. } => {
                        ("invalid_request_error", Some(param.as_str()))
                    }
                    // A spent budget is not retried soon: OpenAI's quota type says so.
                    Self::BudgetExhausted { .. } => ("insufficient_quota", None),
                    Self::RateLimited { .. } => ("rate_limit_error", None),
                    Self::ConversationNotFound(_) => {
                        ("invalid_request_error", Some("conversation"))
                    }
                    Self::CacheSessionNotFound(_) => ("invalid_request_error", Some("session_id")),
                    Self::JournalRequestNotFound(_) => {
                        ("invalid_request_error", Some("request_id"))
                    }
                    Self::Rejected(500..) => ("server_error", None),
                    Self::BodyTooLarge { .. }
                    | Self::BodyUnreadable(_)
                    | Self::BodyTimeout { .. }
                    | Self::MethodNotAllowed { .. }
                    | Self::Rejected(_)
                    | Self::UnsupportedMediaType
                    | Self::InvalidContentLength(_)
                    | Self::MalformedHead(_)
                    | Self::UnsupportedEncoding(_)
                    | Self::RouteNotFound(_) => ("invalid_request_error", None),
                    Self::SearchUnavailable => ("invalid_request_error", Some("commands")),
                    _ => ("server_error", None),
                };
                ErrorBody {
                    error: ErrorObject {
                        message: self.to_string(),
                        kind: kind.to_owned(),
                        param: param.map(str::to_owned),
                        code: Some(self.code().to_owned()),
                    },
                }
            }
        }
    }

    /// The error for a body the `Bytes` extractor could not read: over the limit, past its
    /// read deadline, or broken (a bad compression stream, a closed connection).
    pub fn from_body_rejection(
        rejection: &axum::extract::rejection::BytesRejection,
        limit: usize,
    ) -> Self {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            Self::BodyTooLarge { limit }
        } else if let Some(timeout) = body_timeout(rejection) {
            Self::BodyTimeout {
                secs: timeout.as_secs(),
            }
        } else {
            Self::BodyUnreadable(rejection.body_text())
        }
    }

    /// True for failures another provider might not have: unreachable, timed out, 5xx, 429.
    pub fn allows_fallback(&self) -> bool {
        match self {
            Self::UpstreamUnreachable(_) | Self::UpstreamTimeout | Self::UpstreamBodyCut(_) => true,
            Self::Retried { error, .. } => error.allows_fallback(),
            Self::Upstream(toolbridge_providers::Error::Upstream(e)) => {
                e.status == 429 || e.status >= 500
            }
            _ => false,
        }
    }

    fn retry_after(&self) -> Option<String> {
        match self {
            Self::Retried { error, .. } => error.retry_after(),
            Self::Upstream(toolbridge_providers::Error::Upstream(e)) => e.retry_after.clone(),
            Self::BudgetExhausted {
                retry_after_secs, ..
            }
            | Self::RateLimited {
                retry_after_secs, ..
            } => Some(retry_after_secs.to_string()),
            _ => None,
        }
    }
}

impl IntoResponse for GatewayError {
    fn into_response(self) -> Response {
        let body = serde_json::to_vec(&self.body()).unwrap_or_default();
        let mut response = (self.status(), body).into_response();
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        if let Some(v) = self
            .retry_after()
            .and_then(|v| HeaderValue::from_str(&v).ok())
        {
            headers.insert(header::RETRY_AFTER, v);
        }
        if matches!(self, Self::Retried { .. }) {
            // The OpenAI SDKs honour it: their retries would multiply the gateway's.
            headers.insert("x-should-retry", HeaderValue::from_static("false"));
        }
        if matches!(self, Self::Unauthorized) {
            headers.insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
            .extensions_mut()
            .insert(ErrorCode(self.code().to_owned()));
        response
    }
}

fn allowed_list(allowed: &Option<String>) -> String {
    allowed
        .as_deref()
        .map(|a| format!(" (allowed: {a})"))
        .unwrap_or_default()
}

fn rejected_message(status: u16) -> &'static str {
    match status {
        408 => "the request was not received in time",
        413 => "the request is too large",
        415 => "the request's media type is not supported",
        422 => "the request body could not be processed",
        500.. => "the gateway failed to answer the request",
        _ => "the request is malformed: its path, query string or body could not be read",
    }
}

fn malformed_head_message(status: u16) -> &'static str {
    match status {
        414 => "the request's URI is too long",
        431 => "the request's headers are too large",
        _ => {
            "the request head could not be parsed: its request line or a header (such as Transfer-Encoding) is malformed"
        }
    }
}

/// The error code of a failed request, carried in response extensions: its presence tells the
/// JSON error rewriter that the body is already ours; the code is for whoever logs the answer.
#[derive(Debug, Clone)]
pub(crate) struct ErrorCode(#[allow(dead_code, reason = "read only by loggers")] pub(crate) String);

/// The error a request body yields once its read deadline has passed.
#[derive(Debug, thiserror::Error)]
#[error("the request body did not arrive within {} s", .0.as_secs())]
pub(crate) struct BodyTimedOut(pub Duration);

/// The deadline that a failed body read ran past, when that is why it failed (found among
/// the error's sources).
pub(crate) fn body_timeout(error: &(dyn std::error::Error + 'static)) -> Option<Duration> {
    let mut current = Some(error);
    while let Some(e) = current {
        if let Some(BodyTimedOut(timeout)) = e.downcast_ref::<BodyTimedOut>() {
            return Some(*timeout);
        }
        current = e.source();
    }
    None
}
