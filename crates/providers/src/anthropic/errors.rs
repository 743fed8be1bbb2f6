//! Anthropic error answers → [`UpstreamError`].
//!
//! HTTP mapping: 400 → 400 `upstream_bad_request` (or `context_length_exceeded` when the message
//! says the prompt is too long); 401 → 401 `upstream_unauthorized` and 403 → 403
//! `upstream_forbidden` (the gateway's upstream credential, not the client's key); 404 → 404
//! `upstream_not_found`; 413 → 413 `upstream_request_too_large`; 429 → 429
//! `rate_limit_exceeded` keeping `Retry-After`; 529 (`overloaded_error`) → 503
//! `upstream_overloaded` keeping `Retry-After`, a retryable server condition like a rate limit;
//! 408/504 → 504 `upstream_timeout`; 503 → 503 `upstream_unavailable`; other 5xx keep their status
//! with `upstream_server_error`; anything else → 502 `upstream_error`.
//!
//! Mid-stream `error` events have no HTTP status: they map by Anthropic's error `type` to a code a
//! Responses client acts on ([`from_stream_error`]).

use toolbridge_wire::anthropic::{ErrorDetail, ErrorResponse};

use crate::UpstreamError;
use crate::error::{clip, status_mapping};

/// Maps an HTTP error answer.
pub fn from_http(status: u16, body: &[u8], retry_after: Option<String>) -> UpstreamError {
    let detail = serde_json::from_slice::<ErrorResponse>(body)
        .ok()
        .map(|r| r.error)
        .filter(|e| !e.message.is_empty() || !e.kind.is_empty());
    let upstream_message = match &detail {
        Some(d) if d.kind.is_empty() => clip(d.message.clone()),
        Some(d) => clip(format!("{} ({})", d.message, d.kind)),
        None => clip(String::from_utf8_lossy(body).into_owned()),
    };
    let kind_of = detail.as_ref().map(|d| d.kind.as_str()).unwrap_or_default();
    let mapping = match (status, kind_of) {
        (400, _) if too_long(&upstream_message) => {
            (400, "context_length_exceeded", "invalid_request_error")
        }
        (529, _) | (500..=599, "overloaded_error") => (503, "upstream_overloaded", "server_error"),
        _ => status_mapping(status),
    };
    UpstreamError::http(status, mapping, &upstream_message, retry_after)
}

/// Maps an `error` event sent inside a stream. The code is one a Responses client acts on:
/// `rate_limit_error` and `overloaded_error` → 429 / 503 (retry later), a prompt that is too long
/// → `context_length_exceeded` (do not retry), `invalid_request_error` → 400
/// `upstream_bad_request`, anything else → 502 `server_error` (retry).
pub fn from_stream_error(error: &ErrorDetail) -> UpstreamError {
    let (status, code, kind) = match error.kind.as_str() {
        "rate_limit_error" => (429, "rate_limit_exceeded", "rate_limit_error"),
        "overloaded_error" => (503, "upstream_overloaded", "server_error"),
        "invalid_request_error" if too_long(&error.message) => {
            (400, "context_length_exceeded", "invalid_request_error")
        }
        "invalid_request_error" => (400, "upstream_bad_request", "invalid_request_error"),
        _ => (502, "server_error", "server_error"),
    };
    let message = if error.kind.is_empty() {
        clip(error.message.clone())
    } else {
        clip(format!("{} ({})", error.message, error.kind))
    };
    UpstreamError {
        status,
        code: code.to_owned(),
        kind: kind.to_owned(),
        message: format!("the upstream provider failed mid-stream: {message}"),
        param: None,
        retry_after: None,
    }
}

/// Whether Anthropic's message says the prompt does not fit the context window.
fn too_long(message: &str) -> bool {
    let lower = message.to_ascii_lowercase();
    lower.contains("prompt is too long") || lower.contains("context window")
}
