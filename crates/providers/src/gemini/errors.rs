//! Gemini error answers → [`UpstreamError`], as [`crate::chat::errors`] does for Chat.
//!
//! Gemini's body is `{"error":{"code","message","status"}}` with a canonical `status`. Mapping:
//! 400 `INVALID_ARGUMENT`/`FAILED_PRECONDITION` → 400 `upstream_bad_request`, or
//! `context_length_exceeded` when the message says the input has too many tokens; 401 → 401
//! `upstream_unauthorized`; 403 `PERMISSION_DENIED` → 403 `upstream_forbidden`; 404 → 404
//! `upstream_not_found`; 429 `RESOURCE_EXHAUSTED` → 429 `rate_limit_exceeded`, keeping
//! `Retry-After` or else the `RetryInfo.retryDelay` Gemini puts in `details`; 500 `INTERNAL` → 500
//! `upstream_server_error`; 503 `UNAVAILABLE` → 503 `upstream_unavailable`; 504
//! `DEADLINE_EXCEEDED` → 504 `upstream_timeout`; other statuses as the Chat mapping does.

use serde_json::Value;
use toolbridge_wire::gemini::{ErrorBody, ErrorDetail};

use crate::UpstreamError;
use crate::error::{clip, status_mapping};

/// Maps an HTTP error answer.
pub fn from_http(status: u16, body: &[u8], retry_after: Option<String>) -> UpstreamError {
    let Ok(parsed) = serde_json::from_slice::<ErrorBody>(body) else {
        return crate::chat::errors::from_http(status, body, retry_after);
    };
    let detail = parsed.error;
    let canonical = detail.status.clone().unwrap_or_default();
    let mapping = match status {
        400 if too_long(&detail.message) => {
            (400, "context_length_exceeded", "invalid_request_error")
        }
        _ => status_mapping(status),
    };
    let quoted = if canonical.is_empty() {
        clip(detail.message.clone())
    } else {
        clip(format!("{} ({canonical})", detail.message))
    };
    let retry_after = retry_after.or_else(|| retry_delay(&detail));
    UpstreamError::http(status, mapping, &quoted, retry_after)
}

/// Maps an `error` object sent inside a stream or a 200 body.
pub fn from_stream_error(error: &Value) -> UpstreamError {
    let detail: ErrorDetail = serde_json::from_value(error.clone()).unwrap_or_default();
    let status = detail.status.as_deref().unwrap_or_default();
    let message = if detail.message.is_empty() {
        clip(error.to_string())
    } else {
        clip(detail.message.clone())
    };
    let (http, code, kind) = if status == "RESOURCE_EXHAUSTED" || detail.code == Some(429) {
        (429, "rate_limit_exceeded", "rate_limit_error")
    } else if too_long(&message) {
        (400, "context_length_exceeded", "invalid_request_error")
    } else {
        (502, "server_error", "server_error")
    };
    UpstreamError {
        status: http,
        code: code.to_owned(),
        kind: kind.to_owned(),
        message: format!("the upstream provider failed mid-stream: {message}"),
        param: None,
        retry_after: retry_delay(&detail),
    }
}

/// Whether a 400 message says the input does not fit the model.
fn too_long(message: &str) -> bool {
    let lower = message.to_ascii_lowercase();
    lower.contains("exceeds the maximum number of tokens") || lower.contains("context window")
}

/// Seconds from `details[].retryDelay` (`"31s"`), Google's RetryInfo.
fn retry_delay(detail: &ErrorDetail) -> Option<String> {
    let details = detail.extra.get("details")?.as_array()?;
    details.iter().find_map(|d| {
        let delay = d.get("retryDelay")?.as_str()?;
        let seconds: f64 = delay.strip_suffix('s')?.parse().ok()?;
        Some(format!("{}", seconds.ceil()))
    })
}
