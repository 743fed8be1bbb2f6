//! The providers' error type: what an upstream answered that is not a usable response.

use toolbridge_wire::error::{ErrorBody, ErrorObject};

/// A failure reported by, or decoded from, an upstream.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Error {
    /// The upstream answered with an error (an HTTP error status, or an error inside a 200).
    #[error("{0}")]
    Upstream(Box<UpstreamError>),
    /// The upstream's output could not be decoded.
    #[error("the upstream sent output toolbridge could not decode: {message}")]
    Decode { message: String },
}

impl Error {
    /// The stable code clients see.
    pub fn code(&self) -> &str {
        match self {
            Self::Upstream(e) => &e.code,
            Self::Decode { .. } => "upstream_invalid_response",
        }
    }

    /// The HTTP status to answer with, when it is not too late for one.
    pub fn status(&self) -> u16 {
        match self {
            Self::Upstream(e) => e.status,
            Self::Decode { .. } => 502,
        }
    }

    /// OpenAI's error body.
    pub fn body(&self) -> ErrorBody {
        match self {
            Self::Upstream(e) => e.body(),
            Self::Decode { .. } => ErrorBody {
                error: ErrorObject {
                    message: self.to_string(),
                    kind: "server_error".to_owned(),
                    param: None,
                    code: Some(self.code().to_owned()),
                },
            },
        }
    }
}

/// An error an upstream reported, mapped to what the client sees.
#[derive(Debug, Clone, PartialEq)]
pub struct UpstreamError {
    /// The HTTP status for the client.
    pub status: u16,
    /// toolbridge's stable code.
    pub code: String,
    /// OpenAI's error `type`.
    pub kind: String,
    /// The message, naming the upstream's own words.
    pub message: String,
    pub param: Option<String>,
    /// `Retry-After`, kept from the upstream's answer.
    pub retry_after: Option<String>,
}

impl std::fmt::Display for UpstreamError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl UpstreamError {
    pub fn body(&self) -> ErrorBody {
        ErrorBody {
            error: ErrorObject {
                message: self.message.clone(),
                kind: self.kind.clone(),
                param: self.param.clone(),
                code: Some(self.code.clone()),
            },
        }
    }
}

/// The most of an upstream body quoted in a message.
pub(crate) const MAX_QUOTE: usize = 600;

/// `s` cut to [`MAX_QUOTE`] bytes on a character boundary, marked with `…` when cut.
pub(crate) fn clip(mut s: String) -> String {
    if s.len() > MAX_QUOTE {
        let mut end = MAX_QUOTE;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
        s.push('…');
    }
    s
}

/// What the client sees for an upstream HTTP error status, the same for every dialect:
/// `(status, code, type)`. Dialects map their own special cases (a context overflow, an
/// overload) first and fall back to this.
pub(crate) fn status_mapping(status: u16) -> (u16, &'static str, &'static str) {
    match status {
        400 | 422 => (400, "upstream_bad_request", "invalid_request_error"),
        401 => (401, "upstream_unauthorized", "authentication_error"),
        403 => (403, "upstream_forbidden", "permission_error"),
        404 => (404, "upstream_not_found", "not_found_error"),
        408 | 504 => (504, "upstream_timeout", "server_error"),
        413 => (413, "upstream_request_too_large", "invalid_request_error"),
        429 => (429, "rate_limit_exceeded", "rate_limit_error"),
        503 => (503, "upstream_unavailable", "server_error"),
        500..=599 => (status, "upstream_server_error", "server_error"),
        _ => (502, "upstream_error", "server_error"),
    }
}

impl UpstreamError {
    /// The error for an upstream HTTP error answer of `status`, mapped to `(client status, code,
    /// type)`, quoting the upstream's `detail` (already clipped).
    pub(crate) fn http(
        status: u16,
        (client_status, code, kind): (u16, &str, &str),
        detail: &str,
        retry_after: Option<String>,
    ) -> Self {
        let what = match status {
            401 | 403 => "the upstream provider rejected the gateway's credentials",
            _ => "the upstream provider answered",
        };
        Self {
            status: client_status,
            code: code.to_owned(),
            kind: kind.to_owned(),
            message: format!("{what} with HTTP {status}: {detail}"),
            param: None,
            retry_after,
        }
    }
}
