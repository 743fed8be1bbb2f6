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
