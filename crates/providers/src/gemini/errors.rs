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

/// Maps an HTTP error answer.
pub fn from_http(status: u16, body: &[u8], retry_after: Option<String>) -> UpstreamError {
    let Ok(parsed) = serde_json::from_slice::<ErrorBody>(body) else {
        return crate::chat::errors::from_http(status, body, retry_after);
    };
    let detail = parsed.error;
    let canonical = detail.status.clone().unwrap_or_default();
    let (client_status, code, kind) = match (status, canonical.as_str()) {
        (400, _) if too_long(&detail.message) => {
            (400, "context_length_exceeded", "invalid_request_error")
        }
        (400 | 422, _) => (400, "upstream_bad_request", "invalid_request_error"),
        (401, _) => (401, "upstream_unauthorized", "authentication_error"),
        (403, _) => (403, "upstream_forbidden", "permission_error"),
        (404, _) => (404, "upstream_not_found", "not_found_error"),
        (408 | 504, _) => (504, "upstream_timeout", "server_error"),
        (429, _) => (429, "rate_limit_exceeded", "rate_limit_error"),
        (503, _) => (503, "upstream_unavailable", "server_error"),
        (500..=599, _) => (status, "upstream_server_error", "server_error"),
        _ => (502, "upstream_error", "server_error"),
    };
    let what = match status {
        401 | 403 => "the upstream provider rejected the gateway's credentials",
        _ => "the upstream provider answered",
    };
    let label = if canonical.is_empty() {
        String::new()
    } else {
        format!(" ({canonical})")
    };
    UpstreamError {
        status: client_status,
        code: code.to_owned(),
        kind: kind.to_owned(),
        message: format!(
            "{what} with HTTP {status}{label}: {}",
            clip(&detail.message)
        ),
        param: None,
        retry_after: retry_after.or_else(|| retry_delay(&detail)),
    }
}

/// Maps an `error` object sent inside a stream or a 200 body.
pub fn from_stream_error(error: &Value) -> UpstreamError {
    let detail: ErrorDetail = serde_json::from_value(error.clone()).unwrap_or_default();
    let status = detail.status.as_deref().unwrap_or_default();
    let message = if detail.message.is_empty() {
        clip(&error.to_string())
    } else {
        clip(&detail.message)
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

/// The most of an upstream message quoted.
const MAX_QUOTE: usize = 600;

fn clip(s: &str) -> String {
    if s.len() <= MAX_QUOTE {
        return s.to_owned();
    }
    let mut end = MAX_QUOTE;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}
