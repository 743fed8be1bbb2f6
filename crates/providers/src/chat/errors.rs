//! Upstream error answers → [`UpstreamError`]: the status the client gets, a stable code, and
//! the upstream's own message.
//!
//! Mapping: 400 → 400 `upstream_bad_request`; 401 → 401 `upstream_unauthorized` and 403 → 403
//! `upstream_forbidden` (the message says it is the gateway's upstream credential, not the
//! client's key); 404 → 404 `upstream_not_found`; 408/504 → 504 `upstream_timeout`; 413 → 413;
//! 429 → 429 `rate_limit_exceeded` (or the upstream's `insufficient_quota`) keeping `Retry-After`;
//! 500/502/503 and other 5xx keep their status with `upstream_server_error` /
//! `upstream_unavailable`; anything else → 502 `upstream_error`.

use serde_json::Value;

use crate::UpstreamError;
use crate::error::{clip, status_mapping};

/// Maps an HTTP error answer.
pub fn from_http(status: u16, body: &[u8], retry_after: Option<String>) -> UpstreamError {
    let (upstream_message, upstream_code) = describe(body);
    let (client_status, code, kind) = status_mapping(status);
    // A quota error is not a rate limit: clients must not retry it.
    let code = match (status, upstream_code.as_deref()) {
        (429, Some("insufficient_quota")) => "insufficient_quota",
        _ => code,
    };
    UpstreamError::http(
        status,
        (client_status, code, kind),
        &upstream_message,
        retry_after,
    )
}

/// Maps an error object sent inside a stream (or inside a 200 body). The code is one a
/// Responses client acts on: `rate_limit_exceeded` (retry later), `context_length_exceeded`
/// (do not retry), or `server_error` (retry).
pub fn from_stream_error(error: &Value) -> UpstreamError {
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .unwrap_or_else(|| quote(error.to_string().as_bytes()));
    let code = match error.get("code") {
        Some(Value::String(s)) => s.to_ascii_lowercase(),
        Some(Value::Number(n)) => n.to_string(),
        _ => String::new(),
    };
    let kind = error
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_ascii_lowercase();
    let lower = message.to_ascii_lowercase();
    let (status, code, kind) = if code.contains("rate_limit")
        || code == "429"
        || kind.contains("rate_limit")
        || lower.contains("rate limit")
    {
        (429, "rate_limit_exceeded", "rate_limit_error")
    } else if code.contains("context_length")
        || lower.contains("context length")
        || lower.contains("context window")
    {
        (400, "context_length_exceeded", "invalid_request_error")
    } else {
        (502, "server_error", "server_error")
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

/// MiniMax's `base_resp` with a non-zero `status_code`, in a whole answer or a stream chunk.
pub fn base_resp_error(extra: &serde_json::Map<String, Value>) -> Option<UpstreamError> {
    let base = extra.get("base_resp")?;
    let status = base.get("status_code").and_then(Value::as_i64)?;
    if status == 0 {
        return None;
    }
    let message = base
        .get("status_msg")
        .and_then(Value::as_str)
        .unwrap_or("unknown error");
    let (http, code, kind) = match status {
        1002 => (429, "rate_limit_exceeded", "rate_limit_error"),
        1004 => (401, "upstream_unauthorized", "authentication_error"),
        1008 => (429, "insufficient_quota", "insufficient_quota"),
        1039 => (400, "context_length_exceeded", "invalid_request_error"),
        2013 => (400, "upstream_bad_request", "invalid_request_error"),
        _ => (502, "server_error", "server_error"),
    };
    Some(UpstreamError {
        status: http,
        code: code.to_owned(),
        kind: kind.to_owned(),
        message: format!(
            "the upstream provider reported error {status}: {}",
            clip(message.to_owned())
        ),
        param: None,
        retry_after: None,
    })
}

/// The upstream's message and code from the shapes providers use:
/// `{"error":{"message","code"}}`, `{"error":"…"}`, `{"message":…}`, `{"detail":…}`,
/// MiniMax's `{"base_resp":{"status_msg"}}`, or the raw text.
fn describe(body: &[u8]) -> (String, Option<String>) {
    let Ok(value) = serde_json::from_slice::<Value>(body) else {
        return (quote(body), None);
    };
    let code_of = |v: &Value| match v.get("code") {
        Some(Value::String(s)) => Some(s.clone()),
        Some(Value::Number(n)) => Some(n.to_string()),
        _ => None,
    };
    if let Some(err) = value.get("error") {
        if let Some(message) = err.get("message").and_then(Value::as_str) {
            let code = code_of(err);
            let message = match &code {
                Some(c) => format!("{message} (code {c})"),
                None => message.to_owned(),
            };
            return (clip(message), code);
        }
        if let Some(message) = err.as_str() {
            return (clip(message.to_owned()), None);
        }
    }
    for key in ["message", "detail", "msg"] {
        if let Some(message) = value.get(key).and_then(Value::as_str) {
            return (clip(message.to_owned()), code_of(&value));
        }
    }
    if let Some(message) = value
        .get("base_resp")
        .and_then(|b| b.get("status_msg"))
        .and_then(Value::as_str)
    {
        return (clip(message.to_owned()), None);
    }
    (quote(body), None)
}

fn quote(body: &[u8]) -> String {
    clip(String::from_utf8_lossy(body).into_owned())
}

/// An error reported inside an HTTP 200 answer: a top-level `error` object, or MiniMax's
/// `base_resp` with a non-zero `status_code`.
pub fn in_body(response: &toolbridge_wire::chat::ChatResponse) -> Option<UpstreamError> {
    if let Some(error) = response.extra.get("error").filter(|e| !e.is_null()) {
        let mut e = from_stream_error(error);
        e.message = e.message.replace("failed mid-stream", "reported an error");
        return Some(e);
    }
    base_resp_error(&response.extra)
}
